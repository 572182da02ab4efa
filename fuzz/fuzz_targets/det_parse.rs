//! Any bytes through the VisDrone DET parser (as a file's bytes: byte-order marks, invisible
//! characters, bytes that are not UTF-8), and every row it accepts through the clipping: an error
//! naming `file:line` is fine, a panic is not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use octopipe::boxes::{clip_box, det_lines, parse_det};

fuzz_target!(|data: &[u8]| {
    let text = data;
    match parse_det(text, "fuzz.txt") {
        Ok(rows) => {
            for row in rows {
                assert!(row.bbox[2] > 0 && row.bbox[3] > 0 && row.category <= 11);
                if let Ok(b) = clip_box(row.bbox, 1920, 1080) {
                    assert!(b[0] + b[2] <= 1920 && b[1] + b[3] <= 1080);
                }
            }
        }
        Err(e) => {
            let e = e.to_string();
            let rest = e.strip_prefix("fuzz.txt:").unwrap_or_else(|| panic!("{e}"));
            let line: usize = rest
                .split(':')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no line number: {e}"));
            assert!(line >= 1 && line <= text.split(|b| *b == b'\n').count(), "{e}");
        }
    }
    // The lenient reading agrees with the strict one.
    let lines: Vec<_> = det_lines(text, "fuzz.txt").collect();
    assert_eq!(
        lines.iter().all(|l| l.is_ok()),
        parse_det(text, "fuzz.txt").is_ok()
    );
});
