//! [`CudaBackend`]: the preprocess [`Backend`] on the GPU, one batch at a time ([`Backend::run`]) or
//! two in flight on two engines ([`CudaBackend::submit`] / [`CudaBackend::flush`]).

use cudarc::driver::PinnedHostSlice;
use octopipe_cuda::grow_pinned;

use super::launch::octopus_threads;
use super::meta::Norm;
use super::output::OutType;
use super::upload::{HostFrame, UploadMode};
use super::CudaError;
use super::Engine;
use crate::preprocess::{validate, Backend, DType, Gather, PreprocessConfig, PreprocessError};
use octopipe_core::crops::CropBatch;
use octopipe_core::frame::{Frame, Planes};
use octopipe_core::tensor::TensorData;

/// The CUDA preprocess backend: strategy C (the bilinear fast path of `octopus.cu`, or
/// `resample.cu` for `interpolation=area` and letterbox), frames uploaded once per batch, the
/// output copied back into `batch.tensor` (or `batch.tensor_f16` for [`DType::F16`]), straight
/// or through a reused pinned buffer ([`Self::pinned_output`]). No allocation per batch in steady
/// state: the frame list, the engine's scratch and device buffers and the pinned output all grow
/// and are reused.
///
/// Two ways to drive it:
/// - [`Backend::run`]: one batch in, its tensor out; everything on one stream, nothing overlaps
///   across batches (the next batch is not known until `run` returns).
/// - [`Self::submit`] / [`Self::flush`]: two batches in flight on two engines (two CUDA streams,
///   their own device and pinned buffers). `submit(k + 1)` queues batch k + 1's upload, kernel and
///   copy back, then waits for batch k and returns it with its tensor filled, so batch k + 1's
///   transfers and kernel run while the host finishes batch k and the caller works on it.
pub struct CudaBackend {
    config: PreprocessConfig,
    engine: Engine,
    /// The second engine of [`Self::submit`], opened on first use.
    engine2: Option<Engine>,
    host: [Option<PinnedHostSlice<u8>>; 2],
    /// Empty between batches: only its buffer is kept.
    frames: Vec<HostFrame<'static>>,
    /// The batch queued by the last [`Self::submit`], the engine it runs on, and whether its
    /// output goes through the pinned buffer ([`Self::pinned_output`] when it was submitted).
    in_flight: Option<(CropBatch, usize, bool)>,
    next_slot: usize,
    /// Copy the output back through a reused pinned buffer, then into the batch's vector. Off by
    /// default: the extra host copy out of the pinned buffer costs more than pinning saves (see
    /// docs/gpu-notes.md); it pays only once the consumer reads the pinned buffer itself.
    pub pinned_output: bool,
    /// Batches run with frames in host memory, and those whose crop rectangles the GPU pulled
    /// from page-locked frames.
    batches: u64,
    gathered: u64,
}

impl CudaBackend {
    /// Open GPU 0 and compile the kernels. Errors (with the reason) when there is no libcuda, no
    /// GPU, or a kernel does not compile: the caller falls back to the CPU backend.
    pub fn new(config: PreprocessConfig) -> Result<CudaBackend, PreprocessError> {
        let engine = Engine::with_priority(config.device, config.priority)?;
        Ok(CudaBackend {
            config,
            engine,
            engine2: None,
            host: [None, None],
            frames: Vec::new(),
            in_flight: None,
            next_slot: 0,
            pinned_output: false,
            batches: 0,
            gathered: 0,
        })
    }

    /// The engine (device buffers, stream, device output).
    pub fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Pipelined preprocessing: queue `batch` (upload and kernel, and with [`Self::pinned_output`]
    /// the copy back into a pinned buffer, asynchronous on one of two engines), then complete the
    /// batch submitted before it (copy its output into its `tensor` / `tensor_f16`, straight from
    /// the device by default, while the new batch's kernel runs) and return that one; `None`
    /// on the first call. Batches come back in submission order, one call late: call
    /// [`Self::flush`] at the end (and before dropping the backend) for the last one. On an error
    /// the batch being queued is dropped; the one in flight stays in flight.
    pub fn submit(&mut self, mut batch: CropBatch) -> Result<Option<CropBatch>, PreprocessError> {
        let slot = self.next_slot;
        if slot == 1 && self.engine2.is_none() {
            self.engine2 = Some(Engine::with_priority(
                self.config.device,
                self.config.priority,
            )?);
        }
        self.prepare_tensor(&mut batch)?;
        let len = batch.tensor_len(3);
        if !batch.crops.is_empty() && !batch.blocks.is_empty() {
            let f16 = self.config.dtype == DType::F16;
            let e = if slot == 0 {
                &mut self.engine
            } else {
                self.engine2.as_mut().expect("opened above")
            };
            enqueue(e, &self.config, &mut self.frames, &batch)?;
            // With pinned output the copy back is queued now; else `complete` copies straight
            // into the batch's vector (pageable: the driver copies while the host waits).
            if self.pinned_output {
                let (ty, bytes) = out_bytes(f16, len);
                grow_pinned(e.gpu.context(), &mut self.host[slot], bytes)?;
                // SAFETY: the buffer is read in `complete` after a stream synchronize, and only
                // regrown (dropped) by a later submit on this slot, after that.
                unsafe { e.download_pinned(ty, self.host[slot].as_mut().expect("grown"), bytes) }?;
            }
        }
        self.next_slot ^= 1;
        match self.in_flight.replace((batch, slot, self.pinned_output)) {
            Some((done, s, pinned)) => self.complete(done, s, pinned).map(Some),
            None => Ok(None),
        }
    }

    /// Complete and return the batch still in flight, if any (see [`Self::submit`]).
    pub fn flush(&mut self) -> Result<Option<CropBatch>, PreprocessError> {
        match self.in_flight.take() {
            Some((done, s, pinned)) => self.complete(done, s, pinned).map(Some),
            None => Ok(None),
        }
    }

    fn complete(
        &mut self,
        mut batch: CropBatch,
        slot: usize,
        pinned: bool,
    ) -> Result<CropBatch, PreprocessError> {
        if batch.crops.is_empty() || batch.blocks.is_empty() {
            return Ok(batch);
        }
        let e = if slot == 0 {
            &mut self.engine
        } else {
            self.engine2.as_mut().expect("opened by submit")
        };
        let (ty, bytes) = out_bytes(self.config.dtype == DType::F16, batch.tensor_len(3));
        let dst = batch
            .tensor
            .host_mut(self.config.dtype, batch.tensor_len(3));
        if !pinned {
            e.download(ty, dst.bytes_mut())?;
            return Ok(batch);
        }
        e.gpu.stream().synchronize().map_err(CudaError::from)?;
        let host = self.host[slot].as_ref().expect("grown by submit");
        dst.bytes_mut()
            .copy_from_slice(&host.as_slice().map_err(CudaError::from)?[..bytes]);
        Ok(batch)
    }

    /// Size the output vector of `batch` and check the batch.
    fn prepare_tensor(&self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        // A tensor that goes out in device memory needs no host buffer: filling one with zeros
        // cost a detector's call of 64 tiles of 512x512 (200 MB) tens of milliseconds.
        let len = if self.config.device_output {
            0
        } else {
            batch.tensor_len(3)
        };
        batch.tensor.host_mut(self.config.dtype, len);
        batch.tensor.layout = self.config.layout;
        batch.tensor.shape = batch.tensor_shape(self.config.layout);
        // The kernels read 8-bit samples: a 16-bit grey frame goes to the CPU backend.
        if let Some(f) = batch
            .frames
            .iter()
            .find(|f| f.layout.format == octopipe_core::frame::PixelFormat::Gray16)
        {
            return Err(PreprocessError::Format {
                stream: f.stream,
                seq: f.seq,
                format: f.layout.format,
            });
        }
        validate(batch)
    }
}

/// Queue on `e` the upload of `batch`'s frames (whole, rows or crop rectangles, see
/// [`UploadMode::Auto`]) and metadata, and the kernel writing its tensor into the engine's device
/// output. `store` is an empty vector whose buffer is reused for the frame list. Returns whether
/// the GPU pulled the crop rectangles from page-locked frames.
fn enqueue(
    e: &mut Engine,
    config: &PreprocessConfig,
    store: &mut Vec<HostFrame<'static>>,
    batch: &CropBatch,
) -> Result<bool, CudaError> {
    // The frame list borrows the batch; its (empty) vector is kept between batches: collecting
    // an empty vector into one of a same-layout type reuses its buffer, so steady state does
    // not allocate.
    for f in &batch.frames {
        if let Some(Planes::Device(d)) = f.planes.as_deref() {
            if d.device() != e.gpu.context().ordinal() {
                return Err(CudaError::Invalid(format!(
                    "frame {} of stream {} is on cuda:{}, this backend runs on cuda:{}",
                    f.seq,
                    f.stream,
                    d.device(),
                    e.gpu.context().ordinal()
                )));
            }
            e.after_stream(d.stream())?;
        }
    }
    // Page-locked frames: the GPU pulls the crop rectangles itself (`gather=auto|device`).
    let locked = batch.frames.iter().all(Frame::is_page_locked);
    let on_gpu = match config.gather {
        Gather::Host => false,
        Gather::Auto => locked,
        Gather::Device => true,
    };
    // SAFETY: with `on_gpu`, every frame is page-locked (checked by the upload: an error naming
    // the frame otherwise) and the batch holding it outlives the gather: `run` waits for the
    // stream before returning (the download, or a synchronize with `memory=device`), `submit`
    // keeps the batch until `complete` has waited for it.
    unsafe { e.set_device_gather(on_gpu) };
    let mode = if config.gather == Gather::Device {
        UploadMode::Rects
    } else {
        UploadMode::Auto
    };
    let frames: Vec<HostFrame<'static>> = std::mem::take(store);
    let mut local: Vec<HostFrame<'_>> = frames.into_iter().map(|_| unreachable!()).collect();
    local.extend(batch.frames.iter().map(HostFrame::of));
    let uploaded = e.upload_frames(&local, &batch.crops, mode);
    local.clear();
    *store = local.into_iter().map(|_| unreachable!()).collect();
    let stats = uploaded?;
    e.upload_meta(&batch.crops, &batch.blocks)?;
    let len = batch.tensor_len(3);
    let per_block = batch
        .blocks
        .iter()
        .map(|b| b.tile_end - b.tile_begin)
        .max()
        .unwrap_or(1);
    let threads = octopus_threads(batch.tile_pixels, per_block);
    let ty = if config.dtype == DType::F16 {
        OutType::F16
    } else {
        OutType::F32
    };
    let norm = Norm::from_config(config);
    if config.is_plain_bilinear() {
        e.launch(
            ty,
            norm,
            &batch.crops,
            batch.blocks.len(),
            batch.tile_pixels,
            threads,
            len,
        )?;
    } else {
        e.launch_resample(
            config.interpolation,
            config.letterbox,
            ty,
            norm,
            &batch.crops,
            batch.blocks.len(),
            batch.tile_pixels,
            threads,
            len,
        )?;
    }
    Ok(stats.device_rects > 0)
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn summary(&self) -> Option<String> {
        (self.batches > 0).then(|| {
            format!(
                "preprocess on cuda:{}: {} of {} batches of host frames had their crop rectangles \
                 pulled by the GPU from page-locked frames",
                self.config.device, self.gathered, self.batches
            )
        })
    }

    fn run(&mut self, batch: &mut CropBatch) -> Result<(), PreprocessError> {
        self.prepare_tensor(batch)?;
        if batch.crops.is_empty() || batch.blocks.is_empty() {
            return Ok(());
        }
        let len = batch.tensor_len(3);
        let f16 = self.config.dtype == DType::F16;
        let e = &mut self.engine;
        let result = (|| -> Result<(), CudaError> {
            if self.config.device_output {
                // Room for the batch padded to the next power of two crops: an inference stage
                // on the GPU runs fixed batch sizes (a new input shape costs ONNX Runtime's CUDA
                // convolutions a new plan) and reads the padding rows in place.
                let n = batch.crops.len();
                let ty = if f16 { OutType::F16 } else { OutType::F32 };
                e.reserve_output(ty, len / n * n.next_power_of_two().max(8))?;
            }
            let gathered = enqueue(e, &self.config, &mut self.frames, batch)?;
            if batch.frames.iter().any(|f| f.data().is_some()) {
                self.batches += 1;
                self.gathered += u64::from(gathered);
            }
            if self.config.device_output {
                let ty = if f16 { OutType::F16 } else { OutType::F32 };
                batch.tensor.data = TensorData::Device(e.take_output(ty, len)?);
                // Device frames go back to their producer (a decoder's pool), page-locked ones
                // to their source's pool, when the stage releases them, right after this: the
                // kernel, copies and gather must have read them by then.
                let read_later = |f: &Frame| {
                    f.is_page_locked() || f.planes.as_deref().is_some_and(|p| p.device().is_some())
                };
                if batch.frames.iter().any(read_later) {
                    e.gpu.stream().synchronize()?;
                }
                return Ok(());
            }
            let (ty, bytes) = out_bytes(f16, len);
            let dst = batch.tensor.host_mut(self.config.dtype, len);
            if self.pinned_output {
                grow_pinned(e.gpu.context(), &mut self.host[0], bytes)?;
                let host = self.host[0].as_mut().expect("grown");
                // SAFETY: read right after the synchronize below.
                unsafe { e.download_pinned(ty, host, bytes) }?;
                e.gpu.stream().synchronize()?;
                dst.bytes_mut().copy_from_slice(&host.as_slice()?[..bytes]);
            } else {
                e.download(ty, dst.bytes_mut())?;
            }
            Ok(())
        })();
        result.map_err(Into::into)
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // A batch still in flight is copying into a pinned buffer about to be freed: let it finish.
        if self.in_flight.is_some() {
            let _ = self.engine.gpu.stream().synchronize();
            if let Some(e) = &self.engine2 {
                let _ = e.gpu.stream().synchronize();
            }
        }
    }
}

/// The kernels' output type for an f16 or f32 tensor, and the bytes of `len` of its values.
fn out_bytes(f16: bool, len: usize) -> (OutType, usize) {
    match f16 {
        true => (OutType::F16, len * 2),
        false => (OutType::F32, len * 4),
    }
}
