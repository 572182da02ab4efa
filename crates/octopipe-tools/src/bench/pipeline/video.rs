//! The benchmark's input: the clip's frames scaled and encoded to H.264 (`x264enc`) or H.265
//! (`x265enc`) at run time, in a temporary folder of its own (and a copy kept on request, never
//! over an existing file).

use std::path::{Path, PathBuf};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use super::settings::{FPS, KEY_INT};
use crate::bench::error::BenchError;

/// The benchmark video's codec (`--codec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// H.264 by `x264enc`, High profile 4:2:0 (NVDEC refuses High 4:4:4).
    H264,
    /// H.265 by `x265enc`, Main profile 4:2:0.
    H265,
}

impl Codec {
    /// The name `--codec` takes: `h264` or `h265`.
    pub fn name(self) -> &'static str {
        match self {
            Codec::H264 => "h264",
            Codec::H265 => "h265",
        }
    }

    /// Parse `h264` or `h265`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "h264" => Some(Codec::H264),
            "h265" => Some(Codec::H265),
            _ => None,
        }
    }

    /// How the preamble names it.
    pub fn title(self) -> &'static str {
        match self {
            Codec::H264 => "H.264",
            Codec::H265 => "H.265",
        }
    }

    /// The encoder, its caps and parser, as a launch line writes them, at `kbps`.
    fn encoder(self, kbps: u32) -> String {
        match self {
            Codec::H264 => format!(
                "x264enc speed-preset=fast key-int-max={KEY_INT} bitrate={kbps} ! video/x-h264,profile=high ! h264parse"
            ),
            Codec::H265 => format!(
                "x265enc speed-preset=fast key-int-max={KEY_INT} bitrate={kbps} ! video/x-h265,profile=main ! h265parse"
            ),
        }
    }

    /// The GStreamer package with the encoder (Debian's name).
    fn package(self) -> &'static str {
        match self {
            Codec::H264 => "gstreamer1.0-plugins-ugly",
            Codec::H265 => "gstreamer1.0-plugins-bad",
        }
    }

    /// The parser element of the coded stream.
    pub(super) fn parser(self) -> &'static str {
        match self {
            Codec::H264 => "h264parse",
            Codec::H265 => "h265parse",
        }
    }
}

/// Encode `frames` frames of the images in `images` (file-name order, looped) scaled to `size`
/// as 30 fps `codec` at `kbps` kbit/s in an mp4 at `out`. The images are decoded and scaled
/// once, then pushed to the encoder in turn.
pub fn encode_clip(
    images: &Path,
    out: &Path,
    size: (u32, u32),
    frames: u64,
    codec: Codec,
    kbps: u32,
) -> Result<(), BenchError> {
    gst::init().map_err(|e| encode_error(format!("GStreamer could not be initialised: {e}")))?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(images)
        .map_err(|e| encode_error(format!("{}: {e}", images.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.eq_ignore_ascii_case("jpg") || e.eq_ignore_ascii_case("jpeg"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(encode_error(format!(
            "{}: no JPEG images (*.jpg)",
            images.display()
        )));
    }
    let raw = decode_scaled(&files, size)?;
    encode_raw(&raw, out, size, frames, codec, kbps)
}

/// The JPEG `files` decoded and scaled (stretched) to `size`, as I420 buffers.
fn decode_scaled(files: &[PathBuf], (w, h): (u32, u32)) -> Result<Vec<gst::Buffer>, BenchError> {
    let (pipeline, src, sink) = launch(&format!(
        "appsrc name=src caps=image/jpeg,framerate={FPS}/1 format=time ! jpegdec ! videoconvert ! videoscale add-borders=false ! video/x-raw,format=I420,width={w},height={h},pixel-aspect-ratio=1/1 ! appsink name=sink sync=false"
    ))?;
    let sink = sink
        .and_then(|s| s.downcast::<gst_app::AppSink>().ok())
        .ok_or_else(|| encode_error("no appsink in the decode pipeline".into()))?;
    start(&pipeline)?;
    let mut buffers = Vec::with_capacity(files.len());
    for file in files {
        let bytes =
            std::fs::read(file).map_err(|e| encode_error(format!("{}: {e}", file.display())))?;
        src.push_buffer(gst::Buffer::from_mut_slice(bytes))
            .map_err(|e| encode_error(format!("decoding {}: {e:?}", file.display())))?;
        // One in, one out: the scaled frame of this image (or the bus says why not).
        let sample = sink
            .pull_sample()
            .map_err(|_| bus_error(&pipeline, &format!("decoding {}", file.display())))?;
        let buffer = sample
            .buffer_owned()
            .ok_or_else(|| encode_error(format!("{}: a sample with no buffer", file.display())))?;
        buffers.push(buffer);
    }
    let _ = src.end_of_stream();
    let _ = pipeline.set_state(gst::State::Null);
    Ok(buffers)
}

/// `frames` of `raw` (in turn) at 30 fps through `codec`'s encoder into an mp4 at `out`.
fn encode_raw(
    raw: &[gst::Buffer],
    out: &Path,
    (w, h): (u32, u32),
    frames: u64,
    codec: Codec,
    kbps: u32,
) -> Result<(), BenchError> {
    let (pipeline, src, sink) = launch_with(
        &format!(
            "appsrc name=src caps=video/x-raw,format=I420,width={w},height={h},framerate={FPS}/1,pixel-aspect-ratio=1/1 format=time block=true max-buffers=4 ! {} ! mp4mux ! filesink name=sink",
            codec.encoder(kbps)
        ),
        codec.package(),
    )?;
    let location = out
        .to_str()
        .ok_or_else(|| encode_error(format!("{}: not a UTF-8 path", out.display())))?;
    sink.ok_or_else(|| encode_error("no filesink in the encode pipeline".into()))?
        .set_property("location", location);
    start(&pipeline)?;
    let interval = gst::ClockTime::from_nseconds(1_000_000_000 / FPS as u64);
    for i in 0..frames {
        let mut buffer = raw[(i % raw.len() as u64) as usize].copy();
        {
            let b = buffer.make_mut();
            b.set_pts(gst::ClockTime::from_nseconds(
                i * 1_000_000_000 / FPS as u64,
            ));
            b.set_dts(gst::ClockTime::NONE);
            b.set_duration(interval);
        }
        if src.push_buffer(buffer).is_err() {
            return Err(bus_error(&pipeline, "encoding"));
        }
    }
    let _ = src.end_of_stream();
    let bus = pipeline
        .bus()
        .ok_or_else(|| encode_error("the encode pipeline has no bus".into()))?;
    let done = loop {
        let Some(msg) = bus.timed_pop_filtered(
            gst::ClockTime::from_seconds(120),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        ) else {
            break Err(encode_error("encoding: no end of stream in 120 s".into()));
        };
        match msg.view() {
            gst::MessageView::Eos(_) => break Ok(()),
            gst::MessageView::Error(e) => {
                break Err(encode_error(format!(
                    "encoding: {}{}",
                    e.error(),
                    e.debug().map(|d| format!(" ({d})")).unwrap_or_default()
                )))
            }
            _ => {}
        }
    };
    let _ = pipeline.set_state(gst::State::Null);
    done
}

/// A launched pipeline, its `appsrc name=src` and its element `name=sink`.
fn launch(
    text: &str,
) -> Result<(gst::Pipeline, gst_app::AppSrc, Option<gst::Element>), BenchError> {
    launch_with(text, "gstreamer1.0-plugins-good")
}

/// [`launch`], naming `package` as the one to install when an element is missing.
fn launch_with(
    text: &str,
    package: &str,
) -> Result<(gst::Pipeline, gst_app::AppSrc, Option<gst::Element>), BenchError> {
    let pipeline = gst::parse::launch(text)
        .map_err(|e| {
            encode_error(format!(
                "{e} (is the element installed? apt-get install {package}): {text}"
            ))
        })?
        .downcast::<gst::Pipeline>()
        .map_err(|_| encode_error(format!("not a pipeline: {text}")))?;
    let src = pipeline
        .by_name("src")
        .and_then(|s| s.downcast::<gst_app::AppSrc>().ok())
        .ok_or_else(|| encode_error(format!("no appsrc in: {text}")))?;
    let sink = pipeline.by_name("sink");
    Ok((pipeline, src, sink))
}

/// Set `pipeline` playing, or say why it cannot.
fn start(pipeline: &gst::Pipeline) -> Result<(), BenchError> {
    pipeline
        .set_state(gst::State::Playing)
        .map(|_| ())
        .map_err(|_| bus_error(pipeline, "starting"))
}

/// The error on `pipeline`'s bus (if any) after a step failed; the pipeline is stopped.
fn bus_error(pipeline: &gst::Pipeline, step: &str) -> BenchError {
    let detail = pipeline
        .bus()
        .and_then(|bus| bus.pop_filtered(&[gst::MessageType::Error]))
        .and_then(|msg| match msg.view() {
            gst::MessageView::Error(e) => Some(format!(
                "{}{}",
                e.error(),
                e.debug().map(|d| format!(" ({d})")).unwrap_or_default()
            )),
            _ => None,
        })
        .unwrap_or_else(|| "the pipeline stopped".into());
    let _ = pipeline.set_state(gst::State::Null);
    encode_error(format!("{step}: {detail}"))
}

fn encode_error(message: String) -> BenchError {
    BenchError::Encode(message)
}

/// Copy the video to `keep`, never over an existing file.
pub(super) fn keep_copy(video: &Path, keep: &Path) -> Result<(), BenchError> {
    let io =
        |e: std::io::Error| BenchError::Options(format!("--keep-video {}: {e}", keep.display()));
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(keep)
        .map_err(io)?;
    let mut from = std::fs::File::open(video).map_err(io)?;
    std::io::copy(&mut from, &mut to).map_err(io)?;
    Ok(())
}

/// A folder of its own under the system's temporary folder, removed with what it holds when
/// dropped. A new name is taken when one exists, so nothing of anyone else's is written over.
pub(super) struct TempFolder(PathBuf);

impl TempFolder {
    pub(super) fn new() -> Result<Self, BenchError> {
        let base = std::env::temp_dir();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        for i in 0..100u32 {
            let path = base.join(format!(
                "octopipe-bench-pipeline-{}-{stamp:x}-{i}",
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempFolder(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(BenchError::Encode(format!(
                        "cannot make a folder in {}: {e}",
                        base.display()
                    )))
                }
            }
        }
        Err(BenchError::Encode(format!(
            "cannot make a folder of its own in {}",
            base.display()
        )))
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
