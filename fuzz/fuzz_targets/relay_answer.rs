//! Any bytes as what a server answers the station's relay: an RTSP message or interleaved
//! packet (its length once whole, or the cap it passes; never past the bytes), an HTTP
//! document rewritten for the relay (or refused), a chunked body, and the text as a relayed URI
//! (`octopipe_sources::fuzzing::answer` has the properties).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    octopipe_sources::fuzzing::answer(data);
});
