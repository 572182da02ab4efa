//! Any text as the description of a stream added over HTTP (`POST /streams`): parsed, checked by
//! the station's policy (one allowed folder, one allowed element, the default URI schemes, one
//! UDP port), and every value shown as the station shows it (credentials hidden). A refusal is
//! fine; a panic is not, and an accepted description names no stage by a URI.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use octopipe::control::Policy;
use octopipe::describe;
use octopipe::Builtin;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = octopipe::redact::shown(text);
    let Ok(desc) = describe::parse("<stream>", text, &HashMap::new()) else {
        return;
    };
    let mut policy = Policy::new();
    let _ = policy.allow_dir(std::path::Path::new("/tmp"));
    policy.allow_element("queue");
    policy.allow_udp_port(5004);
    match policy.check(&desc, &octopipe::stage::Registry::builtin()) {
        Ok(()) => {
            for st in &desc.stages {
                assert!(!st.kind.contains("://"), "{text}");
            }
        }
        Err(refusal) => {
            assert!(!refusal.message.is_empty());
        }
    }
    for st in &desc.stages {
        for p in &st.props {
            let _ = octopipe::redact::credentials(&p.value);
        }
    }
});
