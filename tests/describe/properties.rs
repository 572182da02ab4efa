//! Property tests of the text parsers (the fuzz targets in `fuzz/` run the same checks for longer):
//! arbitrary input never panics, errors name where they are, valid lines read back as written. And
//! of frame sizes and box counts: every frame size from 1x1 goes through the box generator, the
//! batch stage and the CPU preprocess.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use octopipe::batch::{Assembler, BatchConfig, Downstream};
use octopipe::boxes::{
    clip_box, det_lines, mot_lines, parse_det, parse_mot, BoxSource, Boxes, BoxesConfig, Synthetic,
};
use octopipe::budget::{Budget, Tally, DEFAULT_BUDGET};
use octopipe::describe;
use octopipe::frame::{Colorimetry, Detection, Frame, FrameLayout, PixelFormat, PooledBuf};
use octopipe::preprocess::cpu::CpuBackend;
use octopipe::preprocess::{Backend, PreprocessConfig};
use proptest::prelude::*;

fn vars() -> HashMap<String, String> {
    [("root", "/r"), ("model", "/m.onnx"), ("out", "/o")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Text that looks like a description often enough to get past the first token.
fn description_like() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("testsrc".to_string()),
        Just("images".to_string()),
        Just("media".to_string()),
        Just("boxes".to_string()),
        Just("batch".to_string()),
        Just("preprocess".to_string()),
        Just("classify".to_string()),
        Just("jsonl".to_string()),
        Just("queue".to_string()),
        Just("!".to_string()),
        Just("\\\n".to_string()),
        Just("# c\n".to_string()),
        Just("${root}".to_string()),
        Just("${nope}".to_string()),
        "[a-z-]{1,12}=[a-z0-9x.,/\"${}-]{0,12}",
        "size=[0-9]{0,4}x[0-9]{0,4}",
        "\\PC{0,6}",
    ];
    prop::collection::vec(token, 0..14).prop_map(|t| t.join(" "))
}

/// A valid DET row: (x, y, w, h, score, category, truncation, occlusion).
fn det_row() -> impl Strategy<Value = (i64, i64, i64, i64, i64, u8, i64, i64)> {
    (
        -5000i64..5000,
        -5000i64..5000,
        1i64..3000,
        1i64..3000,
        0i64..2,
        0u8..=11,
        0i64..3,
        0i64..3,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn describe_never_panics_on_any_text(text in "\\PC{0,200}") {
        if let Err(e) = describe::parse("<p>", &text, &vars()).and_then(|d| describe::build(&d)) {
            prop_assert!(e.line >= 1 && e.column >= 1);
            let _ = e.to_string();
        }
    }

    #[test]
    fn describe_never_panics_on_description_like_text(text in description_like()) {
        if let Err(e) = describe::parse("<p>", &text, &vars()).and_then(|d| describe::build(&d)) {
            let prefix = format!("<p>:{}:{}: ", e.line, e.column);
            prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
        }
    }

    #[test]
    fn annotation_parsers_never_panic_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        // The readers take a file's bytes as they are; the lossy text of them too.
        let lossy = String::from_utf8_lossy(&bytes);
        for text in [&bytes[..], lossy.as_bytes()] {
            for rows in parse_det(text, "a.txt").into_iter() {
                for r in rows {
                    let _ = clip_box(r.bbox, 1920, 1080);
                }
            }
            let _ = parse_mot(text, "m.txt");
            let _ = det_lines(text, "a.txt").count();
            let _ = mot_lines(text, "m.txt").count();
        }
    }

    #[test]
    fn annotation_parsers_never_panic_on_number_soup(
        fields in prop::collection::vec(
            prop_oneof![any::<i64>().prop_map(|v| v.to_string()), "[0-9 x,-]{0,4}"], 0..24),
        newline_every in 1usize..12,
    ) {
        let text: String = fields
            .chunks(newline_every)
            .map(|c| c.join(","))
            .collect::<Vec<_>>()
            .join("\n");
        if let Ok(rows) = parse_det(&text, "a.txt") {
            for r in rows {
                if let Ok(b) = clip_box(r.bbox, 1920, 1080) {
                    prop_assert!(b[0] + b[2] <= 1920 && b[1] + b[3] <= 1080);
                    prop_assert!(b[2] >= 2 && b[3] >= 2);
                }
            }
        }
        if let Ok(rows) = parse_mot(&text, "m.txt") {
            for (_, r) in rows {
                let _ = clip_box(r.bbox, 1360, 765);
            }
        }
    }

    #[test]
    fn valid_det_lines_read_back_as_written(
        rows in prop::collection::vec(det_row(), 1..20),
        trailing_comma in any::<bool>(),
        short in any::<bool>(),
    ) {
        let text: String = rows
            .iter()
            .map(|(x, y, w, h, s, c, t, o)| {
                let mut line = if short {
                    format!("{x},{y},{w},{h},{s},{c}")
                } else {
                    format!("{x},{y},{w},{h},{s},{c},{t},{o}")
                };
                if trailing_comma {
                    line.push(',');
                }
                line + "\n"
            })
            .collect();
        let parsed = parse_det(&text, "a.txt").unwrap();
        prop_assert_eq!(parsed.len(), rows.len());
        for (p, (x, y, w, h, s, c, _, _)) in parsed.iter().zip(&rows) {
            prop_assert_eq!(p.bbox, [*x, *y, *w, *h]);
            prop_assert_eq!(p.score, *s as f32);
            prop_assert_eq!(p.category, *c);
            prop_assert_eq!(p.track, None);
        }
    }

    #[test]
    fn valid_mot_lines_read_back_as_written(
        rows in prop::collection::vec((1u64..100_000, 0u32..10_000, det_row()), 1..20),
    ) {
        let text: String = rows
            .iter()
            .map(|(f, id, (x, y, w, h, s, c, t, o))| format!("{f},{id},{x},{y},{w},{h},{s},{c},{t},{o}\n"))
            .collect();
        let parsed = parse_mot(&text, "m.txt").unwrap();
        prop_assert_eq!(parsed.len(), rows.len());
        for ((frame, p), (f, id, (x, y, w, h, _, c, _, _))) in parsed.iter().zip(&rows) {
            prop_assert_eq!(*frame, *f);
            prop_assert_eq!(p.track, Some(*id));
            prop_assert_eq!(p.bbox, [*x, *y, *w, *h]);
            prop_assert_eq!(p.category, *c);
        }
    }

    #[test]
    fn det_errors_name_the_file_and_the_bad_line(
        good in prop::collection::vec(det_row(), 0..10),
        bad in prop_oneof![
            Just("1,2,3".to_string()),
            Just("1,2,x,4,1,4,0,0".to_string()),
            Just("1,2,0,4,1,4,0,0".to_string()),
            Just("1,2,-3,4,1,4,0,0".to_string()),
            Just("1,2,3,4,1,12,0,0".to_string()),
            "[a-z;]{1,20}",
        ],
        at in any::<prop::sample::Index>(),
    ) {
        let mut lines: Vec<String> = good
            .iter()
            .map(|(x, y, w, h, s, c, t, o)| format!("{x},{y},{w},{h},{s},{c},{t},{o}"))
            .collect();
        let pos = at.index(lines.len() + 1);
        lines.insert(pos, bad);
        let text = lines.join("\n");
        let e = parse_det(&text, "ann/f.txt").unwrap_err().to_string();
        let prefix = format!("ann/f.txt:{}: ", pos + 1);
        prop_assert!(e.starts_with(&prefix), "{} does not start with {}", e, prefix);
        // Read leniently, every other line still parses.
        let ok = det_lines(&text, "ann/f.txt").filter(|l| l.is_ok()).count();
        prop_assert_eq!(ok, good.len());
    }

    #[test]
    fn clipped_boxes_stay_inside_the_frame(
        b in (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        fw in 1u32..5000,
        fh in 1u32..5000,
    ) {
        if let Ok([x, y, w, h]) = clip_box([b.0, b.1, b.2, b.3], fw, fh) {
            prop_assert!(w >= 2 && h >= 2);
            prop_assert!(x as u64 + w as u64 <= fw as u64 && y as u64 + h as u64 <= fh as u64);
        }
    }
}

/// Found by `fuzz/describe_parse`: an error whose span ended inside a multi-byte character made the
/// caret excerpt slice the text off a character boundary (a panic).
#[test]
fn describe_error_spans_stay_on_character_boundaries() {
    let bytes = include_bytes!("../../fuzz/corpus/describe_parse/regression-multibyte-span");
    let text = std::str::from_utf8(bytes).unwrap();
    let e = describe::parse("<p>", text, &vars()).unwrap_err();
    assert!(e.to_string().contains('^'), "{e}");
    for text in [
        "testsrc !\u{5d2}",
        "testsrc ! \u{1F681}=",
        "é ! ü=\u{5d2}",
        "testsrc size=\u{5d2}",
    ] {
        let _ = describe::parse("<p>", text, &vars()).and_then(|d| describe::build(&d));
    }
}

/// A `w`x`h` frame of `format` with some pixel pattern.
fn tiny_frame(format: PixelFormat, w: u32, h: u32) -> Frame {
    let layout = FrameLayout::packed(format, w, h);
    let data = (0..layout.size()).map(|i| (i * 37 % 251) as u8).collect();
    Frame::new(
        0,
        0,
        "tiny",
        layout,
        Colorimetry::default(),
        PooledBuf::unpooled(data),
    )
}

/// Bytes of an annotation file: lines of numbers (some huge, some not numbers), with byte-order
/// marks, invisible characters and stray bytes mixed in.
fn annotation_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        any::<i64>().prop_map(|v| v.to_string().into_bytes()),
        "[0-9]{19,30}".prop_map(String::into_bytes),
        (0i64..2000).prop_map(|v| v.to_string().into_bytes()),
        Just(b",".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just(b"\xFF\xFE".to_vec()),
        Just("\u{200B}".as_bytes().to_vec()),
        Just("\u{A0}".as_bytes().to_vec()),
        any::<u8>().prop_map(|b| vec![b]),
    ];
    (any::<bool>(), prop::collection::vec(piece, 0..60)).prop_map(|(bom, pieces)| {
        let mut bytes = if bom {
            b"\xEF\xBB\xBF".to_vec()
        } else {
            Vec::new()
        };
        pieces.iter().for_each(|p| bytes.extend_from_slice(p));
        bytes
    })
}

/// The 1-based line number an error names (`file:LINE: ...`).
fn error_line(e: &str, file: &str) -> Option<usize> {
    e.strip_prefix(file)?
        .strip_prefix(':')?
        .split(':')
        .next()?
        .parse()
        .ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn annotation_readers_take_any_bytes_and_name_the_line(bytes in annotation_bytes()) {
        let lines = bytes.split(|b| *b == b'\n').count();
        for line in det_lines(&bytes[..], "a.txt") {
            if let Err(e) = line {
                let e = e.to_string();
                let n = error_line(&e, "a.txt");
                prop_assert!(n.is_some_and(|n| (1..=lines).contains(&n)), "{}", e);
            }
        }
        for (frame, line) in mot_lines(&bytes[..], "m.txt") {
            match line {
                Ok((f, r)) => {
                    prop_assert_eq!(Some(f), frame);
                    prop_assert!(f >= 1 && r.bbox[2] > 0 && r.bbox[3] > 0);
                }
                Err(e) => {
                    let e = e.to_string();
                    let n = error_line(&e, "m.txt");
                    prop_assert!(n.is_some_and(|n| (1..=lines).contains(&n)), "{}", e);
                }
            }
        }
        prop_assert_eq!(
            parse_det(&bytes[..], "a.txt").is_ok(),
            det_lines(&bytes[..], "a.txt").all(|l| l.is_ok())
        );
    }

    #[test]
    fn a_byte_order_mark_changes_nothing(rows in prop::collection::vec(det_row(), 1..10)) {
        let text: String = rows
            .iter()
            .map(|(x, y, w, h, s, c, t, o)| format!("{x},{y},{w},{h},{s},{c},{t},{o}\r\n"))
            .collect();
        let with_bom = [b"\xEF\xBB\xBF".as_slice(), text.as_bytes()].concat();
        prop_assert_eq!(parse_det(&with_bom[..], "a.txt").unwrap(), parse_det(&text, "a.txt").unwrap());
        let mot: String = text.lines().map(|l| format!("3,1,{l}\n")).collect();
        let mot_bom = [b"\xEF\xBB\xBF".as_slice(), mot.as_bytes()].concat();
        prop_assert_eq!(parse_mot(&mot_bom[..], "m.txt").unwrap(), parse_mot(&mot, "m.txt").unwrap());
    }

    #[test]
    fn synthetic_boxes_fit_every_frame_size(
        w in 1u32..=64,
        h in 1u32..=64,
        count in 0u32..40,
        seed in any::<u64>(),
        seq in any::<u64>(),
    ) {
        let boxes = Synthetic::new(seed).frame_boxes(0, seq, count, w, h);
        prop_assert_eq!(boxes.len(), count as usize);
        for r in &boxes {
            let [x, y, bw, bh] = r.bbox;
            prop_assert!(x >= 0 && y >= 0 && x + bw <= w as i64 && y + bh <= h as i64, "{:?}", r);
            prop_assert!(bw >= 2.min(w as i64) && bh >= 2.min(h as i64), "{:?}", r);
        }
        // Through the detect stage: every box classified or skipped, none lost.
        let mut detector = Boxes::new(BoxesConfig::new(BoxSource::Synthetic { count, seed })).unwrap();
        let mut frame = tiny_frame(PixelFormat::I420, w, h);
        frame.seq = seq;
        detector.attach(&mut frame).unwrap();
        let skipped: u32 = frame.skipped.iter().map(|(_, n)| n).sum();
        prop_assert_eq!(frame.detections.len() as u32 + skipped, count);
        for d in &frame.detections {
            let [x, y, bw, bh] = d.bbox;
            prop_assert!(bw >= 2 && bh >= 2 && x + bw <= w && y + bh <= h, "{:?}", d);
        }
    }

    #[test]
    fn tiny_frames_and_boxes_go_through_batch_and_preprocess(
        w in 1u32..=64,
        h in 1u32..=64,
        format in prop_oneof![
            Just(PixelFormat::I420),
            Just(PixelFormat::Nv12),
            Just(PixelFormat::Rgb),
            Just(PixelFormat::Bgra),
        ],
        boxes in prop::collection::vec(any::<[prop::sample::Index; 4]>(), 1..8),
        out in 1u32..=12,
        max_crops in 1usize..4,
    ) {
        // Boxes of 1..=size px, anywhere inside the frame.
        let mut frame = tiny_frame(format, w, h);
        frame.detections = boxes
            .iter()
            .map(|[a, b, c, d]| {
                let (bw, bh) = (1 + c.index(w as usize) as u32, 1 + d.index(h as usize) as u32);
                let x = a.index((w - bw + 1) as usize) as u32;
                let y = b.index((h - bh + 1) as usize) as u32;
                Detection::new([x, y, bw, bh])
            })
            .collect();
        let config = BatchConfig { max_crops, ..BatchConfig::default() };
        let tally = Tally::new(Budget::new(DEFAULT_BUDGET, Vec::new()));
        let downstream = Arc::new(Downstream::new(Duration::from_secs(1)));
        let mut assembler = Assembler::new(config, (out, out), DEFAULT_BUDGET, downstream, None, tally);
        let mut batches = Vec::new();
        assembler.push(frame, &mut batches).unwrap();
        batches.extend(assembler.flush().unwrap());
        let mut backend = CpuBackend::new(PreprocessConfig { threads: 1, ..PreprocessConfig::default() }).unwrap();
        let (mut crops, count) = (0, batches.len());
        for (i, batch) in batches.iter_mut().enumerate() {
            prop_assert!(batch.crops.len() <= max_crops);
            prop_assert_eq!(batch.frames[0].part.is_last(), i + 1 == count);
            crops += batch.crops.len();
            backend.run(batch).unwrap();
            let values = batch.tensor.as_f32().unwrap();
            prop_assert_eq!(values.len(), batch.crops.len() * (out * out * 3) as usize);
            prop_assert!(values.iter().all(|v| v.is_finite()));
        }
        prop_assert_eq!(crops, boxes.len());
    }
}
