//! The stages octopipe has: [`Registry::builtin`] (and the registry's default). The description
//! side knows every concrete stage; the stage core (`crate::stage`) knows none.

use crate::stage::Registry;

impl Registry {
    /// Every stage octopipe has, in pipeline order.
    pub fn builtin() -> Self {
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
        r.register(crate::sink::MQTT);
        r.register(crate::sink::ZENOH);
        r.register(super::QUEUE);
        r.register(crate::source::HEAD);
        r
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}
