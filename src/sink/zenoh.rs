//! The `zenoh` sink: the `mqtt` sink's messages on Zenoh key expressions, peer to peer (no
//! router needed).
//!
//! ```text
//! ... ! classify model=m.onnx ! zenoh key=octopipe/{stream}/objects connect=tcp/10.0.0.5:7447
//! ```
//!
//! The same JSON messages as the `mqtt` sink (docs/messages.md, `"v":1`), put on `key` with
//! `{stream}` replaced by the stream id; a subscriber takes every stream with
//! `octopipe/*/objects`. The session is a peer (`mode=peer`, default) or a client of a Zenoh
//! router (`mode=client`); it talks to the endpoints given (`connect`, `listen`), and with
//! `scouting=true` also to the peers and routers that multicast scouting finds on the LAN (off by
//! default: nothing but the endpoints given). As with `mqtt`, the pipeline never waits: messages
//! wait in a buffer of `buffer` messages that a thread of its own (`octopipe-zenoh`) puts, and
//! beyond it are dropped and counted; the report has a line of what became of them:
//!
//! ```text
//! zenoh octopipe/{stream}/objects: 300 messages = 300 sent + 0 dropped (buffer full)
//! ```
//!
//! A message is sent once Zenoh took it for every matching subscriber known; Zenoh keeps no
//! message for a subscriber that is not there (a subscriber that must not miss any uses a Zenoh
//! storage, or MQTT at QoS 1).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ::zenoh::qos::CongestionControl;
use ::zenoh::Wait;
use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use super::message::{Delivery, Handed, Message, Outbox, Per, Topic};
use super::SinkError;
use crate::batch::CropBatch;
use crate::budget::Tally;
use crate::describe::DescribeError;
use crate::stage::{
    Element, OpenContext, PropSpec, PropType, Props, Role, Running, Stage, StageDecl,
};
use crate::Error;

/// `zenoh key=... connect=... listen=...`.
pub const ZENOH: StageDecl = StageDecl {
    name: "zenoh",
    role: Role::Sink,
    doc: "the mqtt sink's JSON messages on Zenoh key expressions, peer to peer; never waits",
    props: &[
        PropSpec::new(
            "key",
            PropType::Str,
            "octopipe/{stream}/objects",
            "the key expression; {stream} is replaced by the stream id",
        ),
        PropSpec::new(
            "mode",
            PropType::Choice(&["peer", "client"]),
            "peer",
            "a peer (talks to peers directly) or a client of a Zenoh router",
        ),
        PropSpec::new(
            "connect",
            PropType::List,
            "-",
            "endpoints to connect to, comma-separated (tcp/127.0.0.1:7447)",
        ),
        PropSpec::new(
            "listen",
            PropType::List,
            "-",
            "endpoints to listen on, comma-separated (tcp/0.0.0.0:7447)",
        ),
        PropSpec::new(
            "scouting",
            PropType::Bool,
            "false",
            "also find peers and routers on the LAN by multicast scouting",
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
            "messages held while Zenoh is slow; beyond, dropped and counted",
        ),
        PropSpec::new(
            "flush-timeout",
            PropType::Float {
                min: 0.0,
                max: 3600.0,
                open_min: false,
            },
            "3",
            "seconds the end of the stream waits for held messages to be sent",
        ),
    ],
    needs: &[Role::Boxes, Role::Batch],
    provides: &[],
    make: make_zenoh,
};

/// Settings of the `zenoh` sink.
#[derive(Debug, Clone, PartialEq)]
pub struct ZenohConfig {
    /// Where messages go.
    pub key: Topic,
    /// A client of a router (`true`) or a peer.
    pub client: bool,
    /// Endpoints to connect to.
    pub connect: Vec<String>,
    /// Endpoints to listen on.
    pub listen: Vec<String>,
    /// Multicast scouting on.
    pub scouting: bool,
    /// What a message carries.
    pub per: Per,
    /// Messages held while Zenoh is slow.
    pub buffer: usize,
    /// How long the end of the stream waits for held messages.
    pub flush_timeout: Duration,
}

fn make_zenoh(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let key = p.str("key").unwrap_or("octopipe/{stream}/objects");
    let key = Topic::parse(key, &['*', '$', '?', '#']).map_err(|e| p.error("key", e))?;
    let config = ZenohConfig {
        key,
        client: p.str("mode") == Some("client"),
        connect: p.list("connect").unwrap_or_default(),
        listen: p.list("listen").unwrap_or_default(),
        scouting: p.bool("scouting").unwrap_or(false),
        per: match p.str("per") {
            Some("object") => Per::Object,
            _ => Per::Frame,
        },
        buffer: p.usize("buffer").unwrap_or(super::DEFAULT_BUFFER),
        flush_timeout: Duration::from_secs_f64(p.float("flush-timeout").unwrap_or(3.0)),
    };
    if config.connect.is_empty() && config.listen.is_empty() && !config.scouting {
        return Err(p.error(
            "connect",
            "zenoh talks to nobody: give connect=ENDPOINT, listen=ENDPOINT or scouting=true",
        ));
    }
    for (property, endpoints) in [("connect", &config.connect), ("listen", &config.listen)] {
        if let Some(bad) = endpoints.iter().find(|e| !is_tcp_endpoint(e)) {
            return Err(p.error(
                property,
                format!("'{bad}' is not an endpoint: expected tcp/HOST:PORT (TCP is the transport built in)"),
            ));
        }
    }
    config.session_config().map_err(|e| p.error("connect", e))?;
    Ok(Box::new(config))
}

/// `tcp/HOST:PORT` (a name, an IPv4 address or a bracketed IPv6 one).
fn is_tcp_endpoint(e: &str) -> bool {
    let Some(address) = e.strip_prefix("tcp/") else {
        return false;
    };
    address
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

impl ZenohConfig {
    /// How the report and errors name the sink: `zenoh KEY`.
    pub fn name(&self) -> String {
        format!("zenoh {}", self.key.template())
    }

    /// The Zenoh session's configuration.
    fn session_config(&self) -> Result<::zenoh::Config, String> {
        let mut config = ::zenoh::Config::default();
        let endpoints = |v: &[String]| serde_json::to_string(v).unwrap_or_default();
        let mode = if self.client {
            "\"client\""
        } else {
            "\"peer\""
        };
        let scouting = if self.scouting { "true" } else { "false" };
        for (key, value) in [
            ("mode", mode.to_string()),
            ("connect/endpoints", endpoints(&self.connect)),
            ("listen/endpoints", endpoints(&self.listen)),
            ("scouting/multicast/enabled", scouting.to_string()),
        ] {
            config
                .insert_json5(key, &value)
                .map_err(|e| format!("{key} {value}: {e}"))?;
        }
        Ok(config)
    }
}

impl Element for ZenohConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::Batches(Box::new(ZenohSink::start(
            *self,
            ctx.tally.clone(),
        )?)))
    }
}

/// The running `zenoh` sink.
pub struct ZenohSink {
    config: ZenohConfig,
    tx: Option<Sender<Message>>,
    /// The buffer's other end, to let go of what is still held when the flush times out.
    held: Receiver<Message>,
    outbox: Outbox,
    thread: Option<thread::JoinHandle<()>>,
    tally: Tally,
}

impl ZenohSink {
    /// Open the Zenoh session (it connects to the endpoints given, waiting for what their
    /// peers declared, within Zenoh's own timeouts) and start the thread that puts messages.
    pub fn start(config: ZenohConfig, tally: Tally) -> Result<ZenohSink, SinkError> {
        let outbox = Outbox::new(config.name(), config.per, config.buffer);
        let session_config = config.session_config().map_err(|e| outbox.error(e))?;
        let session = ::zenoh::open(session_config)
            .wait()
            .map_err(|e| outbox.error(format!("cannot open the Zenoh session: {e}")))?;
        let (tx, rx) = bounded(config.buffer);
        let put = Put {
            name: outbox.name.clone(),
            key: config.key.clone(),
            session,
            delivery: outbox.delivery.clone(),
        };
        let held = rx.clone();
        let thread = thread::Builder::new()
            .name("octopipe-zenoh".into())
            .spawn(move || put.drive(rx))
            .map_err(|e| outbox.error(format!("cannot start its thread: {e}")))?;
        Ok(ZenohSink {
            config,
            tx: Some(tx),
            held,
            outbox,
            thread: Some(thread),
            tally,
        })
    }

    /// Hand `batch`'s messages to the thread that puts them; never waits.
    pub fn publish(&mut self, batch: &CropBatch) -> Result<(), SinkError> {
        let Some(tx) = &self.tx else {
            return Err(self
                .outbox
                .error("published after the end of the stream".into()));
        };
        self.outbox.publish(batch, |m| match tx.try_send(m) {
            Ok(()) => Handed::Taken,
            Err(TrySendError::Full(_)) => Handed::Full,
            Err(TrySendError::Disconnected(_)) => Handed::Gone,
        })
    }

    /// Wait up to `flush-timeout` for the messages held to be put, then close the session.
    fn close(&mut self) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        self.outbox.flush(self.config.flush_timeout);
        // What is still held is not sent (counted: taken, not sent); the thread ends after the
        // message it is putting.
        while self.held.try_recv().is_ok() {}
        drop(tx);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Stage<CropBatch, CropBatch> for ZenohSink {
    fn process(&mut self, batch: CropBatch, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.publish(&batch)?;
        out.push(batch);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.close();
        let line = self.outbox.delivery.line(&self.outbox.name, "sent");
        self.tally.with(|t| t.add_line(line));
        Ok(())
    }
}

impl Drop for ZenohSink {
    fn drop(&mut self) {
        self.close();
    }
}

/// The thread's side: puts messages, in order, and counts them.
struct Put {
    name: String,
    key: Topic,
    session: ::zenoh::Session,
    delivery: Arc<Delivery>,
}

impl Put {
    fn drive(self, rx: Receiver<Message>) {
        for m in rx {
            let put = self
                .session
                .put(self.key.of(m.stream), m.payload)
                .congestion_control(CongestionControl::Block)
                .wait();
            match put {
                Ok(()) => {
                    self.delivery.delivered.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => tracing::warn!("{}: put failed: {e}", self.name),
            }
        }
        if let Err(e) = self.session.close().wait() {
            tracing::debug!("{}: closing the session: {e}", self.name);
        }
    }
}
