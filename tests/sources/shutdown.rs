//! Shutdown: SIGTERM or SIGINT is acknowledged at once, stops the sources, drains what is in
//! flight for at most the stop grace (1 s), flushes the sink (the JSONL ends with a complete
//! line), prints the report and exits 143 or 130; work still in flight then is dropped and
//! counted (`in flight at stop`), whatever blocks it. A second signal prints the report so far
//! and exits at once.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use octopipe::batch::CropBatch;
use octopipe::pipeline::IN_FLIGHT_AT_STOP;
use octopipe::stage::{Element, Item, OpenContext, Registry, Role, Running, Stage, StageDecl};
use octopipe::Builtin;
use octopipe::{Error, Pipeline};

/// Start a long live run writing to `out`, wait until objects are written, send `signal`, and
/// return (exit code, stderr).
fn stop_with(signal: &str, out: &Path) -> (Option<i32>, String) {
    let model = common::root().join("tests/data/models/valid-64.onnx");
    let text = format!(
        "testsrc width=320 height=240 num-buffers=100000 live=true ! boxes format=synthetic count=8 \
         ! classify model={} ! jsonl location={}",
        model.display(),
        out.display()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .args(["run", &text])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let start = Instant::now();
    while std::fs::metadata(out).map(|m| m.len()).unwrap_or(0) == 0 {
        if start.elapsed() > Duration::from_secs(20) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no output after 20 s:\n{}", reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(700));
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let sent_at = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent_at.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "still running 30 s after SIG{signal}: killed\n{}",
                reader.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        sent_at.elapsed() < Duration::from_secs(5),
        "stopping took {:?}",
        sent_at.elapsed()
    );
    (status.code(), reader.join().unwrap())
}

fn check_stopped(code: Option<i32>, want: i32, name: &str, stderr: &str, out: &Path) {
    assert_eq!(code, Some(want), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&format!("octopipe: {name}: stopping (again to exit now)")),
        "acknowledged: {stderr}"
    );
    assert!(
        stderr.contains(&format!("octopipe: stopped by {name}")),
        "{stderr}"
    );
    assert!(
        stderr.contains("budget 33.3 ms/frame"),
        "report printed: {stderr}"
    );
    let (frames_in, processed, dropped) = common::frame_accounting(stderr);
    assert_eq!(frames_in, processed + dropped, "{stderr}");
    assert!(frames_in > 10 && frames_in < 100_000, "{stderr}");
    let (objects_in, classified, skipped) = common::object_accounting(stderr);
    assert_eq!(objects_in, classified + skipped, "{stderr}");
    // Every line complete JSON, the file ends with a newline, one line per classified object.
    let text = std::fs::read_to_string(out).unwrap();
    assert!(
        text.ends_with('\n'),
        "last line cut: {:?}",
        text.lines().last()
    );
    let objects = common::read_jsonl(out);
    assert_eq!(objects.len() as u64, classified, "{stderr}");
}

#[test]
fn sigterm_drains_flushes_reports_and_exits_143() {
    if !common::ort_ready() {
        return;
    }
    let out = common::temp_dir("sigterm").join("objects.jsonl");
    let (code, stderr) = stop_with("TERM", &out);
    check_stopped(code, 143, "SIGTERM", &stderr, &out);
}

#[test]
fn sigint_drains_flushes_reports_and_exits_130() {
    if !common::ort_ready() {
        return;
    }
    let out = common::temp_dir("sigint").join("objects.jsonl");
    let (code, stderr) = stop_with("INT", &out);
    check_stopped(code, 130, "SIGINT", &stderr, &out);
}

/// `octopipe run TEXT` with stdout a pipe that is never read (a stalled reader) and stderr read
/// on a thread.
fn spawn_with_stalled_stdout(text: &str) -> (Child, JoinHandle<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_octopipe"))
        .args(["run", text])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    (child, reader)
}

/// Wait until `child`'s unread stdout pipe is three quarters full (a slow start on a loaded machine
/// included; at most 30 s), then half a second more, so that its sink is blocked in a write.
fn wait_for_a_full_pipe(child: &Child) {
    use std::os::fd::AsRawFd;
    let fd = child.stdout.as_ref().expect("piped stdout").as_raw_fd();
    let start = Instant::now();
    loop {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int, the bytes waiting in the pipe `fd` (open: the child's
        // stdout, held by `child`).
        let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) };
        assert_eq!(rc, 0, "FIONREAD on the child's stdout");
        if queued >= 48 * 1024 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the pipe holds {queued} bytes after 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
}

/// Send `signal` to `child`.
fn signal(child: &Child, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Wait at most `limit` for `child` to exit (killed and failed otherwise); (exit code, time).
fn exit_within(
    child: &mut Child,
    limit: Duration,
    stderr: JoinHandle<String>,
) -> (Option<i32>, Duration, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            // The stdout pipe still holds unread output: dropping it lets nothing block.
            drop(child.stdout.take());
            return (status.code(), start.elapsed(), stderr.join().unwrap());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            drop(child.stdout.take());
            panic!(
                "still running {limit:?} after the signal: killed\n{}",
                stderr.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Boxes written to stdout as fast as a live source makes them: the pipe fills in well under a
/// second when nobody reads it, and the sink blocks in the middle of a batch.
const TO_STDOUT: &str = "testsrc width=320 height=240 num-buffers=100000 live=true \
    ! boxes format=synthetic count=50 ! jsonl location=-";

#[test]
fn sigterm_with_a_stalled_stdout_reader_exits_within_2_s() {
    let (mut child, stderr) = spawn_with_stalled_stdout(TO_STDOUT);
    wait_for_a_full_pipe(&child);
    signal(&child, "TERM");
    let (code, took, stderr) = exit_within(&mut child, Duration::from_secs(10), stderr);
    assert!(
        took < Duration::from_secs(2),
        "exit took {took:?}\n{stderr}"
    );
    assert_eq!(code, Some(143), "{stderr}");
    assert!(
        stderr.contains("octopipe: SIGTERM: stopping (again to exit now)"),
        "{stderr}"
    );
    assert!(stderr.contains("octopipe: stopped by SIGTERM"), "{stderr}");
    assert!(
        stderr.contains("stopped: did not wait for jsonl (still busy 1.0 s after the stop)"),
        "{stderr}"
    );
    let (frames_in, processed, dropped) = common::frame_accounting(&stderr);
    assert_eq!(frames_in, processed + dropped, "{stderr}");
    assert!(stderr.contains("in flight at stop: "), "{stderr}");
}

#[test]
fn a_second_signal_prints_the_report_so_far_and_exits_at_once() {
    let (mut child, stderr) = spawn_with_stalled_stdout(TO_STDOUT);
    wait_for_a_full_pipe(&child);
    signal(&child, "TERM");
    // Within the stop grace, while the sink is still blocked.
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, "TERM");
    let (code, took, stderr) = exit_within(&mut child, Duration::from_secs(10), stderr);
    assert!(
        took < Duration::from_millis(1500),
        "exit took {took:?}\n{stderr}"
    );
    assert_eq!(code, Some(143), "{stderr}");
    assert!(
        stderr.contains("octopipe: second SIGTERM: exiting now"),
        "{stderr}"
    );
    assert!(
        stderr.contains("budget 33.3 ms/frame"),
        "report so far: {stderr}"
    );
    let (frames_in, processed, dropped) = common::frame_accounting(&stderr);
    assert_eq!(frames_in, processed + dropped, "{stderr}");
    assert!(frames_in > 0, "{stderr}");
}

/// Set when a `busy` stage has started on its first batch.
static BUSY_STARTED: AtomicBool = AtomicBool::new(false);

/// `busy`: takes 30 s over each batch and cannot be interrupted (a huge batch in a model).
#[derive(Debug)]
struct Busy;

struct BusyStage;

impl Stage<CropBatch, CropBatch> for BusyStage {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        BUSY_STARTED.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(30));
        out.push(batch);
        Ok(())
    }
}

impl Element for Busy {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::stage(Box::new(BusyStage)))
    }
}

const BUSY: StageDecl = StageDecl {
    name: "busy",
    role: Role::Filter(Item::BATCHES),
    doc: "takes 30 s over each batch",
    props: &[],
    needs: &[],
    provides: &[],
    make: |_| Ok(Box::new(Busy)),
};

#[test]
fn a_stage_busy_in_its_work_does_not_hold_up_a_stop() {
    let mut registry = Registry::builtin();
    registry.register(BUSY);
    let text = "testsrc width=160 height=120 num-buffers=100000 live=true \
                ! boxes format=synthetic count=4 ! busy ! appsink";
    let desc = octopipe::describe::parse("<test>", text, &Default::default()).unwrap();
    let pipeline =
        Pipeline::build(octopipe::describe::build_with(&desc, &registry).unwrap()).unwrap();
    let stop = pipeline.stop_handle();
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(pipeline.run());
    });
    let start = Instant::now();
    while !BUSY_STARTED.load(Ordering::SeqCst) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no batch reached busy"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let stopped = Instant::now();
    stop.stop();
    let outcome = outcome
        .recv_timeout(Duration::from_secs(5))
        .expect("the run ends though a stage is busy for 30 s");
    assert!(
        stopped.elapsed() < Duration::from_millis(1800),
        "{:?}",
        stopped.elapsed()
    );
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.abandoned, ["busy"]);
    let r = &outcome.report;
    assert_eq!(r.frames_in, r.processed + r.dropped_total(), "{r}");
    let in_flight = r
        .dropped
        .iter()
        .find(|(reason, _)| reason == IN_FLIGHT_AT_STOP)
        .map_or(0, |(_, n)| *n);
    assert!(in_flight >= 1, "{r}");
    assert!(
        r.to_string()
            .contains("stopped: did not wait for busy (still busy 1.0 s after the stop)"),
        "{r}"
    );
}
