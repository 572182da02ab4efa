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

use super::broker::{
    BrokerSink, Handed, Sending, Transport, BUFFER, FLUSH_TIMEOUT, MAX_MESSAGE, PER,
};
use super::message::{Delivery, Message, Topic};
use super::SinkError;
use crate::budget::Tally;
use crate::describe::DescribeError;
use crate::stage::{Element, OpenContext, PropSpec, PropType, Props, Role, Running, StageDecl};
use crate::Error;

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
        PER,
        BUFFER,
        FLUSH_TIMEOUT,
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
    /// Messages, buffer, flush.
    pub sending: Sending,
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
        sending: Sending::from_props(p),
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
        Ok(Running::Batches(Box::new(start(*self, ctx.tally.clone())?)))
    }
}

/// Start the `mqtt` sink: its connection thread connects, and connects again, on its own; nothing
/// waits for the broker here.
fn start(config: MqttConfig, tally: Tally) -> Result<BrokerSink<Mqtt>, SinkError> {
    static CLIENTS: AtomicU64 = AtomicU64::new(0);
    let name = config.name();
    let id = config.client_id.clone().unwrap_or_else(|| {
        let n = CLIENTS.fetch_add(1, Ordering::Relaxed);
        format!("octopipe-{}-{n}", std::process::id())
    });
    let mut options = MqttOptions::new(id, &config.host, config.port);
    options
        .set_keep_alive(KEEP_ALIVE)
        .set_max_packet_size(64 * 1024, MAX_MESSAGE + 64 * 1024);
    let (client, connection) = Client::new(options, config.sending.buffer);
    let delivery = Delivery::new();
    let stop = Arc::new(AtomicBool::new(false));
    let link = Link {
        name: name.clone(),
        at_least_once: config.at_least_once,
        buffer: config.sending.buffer,
        delivery: delivery.clone(),
        stop: stop.clone(),
    };
    let thread = thread::Builder::new()
        .name("octopipe-mqtt".into())
        .spawn(move || link.drive(connection))
        .map_err(|e| SinkError {
            path: name.clone(),
            reason: format!("cannot start its thread: {e}"),
        })?;
    let mqtt = Mqtt {
        client: Some(client),
        topic: config.topic,
        qos: match config.at_least_once {
            true => QoS::AtLeastOnce,
            false => QoS::AtMostOnce,
        },
        stop,
        thread: Some(thread),
    };
    Ok(BrokerSink::new(name, config.sending, delivery, mqtt, tally))
}

/// The `mqtt` sink's transport: rumqttc's request channel (the buffer) and its connection
/// thread.
struct Mqtt {
    client: Option<Client>,
    topic: Topic,
    qos: QoS,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Transport for Mqtt {
    fn hand(&mut self, m: Message) -> Handed {
        let Some(client) = &self.client else {
            return Handed::Gone;
        };
        match client.try_publish(self.topic.of(m.stream), self.qos, false, m.payload) {
            Ok(()) => Handed::Taken,
            Err(_) => Handed::Full,
        }
    }

    /// Say goodbye to the broker and stop the connection thread.
    fn close(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.try_disconnect();
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn delivered(&self) -> &'static str {
        match self.qos {
            QoS::AtMostOnce => "sent",
            _ => "acknowledged",
        }
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
