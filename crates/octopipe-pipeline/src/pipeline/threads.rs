//! What a source's thread runs: its pull loop, and what it logs and reports (late frames,
//! frames the decoder lost). The other stages' threads are the core's
//! (`octopipe_core::stage::Running::start`), of their own payload types.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use super::control::{Control, Fate};
use super::ready::{Expected, SourceEnd};
use octopipe_core::budget::Tally;
use octopipe_core::frame::{Frame, StageSlot};
use octopipe_core::stage::edge::Edge;
use octopipe_core::stage::{working, SLOW_CALL};
use octopipe_sources::FrameSource;

/// The source thread: pull frames, stamp them, send them on. File input blocks when the edge is
/// full (backpressure, no drops); live input never waits: the oldest queued frame is dropped (and
/// counted) to make room. A source that fails ends its stream alone (`Control::stream_failed`).
#[allow(clippy::too_many_arguments)]
pub(super) fn run_source(
    mut source: Box<dyn FrameSource>,
    edge: Edge<Frame>,
    slot: StageSlot,
    ctl: &Control,
    busy: &AtomicBool,
    learn: Option<(Arc<Expected>, usize)>,
    end: &SourceEnd,
    (stream, fate): &(u32, Fate),
) {
    let _span =
        tracing::info_span!("stage", name = thread::current().name().unwrap_or("?")).entered();
    let mut first = true;
    let mut next = source.first_frame();
    // Frames the source left out as damaged, as counted at the last frame: a gap they explain
    // is not a loss.
    let mut skipped = 0;
    while !ctl.stop.load(Ordering::SeqCst) {
        match working(busy, || source.next_frame()) {
            Ok(Some(mut frame)) => {
                if let (true, Some((expected, i))) = (first, &learn) {
                    expected.learn(*i, source.as_ref());
                    first = false;
                }
                let now_skipped = source.skipped();
                let explained = now_skipped.saturating_sub(skipped);
                skipped = now_skipped;
                let gap = frame.seq.saturating_sub(next).saturating_sub(explained);
                if gap > 0 {
                    lost_before(&frame, gap, edge.tally());
                }
                next = frame.seq.saturating_add(1);
                let now = Instant::now();
                let late = now.saturating_duration_since(frame.times.arrival);
                if late >= SLOW_CALL {
                    tracing::debug!(
                        target: "octopipe::slow",
                        "{}: frame {} of stream {} came {:.1} ms after it was due",
                        frame.source,
                        frame.seq,
                        frame.stream,
                        late.as_secs_f64() * 1e3
                    );
                }
                frame.times.mark(slot, now);
                edge.tally().with(|t| t.add_in(frame.stream));
                if !edge.send(frame) {
                    break;
                }
            }
            Ok(None) if end.retire => {
                fate.ended.store(true, Ordering::SeqCst);
                if let Ok(mut retired) = ctl.retired.lock() {
                    retired.push(source);
                    return;
                }
                break;
            }
            Ok(None) => break,
            Err(e) => {
                ctl.stream_failed(*stream, fate, e.into());
                break;
            }
        }
    }
    source.stop();
    fate.ended.store(true, Ordering::SeqCst);
}

/// Count and log `lost` frames that the decoder lost just before `frame` (a gap in presentation
/// time): they never entered, so they are not among the frames in.
pub(super) fn lost_before(frame: &Frame, lost: u64, tally: &Tally) {
    tally.with(|t| t.lose_frames(frame.stream, lost));
    tracing::warn!(
        "{}: {lost} frame(s) lost by the decoder (pts gap): frames {}..={} of stream {} are missing before the frame at pts {}",
        frame.source,
        frame.seq - lost,
        frame.seq - 1,
        frame.stream,
        frame
            .pts
            .map_or("?".to_string(), |p| format!("{:.3} s", p.as_secs_f64())),
    );
}
