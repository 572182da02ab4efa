//! `octopipe bench messages`: the size of the broker sinks' messages (docs/messages.md) on real
//! and synthetic frames, and, given a broker, how many a second go through it.
//!
//! The sizes are those of the payloads the `mqtt` and `zenoh` sinks publish (the same
//! [`Messages`] serialization), for the shared clip's annotated boxes, classified, and for 28
//! synthetic boxes on 1080p frames; the broker rows run a file-mode pipeline into
//! `mqtt port=PORT` and read its report.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use octopipe_core::error::Error;
use octopipe_core::stage::PropChoice;
use octopipe_pipeline::pipeline::Pipeline;
use octopipe_stages::sink::message::{Message, Messages, Per};

/// What `octopipe bench messages` runs.
#[derive(Debug, Clone)]
pub struct MessagesOptions {
    /// The clip folder (`images/`, `annotations/`).
    pub clip: PathBuf,
    /// The classifier.
    pub model: PathBuf,
    /// An MQTT broker on 127.0.0.1 to time (none: sizes only).
    pub mqtt_port: Option<u16>,
    /// Frames of the broker runs.
    pub frames: u32,
}

/// Sizes of one kind of message.
struct Sizes {
    what: &'static str,
    per: Per,
    bytes: Vec<usize>,
    /// Frames they came from.
    frames: usize,
}

/// The messages of a pipeline's batches (it ends in `appsink`), per frame and per object.
fn sizes(what: &'static str, text: &str) -> Result<[Sizes; 2], Error> {
    let mut pipeline = Pipeline::from_description(text, &HashMap::new())?;
    let batches = pipeline.batches(64);
    let run = std::thread::spawn(move || pipeline.run());
    let mut per = [Per::Frame, Per::Object].map(|per| {
        let sizes = Sizes {
            what,
            per,
            bytes: Vec::new(),
            frames: 0,
        };
        (Messages::new(per), sizes)
    });
    let mut out: Vec<Message> = Vec::new();
    for batch in batches {
        for (messages, sizes) in &mut per {
            messages.of(&batch, &mut out).map_err(|e| {
                octopipe_stages::sink::SinkError::network("bench messages", e.to_string())
            })?;
            sizes.frames += batch.frames.iter().filter(|f| f.part.is_last()).count();
            sizes.bytes.extend(out.drain(..).map(|m| m.payload.len()));
        }
    }
    let outcome = run
        .join()
        .map_err(|_| octopipe_core::error::PipelineError::Panic("bench messages".into()))?;
    if let Some(e) = outcome.error {
        return Err(e);
    }
    Ok(per.map(|(_, sizes)| sizes))
}

/// The table of message sizes, and of broker runs when a broker is given.
pub fn messages(opts: &MessagesOptions) -> Result<String, Error> {
    let (clip, model) = (opts.clip.display(), opts.model.display());
    let classify = format!("classify model={model} labels=person,two-wheeler,car,large-vehicle");
    // The frames of the broker runs, unclassified.
    let broker_frames = |frames: u32| {
        format!(
            "testsrc width=640 height=360 num-buffers={frames} ! boxes format=synthetic count=28"
        )
    };
    let runs = [
        (
            "clip, annotated boxes, classified",
            format!(
                "images location={clip}/images framerate=30 ! boxes format=det location={clip}/annotations \
                 ! {classify} ! appsink"
            ),
        ),
        (
            "1080p, 28 synthetic boxes, classified",
            format!(
                "testsrc width=1920 height=1080 num-buffers=90 ! boxes format=synthetic count=28 \
                 ! {classify} ! appsink"
            ),
        ),
        (
            "640x360, 28 synthetic boxes (the broker runs)",
            format!("{} ! appsink", broker_frames(90)),
        ),
    ];
    let mut s = String::new();
    s += "| frames | per | messages | objects a frame | bytes p50 | bytes mean | bytes max | kB/s per 30 fps stream |\n";
    s += "|---|---|---:|---:|---:|---:|---:|---:|\n";
    let mut broker_bytes = 0.0;
    for (what, text) in &runs {
        let [frame, object] = sizes(what, text)?;
        broker_bytes = frame.bytes.iter().sum::<usize>() as f64 / frame.bytes.len().max(1) as f64;
        let objects = object.bytes.len() as f64 / frame.frames.max(1) as f64;
        for mut sz in [frame, object] {
            sz.bytes.sort_unstable();
            let n = sz.bytes.len().max(1);
            let total: usize = sz.bytes.iter().sum();
            let per_frame = total as f64 / sz.frames.max(1) as f64;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {objects:.1} | {} | {:.0} | {} | {:.1} |",
                sz.what,
                sz.per.as_str(),
                sz.bytes.len(),
                sz.bytes.get(n / 2).copied().unwrap_or(0),
                total as f64 / n as f64,
                sz.bytes.last().copied().unwrap_or(0),
                per_frame * 30.0 / 1000.0,
            );
        }
    }
    if let Some(port) = opts.mqtt_port {
        s += "\n| broker run (per frame) | qos | frames | seconds | messages/s | MB/s | report |\n";
        s += "|---|---|---:|---:|---:|---:|---|\n";
        for qos in [1, 0] {
            let text = format!(
                "{} ! mqtt port={port} qos={qos} flush-timeout=30",
                broker_frames(opts.frames)
            );
            let outcome = Pipeline::from_description(&text, &HashMap::new())?.run();
            if let Some(e) = outcome.error {
                return Err(e);
            }
            let r = &outcome.report;
            let line = r.extra.iter().find(|l| l.starts_with("mqtt ")).cloned();
            let _ = writeln!(
                s,
                "| 640x360, 28 synthetic boxes | {qos} | {} | {:.2} | {:.0} | {:.1} | {} |",
                r.processed,
                r.wall.as_secs_f64(),
                r.fps(),
                r.fps() * broker_bytes / 1e6,
                line.unwrap_or_default()
            );
        }
    }
    Ok(s)
}
