//! Any bytes as what a server answers the station's relay: an RTSP message or interleaved
//! packet (its length once whole, or the cap it passes; never past the bytes), an HTTP
//! document rewritten for the relay (or refused), a chunked body, and the text as a relayed URI.
#![no_main]

use libfuzzer_sys::fuzz_target;
use octopipe_sources::fuzzing::{dechunk, http_document, relayed, rtsp_message};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(n)) = rtsp_message(data) {
        assert!(n > 0 && n <= data.len(), "{n} of {}", data.len());
        // A message whole in a prefix is the same message in the whole.
        assert_eq!(rtsp_message(&data[..n]), Ok(Some(n)));
    }
    for (host, port) in [("cam", 80), ("::1", 8080)] {
        if let Ok(out) = http_document(data, host, port) {
            let text = String::from_utf8_lossy(&out);
            let server = match host.contains(':') {
                true => format!("http://[{host}]:{port}/"),
                false => format!("http://{host}:{port}/"),
            };
            assert!(!text.contains(&server), "{text}");
        }
    }
    if let Ok(body) = dechunk(data) {
        assert!(body.len() <= data.len());
    }
    if let Ok(uri) = std::str::from_utf8(data) {
        let servers = relayed(uri);
        for (host, _) in &servers {
            assert!(!host.is_empty() && !host.contains('/'), "{uri}: {host}");
        }
    }
});
