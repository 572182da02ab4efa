//! The `mqtt` sink against a real broker: Debian's mosquitto, started, stopped and started again
//! by each test on a free 127.0.0.1 port, and a real subscriber (rumqttc) checking every message.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::messages::{by_frame, check_content, report_line, run, run_any, two_streams};
use common::mosquitto::{Mosquitto, Subscriber};
use octopipe::{Outcome, Pipeline};

/// One test at a time: each runs a broker, a pipeline and a subscriber on a 2-core machine.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    common::serial()
}

/// The report's line of the sink.
fn delivery_line(outcome: &Outcome, port: u16) -> String {
    report_line(outcome, &format!("mqtt 127.0.0.1:{port}: "))
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
            assert_eq!(j["v"], 2);
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
fn beyond_its_buffer_each_stream_keeps_its_last_seconds() {
    let _one = serial();
    let Some(mut broker) = Mosquitto::start("bound") else {
        return;
    };
    let sub = Subscriber::new(broker.port, "check-bound", "octopipe/+/objects");
    broker.stop();
    let pipeline = two_streams(&format!(
        "mqtt port={} qos=1 buffer=0.5 flush-timeout=20",
        broker.port
    ));
    let start = Instant::now();
    // A frame every 10 ms; the broker comes back at frame 100 (about 1 s): of what came while
    // it was away, each stream keeps its last 0.5 s.
    let (outcome, _) = run(pipeline, 150, |k| {
        if k == 100 {
            broker.resume();
        }
        std::thread::sleep(Duration::from_millis(10));
    });
    let line = delivery_line(&outcome, broker.port);
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    // mqtt 127.0.0.1:PORT: N messages = A acknowledged + D dropped (buffer full)
    let (total, acked, dropped) = (numbers[5], numbers[6], numbers[7]);
    assert_eq!((total, acked + dropped), (300, 300), "{line}");
    // The outage is the broker's second away plus the reconnect's backoff (up to 1 s): most
    // of the 150 frames a stream; each stream keeps its last 0.5 s (15 frames at 30 fps).
    assert!((20..=250).contains(&dropped) && acked >= 30, "{line}");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the pipeline waited for the broker"
    );
    let got = by_frame(&sub.collect(Duration::from_secs(10), |g| g.len() as u64 >= acked));
    assert_eq!(got.len() as u64, acked, "{line}");
    // Per stream: neither crowded the other out (the reconnect's backoff can keep the broker
    // away past frame 100, so the kept frames are counted over the whole run).
    for s in 0..2 {
        let kept = got.keys().filter(|(st, _)| *st == s).count();
        assert!(kept >= 15, "stream {s} kept {kept} of its 150: {line}");
    }
}

#[test]
fn a_four_second_broker_crash_loses_nothing_at_the_default_buffer() {
    let _one = serial();
    let Some(mut broker) = Mosquitto::start("crash") else {
        return;
    };
    let sub = Subscriber::new(broker.port, "check-crash", "octopipe/+/objects");
    let pipeline = two_streams(&format!("mqtt port={} qos=1 flush-timeout=20", broker.port));
    let mut back = None;
    // 30 frames a second per stream; the broker is away from frame 15 to frame 135 (4 s).
    let (outcome, _) = run(pipeline, 150, |k| {
        match k {
            15 => broker.stop(),
            135 => {
                broker.resume();
                back = Some(Instant::now());
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(33));
    });
    let line = delivery_line(&outcome, broker.port);
    assert!(
        line.ends_with("300 messages = 300 acknowledged + 0 dropped (buffer full); 1 reconnect"),
        "{line}"
    );
    // QoS 1 is at least once: a message in flight when the broker went may come twice.
    let frames = |g: &[common::messages::Received]| {
        g.iter()
            .map(|m| (m.json["stream"].as_u64(), m.json["frame"].as_u64()))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    let got = sub.collect(Duration::from_secs(10), |g| frames(g) >= 300);
    assert_eq!(frames(&got), 300, "{line}");
    // Connected again within the backoff's cap (1 s) of the broker's return: the whole run,
    // flush included, ended soon after the last frame.
    let after = back.unwrap().elapsed();
    assert!(
        after < Duration::from_secs(4),
        "{after:?} after the broker came back"
    );
}

#[test]
fn a_broker_that_never_comes_fails_the_run_at_its_end_not_before() {
    let _one = serial();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pipeline = two_streams(&format!("mqtt port={port} flush-timeout=0.5"));
    let start = Instant::now();
    let (outcome, _) = run_any(pipeline, 100, |_| {});
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let line = delivery_line(&outcome, port);
    assert!(
        line.contains("200 messages = 0 acknowledged + ")
            && line.ends_with(" not acknowledged at the end"),
        "{line}"
    );
    let e = outcome.error.expect("it delivered nothing").to_string();
    assert!(
        e.starts_with(&format!(
            "mqtt 127.0.0.1:{port}: delivered none of the 200 messages it was given"
        )),
        "{e}"
    );
    assert_eq!(
        outcome.report.processed, 200,
        "the frames themselves went through"
    );
}

#[test]
fn two_sinks_with_the_default_client_id_never_take_each_others_session() {
    let _one = serial();
    let Some(broker) = Mosquitto::start("two-sinks") else {
        return;
    };
    let sub = Subscriber::new(broker.port, "check-two-sinks", "+/+/objects");
    // Two sinks of one process (one host, one pid: the random part alone tells them apart) at
    // once, with the default client id. With one id each connection closed the other's.
    let sinks: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|prefix| {
            let port = broker.port;
            std::thread::spawn(move || {
                let sink = format!("mqtt port={port} qos=1 topic={prefix}/{{stream}}/objects");
                let (outcome, _) = run(two_streams(&sink), 100, |_| {
                    std::thread::sleep(Duration::from_millis(10))
                });
                delivery_line(&outcome, port)
            })
        })
        .collect();
    for sink in sinks {
        let line = sink.join().unwrap();
        assert!(
            line.ends_with("200 messages = 200 acknowledged + 0 dropped (buffer full)"),
            "no reconnect: {line}\n{}",
            broker.log()
        );
    }
    let got = sub.collect(Duration::from_secs(5), |g| g.len() >= 400);
    assert_eq!(got.len(), 400);
    let log = broker.log();
    let ids: std::collections::BTreeSet<&str> = log
        .lines()
        .filter_map(|l| l.split(" as ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|id| id.starts_with("octopipe-"))
        .collect();
    assert_eq!(ids.len(), 2, "two client ids: {ids:?}\n{log}");
    assert!(!log.contains("already connected"), "{log}");
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

/// docs/messages.md's `mosquitto_sub` (Debian's mosquitto-clients, installed by
/// scripts/setup.sh) reads the sink's messages, here with a persistent session so none is missed
/// between subscribing and reading.
#[test]
fn mosquitto_sub_of_the_docs_reads_the_messages() {
    let _one = serial();
    let Some(broker) = Mosquitto::start("mosquitto-sub") else {
        return;
    };
    if std::process::Command::new("mosquitto_sub")
        .arg("--help")
        .output()
        .is_err()
    {
        common::skip("mosquitto_sub is not installed: scripts/setup.sh installs mosquitto-clients");
        return;
    }
    let port = broker.port.to_string();
    let sub = |extra: &[&str]| {
        let mut args = vec![
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "octopipe/+/objects",
            "-q",
            "1",
            "-v",
            "-c",
            "-i",
            "docs-sub",
        ];
        args.extend_from_slice(extra);
        common::output_within(
            std::process::Command::new("mosquitto_sub").args(&args),
            Duration::from_secs(20),
        )
    };
    // Subscribe (the broker keeps the session), then read what arrived meanwhile.
    assert!(sub(&["-E"]).status.success());
    let (outcome, _) = run(
        two_streams(&format!("mqtt port={} qos=1", broker.port)),
        5,
        |_| {},
    );
    assert!(delivery_line(&outcome, broker.port).contains("10 messages = 10 acknowledged"));
    let got = sub(&["-C", "10", "-W", "10"]);
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let text = String::from_utf8(got.stdout).unwrap();
    let mut frames: Vec<(u64, u64)> = text
        .lines()
        .map(|l| {
            let (topic, json) = l.split_once(' ').unwrap();
            let j: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(topic, format!("octopipe/{}/objects", j["stream"]));
            (j["stream"].as_u64().unwrap(), j["frame"].as_u64().unwrap())
        })
        .collect();
    frames.sort();
    let want: Vec<(u64, u64)> = (0..2).flat_map(|s| (0..5).map(move |k| (s, k))).collect();
    assert_eq!(frames, want, "{text}");
}
