//! The inputs of streams added over HTTP, round 2 (issue 38, docs/security.md "Round 2"): no
//! file read through a GStreamer URI, caps only as caps, network URIs only of the schemes and
//! ports the operator allows, symlinks in an allowed folder followed per file, a playlist's
//! segments only from its own scheme and host, pictures too large refused before they are
//! decoded, and a stream whose frames could pass the station's memory budget refused before it
//! opens. Each on a real `octopipe run --streams` station on loopback; every loop is bounded.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::station::{free_port, Station};

const SINK: &str = "batch max-frames=4 ! jsonl location=/dev/null";

#[test]
fn uris_are_opened_only_by_octopipes_sources_and_only_of_allowed_schemes() {
    let dir = common::temp_dir("control-uris");
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // An image outside, and a link to it among the allowed folder's images.
    let image = image::RgbImage::from_pixel(32, 24, image::Rgb([90, 120, 200]));
    image.save(outside.join("z1.jpg")).unwrap();
    image.save(allowed.join("z0.jpg")).unwrap();
    std::os::unix::fs::symlink(outside.join("z1.jpg"), allowed.join("z1.jpg")).unwrap();
    let allow = allowed.display().to_string();
    let port = free_port();
    let s = Station::start(
        "uris",
        &dir,
        SINK,
        &[
            "--allow-dir",
            &allow,
            "--allow-element",
            "videotestsrc",
            "--allow-udp-port",
            &format!("40000-40001,{port}"),
        ],
        &[],
    );
    let secret = outside.join("z1.jpg").display().to_string();
    let refused = [
        (
            format!("file://{secret} ! head decoder=cpu ! boxes format=synthetic"),
            "is a URI, which GStreamer would open with its own handler",
        ),
        (
            "fd://0 ! boxes format=synthetic".to_string(),
            "'fd://0' is a URI",
        ),
        (
            format!("multifile://{secret} ! boxes format=synthetic"),
            "is a URI",
        ),
        (
            "testbin://video,pattern=ball ! boxes format=synthetic".to_string(),
            "is a URI",
        ),
        (
            format!(
                "videotestsrc ! video/x-raw,width=64,x=file://{secret} ! boxes format=synthetic"
            ),
            "is not caps (it holds '://')",
        ),
        (
            format!("videotestsrc ! file:{secret} ! boxes format=synthetic"),
            "is not caps",
        ),
        (
            "media location=srt://0.0.0.0:7001?mode=listener ! boxes format=synthetic".into(),
            "srt only as a caller",
        ),
        (
            "media location=srt://:7001 ! boxes format=synthetic".into(),
            "srt only as a caller",
        ),
        (
            "media location=http://127.0.0.1:9/live.m3u8 ! boxes format=synthetic".into(),
            "scheme 'http' is not allowed over HTTP",
        ),
        (
            "media location=udp://127.0.0.1:9 ! boxes format=synthetic".into(),
            "UDP port 9 is not one this station lets streams added over HTTP receive on",
        ),
        (
            "rtp port=9 ! boxes format=synthetic".into(),
            "rtp port=9: UDP port 9 is not one",
        ),
        (
            format!("images location={allow}/z*.jpg ! boxes format=synthetic"),
            "z1.jpg leads outside the directories this station allows",
        ),
        (
            format!("images location={allow} ! boxes format=synthetic"),
            "z1.jpg leads outside",
        ),
    ];
    for (source, words) in &refused {
        let reply = s.add(source, None);
        assert_eq!(reply.status, 403, "{source}: {reply:?}");
        let e = reply.error();
        assert!(e.contains(words), "{source}: {e}");
        assert!(
            !e.contains(&outside.display().to_string()) || source.contains(&secret),
            "{e}"
        );
    }
    // What the operator allowed is taken: caps as caps, the listed port, srt as a caller.
    let taken = [
        "videotestsrc num-buffers=5 ! video/x-raw,width=64,height=48,framerate=30/1 ! boxes format=synthetic".to_string(),
        format!("rtp address=127.0.0.1 port={port} start-timeout=1 ! boxes format=synthetic"),
        format!("images location={allow}/z0.jpg ! boxes format=synthetic"),
    ];
    for source in &taken {
        let reply = s.add(source, None);
        assert_eq!(reply.status, 201, "{source}: {reply:?}");
    }
    assert_eq!(s.get("/health").map(|r| r.status), Some(200));
}

/// Serve `playlist` at `/live.m3u8` on loopback until `stop`, at most 30 s.
fn serve_playlist(listener: TcpListener, playlist: String, stop: Arc<AtomicBool>) {
    listener.set_nonblocking(true).unwrap();
    let start = Instant::now();
    while !stop.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(30) {
        let Ok((mut conn, _)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        conn.set_nonblocking(false).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut head = [0u8; 4096];
        let n = conn.read(&mut head).unwrap_or(0);
        let found = String::from_utf8_lossy(&head[..n]).starts_with("GET /live.m3u8");
        let (status, body) = match found {
            true => ("200 OK", playlist.as_str()),
            false => ("404 Not Found", ""),
        };
        let _ = write!(
            conn,
            "HTTP/1.1 {status}\r\nContent-Type: application/vnd.apple.mpegurl\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

/// Serve `playlist` on loopback, add it to `s` as stream `id` (`media location=http://...`)
/// and return the stream's entry once it has failed (at most 30 s); the server stops then.
fn failed_playlist_stream(s: &Station, id: u32, playlist: String) -> serde_json::Value {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || serve_playlist(listener, playlist, stop))
    };
    let reply = s.add(
        &format!(
            "media location=http://127.0.0.1:{port}/live.m3u8 ! boxes format=synthetic count=1"
        ),
        Some(id),
    );
    assert_eq!(reply.status, 201, "{reply:?}");
    let entry = s.wait_state(id, "failed", Duration::from_secs(30));
    stop.store(true, Ordering::SeqCst);
    server.join().unwrap();
    entry
}

fn ts_segment(path: &Path) {
    common::encode(&format!(
        "videotestsrc num-buffers=30 pattern=ball ! video/x-raw,width=160,height=120,framerate=30/1 \
         ! x264enc key-int-max=10 ! mpegtsmux ! filesink location={}",
        path.display()
    ));
}

#[test]
fn a_playlists_segments_come_only_from_its_own_scheme_and_host() {
    for e in ["hlsdemux", "x264enc", "tsdemux", "avdec_h264"] {
        if !common::element_or_skip(e, "gstreamer1.0-plugins-{bad,ugly}, gstreamer1.0-libav") {
            return;
        }
    }
    let dir = common::temp_dir("control-hls");
    let segment = dir.join("local.ts");
    ts_segment(&segment);
    let playlist = format!(
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:1.0,\nfile://{}\n#EXT-X-ENDLIST\n",
        segment.display()
    );
    let s = Station::start("hls", &dir, SINK, &["--allow-scheme", "http"], &[]);
    let entry = failed_playlist_stream(&s, 1, playlist);
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!(
            "a segment of its playlist is 'file://{}'",
            segment.display()
        )) && error.contains("not on the playlist's own scheme and host (http://127.0.0.1)"),
        "{entry}"
    );
    assert_eq!(entry["frames_in"].as_u64(), Some(0), "{entry}");
    assert_eq!(s.get("/health").map(|r| r.status), Some(200));
}

#[test]
fn a_picture_too_large_fails_its_stream_alone_and_a_stream_past_the_memory_budget_is_refused() {
    let dir = common::temp_dir("control-too-large");
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    // A JPEG header that says 30000x30000: SOI, then SOF0 (precision 8, height, width, 3
    // components), nothing a decoder could decode.
    let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xC0, 0, 17, 8];
    jpeg.extend(30000u16.to_be_bytes());
    jpeg.extend(30000u16.to_be_bytes());
    jpeg.extend([3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1, 0xFF, 0xD9]);
    std::fs::write(allowed.join("bomb.jpg"), &jpeg).unwrap();
    let allow = allowed.display().to_string();
    let s = Station::start(
        "too-large",
        &dir,
        SINK,
        &["--allow-dir", &allow, "--max-stream-memory", "1.5GiB"],
        &[],
    );
    let healthy =
        "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic count=1";
    assert_eq!(s.add(healthy, Some(0)).status, 201);
    let reply = s.add(
        &format!("images location={allow}/bomb.jpg ! boxes format=synthetic count=1"),
        Some(1),
    );
    assert_eq!(reply.status, 201, "{reply:?}");
    let entry = s.wait_state(1, "failed", Duration::from_secs(20));
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(
            "bomb.jpg: its picture is too large to decode: 30000x30000 is 900000000 pixels"
        ),
        "{entry}"
    );
    // A stream whose queues could hold more than the budget: refused before it opens. (The
    // image stream above, of a size unknown until it decodes, counted 14 of the largest frames,
    // 1.3 GiB.)
    let reply = s.add(
        "testsrc width=1920 height=1080 ! queue size=1000 ! boxes format=synthetic",
        Some(2),
    );
    assert_eq!(reply.status, 400, "{reply:?}");
    let e = reply.error();
    assert!(
        e.contains("this stream may hold 3143443200 bytes (2.9 GiB) of frames: 1010 frames of at most 3112320 bytes")
            && e.contains("more than the 1.5 GiB a stream may use on this station (--max-stream-memory 1.5 GiB)"),
        "{e}"
    );
    assert!(
        s.streams().iter().all(|e| e["id"] != 2),
        "{:?}",
        s.streams()
    );
    // The station and its healthy stream went on.
    assert_eq!(s.stream(0)["state"], "running", "{}", s.stream(0));
    assert_eq!(s.get("/health").map(|r| r.status), Some(200));
}

/// A character of several bytes just before a second `://` in a URI the station shows
/// (`rtsp://u:p@host/pathé://x`), and in a playlist a hostile server answers (`segé://evil`):
/// once the station sliced inside that character where it hides credentials (every answer that
/// showed the stream, every log line naming it: a panic) and where its relay reads a playlist's
/// URIs (the relay's thread). Now the stream is listed with its credentials hidden, the
/// playlist's foreign URI is refused naming it, and the station answers throughout.
#[test]
fn characters_of_several_bytes_in_uris_never_take_the_station_down() {
    for e in ["hlsdemux", "rtspsrc"] {
        if !common::element_or_skip(e, "gstreamer1.0-plugins-{bad,good}") {
            return;
        }
    }
    let dir = common::temp_dir("control-multibyte");
    let s = Station::start("multibyte", &dir, SINK, &["--allow-scheme", "http"], &[]);
    // Nothing listens on its port: the stream fails, but it is shown (and logged) first.
    let closed = free_port();
    let reply = s.add(
        &format!(
            "media location=rtsp://me:hunter2@127.0.0.1:{closed}/pathé://x start-timeout=2 retry=0 \
             ! boxes format=synthetic count=1"
        ),
        Some(1),
    );
    assert_eq!(reply.status, 201, "{reply:?}");
    let listed = s.get("/streams").expect("GET /streams is answered");
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(
        listed.body.contains("rtsp://***@127.0.0.1") && !listed.body.contains("hunter2"),
        "{listed:?}"
    );
    let playlist =
        "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:1.0,\nsegé://camera.evil/a.ts\n#EXT-X-ENDLIST\n";
    let entry = failed_playlist_stream(&s, 2, playlist.into());
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("a segment of its playlist is '://camera.evil/a.ts'"),
        "{entry}\n{}",
        s.log()
    );
    s.wait_until(1, Duration::from_secs(30), "not ended", |e| {
        e["state"] == "failed" || e["state"] == "ended"
    });
    assert_eq!(s.get("/health").map(|r| r.status), Some(200));
    let log = s.log();
    assert!(
        !log.contains("panicked") && !log.contains("hunter2"),
        "{log}"
    );
}
