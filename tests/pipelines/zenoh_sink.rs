//! The `zenoh` sink on loopback only (multicast scouting off, explicit tcp/127.0.0.1 endpoints):
//! a real Zenoh subscriber session checks every message.

use crate::common;

use std::net::TcpListener;
use std::time::Duration;

use common::messages::{by_frame, check_content, report_line, run, run_any, two_streams, Received};
use zenoh::Wait;

/// One test at a time (each opens Zenoh sessions with their runtimes on a 2-core machine).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    common::serial()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A peer listening on `tcp/127.0.0.1:PORT` only, no scouting, subscribed to `key`: its samples
/// come on the channel.
fn subscriber(
    port: u16,
    key: &str,
) -> (
    zenoh::Session,
    zenoh::pubsub::Subscriber<()>,
    crossbeam_channel::Receiver<Received>,
) {
    let mut config = zenoh::Config::default();
    for (k, v) in [
        ("mode", "\"peer\"".to_string()),
        ("listen/endpoints", format!("[\"tcp/127.0.0.1:{port}\"]")),
        ("connect/endpoints", "[]".to_string()),
        ("scouting/multicast/enabled", "false".to_string()),
    ] {
        config.insert_json5(k, &v).unwrap();
    }
    let session = zenoh::open(config).wait().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let subscriber = session
        .declare_subscriber(key.to_string())
        .callback(move |sample| {
            let json = serde_json::from_slice(&sample.payload().to_bytes()).unwrap();
            let topic = sample.key_expr().to_string();
            let _ = tx.send(Received { topic, json });
        })
        .wait()
        .unwrap();
    (session, subscriber, rx)
}

#[test]
fn every_frame_is_one_message_on_its_key() {
    let _one = serial();
    let port = free_port();
    let (_session, _subscriber, rx) = subscriber(port, "octopipe/*/objects");
    let sink = format!("zenoh connect=tcp/127.0.0.1:{port}");
    // Opening the sink's session connects to the subscriber's peer and waits for what it
    // declared: the first message already has a subscriber.
    let (outcome, objects) = run(two_streams(&sink), 150, |_| {});
    let line = report_line(&outcome, "zenoh octopipe/{stream}/objects: ");
    assert_eq!(
        line,
        "zenoh octopipe/{stream}/objects: 300 messages = 300 sent to a subscriber + 0 dropped (buffer full)"
    );
    let mut got = Vec::new();
    while got.len() < 300 {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(m) => got.push(m),
            Err(_) => break,
        }
    }
    let messages = by_frame(&got);
    assert_eq!(messages.len(), 300, "{line}");
    check_content(&messages, &objects);
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "nothing more"
    );
}

#[test]
fn messages_nobody_gets_are_not_counted_as_sent_and_fail_the_run() {
    let _one = serial();
    // A peer listening on loopback, with no subscriber anywhere.
    let sink = format!(
        "zenoh listen=tcp/127.0.0.1:{} flush-timeout=0.5",
        free_port()
    );
    let (outcome, _) = run_any(two_streams(&sink), 40, |_| {});
    let line = report_line(&outcome, "zenoh octopipe/{stream}/objects: ");
    assert_eq!(
        line,
        "zenoh octopipe/{stream}/objects: 80 messages = 0 sent to a subscriber + 80 published, no peer seen + 0 dropped (buffer full)"
    );
    let e = outcome
        .error
        .expect("a sink that reached nobody fails the run")
        .to_string();
    assert!(
        e.contains("delivered none of the 80 messages it was given"),
        "{e}"
    );
    assert_eq!(
        outcome.report.processed, 80,
        "the frames themselves went through"
    );
}

#[test]
fn settings_are_checked_before_anything_opens() {
    for (text, words) in [
        ("zenoh", "zenoh talks to nobody"),
        (
            "zenoh connect=tcp/127.0.0.1:7447 key=a/*/b",
            "'*' is a wildcard",
        ),
        (
            "zenoh connect=nonsense",
            "'nonsense' is not an endpoint: expected tcp/HOST:PORT",
        ),
        (
            "zenoh listen=udp/127.0.0.1:7447",
            "'udp/127.0.0.1:7447' is not an endpoint",
        ),
    ] {
        let e = octopipe::Pipeline::from_description(&format!("app ! {text}"), &Default::default())
            .err()
            .unwrap_or_else(|| panic!("{text} should be refused"))
            .to_string();
        assert!(e.contains(words), "{text}: {e}");
    }
}
