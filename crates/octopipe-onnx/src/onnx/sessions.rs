//! A model's [`Sessions`]: one per padded batch size on CUDA, or a set of fixed sizes bound to
//! device buffers ([`Sessions::fix_sizes`]).

use std::path::Path;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::Session;
use ort::value::{Shape, TensorRefMut};

use super::error::{FixedStep, OnnxError};
use super::fixed::{self, FixedInput, FixedOutput};
use super::session::{cuda_session, session, Cuda, CudaOptions, Ep};
use super::worker::{Gone, Worker};

/// The sessions of one model. On the CPU execution provider one session runs every batch size as
/// it comes. On CUDA's, a run whose batch size differs from the session's previous run makes
/// every convolution plan anew (measured: ~240 ms a run for the 64x64 classifier on an H100,
/// against 0.3-1.1 ms at a fixed size), so batches are padded to a power of two (at least
/// [`Sessions::MIN_ROWS`]) and each padded size has its own session, made on first use; all of
/// them queue their work on one CUDA stream of the sessions' own.
pub struct Sessions {
    model: std::path::PathBuf,
    threads: usize,
    options: CudaOptions,
    /// With fixed batch sizes on CUDA ([`Sessions::fix_sizes`]): each size's rows, outputs and
    /// host buffers, smallest first.
    fixed: Vec<fixed::Held>,
    /// Where their bound sessions are and run. Declared before `cuda`, as `sessions` is (a
    /// thread of their own is joined when it drops, its sessions dropped there).
    place: Option<Place>,
    /// `(rows, session)`; the first is the one [`Sessions::open`] made (rows 0: not used yet).
    /// Declared before `cuda`: the sessions are dropped before the stream they queue work on.
    sessions: Vec<(usize, Session)>,
    /// The device and stream, when the sessions run on CUDA's execution provider.
    cuda: Option<Cuda>,
}

impl Sessions {
    /// The smallest padded batch on CUDA.
    pub const MIN_ROWS: usize = 8;

    /// Open the model at `model` with `threads` intra-op threads (0: ONNX Runtime's default) on
    /// `ep`. `Ep::Auto` takes CUDA's when the ONNX Runtime build has it and a GPU is present,
    /// else the CPU's, saying why in one log line.
    pub fn open(model: &Path, threads: usize, ep: Ep) -> Result<Self, OnnxError> {
        Self::open_with(model, threads, ep, CudaOptions::default())
    }

    /// [`Sessions::open`] with `options` for CUDA's execution provider (ignored on the CPU's).
    pub fn open_with(
        model: &Path,
        threads: usize,
        ep: Ep,
        options: CudaOptions,
    ) -> Result<Self, OnnxError> {
        let cpu = |why: &dyn std::fmt::Display| -> Result<Self, OnnxError> {
            if matches!(ep, Ep::Auto(_)) {
                tracing::info!("{}: ONNX Runtime on the CPU ({why})", model.display());
            }
            Ok(Sessions {
                model: model.to_path_buf(),
                threads,
                options,
                fixed: Vec::new(),
                place: None,
                cuda: None,
                sessions: vec![(0, session(model, threads)?)],
            })
        };
        let device = match ep {
            Ep::Cpu => return cpu(&"ep=cpu"),
            Ep::Cuda(d) | Ep::Auto(d) => d,
        };
        let cuda_err = |e: &dyn std::fmt::Display| OnnxError::Model {
            path: model.display().to_string(),
            reason: format!("CUDA execution provider: cuda:{device}: {e}"),
        };
        // The driver must be there before cudarc is touched (without it cudarc panics).
        match (octopipe_cuda::available(), ep) {
            (Ok(()), _) => {}
            (Err(why), Ep::Auto(_)) => return cpu(&why),
            (Err(why), _) => return Err(cuda_err(&why)),
        }
        let made = CudaContext::new(device.max(0) as usize)
            .map_err(octopipe_cuda::CudaError::from)
            .and_then(|ctx| Ok((octopipe_cuda::new_stream(&ctx, options.priority)?, ctx)))
            .map_err(|e| cuda_err(&e));
        let cuda = match made {
            Ok((stream, ctx)) => Cuda {
                device,
                ctx,
                stream,
            },
            Err(e) if matches!(ep, Ep::Auto(_)) => return cpu(&e),
            Err(e) => return Err(e),
        };
        // The first session is for reading the model's inputs and outputs and for runs that
        // are not bound: never a CUDA graph.
        let first = CudaOptions {
            graph: false,
            ..options
        };
        match cuda_session(model, threads, &cuda, first) {
            Ok(s) => Ok(Sessions {
                model: model.to_path_buf(),
                threads,
                options,
                fixed: Vec::new(),
                place: None,
                cuda: Some(cuda),
                sessions: vec![(0, s)],
            }),
            Err(OnnxError::Model { reason, .. }) if matches!(ep, Ep::Auto(_)) => cpu(&reason),
            Err(e) => Err(e),
        }
    }

    /// The first session (for the model's inputs and outputs).
    pub fn first(&self) -> &Session {
        &self.sessions[0].1
    }

    /// Wait for everything queued on the sessions' CUDA stream (a no-op on the CPU).
    pub fn synchronize(&self) -> Result<(), OnnxError> {
        let Some(c) = &self.cuda else { return Ok(()) };
        c.stream.synchronize().map_err(|e| OnnxError::Model {
            path: self.model.display().to_string(),
            reason: format!("CUDA execution provider: cuda:{}: {e:?}", c.device),
        })
    }

    /// The sessions' CUDA stream (`None` on the CPU), to time their work with events
    /// ([`mark`]).
    pub fn stream(&self) -> Option<Arc<CudaStream>> {
        self.cuda.as_ref().map(|c| c.stream.clone())
    }

    /// The raw CUDA stream the sessions queue their work on (0 on the CPU).
    pub fn cu_stream(&self) -> u64 {
        self.cuda
            .as_ref()
            .map_or(0, |c| c.stream.cu_stream() as u64)
    }

    /// The CUDA device the sessions run on, if they run on CUDA's execution provider.
    pub fn cuda(&self) -> Option<i32> {
        self.cuda.as_ref().map(|c| c.device)
    }

    /// Order the next runs after everything queued so far on `producer` (a raw `CUstream` of the
    /// sessions' device that wrote their input; 0: nothing pending): the sessions' stream waits on
    /// an event, the host does not. A no-op on the CPU.
    pub fn after(&self, producer: u64) -> Result<(), OnnxError> {
        let Some(c) = &self.cuda else { return Ok(()) };
        octopipe_cuda::order_after(&c.ctx, &c.stream, producer).map_err(|e| OnnxError::Model {
            path: self.model.display().to_string(),
            reason: format!("ordering after the input's CUDA stream: {e}"),
        })
    }

    /// `len` f32 zeros in the memory of the sessions' GPU (`None` on the CPU): for warming up the
    /// path that reads inputs where they are.
    pub fn device_zeros(&self, len: usize) -> Result<Option<DeviceZeros>, OnnxError> {
        let Some(c) = &self.cuda else { return Ok(None) };
        let err = |e: cudarc::driver::DriverError| OnnxError::Model {
            path: self.model.display().to_string(),
            reason: format!("CUDA execution provider: cuda:{}: {e:?}", c.device),
        };
        let buf = c.stream.alloc_zeros::<f32>(len.max(1)).map_err(err)?;
        c.stream.synchronize().map_err(err)?;
        let ptr = cudarc::driver::DevicePtr::device_ptr(&buf, &c.stream).0;
        Ok(Some(DeviceZeros {
            ptr,
            device: c.device.max(0) as usize,
            _buf: buf,
        }))
    }

    /// The batch size to run `rows` rows at, when the input has room for `room` rows: `rows` on
    /// the CPU; on CUDA the next power of two (at least [`Self::MIN_ROWS`]) when it fits.
    pub fn padded(&self, rows: usize, room: usize) -> usize {
        let padded = rows.next_power_of_two().max(Self::MIN_ROWS);
        if self.cuda.is_some() && padded <= room {
            padded
        } else {
            rows
        }
    }

    /// The session that runs batches of `rows` rows (made now if it is the first run of that
    /// size on CUDA).
    pub fn get(&mut self, rows: usize) -> Result<&mut Session, OnnxError> {
        let Some(cuda) = &self.cuda else {
            return Ok(&mut self.sessions[0].1);
        };
        let i = match self.sessions.iter().position(|(r, _)| *r == rows) {
            Some(i) => i,
            None if self.sessions[0].0 == 0 => {
                self.sessions[0].0 = rows;
                0
            }
            None => {
                let options = CudaOptions {
                    graph: false,
                    ..self.options
                };
                let session = cuda_session(&self.model, self.threads, cuda, options)?;
                self.sessions.push((rows, session));
                self.sessions.len() - 1
            }
        };
        Ok(&mut self.sessions[i].1)
    }
}

/// Where the fixed sizes' bound sessions are and run.
enum Place {
    /// On the caller's thread.
    Here(fixed::Sizes),
    /// On a thread of their own, which owns them (CUDA graphs).
    Thread(Worker<fixed::Sizes>),
}

impl Place {
    /// Run `job` with the sizes, where they are, and wait for it.
    fn with<R: Send + 'static>(
        &mut self,
        job: impl FnOnce(&mut fixed::Sizes) -> R + Send + 'static,
    ) -> Result<R, Gone> {
        match self {
            Place::Here(sizes) => Ok(job(sizes)),
            Place::Thread(worker) => worker.run(job),
        }
    }
}

impl Sessions {
    /// On CUDA, run the model only at the batch sizes `sizes` from now on: one session per size
    /// with input `input` and `outputs` bound to device buffers of its own (brought back to the
    /// host after each run with `download`), each run `warm` times now, so that no run later
    /// plans a shape. With [`CudaOptions::graph`] the sizes' sessions live on a thread of their
    /// own that makes, warms and runs them all: each size's CUDA graph is captured here (at its
    /// second warm run; call this while no other thread of the process uses the GPU, as a
    /// capture fails otherwise, and with it their CUDA calls) and only replayed by later runs. A
    /// size whose capture fails is made anew without a graph, with a warning. A no-op on the
    /// CPU, where any batch size runs as it comes.
    pub fn fix_sizes(
        &mut self,
        sizes: &[usize],
        input: &str,
        outputs: &[&str],
        download: bool,
        warm: usize,
    ) -> Result<(), OnnxError> {
        let Some(cuda) = &self.cuda else {
            return Ok(());
        };
        let path = self.model.display().to_string();
        let err = |reason: String| OnnxError::Model {
            path: path.clone(),
            reason,
        };
        // The sizes fixed before go first (on their thread, if they have one).
        self.place = None;
        self.fixed.clear();
        let mut sizes = sizes.to_vec();
        sizes.sort_unstable();
        sizes.dedup();
        let state = fixed::Sizes::new(cuda.clone());
        let mut place = if self.options.graph {
            let name = format!(
                "onnx-{}",
                self.model.file_stem().unwrap_or_default().to_string_lossy()
            );
            // Linux keeps 15 bytes of a thread's name.
            let name: String = name.chars().take(15).collect();
            Place::Thread(
                Worker::spawn(name, move || state)
                    .map_err(|e| err(format!("a thread for the CUDA graphs: {e}")))?,
            )
        } else {
            Place::Here(state)
        };
        let spec = std::sync::Arc::new(fixed::Spec {
            model: self.model.clone(),
            threads: self.threads,
            options: self.options,
            input: input.to_string(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            download,
            warm,
        });
        let mut fixed = Vec::with_capacity(sizes.len());
        for rows in sizes.into_iter().filter(|&r| r > 0) {
            let spec = spec.clone();
            let outs = place
                .with(move |s| s.open(&spec, rows))
                .map_err(|g| err(format!("batch {rows}: the sessions' thread: {g}")))??;
            let host = outs.iter().map(|o| vec![0.0; o.len]).collect();
            fixed.push(fixed::Held { rows, outs, host });
        }
        self.fixed = fixed;
        self.place = Some(place);
        Ok(())
    }

    /// The fixed batch sizes ([`Sessions::fix_sizes`]), smallest first; empty when any size runs.
    pub(crate) fn fixed_sizes(&self) -> Vec<usize> {
        self.fixed.iter().map(|h| h.rows).collect()
    }

    /// Run `n` rows at the smallest fixed size that holds them (the rows past `n` are padding,
    /// their outputs to be ignored) and give the outputs (in host memory when bound with
    /// `download`; on the device, written on [`Sessions::cu_stream`], otherwise). With
    /// [`CudaOptions::graph`] the run happens on the sessions' own thread, this call waiting
    /// for it.
    pub fn run_fixed(
        &mut self,
        n: usize,
        input: FixedInput<'_>,
    ) -> Result<Vec<FixedOutput<'_>>, OnnxError> {
        let path = self.model.display().to_string();
        let err = |reason: String| OnnxError::Model {
            path: path.clone(),
            reason,
        };
        let (Some(place), Some(largest)) = (&mut self.place, self.fixed.last().map(|h| h.rows))
        else {
            return Err(err("no fixed batch sizes on CUDA".into()));
        };
        let i = self
            .fixed
            .iter()
            .position(|h| h.rows >= n)
            .ok_or_else(|| err(format!("{n} rows: the largest fixed batch is {largest}")))?;
        let held = &mut self.fixed[i];
        let rows = held.rows;
        let sent = fixed::Sent::new(input);
        // The host buffers go to the run and come back with it (no copy of the outputs).
        let mut host = std::mem::take(&mut held.host);
        let ran = place.with(move |sizes| {
            // SAFETY: `input`'s host values are borrowed for this whole call, which returns
            // only once this job has run (`Place::with`: in place, or waiting for the
            // sessions' thread to run it, or to drop it unrun, and then to end).
            let input = unsafe { sent.input() };
            let result = sizes.run(i, n, input, &mut host);
            (result, host)
        });
        let (result, host) =
            ran.map_err(|g| err(format!("batch {rows}: the sessions' thread: {g}")))?;
        held.host = host;
        result.map_err(|source| OnnxError::Fixed {
            path: path.clone(),
            rows,
            step: FixedStep::Run,
            source,
        })?;
        Ok(held
            .outs
            .iter()
            .zip(&held.host)
            .map(|(o, h)| FixedOutput {
                shape: &o.shape,
                data: h,
                device: o.device,
                f16: o.f16,
            })
            .collect())
    }
}

/// Zeros in device memory ([`Sessions::device_zeros`]).
#[non_exhaustive]
pub struct DeviceZeros {
    /// Device address of the first element.
    pub ptr: u64,
    /// CUDA device ordinal.
    pub device: usize,
    _buf: cudarc::driver::CudaSlice<f32>,
}

/// An f32 tensor of `shape` at `ptr` in the memory of CUDA device `device`, as a model's input
/// read where it is (no copy to the host and back).
///
/// # Safety
/// `ptr` must hold `shape`'s elements on `device` for as long as the value is used.
pub unsafe fn cuda_input<'a>(
    ptr: u64,
    device: usize,
    shape: &[usize],
) -> ort::Result<TensorRefMut<'a, f32>> {
    let info = MemoryInfo::new(
        AllocationDevice::CUDA,
        device as i32,
        AllocatorType::Device,
        MemoryType::Default,
    )?;
    // SAFETY: forwarded to the caller.
    unsafe {
        TensorRefMut::from_raw(
            info,
            ptr as usize as *mut std::ffi::c_void,
            Shape::new(shape.iter().map(|&d| d as i64)),
        )
    }
}

/// An event with timing recorded now on `stream`: it completes when the work queued before it
/// has run (`None` where CUDA refuses one: a mark is a measurement, never a run's error).
pub fn mark(stream: &CudaStream) -> Option<cudarc::driver::CudaEvent> {
    let flags = cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
    stream.record_event(Some(flags)).ok()
}
