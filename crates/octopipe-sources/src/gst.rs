//! [`GstSource`]: every kind of input as a GStreamer pipeline ending in an `appsink`, and what the
//! kinds share: opening, the pull loop, bus messages and errors, stall detection and the
//! construction of frames.
//!
//! ```text
//! media:  uridecodebin uri=file:///data/flight.mp4 ! videoconvert
//!           ! video/x-raw,format={I420,NV12} ! appsink
//! images: appsrc (one file per buffer) ! jpegdec idct-method=islow (or pngdec) ! videoconvert
//!           ! video/x-raw,format={I420,NV12,RGB,BGR,RGBA,BGRA,RGBx,BGRx} ! appsink
//! test:   videotestsrc pattern=smpte num-buffers=90
//!           ! video/x-raw,format=I420,width=1280,height=720,framerate=30/1 ! appsink
//! launch: FRAGMENT ! videoconvert ! video/x-raw,format={I420,NV12} ! appsink
//!         (`head decoder=...`: FRAGMENT ! decodebin, then as media)
//! ```
//!
//! Each kind's pipeline is built in its own module (`media`, `images`, `test`, `launch`); caps,
//! formats and the plane copy are in `caps`; making elements, and the errors for missing ones, in
//! `elements`; what a wait for a frame comes to (a quiet live source, a file that does not start or
//! stalls) and the reconnect backoff in `watch`. A reconnect tears the whole GStreamer pipeline
//! down and builds it again from the settings, as
//! GStreamer's `fallbacksrc` restarts its source.
//!
//! The same decodes by hand (`appsink` becomes `fakesink`, `appsrc` a `multifilesrc`):
//!
//! ```text
//! gst-launch-1.0 uridecodebin uri=file://$PWD/flight.mp4 ! videoconvert ! "video/x-raw,format={I420,NV12}" ! fakesink
//! gst-launch-1.0 multifilesrc location=img_%03d.jpg caps=image/jpeg,framerate=30/1 ! jpegdec idct-method=islow ! videoconvert ! fakesink
//! gst-launch-1.0 videotestsrc pattern=smpte num-buffers=90 ! video/x-raw,format=I420,width=1280,height=720 ! fakesink
//! ```
//!
//! `videoconvert` passes the decoder's output through untouched when it is already in one of the
//! accepted formats (JPEG 4:2:0 comes out as I420, PNG as RGB or RGBA), so no colour conversion happens
//! in GStreamer. Each sample's caps are read (image sizes may change from file to file) and its planes
//! are copied once, tightly packed, into a pooled buffer.

mod build;
mod damaged;
mod frame;
mod guard;
mod recover;
mod relay;
mod source;
mod teardown;
mod words;

#[cfg(any(test, fuzzing))]
pub use relay::fuzzing as relay_fuzzing;

pub use source::GstSource;
pub use teardown::{pipelines_stopping, stream_stopping};
