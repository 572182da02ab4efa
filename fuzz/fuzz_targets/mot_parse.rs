//! Any bytes through the VisDrone MOT parser (as a file's bytes: byte-order marks, invisible
//! characters, bytes that are not UTF-8), and every row it accepts through the clipping: an error
//! naming `file:line` is fine, a panic is not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use octopipe::boxes::{clip_box, mot_lines, parse_mot};

fuzz_target!(|data: &[u8]| {
    let text = data;
    match parse_mot(text, "fuzz.txt") {
        Ok(rows) => {
            for (frame, row) in rows {
                assert!(frame >= 1 && row.bbox[2] > 0 && row.bbox[3] > 0);
                let _ = clip_box(row.bbox, 1360, 765);
            }
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz.txt:"), "{e}"),
    }
    for (frame, line) in mot_lines(text, "fuzz.txt") {
        if let (Some(f), Ok((g, _))) = (frame, &line) {
            assert_eq!(f, *g);
        }
    }
});
