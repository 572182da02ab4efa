//! Pushing: bad pushes, back-pressure and dropping, several threads, closing and dropping the
//! handles, the one-shot classifier, two app sources into one batch stage.

use super::*;

/// A small RGB frame with one box.
fn small(w: u32, h: u32) -> AppFrame {
    AppFrame::packed(PixelFormat::Rgb, w, h, vec![128; (w * h * 3) as usize])
        .boxes([[4u32, 4, 16, 12]])
}

#[test]
fn bad_pushes_are_errors_that_say_what_is_wrong() {
    let _serial = serial();
    let mut pipeline =
        Pipeline::from_description("app name=cam ! preprocess ! appsink", &HashMap::new()).unwrap();
    let cam = pipeline.app_source(Some("cam")).unwrap();
    assert_eq!(cam.name(), "cam");
    let batches = pipeline.batches(64);
    let run = std::thread::spawn(move || pipeline.run());
    let reader = std::thread::spawn(move || batches.into_iter().collect::<Vec<CropBatch>>());

    let mut good = 0u64;
    let mut push_ok = |frame: AppFrame| {
        cam.push(frame).unwrap();
        good += 1;
    };
    push_ok(small(64, 48));
    let text = |e: PushError| e.to_string();

    // A plane too small for its layout.
    let e = cam
        .push(AppFrame::packed(PixelFormat::Rgb, 64, 48, vec![0; 100]))
        .unwrap_err();
    assert!(matches!(e, PushError::Frame { seq: 1, .. }), "{e:?}");
    let m = text(e);
    assert!(
        m.contains("'cam'") && m.contains("frame 1") && m.contains("9216 bytes, 100 given"),
        "{m}"
    );

    // A stride smaller than a row.
    let mut layout = FrameLayout::packed(PixelFormat::Rgb, 64, 48);
    layout.strides[0] = 100;
    let m = text(
        cam.push(AppFrame::host(layout, vec![0; 64 * 48 * 3]))
            .unwrap_err(),
    );
    assert!(
        m.contains("stride 100 is less than its row of 192 bytes"),
        "{m}"
    );

    // A stride so large that the plane's size does not fit in memory.
    let mut layout = FrameLayout::packed(PixelFormat::Rgb, 64, 48);
    layout.strides[0] = usize::MAX / 8;
    let m = text(
        cam.push(AppFrame::host(layout, vec![0; 64 * 48 * 3]))
            .unwrap_err(),
    );
    assert!(m.contains("frame 1") && m.contains("bytes"), "{m}");

    // A frame with no pixels.
    let m = text(
        cam.push(AppFrame::packed(PixelFormat::Rgb, 0, 0, Vec::new()))
            .unwrap_err(),
    );
    assert!(m.contains("0x0 frame has no pixels"), "{m}");

    push_ok(small(64, 48));

    // A box entirely outside the frame.
    let e = cam
        .push(small(64, 48).boxes([[4, 4, 8, 8], [70, 10, 8, 8]]))
        .unwrap_err();
    assert!(
        matches!(
            e,
            PushError::Box {
                seq: 2,
                index: 1,
                ..
            }
        ),
        "{e:?}"
    );
    let m = text(e);
    assert!(
        m.contains("frame 2") && m.contains("box 1") && m.contains("outside the 64x48 frame"),
        "{m}"
    );

    // A box that is not a number, and boxes with no area.
    let m = text(
        cam.push(small(64, 48).boxes([[f32::NAN, 0.0, 8.0, 8.0]]))
            .unwrap_err(),
    );
    assert!(m.contains("box 0") && m.contains("not a finite box"), "{m}");
    let m = text(
        cam.push(small(64, 48).boxes([[f64::INFINITY, 0.0, 8.0, 8.0]]))
            .unwrap_err(),
    );
    assert!(m.contains("not a finite box"), "{m}");
    let m = text(cam.push(small(64, 48).boxes([[1, 1, 0, 8]])).unwrap_err());
    assert!(m.contains("width and height must be positive"), "{m}");
    let m = text(cam.push(small(64, 48).boxes([[1, 1, 8, -3]])).unwrap_err());
    assert!(m.contains("width and height must be positive"), "{m}");

    // A box partly outside is clipped; one under 2 px after clipping is skipped, not an error.
    push_ok(small(64, 48).boxes([[-10, -10, 30, 30], [63, 0, 8, 8]]));
    push_ok(small(64, 48));

    cam.close();
    let e = cam.push(small(64, 48)).unwrap_err();
    assert!(matches!(e, PushError::Closed { .. }), "{e:?}");
    assert!(text(e).contains("'cam': pushed after close"));

    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    eprintln!("{r}");
    assert_eq!(r.frames_in, good, "{r}");
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
    assert_eq!(r.dropped_total(), 0, "{r}");
    // Failed pushes take no frame number: the frames pushed are 0, 1, 2, ... with no gap.
    let batches = reader.join().unwrap();
    let seqs: Vec<u64> = batches
        .iter()
        .flat_map(|b| b.frames.iter().map(|f| f.seq))
        .collect();
    assert_eq!(seqs, (0..good).collect::<Vec<_>>());
    let clipped = batches
        .iter()
        .flat_map(|b| &b.frames)
        .find(|f| f.seq == 2)
        .unwrap();
    assert_eq!(clipped.detections.len(), 1);
    assert_eq!(clipped.detections[0].bbox, [0, 0, 20, 20]);
    assert!(r.to_string().contains("1 skipped"), "{r}");
}

/// Push `n` frames of 320x240 with 64 boxes each, `gap` apart (as fast as `push` allows when
/// zero), while the batches are read one at a time with a pause after each (a slow consumer).
/// Returns the outcome, the frame numbers that came out in order, and how long the pushes took.
fn push_fast_read_slow(desc: &str, n: u64, gap: Duration) -> (Outcome, Vec<u64>, Duration) {
    let mut pipeline = Pipeline::from_description(desc, &HashMap::new()).unwrap();
    let cam = pipeline.app_source(None).unwrap();
    let batches = pipeline.batches(1);
    let run = std::thread::spawn(move || pipeline.run());
    let reader = std::thread::spawn(move || {
        let mut seqs = Vec::new();
        for b in batches {
            seqs.extend(b.frames.iter().map(|f| f.seq));
            std::thread::sleep(Duration::from_millis(30));
        }
        seqs
    });
    let boxes: Vec<[u32; 4]> = (0..64)
        .map(|i| [(i % 8) * 40, (i / 8) * 30, 40, 30])
        .collect();
    let start = std::time::Instant::now();
    for _ in 0..n {
        let frame = AppFrame::packed(PixelFormat::Rgb, 320, 240, vec![77; 320 * 240 * 3])
            .boxes(boxes.iter().copied());
        cam.push(frame).unwrap();
        std::thread::sleep(gap);
    }
    let pushing = start.elapsed();
    cam.close();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    (outcome, reader.join().unwrap(), pushing)
}

#[test]
fn file_like_pushes_wait_and_live_pushes_drop_the_oldest() {
    let _serial = serial();
    // live=false: push waits for the slow reader; every frame goes through, in order. The edges
    // and channels hold about 45 frames (measured: 60 pushes took ~280 ms), and the reader takes
    // at most 2 frames per 30 ms: of 100 frames, about 55 can only be pushed after >= 27 reads,
    // >= 800 ms.
    let n = 100;
    let (outcome, seqs, pushing) = push_fast_read_slow(
        "app name=cam live=false ! batch max-frames=2 ! preprocess ! appsink",
        n,
        Duration::ZERO,
    );
    let r = &outcome.report;
    eprintln!("live=false: pushes took {pushing:?}\n{r}");
    assert_eq!(
        (r.frames_in, r.processed, r.dropped_total()),
        (n, n, 0),
        "{r}"
    );
    assert_eq!(seqs, (0..n).collect::<Vec<_>>());
    assert!(
        pushing >= Duration::from_millis(500),
        "push did not wait: {pushing:?}"
    );

    // live=true, a frame every 5 ms (200 fps) for a reader of 2 frames per 30 ms at most: push
    // does not wait; the edges drop the oldest frames, and count them.
    let n = 60;
    let (outcome, seqs, pushing) = push_fast_read_slow(
        "app name=cam live=true ! batch max-frames=2 ! preprocess ! appsink",
        n,
        Duration::from_millis(5),
    );
    let r = &outcome.report;
    eprintln!("live=true: pushes took {pushing:?}\n{r}");
    assert_eq!(r.frames_in, n, "{r}");
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
    assert!(
        r.dropped_total() > 0,
        "a slow consumer of a live feed drops frames\n{r}"
    );
    assert!(r.processed > 1, "{r}");
    assert!(
        r.dropped
            .iter()
            .all(|(reason, _)| reason.starts_with("live: oldest dropped at")),
        "every drop is the live edges' (none unaccounted at shutdown)\n{r}"
    );
    assert_eq!(seqs.len() as u64, r.processed);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(
        seqs.last(),
        Some(&(n - 1)),
        "the newest frame is never the one dropped"
    );
}

#[test]
fn several_threads_push_into_one_source() {
    let _serial = serial();
    let (threads, each) = (4u64, 25u64);
    let mut pipeline =
        Pipeline::from_description("app name=cam ! preprocess ! appsink", &HashMap::new()).unwrap();
    let cam = pipeline.app_source(Some("cam")).unwrap();
    let batches = pipeline.batches(256);
    let run = std::thread::spawn(move || pipeline.run());
    let reader = std::thread::spawn(move || batches.into_iter().collect::<Vec<CropBatch>>());
    let pushers: Vec<_> = (0..threads)
        .map(|t| {
            let cam = cam.clone();
            std::thread::spawn(move || {
                for i in 0..each {
                    let frame = small(96, 64).name(format!("t{t}-{i:02}"));
                    cam.push(frame).unwrap();
                }
            })
        })
        .collect();
    for p in pushers {
        p.join().unwrap();
    }
    cam.close();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    let n = threads * each;
    assert_eq!(
        (r.frames_in, r.processed, r.dropped_total()),
        (n, n, 0),
        "{r}"
    );
    let frames: Vec<(u64, String)> = reader
        .join()
        .unwrap()
        .iter()
        .flat_map(|b| b.frames.iter().map(|f| (f.seq, f.source.to_string())))
        .collect();
    assert_eq!(frames.len() as u64, n);
    let seqs: HashSet<u64> = frames.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (0..n).collect(), "seq numbers unique, none missing");
    let names: HashSet<&str> = frames.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(names.len() as u64, n, "every frame once");
    // Numbered in the order they entered the pipeline; each thread's frames in its own order.
    assert!(frames.windows(2).all(|w| w[0].0 < w[1].0), "{frames:?}");
    for t in 0..threads {
        let mine: Vec<&str> = frames
            .iter()
            .map(|(_, s)| s.as_str())
            .filter(|s| s.starts_with(&format!("t{t}-")))
            .collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{mine:?}");
    }
}

#[test]
fn closing_while_other_threads_push_loses_no_frame() {
    let _serial = serial();
    let mut pipeline =
        Pipeline::from_description("app name=cam ! preprocess ! appsink", &HashMap::new()).unwrap();
    let cam = pipeline.app_source(None).unwrap();
    let batches = pipeline.batches(1);
    let run = std::thread::spawn(move || pipeline.run());
    let reader = std::thread::spawn(move || {
        let mut n = 0u64;
        for b in batches {
            n += b.frames.len() as u64;
            std::thread::sleep(Duration::from_millis(5));
        }
        n
    });
    // Four threads push until the source is closed; each counts the pushes that succeeded.
    let pushers: Vec<_> = (0..4)
        .map(|_| {
            let cam = cam.clone();
            std::thread::spawn(move || {
                let mut ok = 0u64;
                loop {
                    match cam.push(small(160, 120)) {
                        Ok(()) => ok += 1,
                        Err(PushError::Closed { .. }) => return ok,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    cam.close();
    let pushed: u64 = pushers.into_iter().map(|p| p.join().unwrap()).sum();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    eprintln!("{pushed} pushes succeeded before the close\n{r}");
    assert!(pushed > 0);
    // Every push that returned Ok entered the pipeline and went through.
    assert_eq!(
        (r.frames_in, r.processed, r.dropped_total()),
        (pushed, pushed, 0),
        "{r}"
    );
    assert_eq!(reader.join().unwrap(), pushed);
}

#[test]
fn dropping_every_handle_ends_the_stream() {
    let _serial = serial();
    let pipeline =
        Pipeline::from_description("app name=cam ! preprocess ! appsink", &HashMap::new()).unwrap();
    let cam = pipeline.app_source(None).unwrap();
    let (done, finished) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || done.send(pipeline.run()).unwrap());
    for _ in 0..3 {
        cam.push(small(64, 48)).unwrap();
    }
    // No close: the application's last handle goes away (a pushing thread that returned early
    // or panicked). The pipeline ends its stream instead of waiting for ever.
    drop(cam);
    let outcome = finished
        .recv_timeout(Duration::from_secs(10))
        .expect("the pipeline ended after every handle was dropped");
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let r = &outcome.report;
    assert_eq!(
        (r.frames_in, r.processed, r.dropped_total()),
        (3, 3, 0),
        "{r}"
    );
}

#[test]
fn oneshot_classifier_labels_a_frame_like_the_pipeline() {
    let _serial = serial();
    let Some((frames, model)) = clip_and_model() else {
        return;
    };
    let index = 11;
    let frame = &frames[index];
    let mut classifier = Classifier::new(&model, &LABELS).unwrap();
    let oneshot = classifier.classify(frame.app_frame(index)).unwrap();

    let pipeline = Pipeline::from_description(
        "app name=cam ! classify model=${model} labels=person,two-wheeler,car,large-vehicle ! appsink",
        &model_vars(&model),
    )
    .unwrap();
    let (piped, outcome) = run_pushing(pipeline, "cam", [frame.app_frame(index)]);
    assert_eq!(outcome.report.processed, 1);
    assert_eq!(oneshot.len(), frame.boxes.len());
    assert_eq!(oneshot.len(), piped.len());
    let mut right = 0;
    for (a, b) in oneshot.iter().zip(&piped) {
        assert_eq!((a.bbox, &a.detection), (b.bbox, &b.detection));
        assert_eq!(
            (&a.label, a.class_id),
            (&b.label, b.class_id),
            "{:?}",
            a.bbox
        );
        assert!(
            (a.score.unwrap() - b.score.unwrap()).abs() < 1e-4,
            "{a:?} {b:?}"
        );
        assert_eq!(a.detection, b.detection);
        right += usize::from(class_of(a.detection.as_ref().and_then(|d| d.class_id)) == a.class_id);
    }
    eprintln!(
        "frame {}: {} objects, the same labels one-shot and through the pipeline ({right} as annotated)",
        frame.name,
        oneshot.len()
    );
    assert!(LABELS.contains(&&*oneshot[0].label.clone().unwrap()));
}

#[test]
fn two_app_sources_feed_one_batch() {
    let _serial = serial();
    let Some((frames, model)) = clip_and_model() else {
        return;
    };
    let mut pipeline = Pipeline::from_description(
        "app name=a ! mux.
         app name=b ! batch name=mux max-frames=4
           ! classify model=${model} labels=person,two-wheeler,car,large-vehicle ! appsink",
        &model_vars(&model),
    )
    .unwrap();
    let a = pipeline.app_source(Some("a")).unwrap();
    let b = pipeline.app_source(Some("b")).unwrap();
    assert_eq!((a.name(), b.name()), ("a", "b"));
    let objects = pipeline.results(256);
    let batches = pipeline.batches(256);
    let run = std::thread::spawn(move || pipeline.run());
    let reader = std::thread::spawn(move || objects.into_iter().collect::<Vec<_>>());
    let batch_reader = std::thread::spawn(move || {
        batches
            .into_iter()
            .map(|b| {
                b.frames
                    .iter()
                    .map(|f| f.stream)
                    .collect::<HashSet<_>>()
                    .len()
            })
            .collect::<Vec<_>>()
    });
    // Stream a: the clip's first 12 frames; stream b: the next 10, pushed at the same time.
    let (na, nb) = (12usize, 10usize);
    let push_a = std::thread::spawn(move || {
        for (i, f) in frames[..na].iter().enumerate() {
            a.push(f.app_frame(i)).unwrap();
        }
        a.close();
    });
    for (i, f) in frames[na..na + nb].iter().enumerate() {
        b.push(f.app_frame(i)).unwrap();
    }
    b.close();
    push_a.join().unwrap();
    let outcome = run.join().unwrap();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let objects = reader.join().unwrap();
    let r = &outcome.report;
    eprintln!("{r}");
    assert_eq!(r.streams.len(), 2, "{r}");
    let rows: Vec<(u32, &str, u64, u64, u64)> = r
        .streams
        .iter()
        .map(|s| {
            (
                s.stream,
                s.source.as_str(),
                s.frames_in,
                s.processed,
                s.dropped_total(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (0, "app a", na as u64, na as u64, 0),
            (1, "app b", nb as u64, nb as u64, 0)
        ],
        "{r}"
    );
    let text = r.to_string();
    assert!(text.contains("app a") && text.contains("app b"), "{text}");

    for (stream, range) in [(0u32, 0..na), (1, na..na + nb)] {
        let mine: Vec<&Object> = objects.iter().filter(|o| o.stream == stream).collect();
        let want: usize = frames[range.clone()].iter().map(|f| f.boxes.len()).sum();
        assert_eq!(mine.len(), want, "stream {stream}");
        // Frame order per stream: frame numbers never go back, names follow the pushed frames.
        assert!(
            mine.windows(2).all(|w| w[0].frame <= w[1].frame),
            "stream {stream}"
        );
        let names: Vec<&str> = mine
            .iter()
            .map(|o| &*o.source)
            .fold(Vec::new(), |mut v, s| {
                if v.last() != Some(&s) {
                    v.push(s);
                }
                v
            });
        let pushed: Vec<String> = frames[range]
            .iter()
            .map(|f| format!("octopipe:{}", f.name))
            .collect();
        assert_eq!(names, pushed, "stream {stream}");
    }
    let right = objects
        .iter()
        .filter(|o| class_of(o.detection.as_ref().and_then(|d| d.class_id)) == o.class_id)
        .count();
    assert!(
        right as f64 >= 0.98 * objects.len() as f64,
        "{right}/{}",
        objects.len()
    );
    let mixed = batch_reader
        .join()
        .unwrap()
        .iter()
        .filter(|&&s| s == 2)
        .count();
    eprintln!(
        "{} objects of 2 streams; {mixed} batches held frames of both",
        objects.len()
    );
}
