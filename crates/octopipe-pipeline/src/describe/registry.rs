//! The stages octopipe has: [`Builtin::builtin`], called as `Registry::builtin()`. The
//! description side knows every concrete stage; the stage core (`octopipe_core::stage`, where
//! `Registry` lives) knows none, so the built-in list is a trait the facade implements on it
//! (an inherent impl on a type of another crate is not allowed). `use octopipe::Builtin;` brings
//! it into scope.

use octopipe_core::stage::Registry;

/// The registry of every built-in stage: `Registry::builtin()`, with this trait in scope
/// (`use octopipe::Builtin;`).
pub trait Builtin {
    /// Every stage octopipe has, in pipeline order.
    fn builtin() -> Self;
}

impl Builtin for Registry {
    fn builtin() -> Self {
        let mut r = Registry::empty();
        r.register(octopipe_sources::IMAGES);
        r.register(octopipe_sources::MEDIA);
        r.register(octopipe_sources::TESTSRC);
        r.register(octopipe_sources::RTP);
        r.register(octopipe_sources::APP);
        r.register(octopipe_stages::boxes::BOXES);
        r.register(octopipe_onnx::detect::DETECT);
        r.register(octopipe_stages::track::TRACK);
        r.register(octopipe_stages::batch::BATCH);
        r.register(octopipe_stages::tiles::TILES);
        r.register(octopipe_stages::preprocess::PREPROCESS);
        r.register(octopipe_stages::tilestats::TILESTATS);
        r.register(octopipe_onnx::classify::CLASSIFY);
        r.register(octopipe_onnx::appinfer::APPINFER);
        r.register(octopipe_stages::sink::JSONL);
        r.register(octopipe_stages::sink::TENSORS);
        r.register(octopipe_stages::sink::TILESINK);
        r.register(octopipe_stages::sink::APPSINK);
        #[cfg(feature = "mqtt")]
        r.register(octopipe_stages::sink::MQTT);
        #[cfg(feature = "zenoh")]
        r.register(octopipe_stages::sink::ZENOH);
        r.register(super::QUEUE);
        r.register(octopipe_sources::HEAD);
        r
    }
}
