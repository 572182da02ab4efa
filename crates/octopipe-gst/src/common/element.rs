//! The BaseTransform every octopipe element is, as gst-plugins-rs builds one: each element's
//! `imp.rs` writes out its `ObjectSubclass`, `ObjectImpl`, `GstObjectImpl`, `ElementImpl` and
//! `BaseTransformImpl`, holding its [`Settings`] (the property values, read at `start`) apart
//! from its [`State`] (its [`Work`], the opened stages, and the frame maker: made in `start`,
//! dropped in `stop`), and implements [`OctoElement`], whose default methods are the behaviour
//! every element shares (its properties, stop, its queries, caps and events; the start of its
//! work and the buffers themselves: [`OctoFlow`](super::flow::OctoFlow)).
//!
//! Errors are posted as element errors naming what failed (the element's name comes with the
//! message); a panic in a vfunc is caught by gstreamer-rs's subclass machinery and turned into
//! an element error too, never unwound across C.

use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::glib;
use gstreamer::prelude::*;
use gstreamer::subclass::prelude::*;
use gstreamer_base::prelude::*;
use gstreamer_base::subclass::prelude::*;
use gstreamer_video as gst_video;
use octopipe_core::stage::PropSpec;
use octopipe_sources::plugin::SharedCuda;

use super::flight::Flight;
use super::frame::Framer;
use super::own::{self, Settings};
use super::report::{self, Reporter};
use super::{cuda, frame, props, PluginError, Work};

/// The name of the element message each element posts per frame: `frame` (its number),
/// `objects` (how many it carries on leaving), `process-ms` (the element's time on it).
pub(crate) const TIMING: &str = "octopipe-frame";

/// The raw video an element accepts: what octopipe reads when it looks at pixels (in system
/// memory, and with `cuda` NV12 in CUDA memory, what NVIDIA's decoders give); else any raw
/// video in any memory (only the caps' size and rate are read).
pub(crate) fn caps(pixels: bool, cuda: bool) -> gst::Caps {
    if pixels {
        let mut caps = gst_video::VideoCapsBuilder::new()
            .format_list([
                gst_video::VideoFormat::I420,
                gst_video::VideoFormat::Nv12,
                gst_video::VideoFormat::Rgb,
                gst_video::VideoFormat::Bgr,
                gst_video::VideoFormat::Rgbx,
                gst_video::VideoFormat::Bgrx,
                gst_video::VideoFormat::Rgba,
                gst_video::VideoFormat::Bgra,
            ])
            .build();
        if cuda {
            caps.merge(
                gst_video::VideoCapsBuilder::new()
                    .features([octopipe_sources::plugin::CUDA_MEMORY])
                    .format(gst_video::VideoFormat::Nv12)
                    .build(),
            );
        }
        caps
    } else {
        gst::Caps::builder("video/x-raw").any_features().build()
    }
}

/// The pad templates of an element doing `W`: `sink` and `src`, always, with [`caps`] (the
/// formats octopipe reads for an element that reads or draws on the pixels, NV12 in CUDA memory
/// included).
pub(crate) fn pad_templates<W: Work>() -> Vec<gst::PadTemplate> {
    let caps = caps(W::PIXELS || W::DRAWS, true);
    ["sink", "src"]
        .into_iter()
        .map(|name| {
            let direction = match name {
                "sink" => gst::PadDirection::Sink,
                _ => gst::PadDirection::Src,
            };
            gst::PadTemplate::new(name, direction, gst::PadPresence::Always, &caps)
                .expect("a static pad template")
        })
        .collect()
}

/// The element metadata of every octopipe element: `long_name` and `description`, its class
/// and author.
pub(crate) fn metadata(long_name: &str, description: &str) -> gst::subclass::ElementMetadata {
    gst::subclass::ElementMetadata::new(
        long_name,
        "Filter/Analyzer/Video",
        description,
        "octopipe developers",
    )
}

/// The properties of an element doing `W`: its stages' declared ones (in their order), then
/// those it declares itself.
fn declared<W: Work>() -> Vec<PropSpec> {
    let mut specs = props::table(W::DECLS);
    specs.extend_from_slice(W::OWN_PROPS);
    specs
}

/// What runs between `start` and `stop`: the element's [`Work`] and what every element keeps
/// for its stream.
pub(crate) struct State<W> {
    pub(crate) work: W,
    pub(crate) framer: Option<Framer>,
    /// The element's name: its row in the budget report.
    pub(crate) name: Arc<str>,
    /// The source of the frames it is the first octopipe element of: the URI upstream answers
    /// the URI query with, else the element's name.
    pub(crate) source: Arc<str>,
    /// Their stream number (`stream`).
    pub(crate) stream: u32,
    /// The budget report, for the element that posts it.
    pub(crate) reporter: Reporter,
    /// When the element first met each track, for the analytics relation meta.
    #[cfg(feature = "analytics")]
    pub(crate) first_seen: super::analytics::FirstSeen,
}

/// What an element holds beside its settings and state, each behind its own lock because the
/// streaming thread waits on it while another holds the state: the CUDA context given to the
/// decoder upstream, and while started with a shared stage, the buffers in flight.
#[derive(Default)]
pub(crate) struct Streaming {
    /// The CUDA context frames in CUDA memory are read in (made at the decoder's context query
    /// or at CUDA caps).
    cuda: Mutex<Option<Arc<SharedCuda>>>,
    /// The buffers in the shared stage and the output thread.
    pub(crate) flight: Mutex<Option<Arc<Flight>>>,
}

impl Streaming {
    /// The buffers in flight, while started with a shared stage.
    pub(crate) fn flight(&self) -> Option<Arc<Flight>> {
        self.flight.lock().unwrap().clone()
    }
}

/// An octopipe element: a BaseTransform in place around its [`Work`]. An element's `imp.rs`
/// gives its parts (its debug category, settings, state and streaming parts) and calls the
/// default methods from its vfuncs.
pub(crate) trait OctoElement: BaseTransformImpl {
    /// What the element does to each frame.
    type Work: Work;

    /// The element's debug category.
    fn cat() -> gst::DebugCategory;
    /// The property values.
    fn settings(&self) -> &Mutex<Settings>;
    /// While started: the work and the frame maker.
    fn state(&self) -> &Mutex<Option<State<Self::Work>>>;
    /// The CUDA context and the buffers in flight.
    fn streaming(&self) -> &Streaming;

    /// Post `e` as an element error and give the flow error that stops the stream.
    fn fail(&self, e: PluginError) -> gst::FlowError {
        self.post_error_message(e.to_message());
        gst::FlowError::Error
    }

    /// The element's GParamSpecs (`ObjectImpl::properties`): its stages' declared properties,
    /// those it declares itself, then its own (`stream`, and `shared` and `in-flight` for one
    /// that can share its stage).
    fn param_specs() -> Vec<glib::ParamSpec> {
        own::element_param_specs(&declared::<Self::Work>(), Self::Work::SHAREABLE)
    }

    /// `ObjectImpl::set_property`.
    fn set_setting(&self, value: &glib::Value, pspec: &glib::ParamSpec) {
        let specs = declared::<Self::Work>();
        if self
            .settings()
            .lock()
            .unwrap()
            .set(&specs, pspec.name(), value)
        {
            gst::debug!(
                Self::cat(),
                imp = self,
                "{} set to {:?}",
                pspec.name(),
                value
            );
        }
    }

    /// `ObjectImpl::property`: what was set, or the default.
    fn setting(&self, pspec: &glib::ParamSpec) -> glib::Value {
        let specs = declared::<Self::Work>();
        let value = self.settings().lock().unwrap().get(&specs, pspec.name());
        value.unwrap_or_else(|| pspec.default_value().clone())
    }

    /// Before `ElementImpl::set_context` hands it on: a CUDA context set on the element is
    /// noted (frames are read in the context of the element's own device).
    fn note_context(&self, context: &gst::Context) {
        if (Self::Work::PIXELS || Self::Work::DRAWS) && cuda::is_cuda_context(context) {
            // The decoder's frames are read where they are only if it allocated them in the
            // context this element gave it; each frame's context is checked.
            gst::debug!(
                Self::cat(),
                imp = self,
                "a CUDA context was set; frames are read in the primary context of the \
                 element's device, which its context query answers with"
            );
        }
    }

    /// The CUDA context frames in CUDA memory are read in: the primary context of the stage's
    /// GPU (`device`), unless the stage reads system memory (`backend=cpu`).
    fn cuda(&self) -> Result<Arc<SharedCuda>, PluginError> {
        let values = self.settings().lock().unwrap().values.clone();
        if let Some(e) = cuda::refuses(&values, &self.obj().name()) {
            return Err(e);
        }
        let shared = cuda::shared(cuda::device(&values)?)?;
        *self.streaming().cuda.lock().unwrap() = Some(shared.clone());
        Ok(shared)
    }

    /// `BaseTransformImpl::stop`: the output thread ends, the state is dropped.
    fn stop_work(&self) -> Result<(), gst::ErrorMessage> {
        // The output thread ends first: it takes the state's lock to write a frame.
        let flight = self.streaming().flight.lock().unwrap().take();
        if let Some(flight) = flight {
            flight.stop();
        }
        *self.state().lock().unwrap() = None;
        gst::info!(Self::cat(), imp = self, "stopped");
        Ok(())
    }

    /// `BaseTransformImpl::query`: the decoder's CUDA context query is answered with the
    /// element's GPU's context; the latency grows by the buffers kept in flight.
    fn answer_query(&self, direction: gst::PadDirection, query: &mut gst::QueryRef) -> bool {
        // The decoder upstream asks which CUDA context to decode into: this element's GPU's, so
        // its frames are read (or drawn on) where it wrote them.
        if (Self::Work::PIXELS || Self::Work::DRAWS) && cuda::is_context_query(query) {
            match self.cuda() {
                Ok(shared) => return cuda::answer(query, &shared),
                Err(e) => gst::debug!(Self::cat(), imp = self, "no CUDA context to give: {e}"),
            }
        }
        let answered = BaseTransformImplExt::parent_query(self, direction, query);
        // The buffers it keeps in flight are frames of latency.
        if let gst::QueryViewMut::Latency(latency) = query.view_mut() {
            let flight = self.streaming().flight();
            let interval = self
                .state()
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|s| s.framer.as_ref())
                .and_then(|f| f.interval());
            if let (true, Some(flight), Some(interval)) = (answered, flight, interval) {
                let held = gst::ClockTime::from_nseconds(
                    interval.as_nanos() as u64 * u64::from(flight.limit()),
                );
                let (live, min, max) = latency.result();
                latency.set(live, min + held, max.map(|m| m + held));
            }
        }
        answered
    }

    /// `BaseTransformImpl::set_caps`: the frame maker for the caps (in the element's CUDA
    /// context for frames in CUDA memory), the frames' source from upstream.
    fn take_caps(&self, incaps: &gst::Caps, outcaps: &gst::Caps) -> Result<(), gst::LoggableError> {
        let on_gpu = (Self::Work::PIXELS || Self::Work::DRAWS) && frame::in_cuda_memory(incaps);
        let cuda = match on_gpu {
            false => None,
            true => Some(self.cuda().map_err(|e| {
                self.post_error_message(e.to_message());
                gst::loggable_error!(Self::cat(), "{e}")
            })?),
        };
        let mut framer = Framer::new(incaps, Self::Work::PIXELS, cuda)
            .map_err(|e| gst::loggable_error!(Self::cat(), "{e}"))?;
        gst::debug!(Self::cat(), imp = self, "caps {incaps}");
        // The frames' source: what upstream says it reads (asked before the state's lock is
        // taken: the query goes up the pipeline).
        let uri = frame::upstream_uri(self.obj().sink_pad());
        if let Some(state) = self.state().lock().unwrap().as_mut() {
            if let Some(uri) = uri {
                state.source = Arc::from(uri.as_str());
            }
            // Renegotiated mid-stream (a new size): the stream's numbering goes on.
            if let Some(before) = state.framer.take() {
                framer.continue_from(before);
            }
            state.framer = Some(framer);
        }
        self.parent_set_caps(incaps, outcaps)
    }

    /// `BaseTransformImpl::sink_event`: a serialized event leaves after the buffers in flight
    /// before it, a flush drops them and restarts the frames' numbering, end of stream flushes
    /// the work and posts the budget report.
    fn take_event(&self, event: gst::Event) -> bool {
        if let Some(flight) = self.streaming().flight() {
            match event.view() {
                gst::EventView::FlushStart(_) => flight.flush(),
                gst::EventView::FlushStop(_) => flight.unflush(),
                // The buffers before it leave first.
                _ if event.is_serialized() => flight.drain(),
                _ => {}
            }
        }
        match event.view() {
            gst::EventView::FlushStop(_) => {
                if let Some(f) = self
                    .state()
                    .lock()
                    .unwrap()
                    .as_mut()
                    .and_then(|s| s.framer.as_mut())
                {
                    f.restart();
                }
            }
            gst::EventView::Eos(_) => {
                let (done, report) = match self.state().lock().unwrap().as_mut() {
                    Some(state) => (state.work.eos(), state.reporter.finish()),
                    None => (Ok(()), None),
                };
                if let Err(e) = done {
                    self.post_error_message(e.to_message());
                }
                if let Some(report) = report.filter(|_| Self::Work::REPORTS) {
                    gst::info!(Self::cat(), imp = self, "octopipe report:\n{report}");
                    let s = report::message(&report);
                    let _ = self
                        .obj()
                        .post_message(gst::message::Element::builder(s).src(&*self.obj()).build());
                }
            }
            _ => {}
        }
        self.parent_sink_event(event)
    }
}
