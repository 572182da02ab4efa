//! A stream's memory estimate, checked against the station's budget before the stream opens
//! (`octopipe run --streams --max-stream-memory`): the frames it may hold at once (its
//! source's decoded frames waiting to be taken, one in each of its stages, each edge's queue
//! full) times the most bytes one of its frames may be (its source's own size when it knows
//! it, else the largest decoded frame, [`MAX_FRAME_PIXELS`] of I420).

use crate::describe::Node;
use octopipe_core::error::PipelineError;
use octopipe_core::stage::limits::MAX_FRAME_PIXELS;

/// The budget of a stream added while running when none is set: 2 GiB.
pub const DEFAULT_MAX_STREAM_MEMORY: u64 = 2 << 30;

/// Frames a GStreamer source holds before the runner takes them: its appsink's queue and the
/// frame being copied out.
const SOURCE_AHEAD: u64 = 4;

/// Bytes of the largest decoded frame: [`MAX_FRAME_PIXELS`] of I420 (what decoders deliver).
const LARGEST_FRAME: u64 = MAX_FRAME_PIXELS * 3 / 2;

/// What a stream of `nodes` (its source first) may hold at once: (frames, bytes per frame).
pub(crate) fn estimate(nodes: &[Node]) -> (u64, u64) {
    let frame = nodes
        .first()
        .and_then(|n| n.element.frame_bytes())
        .unwrap_or(LARGEST_FRAME);
    let frames = SOURCE_AHEAD + nodes.iter().map(|n| n.queue.size as u64 + 1).sum::<u64>();
    (frames, frame)
}

/// Refuse a stream whose estimate passes `budget` bytes, naming both.
pub(crate) fn check(nodes: &[Node], budget: u64) -> Result<(), PipelineError> {
    let (frames, frame) = estimate(nodes);
    let bytes = frames.saturating_mul(frame);
    match bytes <= budget {
        true => Ok(()),
        false => Err(PipelineError::StreamMemory {
            estimate: bytes,
            frames,
            frame,
            budget,
        }),
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
        assert!(check(&small, DEFAULT_MAX_STREAM_MEMORY).is_ok());
        // A source that cannot say its size counts the largest decoded frame.
        let media = nodes("media location=x.mp4 ! boxes format=synthetic");
        assert_eq!(estimate(&media).1, LARGEST_FRAME);
        let deep = nodes("media location=x.mp4 ! queue size=1000 ! boxes format=synthetic");
        let e = check(&deep, DEFAULT_MAX_STREAM_MEMORY).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("--max-stream-memory 2.0 GiB"), "{text}");
        assert!(text.contains("frames of at most 100663296 bytes"), "{text}");
    }
}
