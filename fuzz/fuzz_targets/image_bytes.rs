//! Any bytes as an image file or the first buffers of an image stream: its format sniffed, its
//! declared size read from the whole and from each prefix (a size read from a prefix must be
//! the whole's: the stream guard reads prefixes), its damage checked as a JPEG and as a PNG.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    octopipe_sources::fuzzing::image(data);
});
