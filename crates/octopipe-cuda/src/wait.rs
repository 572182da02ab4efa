//! How a host thread waits for its GPU: the scheduling flag of every device's primary context,
//! which octopipe, ONNX Runtime's CUDA provider, NVDEC and nvJPEG all share.
//!
//! CUDA's default (`auto`) spins a waiting thread on its core while there are more cores than
//! active contexts: each thread that waits on the GPU (a classifier worker, the nvJPEG decoder,
//! the preprocess stage) then keeps a core busy for the whole wait. `block` puts such threads to
//! sleep until the GPU signals, for a little more latency per wait (16 classified JPEG streams on
//! an H100: 3.6 cores and 3,065 fps with `block`, 5.0 cores and 3,203 fps spinning;
//! BENCHMARKS.md). The flag is read when a context becomes active, so it is set before the first
//! pipeline opens (the CLI's `--cuda-wait`).

use std::fmt;
use std::str::FromStr;

use cudarc::driver::sys;

use crate::device::device_count;
use crate::{CudaError, NoGpu};

/// How a host thread waits for the GPU (`CU_CTX_SCHED_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HostWait {
    /// CUDA's choice: spin while the process has fewer active contexts than cores, else yield.
    #[default]
    Auto,
    /// Spin on the core: the least latency, a core busy for every wait.
    Spin,
    /// Spin, yielding the core to other threads between checks.
    Yield,
    /// Sleep until the GPU signals: no core busy while waiting, a little more latency.
    Block,
}

impl HostWait {
    /// The accepted words, for messages.
    pub const WORDS: &'static str = "auto, spin, yield, block";

    fn flags(self) -> u32 {
        let flag = match self {
            HostWait::Auto => sys::CUctx_flags::CU_CTX_SCHED_AUTO,
            HostWait::Spin => sys::CUctx_flags::CU_CTX_SCHED_SPIN,
            HostWait::Yield => sys::CUctx_flags::CU_CTX_SCHED_YIELD,
            HostWait::Block => sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC,
        };
        flag as u32
    }
}

impl fmt::Display for HostWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostWait::Auto => "auto",
            HostWait::Spin => "spin",
            HostWait::Yield => "yield",
            HostWait::Block => "block",
        })
    }
}

impl FromStr for HostWait {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(HostWait::Auto),
            "spin" => Ok(HostWait::Spin),
            "yield" => Ok(HostWait::Yield),
            "block" => Ok(HostWait::Block),
            other => Err(format!(
                "`{other}` is not a way to wait for the GPU: one of {}",
                HostWait::WORDS
            )),
        }
    }
}

/// Sets how host threads wait on every GPU of the driver (their primary contexts' scheduling
/// flag); returns the number of GPUs set. Call it before the first pipeline opens: a context
/// already active keeps the flag it started with until it is released.
pub fn set_host_wait(wait: HostWait) -> Result<usize, CudaError> {
    let devices = device_count()?;
    for ordinal in 0..devices {
        let device = cu_device(ordinal)?;
        // SAFETY: `device` came from cuDeviceGet.
        unsafe { sys::cuDevicePrimaryCtxSetFlags_v2(device, wait.flags()) }.result()?;
    }
    Ok(devices)
}

/// How device `device`'s primary context makes host threads wait, as the driver reports it.
pub fn host_wait(device: usize) -> Result<HostWait, CudaError> {
    if device >= device_count()? {
        return Err(NoGpu::NoDevice.into());
    }
    let dev = cu_device(device)?;
    let (mut flags, mut active) = (0u32, 0i32);
    // SAFETY: `dev` came from cuDeviceGet; the out-pointers are valid.
    unsafe { sys::cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active) }.result()?;
    let sched = flags & sys::CUctx_flags::CU_CTX_SCHED_MASK as u32;
    Ok([HostWait::Spin, HostWait::Yield, HostWait::Block]
        .into_iter()
        .find(|w| w.flags() == sched)
        .unwrap_or(HostWait::Auto))
}

/// The driver's handle of device `ordinal` (libcuda loaded and initialized: `device_count`
/// did both).
fn cu_device(ordinal: usize) -> Result<sys::CUdevice, CudaError> {
    let mut device: sys::CUdevice = 0;
    // SAFETY: `device` is a valid out-pointer.
    unsafe { sys::cuDeviceGet(&mut device, i32::try_from(ordinal).unwrap_or(i32::MAX)) }
        .result()?;
    Ok(device)
}

#[cfg(test)]
mod tests {
    use super::HostWait;

    #[test]
    fn each_word_names_one_way_and_others_are_refused() {
        for wait in [
            HostWait::Auto,
            HostWait::Spin,
            HostWait::Yield,
            HostWait::Block,
        ] {
            assert_eq!(wait.to_string().parse::<HostWait>(), Ok(wait));
        }
        let e = "blocking".parse::<HostWait>().unwrap_err();
        assert_eq!(
            e,
            "`blocking` is not a way to wait for the GPU: one of auto, spin, yield, block"
        );
    }
}
