//! A stream's side of nvJPEG: each JPEG sample of an image sequence to its GPU's decoder, or to
//! the CPU when the decoder does not take it (counted in the report, said once per reason).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Receiver;

use gstreamer as gst;
use gstreamer_video as gst_video;

use super::cpu::decode_on_cpu;
use super::decoder::{NvjpegDecoder, Outcome};
use super::header::{CpuReason, JpegHeader};
use crate::images::OnFile;
use crate::pixels::Pixels;
use crate::SourceError;

/// The images larger than this many pixels are refused before memory is taken for them (the
/// image feeder refuses them first, from the file's header; this holds for any feed).
const MAX_PIXELS: u64 = octopipe_core::stage::limits::MAX_FRAME_PIXELS;

/// Files asked for ahead (by the image feeder, as it reads them), by image index.
type Pending = Arc<Mutex<HashMap<u64, Receiver<Outcome>>>>;

/// One stream's route to the nvJPEG decoder of its GPU.
pub(crate) struct JpegRoute {
    decoder: Arc<NvjpegDecoder>,
    pending: Pending,
    /// The reasons already said in the log (each once per stream).
    told: HashSet<CpuReason>,
}

impl JpegRoute {
    /// A route through `decoder`.
    pub(crate) fn new(decoder: Arc<NvjpegDecoder>) -> Self {
        decoder.count_stream(true);
        JpegRoute {
            decoder,
            pending: Arc::default(),
            told: HashSet::new(),
        }
    }

    /// What the image feeder calls with each file it reads: the file is asked for from the
    /// decoder there and then (so that each stream has its next files in the decoder's batches,
    /// not one), and [`decode`](Self::decode) takes the outcome when the file's sample comes.
    pub(crate) fn read_ahead(&self) -> OnFile {
        let (decoder, pending) = (self.decoder.clone(), self.pending.clone());
        Box::new(move |index, file| {
            let Some(header) = file.map_readable().ok().and_then(|m| JpegHeader::read(&m)) else {
                return;
            };
            if header.gpu_decodable().is_ok() && within_bounds(&header) {
                let outcome = decoder.submit(file.clone(), header);
                if let Ok(mut pending) = pending.lock() {
                    pending.insert(index, outcome);
                }
            }
        })
    }

    /// Whether samples of `caps` are JPEG files for this route to decode.
    pub(crate) fn takes(&self, caps: &gst::CapsRef) -> bool {
        caps.structure(0).is_some_and(|s| s.name() == "image/jpeg")
    }

    /// Decode `file` (image `index` of the stream, the JPEG file `input` names): on the GPU
    /// when nvJPEG takes it, else on the CPU, telling `count` the event (`decoded on the CPU:
    /// ...`) for the report.
    pub(crate) fn decode(
        &mut self,
        file: gst::Buffer,
        index: u64,
        input: &str,
        count: impl FnOnce(&str),
    ) -> Result<(gst_video::VideoInfo, Pixels), SourceError> {
        let stream_error = |message: String| SourceError::Stream {
            source_name: input.to_string(),
            message,
            debug: None,
        };
        let header = {
            let map = file
                .map_readable()
                .map_err(|e| stream_error(format!("cannot read the file's bytes: {e}")))?;
            JpegHeader::read(&map)
        };
        let ahead = self.pending.lock().ok().and_then(|mut p| p.remove(&index));
        if let Some(h) = header {
            if !within_bounds(&h) {
                return Err(stream_error(format!(
                    "a {}x{} picture is larger than the {MAX_PIXELS} pixels a frame may have",
                    h.width, h.height
                )));
            }
        }
        let reason = match header.map(|h| (h, h.gpu_decodable())) {
            None => CpuReason::NoHeader,
            Some((_, Err(reason))) => reason,
            Some((h, Ok(()))) => match match ahead {
                Some(outcome) => outcome.recv().unwrap_or(Err(CpuReason::Refused)),
                None => self.decoder.decode(file.clone(), h),
            } {
                Ok(decoded) => {
                    let info = video_info(gst_video::VideoFormat::I420, &decoded.layout)
                        .map_err(stream_error)?;
                    return Ok((info, Pixels::Device(decoded.planes, decoded.layout)));
                }
                Err(reason) => reason,
            },
        };
        let event = format!("decoded on the CPU: {reason}");
        if self.told.insert(reason) {
            tracing::info!(
                "{input}: {event} (nvJPEG on cuda:{}; further files of this stream for the same reason are counted in the report)",
                self.decoder.device()
            );
        }
        count(&event);
        let map = file
            .map_readable()
            .map_err(|e| stream_error(format!("cannot read the file's bytes: {e}")))?;
        let (pixels, layout) = decode_on_cpu(&map, input)?;
        let info = video_info(gst_video::VideoFormat::I420, &layout).map_err(stream_error)?;
        Ok((info, Pixels::Host(pixels, layout)))
    }
}

impl Drop for JpegRoute {
    fn drop(&mut self) {
        self.decoder.count_stream(false);
    }
}

/// Whether the picture is no larger than a frame may be.
fn within_bounds(header: &JpegHeader) -> bool {
    u64::from(header.width) * u64::from(header.height) <= MAX_PIXELS
}

/// The video info of a decoded picture (no frame rate: an image sequence's comes from its
/// settings).
fn video_info(
    format: gst_video::VideoFormat,
    layout: &octopipe_core::frame::FrameLayout,
) -> Result<gst_video::VideoInfo, String> {
    gst_video::VideoInfo::builder(format, layout.width, layout.height)
        .build()
        .map_err(|e| format!("a {}x{} picture: {e}", layout.width, layout.height))
}
