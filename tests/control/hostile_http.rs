//! What an HTTP server answers, bounded by the station's relay before GStreamer parses it
//! (issue 50 item 1, docs/security.md "Peers' answers"): hostile servers written here on
//! 127.0.0.1 (endless headers, a 1.5 GB playlist, endless playlist lines, a header dripped
//! a byte a second, a media body likewise, a redirect off the server, a playlist naming another
//! server) fail their stream alone naming the cap, the station under `ulimit -v`; honest ones
//! (a clip, an HLS stream) come through the relay whole. Every server's loop is bounded in
//! connections and time.

use crate::common;
use crate::hostile_peers::{capped_station, until_over, MARGIN_KB, PIPELINE};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::station::Station;

/// What a server answers on `conn` to a request for `path`, until the deadline.
type Serve = Arc<dyn Fn(&mut TcpStream, &str, Instant) + Send + Sync>;

/// An HTTP server on 127.0.0.1: each request's head read (bounded), kept in `requests`, and
/// answered by `serve`; at most 512 connections, each over within `limit`, all when dropped.
struct HttpPeer {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HttpPeer {
    fn start(serve: Serve, limit: Duration) -> HttpPeer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (stopped, seen) = (stop.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !stopped.load(Ordering::SeqCst) && conns.len() < 512 {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let (stopped, seen, serve) = (stopped.clone(), seen.clone(), serve.clone());
                conns.push(std::thread::spawn(move || {
                    let until = Instant::now() + limit;
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
                    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        if stopped.load(Ordering::SeqCst) || Instant::now() > until {
                            return;
                        }
                        match conn.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                            Err(_) => continue,
                        }
                        if head.len() > 65536 {
                            return;
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    seen.lock().unwrap().push(head);
                    serve(&mut conn, &path, until);
                }));
            }
            for c in conns {
                let _ = c.join();
            }
        });
        HttpPeer {
            port,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Write `head`, then `line` over and over as fast as the client reads, until `until`.
fn endless(conn: &mut TcpStream, head: &str, line: &str, until: Instant) {
    if conn.write_all(head.as_bytes()).is_err() {
        return;
    }
    let lines = line.repeat(64);
    while Instant::now() < until {
        match conn.write(lines.as_bytes()) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// A status line, then header lines of 1 KiB without end.
fn endless_headers() -> Serve {
    Arc::new(|conn, _, until| {
        let line = format!("X-Pad: {}\r\n", "a".repeat(1000));
        endless(conn, "HTTP/1.1 200 OK\r\n", &line, until)
    })
}

/// A playlist of `Content-Length: 1500000000` whose lines never end.
fn huge_playlist() -> Serve {
    Arc::new(|conn, _, until| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apple.mpegurl\r\n\
                    Content-Length: 1500000000\r\n\r\n#EXTM3U\n#EXT-X-TARGETDURATION:1\n";
        endless(conn, head, "#EXTINF:1.0,\nseg.ts\n", until)
    })
}

/// A playlist without type or length whose lines never end (its end is the connection's).
fn endless_playlist() -> Serve {
    Arc::new(|conn, _, until| {
        let head = "HTTP/1.1 200 OK\r\n\r\n#EXTM3U\n#EXT-X-TARGETDURATION:1\n";
        endless(conn, head, "#EXTINF:1.0,\nseg.ts\n", until)
    })
}

/// A status line, then a header one byte a second.
fn drip() -> Serve {
    Arc::new(|conn, _, until| {
        if conn.write_all(b"HTTP/1.1 200 OK\r\nX-Pad: ").is_err() {
            return;
        }
        while Instant::now() < until && conn.write_all(b"a").is_ok() {
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

/// A media head and its body's first bytes, then a byte of it a second.
fn drip_body() -> Serve {
    Arc::new(|conn, _, until| {
        let head =
            b"HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\n\r\n\x47\x40\x00\x10\x00\x00\xb0\x0d";
        if conn.write_all(head).is_err() {
            return;
        }
        while Instant::now() < until && conn.write_all(b"\xff").is_ok() {
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

/// A redirect to another server, credentials in it.
fn redirect_off() -> Serve {
    Arc::new(|conn, _, _| {
        let _ = conn.write_all(
            b"HTTP/1.1 302 Found\r\nLocation: http://admin:pw@10.255.255.1/x.m3u8\r\n\
              Content-Length: 0\r\n\r\n",
        );
    })
}

/// A playlist whose segment is on another server (which the demuxer would read uncapped).
fn foreign_segment() -> Serve {
    Arc::new(|conn, _, _| {
        let body = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\nhttp://127.0.0.2:9/seg.ts\n";
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apple.mpegurl\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = conn.write_all(head.as_bytes());
        let _ = conn.write_all(body.as_bytes());
    })
}

/// The files of `dir`, each with its type and length (no ranges); 404 for others.
fn files(dir: &Path) -> Serve {
    let dir = dir.to_path_buf();
    Arc::new(move |conn, path, _| {
        let name = path.trim_start_matches('/');
        let file = (!name.contains("..")).then(|| std::fs::read(dir.join(name)).ok());
        let Some(Some(body)) = file else {
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
            return;
        };
        let kind = match name.rsplit('.').next() {
            Some("m3u8") => "application/vnd.apple.mpegurl",
            Some("ts") => "video/mp2t",
            _ => "video/x-matroska",
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = conn.write_all(head.as_bytes());
        let _ = conn.write_all(&body);
    })
}

/// Run a GStreamer launch line to its end (10 s at most).
fn make(launch: &str) {
    use gstreamer as gst;
    use gstreamer::prelude::*;
    gst::init().unwrap();
    let pipeline = gst::parse::launch(launch).unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    let msg = pipeline.bus().unwrap().timed_pop_filtered(
        gst::ClockTime::from_seconds(10),
        &[gst::MessageType::Eos, gst::MessageType::Error],
    );
    pipeline.set_state(gst::State::Null).unwrap();
    assert!(
        matches!(msg.map(|m| m.type_()), Some(gst::MessageType::Eos)),
        "{launch}: no end"
    );
}

#[test]
fn http_answers_past_the_caps_fail_their_stream_alone_naming_the_cap() {
    let dir = common::temp_dir("hostile-http");
    let limit = Duration::from_secs(40);
    let servers = [
        (
            endless_headers(),
            "live.m3u8",
            "a message head of more than 65536 bytes",
        ),
        (
            huge_playlist(),
            "live.m3u8",
            "Content-Length 1500000000, more than 1048576 bytes (at most 1048576)",
        ),
        (
            endless_playlist(),
            "live.m3u8",
            "a document (no Content-Type: a playlist, a manifest) of more than 1048576 bytes",
        ),
        (
            drip(),
            "live.m3u8",
            "a response head took more than 10 s to arrive (a server sending it byte by byte?)",
        ),
        (
            drip_body(),
            "cam.ts",
            "a media body slower than 1024 bytes in 10 s (a server dripping it?)",
        ),
        (
            redirect_off(),
            "live.m3u8",
            "a redirect (HTTP 302) to 'http://***@10.255.255.1/x.m3u8', off the stream's server",
        ),
        (
            foreign_segment(),
            "live.m3u8",
            "a segment of its playlist is 'http://127.0.0.2:9/seg.ts', not on the playlist's own \
             scheme and host (http://127.0.0.1)",
        ),
    ];
    let peers: Vec<(HttpPeer, &str, &str)> = servers
        .into_iter()
        .map(|(serve, path, cap)| (HttpPeer::start(serve, limit), path, cap))
        .collect();
    let s = capped_station("http", &dir, &["--allow-scheme", "http"], MARGIN_KB);
    let live = "testsrc width=64 height=48 live=true num-buffers=100000 ! boxes format=synthetic";
    assert_eq!(s.add(live, Some(1)).status, 201);
    let (rss_before, _, _) = common::station::usage(s.child.id());
    for ((peer, path, _), id) in peers.iter().zip(2..) {
        let source = format!(
            "media location=http://127.0.0.1:{}/{path} start-timeout=0 retry=0 ! boxes format=synthetic",
            peer.port
        );
        let r = s.add(&source, Some(id));
        assert_eq!(r.status, 201, "{r:?}");
    }
    for ((peer, _, cap), id) in peers.iter().zip(2..) {
        let e = until_over(&s, id, Duration::from_secs(30));
        let error = e["error"].as_str().unwrap_or_default();
        assert_eq!(e["state"], "failed", "{e}\n{}", s.log());
        assert!(error.contains(cap), "{e}\n{}", s.log());
        assert!(
            error.contains(&format!(
                "the HTTP server 127.0.0.1:{} answered past a bound of the station",
                peer.port
            )),
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
    assert_eq!(s.get("/health").map(|r| r.status), Some(200));
    let (status, _, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
}

#[test]
fn a_clip_and_an_hls_stream_over_http_come_whole_through_the_relay() {
    let dir = common::temp_dir("honest-http");
    let site = dir.join("site");
    std::fs::create_dir_all(&site).unwrap();
    make(&format!(
        "videotestsrc num-buffers=60 ! video/x-raw,width=64,height=48,framerate=30/1 ! jpegenc \
         ! matroskamux ! filesink location={}",
        site.join("clip.mkv").display()
    ));
    let hls = common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly");
    if hls {
        make(&format!(
            "videotestsrc num-buffers=90 ! video/x-raw,width=160,height=120,framerate=30/1 \
             ! x264enc key-int-max=30 speed-preset=ultrafast ! h264parse ! hlssink2 \
             location={}/seg%05d.ts playlist-location={}/live.m3u8 target-duration=1 \
             max-files=0 playlist-length=0",
            site.display(),
            site.display()
        ));
    }
    let peer = HttpPeer::start(files(&site), Duration::from_secs(60));
    // The variant named by an absolute URI on the server: the relay rewrites it to itself.
    std::fs::write(
        site.join("master.m3u8"),
        format!(
            "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=300000\nhttp://127.0.0.1:{}/live.m3u8\n",
            peer.port
        ),
    )
    .unwrap();
    let s = Station::start(
        "honest-http",
        &dir,
        PIPELINE,
        &["--allow-scheme", "http"],
        &[],
    );
    let mut streams = vec![(1, "clip.mkv", 60)];
    if hls {
        streams.push((2, "master.m3u8", 60));
    }
    for (id, name, _) in &streams {
        let source = format!(
            "media location=http://127.0.0.1:{}/{name} retry=0 ! boxes format=synthetic",
            peer.port
        );
        assert_eq!(s.add(&source, Some(*id)).status, 201);
    }
    for (id, name, _) in &streams {
        let e = until_over(&s, *id, Duration::from_secs(40));
        assert_eq!(e["state"], "ended", "{name}: {e}\n{}", s.log());
    }
    let requests = peer.requests();
    let (status, report, log) = s.stop();
    assert_eq!(status.code(), Some(143), "{status:?}\n{log}");
    let rows = report["streams"].as_array().unwrap();
    for (id, name, least) in &streams {
        let processed = rows
            .iter()
            .find(|r| r["stream"] == *id)
            .and_then(|r| r["processed"].as_u64());
        assert!(processed >= Some(*least), "{name}: {processed:?}\n{report}");
    }
    // Every request came through the relay: its head ends as the relay ends it (the server's
    // own Host, uncompressed, one request per connection).
    let tail = format!(
        "\r\nHost: 127.0.0.1:{}\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n",
        peer.port
    );
    assert!(!requests.is_empty());
    for r in &requests {
        assert!(r.ends_with(&tail), "{r}");
    }
    if hls {
        assert!(
            requests.iter().any(|r| r.starts_with("GET /seg00000.ts ")),
            "{requests:?}"
        );
        assert!(
            requests.iter().any(|r| r.starts_with("GET /live.m3u8 ")),
            "{requests:?}"
        );
    }
}
