//! The benchmark's input: the clip's frames scaled and encoded to H.264 (`x264enc`) or H.265
//! (`x265enc`) at run time, in a temporary folder of its own (and a copy kept on request, never
//! over an existing file).

use std::path::{Path, PathBuf};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

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

/// How the benchmark video moves (`--motion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Motion {
    /// Each image one frame, in turn: the clip's images are far apart in time, so a tracker
    /// keeps few tracks from one frame to the next.
    #[default]
    Still,
    /// Each image a one-second shot filmed by a camera panning across it ([`PAN_STEP`] pixels a
    /// frame), a cut between shots: objects move as in a drone's video and tracks last the
    /// shot, as a tracker and a classifier that reuses its tracks' labels see real video.
    Pan,
}

impl Motion {
    /// The name `--motion` takes.
    pub fn name(self) -> &'static str {
        match self {
            Motion::Still => "still",
            Motion::Pan => "pan",
        }
    }

    /// The motion named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Motion::Still, Motion::Pan]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

/// How far a [`Motion::Pan`] camera moves each frame: right, down (even, as I420's chroma is).
pub const PAN_STEP: (u32, u32) = (8, 4);

/// Encode `frames` frames of the images in `images` (file-name order, looped) scaled to `size`
/// as 30 fps `codec` at `kbps` kbit/s in an mp4 at `out`, moving as `motion` says. The images
/// are decoded and scaled once, then pushed to the encoder in turn (a pan's frames cut from
/// them).
pub fn encode_clip(
    images: &Path,
    out: &Path,
    size: (u32, u32),
    frames: u64,
    codec: Codec,
    kbps: u32,
    motion: Motion,
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
    match motion {
        Motion::Still => {
            let raw = decode_scaled(&files, size)?;
            encode_raw(out, size, frames, codec, kbps, |i| {
                Ok(raw[(i % raw.len() as u64) as usize].copy())
            })
        }
        Motion::Pan => {
            let shot = u64::from(FPS);
            let span = (
                size.0 + PAN_STEP.0 * (FPS - 1),
                size.1 + PAN_STEP.1 * (FPS - 1),
            );
            let raw = decode_scaled(&files, span)?;
            encode_raw(out, size, frames, codec, kbps, |i| {
                let k = (i % shot) as u32;
                let image = &raw[((i / shot) % raw.len() as u64) as usize];
                crop_i420(image, span, (PAN_STEP.0 * k, PAN_STEP.1 * k), size)
            })
        }
    }
}

/// The `size` window at `origin` (even) of `image`, an I420 frame of `span`, as an I420 frame.
fn crop_i420(
    image: &gst::Buffer,
    span: (u32, u32),
    origin: (u32, u32),
    size: (u32, u32),
) -> Result<gst::Buffer, BenchError> {
    let info = |(w, h): (u32, u32)| {
        gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, w, h)
            .build()
            .map_err(|e| encode_error(format!("I420 {w}x{h}: {e}")))
    };
    let (from_info, to_info) = (info(span)?, info(size)?);
    let from = gst_video::VideoFrameRef::from_buffer_ref_readable(image.as_ref(), &from_info)
        .map_err(|_| encode_error("a scaled frame could not be read".into()))?;
    let mut out = gst::Buffer::with_size(to_info.size())
        .map_err(|e| encode_error(format!("a {}x{} frame: {e}", size.0, size.1)))?;
    {
        let out = out.get_mut().expect("a new buffer is writable");
        let mut to = gst_video::VideoFrameRef::from_buffer_ref_writable(out, &to_info)
            .map_err(|_| encode_error("a cut frame could not be written".into()))?;
        for plane in 0..3u32 {
            // Luma at full size, each chroma plane at half.
            let shift = u32::from(plane > 0);
            let (x, y) = (origin.0 >> shift, origin.1 >> shift);
            let (w, h) = ((size.0 >> shift) as usize, (size.1 >> shift) as usize);
            let src_stride = from_info.stride()[plane as usize] as usize;
            let dst_stride = to_info.stride()[plane as usize] as usize;
            let src = from
                .plane_data(plane)
                .map_err(|e| encode_error(format!("plane {plane}: {e}")))?;
            let dst = to
                .plane_data_mut(plane)
                .map_err(|e| encode_error(format!("plane {plane}: {e}")))?;
            for row in 0..h {
                let at = (y as usize + row) * src_stride + x as usize;
                dst[row * dst_stride..row * dst_stride + w].copy_from_slice(&src[at..at + w]);
            }
        }
    }
    Ok(out)
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

/// `frames` frames, frame `i` of them `frame(i)` (I420 of `(w, h)`), at 30 fps through `codec`'s
/// encoder into an mp4 at `out`.
fn encode_raw(
    out: &Path,
    (w, h): (u32, u32),
    frames: u64,
    codec: Codec,
    kbps: u32,
    frame: impl Fn(u64) -> Result<gst::Buffer, BenchError>,
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
        let mut buffer = frame(i)?;
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
                break Err(encode_error(format!("encoding: {}", error_text(e))))
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

/// A bus's error message as one text: the error, then GStreamer's debug detail in brackets.
pub(super) fn error_text(e: &gst::message::Error) -> String {
    format!(
        "{}{}",
        e.error(),
        e.debug().map(|d| format!(" ({d})")).unwrap_or_default()
    )
}

/// The error on `pipeline`'s bus (if any) after a step failed; the pipeline is stopped.
fn bus_error(pipeline: &gst::Pipeline, step: &str) -> BenchError {
    let detail = pipeline
        .bus()
        .and_then(|bus| bus.pop_filtered(&[gst::MessageType::Error]))
        .and_then(|msg| match msg.view() {
            gst::MessageView::Error(e) => Some(error_text(e)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An I420 frame of `(w, h)` whose every sample says where it is: luma `x + 3y`, chroma
    /// `x + 7y + 50 * plane` (mod 256).
    fn pattern((w, h): (u32, u32)) -> gst::Buffer {
        let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, w, h)
            .build()
            .unwrap();
        let mut buffer = gst::Buffer::with_size(info.size()).unwrap();
        {
            let mut frame = gst_video::VideoFrameRef::from_buffer_ref_writable(
                buffer.get_mut().unwrap(),
                &info,
            )
            .unwrap();
            for plane in 0..3u32 {
                let stride = info.stride()[plane as usize] as usize;
                let shift = u32::from(plane > 0);
                let data = frame.plane_data_mut(plane).unwrap();
                for y in 0..(h >> shift) as usize {
                    for x in 0..(w >> shift) as usize {
                        data[y * stride + x] = match plane {
                            0 => (x + 3 * y) % 256,
                            p => (x + 7 * y + 50 * p as usize) % 256,
                        } as u8;
                    }
                }
            }
        }
        buffer
    }

    #[test]
    fn a_pan_frame_is_the_window_of_its_image() {
        gst::init().unwrap();
        let (span, size, origin) = ((70, 38), (48, 26), (16, 8));
        let out = crop_i420(&pattern(span), span, origin, size).unwrap();
        let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, size.0, size.1)
            .build()
            .unwrap();
        let frame =
            gst_video::VideoFrameRef::from_buffer_ref_readable(out.as_ref(), &info).unwrap();
        for plane in 0..3u32 {
            let stride = info.stride()[plane as usize] as usize;
            let shift = u32::from(plane > 0);
            let (ox, oy) = ((origin.0 >> shift) as usize, (origin.1 >> shift) as usize);
            let data = frame.plane_data(plane).unwrap();
            for y in 0..(size.1 >> shift) as usize {
                for x in 0..(size.0 >> shift) as usize {
                    let want = match plane {
                        0 => (ox + x + 3 * (oy + y)) % 256,
                        p => (ox + x + 7 * (oy + y) + 50 * p as usize) % 256,
                    } as u8;
                    assert_eq!(data[y * stride + x], want, "plane {plane} at {x},{y}");
                }
            }
        }
        assert_eq!(Motion::parse("pan"), Some(Motion::Pan));
        assert_eq!(Motion::parse("still"), Some(Motion::Still));
        assert_eq!(Motion::parse("zoom"), None);
    }
}
