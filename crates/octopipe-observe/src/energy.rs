//! Energy per frame from NVML's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`,
//! millijoules since the driver loaded; Volta and newer).
//!
//! ```text
//! octopipe run pipelines/demo.pipe --set root=demo-data --set out=o.jsonl --energy
//! energy: GPU 0 (NVIDIA H100 80GB HBM3): 41.2 J over 90 frames = 457.8 mJ/frame (13.7 W mean over 3.00 s)
//! energy: not available (no NVML: libnvidia-ml.so.1: cannot open shared object file: ...)
//! ```
//!
//! NVML is loaded at run time (`libnvidia-ml.so.1`), so octopipe builds and runs without it; an
//! absent library, GPU or counter is reported as such. The counter covers the whole GPU (other
//! processes on it count too) and ticks about every 100 ms, so short runs are coarse.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::time::{Duration, Instant};

use libloading::Library;

use octopipe_core::budget::Report;
use octopipe_core::observer::Observer;
use octopipe_stages::batch::CropBatch;

type Device = *mut c_void;
const NVML_SUCCESS: c_int = 0;
const NVML_ERROR_NOT_SUPPORTED: c_int = 3;

/// Why NVML, or one GPU's energy counter, cannot be read (the report's `not available (...)`).
#[derive(Debug, thiserror::Error)]
enum NvmlError {
    /// The library does not load.
    #[error("no NVML: cannot load libnvidia-ml.so.1: {0}")]
    Load(#[source] libloading::Error),
    /// The library lacks an entry point.
    #[error("NVML has no {0}")]
    Missing(&'static str),
    /// `nvmlInit_v2` failed (NVML's words).
    #[error("NVML did not initialise: {0}")]
    Init(String),
    /// `nvmlDeviceGetCount_v2` failed (NVML's words).
    #[error("NVML cannot count GPUs: {0}")]
    Count(String),
    /// The GPU has no total-energy counter.
    #[error("its total-energy counter is not supported (needs Volta or newer)")]
    Unsupported,
    /// Reading the counter failed (NVML's words).
    #[error("{0}")]
    Read(String),
}

/// The few NVML entry points used, resolved once.
struct Nvml {
    get_energy: unsafe extern "C" fn(Device, *mut c_ulonglong) -> c_int,
    shutdown: unsafe extern "C" fn() -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    /// (index, name, handle) of each GPU.
    devices: Vec<(u32, String, Device)>,
    _lib: Library,
}

// SAFETY: NVML handles are process-wide and NVML's API is thread-safe.
unsafe impl Send for Nvml {}

impl Nvml {
    fn load() -> Result<Nvml, NvmlError> {
        // SAFETY: loading the NVIDIA management library runs no initialisers beyond its own.
        let lib = unsafe { Library::new("libnvidia-ml.so.1") }
            .or_else(|_| unsafe { Library::new("libnvidia-ml.so") })
            .map_err(NvmlError::Load)?;
        // SAFETY: the signatures below are NVML's (nvml.h), for the versioned symbols named.
        unsafe {
            let sym = NvmlError::Missing;
            let init = *lib
                .get::<unsafe extern "C" fn() -> c_int>(b"nvmlInit_v2\0")
                .map_err(|_| sym("nvmlInit_v2"))?;
            let count = *lib
                .get::<unsafe extern "C" fn(*mut c_uint) -> c_int>(b"nvmlDeviceGetCount_v2\0")
                .map_err(|_| sym("nvmlDeviceGetCount_v2"))?;
            let handle = *lib
                .get::<unsafe extern "C" fn(c_uint, *mut Device) -> c_int>(
                    b"nvmlDeviceGetHandleByIndex_v2\0",
                )
                .map_err(|_| sym("nvmlDeviceGetHandleByIndex_v2"))?;
            let name = *lib
                .get::<unsafe extern "C" fn(Device, *mut c_char, c_uint) -> c_int>(
                    b"nvmlDeviceGetName\0",
                )
                .map_err(|_| sym("nvmlDeviceGetName"))?;
            let get_energy = *lib
                .get::<unsafe extern "C" fn(Device, *mut c_ulonglong) -> c_int>(
                    b"nvmlDeviceGetTotalEnergyConsumption\0",
                )
                .map_err(|_| sym("nvmlDeviceGetTotalEnergyConsumption"))?;
            let shutdown = *lib
                .get::<unsafe extern "C" fn() -> c_int>(b"nvmlShutdown\0")
                .map_err(|_| sym("nvmlShutdown"))?;
            let error_string = *lib
                .get::<unsafe extern "C" fn(c_int) -> *const c_char>(b"nvmlErrorString\0")
                .map_err(|_| sym("nvmlErrorString"))?;
            let describe = |rc: c_int| {
                let p = error_string(rc);
                if p.is_null() {
                    format!("NVML error {rc}")
                } else {
                    std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            let rc = init();
            if rc != NVML_SUCCESS {
                return Err(NvmlError::Init(describe(rc)));
            }
            let mut n: c_uint = 0;
            let rc = count(&mut n);
            if rc != NVML_SUCCESS {
                shutdown();
                return Err(NvmlError::Count(describe(rc)));
            }
            let mut devices = Vec::new();
            for i in 0..n {
                let mut dev: Device = std::ptr::null_mut();
                if handle(i, &mut dev) != NVML_SUCCESS {
                    continue;
                }
                let mut buf = [0 as c_char; 96];
                let label = if name(dev, buf.as_mut_ptr(), buf.len() as c_uint) == NVML_SUCCESS {
                    std::ffi::CStr::from_ptr(buf.as_ptr())
                        .to_string_lossy()
                        .into_owned()
                } else {
                    "unknown GPU".into()
                };
                devices.push((i, label, dev));
            }
            Ok(Nvml {
                get_energy,
                shutdown,
                error_string,
                devices,
                _lib: lib,
            })
        }
    }

    /// Millijoules of each GPU since the driver loaded, or why not.
    fn read(&self) -> Vec<Result<u64, NvmlError>> {
        self.devices
            .iter()
            .map(|(_, _, dev)| {
                let mut mj: c_ulonglong = 0;
                // SAFETY: `dev` is a handle NVML gave us and NVML is initialised until drop.
                let rc = unsafe { (self.get_energy)(*dev, &mut mj) };
                match rc {
                    NVML_SUCCESS => Ok(mj),
                    NVML_ERROR_NOT_SUPPORTED => Err(NvmlError::Unsupported),
                    rc => {
                        // SAFETY: nvmlErrorString returns a static string for any code.
                        let p = unsafe { (self.error_string)(rc) };
                        Err(NvmlError::Read(if p.is_null() {
                            format!("NVML error {rc}")
                        } else {
                            // SAFETY: non-null, NUL-terminated, static.
                            unsafe { std::ffi::CStr::from_ptr(p) }
                                .to_string_lossy()
                                .into_owned()
                        }))
                    }
                }
            })
            .collect()
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: paired with the successful nvmlInit_v2 in `load`.
        unsafe { (self.shutdown)() };
    }
}

/// Reads every GPU's energy counter when made and when the run finishes, and reports joules per
/// processed frame in `report.extra` (or one line saying why energy is not available).
pub struct Energy {
    nvml: Result<Nvml, NvmlError>,
    start: Vec<Result<u64, NvmlError>>,
    since: Instant,
    frames: u64,
}

impl Energy {
    /// Load NVML and read the counters now (call it right before the run).
    pub fn new() -> Energy {
        let nvml = Nvml::load();
        let start = nvml.as_ref().map(|n| n.read()).unwrap_or_default();
        Energy {
            nvml,
            start,
            since: Instant::now(),
            frames: 0,
        }
    }

    /// Whether NVML loaded and sees at least one GPU.
    pub fn available(&self) -> bool {
        self.nvml.as_ref().is_ok_and(|n| !n.devices.is_empty())
    }

    /// The report lines for `frames` frames over `wall`, from the counters read now.
    fn lines(&self, frames: u64, wall: Duration) -> Vec<String> {
        let nvml = match &self.nvml {
            Ok(n) => n,
            Err(e) => return vec![format!("energy: not available ({e})")],
        };
        if nvml.devices.is_empty() {
            return vec!["energy: not available (NVML sees no GPU)".into()];
        }
        let end = nvml.read();
        nvml.devices
            .iter()
            .zip(self.start.iter().zip(&end))
            .map(|((i, name, _), (a, b))| match (a, b) {
                (Ok(a), Ok(b)) => {
                    let joules = b.saturating_sub(*a) as f64 / 1000.0;
                    let per_frame = if frames > 0 {
                        format!("{:.1} mJ/frame", joules * 1000.0 / frames as f64)
                    } else {
                        "no frames".into()
                    };
                    format!(
                        "energy: GPU {i} ({name}): {joules:.2} J over {frames} frames = {per_frame} ({:.1} W mean over {:.2} s)",
                        joules / wall.as_secs_f64().max(1e-9),
                        wall.as_secs_f64()
                    )
                }
                (Err(e), _) | (_, Err(e)) => {
                    format!("energy: GPU {i} ({name}): not available ({e})")
                }
            })
            .collect()
    }
}

impl Default for Energy {
    fn default() -> Self {
        Energy::new()
    }
}

impl Observer for Energy {
    fn batch(&mut self, batch: &CropBatch, _budget: Duration) {
        // A frame in parts counts once, with its last part.
        self.frames += batch.frames.iter().filter(|f| f.part.is_last()).count() as u64;
    }

    fn finish(&mut self, report: &mut Report) {
        let lines = self.lines(self.frames, self.since.elapsed());
        report.extra.extend(lines);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_counters_are_reported_as_absent() {
        let mut e = Energy::new();
        let mut report =
            octopipe_core::budget::Budget::new(Duration::from_millis(33), Vec::new()).finish();
        e.finish(&mut report);
        assert!(!report.extra.is_empty());
        for line in &report.extra {
            assert!(line.starts_with("energy: "), "{line}");
            if !e.available() {
                assert!(line.contains("not available ("), "{line}");
            }
        }
    }
}
