//! One build of a [`GstSource`](super::GstSource)'s GStreamer pipeline: the settings and paths
//! checked, the input's elements added, the `appsink` it ends in and the bus's sync handler.

use std::sync::Arc;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use super::super::config::{Decoder, ImageDecoder, SourceConfig, SourceKind};
use super::super::elements::{check_framerate, init, make, missing, PLUGINS_BASE};
use super::super::images::{build_images, list_images, Feeder, ImageList, Images};
use super::super::launch::build_launch;
use super::super::media::{build_media, media_uri};
use super::super::nvdec::{self, SharedCuda};
use super::super::nvjpeg::{JpegRoute, NvjpegDecoder};
use super::super::rtp::RtpTimes;
use super::super::test::{build_test, TestSettings};
use super::super::SourceError;
use super::guard::Guard;
use octopipe_core::redact;

/// Decoded frames the `appsink` may hold before the decoder waits.
const SINK_QUEUE: u32 = 3;
/// URI schemes of sources that receive from a sender over a network (a head whose element
/// handles one is a network head, as is one whose element is of the `Source/Network` class).
const NETWORK_SCHEMES: &[&str] = &[
    "udp", "tcp", "rtsp", "rtsps", "rtspt", "rtspu", "srt", "rist", "rtmp", "rtmps", "http",
    "https",
];
/// Nice value of the decoder threads of file and image sources (see [`lower_decoder_priority`]).
const DECODER_NICE: libc::c_int = 10;

/// One build of the GStreamer pipeline of an input.
pub(super) struct Parts {
    pub(super) pipeline: gst::Pipeline,
    pub(super) appsink: gst_app::AppSink,
    pub(super) bus: gst::Bus,
    pub(super) input: Input,
    pub(super) feeder: Option<Feeder>,
    pub(super) cuda: Option<Arc<SharedCuda>>,
    /// The route to the nvJPEG decoder of an image sequence decoded on the GPU
    /// (`images decoder=nvjpeg`).
    pub(super) nvjpeg: Option<JpegRoute>,
    /// Why the input was refused while it played (a picture too large, a foreign segment).
    pub(super) guard: Guard,
}

impl Parts {
    /// Check the settings and paths (before any GStreamer work), then build the pipeline.
    pub(super) fn build(config: &SourceConfig) -> Result<Parts, SourceError> {
        let plan = Plan::check(config)?;
        init()?;
        let cuda = plan.nvdec(config)?;
        let nvjpeg = plan.nvjpeg(config)?.map(JpegRoute::new);
        let pipeline = gst::Pipeline::new();
        if let Some(shared) = &cuda {
            // Elements added later (decodebin's decoders) take the pipeline's contexts.
            pipeline.set_context(shared.context());
        }
        let uri = match &plan {
            Plan::Media((_, uri)) => Some(uri.as_str()),
            _ => None,
        };
        let guard = Guard::install(&pipeline, uri);
        let appsink = new_appsink()?;
        let (input, feeder) =
            plan.build(&pipeline, &appsink, config, cuda.as_ref(), nvjpeg.as_ref())?;
        let bus = pipeline
            .bus()
            .ok_or_else(|| SourceError::Init("pipeline has no bus".into()))?;
        let lower = !matches!(config.kind, SourceKind::Launch { .. });
        sync_handler(&bus, lower, cuda.clone());
        Ok(Parts {
            pipeline,
            appsink,
            bus,
            input,
            feeder,
            cuda,
            nvjpeg,
            guard,
        })
    }

    /// Whether frames come from a sender rather than a file: a live or network head, or a
    /// media URI other than `file:`.
    pub(super) fn receives(&self, config: &SourceConfig) -> bool {
        match &self.input {
            Input::Launch { .. } => config.live || has_network_element(&self.pipeline),
            Input::Media { uri, .. } => !uri.starts_with("file:"),
            Input::Images(_) | Input::Test { .. } => false,
        }
    }
}

/// What the pipeline reads, and how to name it.
pub(super) enum Input {
    /// A media file or URI: `name` as the user wrote it (for errors), `uri` for frames.
    Media { name: String, uri: Arc<str> },
    /// An image sequence.
    Images(Images),
    /// `videotestsrc`, described as `videotestsrc pattern=..`, giving `frames` frames.
    Test { name: Arc<str>, frames: u64 },
    /// A GStreamer launch fragment, named by its text; `rtp` when it receives RTP.
    Launch {
        name: Arc<str>,
        rtp: Option<Arc<RtpTimes>>,
    },
}

/// What `open` checked before building the pipeline.
enum Plan<'a> {
    /// (name for errors, URI)
    Media((String, String)),
    Images(ImageList),
    Test(TestSettings<'a>),
    /// A GStreamer launch fragment.
    Launch(&'a String, bool),
}

impl<'a> Plan<'a> {
    /// Check what can be checked before touching GStreamer: settings, paths and files.
    fn check(config: &'a SourceConfig) -> Result<Self, SourceError> {
        if config.loops == 0
            || (config.loops > 1 && !matches!(config.kind, SourceKind::Images { .. }))
        {
            return Err(SourceError::Setting {
                setting: "loop".into(),
                value: config.loops.to_string(),
                expected: "a count of at least 1 (only image sequences play more than once)".into(),
            });
        }
        Ok(match &config.kind {
            SourceKind::Media { location } => Plan::Media(media_uri(location)?),
            SourceKind::Images { location } => {
                check_framerate(config.framerate)?;
                Plan::Images(list_images(location)?)
            }
            SourceKind::Launch { fragment, decode } => {
                if let Some(framerate) = config.head_framerate {
                    check_framerate(framerate)?;
                }
                Plan::Launch(fragment, *decode)
            }
            SourceKind::Test {
                pattern,
                width,
                height,
                num_buffers,
                format,
            } => {
                check_framerate(config.framerate)?;
                Plan::Test(TestSettings {
                    pattern,
                    width: *width,
                    height: *height,
                    num_buffers: *num_buffers,
                    format: *format,
                    framerate: config.framerate,
                })
            }
        })
    }

    /// The CUDA context to share with NVDEC decoders, when the media source (or a head octopipe
    /// decodes, `head decoder=`) decodes with them:
    /// `decoder=nvdec` (an error naming the input when it cannot), or `decoder=auto` where it
    /// can (else CPU decoding, saying why once).
    fn nvdec(&self, config: &SourceConfig) -> Result<Option<Arc<SharedCuda>>, SourceError> {
        let name = match self {
            Plan::Media((name, _)) => name,
            Plan::Launch(fragment, true) => *fragment,
            _ => return Ok(None),
        };
        let shared = || nvdec::available().and_then(|()| SharedCuda::new(config.device));
        match config.decoder {
            Decoder::Cpu => Ok(None),
            Decoder::Nvdec => shared().map(Some).map_err(|e| SourceError::Nvdec {
                source_name: name.clone(),
                reason: e.to_string(),
                source: Some(Box::new(e)),
            }),
            Decoder::Auto => match shared() {
                Ok(shared) => {
                    tracing::info!("{name}: decoder=auto: decoding with NVDEC into CUDA memory");
                    Ok(Some(shared))
                }
                Err(reason) => {
                    tracing::info!("{name}: decoder=auto: decoding on the CPU: {reason}");
                    Ok(None)
                }
            },
        }
    }

    /// The nvJPEG decoder of an image sequence's JPEG files: `decoder=nvjpeg` (an error naming
    /// the input when it cannot run), or `decoder=auto` where it can (else the CPU, saying why
    /// once). PNG sequences decode on the CPU.
    fn nvjpeg(&self, config: &SourceConfig) -> Result<Option<Arc<NvjpegDecoder>>, SourceError> {
        let Plan::Images(list) = self else {
            return Ok(None);
        };
        let name = config.describe();
        match (config.image_decoder, list.is_jpeg()) {
            (ImageDecoder::Cpu, _) => Ok(None),
            (ImageDecoder::Nvjpeg, false) => Err(SourceError::Nvjpeg {
                source_name: name,
                reason: "nvJPEG decodes JPEG files, and these are PNG: use decoder=cpu".into(),
                source: None,
            }),
            (ImageDecoder::Nvjpeg, true) => {
                NvjpegDecoder::of(config.device)
                    .map(Some)
                    .map_err(|e| SourceError::Nvjpeg {
                        source_name: name,
                        reason: e.to_string(),
                        source: Some(Box::new(e)),
                    })
            }
            (ImageDecoder::Auto, false) => {
                tracing::info!("{name}: decoder=auto: PNG files decode on the CPU");
                Ok(None)
            }
            (ImageDecoder::Auto, true) => match NvjpegDecoder::of(config.device) {
                Ok(decoder) => {
                    tracing::info!(
                        "{name}: decoder=auto: decoding with nvJPEG ({} backend) into the memory of cuda:{}",
                        decoder.backend(),
                        decoder.device()
                    );
                    Ok(Some(decoder))
                }
                Err(reason) => {
                    tracing::info!("{name}: decoder=auto: decoding on the CPU: {reason}");
                    Ok(None)
                }
            },
        }
    }

    /// Add the elements of this input to `pipeline`, ending in `appsink`; an image sequence also
    /// starts its feeder thread. A media input decodes with NVDEC when given `cuda`.
    fn build(
        self,
        pipeline: &gst::Pipeline,
        appsink: &gst_app::AppSink,
        config: &SourceConfig,
        cuda: Option<&Arc<SharedCuda>>,
        nvjpeg: Option<&JpegRoute>,
    ) -> Result<(Input, Option<Feeder>), SourceError> {
        Ok(match self {
            Plan::Media((name, uri)) => {
                build_media(pipeline, appsink, &uri, cuda)?;
                // Only the pipeline gets the URI as written: names and frames never carry its
                // credentials.
                let name = redact::credentials(&name).into_owned();
                let uri = redact::credentials(&uri).as_ref().into();
                (Input::Media { name, uri }, None)
            }
            Plan::Images(list) => {
                let images = Images::new(list, config.framerate, config.loops, config.on_damaged);
                let feeder = build_images(
                    pipeline,
                    appsink,
                    &images,
                    nvjpeg.map(JpegRoute::read_ahead),
                )?;
                (Input::Images(images), Some(feeder))
            }
            Plan::Launch(fragment, decode) => {
                let rtp = build_launch(pipeline, appsink, fragment, decode, cuda)?;
                let name = redact::credentials(fragment).as_ref().into();
                (Input::Launch { name, rtp }, None)
            }
            Plan::Test(test) => {
                build_test(pipeline, appsink, &test)?;
                let name = test.name().into();
                let frames = u64::from(test.num_buffers);
                (Input::Test { name, frames }, None)
            }
        })
    }
}

/// The `appsink` every pipeline ends in: it hands samples out as fast as the consumer pulls and
/// holds at most [`SINK_QUEUE`] of them.
fn new_appsink() -> Result<gst_app::AppSink, SourceError> {
    let appsink = make("appsink", PLUGINS_BASE)?
        .downcast::<gst_app::AppSink>()
        .map_err(|_| missing("appsink", PLUGINS_BASE))?;
    appsink.set_max_buffers(SINK_QUEUE);
    appsink.set_drop(false);
    // As fast as the consumer pulls: live-rate pacing is the runner's (`runner::run_source`).
    appsink.set_sync(false);
    appsink.set_property("enable-last-sample", false);
    Ok(appsink)
}

/// What the bus handles on the posting thread (a bus has one sync handler):
/// - with `lower`, files and image sequences are decoded ahead of need: their decoder threads run
///   at a lower priority ([`DECODER_NICE`]), so that they yield the cores to the stages working on
///   due frames (a live head's decoder is on the critical path and keeps its priority);
/// - with `cuda`, an element that needs a CUDA context (an NVDEC decoder starting) gets the one
///   octopipe shares, before it would make its own.
fn sync_handler(bus: &gst::Bus, lower: bool, cuda: Option<Arc<SharedCuda>>) {
    if !lower && cuda.is_none() {
        return;
    }
    bus.set_sync_handler(move |_, msg| {
        if let Some(shared) = &cuda {
            if nvdec::answer_need_context(msg, shared) {
                return gst::BusSyncReply::Drop;
            }
        }
        if let gst::MessageView::StreamStatus(s) = msg.view() {
            if lower && s.get().0 == gst::StreamStatusType::Enter {
                // SAFETY: setpriority on the calling thread (who = 0) only changes its nice value.
                unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, DECODER_NICE) };
            }
        }
        gst::BusSyncReply::Pass
    });
}

/// Whether `bin` holds an element that receives over a network: of the `Source/Network` class
/// (`udpsrc`, `tcpclientsrc`, `rtspsrc`, `srtsrc`, ...) or handling a network URI scheme.
fn has_network_element(bin: &gst::Pipeline) -> bool {
    bin.iterate_recurse().into_iter().flatten().any(|e| {
        e.factory().is_some_and(|f| {
            f.klass().contains("Network")
                || (f.uri_type() == gst::URIType::Src
                    && f.uri_protocols()
                        .iter()
                        .any(|p| NETWORK_SCHEMES.contains(&p.as_str())))
        })
    })
}
