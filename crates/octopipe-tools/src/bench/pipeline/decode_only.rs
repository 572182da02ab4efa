//! The decode-only ceiling of a row: the same streams of the same video decoded by GStreamer
//! alone, nothing after the decoder but a `fakesink`:
//!
//! ```text
//! filesrc location=clip.mp4 ! qtdemux ! h264parse ! avdec_h264 ! fakesink sync=false    (cpu)
//! filesrc location=clip.mp4 ! qtdemux ! h264parse ! nvh264dec
//!   ! video/x-raw(memory:CUDAMemory) ! fakesink sync=false                             (nvdec)
//! filesrc location=clip.mp4 ! decodebin ! fakesink sync=false                           (auto)
//! ```
//!
//! (H.265: `h265parse`, `avdec_h265`, `nvh265dec`; the CPU decoder is the first of libav's and
//! `openh264dec` (`libde265dec` for H.265) that is installed; GPU N's NVDEC decoder is `nvh264deviceNdec`,
//! stream `i` of N on the GPU the batch stage gives it).
//!
//! Every decoded frame's time is recorded, so a run gives apart what its wall time mixes:
//! - **the start**: from the moment the streams are set playing to each stream's first frame
//!   (the first, the median and the last stream's), and
//! - **the steady state**: the frames of all streams per second while every stream decodes,
//!   from the last stream's first frame to the first stream's last frame. That is the rate
//!   the decoder gives a running pipeline, and what a row is compared with.
//!
//! How the streams start ([`DecodeStart`]) tells what serializes a start: one pipeline of every
//! branch (GStreamer's bin sets its children's states one after another), one pipeline a stream
//! set playing one after another from one thread (as a runner opening its sources in turn), or
//! from a thread each at the same moment, sharing the device's primary CUDA context (as
//! octopipe's NVDEC sources do), each decoder with a context of its own, or the decoders spread
//! over a few contexts made ahead (so that a start that takes turns within a context shows
//! apart from one that takes turns in the driver).

use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::video::{error_text, Codec};

/// The longest a decode-only run may take, seconds.
const TIMEOUT_S: u64 = 600;

/// How a decode-only run starts its streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeStart {
    /// Every stream a branch of one pipeline, set playing once.
    OnePipeline,
    /// A pipeline a stream, set playing one after another from one thread; NVDEC decoders
    /// share the device's primary context.
    Serial,
    /// A pipeline a stream, each set playing from a thread of its own at the same moment;
    /// NVDEC decoders share the device's primary context.
    Threads,
    /// As [`Threads`](Self::Threads), each NVDEC decoder making a CUDA context of its own.
    ThreadsOwnContext,
    /// As [`Threads`](Self::Threads), the NVDEC decoders spread over [`AHEAD_CONTEXTS`] CUDA
    /// contexts that the first streams' decoders made before the start (timed apart).
    ThreadsContextsAhead,
}

/// The contexts [`DecodeStart::ThreadsContextsAhead`] spreads the decoders over.
pub const AHEAD_CONTEXTS: usize = 4;

impl DecodeStart {
    /// Every way, in the order the benchmark runs them.
    pub const ALL: [DecodeStart; 5] = [
        DecodeStart::OnePipeline,
        DecodeStart::Serial,
        DecodeStart::Threads,
        DecodeStart::ThreadsOwnContext,
        DecodeStart::ThreadsContextsAhead,
    ];

    /// The name `--start` takes.
    pub fn name(self) -> &'static str {
        match self {
            DecodeStart::OnePipeline => "one-pipeline",
            DecodeStart::Serial => "serial",
            DecodeStart::Threads => "threads",
            DecodeStart::ThreadsOwnContext => "threads-own-context",
            DecodeStart::ThreadsContextsAhead => "threads-4-contexts",
        }
    }

    /// The way named `s` (as [`name`](Self::name) writes it).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// What a decode-only run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeOnly {
    /// Frames decoded, all streams.
    pub frames: u64,
    /// Seconds from the start to the end of the last stream.
    pub wall_s: f64,
    /// Seconds from the start to the first frame of the first, the median and the last stream.
    pub first_frame_s: [f64; 3],
    /// Frames per second of all streams while every stream decoded (`None` when the first
    /// stream ended before the last one's first frame: the video is shorter than the start).
    pub steady_fps: Option<f64>,
    /// The length of that window, seconds.
    pub steady_s: f64,
    /// Seconds spent before the start making the CUDA contexts the decoders then share
    /// ([`DecodeStart::ThreadsContextsAhead`]; 0 otherwise).
    pub ahead_s: f64,
}

impl DecodeOnly {
    /// Frames over the wall time, the start included (the figure the rows were once compared
    /// with).
    pub fn wall_fps(&self) -> f64 {
        self.frames as f64 / self.wall_s.max(1e-9)
    }

    /// The rate a running pipeline can take from the decoder: the steady state when there was
    /// one, else the wall-time figure.
    pub fn ceiling_fps(&self) -> f64 {
        self.steady_fps.unwrap_or_else(|| self.wall_fps())
    }
}

/// The launch lines of `streams` streams of `video` decoded by `decoder` (`cpu`, `nvdec`,
/// `auto`), one a stream, spread over `devices` as the batch stage spreads them (empty: GPU 0),
/// with the GPU of each.
pub fn decode_only_lines(
    video: &Path,
    codec: Codec,
    decoder: &str,
    streams: usize,
    devices: &[usize],
) -> Vec<(String, usize)> {
    let cpu = cpu_decoder(codec, |name| gst::ElementFactory::find(name).is_some());
    let k = devices.len().clamp(1, streams.max(1));
    let location = video.display().to_string().replace('"', "\\\"");
    (0..streams)
        .map(|i| {
            let gpu = devices.get(i * k / streams).copied().unwrap_or(0);
            let codec_name = codec.name();
            let decode = match decoder {
                "cpu" => format!("{} ! {cpu}", codec.parser()),
                "nvdec" => {
                    let element = match gpu {
                        0 => format!("nv{codec_name}dec"),
                        n => format!("nv{codec_name}device{n}dec"),
                    };
                    format!(
                        "{} ! {element} ! video/x-raw(memory:CUDAMemory)",
                        codec.parser()
                    )
                }
                _ => "decodebin".to_string(),
            };
            let demux = if decoder == "auto" { "" } else { "qtdemux ! " };
            let line = format!(
                "filesrc location=\"{location}\" ! {demux}{decode} ! fakesink name=s{i} sync=false"
            );
            (line, gpu)
        })
        .collect()
}

/// Streams' launch lines as the branches of one launch line ([`DecodeStart::OnePipeline`]).
fn one_pipeline(lines: &[(String, usize)]) -> String {
    lines.iter().map(|(line, _)| format!("{line}\n")).collect()
}

/// The CPU decoder of `codec`: the first of libav's and the other software decoders that
/// `exists`; libav's name when none is (its launch then says what is missing).
fn cpu_decoder(codec: Codec, exists: impl Fn(&str) -> bool) -> &'static str {
    let choices: &[&'static str] = match codec {
        Codec::H264 => &["avdec_h264", "openh264dec"],
        Codec::H265 => &["avdec_h265", "libde265dec"],
    };
    choices
        .iter()
        .copied()
        .find(|name| exists(name))
        .unwrap_or(choices[0])
}

/// Each decoded frame's stream and time.
type Marks = Arc<Mutex<Vec<(u32, Instant)>>>;

fn launch(text: &str) -> Result<gst::Pipeline, String> {
    gst::parse::launch(text)
        .map_err(|e| format!("{e}: {}", text.lines().next().unwrap_or_default()))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "not a pipeline".to_string())
}

/// Record every buffer reaching fakesink `s{i}` of `pipeline` as stream `stream`.
fn mark(pipeline: &gst::Pipeline, i: usize, stream: u32, marks: &Marks) -> Result<(), String> {
    let pad = pipeline
        .by_name(&format!("s{i}"))
        .and_then(|s| s.static_pad("sink"))
        .ok_or_else(|| format!("no fakesink s{i}"))?;
    let marks = marks.clone();
    pad.add_probe(gst::PadProbeType::BUFFER, move |_, _| {
        if let Ok(mut m) = marks.lock() {
            m.push((stream, Instant::now()));
        }
        gst::PadProbeReturn::Ok
    });
    Ok(())
}

/// Why pipeline `i` did not start: the error its bus holds, if any (waiting a second for one
/// posted from another thread).
fn not_started(i: usize, pipeline: &gst::Pipeline) -> String {
    let error = pipeline.bus().and_then(|bus| {
        bus.timed_pop_filtered(gst::ClockTime::from_seconds(1), &[gst::MessageType::Error])
    });
    match error.as_ref().map(|m| m.view()) {
        Some(gst::MessageView::Error(e)) => {
            format!("pipeline {i} did not start: {}", error_text(e))
        }
        _ => format!("pipeline {i} did not start"),
    }
}

/// Wait for `pipeline`'s end of stream (or its error) until `deadline`.
fn wait_eos(pipeline: &gst::Pipeline, deadline: Instant) -> Result<(), String> {
    let bus = pipeline.bus().ok_or("the pipeline has no bus")?;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(msg) = bus.timed_pop_filtered(
            gst::ClockTime::from_nseconds(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX)),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        ) else {
            return Err(format!("no end of stream in {TIMEOUT_S} s"));
        };
        match msg.view() {
            gst::MessageView::Eos(_) => return Ok(()),
            gst::MessageView::Error(e) => return Err(error_text(e)),
            _ => {}
        }
    }
}

/// Decode `streams` streams of `video` with `decoder` and nothing else, started as `start`
/// says: what it measured, or why it could not run.
pub fn decode_only(
    video: &Path,
    codec: Codec,
    decoder: &str,
    streams: usize,
    devices: &[usize],
    start: DecodeStart,
) -> Result<DecodeOnly, String> {
    gst::init().map_err(|e| format!("GStreamer could not be initialised: {e}"))?;
    let lines = decode_only_lines(video, codec, decoder, streams, devices);
    let marks: Marks = Arc::new(Mutex::new(Vec::with_capacity(streams * 512)));
    // The device's primary context, given to each pipeline as octopipe's sources give it. It is
    // kept until the pipelines have stopped: GStreamer's wrapper of it does not retain it, and a
    // released primary context is destroyed under the decoders (CUDA_ERROR_CONTEXT_IS_DESTROYED
    // when they open, then qtdemux's "Internal data stream error").
    let mut shared = std::collections::HashMap::new();
    let pipelines: Vec<gst::Pipeline> = match start {
        DecodeStart::OnePipeline => {
            let pipeline = launch(&one_pipeline(&lines))?;
            for i in 0..streams {
                mark(&pipeline, i, i as u32, &marks)?;
            }
            vec![pipeline]
        }
        _ => {
            let mut v = Vec::with_capacity(streams);
            for (i, (line, gpu)) in lines.iter().enumerate() {
                let pipeline = launch(line)?;
                mark(&pipeline, i, i as u32, &marks)?;
                let shares = !matches!(
                    start,
                    DecodeStart::ThreadsOwnContext | DecodeStart::ThreadsContextsAhead
                );
                if decoder == "nvdec" && shares {
                    if let std::collections::hash_map::Entry::Vacant(e) = shared.entry(*gpu) {
                        e.insert(
                            octopipe_sources::plugin::SharedCuda::new(*gpu)
                                .map_err(|e| e.to_string())?,
                        );
                    }
                    pipeline.set_context(shared[gpu].context());
                }
                v.push(pipeline);
            }
            v
        }
    };
    let ahead_s = match start == DecodeStart::ThreadsContextsAhead && decoder == "nvdec" {
        true => {
            let t = Instant::now();
            let gpus: Vec<usize> = lines.iter().map(|(_, gpu)| *gpu).collect();
            contexts_ahead(&pipelines, &gpus).inspect_err(|_| {
                for p in &pipelines {
                    let _ = p.set_state(gst::State::Null);
                }
            })?;
            t.elapsed().as_secs_f64()
        }
        false => 0.0,
    };
    let t0 = Instant::now();
    let started: Result<(), String> = match start {
        DecodeStart::OnePipeline | DecodeStart::Serial => {
            pipelines.iter().enumerate().try_for_each(|(i, p)| {
                p.set_state(gst::State::Playing)
                    .map(|_| ())
                    .map_err(|_| not_started(i, p))
            })
        }
        DecodeStart::Threads
        | DecodeStart::ThreadsOwnContext
        | DecodeStart::ThreadsContextsAhead => {
            let go = Arc::new(Barrier::new(pipelines.len()));
            let results: Vec<bool> = std::thread::scope(|s| {
                let handles: Vec<_> = pipelines
                    .iter()
                    .map(|p| {
                        let go = go.clone();
                        s.spawn(move || {
                            go.wait();
                            p.set_state(gst::State::Playing).is_ok()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or(false))
                    .collect()
            });
            match results.iter().position(|ok| !*ok) {
                None => Ok(()),
                Some(i) => Err(not_started(i, &pipelines[i])),
            }
        }
    };
    let deadline = t0 + std::time::Duration::from_secs(TIMEOUT_S);
    let outcome = started.and_then(|()| pipelines.iter().try_for_each(|p| wait_eos(p, deadline)));
    let wall_s = t0.elapsed().as_secs_f64();
    for p in &pipelines {
        let _ = p.set_state(gst::State::Null);
    }
    drop(pipelines);
    drop(shared);
    outcome?;
    let marks = marks.lock().map_err(|_| "the marks' lock".to_string())?;
    Ok(DecodeOnly {
        ahead_s,
        ..summarize(&marks, streams, t0, wall_s)
    })
}

/// [`DecodeStart::ThreadsContextsAhead`]: the pipelines that make a context ([`ahead_plan`])
/// set ready at once, each from a thread (a decoder opening without a context makes one of its
/// own), then every other pipeline given the context its plan names.
fn contexts_ahead(pipelines: &[gst::Pipeline], gpus: &[usize]) -> Result<(), String> {
    let plan = ahead_plan(gpus);
    let makers: Vec<usize> = (0..plan.len()).filter(|&i| plan[i].is_none()).collect();
    let ready: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = makers
            .iter()
            .map(|&i| {
                let p = &pipelines[i];
                s.spawn(move || p.set_state(gst::State::Ready).is_ok())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .collect()
    });
    if let Some(at) = ready.iter().position(|ok| !*ok) {
        return Err(not_started(makers[at], &pipelines[makers[at]]));
    }
    let mut contexts = std::collections::HashMap::new();
    for &i in &makers {
        let context = cuda_context(&pipelines[i])
            .ok_or(format!("pipeline {i}'s decoder made no CUDA context"))?;
        contexts.insert(i, context);
    }
    for (p, maker) in pipelines.iter().zip(&plan) {
        if let Some(context) = maker.and_then(|m| contexts.get(&m)) {
            p.set_context(context);
        }
    }
    Ok(())
}

/// Which pipeline's context each pipeline takes (`gpus[i]` is pipeline `i`'s GPU): `None` for
/// the first [`AHEAD_CONTEXTS`] of each GPU (they make one), the others of that GPU the makers'
/// in turn.
fn ahead_plan(gpus: &[usize]) -> Vec<Option<usize>> {
    let mut makers: std::collections::HashMap<usize, Vec<usize>> = Default::default();
    let mut taken: std::collections::HashMap<usize, usize> = Default::default();
    gpus.iter()
        .enumerate()
        .map(|(i, gpu)| {
            let of_gpu = makers.entry(*gpu).or_default();
            if of_gpu.len() < AHEAD_CONTEXTS {
                of_gpu.push(i);
                return None;
            }
            let turn = taken.entry(*gpu).or_default();
            *turn += 1;
            Some(of_gpu[(*turn - 1) % of_gpu.len()])
        })
        .collect()
}

/// The CUDA context an element of `pipeline` made and told its bin of (`gst.cuda.context`).
fn cuda_context(pipeline: &gst::Pipeline) -> Option<gst::Context> {
    const TYPE: &str = "gst.cuda.context";
    pipeline.context(TYPE).or_else(|| {
        pipeline
            .iterate_recurse()
            .into_iter()
            .flatten()
            .find_map(|e| e.context(TYPE))
    })
}

/// The start and the steady state of `marks`, `streams` streams set playing at `t0`.
fn summarize(marks: &[(u32, Instant)], streams: usize, t0: Instant, wall_s: f64) -> DecodeOnly {
    let mut first = vec![None::<Instant>; streams];
    let mut last = vec![None::<Instant>; streams];
    for &(s, t) in marks {
        let s = s as usize;
        if s < streams {
            first[s] = Some(first[s].map_or(t, |f: Instant| f.min(t)));
            last[s] = Some(last[s].map_or(t, |l: Instant| l.max(t)));
        }
    }
    let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    let mut firsts: Vec<f64> = first.iter().map(|f| f.map_or(wall_s, secs)).collect();
    firsts.sort_by(f64::total_cmp);
    let first_frame_s = match firsts.len() {
        0 => [0.0; 3],
        n => [firsts[0], firsts[n / 2], firsts[n - 1]],
    };
    // The window in which every stream decoded: the last first frame to the first last frame.
    let all_on = first.iter().flatten().max().copied();
    let one_off = last.iter().flatten().min().copied();
    let (steady_fps, steady_s) = match (all_on, one_off) {
        (Some(a), Some(b)) if b > a && first.iter().all(Option::is_some) => {
            let n = marks.iter().filter(|(_, t)| *t > a && *t <= b).count();
            let d = (b - a).as_secs_f64();
            (Some(n as f64 / d), d)
        }
        _ => (None, 0.0),
    };
    DecodeOnly {
        frames: marks.len() as u64,
        wall_s,
        first_frame_s,
        steady_fps,
        steady_s,
        ahead_s: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_decoders_of_each_gpu_share_its_first_four_contexts_in_turn() {
        // Two GPUs, the streams spread as the batch stage spreads them: 0-5 on GPU 0, 6-9 on 1.
        let gpus = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1];
        let plan = ahead_plan(&gpus);
        let none = None;
        assert_eq!(
            plan,
            [
                none,
                none,
                none,
                none,
                Some(0),
                Some(1),
                none,
                none,
                none,
                none
            ]
        );
        let gpus = [0; 7];
        assert_eq!(
            ahead_plan(&gpus)[4..],
            [Some(0), Some(1), Some(2)],
            "the makers in turn"
        );
        assert_eq!(ahead_plan(&[3, 3]), [None, None]);
    }

    #[test]
    fn each_stream_decodes_on_its_gpu() {
        gst::init().unwrap();
        let v = Path::new("/t/c.mp4");
        let line = one_pipeline(&decode_only_lines(v, Codec::H265, "nvdec", 3, &[0, 1]));
        let lines: Vec<&str> = line.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("h265parse ! nvh265dec ! video/x-raw(memory:CUDAMemory)"));
        assert!(lines[1].contains("! nvh265dec !"), "{line}");
        assert!(lines[2].contains("! nvh265device1dec !"), "{line}");
        assert!(lines[2].ends_with("fakesink name=s2 sync=false"), "{line}");
        let each = decode_only_lines(v, Codec::H265, "nvdec", 3, &[0, 1]);
        assert_eq!(each.iter().map(|(_, g)| *g).collect::<Vec<_>>(), [0, 0, 1]);
        assert_eq!(
            cpu_decoder(Codec::H264, |n| n == "openh264dec"),
            "openh264dec"
        );
        assert_eq!(cpu_decoder(Codec::H265, |_| true), "avdec_h265");
        assert_eq!(cpu_decoder(Codec::H265, |_| false), "avdec_h265");
        for d in DecodeStart::ALL {
            assert_eq!(DecodeStart::parse(d.name()), Some(d));
        }
        assert_eq!(DecodeStart::parse("parallel"), None);
    }

    /// Stream 0 starts at once, stream 1 after 2 s (a slow start): over a 4 s run of 10 frames a
    /// second each, the wall figure mixes the start in; the steady state is the 1 s in which both
    /// decoded, 20 frames.
    #[test]
    fn the_start_is_kept_apart_from_the_steady_state() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut marks = Vec::new();
        for k in 0..30 {
            marks.push((0, at(100 * k)));
        }
        for k in 0..20 {
            marks.push((1, at(2000 + 100 * k)));
        }
        let d = summarize(&marks, 2, t0, 4.0);
        assert_eq!(d.frames, 50);
        assert_eq!(d.first_frame_s, [0.0, 2.0, 2.0]);
        // (2.0, 2.9]: stream 0's frames 2.1..2.9 (9) and stream 1's 2.1..2.9 (9).
        assert!((d.steady_s - 0.9).abs() < 1e-9, "{d:?}");
        assert!((d.steady_fps.unwrap() - 20.0).abs() < 1e-6, "{d:?}");
        assert!((d.wall_fps() - 12.5).abs() < 1e-9);
        // A stream that ends before another starts: no steady state, the wall figure stands.
        let marks = vec![(0, at(0)), (0, at(100)), (1, at(500)), (1, at(600))];
        let d = summarize(&marks, 2, t0, 1.0);
        assert_eq!(d.steady_fps, None);
        assert_eq!(d.ceiling_fps(), 4.0);
        // A stream that never decoded: no steady state, its first frame counted at the end.
        let d = summarize(&[(0, at(0)), (0, at(100))], 2, t0, 1.0);
        assert_eq!(d.steady_fps, None);
        assert_eq!(d.first_frame_s[2], 1.0);
    }
}
