//! The BaseTransform every octopipe element is: in place (the video passes untouched, the
//! objects go on the buffer's metadata), `Settings` (the property values, read at `start`) apart
//! from `State` (the opened stages and the frame maker, made in `start`, dropped in `stop`).
//!
//! `octo_element!(Imp, Wrapper, Work, "GstTypeName")` makes the subclass `Imp` around a
//! [`Work`](super::Work): its properties from the stages' declared tables, its pad templates,
//! and the vfuncs. Errors are posted as element errors naming what failed (the element's name
//! comes with the message); a panic in a vfunc is caught by gstreamer-rs's subclass machinery
//! and turned into an element error too, never unwound across C.

use gstreamer as gst;
use gstreamer_video as gst_video;

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

/// The pad templates: `sink` and `src`, always, with [`caps`].
pub(crate) fn pad_templates(pixels: bool, cuda: bool) -> Vec<gst::PadTemplate> {
    let caps = caps(pixels, cuda);
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

/// Makes the element subclass `$imp` (wrapped by `super::$wrapper`, registered as `$gtype`)
/// around the [`Work`](super::Work) `$work`.
macro_rules! octo_element {
    ($imp:ident, $wrapper:ident, $work:ty, $gtype:literal) => {
        use std::sync::{LazyLock, Mutex};

        use gstreamer as gst;
        use gstreamer::glib;
        use gstreamer::prelude::*;
        use gstreamer::subclass::prelude::*;
        use gstreamer_base as gst_base;
        use gstreamer_base::prelude::*;
        use gstreamer_base::subclass::prelude::*;

        use $crate::common::flight::{Flight, Pending};
        use $crate::common::frame::Framer;
        use $crate::common::own::Settings;
        use $crate::common::{cuda, meta, props, PluginError, Values, Work};

        static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
            gst::DebugCategory::new(
                concat!("octopipe-", stringify!($wrapper)),
                gst::DebugColorFlags::empty(),
                Some(<$work as Work>::LONG_NAME),
            )
        });

        /// The properties: the stages' declared tables.
        static SPECS: LazyLock<Vec<octopipe_core::stage::PropSpec>> = LazyLock::new(|| {
            let mut specs = props::table(<$work as Work>::DECLS);
            specs.extend_from_slice(<$work as Work>::OWN_PROPS);
            specs
        });

        /// What runs between `start` and `stop`.
        struct State {
            work: $work,
            framer: Option<Framer>,
            /// The element's name: its row in the budget report.
            name: std::sync::Arc<str>,
            /// The source of the frames it is the first octopipe element of: the URI upstream
            /// answers the URI query with, else the element's name.
            source: std::sync::Arc<str>,
            /// Their stream number (`stream`).
            stream: u32,
            /// The budget report, for the element that posts it.
            reporter: $crate::common::report::Reporter,
            /// When the element first met each track, for the analytics relation meta.
            #[cfg(feature = "analytics")]
            first_seen: $crate::common::analytics::FirstSeen,
        }

        /// The element: its property values and, while started, its state.
        #[derive(Default)]
        pub struct $imp {
            settings: Mutex<Settings>,
            state: Mutex<Option<State>>,
            /// The CUDA context given to the decoder upstream and read in, for frames in CUDA
            /// memory (made at the decoder's context query or at CUDA caps).
            cuda: Mutex<Option<std::sync::Arc<octopipe_sources::plugin::SharedCuda>>>,
            /// While started with a shared stage: the buffers in flight and the output thread.
            flight: Mutex<Option<std::sync::Arc<Flight>>>,
        }

        impl $imp {
            /// Post `e` as an element error and give the flow error that stops the stream.
            fn fail(&self, e: PluginError) -> gst::FlowError {
                self.post_error_message(e.to_message());
                gst::FlowError::Error
            }

            /// The CUDA context frames in CUDA memory are read in: the primary context of the
            /// stage's GPU (`device`), unless the stage reads system memory (`backend=cpu`).
            fn cuda(
                &self,
            ) -> Result<std::sync::Arc<octopipe_sources::plugin::SharedCuda>, PluginError> {
                let values = self.settings.lock().unwrap().values.clone();
                if let Some(e) = cuda::refuses(&values, &self.obj().name()) {
                    return Err(e);
                }
                let shared = cuda::shared(cuda::device(&values)?)?;
                *self.cuda.lock().unwrap() = Some(shared.clone());
                Ok(shared)
            }

            /// The state's frame of `buf` with the objects already on it (for the elements that
            /// read them), and the marks it carries (its arrival, `received`, if it has none).
            fn frame_of(
                &self,
                state: &mut State,
                buf: &gst::BufferRef,
                received: std::time::Instant,
            ) -> Result<
                (
                    octopipe_core::frame::Frame,
                    meta::Read,
                    $crate::common::report::Marks,
                ),
                gst::FlowError,
            > {
                let segment = self.obj().segment();
                let segment = segment
                    .downcast_ref::<gst::ClockTime>()
                    .cloned()
                    .unwrap_or_else(gst::FormattedSegment::<gst::ClockTime>::new);
                let Some(framer) = state.framer.as_mut() else {
                    return Err(gst::FlowError::NotNegotiated);
                };
                let mut frame = framer
                    .frame(
                        buf,
                        &segment,
                        state.stream,
                        &state.source,
                        <$work as Work>::PIXELS,
                    )
                    .map_err(|e| self.fail(PluginError::Buffer(e)))?;
                let mut marks = None;
                let read = match <$work as Work>::READS_OBJECTS {
                    true => {
                        marks = meta::read_frame(buf, &mut frame);
                        state
                            .work
                            .follow_detector(meta::detect_score(buf))
                            .map_err(|e| self.fail(e))?;
                        meta::read(buf, &mut frame)
                    }
                    false => meta::Read::default(),
                };
                // The first octopipe element the frame meets: it arrived now.
                let marks = marks.unwrap_or_else(|| $crate::common::report::Marks {
                    arrival: received,
                    done: Vec::new(),
                });
                Ok((frame, read, marks))
            }

            /// The frame is done: its objects and marks go on `buf`, the report records it, and
            /// its timing is posted.
            fn finish(
                &self,
                state: &mut State,
                buf: &mut gst::BufferRef,
                mut frame: octopipe_core::frame::Frame,
                read: &meta::Read,
                mut marks: $crate::common::report::Marks,
                took: std::time::Duration,
            ) -> gst::Structure {
                // The stages are done with the pixels: a frame in CUDA memory gives the buffer
                // back (its mapping held a reference), so its metadata can be written.
                frame.release_pixels();
                marks
                    .done
                    .push((state.name.to_string(), std::time::Instant::now()));
                if <$work as Work>::WRITES_OBJECTS {
                    meta::write(buf, &frame, read, state.work.classifier());
                    meta::write_frame(buf, &frame, &marks, state.work.detect_score());
                    #[cfg(feature = "analytics")]
                    if let Err(e) = $crate::common::analytics::write(buf, &mut state.first_seen) {
                        gst::warning!(CAT, imp = self, "no analytics relation meta: {e}");
                    }
                }
                if <$work as Work>::REPORTS {
                    state.reporter.record(&frame, &marks);
                }
                gst::trace!(
                    CAT,
                    imp = self,
                    "frame {}: {} objects",
                    frame.seq,
                    frame.detections.len()
                );
                // The frame's timing, for a bus watch (`gst-launch-1.0 -m` prints it).
                gst::Structure::builder($crate::common::TIMING)
                    .field("frame", frame.seq)
                    .field("objects", frame.detections.len() as u32)
                    .field("process-ms", took.as_secs_f64() * 1000.0)
                    .build()
            }

            /// Post a frame's timing.
            fn post_timing(&self, timing: gst::Structure) {
                let _ = self.obj().post_message(
                    gst::message::Element::builder(timing)
                        .src(&*self.obj())
                        .build(),
                );
            }

            /// On the output thread: a frame back from the shared stage goes on its buffer,
            /// which is pushed on.
            fn deliver(
                &self,
                pending: Pending,
                back: Result<octopipe_core::frame::Frame, PluginError>,
            ) -> Result<gst::FlowSuccess, gst::FlowError> {
                let frame = back.map_err(|e| self.fail(e))?;
                let Pending {
                    mut buffer,
                    read,
                    marks,
                    started,
                    ..
                } = pending;
                let took = started.elapsed();
                let timing = {
                    let mut guard = self.state.lock().unwrap();
                    let Some(state) = guard.as_mut() else {
                        return Err(gst::FlowError::Flushing);
                    };
                    let mut frame = frame;
                    // The mapping of a frame in CUDA memory holds a reference to the buffer:
                    // given back first, so the buffer is written in place.
                    frame.release_pixels();
                    self.finish(state, buffer.make_mut(), frame, &read, marks, took)
                };
                self.post_timing(timing);
                self.obj().src_pad().push(buffer)
            }
        }

        #[glib::object_subclass]
        impl ObjectSubclass for $imp {
            const NAME: &'static str = $gtype;
            type Type = super::$wrapper;
            type ParentType = gst_base::BaseTransform;
        }

        impl ObjectImpl for $imp {
            fn properties() -> &'static [glib::ParamSpec] {
                static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
                    $crate::common::own::element_param_specs(&SPECS, <$work as Work>::SHAREABLE)
                });
                PROPERTIES.as_ref()
            }

            fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
                if self
                    .settings
                    .lock()
                    .unwrap()
                    .set(&SPECS, pspec.name(), value)
                {
                    gst::debug!(CAT, imp = self, "{} set to {:?}", pspec.name(), value);
                }
            }

            fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
                let value = self.settings.lock().unwrap().get(&SPECS, pspec.name());
                value.unwrap_or_else(|| pspec.default_value().clone())
            }
        }

        impl GstObjectImpl for $imp {}

        impl ElementImpl for $imp {
            fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
                static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
                    gst::subclass::ElementMetadata::new(
                        <$work as Work>::LONG_NAME,
                        "Filter/Analyzer/Video",
                        <$work as Work>::DESCRIPTION,
                        "octopipe developers",
                    )
                });
                Some(&*METADATA)
            }

            fn set_context(&self, context: &gst::Context) {
                if <$work as Work>::PIXELS && cuda::is_cuda_context(context) {
                    // The decoder's frames are read where they are only if it allocated them in
                    // the context this element gave it; each frame's context is checked.
                    gst::debug!(
                        CAT,
                        imp = self,
                        "a CUDA context was set; frames are read in the primary context of the \
                         element's device, which its context query answers with"
                    );
                }
                self.parent_set_context(context)
            }

            fn pad_templates() -> &'static [gst::PadTemplate] {
                static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
                    $crate::common::element::pad_templates(
                        <$work as Work>::PIXELS || <$work as Work>::DRAWS,
                        !<$work as Work>::DRAWS,
                    )
                });
                TEMPLATES.as_ref()
            }
        }

        impl BaseTransformImpl for $imp {
            const MODE: gst_base::subclass::BaseTransformMode =
                gst_base::subclass::BaseTransformMode::AlwaysInPlace;
            const PASSTHROUGH_ON_SAME_CAPS: bool = false;
            const TRANSFORM_IP_ON_PASSTHROUGH: bool = false;

            fn start(&self) -> Result<(), gst::ErrorMessage> {
                let name = self.obj().name();
                let Settings { values, own } = self.settings.lock().unwrap().clone();
                let work =
                    <$work as Work>::start(&values, &name, own.shared.as_deref()).map_err(|e| {
                        gst::error!(CAT, imp = self, "cannot start: {e}");
                        e.to_message()
                    })?;
                if work.shared().is_some() {
                    let limit = own.in_flight();
                    let element = self.obj().downgrade();
                    let flight = Flight::start(
                        &name,
                        limit,
                        Box::new(move |pending, back| match element.upgrade() {
                            Some(element) => element.imp().deliver(pending, back),
                            None => Err(gst::FlowError::Flushing),
                        }),
                    )
                    .map_err(|e| e.to_message())?;
                    *self.flight.lock().unwrap() = Some(flight);
                }
                gst::info!(CAT, imp = self, "started");
                *self.state.lock().unwrap() = Some(State {
                    work,
                    framer: None,
                    name: std::sync::Arc::from(name.as_str()),
                    source: std::sync::Arc::from(name.as_str()),
                    stream: own.stream,
                    reporter: Default::default(),
                    #[cfg(feature = "analytics")]
                    first_seen: Default::default(),
                });
                Ok(())
            }

            fn stop(&self) -> Result<(), gst::ErrorMessage> {
                // The output thread ends first: it takes the state's lock to write a frame.
                let flight = self.flight.lock().unwrap().take();
                if let Some(flight) = flight {
                    flight.stop();
                }
                *self.state.lock().unwrap() = None;
                gst::info!(CAT, imp = self, "stopped");
                Ok(())
            }

            fn query(&self, direction: gst::PadDirection, query: &mut gst::QueryRef) -> bool {
                // The decoder upstream asks which CUDA context to decode into: this element's
                // GPU's, so its frames are read where it wrote them.
                if <$work as Work>::PIXELS && cuda::is_context_query(query) {
                    match self.cuda() {
                        Ok(shared) => return cuda::answer(query, &shared),
                        Err(e) => gst::debug!(CAT, imp = self, "no CUDA context to give: {e}"),
                    }
                }
                let answered = BaseTransformImplExt::parent_query(self, direction, query);
                // The buffers it keeps in flight are frames of latency.
                if let gst::QueryViewMut::Latency(latency) = query.view_mut() {
                    let flight = self.flight.lock().unwrap().clone();
                    let interval = self
                        .state
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

            fn set_caps(
                &self,
                incaps: &gst::Caps,
                outcaps: &gst::Caps,
            ) -> Result<(), gst::LoggableError> {
                let on_gpu =
                    <$work as Work>::PIXELS && $crate::common::frame::in_cuda_memory(incaps);
                let cuda = match on_gpu {
                    false => None,
                    true => Some(self.cuda().map_err(|e| {
                        self.post_error_message(e.to_message());
                        gst::loggable_error!(CAT, "{e}")
                    })?),
                };
                let mut framer = Framer::new(incaps, <$work as Work>::PIXELS, cuda)
                    .map_err(|e| gst::loggable_error!(CAT, "{e}"))?;
                gst::debug!(CAT, imp = self, "caps {incaps}");
                // The frames' source: what upstream says it reads (asked before the state's
                // lock is taken: the query goes up the pipeline).
                let uri = $crate::common::frame::upstream_uri(&self.obj().sink_pad());
                if let Some(state) = self.state.lock().unwrap().as_mut() {
                    if let Some(uri) = uri {
                        state.source = std::sync::Arc::from(uri.as_str());
                    }
                    // Renegotiated mid-stream (a new size): the stream's numbering goes on.
                    if let Some(before) = state.framer.take() {
                        framer.continue_from(before);
                    }
                    state.framer = Some(framer);
                }
                self.parent_set_caps(incaps, outcaps)
            }

            fn sink_event(&self, event: gst::Event) -> bool {
                let flight = self.flight.lock().unwrap().clone();
                if let Some(flight) = flight {
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
                            .state
                            .lock()
                            .unwrap()
                            .as_mut()
                            .and_then(|s| s.framer.as_mut())
                        {
                            f.restart();
                        }
                    }
                    gst::EventView::Eos(_) => {
                        let (done, report) = match self.state.lock().unwrap().as_mut() {
                            Some(state) => (state.work.eos(), state.reporter.finish()),
                            None => (Ok(()), None),
                        };
                        if let Err(e) = done {
                            self.post_error_message(e.to_message());
                        }
                        if let Some(report) = report.filter(|_| <$work as Work>::REPORTS) {
                            gst::info!(CAT, imp = self, "octopipe report:\n{report}");
                            let s = $crate::common::report::message(&report);
                            let _ = self.obj().post_message(
                                gst::message::Element::builder(s).src(&*self.obj()).build(),
                            );
                        }
                    }
                    _ => {}
                }
                self.parent_sink_event(event)
            }

            fn transform_ip(
                &self,
                buf: &mut gst::BufferRef,
            ) -> Result<gst::FlowSuccess, gst::FlowError> {
                let received = std::time::Instant::now();
                let mut guard = self.state.lock().unwrap();
                let Some(state) = guard.as_mut() else {
                    return Err(gst::FlowError::Flushing);
                };
                let (frame, read, marks) = self.frame_of(state, buf, received)?;
                let started = std::time::Instant::now();
                let frame = state.work.process(frame).map_err(|e| self.fail(e))?;
                if let (true, Some(framer)) = (<$work as Work>::DRAWS, state.framer.as_ref()) {
                    let info = framer.info().clone();
                    state
                        .work
                        .draw(&frame, buf, &info)
                        .map_err(|e| self.fail(e))?;
                }
                let timing = self.finish(state, buf, frame, &read, marks, started.elapsed());
                drop(guard);
                self.post_timing(timing);
                Ok(gst::FlowSuccess::Ok)
            }

            fn submit_input_buffer(
                &self,
                is_discont: bool,
                buf: gst::Buffer,
            ) -> Result<gst::FlowSuccess, gst::FlowError> {
                let flight = self.flight.lock().unwrap().clone();
                let Some(flight) = flight else {
                    return self.parent_submit_input_buffer(is_discont, buf);
                };
                let received = std::time::Instant::now();
                // Backpressure: with all its buffers in flight the element takes no more.
                flight.wait_room()?;
                let pending = {
                    let mut guard = self.state.lock().unwrap();
                    let Some(state) = guard.as_mut() else {
                        return Err(gst::FlowError::Flushing);
                    };
                    let (frame, read, marks) = self.frame_of(state, &buf, received)?;
                    let Some(handle) = state.work.shared() else {
                        return Err(gst::FlowError::Error);
                    };
                    Pending {
                        ticket: handle.submit(frame),
                        buffer: buf,
                        read,
                        marks,
                        started: std::time::Instant::now(),
                    }
                };
                flight.add(pending);
                Ok(gst::FlowSuccess::Ok)
            }

            fn generate_output(
                &self,
            ) -> Result<gst_base::subclass::base_transform::GenerateOutputSuccess, gst::FlowError>
            {
                match self.flight.lock().unwrap().is_some() {
                    // The output thread pushes the buffers.
                    true => Ok(gst_base::subclass::base_transform::GenerateOutputSuccess::NoOutput),
                    false => self.parent_generate_output(),
                }
            }
        }
    };
}
