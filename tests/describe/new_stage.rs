//! A stage defined here, in the test file alone, registered with one line, run in a description:
//! it shows in the report, in `inspect` and in the metrics like a built-in stage.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use octopipe::frame::Frame;
use octopipe::observe::MetricsServer;
use octopipe::stage::{
    Element, Item, OpenContext, PropSpec, PropType, Registry, Role, Running, Stage, StageDecl,
};
use octopipe::Builtin;
use octopipe::{Error, Pipeline};

/// The settings of `count`: note every N-th frame in the report (never by default).
#[derive(Debug)]
struct Count {
    every: u64,
}

/// The running stage: counts frames and passes them on, noting each `every`-th in the report.
struct Counting {
    seen: u64,
    every: u64,
    tally: octopipe::budget::Tally,
}

impl Stage<Frame, Frame> for Counting {
    fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.seen += 1;
        if self.every > 0 && self.seen.is_multiple_of(self.every) {
            self.tally.with(|t| t.note("count checkpoints", 1));
        }
        out.push(frame);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Frame>) -> Result<(), Error> {
        let seen = self.seen;
        self.tally
            .with(|t| t.add_line(format!("count: {seen} frames")));
        Ok(())
    }
}

impl Element for Count {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::stage(Box::new(Counting {
            seen: 0,
            every: self.every,
            tally: ctx.tally.clone(),
        })))
    }
}

const COUNT: StageDecl = StageDecl {
    name: "count",
    role: Role::Filter(Item::FRAMES),
    doc: "counts the frames passing by",
    props: &[PropSpec::new(
        "every",
        PropType::COUNT,
        "0",
        "note every N-th frame in the report (0: never)",
    )],
    needs: &[],
    provides: &[],
    make: |p| {
        Ok(Box::new(Count {
            every: p.int("every").unwrap_or(0) as u64,
        }))
    },
};

fn registry() -> Registry {
    let mut r = Registry::builtin();
    r.register(COUNT);
    r
}

fn get_metrics(addr: std::net::SocketAddr) -> String {
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(conn, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn a_stage_defined_in_a_test_runs_and_shows_in_report_inspect_and_metrics() {
    if !common::ort_ready() {
        return;
    }
    let registry = registry();
    // inspect: listed with its role, and its properties.
    let list = registry.inspect(None).unwrap();
    assert!(
        list.lines().any(|l| l.starts_with("count")
            && l.contains("filter")
            && l.contains("counts the frames")),
        "{list}"
    );
    let one = registry.inspect(Some("count")).unwrap();
    assert!(one.contains("every") && one.contains("int"), "{one}");

    // A description using it between the boxes and the batch.
    let dir = common::temp_dir("new-stage");
    let out = dir.join("o.jsonl");
    let model = common::root().join("tests/data/models/valid-64.onnx");
    let text = format!(
        "testsrc width=160 height=120 num-buffers=24 ! boxes format=synthetic count=3 \
         ! count every=10 ! classify model={} ! jsonl location={}",
        model.display(),
        out.display()
    );
    let desc = octopipe::describe::parse("<test>", &text, &Default::default()).unwrap();
    let graph = octopipe::describe::build_with(&desc, &registry).unwrap();
    let kinds: Vec<&str> = graph.nodes.iter().map(|n| n.kind).collect();
    assert_eq!(
        kinds,
        [
            "testsrc",
            "boxes",
            "count",
            "batch",
            "preprocess",
            "classify",
            "jsonl"
        ]
    );
    let mut pipeline = Pipeline::build(graph).unwrap();
    assert!(pipeline.stage_names().iter().any(|s| s == "count"));
    let server = MetricsServer::serve("127.0.0.1:0").unwrap();
    pipeline.observe(server.observer());
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);

    // The report: its own row between boxes and batch, and its notes.
    let r = &outcome.report;
    let rows: Vec<&str> = r.stages.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        rows,
        [
            "decode",
            "boxes",
            "count",
            "batch",
            "preprocess",
            "classify",
            "sink"
        ],
        "{r}"
    );
    let count = &r.stages[2].1;
    assert_eq!(count.count, 24, "every frame timed through the stage");
    assert!(r.extra.iter().any(|l| l == "count: 24 frames"), "{r}");
    assert!(
        r.actions
            .iter()
            .any(|(a, n)| a == "count checkpoints" && *n == 2),
        "{r}"
    );
    assert!(r.to_string().contains("count "), "{r}");
    assert_eq!(common::read_jsonl(&out).len(), 24 * 3);

    // The metrics: a latency histogram of its own.
    let metrics = get_metrics(server.local_addr());
    assert!(
        metrics.contains("octopipe_stage_latency_seconds_count{stream=\"0\",stage=\"count\"} 24"),
        "{metrics}"
    );
}

#[test]
fn the_new_stage_is_checked_like_a_built_in_one() {
    let registry = registry();
    let build = |text: &str| {
        let desc = octopipe::describe::parse("<test>", text, &Default::default()).unwrap();
        octopipe::describe::build_with(&desc, &registry).map(|_| ())
    };
    let e = build("testsrc ! boxes format=synthetic ! count evry=3 ! classify model=m.onnx ! jsonl location=o")
        .unwrap_err();
    assert_eq!(
        e.message,
        "stage 'count' has no property 'evry' (did you mean 'every'?)"
    );
    let e = build("testsrc ! boxes format=synthetic ! count every=-1 ! classify model=m.onnx ! jsonl location=o")
        .unwrap_err();
    assert_eq!(
        e.message,
        "count: every must be a non-negative integer, found '-1'"
    );
    // A frame filter cannot take batches.
    let e = build(
        "testsrc ! boxes format=synthetic ! classify model=m.onnx ! count ! jsonl location=o",
    )
    .unwrap_err();
    assert!(
        e.message.starts_with("stage 'count' cannot come here"),
        "{}",
        e.message
    );
    // Without the registration line it is an unknown stage.
    let desc = octopipe::describe::parse(
        "<test>",
        "testsrc ! boxes format=synthetic ! count ! classify model=m.onnx ! jsonl location=o",
        &Default::default(),
    )
    .unwrap();
    let e = octopipe::describe::build(&desc).unwrap_err();
    assert!(e.message.contains("unknown stage 'count'"), "{}", e.message);
}
