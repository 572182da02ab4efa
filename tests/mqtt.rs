//! The `mqtt` sink against a real broker: Debian's mosquitto, started, stopped and started again
//! by each test on a free 127.0.0.1 port, and a real subscriber (rumqttc) checking every message.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use common::mosquitto::{Mosquitto, Received, Subscriber};
use octopipe::{AppBox, AppFrame, Object, Outcome, Pipeline, PixelFormat};

/// One test at a time: each runs a broker, a pipeline and a subscriber on a 2-core machine.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Frame `k` of a stream: 64x48 RGB with `k % 4` boxes (so some frames have none), each with a
/// label, a score and a track id that tell it from the others.
fn frame(stream: u32, k: u64) -> AppFrame {
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
fn two_streams(sink: &str) -> Pipeline {
    let text = format!("app name=a ! mux.  app name=b ! batch name=mux max-frames=2 ! {sink}");
    Pipeline::from_description(&text, &HashMap::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// Push `frames` frames to each of the pipeline's two streams (calling `between(k)` before frame
/// k), run it, and return the outcome with every object it made, by (stream, frame).
fn run(
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
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
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

/// The report's line of the sink.
fn delivery_line(outcome: &Outcome, port: u16) -> String {
    let report = outcome.report.to_string();
    let prefix = format!("mqtt 127.0.0.1:{port}: ");
    report
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{report}"))
        .to_string()
}

/// Per-frame messages by (stream, frame), checked for their topic and version; panics on a
/// message seen twice.
fn by_frame(messages: &[Received]) -> BTreeMap<(u64, u64), serde_json::Value> {
    let mut seen = BTreeMap::new();
    for m in messages {
        let j = &m.json;
        assert_eq!(j["v"], 1, "{j}");
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
fn check_content(
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
        assert_eq!(m["source"], format!("{}:{k}", ["a", "b"][stream as usize]));
        for (i, o) in want.iter().enumerate() {
            assert_eq!(o["track"], i as u64 + 10 * stream);
            assert_eq!(o["detection"]["label"], ["car", "person"][stream as usize]);
        }
    }
}

#[test]
fn every_frame_is_one_message_with_its_objects() {
    let _one = serial();
    let Some(broker) = Mosquitto::start("every-frame") else {
        return;
    };
    let sub = Subscriber::new(broker.port, "check-every-frame", "octopipe/+/objects");
    let frames = 150;
    let pipeline = two_streams(&format!("mqtt port={} qos=1", broker.port));
    let (outcome, objects) = run(pipeline, frames, |_| {});
    let line = delivery_line(&outcome, broker.port);
    assert_eq!(
        line,
        format!(
            "mqtt 127.0.0.1:{}: 300 messages = 300 acknowledged + 0 dropped (buffer full)",
            broker.port
        )
    );
    let got = sub.collect(Duration::from_secs(5), |g| g.len() >= 300);
    let messages = by_frame(&got);
    assert_eq!(messages.len(), 300, "{line}");
    assert!((0..2).all(|s| (0..frames).all(|k| messages.contains_key(&(s, k)))));
    check_content(&messages, &objects);
    // Nothing more comes.
    assert!(sub.rx.recv_timeout(Duration::from_millis(300)).is_err());
}

#[test]
fn per_object_messages_at_qos_0() {
    let _one = serial();
    let Some(broker) = Mosquitto::start("per-object") else {
        return;
    };
    let sub = Subscriber::new(broker.port, "check-per-object", "drones/#");
    let sink = format!(
        "mqtt port={} qos=0 per=object topic=drones/{{stream}}/boxes",
        broker.port
    );
    let (outcome, objects) = run(two_streams(&sink), 40, |_| {});
    let total: usize = objects.values().map(Vec::len).sum();
    assert_eq!(total, 2 * (0..40).map(|k| k % 4).sum::<u64>() as usize);
    assert!(delivery_line(&outcome, broker.port).ends_with(&format!(
        "{total} messages = {total} sent + 0 dropped (buffer full)"
    )));
    let got = sub.collect(Duration::from_secs(5), |g| g.len() >= total);
    assert_eq!(got.len(), total);
    // Each message is the object as jsonl writes it, with the version.
    let mut want: Vec<serde_json::Value> = objects.into_values().flatten().collect();
    let mut have: Vec<serde_json::Value> = got
        .iter()
        .map(|m| {
            let mut j = m.json.clone();
            assert_eq!(j["v"], 1);
            assert_eq!(m.topic, format!("drones/{}/boxes", j["stream"]));
            j.as_object_mut().unwrap().remove("v");
            j
        })
        .collect();
    let key = |j: &serde_json::Value| j.to_string();
    want.sort_by_key(key);
    have.sort_by_key(key);
    assert_eq!(have, want);
}

#[test]
fn a_broker_restart_loses_nothing_at_qos_1() {
    let _one = serial();
    let Some(mut broker) = Mosquitto::start("restart") else {
        return;
    };
    let sub = Subscriber::new(broker.port, "check-restart", "octopipe/+/objects");
    let frames = 200;
    let pipeline = two_streams(&format!("mqtt port={} qos=1 flush-timeout=20", broker.port));
    let mut slowest = Duration::ZERO;
    let mut last = Instant::now();
    let (outcome, objects) = run(pipeline, frames, |k| {
        // A frame every 10 ms; the broker is away from frame 60 to frame 120.
        std::thread::sleep(Duration::from_millis(10));
        match k {
            60 => broker.stop(),
            120 => broker.resume(),
            _ => {}
        }
        slowest = slowest.max(last.elapsed());
        last = Instant::now();
    });
    let line = delivery_line(&outcome, broker.port);
    assert!(
        line.ends_with("400 messages = 400 acknowledged + 0 dropped (buffer full); 1 reconnect"),
        "{line}"
    );
    // The pipeline never waited for the broker (pushes wait only while the pipeline is busy).
    assert!(
        slowest < Duration::from_millis(500),
        "a push waited {slowest:?}"
    );
    let got = sub.collect(Duration::from_secs(10), |g| g.len() >= 400);
    let messages = by_frame(&got);
    assert_eq!(messages.len(), 400, "{line}\n{}", broker.log());
    check_content(&messages, &objects);
    assert!(sub.rx.recv_timeout(Duration::from_millis(300)).is_err());
}

#[test]
fn beyond_its_buffer_the_sink_drops_and_counts() {
    let _one = serial();
    let Some(mut broker) = Mosquitto::start("bound") else {
        return;
    };
    let sub = Subscriber::new(broker.port, "check-bound", "octopipe/+/objects");
    broker.stop();
    let pipeline = two_streams(&format!(
        "mqtt port={} qos=1 buffer=20 flush-timeout=20",
        broker.port
    ));
    let start = Instant::now();
    let (outcome, _) = run(pipeline, 150, |k| {
        if k == 100 {
            // The broker comes back after 200 messages: all but what the buffer held are gone.
            broker.resume();
        }
        if k >= 100 {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let line = delivery_line(&outcome, broker.port);
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    // mqtt 127.0.0.1:PORT: N messages = A acknowledged + D dropped (buffer full)
    let (total, acked, dropped) = (numbers[5], numbers[6], numbers[7]);
    assert_eq!((total, acked + dropped), (300, 300), "{line}");
    // It never connected before the broker came back: of the first 200 messages, the buffer
    // held 20.
    assert!(dropped >= 180, "{line}");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the pipeline waited for the broker"
    );
    let got = sub.collect(Duration::from_secs(10), |g| g.len() as u64 >= acked);
    assert_eq!(by_frame(&got).len() as u64, acked, "{line}");
}

#[test]
fn a_broker_that_never_comes_is_reported_not_waited_for() {
    let _one = serial();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pipeline = two_streams(&format!("mqtt port={port} buffer=50 flush-timeout=0.5"));
    let start = Instant::now();
    let (outcome, _) = run(pipeline, 100, |_| {});
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let line = delivery_line(&outcome, port);
    assert!(
        line.contains("200 messages = 0 acknowledged + ")
            && line.contains(" dropped (buffer full) + ")
            && line.ends_with(" not acknowledged at the end"),
        "{line}"
    );
    assert_eq!(
        outcome.report.processed, 200,
        "the frames themselves went through"
    );
}

#[test]
fn bad_settings_name_the_property() {
    for (text, words) in [
        ("mqtt topic=a/+/b", "'+' is a wildcard"),
        ("mqtt topic=a/{frame}", "only {stream} may stand in braces"),
        ("mqtt qos=2", "qos must be 0 or 1"),
        ("mqtt port=0", "port must be an integer from 1 to 65535"),
        ("mqtt per=batch", "per must be frame or object"),
    ] {
        let e = Pipeline::from_description(&format!("app ! {text}"), &HashMap::new())
            .err()
            .unwrap_or_else(|| panic!("{text} should be refused"))
            .to_string();
        assert!(e.contains(words), "{text}: {e}");
    }
}
