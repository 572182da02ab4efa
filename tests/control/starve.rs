//! Round 2 of the control plane as an attacker on loopback sees it (issue 38, docs/security.md
//! "Round 2 (issue 38): the control plane and stream lifecycle"): /health cannot be starved by
//! idle connections (from one address or several, issue 50), by a slow stream open or by a
//! description of thousands of properties.
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

/// Raise this process's open-file limit to its hard limit (the station, started after, inherits
/// it): the attack below holds over a thousand sockets.
fn more_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write one rlimit through a pointer to one.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max.min(8192);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[test]
fn idle_sockets_from_four_addresses_never_leave_a_probe_unanswered() {
    more_files();
    let dir = common::temp_dir("starve-four");
    let s = Station::start("four", &dir, SINK, &[], &[]);
    let addr = s.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Idle sockets from 127.0.0.2-5, 600 held at a time and renewed 50 every 50 ms (oldest
    // closed first): both the server's lane (256) and its probe lane (256) stay full of
    // connections that never send a byte. Bounded: 20 s at most.
    let attacker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut held = std::collections::VecDeque::new();
            let start = Instant::now();
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst)
                && start.elapsed() < Duration::from_secs(20)
            {
                for _ in 0..50 {
                    let from = Ipv4Addr::new(127, 0, 0, 2 + (n % 4) as u8);
                    n += 1;
                    if let Ok(c) = connect_from(from, addr) {
                        held.push_back(c);
                    }
                    if held.len() > 600 {
                        held.pop_front();
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let mut answered = 0;
    let mut slow = Vec::new();
    for i in 0..35 {
        let start = Instant::now();
        let request = format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let reply = raw(addr, request.as_bytes(), Duration::from_secs(1));
        if reply.as_ref().is_some_and(|r| r.status == 200) {
            answered += 1;
        } else {
            slow.push((i, start.elapsed(), reply.map(|r| r.status)));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let opened = attacker.join().unwrap();
    eprintln!("{opened} idle sockets opened; {answered} of 35 probes answered");
    assert!(opened > 1000, "the attack held the lanes: {opened} sockets");
    assert_eq!(answered, 35, "probes not answered within 1 s: {slow:?}");
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
