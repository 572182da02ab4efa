//! Graceful shutdown: SIGTERM or SIGINT stops the sources, drains what is in flight, flushes the
//! sink (the JSONL ends with a complete line), prints the report and exits 143 or 130.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
