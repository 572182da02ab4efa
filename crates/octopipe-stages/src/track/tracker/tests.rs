//! The tracker's unit tests: crossings, jerks, gaps, ends, low scores, min-hits, bad settings.

use super::*;

fn config(min_hits: u32) -> TrackConfig {
    TrackConfig {
        min_hits,
        ..Default::default()
    }
}

fn scored(bbox: [u32; 4], score: f32) -> Detection {
    Detection {
        score,
        ..Detection::new(bbox)
    }
}

fn ids(boxes: &[Detection]) -> Vec<Option<u32>> {
    boxes.iter().map(|b| b.track).collect()
}

#[test]
fn two_objects_crossing_keep_their_ids() {
    // Two 20x20 boxes on one row, moving towards each other 6 px a frame, passing through
    // each other around frame 10: IoU alone would swap them; the velocity keeps them apart.
    let mut t = Tracker::new(config(1)).unwrap();
    for seq in 0..21u32 {
        let a = [10 + 6 * seq, 100, 20, 20];
        let b = [130 - 6 * seq, 104, 20, 20];
        let mut boxes = vec![Detection::new(a), Detection::new(b)];
        t.update(seq as u64, &mut boxes);
        assert_eq!(ids(&boxes), [Some(1), Some(2)], "frame {seq}");
    }
    assert_eq!((t.born(), t.ended(), t.open()), (2, 0, 2));
}

#[test]
fn a_camera_jerk_is_followed_from_the_boxes() {
    // A row of 12 parked cars, 24 px tall, 30 px apart; from frame 5 the camera pans and
    // the scene moves down 36 px a frame: more than a car's height, and a car's predicted
    // box lands on the next car's place. Tracks follow with the shift estimated from the
    // boxes; without it, every track is lost or swapped at each jump.
    let scene = |seq: u32| -> Vec<Detection> {
        let pan = 36 * seq.saturating_sub(4);
        (0..12)
            .map(|i| Detection::new([100 + 7 * i, 50 + 30 * i + pan, 40, 24]))
            .collect()
    };
    let run = |camera_motion: bool| {
        let cfg = TrackConfig {
            camera_motion,
            ..config(1)
        };
        let mut t = Tracker::new(cfg).unwrap();
        let mut last = Vec::new();
        for seq in 0..12 {
            let mut boxes = scene(seq);
            t.update(seq as u64, &mut boxes);
            last = ids(&boxes);
        }
        (t.born(), last)
    };
    let want: Vec<Option<u32>> = (1..=12).map(Some).collect();
    assert_eq!(run(true), (12, want.clone()));
    let (born, last) = run(false);
    assert!(born > 12 && last != want, "{born} {last:?}");
    // The shift itself: 36 px down, nothing across.
    let mut t = Tracker::new(config(1)).unwrap();
    t.update(0, &mut scene(4));
    let moved = scene(5);
    let [dx, dy] = t.camera_shift(&moved).unwrap();
    assert!(dx.abs() < 0.01 && (dy - 36.0).abs() < 0.01, "{dx} {dy}");
    // Too few tracks to tell: no shift.
    let mut t = Tracker::new(config(1)).unwrap();
    t.update(0, &mut scene(4)[..2]);
    assert_eq!(t.camera_shift(&moved[..2]), None);
}

#[test]
fn a_gap_in_frame_numbers_is_predicted_over() {
    // 8 px a frame; frames 10..=14 lost: at frame 15 the box is 48 px on from frame 9,
    // further than its 30 px width, so only the prediction over the gap can match it.
    let mut t = Tracker::new(config(1)).unwrap();
    let at = |seq: u64| vec![Detection::new([20 + 8 * seq as u32, 40, 30, 30])];
    for seq in (0..10).chain(15..20) {
        let mut boxes = at(seq);
        t.update(seq, &mut boxes);
        assert_eq!(ids(&boxes), [Some(1)], "frame {seq}");
    }
    // The same, told the frames came one after another, loses the track.
    let mut t = Tracker::new(config(1)).unwrap();
    for (k, seq) in (0..10).chain(15..20).enumerate() {
        t.update(k as u64, &mut at(seq));
    }
    assert_eq!(t.born(), 2);
}

#[test]
fn a_track_ends_after_max_age_unmatched_frames() {
    let cfg = TrackConfig {
        max_age: 5,
        min_hits: 1,
        ..Default::default()
    };
    let mut t = Tracker::new(cfg).unwrap();
    let object = || vec![Detection::new([100, 100, 40, 40])];
    t.update(0, &mut object());
    // Missed for 5 frames (1..=5): still open, and found again at frame 6.
    for seq in 1..=5 {
        t.update(seq, &mut []);
    }
    let mut boxes = object();
    t.update(6, &mut boxes);
    assert_eq!(ids(&boxes), [Some(1)]);
    // Missed for 6 frames (7..=12): it ends; the box at frame 13 starts track 2.
    for seq in 7..=12 {
        t.update(seq, &mut []);
    }
    assert_eq!((t.ended(), t.open()), (1, 0));
    let mut boxes = object();
    t.update(13, &mut boxes);
    assert_eq!(ids(&boxes), [Some(2)]);
    assert_eq!((t.born(), t.ended(), t.open()), (2, 1, 1));
}

#[test]
fn low_score_boxes_continue_tracks_but_never_start_one() {
    let mut t = Tracker::new(config(1)).unwrap();
    let mut boxes = vec![scored([50, 50, 40, 40], 0.9)];
    t.update(0, &mut boxes);
    assert_eq!(ids(&boxes), [Some(1)]);
    // The object's score drops (occluded): the second round keeps it; a lone low-score box
    // elsewhere starts nothing; a box under `low` is not tracked, whatever it said before.
    let mut boxes = vec![
        scored([52, 50, 40, 40], 0.3),
        scored([400, 400, 40, 40], 0.3),
        Detection {
            track: Some(77),
            ..scored([600, 100, 40, 40], 0.05)
        },
    ];
    t.update(1, &mut boxes);
    assert_eq!(ids(&boxes), [Some(1), None, None]);
    assert_eq!(t.born(), 1);
    // A low-score box does not pick up a coasting (lost) track: only high-score ones do.
    t.update(2, &mut []);
    let mut boxes = vec![scored([54, 50, 40, 40], 0.3)];
    t.update(3, &mut boxes);
    assert_eq!(ids(&boxes), [None]);
    let mut boxes = vec![scored([56, 50, 40, 40], 0.8)];
    t.update(4, &mut boxes);
    assert_eq!(ids(&boxes), [Some(1)]);
}

#[test]
fn new_tracks_wait_for_min_hits_except_on_the_first_frame() {
    let mut t = Tracker::new(config(3)).unwrap();
    let a = |seq: u64| Detection::new([10 + 2 * seq as u32, 10, 30, 30]);
    let b = |seq: u64| Detection::new([300 + 2 * seq as u32, 200, 30, 30]);
    // Frame 0: the stream's first frame, confirmed at once.
    let mut boxes = vec![a(0)];
    t.update(0, &mut boxes);
    assert_eq!(ids(&boxes), [Some(1)]);
    // A flash at frame 1 only: never confirmed.
    let mut boxes = vec![a(1), Detection::new([700, 500, 20, 20])];
    t.update(1, &mut boxes);
    assert_eq!(ids(&boxes), [Some(1), None]);
    // b from frame 2: ids from its third frame in a row.
    for seq in 2..8 {
        let mut boxes = vec![a(seq), b(seq)];
        t.update(seq, &mut boxes);
        let want = if seq < 4 { None } else { Some(2) };
        assert_eq!(ids(&boxes), [Some(1), want], "frame {seq}");
    }
    assert_eq!((t.born(), t.unconfirmed()), (2, 1));
}

#[test]
fn frames_out_of_order_are_counted_not_fatal() {
    let mut t = Tracker::new(config(1)).unwrap();
    for seq in [0, 1, 2, 2, 1, 3] {
        let mut boxes = vec![Detection::new([10, 10, 30, 30])];
        t.update(seq, &mut boxes);
        assert_eq!(ids(&boxes), [Some(1)]);
    }
    assert_eq!(t.out_of_order(), 2);
    // Frame numbers that jump to the end of the range, with tracks that never end: no
    // overflow, and no prediction over 2^64 frames (at most MAX_COAST).
    let mut t = Tracker::new(TrackConfig {
        max_age: u64::MAX,
        ..config(1)
    })
    .unwrap();
    let start = std::time::Instant::now();
    for seq in [0, u64::MAX - 1, 5, u64::MAX] {
        t.update(seq, &mut [Detection::new([10, 10, 30, 30])]);
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!((t.open(), t.ended(), t.out_of_order()), (t.born(), 0, 1));
}

#[test]
fn settings_it_cannot_work_with_are_refused() {
    let bad = |c: TrackConfig| Tracker::new(c).unwrap_err().to_string();
    let d = TrackConfig::default();
    assert_eq!(
        bad(TrackConfig { low: 0.6, ..d }),
        "track: low=0.6 is above high=0.5: low-score boxes are those from low up to high"
    );
    assert_eq!(
        bad(TrackConfig {
            high: f32::NAN,
            ..d
        }),
        "track: high must be a number from 0 to 1, found NaN"
    );
    assert!(bad(TrackConfig { iou: 0.0, ..d }).contains("iou must be above 0"));
    assert!(bad(TrackConfig { min_hits: 0, ..d }).contains("min-hits"));
}

#[test]
fn a_frame_of_a_hundred_thousand_boxes_costs_a_bounded_time() {
    let mut t = Tracker::new(config(1)).unwrap();
    // 100,000 boxes on a 1000x1000 grid of 1000x100 cells, scores rising with the index:
    // the last MAX_BOXES are tracked.
    let frame = || -> Vec<Detection> {
        (0..100_000u32)
            .map(|i| {
                scored(
                    [(i % 100) * 10, (i / 100) * 10, 8, 8],
                    0.5 + i as f32 * 4e-6,
                )
            })
            .collect()
    };
    let start = std::time::Instant::now();
    for seq in 0..5 {
        let mut boxes = frame();
        t.update(seq, &mut boxes);
        let tracked = boxes.iter().filter(|b| b.track.is_some()).count();
        assert!(tracked <= MAX_BOXES, "{tracked}");
        if seq > 0 {
            assert_eq!(tracked, MAX_BOXES, "frame {seq}");
            assert!(boxes[..100_000 - MAX_BOXES]
                .iter()
                .all(|b| b.track.is_none()));
        }
    }
    assert!(t.tracks.len() <= MAX_TRACKS, "{}", t.tracks.len());
    assert_eq!(t.untracked(), 5 * (100_000 - MAX_BOXES) as u64);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}
