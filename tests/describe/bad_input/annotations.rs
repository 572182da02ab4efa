//! Annotations

use super::*;

#[test]
fn a_malformed_det_line_names_file_and_line() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("bad-det-line");
    jpeg_clip(&dir, 2);
    write_det(&dir, 0, "1,2,30,20,1,4,0,0\n");
    let ann = write_det(&dir, 1, "1,2,30,20,1,4,0,0\n\n5,6,x,8,1,4,0,0\n");
    fails_with(
        &run(&images_det(&dir, "", "-")),
        &[&format!(
            "octopipe: error: {}:3: field 3 is 'x', expected an integer (x,y,w,h,score,category,truncation,occlusion)",
            ann.display()
        )],
    );
}

#[test]
fn a_short_det_line_names_file_and_line() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("bad-det-short");
    jpeg_clip(&dir, 1);
    let ann = write_det(&dir, 0, "1,2,30\n");
    fails_with(
        &run(&images_det(&dir, "", "-")),
        &[&format!(
            "octopipe: error: {}:1: expected 6 comma-separated fields (x,y,w,h,score,category,truncation,occlusion), found 3",
            ann.display()
        )],
    );
}

#[test]
fn zero_and_negative_box_sizes_name_file_and_line() {
    if !common::ort_ready() {
        return;
    }
    for (text, size) in [
        ("1,2,0,20,1,4,0,0\n", "0x20"),
        ("1,2,30,-5,1,4,0,0\n", "30x-5"),
    ] {
        let dir = common::temp_dir("bad-det-size");
        jpeg_clip(&dir, 1);
        let ann = write_det(&dir, 0, text);
        fails_with(
            &run(&images_det(&dir, "", "-")),
            &[&format!(
                "octopipe: error: {}:1: box width and height must be positive, found {size}",
                ann.display()
            )],
        );
    }
}

#[test]
fn an_unknown_category_names_file_and_line() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("bad-det-category");
    jpeg_clip(&dir, 1);
    let ann = write_det(&dir, 0, "1,2,30,20,1,14,0,0\n");
    fails_with(
        &run(&images_det(&dir, "", "-")),
        &[&format!(
            "octopipe: error: {}:1: object category 14 is not a VisDrone category (0..11)",
            ann.display()
        )],
    );
}

#[test]
fn boxes_outside_the_frame_are_skipped_and_counted() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("bad-outside");
    jpeg_clip(&dir, 1);
    // In, entirely right of, entirely above, and straddling the 64x48 frame (clipped, kept).
    write_det(
        &dir,
        0,
        "1,2,30,20,1,4,0,0\n100,10,20,20,1,4,0,0\n10,-50,20,20,1,4,0,0\n50,40,30,30,1,4,0,0\n",
    );
    let out = dir.join("o.jsonl");
    let o = run(&images_det(&dir, "", &out.display().to_string()));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("objects: 4 in = 2 classified + 2 skipped (outside-frame: 2)"),
        "{stderr}"
    );
    let bboxes: Vec<_> = common::read_jsonl(&out)
        .iter()
        .map(|o| o["bbox"].clone())
        .collect();
    assert_eq!(
        bboxes[1],
        serde_json::json!([50, 40, 14, 8]),
        "clipped to the frame"
    );
}

#[test]
fn a_frame_without_its_annotation_file() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("bad-det-missing");
    jpeg_clip(&dir, 2);
    write_det(&dir, 0, "1,2,30,20,1,4,0,0\n");
    fails_with(
        &run(&images_det(&dir, "", "-")),
        &[&format!(
            "octopipe: error: {0}/annotations/frame_00001.txt: no annotation file for frame 'frame_00001.jpg'",
            dir.display()
        )],
    );
}

#[test]
fn a_missing_mot_file() {
    fails_with(
        &run(&format!(
            "testsrc num-buffers=2 ! boxes format=mot location=/nowhere/seq.txt ! classify model={} ! jsonl location=-",
            model("valid-64.onnx").display()
        )),
        &["octopipe: error: /nowhere/seq.txt: No such file or directory (os error 2)"],
    );
}

#[test]
fn image_names_that_number_frames_inconsistently_fail_naming_the_image() {
    // MOT rows of an image are those of the number its name ends with: names counting from 0
    // cannot be MOT frame indices (1-based), and a name without a number among numbered ones
    // has none. Either fails before the image's frame gets boxes, never guessing.
    let dir = common::temp_dir("bad-image-numbers");
    jpeg_clip(&dir, 3);
    let mot = dir.join("seq.txt");
    std::fs::write(&mot, "1,1,5,5,20,20,1,4,0,0\n2,1,5,5,20,20,1,4,0,0\n").unwrap();
    let text = format!(
        "images location={}/images ! boxes format=mot location={} ! classify model={} ! jsonl location=-",
        dir.display(),
        mot.display(),
        model("valid-64.onnx").display()
    );
    let hint = format!(
        "boxes format=mot location={} takes an image's frame index from the number its name ends \
         with; name every image of the sequence by its 1-based frame index (as VisDrone's \
         0000001.jpg), or none (then images are numbered by position)",
        mot.display()
    );
    fails_with(
        &run(&text),
        &[&format!(
            "octopipe: error: frame_00000.jpg: its name ends with frame number 0, but MOT frame indices start at 1: {hint}"
        )],
    );
    for i in 0..3 {
        let from = dir.join(format!("images/frame_{i:05}.jpg"));
        std::fs::rename(&from, dir.join(format!("images/{:07}.jpg", i + 1))).unwrap();
    }
    let cover = dir.join("images/cover.jpg");
    std::fs::copy(dir.join("images/0000001.jpg"), &cover).unwrap();
    fails_with(
        &run(&text),
        &[&format!(
            "octopipe: error: cover.jpg: its name ends with no frame number, but the sequence's first image, 0000001.jpg, ends with one: {hint}"
        )],
    );
    std::fs::remove_file(&cover).unwrap();
    let out = run(&text);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_malformed_mot_line_names_file_and_line() {
    let dir = common::temp_dir("bad-mot");
    let mot = dir.join("seq.txt");
    std::fs::write(&mot, "1,1,5,5,20,20,1,4,0,0\n0,1,5,5,20,20,1,4,0,0\n").unwrap();
    fails_with(
        &run(&format!(
            "testsrc num-buffers=2 ! boxes format=mot location={} ! classify model={} ! jsonl location=-",
            mot.display(),
            model("valid-64.onnx").display()
        )),
        &[&format!(
            "octopipe: error: {}:2: frame index 0 must be >= 1",
            mot.display()
        )],
    );
}

#[test]
fn annotation_files_with_a_byte_order_mark_are_read() {
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("bad-bom");
    jpeg_clip(&dir, 1);
    std::fs::write(
        dir.join("annotations/frame_00000.txt"),
        b"\xEF\xBB\xBF1,2,30,20,1,4,0,0\r\n5,5,10,10,1,1,0,0\r\n",
    )
    .unwrap();
    let o = run(&images_det(&dir, "", "-"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("objects: 2 in = 2 classified"), "{stderr}");

    // Frame 3 has no row: counted in a note.
    let mot = dir.join("seq.txt");
    std::fs::write(
        &mot,
        b"\xEF\xBB\xBF1,1,5,5,20,20,1,4,0,0\n2,1,6,6,20,20,1,4,0,0\n",
    )
    .unwrap();
    let o = run(&format!(
        "testsrc width=64 height=48 num-buffers=3 ! boxes format=mot location={} ! classify model={} ! jsonl location=-",
        mot.display(),
        model("valid-64.onnx").display()
    ));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("objects: 2 in = 2 classified"), "{stderr}");
    assert!(
        stderr.contains("boxes: 1 frame had no annotation rows (no boxes)"),
        "{stderr}"
    );
}

#[test]
fn an_invisible_or_non_utf8_byte_in_an_annotation_is_named() {
    let dir = common::temp_dir("bad-bytes");
    jpeg_clip(&dir, 1);
    let cases: [(&[u8], &str); 4] = [
        (
            b"1,2,30,20,1,4,0,0\n5,5,10,10,1,1,0,0\n\xEF\xBB\xBF7,7,10,10,1,1,0,0\n",
            ":3: byte 0xEF at column 1 is not part of a number (field 1: U+FEFF, an invisible character)",
        ),
        (
            b"1,2,30,20\xA0,1,4,0,0\n",
            ":1: byte 0xA0 at column 10 is not part of a number (field 4: not UTF-8 text)",
        ),
        (
            "1,2,30\u{200B},20,1,4,0,0\n".as_bytes(),
            ":1: byte 0xE2 at column 7 is not part of a number (field 3: U+200B, an invisible character)",
        ),
        (
            b"1,2,99999999999999999999,20,1,4,0,0\n",
            ":1: field 3 is '99999999999999999999', out of range for a 64-bit integer (x,y,w,h,score,category,truncation,occlusion)",
        ),
    ];
    let ann = dir.join("annotations/frame_00000.txt");
    for (bytes, message) in cases {
        std::fs::write(&ann, bytes).unwrap();
        fails_with(
            &run(&images_det(&dir, "", "-")),
            &[&format!("octopipe: error: {}{message}", ann.display())],
        );
    }
    // A UTF-16 file (Windows "Unicode") is refused as a whole.
    std::fs::write(&ann, b"\xFF\xFE1\x00,\x002\x00").unwrap();
    fails_with(
        &run(&images_det(&dir, "", "-")),
        &[&format!(
            "octopipe: error: {}: UTF-16 text (it starts with the byte-order mark 0xFF 0xFE): save it as UTF-8",
            ann.display()
        )],
    );
}

#[test]
fn after_an_early_stop_unread_mot_frames_are_not_reached() {
    // A truncated file stops the run early: the MOT rows of the frames after the cut were not
    // reached, which is not the same as the stream not having those frames.
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("bad-mot-early");
    let path = h264_mp4(&dir, true);
    truncate(&path, 0.5);
    let mot = dir.join("seq.txt");
    let rows: String = (1..=60)
        .map(|i| format!("{i},1,5,5,20,20,1,4,0,0\n"))
        .collect();
    std::fs::write(&mot, rows).unwrap();
    let stderr = fails_with(
        &run(&format!(
            "media location={} ! boxes format=mot location={} ! classify model={} ! jsonl location=-",
            path.display(),
            mot.display(),
            model("valid-64.onnx").display()
        )),
        &["truncated file?"],
    );
    // The frames read, and any the decoder lost among them (the cut can take a frame the
    // frames after it needed), are the indices reached.
    let (_, processed, _) = common::frame_accounting(&stderr);
    let lost: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("lost by the decoder: "))
        .and_then(|l| l.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    let reached = processed + lost;
    assert!(
        stderr.contains(&format!(
            "boxes: stopped early: {} frame indices of {} not reached ({}..=60)",
            60 - reached,
            mot.display(),
            reached + 1
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("have no frame in the stream"), "{stderr}");
}
