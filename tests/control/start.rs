//! A stream still starting holds up no other (issue 53 item 5, the station's half): a stream's
//! source is built and set playing where it is added, and what makes a start slow (a camera
//! that does not answer, a decoder being made) happens in that stream's own threads, so the
//! next `POST /streams` is answered and its frames flow while the first still waits.

use std::time::{Duration, Instant};

use crate::common;
use crate::hostile_peers::PIPELINE;
use common::rtsp::Hostile;
use common::station::Station;

/// Every request answered with a status line and then nothing more until the deadline: a
/// camera whose first answer never ends.
fn silent(conn: &mut std::net::TcpStream, cseq: &str, _: &str, until: Instant) -> bool {
    use std::io::Write;
    let head = format!("RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\n");
    if conn.write_all(head.as_bytes()).is_err() {
        return false;
    }
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_stream_added_while_others_still_start_is_answered_and_runs_at_once() {
    let dir = common::temp_dir("start-apart");
    let camera = Hostile::start(silent, Duration::from_secs(15));
    let s = Station::start("apart", &dir, PIPELINE, &["--memory-budget", "64GiB"], &[]);
    let starting = format!(
        "media location=rtsp://127.0.0.1:{}/cam start-timeout=20 retry=0 ! boxes format=synthetic",
        camera.port
    );
    for id in 1..=4 {
        let t = Instant::now();
        let r = s.add(&starting, Some(id));
        assert_eq!(r.status, 201, "{r:?}\n{}", s.log());
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "stream {id}: {:?}",
            t.elapsed()
        );
    }
    let t = Instant::now();
    let live = "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic";
    let r = s.add(live, Some(5));
    let answered = t.elapsed();
    assert_eq!(r.status, 201, "{r:?}\n{}", s.log());
    assert!(
        answered < Duration::from_secs(2),
        "answered in {answered:?}"
    );
    // 30 frames at 30 fps: about a second once it runs (10 s from its POST at most).
    s.wait_frames(5, 30, Duration::from_secs(10).saturating_sub(t.elapsed()));
    let ran = t.elapsed();
    // The four are still waiting for their camera's answer: nothing of theirs has come.
    for id in 1..=4 {
        let e = s.stream(id);
        assert_eq!(e["state"], "running", "{e}\n{}", s.log());
        assert_eq!(e["frames_in"].as_u64(), Some(0), "{e}");
    }
    eprintln!(
        "with 4 streams still starting, the fifth answered in {answered:?}, 30 frames in {ran:?}"
    );
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}
