//! A stream's memory estimate, checked against what one stream may use and against the
//! station's budget before the stream opens (`octopipe run --streams --max-stream-memory
//! --memory-budget`).
//!
//! The estimate is the frames the stream may hold at once (its source's decoded frames waiting
//! to be taken, one in each of its stages, each edge's queue full) times the most bytes one of
//! its frames may be (its source's own size when it knows it, else the largest decoded frame,
//! [`MAX_FRAME_PIXELS`] of I420; the station's budget counts [`BUDGETED_FRAME`], 4K, for such
//! a source), plus the tensors of a detector or classifier of its own ([`tensor_bytes`]) and,
//! in the station's budget, the frames a GStreamer source's own pool holds ([`GST_POOL`]). The
//! station's budget ([`Budget`]) holds each stream's estimate from its admission until its
//! threads have truly ended (a source's pipeline stopped), so that streams that are each within
//! bounds cannot together take more than the station has.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::describe::Node;
use octopipe_core::error::PipelineError;
use octopipe_core::stage::limits::MAX_FRAME_PIXELS;
use octopipe_onnx::classify::ClassifyConfig;
use octopipe_onnx::detect::DetectConfig;
use octopipe_sources::AppSourceSettings;

/// The budget of a stream added while running when none is set: 2 GiB.
pub const DEFAULT_MAX_STREAM_MEMORY: u64 = 2 << 30;

/// Frames a GStreamer source holds before the runner takes them: its appsink's queue and the
/// frame being copied out.
const SOURCE_AHEAD: u64 = 4;

/// Frames a GStreamer source's own elements hold besides (`videotestsrc`'s pool, a
/// converter's output, a decoder's picture being written), allocated by GStreamer with
/// `g_malloc`.
const GST_POOL: u64 = 3;

/// Bytes of the largest decoded frame: [`MAX_FRAME_PIXELS`] of I420 (what decoders deliver).
const LARGEST_FRAME: u64 = MAX_FRAME_PIXELS * 3 / 2;

/// Bytes of a frame the station's budget counts for a source that cannot say its size before
/// it opens (a file, a camera): 3840x2160 of I420, the largest common video. The per-stream
/// check counts [`LARGEST_FRAME`] for it; the budget counts what such streams usually hold, so
/// that the default budget takes as many cameras as `--max-streams`.
const BUDGETED_FRAME: u64 = 3840 * 2160 * 3 / 2;

/// A model input side assumed when the description does not give it (`detect size=`): the
/// common detectors take 640; a classifier's crops are taken at 256 (most take 224).
const DETECT_SIDE: u64 = 640;
const CLASSIFY_SIDE: u64 = 256;

/// A detector's calls in flight at once (one being prepared while one runs).
const CALLS_IN_FLIGHT: u64 = 2;

/// What a stream of `nodes` (its source first) may hold at once: (frames, bytes per frame).
pub(crate) fn estimate(nodes: &[Node]) -> (u64, u64) {
    let frame = nodes
        .first()
        .and_then(|n| n.element.frame_bytes())
        .unwrap_or(LARGEST_FRAME);
    let frames = SOURCE_AHEAD + nodes.iter().map(|n| n.queue.size as u64 + 1).sum::<u64>();
    (frames, frame)
}

/// Frames a stream's source holds besides [`estimate`]'s: a GStreamer source's own pool
/// ([`GST_POOL`]); none for an `app` source.
fn pool_frames(nodes: &[Node]) -> u64 {
    let gst = nodes
        .first()
        .is_some_and(|n| n.element.downcast_ref::<AppSourceSettings>().is_none());
    if gst {
        GST_POOL
    } else {
        0
    }
}

/// The tensors of the detectors and classifiers among `nodes` (a stream's own), for frames of
/// `frame` bytes: per detector, its calls in flight of `max-batch` frames, each of its tiles
/// (or as many model inputs as cover the frame) and the whole frame, as 3 planes of f32 at its
/// input size; per classifier, each worker's batch of crops at its input size.
pub(crate) fn tensor_bytes(nodes: &[Node], frame: u64) -> u64 {
    let planes = |side_w: u64, side_h: u64| 3 * side_w * side_h * 4;
    let pixels = frame * 2 / 3;
    nodes
        .iter()
        .map(|n| {
            if let Some(d) = n.element.downcast_ref::<DetectConfig>() {
                let (w, h) = d.size.map_or((DETECT_SIDE, DETECT_SIDE), |(w, h)| {
                    (u64::from(w).max(1), u64::from(h).max(1))
                });
                let tiles = match d.tiles {
                    Some((x, y)) => u64::from(x) * u64::from(y) + u64::from(d.whole_frame),
                    None => pixels.div_ceil(w * h).max(1),
                };
                let batch = (d.max_batch as u64).max(1);
                CALLS_IN_FLIGHT
                    .saturating_mul(batch)
                    .saturating_mul(tiles)
                    .saturating_mul(planes(w, h))
            } else if let Some(c) = n.element.downcast_ref::<ClassifyConfig>() {
                let workers = (c.workers as u64).max(1);
                let batch = (c.max_batch as u64).max(1);
                workers
                    .saturating_mul(batch)
                    .saturating_mul(planes(CLASSIFY_SIDE, CLASSIFY_SIDE))
            } else {
                0
            }
        })
        .fold(0, u64::saturating_add)
}

/// Refuse a stream whose frames' estimate passes `budget` bytes, naming both; the bytes the
/// stream is reserved in the station's budget otherwise (its frames, its GStreamer source's
/// pool, its tensors; frames of [`BUDGETED_FRAME`] bytes for a source that cannot say its
/// size).
pub(crate) fn check(nodes: &[Node], budget: u64) -> Result<u64, PipelineError> {
    let (frames, frame) = estimate(nodes);
    let bytes = frames.saturating_mul(frame);
    let known = nodes.first().and_then(|n| n.element.frame_bytes());
    let budgeted = known.unwrap_or(BUDGETED_FRAME);
    match bytes <= budget {
        true => Ok((frames + pool_frames(nodes))
            .saturating_mul(budgeted)
            .saturating_add(tensor_bytes(nodes, budgeted))),
        false => Err(PipelineError::StreamMemory {
            estimate: bytes,
            frames,
            frame,
            budget,
        }),
    }
}

/// What the machine read when none could: 32 GiB of memory.
const UNREAD_TOTAL: u64 = 32 << 30;

/// The station's memory budget when none is given: the smaller of three quarters of the
/// machine's memory and the process's cgroup limit (v2 `memory.max`, v1
/// `memory.limit_in_bytes`), the rest left to the station itself (models, GStreamer, threads),
/// and half of what the process's address-space limit (RLIMIT_AS: `ulimit -v`, `prlimit
/// --as`) leaves above the address space it has mapped at the call (`VmSize`). An address-space
/// limit counts every mapping reserved (thread stacks, allocator arenas, GStreamer's pools,
/// the GPU and ONNX Runtime libraries), not the memory touched, hence the smaller share. Reads
/// /proc (`memory_budget` computes it); 24 GiB when nothing can be read.
pub fn default_memory_budget() -> u64 {
    let (total, cgroup) = (meminfo_total(), cgroup_limit());
    let (rlimit_as, vm_size) = (address_space_limit(), vm_size());
    let budget = memory_budget(total, cgroup, rlimit_as, vm_size.unwrap_or(0));
    tracing::debug!(
        budget,
        ?total,
        ?cgroup,
        ?rlimit_as,
        ?vm_size,
        "default memory budget"
    );
    budget
}

/// The station's default memory budget from what the machine says, in bytes: `total` the
/// machine's memory (`MemTotal`; 32 GiB when unknown), `cgroup` the cgroup's limit, `rlimit_as`
/// the address-space limit (`None`: unlimited) and `vm_size` the address space already mapped.
/// Three quarters of the smaller of `total` and `cgroup`, and at most half of `rlimit_as -
/// vm_size` (0 when that is all mapped already: every stream is then refused naming the
/// budget).
pub(crate) fn memory_budget(
    total: Option<u64>,
    cgroup: Option<u64>,
    rlimit_as: Option<u64>,
    vm_size: u64,
) -> u64 {
    let total = total.unwrap_or(UNREAD_TOTAL);
    let ram = cgroup.map_or(total, |c| c.min(total)) / 4 * 3;
    let address_space = rlimit_as.map_or(u64::MAX, |l| l.saturating_sub(vm_size) / 2);
    ram.min(address_space)
}

/// The soft limit of this process's address space (RLIMIT_AS, the `Max address space` row of
/// /proc/self/limits), in bytes; `None` when unlimited or unreadable.
fn address_space_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_address_space_limit(&text)
}

/// The soft `Max address space` of a /proc/PID/limits text; `None` for `unlimited`.
fn parse_address_space_limit(limits: &str) -> Option<u64> {
    let row = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft = row["Max address space".len()..].split_whitespace().next()?;
    soft.parse().ok()
}

/// `VmSize` of /proc/self/status (the address space mapped now), in bytes.
fn vm_size() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmSize:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn meminfo_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// The memory limit of this process's cgroup (v2, else v1), in bytes; `None` when there is
/// none.
fn cgroup_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v2 = own.lines().find_map(|l| l.strip_prefix("0::"));
    let mut candidates = Vec::new();
    if let Some(path) = v2 {
        candidates.push(format!(
            "/sys/fs/cgroup{}/memory.max",
            path.trim_end_matches('/')
        ));
    }
    candidates.push("/sys/fs/cgroup/memory.max".into());
    candidates.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".into());
    candidates.iter().find_map(|p| {
        let value: u64 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
        // v1 says "no limit" with a number near 2^63.
        (value < 1 << 60).then_some(value)
    })
}

/// The station's memory budget: the estimate of each stream added while running, held from
/// its admission until its threads have ended.
pub(crate) struct Budget {
    limit: AtomicU64,
    held: Mutex<BTreeMap<u32, u64>>,
}

impl Budget {
    /// A budget of `limit` bytes, nothing held.
    pub(crate) fn new(limit: u64) -> Budget {
        Budget {
            limit: AtomicU64::new(limit),
            held: Mutex::new(BTreeMap::new()),
        }
    }

    /// Set the budget (what is held stays held).
    pub(crate) fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes, Ordering::SeqCst);
    }

    /// Hold `bytes` for stream `id`, or refuse naming the budget and what is held.
    pub(crate) fn reserve(&self, id: u32, bytes: u64) -> Result<(), PipelineError> {
        let budget = self.limit.load(Ordering::SeqCst);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let total = held.values().fold(0u64, |a, b| a.saturating_add(*b));
        if total.saturating_add(bytes) > budget {
            return Err(PipelineError::MemoryBudget {
                estimate: bytes,
                held: total,
                streams: held.len(),
                budget,
            });
        }
        held.insert(id, bytes);
        Ok(())
    }

    /// Let go what stream `id` held (its threads ended, or its open failed).
    pub(crate) fn release(&self, id: u32) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::Builtin;
    use octopipe_core::stage::Registry;
    use std::collections::HashMap;

    fn nodes(text: &str) -> Vec<Node> {
        let desc = crate::describe::parse("<test>", text, &HashMap::new()).unwrap();
        crate::describe::build_branch(&desc, &Registry::builtin(), false, true).unwrap()
    }

    #[test]
    fn frames_times_the_largest_frame_a_stream_may_hold() {
        // 640x480 I420: 460,800 bytes (+ a row of slack for odd sizes).
        let small = nodes("testsrc width=640 height=480 ! boxes format=synthetic");
        let (frames, frame) = estimate(&small);
        assert_eq!(frame, 640 * 480 * 3 / 2 + 640);
        assert!(frames >= 4 + 2, "{frames}");
        // The station's budget holds the GStreamer source's pool too.
        let held = check(&small, DEFAULT_MAX_STREAM_MEMORY).unwrap();
        assert_eq!(held, (frames + GST_POOL) * frame);
        // A source that cannot say its size counts the largest decoded frame.
        let media = nodes("media location=x.mp4 ! boxes format=synthetic");
        assert_eq!(estimate(&media).1, LARGEST_FRAME);
        // The station's budget counts 4K frames for it.
        let (frames, _) = estimate(&media);
        let held = check(&media, DEFAULT_MAX_STREAM_MEMORY).unwrap();
        assert_eq!(held, (frames + GST_POOL) * BUDGETED_FRAME);
        let deep = nodes("media location=x.mp4 ! queue size=1000 ! boxes format=synthetic");
        let e = check(&deep, DEFAULT_MAX_STREAM_MEMORY).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("--max-stream-memory 2.0 GiB"), "{text}");
        assert!(text.contains("frames of at most 100663296 bytes"), "{text}");
    }

    #[test]
    fn a_streams_own_detector_tensors_are_in_its_share() {
        let plain = nodes("testsrc width=1280 height=720 ! boxes format=synthetic");
        assert_eq!(tensor_bytes(&plain, 1280 * 720 * 3 / 2), 0);
        let detect = nodes("testsrc width=1280 height=720 ! detect model=d.onnx max-batch=4");
        let frame = estimate(&detect).1;
        // Two calls in flight of 4 frames, each covered by ceil(921600 / 409600) = 3 inputs
        // of 3 x 640 x 640 f32.
        let input = 3 * 640 * 640 * 4;
        let pixels = frame * 2 / 3;
        let tiles = pixels.div_ceil(640 * 640);
        assert_eq!(tensor_bytes(&detect, frame), 2 * 4 * tiles * input);
        let (frames, frame) = estimate(&detect);
        let held = check(&detect, u64::MAX).unwrap();
        assert_eq!(held, (frames + GST_POOL) * frame + 2 * 4 * tiles * input);
    }

    #[test]
    fn the_station_budget_holds_each_stream_until_released() {
        let budget = Budget::new(1000);
        budget.reserve(1, 600).unwrap();
        let e = budget.reserve(2, 600).unwrap_err();
        assert!(
            matches!(
                e,
                PipelineError::MemoryBudget {
                    held: 600,
                    streams: 1,
                    budget: 1000,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("--memory-budget"), "{e}");
        budget.reserve(3, 400).unwrap();
        budget.release(1);
        budget.reserve(2, 600).unwrap();
        assert!(default_memory_budget() > 0);
    }

    #[test]
    fn the_default_budget_is_the_least_of_the_machine_the_cgroup_and_the_address_space() {
        const GIB: u64 = 1 << 30;
        // The machine alone: three quarters of it.
        assert_eq!(memory_budget(Some(32 * GIB), None, None, GIB), 24 * GIB);
        // A cgroup below the machine's memory bounds it; one above does not.
        assert_eq!(
            memory_budget(Some(32 * GIB), Some(8 * GIB), None, 0),
            6 * GIB
        );
        assert_eq!(
            memory_budget(Some(8 * GIB), Some(64 * GIB), None, 0),
            6 * GIB
        );
        // Nothing read: 32 GiB of memory assumed.
        assert_eq!(memory_budget(None, None, None, 0), 24 * GIB);
        // An address-space limit: half of what is left above the mapped address space.
        let six_gb = 6_000_000_000;
        let mapped = 200 << 20;
        assert_eq!(
            memory_budget(Some(32 * GIB), None, Some(six_gb), mapped),
            (six_gb - mapped) / 2
        );
        // The review's case: 6 GB of address space, 24 GiB of RAM: under 3 GB, not 18.
        assert!(memory_budget(Some(24 * GIB), None, Some(six_gb), mapped) < 3_000_000_000);
        // A roomy address-space limit leaves the machine's share in force.
        assert_eq!(
            memory_budget(Some(8 * GIB), None, Some(1 << 40), mapped),
            6 * GIB
        );
        // All of it mapped already: nothing left to stream with.
        assert_eq!(memory_budget(Some(8 * GIB), None, Some(GIB), 2 * GIB), 0);
    }

    #[test]
    fn the_address_space_limit_is_read_from_proc_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max stack size            8388608              unlimited            bytes     \n\
                      Max address space         6000000000           unlimited            bytes     \n";
        assert_eq!(parse_address_space_limit(limits), Some(6_000_000_000));
        let unlimited =
            "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(parse_address_space_limit(unlimited), None);
        assert_eq!(
            parse_address_space_limit("Max open files  1024  1024  files\n"),
            None
        );
        // This process's own: whatever it is, the mapped size is known.
        assert!(vm_size().is_some_and(|v| v > 0));
    }
}
