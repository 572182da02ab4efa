//! Hostile inputs and peers against a real station on loopback (issue 50, docs/security.md
//! "Round 3"): a picture whose size hides behind a stray byte, streams past the station's
//! memory budget, RTSP servers that answer without end, drip or redirect. Each case reproduces
//! the attack on 127.0.0.1; every loop is bounded in count and time; the memory cases run the
//! station under `ulimit -v`.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::rtsp::Hostile;
use common::station::{status_kb, Station};

/// The station's own stages: streams bring their boxes.
pub(crate) const PIPELINE: &str = "batch max-frames=8 max-wait-ms=50 ! jsonl location=/dev/null";

/// A live 8192x8192 test stream: its frames fit --max-stream-memory 8GiB, and a few of them
/// fill a budget of some GiB (~650 MB each, as issue 50's review measured).
pub(crate) const BIG_STREAM: &str = "testsrc width=8192 height=8192 pattern=black live=true \
                                     framerate=2 num-buffers=100000 ! boxes format=synthetic count=1";

/// [`BIG_STREAM`] added as each stream of `ids`: the ids admitted (201) and the error of each
/// refusal (429); any other answer fails the test.
pub(crate) fn add_big_streams(
    s: &Station,
    ids: std::ops::RangeInclusive<u32>,
) -> (Vec<u32>, Vec<String>) {
    let (mut admitted, mut refusals) = (Vec::new(), Vec::new());
    for id in ids {
        let r = s.add(BIG_STREAM, Some(id));
        match r.status {
            201 => admitted.push(id),
            429 => refusals.push(r.error()),
            _ => panic!("stream {id}: {r:?}\n{}", s.log()),
        }
    }
    eprintln!("admitted {admitted:?}, refused {}", refusals.len());
    (admitted, refusals)
}

/// Address space above the idle station's peak: room for a few streams' threads and small
/// frames, far less than one 30000x30000 picture (1.35 GB of I420).
pub(crate) const MARGIN_KB: u64 = 1024 * 1024;

/// A station under an address-space cap of its idle peak plus `margin_kb`, started with
/// `args`.
pub(crate) fn capped_station(name: &str, dir: &Path, args: &[&str], margin_kb: u64) -> Station {
    let env = [("MALLOC_ARENA_MAX", "2")];
    // The default budget takes half of what the cap leaves: these tests are about the peers'
    // answers under the cap, so the budget is set out of their way.
    let mut args = args.to_vec();
    if !args.contains(&"--memory-budget") {
        args.extend(["--memory-budget", "64GiB"]);
    }
    let args = &args[..];
    let idle = Station::start(&format!("{name}-idle"), dir, PIPELINE, args, &env);
    let peak = status_kb(idle.child.id(), "VmPeak:");
    assert!(peak > 0, "no VmPeak for the idle station");
    let (status, _, _) = idle.stop();
    assert_eq!(status.code(), Some(143), "{status:?}");
    let cap = peak + margin_kb;
    eprintln!("{name}: idle VmPeak {peak} kB; cap {cap} kB");
    Station::start_capped(name, dir, PIPELINE, args, &env, Some(cap))
}

/// Wait (at most `limit`) until stream `id` no longer runs, `/health` answering 200 all the
/// while; its entry.
pub(crate) fn until_over(s: &Station, id: u32, limit: Duration) -> serde_json::Value {
    s.wait_until(id, limit, "still running", |e| {
        let health = s.get("/health").map(|r| r.status);
        assert_eq!(health, Some(200), "/health\n{}", s.log());
        e["state"] != "running"
    })
}

/// A real 16x16 baseline JPEG (GStreamer's jpegenc) whose frame header is made to declare
/// 30000x30000, with one stray byte before it: libjpeg skips the byte and reads the size.
fn giant_jpeg(dir: &Path) -> PathBuf {
    use gstreamer as gst;
    use gstreamer::prelude::*;
    gst::init().unwrap();
    let seed = dir.join("seed.jpg");
    let launch = format!(
        "videotestsrc num-buffers=1 ! video/x-raw,width=16,height=16 ! jpegenc ! filesink location={}",
        seed.display()
    );
    let pipeline = gst::parse::launch(&launch).unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let bus = pipeline.bus().unwrap();
    let msg = bus.timed_pop_filtered(
        gst::ClockTime::from_seconds(10),
        &[gst::MessageType::Eos, gst::MessageType::Error],
    );
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(
        matches!(msg.map(|m| m.type_()), Some(gst::MessageType::Eos)),
        "jpegenc made no file"
    );
    let mut bytes = std::fs::read(&seed).unwrap();
    let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    bytes[sof + 5..sof + 7].copy_from_slice(&30000u16.to_be_bytes());
    bytes[sof + 7..sof + 9].copy_from_slice(&30000u16.to_be_bytes());
    bytes.insert(sof, 0x00);
    let folder = dir.join("giant");
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("giant.jpg");
    std::fs::write(&file, &bytes).unwrap();
    file
}

#[test]
fn a_giant_jpeg_behind_a_stray_byte_is_refused_naming_its_size_in_bounded_memory() {
    let dir = common::temp_dir("hostile-jpeg");
    let file = giant_jpeg(&dir);
    let allow = dir.display().to_string();
    let s = capped_station("jpeg", &dir, &["--allow-dir", &allow], MARGIN_KB);
    let folder = file.parent().unwrap().display().to_string();
    let sources = [
        format!("images location={folder} on-damaged=keep ! boxes format=synthetic count=1"),
        format!(
            "images location={folder} on-damaged=keep framerate=5 ! boxes format=synthetic count=1"
        ),
        format!(
            "media location={} ! boxes format=synthetic count=1",
            file.display()
        ),
        format!(
            "media location={} ! boxes format=synthetic count=1",
            file.display()
        ),
    ];
    for (id, source) in (1..).zip(&sources) {
        let r = s.add(source, Some(id));
        assert_eq!(r.status, 201, "{source}: {r:?}");
    }
    let small = "testsrc width=64 height=48 num-buffers=30 ! boxes format=synthetic count=1";
    assert_eq!(s.add(small, Some(9)).status, 201);
    for id in 1..=sources.len() as u32 {
        let e = until_over(&s, id, Duration::from_secs(30));
        let error = e["error"].as_str().unwrap_or_default();
        assert_eq!(e["state"], "failed", "{e}\n{}", s.log());
        assert!(
            error.contains("too large to decode: 30000x30000 is 900000000 pixels"),
            "{e}"
        );
    }
    assert_eq!(until_over(&s, 9, Duration::from_secs(30))["state"], "ended");
    let (status, report, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
    let rows = report["streams"].as_array().unwrap();
    let small = rows.iter().find(|r| r["stream"] == 9);
    assert_eq!(
        small.map(|r| r["processed"].clone()),
        Some(30.into()),
        "{report}"
    );
}

#[test]
fn streams_past_the_station_memory_budget_are_refused_naming_it() {
    let dir = common::temp_dir("hostile-budget");
    // Each 8192x8192 stream's frames are within --max-stream-memory; three GiB hold two or
    // three of them, not ten (~650 MB each in fact, as the review measured).
    let args = ["--max-stream-memory", "8GiB", "--memory-budget", "3GiB"];
    // Room for the budget and the station's own, not for ten such streams (6.5 GB).
    let s = capped_station("budget", &dir, &args, 4 * MARGIN_KB);
    let (admitted, refusals) = add_big_streams(&s, 1..=10);
    for e in &refusals {
        assert!(e.contains("--memory-budget 3.0 GiB"), "{e}");
        assert!(
            e.contains("remove a stream or raise --memory-budget"),
            "{e}"
        );
    }
    let refused = refusals.len();
    assert!(!admitted.is_empty() && admitted.len() <= 3, "{admitted:?}");
    assert_eq!(admitted.len() + refused, 10);
    assert_eq!(s.get("/health").map(|r| r.status), Some(200));
    for id in &admitted {
        assert_eq!(s.stream(*id)["state"], "running", "{}", s.log());
    }
    // Removed and stopped, a stream gives its share back: one more fits again.
    let first = admitted[0];
    let path = format!("/streams/{first}");
    assert_eq!(s.request("DELETE", &path, "").map(|r| r.status), Some(200));
    s.wait_state(first, "removed", Duration::from_secs(20));
    let start = Instant::now();
    loop {
        let r = s.add(BIG_STREAM, None);
        if r.status == 201 {
            break;
        }
        assert_eq!(r.status, 429, "{r:?}");
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{r:?}\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}

/// OPTIONS answered as a server does.
fn options(conn: &mut std::net::TcpStream, cseq: &str) -> bool {
    use std::io::Write;
    let answer = format!(
        "RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nPublic: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN\r\n\r\n"
    );
    conn.write_all(answer.as_bytes()).is_ok()
}

/// DESCRIBE answered with `Content-Length: 1500000000` and media sections without end (as
/// fast as the client reads, until the deadline).
fn endless_sdp(conn: &mut std::net::TcpStream, cseq: &str, method: &str, until: Instant) -> bool {
    use std::io::Write;
    if method == "OPTIONS" {
        return options(conn, cseq);
    }
    let head = format!(
        "RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nContent-Type: application/sdp\r\nContent-Length: 1500000000\r\n\r\nv=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\n"
    );
    if conn.write_all(head.as_bytes()).is_err() {
        return false;
    }
    let media = "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n".repeat(100);
    while Instant::now() < until {
        match conn.write(media.as_bytes()) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return false,
        }
    }
    false
}

/// DESCRIBE answered with an SDP of 1000 media sections within a small Content-Length.
fn many_media(conn: &mut std::net::TcpStream, cseq: &str, method: &str, _: Instant) -> bool {
    use std::io::Write;
    if method == "OPTIONS" {
        return options(conn, cseq);
    }
    let sdp = "m=video 0 RTP/AVP 96\r\n".repeat(1000);
    let answer = format!(
        "RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
        sdp.len()
    );
    conn.write_all(answer.as_bytes()).is_ok()
}

/// Every request answered with a status line, then one byte of a header a second, without end
/// (until the deadline).
fn drip(conn: &mut std::net::TcpStream, cseq: &str, _: &str, until: Instant) -> bool {
    use std::io::Write;
    let head = format!("RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nX-Pad: ");
    if conn.write_all(head.as_bytes()).is_err() {
        return false;
    }
    while Instant::now() < until {
        if conn.write_all(b"a").is_err() {
            return false;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    false
}

/// DESCRIBE answered with a redirect to another server (with credentials, to be hidden).
fn redirect(conn: &mut std::net::TcpStream, cseq: &str, method: &str, _: Instant) -> bool {
    use std::io::Write;
    if method == "OPTIONS" {
        return options(conn, cseq);
    }
    let answer = format!(
        "RTSP/1.0 302 Found\r\nCSeq: {cseq}\r\nLocation: rtsp://admin:pw@10.255.255.1:554/other\r\n\r\n"
    );
    conn.write_all(answer.as_bytes()).is_ok()
}

/// The station's threads and open descriptors.
fn threads_fds(s: &Station) -> (u64, u64) {
    let (_, threads, fds) = common::station::usage(s.child.id());
    (threads, fds)
}

#[test]
fn an_rtsp_answer_past_the_caps_fails_its_stream_alone_naming_the_cap() {
    let dir = common::temp_dir("hostile-sdp");
    let endless = Hostile::start(endless_sdp, Duration::from_secs(30));
    let many = Hostile::start(many_media, Duration::from_secs(30));
    let s = capped_station("sdp", &dir, &[], MARGIN_KB);
    let live = "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic";
    assert_eq!(s.add(live, Some(1)).status, 201);
    // A real camera through the same relay keeps its frames coming.
    let camera_port = common::station::free_port();
    let camera = common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly")
        .then(|| common::rtsp::RtspServer::start(camera_port));
    if camera.is_some() {
        let source =
            format!("media location=rtsp://127.0.0.1:{camera_port}/test ! boxes format=synthetic");
        assert_eq!(s.add(&source, Some(4)).status, 201);
    }
    let (rss_before, _, _) = common::station::usage(s.child.id());
    let cases = [
        (
            2,
            endless.port,
            "Content-Length 1500000000, more than 65536 bytes",
        ),
        (
            3,
            many.port,
            "an SDP of 1000 media sections (m= lines; at most 16)",
        ),
    ];
    for (id, port, _) in cases {
        let source = format!(
            "media location=rtsp://127.0.0.1:{port}/cam start-timeout=0 retry=0 ! boxes format=synthetic"
        );
        assert_eq!(s.add(&source, Some(id)).status, 201);
    }
    for (id, _, cap) in cases {
        let e = until_over(&s, id, Duration::from_secs(30));
        let error = e["error"].as_str().unwrap_or_default();
        assert_eq!(e["state"], "failed", "{e}");
        assert!(error.contains(cap), "{e}\n{}", s.log());
        assert!(
            error.contains("answered past a bound of the station"),
            "{e}"
        );
    }
    let (rss_after, _, _) = common::station::usage(s.child.id());
    eprintln!("RSS {rss_before} kB -> {rss_after} kB");
    assert!(
        rss_after < rss_before + 200 * 1024,
        "{rss_before} -> {rss_after} kB"
    );
    assert_eq!(s.stream(1)["state"], "running", "{}", s.log());
    if camera.is_some() {
        s.wait_frames(4, 10, Duration::from_secs(20));
        assert_eq!(s.stream(4)["state"], "running", "{}", s.log());
    }
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}

#[test]
fn streams_of_dripping_rtsp_servers_end_within_the_deadline_once_removed() {
    const N: u32 = 20;
    let dir = common::temp_dir("hostile-drip");
    let server = Hostile::start(drip, Duration::from_secs(60));
    let max = N.to_string();
    let s = Station::start("drip", &dir, PIPELINE, &["--max-streams", &max], &[]);
    let source = format!(
        "media location=rtsp://127.0.0.1:{}/cam start-timeout=0 retry=0 ! boxes format=synthetic",
        server.port
    );
    let remove_all = |ids: std::ops::Range<u32>| {
        for id in ids {
            let path = format!("/streams/{id}");
            assert_eq!(s.request("DELETE", &path, "").map(|r| r.status), Some(200));
        }
    };
    // A first round warms GStreamer's own threads up (its pools stay): the baseline is after.
    for id in 100..102 {
        assert_eq!(s.add(&source, Some(id)).status, 201);
    }
    std::thread::sleep(Duration::from_secs(2));
    remove_all(100..102);
    for id in 100..102 {
        s.wait_state(id, "removed", Duration::from_secs(20));
    }
    std::thread::sleep(Duration::from_secs(1));
    let baseline = threads_fds(&s);
    for id in 0..N {
        let r = s.add(&source, Some(id));
        assert_eq!(r.status, 201, "{r:?}");
    }
    let busy = threads_fds(&s);
    eprintln!("baseline (threads, fds) {baseline:?}; with {N} dripping streams {busy:?}");
    std::thread::sleep(Duration::from_secs(2));
    let removed = Instant::now();
    remove_all(0..N);
    let states: Vec<serde_json::Value> = (0..N).map(|id| s.stream(id)["state"].clone()).collect();
    eprintln!(
        "{:?} after the removals: {:?} {states:?}",
        removed.elapsed(),
        threads_fds(&s)
    );
    let deadline = Duration::from_secs(15);
    loop {
        let now = threads_fds(&s);
        let states: Vec<serde_json::Value> =
            (0..N).map(|id| s.stream(id)["state"].clone()).collect();
        let stopped = states.iter().all(|st| st == "removed");
        if stopped && now.0 <= baseline.0 + 2 && now.1 <= baseline.1 + 2 {
            eprintln!("back to {now:?} after {:?}", removed.elapsed());
            break;
        }
        assert!(
            removed.elapsed() < deadline,
            "after {:?}: (threads, fds) {now:?}, baseline {baseline:?}; states {states:?}\n{}",
            removed.elapsed(),
            s.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(!s.log().contains("left to stop on its own"), "{}", s.log());
    // Stopped, they count no more.
    assert_eq!(s.add(&source, Some(N + 2)).status, 201);
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}

#[test]
fn a_removed_stream_of_a_hundred_thousand_tracked_boxes_stops_at_once() {
    let dir = common::temp_dir("hostile-track");
    let s = Station::start("track", &dir, PIPELINE, &[], &[]);
    let heavy = "testsrc width=640 height=480 live=true num-buffers=100000 \
                 ! boxes format=synthetic count=100000 ! track";
    let r = s.add(heavy, Some(1));
    assert_eq!(r.status, 201, "{r:?}");
    s.wait_frames(1, 3, Duration::from_secs(30));
    let removed = Instant::now();
    assert_eq!(
        s.request("DELETE", "/streams/1", "").map(|r| r.status),
        Some(200)
    );
    s.wait_state(1, "removed", Duration::from_secs(8));
    eprintln!("removed after {:?}", removed.elapsed());
    let log = s.log();
    assert!(!log.contains("detached"), "{log}");
    assert!(log.contains("1024 highest-scoring are tracked"), "{log}");
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}

#[test]
fn a_source_pipeline_still_stopping_counts_toward_max_streams() {
    let dir = common::temp_dir("hostile-stopping");
    let args = [
        "--max-streams",
        "1",
        "--allow-element",
        "videotestsrc,identity",
    ];
    let s = Station::start("stopping", &dir, PIPELINE, &args, &[]);
    // identity sleeps 9 s on the first buffer, uninterruptibly: the pipeline cannot stop
    // before (as an element stuck in its own I/O).
    let stuck = "videotestsrc is-live=true ! identity sleep-time=9000000 ! boxes format=synthetic";
    let r = s.add(stuck, Some(1));
    assert_eq!(r.status, 201, "{r:?}");
    let added = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        s.request("DELETE", "/streams/1", "").map(|r| r.status),
        Some(200)
    );
    // The stream ends after the teardown deadlines (2 s, its connections closed, 2 s more)...
    s.wait_state(1, "removed", Duration::from_secs(8));
    let removed = added.elapsed();
    let small = "testsrc width=64 height=48 num-buffers=5 ! boxes format=synthetic";
    // ... but its pipeline, still stopping, counts until the sleep ends.
    if removed < Duration::from_secs(8) {
        let r = s.add(small, Some(2));
        assert_eq!(r.status, 429, "{r:?} after {removed:?}");
        assert!(r.error().contains("at most 1"), "{r:?}");
    }
    let start = Instant::now();
    loop {
        let r = s.add(small, Some(3));
        if r.status == 201 {
            break;
        }
        assert_eq!(r.status, 429, "{r:?}");
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{r:?}\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "removed {removed:?} after the add; admitted again {:?} after",
        added.elapsed()
    );
    assert!(
        added.elapsed() >= Duration::from_secs(8),
        "{:?}",
        added.elapsed()
    );
    assert!(
        s.log()
            .contains("counted against --max-streams until it has"),
        "{}",
        s.log()
    );
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}

#[test]
fn an_rtsp_redirect_and_an_rtsps_uri_are_refused_saying_why() {
    let dir = common::temp_dir("hostile-redirect");
    let server = Hostile::start(redirect, Duration::from_secs(30));
    let s = Station::start("redirect", &dir, PIPELINE, &[], &[]);
    let source = format!(
        "media location=rtsp://127.0.0.1:{}/cam start-timeout=0 retry=0 ! boxes format=synthetic",
        server.port
    );
    assert_eq!(s.add(&source, Some(1)).status, 201);
    let e = until_over(&s, 1, Duration::from_secs(30));
    let error = e["error"].as_str().unwrap_or_default();
    assert_eq!(e["state"], "failed", "{e}");
    assert!(
        error.contains(
            "a redirect (RTSP 302) to 'rtsp://***@10.255.255.1:554/other': the station follows \
             no redirect"
        ),
        "{e}\n{}",
        s.log()
    );
    // rtsps: TLS the relay does not read, so not taken by default; the refusal says how.
    let r = s.add(
        "media location=rtsps://127.0.0.1:1/cam ! boxes format=synthetic",
        Some(2),
    );
    assert_eq!(r.status, 403, "{r:?}");
    let why = r.error();
    assert!(
        why.contains("come over TLS, which the station's relay does not read"),
        "{why}"
    );
    assert!(why.contains("--allow-scheme rtsps"), "{why}");
    let r = s.add(
        "media location=rtsp://0x0:554/cam ! boxes format=synthetic",
        Some(3),
    );
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.error().contains("host '0x0' is every interface"), "{r:?}");
    // A port rtspsrc would read its own way (past 65535): no relay for it, so not opened.
    let r = s.add(
        "media location=rtsp://127.0.0.1:99999/cam start-timeout=0 retry=0 ! boxes format=synthetic",
        Some(4),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let e = until_over(&s, 4, Duration::from_secs(30));
    assert_eq!(e["state"], "failed", "{e}");
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|e| e.contains("the station cannot read this URI's host and port")),
        "{e}\n{}",
        s.log()
    );
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}
