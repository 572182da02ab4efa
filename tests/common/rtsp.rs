//! RTSP servers inside the test process on 127.0.0.1: a real one (gstreamer-rtsp-server, a
//! dev-dependency) serving a live H.264 test stream, stopped and started again by the test;
//! and hostile ones ([`EndlessHeaders`], [`Hostile`] with the test's own answers), bounded in
//! time and connections.

use gstreamer as gst;

/// An RTSP server on 127.0.0.1:`port` serving a live H.264 test stream at `/test`, on a GLib
/// main loop of its own.
pub struct RtspServer {
    context: gst::glib::MainContext,
    main_loop: gst::glib::MainLoop,
    server: gstreamer_rtsp_server::RTSPServer,
    source: Option<gst::glib::SourceId>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RtspServer {
    pub fn start(port: u16) -> RtspServer {
        use gstreamer_rtsp_server::prelude::*;
        gst::init().unwrap();
        let context = gst::glib::MainContext::new();
        let server = gstreamer_rtsp_server::RTSPServer::new();
        server.set_address("127.0.0.1");
        server.set_service(&port.to_string());
        let factory = gstreamer_rtsp_server::RTSPMediaFactory::new();
        factory.set_launch(
            "( videotestsrc is-live=true pattern=ball ! video/x-raw,width=160,height=120,framerate=30/1 \
             ! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=10 \
             ! rtph264pay name=pay0 pt=96 config-interval=1 )",
        );
        factory.set_shared(true);
        server.mount_points().unwrap().add_factory("/test", factory);
        let source = server.attach(Some(&context)).unwrap();
        let main_loop = gst::glib::MainLoop::new(Some(&context), false);
        let running = main_loop.clone();
        let thread = std::thread::spawn(move || running.run());
        RtspServer {
            context,
            main_loop,
            server,
            source: Some(source),
            thread: Some(thread),
        }
    }

    /// Close every client connection and the listening socket.
    pub fn stop(mut self) {
        self.close();
    }

    fn close(&mut self) {
        use gstreamer_rtsp_server::prelude::*;
        self.server.client_filter(Some(&mut |_, _| {
            gstreamer_rtsp_server::RTSPFilterResult::Remove
        }));
        if let Some(source) = self
            .source
            .take()
            .and_then(|id| self.context.find_source_by_id(&id))
        {
            source.destroy();
        }
        self.main_loop.quit();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for RtspServer {
    fn drop(&mut self) {
        self.close();
    }
}

/// A hostile RTSP "server" on 127.0.0.1: it answers every request with `RTSP/1.0 200 OK` and
/// then header lines without end (1 KiB each, as fast as the client reads), so a client that
/// reads headers without a limit never gets to the end of the answer. Each connection is fed at
/// most `budget` bytes; it stops when dropped.
pub struct EndlessHeaders {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EndlessHeaders {
    pub fn start(budget: usize) -> EndlessHeaders {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut feeders = Vec::new();
            while !stopped.load(Ordering::SeqCst) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                };
                let stopped = stopped.clone();
                feeders.push(std::thread::spawn(move || {
                    let _ = conn.set_nonblocking(false);
                    let limit = Some(std::time::Duration::from_millis(200));
                    let _ = conn.set_read_timeout(limit);
                    let _ = conn.set_write_timeout(limit);
                    // The request's head (bounded).
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match conn.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                            Err(_) if stopped.load(Ordering::SeqCst) => return,
                            Err(_) => {}
                        }
                    }
                    let cseq = String::from_utf8_lossy(&head)
                        .lines()
                        .find_map(|l| l.strip_prefix("CSeq:").map(|v| v.trim().to_string()))
                        .unwrap_or_else(|| "1".into());
                    let mut sent = 0;
                    let start = format!("RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\n");
                    if conn.write_all(start.as_bytes()).is_err() {
                        return;
                    }
                    let mut k = 0u64;
                    while sent < budget && !stopped.load(Ordering::SeqCst) {
                        let line = format!("X-Pad-{k}: {}\r\n", "a".repeat(1000));
                        k += 1;
                        match conn.write(line.as_bytes()) {
                            Ok(n) => sent += n,
                            Err(e)
                                if e.kind() == std::io::ErrorKind::WouldBlock
                                    || e.kind() == std::io::ErrorKind::TimedOut => {}
                            Err(_) => return,
                        }
                    }
                }));
            }
            for f in feeders {
                let _ = f.join();
            }
        });
        EndlessHeaders {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EndlessHeaders {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A hostile RTSP server on 127.0.0.1: each connection's requests are answered by `answer`
/// (called with the request's CSeq and method, given the connection to write on) until it
/// returns false; every connection ends within `limit`, all when dropped.
pub struct Hostile {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub type Answer = fn(&mut std::net::TcpStream, &str, &str, std::time::Instant) -> bool;

impl Hostile {
    pub fn start(answer: Answer, limit: std::time::Duration) -> Hostile {
        use std::io::Read;
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !stopped.load(Ordering::SeqCst) && conns.len() < 256 {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                };
                let stopped = stopped.clone();
                conns.push(std::thread::spawn(move || {
                    let start = std::time::Instant::now();
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.set_read_timeout(Some(std::time::Duration::from_millis(200)));
                    let _ = conn.set_write_timeout(Some(std::time::Duration::from_secs(1)));
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !stopped.load(Ordering::SeqCst) && start.elapsed() < limit {
                        match conn.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                            Err(_) => continue,
                        }
                        let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                            if head.len() > 65536 {
                                return;
                            }
                            continue;
                        };
                        let text = String::from_utf8_lossy(&head[..end]).into_owned();
                        head.drain(..end + 4);
                        let method = text.split_whitespace().next().unwrap_or("").to_string();
                        let cseq = text
                            .lines()
                            .find_map(|l| l.strip_prefix("CSeq:").map(|v| v.trim().to_string()))
                            .unwrap_or_else(|| "1".into());
                        let deadline = start + limit;
                        if stopped.load(Ordering::SeqCst)
                            || !answer(&mut conn, &cseq, &method, deadline)
                        {
                            return;
                        }
                    }
                }));
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Hostile {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
