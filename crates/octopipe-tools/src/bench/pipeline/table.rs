//! The whole benchmark ([`pipeline`]): the video made (or the image streams found), every run
//! (or the live search), the decode-only ceilings, and the markdown table with its preamble.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Instant;

use super::compute::{default_backend, Compute};
use super::decode_only::{decode_only, DecodeStart};
use super::detector;
use super::images::ImageStreams;
use super::options::PipelineBenchOptions;
use super::run::{self, description, run_one, RunResult};
use super::search::search_streams;
use super::settings::{DECODER_BOUND, FPS, GPU_SAMPLE_MS, KEY_INT};
use super::spec::RunSpec;
use super::video::encode_clip;
use super::video::{keep_copy, TempFolder};
use crate::bench::error::BenchError;
use octopipe_onnx::detect::DetectEngine;

/// Run the benchmark: encode the video, run every combination (or, live, search each
/// decoder and execution provider's most streams), and return the markdown table with its
/// preamble. `progress` gets a line as each step starts and ends.
pub fn pipeline(
    opts: &PipelineBenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<String, BenchError> {
    opts.check()?;
    let folder = TempFolder::new()?;
    let video = folder.path().join("clip.mp4");
    let images = match &opts.images {
        Some(dir) => Some(ImageStreams::find(dir)?.with_frames(opts.frames_per_stream())),
        None => None,
    };
    let per_stream = images
        .as_ref()
        .map_or(opts.frames_per_stream(), ImageStreams::frames_per_stream);
    let mut encode_s = 0.0;
    if images.is_none() {
        progress(&format!(
            "encoding {per_stream} frames of {}x{} {} from {} ...",
            opts.size.0,
            opts.size.1,
            opts.codec.title(),
            opts.clip.display()
        ));
        let t = Instant::now();
        encode_clip(
            &opts.clip.join("images"),
            &video,
            opts.size,
            per_stream,
            opts.codec,
            opts.bitrate,
            opts.motion,
        )?;
        encode_s = t.elapsed().as_secs_f64();
        progress(&format!("encoded in {encode_s:.1} s"));
        if let Some(keep) = &opts.keep_video {
            keep_copy(&video, keep)?;
        }
    }
    // The process's CUDA start (driver, primary context: seconds) belongs to no run: the
    // context is made once here and kept for the whole benchmark.
    let _cuda = octopipe_cuda::available()
        .ok()
        .and_then(|()| cudarc::driver::CudaContext::new(0).ok());

    let specs = |streams: usize| -> Vec<RunSpec> {
        let mut v = Vec::new();
        for decoder in &opts.decoders {
            for &ep in &opts.eps {
                v.push(RunSpec {
                    streams,
                    decoder: decoder.clone(),
                    ep,
                    backend: opts.backend.unwrap_or(default_backend(decoder, ep)),
                    boxes: opts.boxes,
                    batch_frames: opts.batch_frames,
                    workers: opts.workers,
                    gather: opts.gather.clone(),
                    live: opts.live,
                    devices: opts.devices.clone(),
                    detector: opts.detector.clone(),
                    images: images.clone(),
                    classifiers: opts.classifiers,
                    reinfer: opts.reinfer,
                    preprocess_props: opts.preprocess_props.clone(),
                    classify_props: opts.classify_props.clone(),
                    budget_ms: opts.budget_ms,
                });
            }
        }
        v
    };
    let first = specs(if opts.live { 1 } else { opts.streams[0] })
        .into_iter()
        .next()
        .expect("checked: at least one decoder and ep");
    let mut out = preamble(opts, per_stream, encode_s, &first);
    out.push_str(TABLE_HEADER);

    // The decode-only ceiling of each stream count and decoder (video streams; a live row is
    // compared by the rate its streams need, 30 fps each).
    let mut ceilings: HashMap<(usize, String), Option<f64>> = HashMap::new();
    let mut ceiling = |spec: &RunSpec, progress: &mut dyn FnMut(&str)| -> Option<f64> {
        if !opts.decode_only || spec.images.is_some() {
            return None;
        }
        let key = (spec.streams, spec.decoder.clone());
        *ceilings.entry(key).or_insert_with(|| {
            progress(&format!(
                "decode only: streams={} decoder={} ...",
                spec.streams, spec.decoder
            ));
            // One pipeline a stream, set playing together, as a running pipeline's sources.
            match decode_only(
                &video,
                opts.codec,
                &spec.decoder,
                spec.streams,
                &spec.devices,
                DecodeStart::Threads,
            ) {
                Ok(d) => {
                    progress(&format!(
                        "  decode only: {} in steady state ({:.1} over the wall time); every stream's first frame after {:.2} s (first {:.2} s, median {:.2} s)",
                        d.steady_fps
                            .map_or("no steady state".to_string(), |f| format!("{f:.1} fps")),
                        d.wall_fps(),
                        d.first_frame_s[2],
                        d.first_frame_s[0],
                        d.first_frame_s[1],
                    ));
                    Some(d.ceiling_fps())
                }
                Err(e) => {
                    progress(&format!("  decode only failed: {e}"));
                    None
                }
            }
        })
    };

    let budget_ms = opts.p99_ms.unwrap_or(1e3 / FPS as f64);
    // The detector model alone, per execution provider and batch size.
    let mut alone: HashMap<(Compute, usize), Option<f64>> = HashMap::new();
    let mut run = |spec: &RunSpec, out: &mut String| -> RunResult {
        progress(&format!(
            "run: streams={} decoder={} ep={} preprocess={}{} ...",
            spec.streams,
            spec.decoder,
            spec.ep.name(),
            spec.backend.name(),
            if spec.live { " live" } else { "" }
        ));
        let decode_fps = ceiling(spec, progress);
        let mut r = run_one(spec, &video, &opts.model, budget_ms);
        r.decode_only = decode_fps;
        if let (Some(d), Some(stats)) = (&spec.detector, r.detect) {
            let rows = stats.call_rows.round().max(1.0) as usize;
            let of_model = match opts.detector_alone {
                false => None,
                true => *alone.entry((spec.ep, rows)).or_insert_with(|| {
                    progress(&format!("the detector alone at batch {rows} ..."));
                    let config = run::detect_config(spec, d);
                    match config.engine {
                        DetectEngine::Octopipe => {
                            crate::bench::engine_throughput(&d.model, config.device, rows, 30).ok()
                        }
                        _ => {
                            let ep = detector::ep(spec);
                            crate::bench::model_throughput(&d.model, ep, config.cuda, rows, 30).ok()
                        }
                    }
                }),
            };
            r.detect_note = Some(detector::note(&stats, r.detectors, of_model));
        }
        let row = table_row(&r, per_stream, budget_ms);
        progress(row.trim_end());
        let stages: Vec<String> = r
            .stages
            .iter()
            .map(|(name, p50, p99)| format!("{name} {p50:.2}/{p99:.2}"))
            .collect();
        progress(&format!("  stage p50/p99 ms: {}", stages.join(", ")));
        if !r.drops.is_empty() {
            let drops: Vec<String> = r
                .drops
                .iter()
                .map(|(why, n)| format!("{n} {why}"))
                .collect();
            progress(&format!("  dropped: {}", drops.join(", ")));
        }
        if let Some(l) = r.lateness.as_ref().filter(|l| l.frames > 0) {
            progress(&format!("  through: {}", l.through()));
            if spec.live {
                progress(&format!("  late: {}", l.line(budget_ms)));
                progress(&format!("  start: {}", l.start()));
            }
        }
        out.push_str(&row);
        r
    };

    if !opts.live {
        for &n in &opts.streams {
            for spec in specs(n) {
                run(&spec, &mut out);
            }
        }
        return Ok(out);
    }
    if !opts.live_streams.is_empty() {
        for &n in &opts.live_streams {
            for spec in specs(n) {
                run(&spec, &mut out);
            }
        }
        return Ok(out);
    }
    let mut answers = Vec::new();
    for spec in specs(1) {
        let held = search_streams(opts.max_streams, |n| {
            let spec = RunSpec {
                streams: n,
                ..spec.clone()
            };
            run(&spec, &mut out).held(budget_ms)
        });
        answers.push((spec, held));
    }
    out.push('\n');
    for (spec, held) in answers {
        let _ = writeln!(
            out,
            "most streams held live (p99 < {budget_ms:.1} ms, nothing dropped), decoder={} ep={} preprocess={}: {held}{}",
            spec.decoder,
            spec.ep.name(),
            spec.backend.name(),
            if held == opts.max_streams { " (the --max-streams bound)" } else { "" }
        );
    }
    Ok(out)
}

const TABLE_HEADER: &str = "| streams | decoder | ep | preprocess | frames | fps | p50 ms | p99 ms | CPU cores busy | GPU util % | GPU mem MiB | dropped | decode-only fps | % of decode-only | note |\n|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";

/// What was run, how, and the first run's description.
fn preamble(
    opts: &PipelineBenchOptions,
    per_stream: u64,
    encode_s: f64,
    first: &RunSpec,
) -> String {
    let mut out = String::new();
    let (w, h) = opts.size;
    let input = match &first.images {
        Some(i) => format!(
            "{per_stream} frames per stream: the {} JPEG files of {} played {} time{} (images decoder=cpu|nvjpeg|auto), {}",
            i.files,
            i.images.display(),
            i.loops,
            if i.loops == 1 { "" } else { "s" },
            if i.annotations.is_some() {
                "their VisDrone annotations as boxes".to_string()
            } else {
                format!("{} synthetic boxes per frame", opts.boxes)
            }
        ),
        None => format!(
            "{per_stream} frames per stream ({} s at {FPS} fps) of {w}x{h} {} (the clip's JPEG frames {}; {} 4:2:0, speed-preset=fast, {} kbit/s, key-int-max={KEY_INT}; encoded in {encode_s:.1} s), {}",
            opts.seconds,
            opts.codec.title(),
            match opts.motion {
                super::Motion::Still => "scaled and looped".to_string(),
                super::Motion::Pan => format!(
                    "looped, each a {FPS}-frame shot of a camera panning across it, {} px right and {} px down a frame",
                    super::PAN_STEP.0,
                    super::PAN_STEP.1
                ),
            },
            match opts.codec {
                super::Codec::H264 => "x264enc High",
                super::Codec::H265 => "x265enc Main",
            },
            opts.bitrate,
            match &opts.detector {
                Some(_) => "boxes from the detector, tracked".to_string(),
                None => format!("{} synthetic boxes per frame", opts.boxes),
            }
        ),
    };
    let _ = writeln!(
        out,
        "Whole pipeline: {input}, one shared batch (max-frames = min(streams, {})), {} classifier stage{}{}, {}.",
        opts.batch_frames,
        opts.classifiers,
        if opts.classifiers == 1 { "" } else { "s one after the other" },
        match opts.reinfer {
            1 => String::new(),
            n => format!(
                " (a tracked box classified once every {n} frames and when its size changes by more than 25% a side, its track's label kept in between: reinfer-interval={n})"
            ),
        },
        if opts.live {
            "played live at 30 fps (edges drop the oldest), each decoder and ep searched for the most streams held"
        } else {
            "file mode (sources wait for the pipeline: nothing dropped)"
        }
    );
    let _ = writeln!(
        out,
        "{} CPU cores; fps = processed frames of all streams / wall time; p50/p99 = end-to-end frame latency; CPU cores busy = process CPU time / wall time; GPU = nvidia-smi (the GPUs used, every {GPU_SAMPLE_MS} ms): mean utilization while running (over the GPUs), peak memory used (all processes, summed over the GPUs); '-' without nvidia-smi.",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    if opts.decode_only && first.images.is_none() {
        let _ = writeln!(
            out,
            "decode-only fps = the same streams decoded by GStreamer alone (the row's decoder into fakesink, a pipeline a stream set playing together, as fast as it goes), in steady state: the frames decoded while every stream decoded, the start left out (the progress lines give the start); % of decode-only = the row's fps over it ({}); at {:.0}% or more the decoder is the limit.",
            if opts.live { "live: the streams' 30 fps each, the rate they need" } else { "file mode" },
            DECODER_BOUND * 100.0
        );
    }
    let sets = match &first.images {
        Some(i) => {
            let mut sets = format!("--set images={}", i.images.display());
            if let Some(a) = &i.annotations {
                let _ = write!(sets, " --set annotations={}", a.display());
            }
            sets
        }
        None => "--set video=clip.mp4".to_string(),
    };
    let sets = match first.budget_ms {
        Some(ms) => format!("--budget-ms {ms} {sets}"),
        None => sets,
    };
    let _ = writeln!(
        out,
        "\nThe first run{}:\n\n    octopipe run {sets} --set model={} '{}'\n",
        if first.images.is_none() {
            " (keep the video with --keep-video clip.mp4)"
        } else {
            ""
        },
        opts.model.display(),
        description(first).replace('\n', " ").replace("   ", " ")
    );
    out
}

/// One markdown row.
fn table_row(r: &RunResult, per_stream: u64, budget_ms: f64) -> String {
    let s = &r.spec;
    let head = format!(
        "| {} | {} | {} | {} |",
        s.streams,
        s.decoder,
        s.ep.name(),
        s.backend.name()
    );
    if let Some(e) = &r.error {
        // The first line: a description error's caret lines do not fit a table cell.
        let e = e.lines().next().unwrap_or_default().replace('|', "\\|");
        let frames = if r.frames_in > 0 {
            r.processed.to_string()
        } else {
            "-".into()
        };
        return format!(
            "{head} {frames} | - | - | - | - | - | - | - | {} | - | failed: {e} |\n",
            r.decode_only.map_or("-".into(), |d| format!("{d:.1}"))
        );
    }
    let (util, mem) = match r.gpu {
        Some(g) => (
            format!("{:.0}", g.util_mean),
            format!("{:.0}", g.mem_peak_mib),
        ),
        None => ("-".into(), "-".into()),
    };
    let expected = per_stream * s.streams as u64;
    let mut notes = Vec::new();
    if r.frames_in != expected {
        notes.push(format!("{} of {expected} frames entered", r.frames_in));
    }
    if r.lost > 0 {
        notes.push(format!("{} lost by the decoder", r.lost));
    }
    if let Some(n) = &r.detect_note {
        notes.push(n.clone());
    }
    if r.reused > 0 {
        notes.push(format!(
            "crops for {} of {} boxes ({} took their track's label)",
            r.classified,
            r.classified + r.reused,
            r.reused
        ));
    }
    if let Some((stage, ms, total)) = r.lateness.as_ref().and_then(|l| l.bound()) {
        notes.push(format!("bound: {stage} ({ms:.1} of {total:.1} ms a frame)"));
    }
    if s.images.is_some() && s.decoder != "cpu" {
        notes.push(format!(
            "{} nvJPEG fallbacks (files decoded on the CPU)",
            r.fallbacks
        ));
    }
    // A live row needs its streams' frame rate of the decoder; a file row takes what it gets.
    let rate = if s.live {
        s.streams as f64 * FPS as f64
    } else {
        r.fps
    };
    let (ceiling, share) = match r.decode_only {
        Some(d) if d > 0.0 => {
            let share = rate / d;
            if share >= DECODER_BOUND {
                notes.push(format!(
                    "at {:.0}% of the decoders' steady state",
                    share * 100.0
                ));
            }
            (format!("{d:.1}"), format!("{:.0}", share * 100.0))
        }
        _ => ("-".into(), "-".into()),
    };
    if s.live {
        notes.push(if r.held(budget_ms) {
            "held".to_string()
        } else {
            "not held".to_string()
        });
    }
    format!(
        "{head} {} | {:.1} | {:.1} | {:.1} | {:.2} | {util} | {mem} | {} | {ceiling} | {share} | {} |\n",
        r.processed,
        r.fps,
        r.p50_ms,
        r.p99_ms,
        r.cores_busy,
        r.dropped,
        notes.join("; ")
    )
}
