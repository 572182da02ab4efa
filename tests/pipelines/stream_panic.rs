//! A panic in a thread of a stream added while running fails that stream, not the run (issue
//! 38): a stage of the test's own (`boom`) panics on a stream's third frame; the stream is
//! `failed` naming the stage, and the stream beside it keeps running.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use octopipe::frame::Frame;
use octopipe::pipeline::{RemoveMode, StreamState};
use octopipe::stage::{Element, Item, OpenContext, Registry, Role, Running, Stage, StageDecl};
use octopipe::Builtin;
use octopipe::{describe, Error, Pipeline};

#[derive(Debug)]
struct Boom;

struct Booming(u64);

impl Stage<Frame, Frame> for Booming {
    fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        self.0 += 1;
        assert!(self.0 < 3, "boom: a bug on the third frame");
        out.push(frame);
        Ok(())
    }
}

impl Element for Boom {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::stage(Box::new(Booming(0))))
    }
}

const BOOM: StageDecl = StageDecl {
    name: "boom",
    role: Role::Filter(Item::FRAMES),
    doc: "panics on the third frame",
    props: &[],
    needs: &[],
    provides: &[],
    make: |_| Ok(Box::new(Boom)),
};

#[test]
fn a_panic_in_a_streams_thread_fails_that_stream_alone() {
    let _one = common::serial();
    let mut registry = Registry::builtin();
    registry.register(BOOM);
    let desc = describe::parse("<test>", "batch max-frames=1 ! appsink", &HashMap::new()).unwrap();
    let graph = describe::build_open(&desc, &registry).unwrap();
    let mut pipeline = Pipeline::build(graph).unwrap();
    let streams = pipeline.streams(&registry).unwrap();
    let _objects = pipeline.results(1_000_000);
    let running = std::thread::spawn(move || pipeline.run());
    let source = "testsrc width=64 height=48 live=true framerate=30 num-buffers=100000 \
                  ! boxes format=synthetic count=1";
    streams.add_text(source, Some(0)).unwrap();
    streams
        .add_text(&format!("{source} ! boom"), Some(1))
        .unwrap();
    let state = |id: u32| streams.list().into_iter().find(|s| s.id == id).unwrap();
    let start = Instant::now();
    while state(1).state != StreamState::Failed {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{:?}",
            streams.list()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let failed = state(1);
    assert!(
        failed
            .error
            .as_deref()
            .unwrap_or("")
            .contains("stage 'boom' panicked"),
        "{failed:?}"
    );
    // The healthy stream goes on, gaining frames.
    let before = state(0).frames_in;
    std::thread::sleep(Duration::from_millis(500));
    let healthy = state(0);
    assert_eq!(healthy.state, StreamState::Running, "{healthy:?}");
    assert!(healthy.frames_in > before, "{before} -> {healthy:?}");
    streams.remove(0, RemoveMode::Drain).unwrap();
    streams.close();
    let outcome = running.join().unwrap();
    assert!(
        outcome
            .error
            .as_ref()
            .is_none_or(|e| e.to_string().contains("boom")),
        "{:?}",
        outcome.error
    );
}
