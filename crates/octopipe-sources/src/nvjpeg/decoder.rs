//! The nvJPEG decoder of one GPU ([`NvjpegDecoder`]), shared by every stream of the process that
//! decodes there, and the thread that decodes its batches (`Engine`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use gstreamer as gst;

use octopipe_core::buffer::DeviceBuffer;
use octopipe_core::frame::{DeviceFrame, FrameLayout, PixelFormat};

use super::error::NvjpegError;
use super::ffi;
use super::header::{CpuReason, JpegHeader};

/// The most files decoded in one batch: the engines' throughput levels off past ~34 pictures of
/// 2000x1500 a call on an H100 (BENCHMARKS.md), and under load every batch is then one call of
/// this size (what is left waits for the next).
const MAX_BATCH: usize = 32;

/// How long the decoder waits, once the files already asked for are taken, for a file from each
/// stream that has none in the batch yet.
const COLLECT: Duration = Duration::from_micros(1500);

/// A JPEG decoded by nvJPEG: its planes in device memory (I420, JPEG colorimetry).
pub(crate) struct Decoded {
    /// The planes.
    pub planes: DeviceFrame,
    /// Their geometry.
    pub layout: FrameLayout,
}

/// What comes back for one file: the planes, or why the file goes to the CPU.
pub(crate) type Outcome = Result<Decoded, CpuReason>;

/// One file to decode, and where its outcome goes.
struct Request {
    buffer: gst::Buffer,
    header: JpegHeader,
    reply: Sender<Outcome>,
}

/// The nvJPEG decoder of one GPU, shared by every stream of the process that decodes there.
pub(crate) struct NvjpegDecoder {
    requests: Sender<Request>,
    device: usize,
    backend: &'static str,
    /// Streams decoding through it (their routes), which a batch waits for.
    streams: AtomicUsize,
}

impl fmt::Debug for NvjpegDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NvjpegDecoder(cuda:{}, {})", self.device, self.backend)
    }
}

impl NvjpegDecoder {
    /// The decoder of GPU `device`, started on first use and shared while any stream holds it;
    /// why nvJPEG cannot run there otherwise.
    pub(crate) fn of(device: usize) -> Result<Arc<NvjpegDecoder>, NvjpegError> {
        static DECODERS: OnceLock<Mutex<HashMap<usize, Weak<NvjpegDecoder>>>> = OnceLock::new();
        let decoders = DECODERS.get_or_init(Mutex::default);
        let mut decoders = decoders
            .lock()
            .map_err(|_| NvjpegError::Cuda("decoder table poisoned".into()))?;
        if let Some(live) = decoders.get(&device).and_then(Weak::upgrade) {
            return Ok(live);
        }
        let mut failed = None;
        // The decoder thread holds a weak reference: the streams holding the decoder are the
        // files a batch waits for.
        let decoder = Arc::new_cyclic(|me| {
            NvjpegDecoder::start(device, me.clone()).unwrap_or_else(|e| {
                failed = Some(e);
                NvjpegDecoder {
                    requests: unbounded().0,
                    device,
                    backend: "none",
                    streams: AtomicUsize::new(0),
                }
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        decoders.insert(device, Arc::downgrade(&decoder));
        Ok(decoder)
    }

    fn start(device: usize, me: Weak<NvjpegDecoder>) -> Result<NvjpegDecoder, NvjpegError> {
        let api = ffi::api()?;
        match octopipe_cuda::device_count() {
            Ok(n) if device < n => {}
            Ok(n) => {
                return Err(NvjpegError::NoGpu(format!(
                    "cuda:{device} does not exist (the driver reports {n} GPUs)"
                )))
            }
            Err(e) => return Err(NvjpegError::NoGpu(e.to_string())),
        }
        let (requests, incoming) = unbounded::<Request>();
        let (ready, started) = bounded(1);
        std::thread::Builder::new()
            .name(format!("nvjpeg-cuda{device}"))
            .spawn(move || match Engine::new(api, device) {
                Ok(engine) => {
                    let _ = ready.send(Ok(engine.backend));
                    engine.serve(&incoming, &me);
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            })
            .map_err(|e| NvjpegError::Cuda(format!("decoder thread: {e}")))?;
        let backend = started.recv().map_err(|_| NvjpegError::Stopped)??;
        tracing::debug!("nvJPEG on cuda:{device}: {backend} backend");
        Ok(NvjpegDecoder {
            requests,
            device,
            backend,
            streams: AtomicUsize::new(0),
        })
    }

    /// The GPU it decodes on.
    pub(crate) fn device(&self) -> usize {
        self.device
    }

    /// Which nvJPEG backend decodes (`hardware`: the JPEG engines; `gpu`: the GPU's cores).
    pub(crate) fn backend(&self) -> &'static str {
        self.backend
    }

    /// Ask for the JPEG file in `buffer` (whose frame header is `header`, taken by
    /// [`JpegHeader::gpu_decodable`]) to be decoded in the next batch; its outcome comes on the
    /// receiver.
    pub(crate) fn submit(&self, buffer: gst::Buffer, header: JpegHeader) -> Receiver<Outcome> {
        let (reply, outcome) = bounded(1);
        let request = Request {
            buffer,
            header,
            reply,
        };
        // A decoder that is gone drops the request: the receiver then says so.
        let _ = self.requests.send(request);
        outcome
    }

    /// [`submit`](Self::submit), waiting for the outcome.
    pub(crate) fn decode(&self, buffer: gst::Buffer, header: JpegHeader) -> Outcome {
        self.submit(buffer, header)
            .recv()
            .unwrap_or(Err(CpuReason::Refused))
    }

    /// A stream starts (`true`) or stops decoding through this decoder.
    pub(crate) fn count_stream(&self, starts: bool) {
        if starts {
            self.streams.fetch_add(1, Ordering::SeqCst);
        } else {
            self.streams.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The decoder thread's nvJPEG handle, states (one per batch size: a state is initialized for
/// one size), stream and output memory.
struct Engine {
    api: &'static ffi::Api,
    handle: ffi::Handle,
    states: HashMap<usize, ffi::State>,
    backend: &'static str,
    stream: Arc<CudaStream>,
    pool: Arc<Mutex<Vec<CudaSlice<u8>>>>,
    /// Files decoded, and the calls and batches they took (for the closing log line).
    files: u64,
    calls: u64,
    batches: u64,
    _ctx: Arc<CudaContext>,
}

impl Engine {
    fn new(api: &'static ffi::Api, device: usize) -> Result<Engine, NvjpegError> {
        let cuda = |e: cudarc::driver::DriverError| NvjpegError::Cuda(e.to_string());
        let ctx = CudaContext::new(device).map_err(cuda)?;
        ctx.bind_to_thread().map_err(cuda)?;
        let stream = ctx.new_stream().map_err(cuda)?;
        let mut handle: ffi::Handle = std::ptr::null_mut();
        let mut backend = "hardware";
        // SAFETY: `handle` is written by nvJPEG; default allocators (null) and flags (0).
        let mut status = unsafe {
            (api.create_ex)(
                ffi::BACKEND_HARDWARE,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                &mut handle,
            )
        };
        if status != 0 {
            // No JPEG engines on this GPU: its cores decode.
            backend = "gpu";
            // SAFETY: as above.
            status = unsafe {
                (api.create_ex)(
                    ffi::BACKEND_GPU_HYBRID,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                    &mut handle,
                )
            };
        }
        check("nvjpegCreateEx", status)?;
        let mut engine = Engine {
            api,
            handle,
            states: HashMap::new(),
            backend,
            stream,
            pool: Arc::default(),
            files: 0,
            calls: 0,
            batches: 0,
            _ctx: ctx,
        };
        let mut size = 1;
        while size <= MAX_BATCH {
            engine.state(size)?;
            size *= 2;
        }
        Ok(engine)
    }

    /// Take requests until every sender is gone, decoding what has come in together.
    fn serve(mut self, incoming: &Receiver<Request>, decoder: &Weak<NvjpegDecoder>) {
        while let Ok(first) = incoming.recv() {
            // What has come in already (streams read their next files ahead), then, for a
            // short while, a file from each stream that has not asked yet.
            let mut batch = vec![first];
            batch.extend(incoming.try_iter().take(MAX_BATCH - 1));
            let deadline = Instant::now() + COLLECT;
            let streams = decoder
                .upgrade()
                .map_or(1, |d| d.streams.load(Ordering::SeqCst).max(1));
            while batch.len() < MAX_BATCH.min(streams) {
                match incoming.recv_deadline(deadline) {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            self.decode(batch);
        }
    }

    /// Decode `batch` in calls of power-of-two sizes, largest first (a state is initialized for
    /// one batch size, and initializing one costs tens of milliseconds on the hardware
    /// backend: the seven sizes up to [`MAX_BATCH`] are made once).
    fn decode(&mut self, mut batch: Vec<Request>) {
        self.batches += 1;
        while !batch.is_empty() {
            let size = 1 << (usize::BITS - 1 - batch.len().leading_zeros());
            let rest = batch.split_off(size);
            self.decode_call(batch);
            batch = rest;
        }
    }

    /// Decode `batch` in one call; when that fails, each file alone, so that one damaged file
    /// goes to the CPU and the others do not.
    fn decode_call(&mut self, batch: Vec<Request>) {
        let outputs = match self.run(&batch) {
            Ok(outputs) => outputs,
            Err(_) if batch.len() > 1 => {
                for one in batch {
                    self.decode_call(vec![one]);
                }
                return;
            }
            Err(e) => {
                tracing::debug!("nvJPEG refused a file: {e}");
                let _ = batch[0].reply.send(Err(CpuReason::Refused));
                return;
            }
        };
        for (request, decoded) in batch.into_iter().zip(outputs) {
            let _ = request.reply.send(Ok(decoded));
        }
    }

    /// One `nvjpegDecodeBatched` call over `batch`, waited for.
    fn run(&mut self, batch: &[Request]) -> Result<Vec<Decoded>, NvjpegError> {
        let state = self.state(batch.len())?;
        self.calls += 1;
        self.files += batch.len() as u64;
        let maps: Vec<gst::BufferMap<'_, gst::buffer::Readable>> = batch
            .iter()
            .map(|r| r.buffer.map_readable())
            .collect::<Result<_, _>>()
            .map_err(|e| NvjpegError::Cuda(format!("mapping a file's bytes: {e}")))?;
        let data: Vec<*const u8> = maps.iter().map(|m| m.as_ptr()).collect();
        let lengths: Vec<usize> = maps.iter().map(|m| m.len()).collect();
        let mut outputs = Vec::with_capacity(batch.len());
        let mut destinations = Vec::with_capacity(batch.len());
        for r in batch {
            let layout = FrameLayout::packed(PixelFormat::I420, r.header.width, r.header.height);
            let (buffer, ptr) = self.take(layout.size())?;
            let mut image = ffi::Image {
                channel: [std::ptr::null_mut(); ffi::MAX_COMPONENT],
                pitch: [0; ffi::MAX_COMPONENT],
            };
            for plane in 0..3 {
                image.channel[plane] = (ptr + layout.offsets[plane] as u64) as *mut u8;
                image.pitch[plane] = layout.strides[plane];
            }
            destinations.push(image);
            outputs.push((buffer, layout));
        }
        // SAFETY: `data`/`lengths` describe the mapped files (alive until this returns, and the
        // stream is synchronized before it does); each destination's planes lie inside its own
        // device buffer of the layout's size (FrameLayout::packed); `state` was initialized for
        // this batch size and YUV output.
        let status = unsafe {
            (self.api.decode_batched)(
                self.handle,
                state,
                data.as_ptr(),
                lengths.as_ptr(),
                destinations.as_mut_ptr(),
                self.stream.cu_stream() as *mut c_void,
            )
        };
        let synced = self.stream.synchronize();
        check("nvjpegDecodeBatched", status)?;
        synced.map_err(|e| NvjpegError::Cuda(e.to_string()))?;
        let device = self.stream.context().ordinal();
        Ok(outputs
            .into_iter()
            .map(|(owner, layout)| Decoded {
                // The stream was synchronized: the planes are written (stream 0).
                planes: DeviceFrame::new(DeviceBuffer::new(
                    owner.ptr,
                    layout.size(),
                    device,
                    0,
                    Box::new(owner),
                )),
                layout,
            })
            .collect())
    }

    /// The state initialized for batches of `n`.
    fn state(&mut self, n: usize) -> Result<ffi::State, NvjpegError> {
        if let Some(state) = self.states.get(&n) {
            return Ok(*state);
        }
        let mut state: ffi::State = std::ptr::null_mut();
        // SAFETY: `state` is written by nvJPEG for this handle.
        check("nvjpegJpegStateCreate", unsafe {
            (self.api.state_create)(self.handle, &mut state)
        })?;
        // SAFETY: a fresh state of this handle; one CPU thread, YUV planes out.
        let status = unsafe {
            (self.api.batched_initialize)(self.handle, state, n as i32, 1, ffi::OUTPUT_YUV)
        };
        if let Err(e) = check("nvjpegDecodeBatchedInitialize", status) {
            // SAFETY: the state was created above and is used nowhere else.
            unsafe { (self.api.state_destroy)(state) };
            return Err(e);
        }
        self.states.insert(n, state);
        Ok(state)
    }

    /// A device buffer of at least `len` bytes from the pool (it goes back when the frame
    /// holding it is dropped), and its address.
    fn take(&mut self, len: usize) -> Result<(Pooled, u64), NvjpegError> {
        let reused = self.pool.lock().ok().and_then(|mut free| {
            free.iter()
                .position(|b| b.len() >= len)
                .map(|i| free.swap_remove(i))
        });
        let slice = match reused {
            Some(slice) => slice,
            // SAFETY: the bytes are written by the decoder before anyone reads them.
            None => unsafe { self.stream.alloc::<u8>(len) }
                .map_err(|e| NvjpegError::Cuda(format!("{len} bytes of device memory: {e}")))?,
        };
        let ptr = slice.device_ptr(&self.stream).0;
        Ok((
            Pooled {
                slice: Some(slice),
                ptr,
                pool: Arc::downgrade(&self.pool),
            },
            ptr,
        ))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.files > 0 {
            tracing::info!(
                "nvJPEG on cuda:{} ({} backend): {} files in {} batches ({:.1} files a batch), {} calls",
                self.stream.context().ordinal(),
                self.backend,
                self.files,
                self.batches,
                self.files as f64 / self.batches.max(1) as f64,
                self.calls
            );
        }
        // SAFETY: the states and the handle were made by this engine and nothing uses them any
        // more (the thread is ending); the stream is idle after each batch.
        unsafe {
            for state in self.states.values() {
                (self.api.state_destroy)(*state);
            }
            (self.api.destroy)(self.handle);
        }
    }
}

/// A decoded frame's device memory: back to its decoder's pool when the frame is done with it
/// (freed when the decoder is gone).
struct Pooled {
    slice: Option<CudaSlice<u8>>,
    ptr: u64,
    pool: Weak<Mutex<Vec<CudaSlice<u8>>>>,
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let (Some(slice), Some(pool)) = (self.slice.take(), self.pool.upgrade()) {
            if let Ok(mut free) = pool.lock() {
                free.push(slice);
            }
        }
    }
}

/// `Ok` for nvJPEG's success, the call and its status otherwise.
fn check(call: &'static str, status: ffi::Status) -> Result<(), NvjpegError> {
    match status {
        0 => Ok(()),
        s => Err(NvjpegError::Call {
            call,
            status: ffi::status_name(s),
        }),
    }
}

/// Whether nvJPEG can decode on GPU `device` here (the library loads, the GPU exists, a decoder
/// starts); why not otherwise.
pub(crate) fn available(device: usize) -> Result<Arc<NvjpegDecoder>, NvjpegError> {
    NvjpegDecoder::of(device)
}
