//! What each stage thread runs: a source's pull loop, a stage's receive-process-send loop, and
//! what both log and report (slow calls, frames the decoder lost, thread start errors).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;

use super::edge::{Edge, Inbox, Travels};
use super::{Control, Expected, Fate, PipelineError, SourceEnd};
use crate::budget::Tally;
use crate::frame::{Frame, StageSlot};
use crate::source::FrameSource;
use crate::stage::Stage;
use crate::Error;

/// Run `f` with `working` set: the stage is in its own work.
pub(super) fn working<R>(flag: &AtomicBool, f: impl FnOnce() -> R) -> R {
    flag.store(true, Ordering::Relaxed);
    let r = f();
    flag.store(false, Ordering::Relaxed);
    r
}

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
    while !ctl.stop.load(Ordering::SeqCst) {
        match working(busy, || source.next_frame()) {
            Ok(Some(mut frame)) => {
                if let (true, Some((expected, i))) = (first, &learn) {
                    expected.learn(*i, source.as_ref());
                    first = false;
                }
                if frame.seq > next {
                    lost_before(&frame, frame.seq - next, edge.tally());
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

/// A stage call or send at least this long is logged (target `octopipe::slow`, debug level):
/// where a live pipeline's stalls come from.
pub(super) const SLOW_CALL: Duration = Duration::from_millis(10);

/// Log a stage's turn that took long: `work` (its call, after the item came) or `send` (waiting
/// for room downstream) of its `items` outputs.
pub(super) fn slow_call(stage: &str, work: Duration, send: Duration, items: usize) {
    if work >= SLOW_CALL || send >= SLOW_CALL {
        tracing::debug!(
            target: "octopipe::slow",
            "{stage}: call {:.1} ms, send of {items} item(s) {:.1} ms",
            work.as_secs_f64() * 1e3,
            send.as_secs_f64() * 1e3
        );
    }
}

/// Start `stage` on its own thread between `rx` and `tx`. Its failure fails the run, or, for a
/// stage of one stream alone, that stream.
pub(super) fn run_stage<I: Travels, O: Travels>(
    name: String,
    mut stage: Box<dyn Stage<I, O>>,
    mut rx: Inbox<I>,
    tx: Edge<O>,
    slot: StageSlot,
    (ctl, stream): (Arc<Control>, Option<(u32, Fate)>),
    busy: Arc<AtomicBool>,
) -> Result<thread::JoinHandle<()>, Error> {
    let thread_name = name.clone();
    let stage_name = name.clone();
    let body = move || {
        let _span =
            tracing::info_span!("stage", name = thread::current().name().unwrap_or("?")).entered();
        let mut out = Vec::new();
        let result = (|| -> Result<(), Error> {
            loop {
                let got = rx.recv(stage.deadline());
                let began = Instant::now();
                match got {
                    Ok(item) => working(&busy, || stage.process(item, &mut out))?,
                    Err(RecvTimeoutError::Timeout) => working(&busy, || stage.timeout(&mut out))?,
                    Err(RecvTimeoutError::Disconnected) => {
                        working(&busy, || stage.finish(&mut out))?;
                        tx.send_all(&mut out, slot);
                        return Ok(());
                    }
                }
                let worked = Instant::now();
                let items = out.len();
                if !tx.send_all(&mut out, slot) {
                    return Ok(());
                }
                slow_call(&stage_name, worked - began, worked.elapsed(), items);
            }
        })();
        match (result, &stream) {
            (Ok(()), _) => {}
            (Err(e), Some((id, fate))) => ctl.stream_failed(*id, fate, e),
            (Err(e), None) => ctl.fail(e),
        }
    };
    thread::Builder::new()
        .name(thread_name)
        .spawn(body)
        .map_err(|e| spawn_error(&name, e))
}

pub(super) fn spawn_error(name: &str, e: std::io::Error) -> Error {
    PipelineError::Spawn {
        stage: name.to_string(),
        source: e,
    }
    .into()
}
