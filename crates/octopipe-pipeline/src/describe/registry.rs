//! The stages octopipe has: [`Builtin::builtin`], called as `Registry::builtin()`. The
//! description side knows every concrete stage; the stage core (`octopipe_core::stage`, where
//! `Registry` lives) knows none, so the built-in list is a trait the facade implements on it
//! (an inherent impl on a type of another crate is not allowed). `use octopipe::Builtin;` brings
//! it into scope.

use crate::stage::Registry;

/// The registry of every built-in stage: `Registry::builtin()`, with this trait in scope
/// (`use octopipe::Builtin;`).
pub trait Builtin {
    /// Every stage octopipe has, in pipeline order.
    fn builtin() -> Self;
}

impl Builtin for Registry {
    fn builtin() -> Self {
        let mut r = Registry::empty();
        r.register(crate::source::IMAGES);
        r.register(crate::source::MEDIA);
        r.register(crate::source::TESTSRC);
        r.register(crate::source::RTP);
        r.register(crate::source::APP);
        r.register(crate::boxes::BOXES);
        r.register(crate::detect::DETECT);
        r.register(crate::track::TRACK);
        r.register(crate::batch::BATCH);
        r.register(crate::tiles::TILES);
        r.register(crate::preprocess::PREPROCESS);
        r.register(crate::tilestats::TILESTATS);
        r.register(crate::classify::CLASSIFY);
        r.register(crate::appinfer::APPINFER);
        r.register(crate::sink::JSONL);
        r.register(crate::sink::TENSORS);
        r.register(crate::sink::TILESINK);
        r.register(crate::sink::APPSINK);
        #[cfg(feature = "mqtt")]
        r.register(crate::sink::MQTT);
        #[cfg(feature = "zenoh")]
        r.register(crate::sink::ZENOH);
        r.register(super::QUEUE);
        r.register(crate::source::HEAD);
        r
    }
}
