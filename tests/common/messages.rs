//! What the broker tests (mqtt, zenoh) push and check: two application streams of small frames
//! with known boxes, and the messages as a subscriber gets them.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use octopipe::{AppBox, AppFrame, Object, Outcome, Pipeline, PixelFormat};

/// One message as a subscriber got it: its topic (or key expression) and its JSON.
#[derive(Debug, Clone)]
pub struct Received {
    pub topic: String,
    pub json: serde_json::Value,
}

/// Frame `k` of a stream: 64x48 RGB with `k % 4` boxes (so some frames have none), each with a
/// label, a score and a track id that tell it from the others.
pub fn frame(stream: u32, k: u64) -> AppFrame {
    let boxes: Vec<AppBox> = (0..k % 4)
        .map(|i| {
            AppBox::new(2.0 + 14.0 * i as f64, 4.0 + (k % 7) as f64, 10.0, 12.0)
                .label(if stream == 0 { "car" } else { "person" })
                .score(0.5 + i as f32 / 10.0)
                .track(i as u32 + 10 * stream)
        })
        .collect();
    AppFrame::packed(PixelFormat::Rgb, 64, 48, vec![90; 64 * 48 * 3])
        .pts(Duration::from_millis(k * 33))
        .boxes(boxes)
}

/// Two application streams batched together into `sink`.
pub fn two_streams(sink: &str) -> Pipeline {
    let text = format!("app name=a ! mux.  app name=b ! batch name=mux max-frames=2 ! {sink}");
    Pipeline::from_description(&text, &HashMap::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// Push `frames` frames to each of the pipeline's two streams (calling `between(k)` before frame
/// k), run it, and return the outcome with every object it made, by (stream, frame).
pub fn run(
    pipeline: Pipeline,
    frames: u64,
    between: impl FnMut(u64),
) -> (Outcome, BTreeMap<(u64, u64), Vec<serde_json::Value>>) {
    let (outcome, objects) = run_any(pipeline, frames, between);
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    (outcome, objects)
}

/// As [`run`], whatever the outcome's error.
pub fn run_any(
    mut pipeline: Pipeline,
    frames: u64,
    mut between: impl FnMut(u64),
) -> (Outcome, BTreeMap<(u64, u64), Vec<serde_json::Value>>) {
    let objects = pipeline.results(100_000);
    let apps = [
        pipeline.app_source(Some("a")).unwrap(),
        pipeline.app_source(Some("b")).unwrap(),
    ];
    let running = std::thread::spawn(move || pipeline.run());
    for k in 0..frames {
        between(k);
        for (s, app) in apps.iter().enumerate() {
            app.push(frame(s as u32, k)).unwrap();
        }
    }
    apps.iter().for_each(|a| a.close());
    let outcome = running.join().unwrap();
    let mut by_frame: BTreeMap<(u64, u64), Vec<serde_json::Value>> = BTreeMap::new();
    for o in objects.try_iter() {
        let o: Object = o;
        let key = (o.stream as u64, o.frame);
        // As a subscriber reads it: through the JSON text (an f32 score reads back as the f64
        // its text gives).
        let json = serde_json::from_slice(&serde_json::to_vec(&o).unwrap()).unwrap();
        by_frame.entry(key).or_default().push(json);
    }
    (outcome, by_frame)
}

/// Per-frame messages by (stream, frame), checked for their topic and version; panics on a
/// message seen twice.
pub fn by_frame(messages: &[Received]) -> BTreeMap<(u64, u64), serde_json::Value> {
    let mut seen = BTreeMap::new();
    for m in messages {
        let j = &m.json;
        assert_eq!(j["v"], 2, "{j}");
        let key = (j["stream"].as_u64().unwrap(), j["frame"].as_u64().unwrap());
        assert_eq!(m.topic, format!("octopipe/{}/objects", key.0));
        if let Some(first) = seen.insert(key, j.clone()) {
            panic!(
                "stream {} frame {} came twice: {first} and {j}",
                key.0, key.1
            );
        }
    }
    seen
}

/// Every frame's message holds exactly the objects the pipeline made of it (as the jsonl sink
/// writes them), frames with no object included.
pub fn check_content(
    messages: &BTreeMap<(u64, u64), serde_json::Value>,
    objects: &BTreeMap<(u64, u64), Vec<serde_json::Value>>,
) {
    for (&(stream, k), m) in messages {
        let want = objects.get(&(stream, k)).cloned().unwrap_or_default();
        assert_eq!(
            m["objects"].as_array().unwrap(),
            &want,
            "stream {stream} frame {k}"
        );
        assert_eq!(want.len() as u64, k % 4, "stream {stream} frame {k}");
        assert!((m["pts_ms"].as_f64().unwrap() - (k * 33) as f64).abs() < 1e-6);
        assert_eq!(
            m["source"],
            format!("octopipe:{}:{k}", ["a", "b"][stream as usize])
        );
        // The frame's size and wall-clock time, as its objects have them.
        assert!(m["width"].is_u64() && m["height"].is_u64(), "{m}");
        assert!(
            m["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{m}"
        );
        for o in &want {
            assert_eq!(
                (&o["timestamp"], &o["width"], &o["height"]),
                (&m["timestamp"], &m["width"], &m["height"])
            );
        }
        for (i, o) in want.iter().enumerate() {
            assert_eq!(o["track"], i as u64 + 10 * stream);
            assert_eq!(o["detection"]["label"], ["car", "person"][stream as usize]);
        }
    }
}

/// The report's line starting with `prefix` (a sink's line of what became of its messages).
pub fn report_line(outcome: &Outcome, prefix: &str) -> String {
    let report = outcome.report.to_string();
    report
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{report}"))
        .to_string()
}
