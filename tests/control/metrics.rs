//! The Prometheus endpoint, scraped over loopback during and after a real run.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use octopipe::describe;
use octopipe::observe::{MetricsServer, LATENCY_BUCKETS};
use octopipe::pipeline::Pipeline;

/// `GET path`: (status line, body).
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    common::http(addr, "GET", path, "").expect("an HTTP response")
}

/// The value of the sample `name{labels}` (labels exactly as printed).
fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in:\n{body}"))
        .parse()
        .unwrap()
}

#[test]
fn metrics_are_served_over_loopback_with_real_counts() {
    if !common::ort_ready() {
        return;
    }
    let model = common::root().join("tests/data/models/valid-64.onnx");
    let out = common::temp_dir("metrics").join("objects.jsonl");
    let text = format!(
        "testsrc width=320 height=240 num-buffers=40 framerate=60 live=true \
         ! boxes format=synthetic count=5 ! classify model={} ! jsonl location={}",
        model.display(),
        out.display()
    );
    let desc = describe::parse("<test>", &text, &Default::default()).unwrap();
    let config = describe::build(&desc).unwrap();
    let mut pipeline = Pipeline::build(config).unwrap();
    let server = MetricsServer::serve("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    pipeline.observe(server.observer());

    // Scrape while the run goes on (a live source at 60 fps: 40 frames take about 0.7 s).
    let during = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        get(addr, "/metrics")
    });
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let (status, body) = during.join().unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("# TYPE octopipe_stage_latency_seconds histogram"));

    // After the run: the counts match the report.
    let r = &outcome.report;
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(r.processed, 40);
    assert_eq!(
        sample(&body, "octopipe_frames_total{stream=\"0\"}"),
        r.processed as f64
    );
    assert_eq!(
        sample(&body, "octopipe_objects_total{stream=\"0\"}"),
        r.objects as f64
    );
    assert_eq!(
        sample(&body, "octopipe_budget_misses_total{stream=\"0\"}"),
        r.over_budget as f64
    );
    assert_eq!(sample(&body, "octopipe_running"), 0.0);
    let budget = sample(&body, "octopipe_budget_seconds");
    assert!((budget - 1.0 / 60.0).abs() < 1e-6, "budget {budget}");
    for stage in [
        "decode",
        "boxes",
        "batch",
        "preprocess",
        "classify",
        "sink",
        "end-to-end",
    ] {
        let labels = format!("stream=\"0\",stage=\"{stage}\"");
        let count = sample(
            &body,
            &format!("octopipe_stage_latency_seconds_count{{{labels}}}"),
        );
        assert_eq!(count, r.processed as f64, "{stage}");
        // Cumulative buckets never decrease and end at the count.
        let mut prev = 0.0;
        for b in LATENCY_BUCKETS {
            let n = sample(
                &body,
                &format!("octopipe_stage_latency_seconds_bucket{{{labels},le=\"{b}\"}}"),
            );
            assert!(n >= prev, "{stage} le={b}: {n} < {prev}");
            prev = n;
        }
        let inf = sample(
            &body,
            &format!("octopipe_stage_latency_seconds_bucket{{{labels},le=\"+Inf\"}}"),
        );
        assert_eq!(inf, count);
        let sum = sample(
            &body,
            &format!("octopipe_stage_latency_seconds_sum{{{labels}}}"),
        );
        assert!(sum > 0.0 && sum < 60.0, "{stage} sum {sum}");
    }
    // The end-to-end histogram agrees with the report's misses: frames above the budget cannot
    // all sit in buckets at or below it.
    let e2e_count = sample(
        &body,
        "octopipe_stage_latency_seconds_count{stream=\"0\",stage=\"end-to-end\"}",
    );
    let under_1s = sample(
        &body,
        "octopipe_stage_latency_seconds_bucket{stream=\"0\",stage=\"end-to-end\",le=\"1\"}",
    );
    assert!(under_1s <= e2e_count);
    assert!(
        outcome
            .report
            .extra
            .iter()
            .any(|l| l.contains(&addr.to_string())),
        "{:?}",
        outcome.report.extra
    );
    // Drops: after the run, the report's exact reasons (none here, so no sample lines).
    assert!(body.contains("# TYPE octopipe_frames_dropped_total counter"));
    assert_eq!(
        body.lines()
            .filter(|l| l.starts_with("octopipe_frames_dropped_total{"))
            .count() as u64,
        r.streams[0].dropped.len() as u64
    );
    let (status, _) = get(addr, "/nothing");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert!(server.scrapes() >= 2);

    // The server stops when dropped.
    drop(server);
    assert!(common::http(addr, "GET", "/metrics", "").is_none());
}
