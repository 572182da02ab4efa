//! Live streams start on a warm pipeline: the paced sources' first frames go through the whole
//! pipeline at once, and their clocks start when every one has reached the end, so a stage's
//! slow first call (buffers grown, kernels loaded: on 4 GPUs half a second) is over before any
//! frame is due.

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use octopipe::appinfer::Labels;
use octopipe::Pipeline;

/// Two live test streams of 20 frames into one batch stage and an application's model.
const DESC: &str = "testsrc width=64 height=48 num-buffers=20 live=true ! boxes format=synthetic count=2 ! b.
                    testsrc width=64 height=48 num-buffers=20 live=true ! boxes format=synthetic count=2
                    ! batch name=b max-frames=2 ! preprocess size=16x16 ! appinfer labels=a,b ! appsink";

/// The application's first answer waits this long (a stage's first call).
const FIRST_CALL: Duration = Duration::from_millis(400);

#[test]
fn a_slow_first_call_is_over_before_the_live_clocks_start() {
    let _serial = crate::common::serial();
    let mut p = Pipeline::from_description(DESC, &HashMap::new()).expect("description");
    let infer = p.app_infer(None).expect("appinfer stage");
    let batches = p.batches(1024);
    let model = thread::spawn(move || {
        let mut first = true;
        while let Ok(mut b) = infer.next_timeout(Duration::from_secs(30)) {
            if std::mem::take(&mut first) {
                thread::sleep(FIRST_CALL);
            }
            let rows = b.rows.len();
            let _ = b.reply.send(Labels::Ids {
                ids: vec![0; rows],
                scores: None,
            });
        }
    });
    let outcome = p.run();
    drop(model);
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.report.processed, 40);
    assert_eq!(
        outcome.report.dropped_total(),
        0,
        "{:?}",
        outcome.report.dropped
    );
    // (stream, frame) -> (arrival, end)
    let mut times: HashMap<(u32, u64), (Instant, Instant)> = HashMap::new();
    for b in batches.try_iter() {
        for f in &b.frames {
            let end = f.times.marks().last().expect("marks").1;
            times.insert((f.stream, f.seq), (f.times.arrival, end));
        }
    }
    assert_eq!(times.len(), 40);
    let first_end = (0..2).map(|s| times[&(s, 0)].1).max().unwrap();
    for s in 0..2 {
        let (arrival, end) = times[&(s, 0)];
        assert!(
            end - arrival >= FIRST_CALL,
            "stream {s}'s first frame waited out the first call"
        );
        // The clocks started once both first frames were through.
        assert!(
            times[&(s, 1)].0 >= first_end,
            "stream {s}'s second frame was due before the first frames reached the end"
        );
        for k in 1..20 {
            let (arrival, end) = times[&(s, k)];
            assert!(
                end - arrival < Duration::from_millis(100),
                "stream {s} frame {k}: {:?} late",
                end - arrival
            );
        }
    }
}
