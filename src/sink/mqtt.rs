//! The `mqtt` sink: one JSON message per frame (or per object) to an MQTT broker.
//!
//! ```text
//! ... ! classify model=m.onnx ! mqtt host=127.0.0.1 port=1883 topic=octopipe/{stream}/objects qos=1
//! ```
//!
//! Messages (schema in docs/messages.md, `"v":1`) go on `topic` with `{stream}` replaced by the
//! stream id. The sink never waits for the broker: a message goes into a buffer of `buffer`
//! messages that a thread of its own (`octopipe-mqtt`, with rumqttc) sends from; when the buffer
//! is full (the broker away, or slower than the pipeline, for too long) the message is dropped and
//! counted, so the pipeline is held back by nothing but its own edges. A lost connection is made
//! again with a backoff (0.1 s doubling to 5 s); at QoS 1 the messages sent but not acknowledged
//! are sent again, so within the buffer's bound nothing is lost across a broker restart (a
//! receiver may then see a message twice: QoS 1 is at least once; `stream` and `frame` identify
//! it). At the end of the stream the sink waits up to `flush-timeout` for what it holds to be
//! delivered; the report has a line of what became of the messages:
//!
//! ```text
//! mqtt 127.0.0.1:1883: 300 messages = 290 acknowledged + 10 dropped (buffer full); 1 reconnect
//! ```
//!
//! Held at most: `buffer` messages waiting, up to 100 sent and not yet acknowledged (QoS 1), and,
//! after a connection is lost, what was waiting then, moved to a list sent first on reconnecting.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rumqttc::{Client, Connection, Event, MqttOptions, Outgoing, Packet, QoS};

use super::message::{Delivery, Handed, Outbox, Per, Topic, MAX_MESSAGE};
use super::SinkError;
use crate::batch::CropBatch;
use crate::budget::Tally;
use crate::describe::DescribeError;
use crate::stage::{
    Element, OpenContext, PropSpec, PropType, Props, Role, Running, Stage, StageDecl,
};
use crate::Error;

/// Default messages held while the broker is away or slow.
pub const DEFAULT_BUFFER: usize = 1000;

/// First wait before connecting again; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait before connecting again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A quiet connection is checked with a ping this often (a broker gone without closing it is
/// noticed within about twice this).
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// How often the backoff looks whether the sink is stopping.
const POLL: Duration = Duration::from_millis(10);

/// `mqtt host=... port=... topic=... qos=0|1`.
pub const MQTT: StageDecl = StageDecl {
    name: "mqtt",
    role: Role::Sink,
    doc: "one JSON message per frame (or object) to an MQTT broker; never waits for it",
    props: &[
        PropSpec::new(
            "host",
            PropType::Str,
            "127.0.0.1",
            "the broker's host name or address",
        ),
        PropSpec::new(
            "port",
            PropType::Int { min: 1, max: 65535 },
            "1883",
            "the broker's port",
        ),
        PropSpec::new(
            "topic",
            PropType::Str,
            "octopipe/{stream}/objects",
            "the topic; {stream} is replaced by the stream id",
        ),
        PropSpec::new(
            "qos",
            PropType::Choice(&["0", "1"]),
            "1",
            "0: at most once; 1: at least once (sent again until acknowledged)",
        ),
        PropSpec::new(
            "client-id",
            PropType::Str,
            "octopipe-PID-N",
            "the MQTT client id (unique per broker)",
        ),
        PropSpec::new(
            "per",
            PropType::Choice(&["frame", "object"]),
            "frame",
            "one message per frame (its objects, also none) or per object",
        ),
        PropSpec::new(
            "buffer",
            PropType::POSITIVE,
            "1000",
            "messages held while the broker is away or slow; beyond, dropped and counted",
        ),
        PropSpec::new(
            "flush-timeout",
            PropType::Float {
                min: 0.0,
                max: 3600.0,
                open_min: false,
            },
            "3",
            "seconds the end of the stream waits for held messages to be delivered",
        ),
    ],
    needs: &[Role::Boxes, Role::Batch],
    provides: &[],
    make: make_mqtt,
};

/// Settings of the `mqtt` sink.
#[derive(Debug, Clone, PartialEq)]
pub struct MqttConfig {
    /// The broker's host.
    pub host: String,
    /// The broker's port.
    pub port: u16,
    /// Where messages go.
    pub topic: Topic,
    /// At least once (`true`, QoS 1) or at most once (QoS 0).
    pub at_least_once: bool,
    /// The client id; `None`: `octopipe-PID-N`.
    pub client_id: Option<String>,
    /// What a message carries.
    pub per: Per,
    /// Messages held while the broker is away or slow.
    pub buffer: usize,
    /// How long the end of the stream waits for held messages.
    pub flush_timeout: Duration,
}

fn make_mqtt(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let topic = p.str("topic").unwrap_or("octopipe/{stream}/objects");
    let topic = Topic::parse(topic, &['+', '#']).map_err(|e| p.error("topic", e))?;
    let host = p.str("host").unwrap_or("127.0.0.1").to_string();
    if host.is_empty() {
        return Err(p.error("host", "a host name or address is needed"));
    }
    let client_id = p.given("client-id").map(String::from);
    if client_id.as_deref() == Some("") {
        return Err(p.error(
            "client-id",
            "an empty client id: leave it out for octopipe-PID-N",
        ));
    }
    Ok(Box::new(MqttConfig {
        host,
        port: p.int("port").map_or(1883, |v| v as u16),
        topic,
        at_least_once: p.str("qos") != Some("0"),
        client_id,
        per: match p.str("per") {
            Some("object") => Per::Object,
            _ => Per::Frame,
        },
        buffer: p.usize("buffer").unwrap_or(DEFAULT_BUFFER),
        flush_timeout: Duration::from_secs_f64(p.float("flush-timeout").unwrap_or(3.0)),
    }))
}

impl MqttConfig {
    /// How the report and errors name the broker: `mqtt HOST:PORT`.
    pub fn name(&self) -> String {
        format!("mqtt {}:{}", self.host, self.port)
    }
}

impl Element for MqttConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::Batches(Box::new(MqttSink::start(
            *self,
            ctx.tally.clone(),
        )?)))
    }
}

/// The running `mqtt` sink.
pub struct MqttSink {
    config: MqttConfig,
    client: Option<Client>,
    outbox: Outbox,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
    tally: Tally,
}

impl MqttSink {
    /// Start the connection thread (it connects, and connects again, on its own; nothing waits
    /// for the broker here).
    pub fn start(config: MqttConfig, tally: Tally) -> Result<MqttSink, SinkError> {
        static CLIENTS: AtomicU64 = AtomicU64::new(0);
        let outbox = Outbox::new(config.name(), config.per, config.buffer);
        let id = config.client_id.clone().unwrap_or_else(|| {
            let n = CLIENTS.fetch_add(1, Ordering::Relaxed);
            format!("octopipe-{}-{n}", std::process::id())
        });
        let mut options = MqttOptions::new(id, &config.host, config.port);
        options
            .set_keep_alive(KEEP_ALIVE)
            .set_max_packet_size(64 * 1024, MAX_MESSAGE + 64 * 1024);
        let (client, connection) = Client::new(options, config.buffer);
        let stop = Arc::new(AtomicBool::new(false));
        let link = Link {
            name: outbox.name.clone(),
            at_least_once: config.at_least_once,
            buffer: config.buffer,
            delivery: outbox.delivery.clone(),
            stop: stop.clone(),
        };
        let thread = thread::Builder::new()
            .name("octopipe-mqtt".into())
            .spawn(move || link.drive(connection))
            .map_err(|e| outbox.error(format!("cannot start its thread: {e}")))?;
        Ok(MqttSink {
            config,
            client: Some(client),
            outbox,
            stop,
            thread: Some(thread),
            tally,
        })
    }

    /// What became of the messages so far.
    pub fn delivery(&self) -> &Delivery {
        &self.outbox.delivery
    }

    /// Hand `batch`'s messages to the connection thread; never waits.
    pub fn publish(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        let Some(client) = &self.client else {
            return Err(self
                .outbox
                .error("published after the end of the stream".into()));
        };
        let qos = match self.config.at_least_once {
            true => QoS::AtLeastOnce,
            false => QoS::AtMostOnce,
        };
        let topic = &self.config.topic;
        self.outbox.publish(batch, |m| {
            match client.try_publish(topic.of(m.stream), qos, false, m.payload) {
                Ok(()) => Handed::Taken,
                Err(_) => Handed::Full,
            }
        })
    }

    /// Wait up to `flush-timeout` for the messages held to be delivered, say goodbye to the
    /// broker and stop the connection thread.
    fn close(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        self.outbox.flush(self.config.flush_timeout);
        let _ = client.try_disconnect();
        drop(client);
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Stage<CropBatch, CropBatch> for MqttSink {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.publish(&batch)?;
        out.push(batch);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.close();
        let delivered = match self.config.at_least_once {
            true => "acknowledged",
            false => "sent",
        };
        let line = self.outbox.delivery.line(&self.outbox.name, delivered);
        self.tally.with(|t| t.add_line(line));
        Ok(())
    }
}

impl Drop for MqttSink {
    fn drop(&mut self) {
        // A run that failed elsewhere never called finish: the thread still ends.
        self.close();
    }
}

/// The connection thread's side: drives rumqttc's event loop, counts deliveries, connects again
/// with a backoff.
struct Link {
    name: String,
    at_least_once: bool,
    buffer: usize,
    delivery: Arc<Delivery>,
    stop: Arc<AtomicBool>,
}

impl Link {
    fn drive(self, mut connection: Connection) {
        let mut backoff = MIN_BACKOFF;
        // Whether connected now, and whether ever.
        let (mut up, mut ever) = (false, false);
        let mut warned = false;
        while !self.stop.load(Ordering::SeqCst) {
            let Ok(event) = connection.recv() else {
                return; // the sink is gone and nothing is left to send
            };
            match event {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    if ever {
                        self.delivery.reconnects.fetch_add(1, Ordering::SeqCst);
                        tracing::info!("{}: connected again", self.name);
                    }
                    (up, ever, warned) = (true, true, false);
                    backoff = MIN_BACKOFF;
                }
                Ok(Event::Incoming(Packet::PubAck(_))) if self.at_least_once => {
                    self.delivery.delivered.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Event::Outgoing(Outgoing::Publish(_))) if !self.at_least_once => {
                    self.delivery.delivered.fetch_add(1, Ordering::SeqCst);
                }
                Ok(Event::Outgoing(Outgoing::Disconnect)) => return,
                Ok(_) => {}
                Err(e) => {
                    if !warned {
                        let what = if up {
                            "connection lost"
                        } else {
                            "cannot connect"
                        };
                        tracing::warn!(
                            "{}: {what} ({e}); connecting again with a backoff, holding up to {} messages",
                            self.name, self.buffer
                        );
                        warned = true;
                    }
                    up = false;
                    self.pause(backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Sleep `d`, or less if the sink stops.
    fn pause(&self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
            thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
        }
    }
}
