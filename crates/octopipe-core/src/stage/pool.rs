//! A stage run by several workers ([`Running::workers`](super::Running::workers), a stage's
//! `workers=N`): each item (a batch) goes to whichever worker is free, and the items leave in the
//! order they came, so every stream's frames stay in order and the report's accounting is the
//! one-worker stage's.
//!
//! ```text
//!                        +--> worker 0 --+
//! inbox --> (k, batch) --+--> worker 1 --+--> (k, outputs) --> in order of k --> edge
//!                        +--> worker 2 --+
//! ```
//!
//! The stage's thread numbers the batches and hands them to the workers through one channel of
//! as many places as there are workers (no batch waits behind a busy worker while another is
//! free); a sequencing thread puts the outputs back in order and sends them on.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::edge::{Edge, Inbox};
use super::port::Payload;
use super::step::Stage;
use super::threads::{slow_call, spawn_error, Fail};
use crate::budget::Tally;
use crate::error::PipelineError;
use crate::frame::StageSlot;
use crate::Error;

/// What a worker gives back for batch `k`: its outputs, or the error that stops the run. The
/// outputs of a worker's `finish` come back numbered [`FINISH`].
type Done<T> = (u64, Result<Vec<T>, Error>);

/// The number of a worker's `finish` outputs: after every batch.
const FINISH: u64 = u64::MAX;

/// Start `stages` as one stage's workers between `rx` and `tx`; `busy` is set while any of them
/// works.
/// `fail` takes the first error (a worker's, or a panic).
pub(super) fn run_workers<T: Payload>(
    name: String,
    stages: Vec<Box<dyn Stage<T, T>>>,
    mut rx: Inbox<T>,
    tx: Edge<T>,
    slot: StageSlot,
    fail: Fail,
    busy: Arc<AtomicBool>,
) -> Result<thread::JoinHandle<()>, Error> {
    let (work_tx, work_rx) = bounded::<(u64, T)>(stages.len());
    let (done_tx, done_rx) = bounded::<Done<T>>(stages.len() * 2);
    let working = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::with_capacity(stages.len() + 1);
    let workers = stages.len() as u32;
    for (i, stage) in stages.into_iter().enumerate() {
        let (work_rx, done_tx) = (work_rx.clone(), done_tx.clone());
        let (working, busy) = (working.clone(), busy.clone());
        let account = (tx.tally().clone(), slot, workers);
        let worker = format!("{name}-{i}");
        threads.push(
            thread::Builder::new()
                .name(worker.clone())
                .spawn(move || {
                    work(
                        &worker,
                        stage,
                        work_rx,
                        done_tx,
                        (&working, &busy),
                        &account,
                    )
                })
                .map_err(|e| spawn_error(&name, e))?,
        );
    }
    drop((work_rx, done_tx));
    let order = format!("{name}-order");
    let order_fail = fail.clone();
    threads.push(
        thread::Builder::new()
            .name(order.clone())
            .spawn(move || {
                if let Err(e) = in_order(&order, &done_rx, &tx, slot) {
                    order_fail(e);
                }
            })
            .map_err(|e| spawn_error(&name, e))?,
    );
    let stage = name.clone();
    thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _span = tracing::info_span!("stage", name = stage.as_str()).entered();
            let mut k = 0;
            // Until upstream ends; a send fails once the workers are gone (an error, or
            // nobody downstream).
            while let Ok(batch) = rx.recv(None) {
                if work_tx.send((k, batch)).is_err() {
                    break;
                }
                k += 1;
            }
            drop(work_tx);
            for t in threads {
                if t.join().is_err() {
                    fail(PipelineError::Panic(stage.clone()).into());
                }
            }
        })
        .map_err(|e| spawn_error(&name, e))
}

/// One worker: process each batch it takes and give its outputs back with the batch's number;
/// at the end of the stream, its stage's `finish` outputs. Its frames' wait counts until a
/// worker takes them, and its calls count as the stage's busy time, shared by its `workers`
/// (`account`: the report, the stage's row, the workers).
fn work<T: Payload>(
    name: &str,
    mut stage: Box<dyn Stage<T, T>>,
    work_rx: Receiver<(u64, T)>,
    done_tx: Sender<Done<T>>,
    (working, busy): (&AtomicUsize, &AtomicBool),
    (tally, slot, workers): &(Tally, StageSlot, u32),
) {
    let _span = tracing::info_span!("stage", name).entered();
    let mut call = |k: u64, batch: Option<T>| {
        if working.fetch_add(1, Ordering::Relaxed) == 0 {
            busy.store(true, Ordering::Relaxed);
        }
        let began = Instant::now();
        let mut out = Vec::new();
        let result = match batch {
            Some(mut b) => {
                b.took(*slot, began);
                stage.process(b, &mut out)
            }
            None => stage.finish(&mut out),
        };
        let worked = began.elapsed();
        tally.with(|t| t.add_busy(*slot, worked / (*workers).max(1)));
        slow_call(name, worked, Duration::ZERO, out.len());
        if working.fetch_sub(1, Ordering::Relaxed) == 1 {
            busy.store(false, Ordering::Relaxed);
        }
        done_tx.send((k, result.map(|()| out))).is_ok()
    };
    for (k, batch) in work_rx.iter() {
        if !call(k, Some(batch)) {
            return;
        }
    }
    call(FINISH, None);
}

/// Send the workers' outputs on in the order of their batches' numbers, then their `finish`
/// outputs; the first error stops it (and, with the channel gone, the workers).
fn in_order<T: Payload>(
    name: &str,
    done_rx: &Receiver<Done<T>>,
    tx: &Edge<T>,
    slot: StageSlot,
) -> Result<(), Error> {
    let mut next = 0u64;
    let mut waiting: BTreeMap<u64, Vec<T>> = BTreeMap::new();
    let mut finished = Vec::new();
    for (k, result) in done_rx.iter() {
        let out = result?;
        if k == FINISH {
            finished.extend(out);
            continue;
        }
        waiting.insert(k, out);
        while let Some(mut out) = waiting.remove(&next) {
            let began = Instant::now();
            let items = out.len();
            if !tx.send_all(&mut out, slot) {
                return Ok(());
            }
            slow_call(name, Duration::ZERO, began.elapsed(), items);
            next += 1;
        }
    }
    tx.send_all(&mut finished, slot);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Budget, Tally};
    use crate::crops::CropBatch;

    /// Tags each batch with the worker that took it and takes longer on early batches, so
    /// later ones finish first.
    struct Slow(u32);

    impl Stage<CropBatch, CropBatch> for Slow {
        fn process(&mut self, mut batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
            let k = batch.tile_pixels;
            thread::sleep(Duration::from_millis(u64::from(12 - k.min(12)) * 2));
            batch.tile_pixels = k * 10 + self.0;
            out.push(batch);
            Ok(())
        }
    }

    #[test]
    fn batches_leave_in_the_order_they_came() {
        let tally = Tally::new(Budget::new(Duration::from_millis(33), vec![]));
        let fail: Fail = Arc::new(|e| panic!("{e}"));
        let (in_tx, in_rx) = bounded(32);
        let (edge, out_rx) = Edge::new(4, false, "pool -> next", &tally);
        let stages: Vec<Box<dyn Stage<CropBatch, CropBatch>>> =
            (0..3).map(|i| Box::new(Slow(i)) as Box<_>).collect();
        let busy = Arc::new(AtomicBool::new(false));
        let pool = run_workers(
            "pool".into(),
            stages,
            Inbox::new(vec![in_rx], None),
            edge,
            0,
            fail,
            busy,
        )
        .unwrap();
        for k in 0..12 {
            let mut batch = CropBatch::default();
            batch.tile_pixels = k;
            in_tx.send(batch).unwrap();
        }
        drop(in_tx);
        let got: Vec<u32> = out_rx.iter().map(|b| b.tile_pixels).collect();
        pool.join().unwrap();
        assert_eq!(
            got.iter().map(|t| t / 10).collect::<Vec<_>>(),
            (0..12).collect::<Vec<_>>()
        );
        let workers: std::collections::HashSet<u32> = got.iter().map(|t| t % 10).collect();
        assert!(workers.len() > 1, "one worker took every batch: {got:?}");
    }
}
