//! GStreamer's `videotestsrc`, in the requested size, format and frame rate:
//!
//! ```text
//! videotestsrc pattern=smpte num-buffers=90
//!   ! video/x-raw,format=I420,width=1280,height=720,framerate=30/1 ! appsink
//! ```

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::caps::gst_format;
use super::elements::{enum_value, link_error, make, PLUGINS_BASE};
use super::props::TestProps;
use super::SourceError;
use octopipe_core::frame::PixelFormat;
use octopipe_core::stage::{Properties, Role, StageDecl};

/// What the test source produces.
pub(super) struct TestSettings<'a> {
    pub(super) pattern: &'a str,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) num_buffers: u32,
    pub(super) format: PixelFormat,
    pub(super) framerate: f64,
}

impl TestSettings<'_> {
    /// How errors and frames name the test source.
    pub(super) fn name(&self) -> String {
        format!("videotestsrc pattern={}", self.pattern)
    }
}

/// The test source's URI: `octopipe:videotestsrc?` and its `settings` (`pattern=smpte`).
pub(super) fn test_uri(settings: &str) -> std::sync::Arc<str> {
    format!("octopipe:videotestsrc?{settings}").into()
}

/// `videotestsrc ! appsink` with the requested caps.
pub(super) fn build_test(
    pipeline: &gst::Pipeline,
    appsink: &gst_app::AppSink,
    test: &TestSettings,
) -> Result<(), SourceError> {
    let src = make("videotestsrc", PLUGINS_BASE)?;
    src.set_property(
        "num-buffers",
        i32::try_from(test.num_buffers).unwrap_or(i32::MAX),
    );
    let pattern =
        enum_value(&src, "pattern", test.pattern).map_err(|expected| SourceError::Setting {
            setting: "pattern".into(),
            value: test.pattern.to_string(),
            expected,
        })?;
    src.set_property_from_value("pattern", &pattern);
    let fps = gst::Fraction::approximate_f64(test.framerate).unwrap_or(gst::Fraction::new(30, 1));
    let caps = gst_video::VideoCapsBuilder::new()
        .format(gst_format(test.format))
        .width(i32::try_from(test.width).unwrap_or(i32::MAX))
        .height(i32::try_from(test.height).unwrap_or(i32::MAX))
        .framerate(fps)
        .build();
    appsink.set_caps(Some(&caps));
    preallocate(appsink);
    pipeline
        .add_many([&src, appsink.upcast_ref()])
        .and_then(|_| src.link(appsink))
        .map_err(|e| link_error("videotestsrc", e))
}

/// The test source's buffers: the appsink's queue, one being drawn and one being copied out.
const TEST_BUFFERS: u32 = 6;

/// Ask `videotestsrc` for a pool of [`TEST_BUFFERS`] buffers, all allocated when it starts and
/// never more: GLib aborts the process on an allocation it cannot make, so GStreamer's memory
/// for a stream is taken before that stream's own frames grow (octopipe's copies, fallible,
/// are what the system refuses once memory runs short: the stream's error).
fn preallocate(appsink: &gst_app::AppSink) {
    let Some(pad) = appsink.static_pad("sink") else {
        return;
    };
    pad.add_probe(gst::PadProbeType::QUERY_DOWNSTREAM, |_, info| {
        if let Some(gst::PadProbeData::Query(query)) = &mut info.data {
            if let gst::QueryViewMut::Allocation(q) = query.view_mut() {
                let size = q
                    .get()
                    .0
                    .and_then(|caps| gst_video::VideoInfo::from_caps(caps).ok())
                    .and_then(|info| u32::try_from(info.size()).ok());
                if let Some(size) = size {
                    q.add_allocation_pool(
                        None::<&gst::BufferPool>,
                        size,
                        TEST_BUFFERS,
                        TEST_BUFFERS,
                    );
                }
            }
        }
        gst::PadProbeReturn::Ok
    });
}

/// `testsrc`: GStreamer's videotestsrc.
pub const TESTSRC: StageDecl = StageDecl {
    name: "testsrc",
    role: Role::Source,
    doc: "GStreamer videotestsrc",
    props: TestProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| {
        let props = TestProps::from_props(p)?;
        if let Some(why) = octopipe_core::stage::limits::frame_too_large(props.width, props.height)
        {
            // Each side is within its range; together they may still pass a frame's pixels.
            let key = if p.given("height").is_some() {
                "height"
            } else {
                "width"
            };
            return Err(p.error(key, format!("testsrc: width x height: {why}")));
        }
        let config = props.config();
        if config.epoch.is_some() && !config.live {
            return Err(p.error(
                "epoch",
                "epoch needs live=true (frames are released on the clock)",
            ));
        }
        Ok(Box::new(config))
    },
};
