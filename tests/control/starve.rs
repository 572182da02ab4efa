//! Round 2 of the control plane as an attacker on loopback sees it (issue 38, docs/security.md
//! "Round 2 (issue 38): the control plane and stream lifecycle"): /health cannot be starved by
//! idle connections, by a slow stream open or by a description of thousands of properties.
//! Loopback only; every loop is bounded.

use crate::common;

use std::io::Read;
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use common::station::{connect_from, exchange, raw, Station};

const SINK: &str = "batch max-frames=4 ! jsonl location=/dev/null";

/// `GET /health` answered 200 within `limit`, `n` times in a row.
fn health_answers(s: &Station, n: usize, limit: Duration, what: &str) {
    for i in 0..n {
        let start = Instant::now();
        let request = format!("GET /health HTTP/1.1\r\nHost: {}\r\n\r\n", s.addr);
        let reply = raw(s.addr, request.as_bytes(), limit);
        let took = start.elapsed();
        assert!(
            reply.as_ref().is_some_and(|r| r.status == 200) && took < limit,
            "/health #{i} took {took:?} {what}: {reply:?}"
        );
    }
}

#[test]
fn three_hundred_idle_connections_never_starve_health() {
    let dir = common::temp_dir("starve-idle");
    let s = Station::start("idle", &dir, SINK, &[], &[]);
    // More idle connections from one client than --max-connections (256).
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(s.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    health_answers(&s, 5, Duration::from_secs(1), "with 300 idle connections");
    let metrics = s.get("/metrics").expect("an answer to /metrics");
    assert_eq!(metrics.status, 200, "{metrics:?}");
    // The client holding them is over its share: anything but health and metrics is a 503
    // naming the cap.
    let body = serde_json::json!({
        "source": "testsrc width=64 height=48 num-buffers=2 ! boxes format=synthetic count=1"
    })
    .to_string();
    let post = format!(
        "POST /streams HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.addr,
        body.len()
    );
    let reply = raw(s.addr, post.as_bytes(), Duration::from_secs(5)).expect("an answer");
    assert_eq!(reply.status, 503, "{reply:?}");
    assert!(
        reply
            .error()
            .contains("too many connections from 127.0.0.1"),
        "{reply:?}"
    );
    // Another client still gets a slot of its own.
    let other = connect_from(Ipv4Addr::new(127, 0, 0, 2), s.addr).unwrap();
    let reply = exchange(other, post.as_bytes(), Duration::from_secs(10)).expect("an answer");
    assert_eq!(reply.status, 201, "another client: {reply:?}");
    // Idle connections are closed at the head deadline (5 s), not held.
    let start = Instant::now();
    let mut first = idle.into_iter().next().unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = first.read(&mut buf).unwrap_or(0);
    let closed_after = start.elapsed() + Duration::from_millis(500);
    assert!(
        closed_after < Duration::from_secs(7),
        "an idle connection was closed after {closed_after:?} ({n} bytes)"
    );
}

#[test]
fn health_never_waits_behind_a_slow_open_or_a_large_description() {
    let dir = common::temp_dir("starve-open");
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    // A large MOT annotation file: reading it makes each open slow.
    let big = allowed.join("big.txt");
    let mut rows = String::with_capacity(160 << 20);
    for frame in 1..=2000 {
        for object in 0..2000 {
            rows += &format!(
                "{frame},{object},{},{},20,20,1,1,0,0\n",
                object % 60,
                object / 60
            );
        }
    }
    std::fs::write(&big, rows).unwrap();
    let allow = allowed.display().to_string();
    let s = Station::start("open", &dir, SINK, &["--allow-dir", &allow], &[]);
    let source = format!(
        "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=mot location={}",
        big.display()
    );
    // Four slow adds, and four bodies of ~11k properties each, at once.
    let large = format!(
        "testsrc{} ! boxes format=synthetic",
        many_properties(11_000)
    );
    assert!(large.len() < 64 << 10, "{}", large.len());
    let adds: Vec<_> = (0..8u32)
        .map(|i| {
            let (addr, source, large) = (s.addr, source.clone(), large.clone());
            std::thread::spawn(move || {
                let text = if i < 4 { source } else { large };
                let body = serde_json::json!({ "source": text, "id": i }).to_string();
                let request = format!(
                    "POST /streams HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let start = Instant::now();
                let reply = raw(addr, request.as_bytes(), Duration::from_secs(60));
                (reply.map(|r| r.status), start.elapsed())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    health_answers(&s, 5, Duration::from_secs(1), "while streams were opened");
    let done: Vec<(Option<u16>, Duration)> = adds.into_iter().map(|t| t.join().unwrap()).collect();
    eprintln!("adds: {done:?}");
    for (i, (status, _)) in done.iter().enumerate() {
        let want = if i < 4 { 201 } else { 400 };
        assert_eq!(*status, Some(want), "add {i}: {done:?}");
    }
    assert!(
        done[..4]
            .iter()
            .any(|(_, took)| *took > Duration::from_millis(1500)),
        "the opens were slow enough to show anything: {done:?}"
    );
    let _ = std::fs::remove_file(&big);
}

/// ` k=1` for `n` distinct short keys (two and three letters).
fn many_properties(n: usize) -> String {
    let letters: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let two = letters
        .iter()
        .flat_map(|a| letters.iter().map(move |b| format!("{a}{b}")));
    let three = letters.iter().flat_map(|a| {
        let letters = letters.clone();
        letters.clone().into_iter().flat_map(move |b| {
            let a = *a;
            letters
                .clone()
                .into_iter()
                .map(move |c| format!("{a}{b}{c}"))
        })
    });
    two.chain(three)
        .take(n)
        .map(|k| format!(" {k}=1"))
        .collect()
}
