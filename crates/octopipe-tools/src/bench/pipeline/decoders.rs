//! `octopipe bench decode`: the decoders alone, each stream count started each way
//! ([`DecodeStart`]), with the start and the steady state apart ([`decode_only`]):
//!
//! ```text
//! octopipe bench decode --codec h264,h265 --decoder nvdec --streams 1,96 --start one-pipeline,threads
//! ```
//!
//! The video is the one `bench pipeline` makes (the clip scaled to 1920x1080, `--seconds` of
//! 30 fps at `--bitrate`); every stream decodes the same file.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use super::decode_only::{decode_only, DecodeStart};
use super::settings::{BITRATE_KBPS, FPS};
use super::video::{encode_clip, Codec, Motion, TempFolder};
use crate::bench::error::BenchError;

/// What `octopipe bench decode` runs.
#[derive(Debug, Clone)]
pub struct DecodeBenchOptions {
    /// The clip folder (its `images/` are encoded).
    pub clip: PathBuf,
    /// Seconds of video a stream.
    pub seconds: f64,
    /// Stream counts.
    pub streams: Vec<usize>,
    /// Decoders: `cpu`, `nvdec`, `auto`.
    pub decoders: Vec<String>,
    /// Codecs, each its own video.
    pub codecs: Vec<Codec>,
    /// The videos' bitrate, kbit/s.
    pub bitrate: u32,
    /// The ways the streams start.
    pub starts: Vec<DecodeStart>,
    /// GPUs the streams spread over (empty: GPU 0).
    pub devices: Vec<usize>,
}

impl DecodeBenchOptions {
    /// 10 s of H.264 at the pipeline benchmark's bitrate, 1 and 16 NVDEC streams, started in
    /// one pipeline and from threads.
    pub fn new(clip: PathBuf) -> Self {
        DecodeBenchOptions {
            clip,
            seconds: 10.0,
            streams: vec![1, 16],
            decoders: vec!["nvdec".into()],
            codecs: vec![Codec::H264],
            bitrate: BITRATE_KBPS,
            starts: vec![DecodeStart::OnePipeline, DecodeStart::Threads],
            devices: Vec::new(),
        }
    }
}

const HEADER: &str = "| codec | decoder | streams | start | frames | first frame s: first / median / last stream | wall s | wall fps | steady fps | steady s | streams at 30 fps (steady) |\n|---|---|---:|---|---:|---|---:|---:|---:|---:|---:|\n";

/// Run every codec x decoder x stream count x start; the markdown table with its preamble.
/// `progress` gets a line as each run starts.
pub fn decode_bench(
    opts: &DecodeBenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<String, BenchError> {
    if !(opts.seconds > 0.0 && opts.seconds <= 600.0) {
        return Err(BenchError::Options(format!(
            "--seconds {}: give 0 < seconds <= 600",
            opts.seconds
        )));
    }
    if opts.streams.is_empty() || opts.streams.iter().any(|&n| n == 0 || n > 1024) {
        return Err(BenchError::Options(
            "--streams: give counts from 1 to 1024".into(),
        ));
    }
    let folder = TempFolder::new()?;
    let frames = (opts.seconds * FPS as f64).round().max(1.0) as u64;
    let mut out = format!(
        "Decoders alone: {frames} frames a stream of 1920x1080 at {} kbit/s, every stream the same file, into fakesink. first frame = seconds from the start to a stream's first decoded frame; wall fps = all frames over the wall time (the start included); steady fps = the frames decoded while every stream decoded (from the last stream's first frame to the first stream's last), over that window.\n\n{HEADER}",
        opts.bitrate
    );
    for &codec in &opts.codecs {
        let video = folder.path().join(format!("clip-{}.mp4", codec.name()));
        progress(&format!(
            "encoding {frames} frames of {} ...",
            codec.title()
        ));
        let t = Instant::now();
        encode_clip(
            &opts.clip.join("images"),
            &video,
            (1920, 1080),
            frames,
            codec,
            opts.bitrate,
            Motion::Still,
        )?;
        progress(&format!("encoded in {:.1} s", t.elapsed().as_secs_f64()));
        for decoder in &opts.decoders {
            for &streams in &opts.streams {
                for &start in &opts.starts {
                    progress(&format!(
                        "decode: {} {decoder} streams={streams} start={} ...",
                        codec.name(),
                        start.name()
                    ));
                    let head = format!(
                        "| {} | {decoder} | {streams} | {} |",
                        codec.title(),
                        start.name()
                    );
                    match decode_only(&video, codec, decoder, streams, &opts.devices, start) {
                        Ok(d) => {
                            let [a, b, c] = d.first_frame_s;
                            let head = match d.ahead_s > 0.0 {
                                true => format!(
                                    "{} (contexts made {:.2} s ahead) |",
                                    head.trim_end_matches(" |"),
                                    d.ahead_s
                                ),
                                false => head,
                            };
                            let _ = writeln!(
                                out,
                                "{head} {} | {a:.2} / {b:.2} / {c:.2} | {:.2} | {:.1} | {} | {:.2} | {} |",
                                d.frames,
                                d.wall_s,
                                d.wall_fps(),
                                d.steady_fps.map_or("-".into(), |f| format!("{f:.1}")),
                                d.steady_s,
                                d.steady_fps
                                    .map_or("-".into(), |f| format!("{:.0}", f / FPS as f64)),
                            );
                        }
                        Err(e) => {
                            // The whole reason on one line (GStreamer's debug text says why a
                            // stream stopped on its second line).
                            let e = e.split_whitespace().collect::<Vec<_>>().join(" ");
                            let e = e.replace('|', "\\|");
                            let _ = writeln!(out, "{head} - | - | - | - | - | - | failed: {e} |");
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}
