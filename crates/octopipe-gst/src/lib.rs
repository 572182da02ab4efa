//! octopipe inside anyone's GStreamer pipeline: the plugin `octopipe` (`libgstoctopipe.so`),
//! whose elements run octopipe's own stages on the buffers passing through and speak GStreamer's
//! region-of-interest metadata.
//!
//! | element | the stage(s) | does |
//! | --- | --- | --- |
//! | `octoboxes` | `boxes` | adds annotation boxes (VisDrone DET/MOT) or synthetic ones |
//! | `octodetect` | `detect` | adds an ONNX detector's boxes (tiles, NMS, `interval`) |
//! | `octotrack` | `track` | writes track ids (ByteTrack, per stream) |
//! | `octoclassify` | `batch`, `preprocess`, `classify` | labels the crop of every box, any element's |
//! | `octojsonl` | `jsonl` | writes one JSON line per object to a file |
//! | `octooverlay` | (`--annotate`'s renderer) | draws each object's box, label, score and track id on the frame |
//!
//! Each is a BaseTransform working in place: the video passes untouched (but through
//! `octooverlay`, which draws on it), the objects are
//! `GstVideoRegionOfInterestMeta`s with the DL Streamer parameter convention (docs/gstreamer.md);
//! with the `analytics` feature (GStreamer >= 1.24) also one `GstAnalyticsRelationMeta` per
//! buffer.
//! Each element's properties are its stages' declared properties (`octopipe inspect STAGE`),
//! turned into GParamSpecs with their ranges and defaults.
//!
//! Build it with `cargo build --release -p octopipe-gst` (`target/release/libgstoctopipe.so`);
//! `. scripts/env.sh` puts it on `GST_PLUGIN_PATH`, then `gst-inspect-1.0 octopipe` lists it.

#![warn(missing_docs)]

use gstreamer as gst;

mod common;
pub mod octoboxes;
pub mod octoclassify;
pub mod octodetect;
pub mod octojsonl;
pub mod octooverlay;
pub mod octotrack;

pub use common::PluginError;

fn plugin_init(plugin: &gst::Plugin) -> Result<(), gst::glib::BoolError> {
    common::meta::register();
    octoboxes::register(plugin)?;
    octodetect::register(plugin)?;
    octotrack::register(plugin)?;
    octoclassify::register(plugin)?;
    octojsonl::register(plugin)?;
    octooverlay::register(plugin)?;
    Ok(())
}

/// The plugin's registration: its descriptor for GStreamer's loader
/// (`gst_plugin_octopipe_get_desc`) and `plugin_register_static`, which registers the elements
/// in a process that links this crate (the tests do).
#[allow(missing_docs)]
mod registration {
    use super::{gst, plugin_init};

    gst::plugin_define!(
        octopipe,
        env!("CARGO_PKG_DESCRIPTION"),
        plugin_init,
        env!("CARGO_PKG_VERSION"),
        "MIT/X11",
        "octopipe",
        "octopipe",
        "https://github.com/octopipe/octopipe"
    );
}

pub use registration::plugin_register_static;
