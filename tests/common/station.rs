//! A ground station for the tests: an `octopipe run --streams` process on a free loopback port,
//! its stderr in a log file and its report (JSON) in a file, and raw HTTP requests to it (any
//! header, any method), so attacks are written as an attacker sends them. Loopback only.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// An HTTP answer: status code, head, body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    /// The body as JSON (panics showing it when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    /// The `error` of a JSON error body.
    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// A header's value (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// Send `request` (bytes as written) to `addr` and read the answer until the server closes,
/// waiting at most `limit` for it; `None` when nothing (or no HTTP) came back.
pub fn raw(addr: SocketAddr, request: &[u8], limit: Duration) -> Option<Reply> {
    // A server may close while a large request is still being written: read what it said.
    exchange(
        TcpStream::connect_timeout(&addr, limit).ok()?,
        request,
        limit,
    )
}

/// A connection to `addr` from the loopback address `from` (127.0.0.2, ...): another client
/// as the station counts them.
pub fn connect_from(from: std::net::Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(to) = addr else {
        return Err(std::io::Error::other("IPv4 only"));
    };
    let sockaddr = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a new socket of ours, bound and connected with addresses that live on this
    // stack frame; the TcpStream takes over the descriptor (and closes it).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let local = sockaddr(from, 0);
        if libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let remote = sockaddr(*to.ip(), to.port());
        if libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// Send `request` on `conn` and read the answer until the server closes (at most `limit`).
pub fn exchange(mut conn: TcpStream, request: &[u8], limit: Duration) -> Option<Reply> {
    conn.set_read_timeout(Some(limit)).ok()?;
    conn.set_write_timeout(Some(limit)).ok()?;
    // A server that refuses a request part-way (a head over its bound) answers and closes while
    // the rest is still being written: the write fails, and what it said is there to read.
    let _ = conn.write_all(request);
    let mut bytes = Vec::new();
    let _ = conn.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(Reply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

/// A process's resident memory (kB), threads and open file descriptors, from /proc.
pub fn usage(pid: u32) -> (u64, u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name));
        line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    (field("VmRSS:"), field("Threads:"), fds)
}

/// A field of a process's /proc status in kB (`VmPeak:`, `VmSize:`); 0 where it is not there.
pub fn status_kb(pid: u32, name: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(name));
    line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// A `octopipe run --streams` process of the test's.
pub struct Station {
    pub child: Child,
    pub addr: SocketAddr,
    pub report: PathBuf,
    pub log: PathBuf,
    /// Sent as `Authorization: Bearer TOKEN` by the helpers below.
    pub token: Option<String>,
}

impl Station {
    /// Start `octopipe run PIPELINE --streams --metrics-addr 127.0.0.1:PORT` with `args` and
    /// `env`, its files in `dir` (named after `name`); returns once it answers `/health`.
    pub fn start(
        name: &str,
        dir: &Path,
        pipeline: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_capped(name, dir, pipeline, args, env, None)
    }

    /// [`Station::start`], under an address-space cap of `cap_kb` KiB where given (`ulimit -v`,
    /// set by a shell that then becomes the station: the child's id is the station's).
    pub fn start_capped(
        name: &str,
        dir: &Path,
        pipeline: &str,
        args: &[&str],
        env: &[(&str, &str)],
        cap_kb: Option<u64>,
    ) -> Self {
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let report = dir.join(format!("{name}-report.json"));
        let log = dir.join(format!("{name}.log"));
        let program = env!("CARGO_BIN_EXE_octopipe");
        let mut command = match cap_kb {
            Some(kb) => {
                let mut c = Command::new("bash");
                c.args([
                    "-c",
                    &format!("ulimit -v {kb}; exec \"$0\" \"$@\""),
                    program,
                ]);
                c
            }
            None => Command::new(program),
        };
        let child = command
            .args(["run", pipeline, "--streams", "--progress", "off"])
            .args(["--metrics-addr", &addr.to_string(), "--report", "json"])
            .arg("--report-file")
            .arg(&report)
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let token = env
            .iter()
            .find(|(k, _)| *k == "OCTOPIPE_API_TOKEN")
            .map(|(_, v)| v.to_string());
        let mut station = Station {
            child,
            addr,
            report,
            log,
            token,
        };
        let start = Instant::now();
        loop {
            if station.get("/health").is_some_and(|r| r.status == 200) {
                return station;
            }
            if let Some(status) = station.child.try_wait().unwrap() {
                panic!("station {name} exited ({status}):\n{}", station.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "station {name} never answered /health:\n{}",
                station.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A request from a well-behaved client: `Host` naming the address, the token (if any),
    /// `Content-Type: application/json` with a body.
    pub fn request(&self, method: &str, path: &str, body: &str) -> Option<Reply> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        if let Some(token) = &self.token {
            head += &format!("Authorization: Bearer {token}\r\n");
        }
        if !body.is_empty() {
            head += "Content-Type: application/json\r\n";
        }
        let request = format!("{head}Content-Length: {}\r\n\r\n{body}", body.len());
        raw(self.addr, request.as_bytes(), Duration::from_secs(10))
    }

    pub fn get(&self, path: &str) -> Option<Reply> {
        self.request("GET", path, "")
    }

    /// `POST /streams` of `{"source": SOURCE}` (and `id`).
    pub fn add(&self, source: &str, id: Option<u32>) -> Reply {
        let mut body = serde_json::json!({ "source": source });
        if let Some(id) = id {
            body["id"] = id.into();
        }
        self.request("POST", "/streams", &body.to_string())
            .expect("an answer to POST /streams")
    }

    /// `GET /streams` as JSON.
    pub fn streams(&self) -> Vec<serde_json::Value> {
        let reply = self.get("/streams").expect("an answer to GET /streams");
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.json().as_array().unwrap().clone()
    }

    /// Stream `id` as `GET /streams` lists it.
    pub fn stream(&self, id: u32) -> serde_json::Value {
        let list = self.streams();
        let found = list.iter().find(|s| s["id"] == id);
        found
            .unwrap_or_else(|| panic!("no stream {id} in {list:?}"))
            .clone()
    }

    /// Wait (at most `limit`) until stream `id`'s entry is `done`; returns it. The failure says
    /// the stream is still `what` (after the limit) with its entry and the station's log.
    pub fn wait_until(
        &self,
        id: u32,
        limit: Duration,
        what: &str,
        mut done: impl FnMut(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let start = Instant::now();
        loop {
            let s = self.stream(id);
            if done(&s) {
                return s;
            }
            assert!(
                start.elapsed() < limit,
                "stream {id} {what} after {limit:?}: {s}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait (at most `limit`) until stream `id` is in `state`; returns its entry.
    pub fn wait_state(&self, id: u32, state: &str, limit: Duration) -> serde_json::Value {
        self.wait_until(id, limit, &format!("not {state}"), |s| s["state"] == state)
    }

    /// Wait (at most `limit`) until stream `id` has taken in at least `frames` frames; returns
    /// its entry.
    pub fn wait_frames(&self, id: u32, frames: u64, limit: Duration) -> serde_json::Value {
        let what = format!("took in fewer than {frames} frames");
        self.wait_until(id, limit, &what, |s| {
            s["frames_in"].as_u64().unwrap_or(0) >= frames
        })
    }

    /// What it wrote on stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stop it as a service manager does (SIGTERM); its exit status, report (JSON) and log.
    pub fn stop(mut self) -> (ExitStatus, serde_json::Value, String) {
        // SAFETY: a signal to our own child process.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the station did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = std::fs::read_to_string(&self.report).unwrap_or_default();
        let report = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("report ({e}): {text}\n{}", self.log()));
        (status, report, self.log())
    }
}

impl Drop for Station {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
