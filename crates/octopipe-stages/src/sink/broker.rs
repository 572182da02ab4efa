//! What the broker sinks (`mqtt`, `zenoh`) share: their common properties, and [`BrokerSink`],
//! the pipeline's side of one: batches into messages ([`Messages`]), put in a [`Backlog`] that
//! never waits (per stream the last `buffer` seconds of its messages; older ones are dropped
//! and counted), the wait for it to empty at the end of the stream, and the report's line. A
//! sink that was given messages and delivered none of them fails the run at its end, saying
//! so. Each sink brings its [`Transport`]: the thread that takes messages from the backlog to
//! the network, and how the connection closes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::backlog::Backlog;
use super::error::SinkError;
use super::message::{Delivery, Messages, Per};
use crate::batch::CropBatch;
use octopipe_core::budget::Tally;
use octopipe_core::error::Error;
use octopipe_core::stage::{Properties, Stage};

/// The largest message sent; a larger one (a frame with thousands of objects: use `per=object`)
/// is dropped and counted.
pub const MAX_MESSAGE: usize = 1 << 20;

/// The warning that messages are dropped is given at most this often (a receiver that comes
/// and goes would start a spell of drops several times a second).
pub const DROP_WARN_EVERY: Duration = Duration::from_secs(10);

/// The longest a stopped run's broker sink waits for its messages to be delivered: well within
/// the default stop grace (1 s), so that its delivery line is in the report of every stop (a
/// SIGTERM with no broker too).
pub const STOPPED_FLUSH: Duration = Duration::from_millis(500);

/// The properties every broker sink shares, declared once: `per`, `buffer`, `flush-timeout`
/// ([`Sending`] is what they set).
#[derive(Debug, Clone, Copy, PartialEq, Properties)]
pub(crate) struct SendingProps {
    /// one message per frame (its objects, also none) or per object
    #[prop(default = "frame")]
    pub per: Per,
    /// seconds of each stream's messages held while the receiver is away or slow; older ones are
    /// dropped and counted
    #[prop(default = 10, range = 0.0..=3600.0, positive)]
    pub buffer: f64,
    /// seconds the end of the stream waits for held messages to be delivered
    #[prop(default = 3, range = 0.0..=3600.0)]
    pub flush_timeout: f64,
}

/// How a broker sink hands its messages over: its properties `per`, `buffer`, `flush-timeout`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Sending {
    /// What a message carries.
    pub per: Per,
    /// How much of each stream's messages is held while the receiver is away or slow.
    pub buffer: Duration,
    /// How long the end of the stream waits for held messages.
    pub flush_timeout: Duration,
}

impl From<SendingProps> for Sending {
    fn from(p: SendingProps) -> Sending {
        Sending {
            per: p.per,
            buffer: Duration::from_secs_f64(p.buffer),
            flush_timeout: Duration::from_secs_f64(p.flush_timeout),
        }
    }
}

/// How a broker sink's messages leave: the sink's own side (its thread takes them from the
/// backlog).
pub trait Transport: Send {
    /// Whether the thread that sends is still there.
    fn alive(&self) -> bool;
    /// The messages taken were delivered, or the flush timed out: let go of what is still held,
    /// close the connection and stop its thread.
    fn close(&mut self);
    /// What the report calls a delivered message (`acknowledged`, `sent`).
    fn delivered(&self) -> &'static str;
}

/// The pipeline's side of a broker sink (see the module doc).
pub struct BrokerSink<T: Transport> {
    name: String,
    sending: Sending,
    messages: Messages,
    out: Vec<super::message::Message>,
    delivery: Arc<Delivery>,
    backlog: Arc<Backlog>,
    /// Until closed.
    transport: Option<T>,
    tally: Tally,
    /// Set when the run is stopped (a signal, a stop request): the flush then waits at most
    /// [`STOPPED_FLUSH`], so that the sink closes, and its delivery line is in the report,
    /// within the run's stop grace.
    stopped: Arc<std::sync::atomic::AtomicBool>,
    /// Dropping messages since the last one the buffer took (warned once per spell).
    dropping: bool,
    /// When the warning about drops was last given ([`DROP_WARN_EVERY`]).
    warned: Option<Instant>,
}

impl<T: Transport> BrokerSink<T> {
    /// A sink called `name` (`mqtt HOST:PORT`, `zenoh KEY`) whose `transport` sends what it
    /// puts in `backlog`, counting its deliveries in `delivery`; its report line goes to
    /// `tally`.
    pub fn new(
        name: String,
        sending: Sending,
        (delivery, backlog): (Arc<Delivery>, Arc<Backlog>),
        transport: T,
        tally: Tally,
    ) -> Self {
        BrokerSink {
            name,
            sending,
            messages: Messages::new(sending.per),
            out: Vec::new(),
            delivery,
            backlog,
            transport: Some(transport),
            tally,
            stopped: Arc::default(),
            dropping: false,
            warned: None,
        }
    }

    /// Close quickly once `stopped` is set (the stage's `OpenContext::stopped_early`).
    pub fn stopped_by(mut self, stopped: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.stopped = stopped;
        self
    }

    fn error(&self, reason: String) -> SinkError {
        SinkError::network(self.name.clone(), reason)
    }

    /// Hand `batch`'s messages over, counting each; never waits.
    pub fn publish(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        self.messages
            .of(batch, &mut self.out)
            .map_err(|e| self.error(format!("cannot serialize a message: {e}")))?;
        let Some(transport) = &self.transport else {
            return Err(self.error("published after the end of the stream".into()));
        };
        if !transport.alive() {
            return Err(self.error("its sending thread ended".into()));
        }
        let d = &self.delivery;
        for m in self.out.drain(..) {
            if m.payload.len() > MAX_MESSAGE {
                d.too_large.fetch_add(1, Ordering::SeqCst);
                tracing::warn!(
                    "{}: the message of stream {} frame {} is {} bytes, over {MAX_MESSAGE}: dropped (counted; per=object sends smaller ones)",
                    self.name, m.stream, m.frame, m.payload.len()
                );
                continue;
            }
            let stream = m.stream;
            match self.backlog.push(m) {
                0 => self.dropping = false,
                _ if !std::mem::replace(&mut self.dropping, true)
                    && self.warned.is_none_or(|t| t.elapsed() >= DROP_WARN_EVERY) =>
                {
                    self.warned = Some(Instant::now());
                    tracing::warn!(
                        "{}: stream {stream}'s messages older than buffer={} s are dropped until the receiver takes them (counted; said at most every {} s)",
                        self.name,
                        self.sending.buffer.as_secs_f64(),
                        DROP_WARN_EVERY.as_secs()
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Wait up to `flush-timeout` for every message taken to be delivered, then close; a sink
    /// that was given messages and delivered none is an error saying so.
    fn close(&mut self) -> Result<(), SinkError> {
        let Some(mut transport) = self.transport.take() else {
            return Ok(());
        };
        let mut flush = self.sending.flush_timeout;
        if self.stopped.load(Ordering::SeqCst) {
            flush = flush.min(STOPPED_FLUSH);
        }
        let deadline = Instant::now() + flush;
        while self.delivery.outstanding() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.backlog.close();
        transport.close();
        let section = self.delivery.section(&self.name, transport.delivered());
        self.tally.with(|t| t.add_section(&section));
        let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::SeqCst);
        let given = n(&self.delivery.accepted) + n(&self.delivery.too_large);
        if given > 0 && n(&self.delivery.delivered) == 0 {
            let line = section.to_string();
            return Err(self.error(format!(
                "delivered none of the {given} messages it was given ({}): is the receiver there?",
                line.split_once(": ")
                    .map_or(line.as_str(), |(_, rest)| rest)
            )));
        }
        Ok(())
    }
}

impl<T: Transport> Stage<CropBatch, CropBatch> for BrokerSink<T> {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.publish(&batch)?;
        out.push(batch);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<CropBatch>) -> Result<(), Error> {
        Ok(self.close()?)
    }
}

impl<T: Transport> Drop for BrokerSink<T> {
    fn drop(&mut self) {
        // A run that failed elsewhere never called finish: the connection still closes.
        let _ = self.close();
    }
}
