//! Ordering work between CUDA streams that different components made (a decoder, the preprocess
//! engine, ONNX Runtime, another library through DLPack): events, no host wait, no device-wide
//! synchronization.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaStream};
use octopipe_core::stage::PropChoice;

use crate::device::context;
use crate::CudaError;

/// Where a component's CUDA stream stands when the GPU picks which waiting work runs next; the
/// choice of the `gpu-priority` of `detect` (normal by default), `preprocess` and `classify`
/// (high by default: work on boxes already found ahead of the detector's next calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PropChoice)]
pub enum StreamPriority {
    /// CUDA's default priority.
    #[default]
    Normal,
    /// The device's greatest priority: the blocks of its kernels are scheduled before the
    /// waiting blocks of normal streams' kernels (running blocks are not pre-empted).
    High,
}

/// A new non-blocking stream of `ctx` at `priority`.
pub fn new_stream(
    ctx: &Arc<CudaContext>,
    priority: StreamPriority,
) -> Result<Arc<CudaStream>, CudaError> {
    match priority {
        StreamPriority::Normal => Ok(ctx.new_stream()?),
        StreamPriority::High => {
            ctx.bind_to_thread()?;
            // Numerically least is the greatest priority.
            let (_least, greatest) = result::stream::get_priority_range()?;
            Ok(ctx.new_stream_with_priority(greatest)?)
        }
    }
}

/// The priority CUDA gives `stream` (numerically less is sooner; 0 is the default).
pub fn stream_priority(stream: &CudaStream) -> Result<i32, CudaError> {
    stream.context().bind_to_thread()?;
    let mut priority = 0;
    // SAFETY: `stream` is a live stream of its context, bound above.
    unsafe { sys::cuStreamGetPriority(stream.cu_stream(), &mut priority).result()? };
    Ok(priority)
}

/// Order the work queued from now on on `consumer` after everything queued so far on `producer`
/// (streams of `ctx`, made by different components: a decoder, the preprocess engine,
/// ONNX Runtime; a producer of 0 has nothing pending): the consumer waits on an event recorded on
/// the producer. No host wait, no device-wide synchronization.
pub fn order_after(
    ctx: &CudaContext,
    consumer: &CudaStream,
    producer: u64,
) -> Result<(), CudaError> {
    if producer == 0 {
        return Ok(());
    }
    ctx.bind_to_thread()?;
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    let mut event: sys::CUevent = std::ptr::null_mut();
    // SAFETY: the event is created, recorded on the producer's stream, waited on by the
    // consumer's stream and destroyed (CUDA keeps it alive until the wait is resolved); both
    // streams belong to this context (the callers check the device).
    unsafe {
        sys::cuEventCreate(&mut event, flags).result()?;
        let ordered = sys::cuEventRecord(event, producer as sys::CUstream)
            .result()
            .and_then(|()| sys::cuStreamWaitEvent(consumer.cu_stream(), event, 0).result());
        sys::cuEventDestroy_v2(event).result()?;
        ordered?;
    }
    Ok(())
}

/// [`order_after`] for raw `CUstream` handles of device `device`'s primary context, as other
/// libraries hand them over (DLPack's `stream=`, `__cuda_array_interface__`'s `stream`; 1 and 2
/// are CUDA's legacy and per-thread default streams): work queued from now on on `consumer`
/// runs after everything queued so far on `producer`.
pub fn order_streams(device: usize, consumer: u64, producer: u64) -> Result<(), CudaError> {
    if producer == 0 || producer == consumer {
        return Ok(());
    }
    let ctx = context(device)?;
    ctx.bind_to_thread()?;
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    let mut event: sys::CUevent = std::ptr::null_mut();
    // SAFETY: as in `order_after`; the caller vouches that both handles are live streams of
    // this device's primary context (or CUDA's default-stream handles).
    unsafe {
        sys::cuEventCreate(&mut event, flags).result()?;
        let ordered = sys::cuEventRecord(event, producer as sys::CUstream)
            .result()
            .and_then(|()| sys::cuStreamWaitEvent(consumer as sys::CUstream, event, 0).result());
        sys::cuEventDestroy_v2(event).result()?;
        ordered?;
    }
    Ok(())
}

/// Wait on the host until the work queued so far on the raw stream `stream` of device
/// `device`'s primary context is done (before memory another library read goes back to a pool).
pub fn sync_stream(device: usize, stream: u64) -> Result<(), CudaError> {
    let ctx = context(device)?;
    ctx.bind_to_thread()?;
    // SAFETY: the caller vouches that `stream` is a live stream of this context (or a
    // default-stream handle).
    unsafe { sys::cuStreamSynchronize(stream as sys::CUstream).result()? };
    Ok(())
}
