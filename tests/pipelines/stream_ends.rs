//! Every stream ends (issue 38): a removed stream counts toward the most streams at once until
//! its threads ended, and one whose threads do not end is detached at the remove deadline, the
//! report saying so. Bounded: every wait has its limit.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use octopipe::pipeline::{RemoveMode, StreamState, Streams};
use octopipe::stage::Registry;
use octopipe::{describe, Builtin, Pipeline};

fn state(streams: &Streams, id: u32) -> StreamState {
    let list = streams.list();
    list.iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no stream {id}: {list:?}"))
        .state
}

#[test]
fn a_removed_stream_counts_until_it_ended_or_was_detached() {
    let _one = common::serial();
    let desc = describe::parse("<t>", "batch max-frames=1 ! appsink", &HashMap::new()).unwrap();
    let graph = describe::build_open(&desc, &Registry::builtin()).unwrap();
    let mut pipeline = Pipeline::build(graph).unwrap();
    let streams = pipeline.streams(&Registry::builtin()).unwrap();
    // Nobody reads the results yet: the pipeline backs up to the stream's edges, so a removed
    // stream's threads cannot end (as with a source that does not let go).
    let objects = pipeline.results(1);
    let running = std::thread::spawn(move || pipeline.run());
    streams.set_max_streams(1);
    streams.set_remove_deadline(Duration::from_secs(2));
    let file = "testsrc width=64 height=48 num-buffers=100000 ! boxes format=synthetic count=1";
    streams.add_text(file, Some(1)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    streams.remove(1, RemoveMode::Drain).unwrap();
    let removed = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(state(&streams, 1), StreamState::Removing);
    // Being removed, it still counts.
    let e = streams
        .add_text(file, Some(2))
        .err()
        .expect("over --max-streams");
    assert!(e.to_string().contains("at most 1"), "{e}");
    // At the deadline it is detached: removed, what it gives dropped.
    while state(&streams, 1) != StreamState::Removed {
        assert!(
            removed.elapsed() < Duration::from_secs(6),
            "{:?}",
            streams.list()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(removed.elapsed() >= Duration::from_secs(2));
    // It counts until its threads end (its edges drop what comes now, so they do).
    let short = "testsrc width=64 height=48 num-buffers=3 ! boxes format=synthetic count=1";
    while let Err(e) = streams.add_text(short, Some(2)) {
        assert!(e.to_string().contains("at most 1"), "{e}");
        assert!(removed.elapsed() < Duration::from_secs(10), "{e}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the pipeline go: everything ends.
    let reader = std::thread::spawn(move || objects.iter().count());
    streams.close();
    let outcome = running.join().unwrap();
    let _ = reader.join();
    let report = outcome.report.to_string();
    assert!(
        report.contains("stream 1:") && report.contains("detached"),
        "{report}"
    );
}
