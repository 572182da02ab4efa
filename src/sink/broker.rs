//! What the broker sinks (`mqtt`, `zenoh`) share: their common properties, and [`BrokerSink`],
//! the pipeline's side of one: batches into messages ([`Messages`]), handed to a bounded buffer
//! that never waits (a message that finds it full is dropped and counted), the wait for it to
//! empty at the end of the stream, and the report's line. Each sink brings its [`Transport`]:
//! how a message is handed over and how the connection closes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::message::{Delivery, Message, Messages, Per};
use super::SinkError;
use crate::batch::CropBatch;
use crate::budget::Tally;
use crate::stage::{PropSpec, PropType, Props, Stage};
use crate::Error;

/// Default messages held while the receiver is away or slow.
pub const DEFAULT_BUFFER: usize = 1000;

/// The largest message sent; a larger one (a frame with thousands of objects: use `per=object`)
/// is dropped and counted.
pub const MAX_MESSAGE: usize = 1 << 20;

/// `per=frame|object`, a property of every broker sink.
pub const PER: PropSpec = PropSpec::new(
    "per",
    PropType::Choice(&["frame", "object"]),
    "frame",
    "one message per frame (its objects, also none) or per object",
);

/// `buffer=N`, a property of every broker sink.
pub const BUFFER: PropSpec = PropSpec::new(
    "buffer",
    PropType::POSITIVE,
    "1000",
    "messages held while the receiver is away or slow; beyond, dropped and counted",
);

/// `flush-timeout=SECONDS`, a property of every broker sink.
pub const FLUSH_TIMEOUT: PropSpec = PropSpec::new(
    "flush-timeout",
    PropType::Float {
        min: 0.0,
        max: 3600.0,
        open_min: false,
    },
    "3",
    "seconds the end of the stream waits for held messages to be delivered",
);

/// How a broker sink hands its messages over: its properties `per`, `buffer`, `flush-timeout`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sending {
    /// What a message carries.
    pub per: Per,
    /// Messages held while the receiver is away or slow.
    pub buffer: usize,
    /// How long the end of the stream waits for held messages.
    pub flush_timeout: Duration,
}

impl Sending {
    /// From a broker sink's properties.
    pub fn from_props(p: &Props) -> Sending {
        Sending {
            per: match p.str("per") {
                Some("object") => Per::Object,
                _ => Per::Frame,
            },
            buffer: p.usize("buffer").unwrap_or(DEFAULT_BUFFER),
            flush_timeout: Duration::from_secs_f64(p.float("flush-timeout").unwrap_or(3.0)),
        }
    }
}

/// What became of a message handed to a broker sink's buffer.
pub enum Handed {
    /// The buffer took it.
    Taken,
    /// The buffer was full.
    Full,
    /// The thread that sends from the buffer is gone.
    Gone,
}

/// How a broker sink's messages leave: the sink's own side.
pub trait Transport: Send {
    /// Hand `message` over without waiting.
    fn hand(&mut self, message: Message) -> Handed;
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
    out: Vec<Message>,
    delivery: Arc<Delivery>,
    /// Until closed.
    transport: Option<T>,
    tally: Tally,
    /// Dropping messages since the last one the buffer took (warned once per spell).
    dropping: bool,
}

impl<T: Transport> BrokerSink<T> {
    /// A sink called `name` (`mqtt HOST:PORT`, `zenoh KEY`) sending through `transport`, which
    /// counts its deliveries in `delivery`; its report line goes to `tally`.
    pub fn new(
        name: String,
        sending: Sending,
        delivery: Arc<Delivery>,
        transport: T,
        tally: Tally,
    ) -> Self {
        BrokerSink {
            name,
            sending,
            messages: Messages::new(sending.per),
            out: Vec::new(),
            delivery,
            transport: Some(transport),
            tally,
            dropping: false,
        }
    }

    fn error(&self, reason: String) -> SinkError {
        SinkError {
            path: self.name.clone(),
            reason,
        }
    }

    /// Hand `batch`'s messages over, counting each; never waits.
    pub fn publish(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        self.messages
            .of(batch, &mut self.out)
            .map_err(|e| self.error(format!("cannot serialize a message: {e}")))?;
        let Some(transport) = &mut self.transport else {
            return Err(self.error("published after the end of the stream".into()));
        };
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
            match transport.hand(m) {
                Handed::Taken => {
                    d.accepted.fetch_add(1, Ordering::SeqCst);
                    self.dropping = false;
                }
                Handed::Full => {
                    d.dropped.fetch_add(1, Ordering::SeqCst);
                    if !std::mem::replace(&mut self.dropping, true) {
                        tracing::warn!(
                            "{}: {} messages held (buffer={}): dropping messages until they go out (counted)",
                            self.name, self.sending.buffer, self.sending.buffer
                        );
                    }
                }
                Handed::Gone => {
                    return Err(SinkError {
                        path: self.name.clone(),
                        reason: "its sending thread ended".into(),
                    })
                }
            }
        }
        Ok(())
    }

    /// Wait up to `flush-timeout` for every message taken to be delivered, then close.
    fn close(&mut self) {
        let Some(mut transport) = self.transport.take() else {
            return;
        };
        let deadline = Instant::now() + self.sending.flush_timeout;
        while self.delivery.outstanding() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        transport.close();
        let section = self.delivery.section(&self.name, transport.delivered());
        self.tally.with(|t| t.add_section(&section));
    }
}

impl<T: Transport> Stage<CropBatch, CropBatch> for BrokerSink<T> {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.publish(&batch)?;
        out.push(batch);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.close();
        Ok(())
    }
}

impl<T: Transport> Drop for BrokerSink<T> {
    fn drop(&mut self) {
        // A run that failed elsewhere never called finish: the connection still closes.
        self.close();
    }
}
