//! A thread of a model's own that runs every job sent to it, one at a time and in order, on state
//! that never leaves it; the sender waits for each job's result ([`Worker::run`]), or queues a job
//! and takes its result later ([`Worker::submit`], [`Worker::wait`]) to work meanwhile.
//!
//! ONNX Runtime's CUDA execution provider keeps a session's CUDA graph per thread and captures it
//! in the global capture mode (every other thread's CUDA calls during a capture break it). With
//! the runs of the fixed-size sessions all on one such thread, each size's graph is captured
//! once, at the stage's open, and every later run on that thread replays it
//! ([`Sessions::fix_sizes`](super::Sessions::fix_sizes)). The worker is generic over its state so
//! that its plumbing (order, results, a job that panics, the end) is tested without a GPU.

use std::sync::mpsc;
use std::thread::JoinHandle;

/// A job: run on the worker's thread with its state.
type Job<S> = Box<dyn FnOnce(&mut S) + Send>;

/// Why a job brought no result: the worker's thread is gone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Gone(pub String);

/// A job queued by [`Worker::submit`]: its result, once [`Worker::wait`] takes it.
pub(crate) struct Ticket<R> {
    rx: mpsc::Receiver<R>,
    /// The result, when [`Ticket::done`] found it already there.
    ready: Option<R>,
}

impl<R> Ticket<R> {
    /// Whether [`Worker::wait`] would return at once: the job has run (or its thread is gone).
    pub fn done(&mut self) -> bool {
        if self.ready.is_some() {
            return true;
        }
        match self.rx.try_recv() {
            Ok(r) => {
                self.ready = Some(r);
                true
            }
            Err(mpsc::TryRecvError::Empty) => false,
            Err(mpsc::TryRecvError::Disconnected) => true,
        }
    }
}

/// A thread that owns a state `S` (made on the thread, never sent: it need not be `Send`) and
/// runs the jobs [`Worker::run`] sends it in order. Dropping the worker ends the thread after its
/// last job and waits for it, so the state is dropped on its thread before the drop returns.
pub(crate) struct Worker<S: 'static> {
    /// `None` once dropped (the thread's loop ends when it closes).
    jobs: Option<mpsc::Sender<Job<S>>>,
    thread: Option<JoinHandle<()>>,
    /// Why the thread ended, once it is known to have ended.
    gone: Option<String>,
}

impl<S: 'static> Worker<S> {
    /// Start a thread named `name` whose state is made there by `init`.
    pub fn spawn(name: String, init: impl FnOnce() -> S + Send + 'static) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job<S>>();
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let mut state = init();
            // Ends when the worker is dropped (the sender closes); a job that panics ends the
            // thread there, dropping the state and the jobs still queued (their senders then see
            // a closed channel).
            while let Ok(job) = rx.recv() {
                job(&mut state);
            }
        })?;
        Ok(Worker {
            jobs: Some(tx),
            thread: Some(thread),
            gone: None,
        })
    }

    /// Run `job` on the worker's thread with its state and wait for its result. When the thread
    /// is gone (a job panicked), the error says so, with the panic's message when there is one;
    /// never a panic or a hang here.
    pub fn run<R: Send + 'static>(
        &mut self,
        job: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, Gone> {
        let ticket = self.submit(job);
        self.wait(ticket)
    }

    /// Queue `job` to run on the worker's thread after the jobs queued before it, without
    /// waiting: its result comes from [`Worker::wait`] on the ticket. A ticket dropped unwaited
    /// leaves its job to run (its result is dropped).
    pub fn submit<R: Send + 'static>(
        &mut self,
        job: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Ticket<R> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job<S> = Box::new(move |state: &mut S| {
            // The receiver is gone when its ticket was dropped unwaited: the result goes too.
            let _ = tx.send(job(state));
        });
        // A closed channel (the thread is gone) drops the job, and with it the reply's sender:
        // the ticket's wait then says why.
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(job);
        }
        Ticket { rx, ready: None }
    }

    /// The result of `ticket`'s job, waiting for it if it has not run yet; an error when the
    /// thread is gone (as [`Worker::run`]).
    pub fn wait<R>(&mut self, mut ticket: Ticket<R>) -> Result<R, Gone> {
        if let Some(r) = ticket.ready.take() {
            return Ok(r);
        }
        if let Some(why) = &self.gone {
            return Err(Gone(why.clone()));
        }
        // The result, or the closed channel of a job dropped without running to its end: the
        // thread panicked in it or before it (the reply's sender is dropped as the job unwinds
        // or is dropped unrun, after everything the job held).
        ticket.rx.recv().map_err(|_| Gone(self.ended()))
    }

    /// The thread has ended or is ending: wait for it and say why.
    fn ended(&mut self) -> String {
        let why = match self.thread.take().map(JoinHandle::join) {
            Some(Err(panic)) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned());
                match message {
                    Some(m) => format!("its thread panicked: {m}"),
                    None => "its thread panicked".to_string(),
                }
            }
            _ => "its thread ended".to_string(),
        };
        self.gone = Some(why.clone());
        why
    }
}

impl<S: 'static> Drop for Worker<S> {
    /// Close the jobs' channel and wait for the thread: its state is dropped there, before this
    /// returns (the sessions it holds before the stream they queue work on).
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            // A panic was the job's, already reported by its caller's error.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn jobs_run_in_order_on_one_thread_with_the_state() {
        let mut w = Worker::spawn("test-worker".into(), Vec::<usize>::new).unwrap();
        let caller = std::thread::current().id();
        let mut threads = Vec::new();
        for i in 0..5 {
            let (len, id) = w
                .run(move |v: &mut Vec<usize>| {
                    v.push(i);
                    (v.len(), std::thread::current().id())
                })
                .unwrap();
            assert_eq!(len, i + 1);
            threads.push(id);
        }
        assert!(threads.iter().all(|&t| t == threads[0]));
        assert_ne!(threads[0], caller);
        assert_eq!(
            w.run(|v: &mut Vec<usize>| v.clone()).unwrap(),
            [0, 1, 2, 3, 4]
        );
        let name = w
            .run(|_: &mut Vec<usize>| std::thread::current().name().map(String::from))
            .unwrap();
        assert_eq!(name.as_deref(), Some("test-worker"));
    }

    #[test]
    fn a_job_that_panics_is_an_error_then_and_after() {
        let mut w = Worker::spawn("test-worker".into(), || 7u32).unwrap();
        assert_eq!(w.run(|s: &mut u32| *s).unwrap(), 7);
        let err = w
            .run(|_: &mut u32| -> u32 { panic!("bad batch") })
            .unwrap_err();
        assert_eq!(err.0, "its thread panicked: bad batch");
        // Every later job: the same error at once, no hang.
        let again = w.run(|s: &mut u32| *s).unwrap_err();
        assert_eq!(again, err);
    }

    #[test]
    fn an_init_that_panics_is_an_error() {
        let mut w = Worker::spawn("test-worker".into(), || -> u32 { panic!("no device") }).unwrap();
        let err = w.run(|s: &mut u32| *s).unwrap_err();
        assert_eq!(err.0, "its thread panicked: no device");
    }

    #[test]
    fn submitted_jobs_run_in_order_while_the_caller_goes_on() {
        let mut w = Worker::spawn("test-worker".into(), Vec::<usize>::new).unwrap();
        let (go, gate) = mpsc::channel::<()>();
        // The first job waits for the caller: the caller is not waiting for it.
        let first = w.submit(move |v: &mut Vec<usize>| {
            gate.recv().unwrap();
            v.push(1);
            v.len()
        });
        let mut second = w.submit(|v: &mut Vec<usize>| {
            v.push(2);
            v.len()
        });
        assert!(!second.done(), "queued behind the first");
        go.send(()).unwrap();
        assert_eq!(w.wait(first).unwrap(), 1);
        assert_eq!(w.wait(second).unwrap(), 2);
        // A ticket dropped unwaited: its job still runs, in its turn.
        drop(w.submit(|v: &mut Vec<usize>| v.push(3)));
        assert_eq!(w.run(|v: &mut Vec<usize>| v.clone()).unwrap(), [1, 2, 3]);
    }

    #[test]
    fn a_submitted_job_that_panics_is_an_error_at_its_wait() {
        let mut w = Worker::spawn("test-worker".into(), || 7u32).unwrap();
        let mut bad = w.submit(|_: &mut u32| -> u32 { panic!("bad call") });
        let after = w.submit(|s: &mut u32| *s);
        // Done (failed) without a wait that hangs.
        while !bad.done() {
            std::thread::yield_now();
        }
        assert_eq!(w.wait(bad).unwrap_err().0, "its thread panicked: bad call");
        assert_eq!(
            w.wait(after).unwrap_err().0,
            "its thread panicked: bad call"
        );
    }

    /// Counts its drops, and on which thread they happen.
    struct Dropped(
        Arc<AtomicUsize>,
        Arc<std::sync::Mutex<Option<std::thread::ThreadId>>>,
    );

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            *self.1.lock().unwrap() = Some(std::thread::current().id());
        }
    }

    #[test]
    fn the_state_is_dropped_on_its_thread_before_the_drop_returns() {
        let count = Arc::new(AtomicUsize::new(0));
        let on = Arc::new(std::sync::Mutex::new(None));
        let (c, o) = (count.clone(), on.clone());
        let mut w = Worker::spawn("test-worker".into(), move || Dropped(c, o)).unwrap();
        let worker_thread = w
            .run(|_: &mut Dropped| std::thread::current().id())
            .unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 0);
        drop(w);
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert_eq!(*on.lock().unwrap(), Some(worker_thread));
    }
}
