//! The buffers through an octopipe element ([`OctoFlow`], every [`OctoElement`]'s), from the
//! start of its work (with an output thread when it uses a shared stage) on: each is
//! made a frame, with the objects already on it for the elements that read them, handed to the
//! element's [`Work`](super::Work), and goes on with the objects and marks the work left on it.
//! In place and in turn (`transform_ip`), or, with a shared stage, handed to it without waiting
//! (`submit_input_buffer`) and pushed by the output thread once back ([`super::flight`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer::subclass::prelude::*;
use gstreamer_base::prelude::*;
use gstreamer_base::subclass::base_transform::GenerateOutputSuccess;
use gstreamer_base::subclass::prelude::*;
use octopipe_core::frame::Frame;

use super::element::{OctoElement, State};
use super::flight::{Flight, Pending};
use super::own::Settings;
use super::report::{Marks, Reporter};
use super::{meta, PluginError, Work, TIMING};

/// The buffers through an element: its `BaseTransformImpl` vfuncs for them call these.
pub(crate) trait OctoFlow: OctoElement {
    /// `BaseTransformImpl::start`: the work starts with the settings (its stages open, or it
    /// joins the shared stage it names, then with an output thread for the buffers in flight).
    fn start_work(&self) -> Result<(), gst::ErrorMessage>
    where
        Self::Type: Send + Sync,
    {
        let name = self.obj().name();
        let Settings { values, own } = self.settings().lock().unwrap().clone();
        let work = Self::Work::start(&values, &name, own.shared.as_deref()).map_err(|e| {
            gst::error!(Self::cat(), imp = self, "cannot start: {e}");
            e.to_message()
        })?;
        if work.shared().is_some() {
            let element = self.obj().downgrade();
            let flight = Flight::start(
                &name,
                own.in_flight(),
                Box::new(move |pending, back| match element.upgrade() {
                    Some(element) => element.imp().deliver(pending, back),
                    None => Err(gst::FlowError::Flushing),
                }),
            )
            .map_err(|e| e.to_message())?;
            *self.streaming().flight.lock().unwrap() = Some(flight);
        }
        gst::info!(Self::cat(), imp = self, "started");
        *self.state().lock().unwrap() = Some(State {
            work,
            framer: None,
            name: Arc::from(name.as_str()),
            source: Arc::from(name.as_str()),
            stream: own.stream,
            reporter: Reporter::default(),
            #[cfg(feature = "analytics")]
            first_seen: Default::default(),
        });
        Ok(())
    }

    /// `BaseTransformImpl::transform_ip`: the frame through the work, in turn (drawn on, for an
    /// element that draws), its objects on the buffer.
    fn work_in_place(&self, buf: &mut gst::BufferRef) -> Result<gst::FlowSuccess, gst::FlowError> {
        let received = Instant::now();
        let mut guard = self.state().lock().unwrap();
        let Some(state) = guard.as_mut() else {
            return Err(gst::FlowError::Flushing);
        };
        let (frame, read, marks) = self.frame_of(state, buf, received)?;
        let started = Instant::now();
        let frame = state.work.process(frame).map_err(|e| self.fail(e))?;
        if let (true, Some(framer)) = (Self::Work::DRAWS, state.framer.as_ref()) {
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

    /// `BaseTransformImpl::submit_input_buffer`: with a shared stage, the buffer's frame is
    /// handed to it without waiting (once there is room in flight); else BaseTransform's own.
    fn submit(
        &self,
        is_discont: bool,
        buf: gst::Buffer,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        let Some(flight) = self.streaming().flight() else {
            return self.parent_submit_input_buffer(is_discont, buf);
        };
        let received = Instant::now();
        // Backpressure: with all its buffers in flight the element takes no more.
        flight.wait_room()?;
        let pending = {
            let mut guard = self.state().lock().unwrap();
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
                started: Instant::now(),
            }
        };
        flight.add(pending);
        Ok(gst::FlowSuccess::Ok)
    }

    /// `BaseTransformImpl::generate_output`: with a shared stage the output thread pushes the
    /// buffers; else BaseTransform's own.
    fn generate(&self) -> Result<GenerateOutputSuccess, gst::FlowError> {
        match self.streaming().flight().is_some() {
            true => Ok(GenerateOutputSuccess::NoOutput),
            false => self.parent_generate_output(),
        }
    }

    /// The state's frame of `buf` with the objects already on it (for the elements that read
    /// them), and the marks it carries (its arrival, `received`, if it has none).
    fn frame_of(
        &self,
        state: &mut State<Self::Work>,
        buf: &gst::BufferRef,
        received: Instant,
    ) -> Result<(Frame, meta::Read, Marks), gst::FlowError> {
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
                Self::Work::PIXELS,
            )
            .map_err(|e| self.fail(PluginError::Buffer(e)))?;
        let mut marks = None;
        let read = match Self::Work::READS_OBJECTS {
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
        let marks = marks.unwrap_or_else(|| Marks {
            arrival: received,
            done: Vec::new(),
        });
        Ok((frame, read, marks))
    }

    /// The frame is done: its objects and marks go on `buf`, the report records it; gives its
    /// timing, to post.
    fn finish(
        &self,
        state: &mut State<Self::Work>,
        buf: &mut gst::BufferRef,
        mut frame: Frame,
        read: &meta::Read,
        mut marks: Marks,
        took: Duration,
    ) -> gst::Structure {
        // The stages are done with the pixels: a frame in CUDA memory gives the buffer back
        // (its mapping held a reference), so its metadata can be written.
        frame.release_pixels();
        marks.done.push((state.name.to_string(), Instant::now()));
        if Self::Work::WRITES_OBJECTS {
            meta::write(buf, &frame, read, state.work.classifier());
            meta::write_frame(buf, &frame, &marks, state.work.detect_score());
            #[cfg(feature = "analytics")]
            if let Err(e) = super::analytics::write(buf, &mut state.first_seen) {
                gst::warning!(Self::cat(), imp = self, "no analytics relation meta: {e}");
            }
        }
        if Self::Work::REPORTS {
            state.reporter.record(&frame, &marks);
        }
        gst::trace!(
            Self::cat(),
            imp = self,
            "frame {}: {} objects",
            frame.seq,
            frame.detections.len()
        );
        // The frame's timing, for a bus watch (`gst-launch-1.0 -m` prints it).
        gst::Structure::builder(TIMING)
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

    /// On the output thread: a frame back from the shared stage goes on its buffer, which is
    /// pushed on.
    fn deliver(
        &self,
        pending: Pending,
        back: Result<Frame, PluginError>,
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
            let mut guard = self.state().lock().unwrap();
            let Some(state) = guard.as_mut() else {
                return Err(gst::FlowError::Flushing);
            };
            let mut frame = frame;
            // The mapping of a frame in CUDA memory holds a reference to the buffer: given back
            // first, so the buffer is written in place.
            frame.release_pixels();
            self.finish(state, buffer.make_mut(), frame, &read, marks, took)
        };
        self.post_timing(timing);
        self.obj().src_pad().push(buffer)
    }
}

impl<T: OctoElement> OctoFlow for T {}
