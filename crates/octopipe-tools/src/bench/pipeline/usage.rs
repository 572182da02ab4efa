//! What a run costs: the process's CPU time, and the GPUs' utilization and memory sampled by a
//! background `nvidia-smi`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::settings::GPU_SAMPLE_MS;

/// GPU use while a run ran.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuStats {
    /// Mean utilization, %, of the samples taken while the pipeline ran.
    pub util_mean: f64,
    /// Peak memory used on the GPU (all processes), MiB, from the build on.
    pub mem_peak_mib: f64,
}

/// The process's user + system CPU time so far (all threads).
pub(super) fn cpu_time() -> Duration {
    // SAFETY: `usage` is a plain C struct that getrusage fills; zeroed is a valid value of it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to a rusage is getrusage's documented use.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// One `nvidia-smi` sample: when it was read, GPU index, utilization %, memory used MiB.
type GpuSample = (Instant, usize, f64, f64);

/// A background `nvidia-smi -lms 200` on the GPUs a run uses and the thread reading its lines.
pub(super) struct GpuSampler {
    child: Child,
    reader: Option<JoinHandle<()>>,
    samples: Arc<Mutex<Vec<GpuSample>>>,
}

impl GpuSampler {
    /// Start sampling `devices` (empty: GPU 0); `None` when `nvidia-smi` cannot be started.
    pub(super) fn start(devices: &[usize]) -> Option<GpuSampler> {
        let ids: Vec<String> = devices.iter().map(usize::to_string).collect();
        let ids = if ids.is_empty() {
            "0".into()
        } else {
            ids.join(",")
        };
        let mut child = Command::new("nvidia-smi")
            .args([
                "--query-gpu=index,utilization.gpu,memory.used",
                "--format=csv,noheader,nounits",
                "-i",
                &ids,
                "-lms",
                &GPU_SAMPLE_MS.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let stdout = child.stdout.take()?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let into = samples.clone();
        let reader = std::thread::Builder::new()
            .name("octopipe-nvidia-smi".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(s) = parse_gpu_sample(&line) {
                        if let Ok(mut v) = into.lock() {
                            v.push((Instant::now(), s.0, s.1, s.2));
                        }
                    }
                }
            })
            .ok();
        Some(GpuSampler {
            child,
            reader,
            samples,
        })
    }

    /// Stop sampling: mean utilization (over the GPUs) of the samples between `from` and `to`,
    /// the sum over the GPUs of each one's peak memory; `None` without samples.
    pub(super) fn finish(mut self, from: Instant, to: Instant) -> Option<GpuStats> {
        self.stop();
        let samples = self.samples.lock().ok()?.clone();
        let mut peaks = std::collections::BTreeMap::new();
        for s in &samples {
            let peak = peaks.entry(s.1).or_insert(0.0f64);
            *peak = peak.max(s.3);
        }
        if peaks.is_empty() {
            return None;
        }
        let mem_peak_mib = peaks.values().sum();
        let during: Vec<f64> = samples
            .iter()
            .filter(|s| s.0 >= from && s.0 <= to)
            .map(|s| s.2)
            .collect();
        let util = if during.is_empty() {
            // A run shorter than one period: the nearest samples.
            samples.iter().map(|s| s.2).collect()
        } else {
            during
        };
        Some(GpuStats {
            util_mean: util.iter().sum::<f64>() / util.len() as f64,
            mem_peak_mib,
        })
    }

    /// End the child (ours, by its id) and the reader.
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Drop for GpuSampler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `"1, 45, 1234"` -> (1, 45.0, 1234.0); `None` for anything else (`[N/A]`, an error line).
fn parse_gpu_sample(line: &str) -> Option<(usize, f64, f64)> {
    let mut fields = line.split(',').map(str::trim);
    let index = fields.next()?.parse().ok()?;
    let util = fields.next()?.parse().ok()?;
    let mem = fields.next()?.parse().ok()?;
    fields.next().is_none().then_some((index, util, mem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_samples_parse() {
        assert_eq!(parse_gpu_sample("1, 45, 1234"), Some((1, 45.0, 1234.0)));
        assert_eq!(parse_gpu_sample("45, 1234"), None);
        assert_eq!(parse_gpu_sample("0, [N/A], 3"), None);
        assert_eq!(parse_gpu_sample("NVIDIA-SMI has failed"), None);
    }
}
