//! The MP4 encoder of annotated frames: a GStreamer pipeline started at the first frame.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use image::RgbImage;

use crate::errors::ObserveError;

/// `appsrc ! videoconvert ! x264enc ! mp4mux ! filesink`, started at the first frame (also what
/// `octopipe pan` encodes its video with).
pub struct Mp4Encoder {
    path: PathBuf,
    running: Option<(gst::Pipeline, gst_app::AppSrc, (u32, u32))>,
    frames: u64,
}

impl Mp4Encoder {
    /// Check that GStreamer and its elements are there before the run starts.
    pub fn check(path: &Path) -> Result<Mp4Encoder, ObserveError> {
        gst::init().map_err(ObserveError::Gst)?;
        for (element, package) in [
            ("videoconvert", "gstreamer1.0-plugins-base"),
            ("x264enc", "gstreamer1.0-plugins-ugly"),
            ("mp4mux", "gstreamer1.0-plugins-good"),
        ] {
            if gst::ElementFactory::find(element).is_none() {
                return Err(ObserveError::MissingElement { element, package });
            }
        }
        Ok(Mp4Encoder {
            path: path.to_path_buf(),
            running: None,
            frames: 0,
        })
    }

    fn start(
        &self,
        w: u32,
        h: u32,
        interval: Duration,
    ) -> Result<(gst::Pipeline, gst_app::AppSrc), ObserveError> {
        let fps = (1.0 / interval.as_secs_f64()).round().max(1.0) as i32;
        let text = format!(
            "appsrc name=src format=time ! videoconvert ! video/x-raw,format=I420 \
             ! x264enc speed-preset=veryfast ! mp4mux ! filesink location=\"{}\"",
            self.path.display().to_string().replace('"', "\\\"")
        );
        let pipeline = gst::parse::launch(&text)
            .map_err(|e| ObserveError::mp4_by("cannot build the MP4 pipeline", e))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| ObserveError::mp4("the MP4 pipeline is not a pipeline"))?;
        let src = pipeline
            .by_name("src")
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok())
            .ok_or(ObserveError::mp4("no appsrc in the MP4 pipeline"))?;
        src.set_caps(Some(
            &gst::Caps::builder("video/x-raw")
                .field("format", "RGB")
                .field("width", w as i32)
                .field("height", h as i32)
                .field("framerate", gst::Fraction::new(fps, 1))
                .build(),
        ));
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| ObserveError::mp4_by("cannot start the MP4 pipeline", e))?;
        Ok((pipeline, src))
    }

    /// Encode `img` at `pts`, lasting `interval` (frames of another size than the first are
    /// skipped).
    pub fn push(
        &mut self,
        img: RgbImage,
        pts: Duration,
        interval: Duration,
    ) -> Result<(), ObserveError> {
        let size = img.dimensions();
        if self.running.is_none() {
            let (p, s) = self.start(size.0, size.1, interval)?;
            self.running = Some((p, s, size));
        }
        let Some((_, src, want)) = &self.running else {
            return Ok(());
        };
        if *want != size {
            return Ok(()); // a frame of another size: MP4 holds one size
        }
        let mut buffer = gst::Buffer::from_mut_slice(img.into_raw());
        if let Some(b) = buffer.get_mut() {
            b.set_pts(gst::ClockTime::from_nseconds(pts.as_nanos() as u64));
            b.set_duration(gst::ClockTime::from_nseconds(interval.as_nanos() as u64));
        }
        src.push_buffer(buffer)
            .map_err(|e| ObserveError::mp4_by("MP4 encoder refused a frame", e))?;
        self.frames += 1;
        Ok(())
    }

    /// End the stream and wait for the file to be finished.
    pub fn finish(mut self) -> Result<u64, ObserveError> {
        let Some((pipeline, src, _)) = self.running.take() else {
            return Ok(0);
        };
        let _ = src.end_of_stream();
        let bus = pipeline
            .bus()
            .ok_or(ObserveError::mp4("MP4 pipeline has no bus"))?;
        let result = match bus.timed_pop_filtered(
            gst::ClockTime::from_seconds(30),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        ) {
            Some(msg) => match msg.view() {
                gst::MessageView::Error(e) => {
                    Err(ObserveError::mp4_by("MP4 encoding failed", e.error()))
                }
                _ => Ok(self.frames),
            },
            None => Err(ObserveError::mp4("MP4 encoder did not finish within 30 s")),
        };
        let _ = pipeline.set_state(gst::State::Null);
        result
    }
}
