//! Through the library, until the description wires them: `skip_bad_lines` (`bad-lines=skip`),
//! annotations for frames that do not exist (`Boxes::unused`, `unused_det_files`), `loops`.

use super::*;

use octopipe::boxes::{BoxSource, Boxes, BoxesConfig};
use octopipe::frame::{Colorimetry, Frame, FrameLayout, PixelFormat, PooledBuf, SkipReason};

fn frame(seq: u64, name: &str) -> Frame {
    let layout = FrameLayout::packed(PixelFormat::Rgb, 64, 48);
    Frame::new(
        0,
        seq,
        name,
        layout,
        Colorimetry::JPEG,
        PooledBuf::unpooled(vec![0; layout.size()]),
    )
}

#[test]
fn bad_det_lines_can_be_skipped_and_counted() {
    let dir = common::temp_dir("lib-skip-det");
    std::fs::create_dir_all(dir.join("annotations")).unwrap();
    let ann = write_det(
        &dir,
        0,
        "1,2,30,20,1,4,0,0\n1,2,x,4,1,4\n1,2,0,4,1,4,0,0\n3,3,10,10,1,1,0,0\n",
    );
    let mut config = BoxesConfig::new(BoxSource::Det {
        location: dir.join("annotations"),
    });
    let err = Boxes::new(config.clone())
        .unwrap()
        .attach(&mut frame(0, "frame_00000.jpg"))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with(&format!("{}:2: ", ann.display())), "{err}");

    config.skip_bad_lines = true;
    let mut detector = Boxes::new(config).unwrap();
    let mut f = frame(0, "frame_00000.jpg");
    detector.attach(&mut f).unwrap();
    assert_eq!(f.detections.len(), 2);
    assert_eq!(f.skipped, [(SkipReason::BadLine, 2)]);
    assert_eq!(SkipReason::BadLine.name(), "bad-line");
    assert_eq!(
        detector.first_bad_line(),
        Some(
            format!(
                "{}:2: field 3 is 'x', expected an integer (x,y,w,h,score,category,truncation,occlusion)",
                ann.display()
            )
            .as_str()
        )
    );
}

#[test]
fn bad_mot_lines_skipped_and_frames_that_do_not_exist_listed() {
    let dir = common::temp_dir("lib-skip-mot");
    let mot = dir.join("seq.txt");
    std::fs::write(
        &mot,
        "1,1,5,5,20,20,1,4,0,0\n\
         2,1,6,6,20,20,1,4,0,0\n\
         2,1,6,6,x,20,1,4,0,0\n\
         x,1,6,6,20,20,1,4,0,0\n\
         9,1,6,6,20,20,1,4,0,0\n\
         12,1,6,6,0,20,1,4,0,0\n",
    )
    .unwrap();
    let mut config = BoxesConfig::new(BoxSource::Mot {
        location: mot.clone(),
    });
    let err = Boxes::new(config.clone()).err().unwrap().to_string();
    assert!(
        err.starts_with(&format!("{}:3: field 5 is 'x'", mot.display())),
        "{err}"
    );

    config.skip_bad_lines = true;
    let mut detector = Boxes::new(config).unwrap();
    let (mut f0, mut f1) = (frame(0, "t"), frame(1, "t"));
    detector.attach(&mut f0).unwrap();
    detector.attach(&mut f1).unwrap();
    // Line 4 has no readable frame index: counted on the first frame; line 3 on frame index 2.
    assert_eq!(
        (f0.detections.len(), f0.skipped.clone()),
        (1, vec![(SkipReason::BadLine, 1)])
    );
    assert_eq!(
        (f1.detections.len(), f1.skipped.clone()),
        (1, vec![(SkipReason::BadLine, 1)])
    );
    // A 2-frame stream: the rows of frame indices 9 and 12 (a bad line) are for frames it lacks,
    // or, had the run stopped early, frames not reached.
    assert_eq!(detector.unused(), [9, 12]);
    let m = mot.display();
    assert!(detector.end_notes(false).contains(&format!(
        "boxes: 2 frame indices of {m} have no frame in the stream (9, 12)"
    )));
    assert!(detector.end_notes(true).contains(&format!(
        "boxes: stopped early: 2 frame indices of {m} not reached (9, 12)"
    )));
}

#[test]
fn det_files_for_images_that_do_not_exist_are_listed() {
    let dir = common::temp_dir("lib-unused-det");
    std::fs::create_dir_all(dir.join("annotations")).unwrap();
    write_det(&dir, 0, "1,2,30,20,1,4,0,0\n");
    write_det(&dir, 1, "1,2,30,20,1,4,0,0\n");
    std::fs::write(dir.join("annotations/other.txt"), "").unwrap();
    let mut detector = Boxes::new(BoxesConfig::new(BoxSource::Det {
        location: dir.join("annotations"),
    }))
    .unwrap();
    detector.attach(&mut frame(0, "frame_00000.jpg")).unwrap();
    assert_eq!(
        detector.unused_det_files(),
        [
            dir.join("annotations/frame_00001.txt"),
            dir.join("annotations/other.txt")
        ]
    );
}

#[test]
fn an_image_sequence_can_loop() {
    use octopipe::frame::BufferPool;
    use octopipe::source::{self, SourceConfig, SourceKind};
    let dir = common::temp_dir("lib-loop");
    jpeg_clip(&dir, 2);
    let mut config = SourceConfig::new(SourceKind::Images {
        location: dir.join("images").display().to_string(),
    });
    config.loops = 3;
    let mut src = source::open(&config, BufferPool::new()).unwrap();
    let mut frames = Vec::new();
    while let Some(f) = src.next_frame().unwrap() {
        frames.push((f.seq, f.source.to_string(), f.pts.unwrap()));
    }
    assert_eq!(frames.len(), 6);
    for (i, (seq, name, pts)) in frames.iter().enumerate() {
        assert_eq!(*seq, i as u64);
        assert_eq!(name, &format!("frame_{:05}.jpg", i % 2));
        assert!(pts.abs_diff(Duration::from_secs_f64(i as f64 / 30.0)) < Duration::from_micros(1));
    }

    config.loops = 0;
    let err = source::open(&config, BufferPool::new())
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "invalid loop '0': expected a count of at least 1 (only image sequences play more than once)"
    );
    let mut test = SourceConfig::new(SourceKind::Test {
        pattern: "smpte".into(),
        width: 64,
        height: 48,
        num_buffers: 2,
        format: PixelFormat::I420,
    });
    test.loops = 2;
    assert!(source::open(&test, BufferPool::new()).is_err());
}

#[test]
fn skipped_bad_lines_are_accounted_for_in_a_run() {
    if !common::ort_ready() {
        return;
    }
    use octopipe::describe;
    use octopipe::pipeline::Pipeline;
    let dir = common::temp_dir("lib-skip-run");
    jpeg_clip(&dir, 3);
    write_det(&dir, 0, "1,2,30,20,1,4,0,0\nbad\n");
    write_det(&dir, 1, "1,2,30,20,1,4,0,0\n100,2,30,20,1,4,0,0\n");
    write_det(&dir, 2, "1,2,0,20,1,4,0,0\n1,2,3,4,0,0,0,0\n");
    let out = dir.join("o.jsonl");
    let text = images_det(&dir, "", &out.display().to_string());
    let mut config =
        describe::build(&describe::parse("<t>", &text, &Default::default()).unwrap()).unwrap();
    config
        .element_mut::<octopipe::boxes::BoxesConfig>()
        .unwrap()
        .skip_bad_lines = true;
    let outcome = Pipeline::build(config).unwrap().run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    assert_eq!((r.frames_in, r.processed, r.dropped_total()), (3, 3, 0));
    let mut skipped: Vec<(&str, u64)> = r.skipped.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [("bad-line", 2), ("ignored-region", 1), ("outside-frame", 1)]
    );
    assert_eq!(r.objects, 2);
    assert!(r
        .to_string()
        .contains("objects: 6 in = 2 classified + 4 skipped"));
    assert_eq!(common::read_jsonl(&out).len(), 2);
}

#[test]
fn a_stop_request_leaves_mot_frames_not_reached() {
    // Ctrl-C (the CLI's handler calls `StopHandle::stop`) ends the stream early: the rows of the
    // frames not read are "not reached", not frames the stream lacks.
    use octopipe::pipeline::Pipeline;
    let dir = common::temp_dir("lib-mot-stop");
    let mot = dir.join("seq.txt");
    let rows: String = (1..=100_000)
        .map(|i| format!("{i},1,5,5,20,20,1,4,0,0\n"))
        .collect();
    std::fs::write(&mot, rows).unwrap();
    let text = format!(
        "testsrc width=64 height=48 num-buffers=100000 ! boxes format=mot location={} ! jsonl location={}",
        mot.display(),
        dir.join("o.jsonl").display()
    );
    let pipeline = Pipeline::from_description(&text, &Default::default()).unwrap();
    let stop = pipeline.stop_handle();
    let run = std::thread::spawn(move || pipeline.run());
    std::thread::sleep(Duration::from_millis(300));
    stop.stop();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    assert!(r.processed > 0 && r.processed < 100_000, "{r}");
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
    let note = format!(
        "boxes: stopped early: {} frame indices of {} not reached ({}..=100000)",
        100_000 - r.frames_in,
        mot.display(),
        r.frames_in + 1
    );
    assert!(r.extra.contains(&note), "{note:?} not in {:?}", r.extra);
    assert!(
        !r.to_string().contains("have no frame in the stream"),
        "{r}"
    );
}
