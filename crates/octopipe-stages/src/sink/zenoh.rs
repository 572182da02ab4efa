//! The `zenoh` sink: the `mqtt` sink's messages on Zenoh key expressions, peer to peer (no
//! router needed).
//!
//! ```text
//! ... ! classify model=m.onnx ! zenoh key=octopipe/{stream}/objects connect=tcp/10.0.0.5:7447
//! ```
//!
//! The same JSON messages as the `mqtt` sink (docs/messages.md, `"v":2`), put on `key` with
//! `{stream}` replaced by the stream id; a subscriber takes every stream with
//! `octopipe/*/objects`. The session is a peer (`mode=peer`, default) or a client of a Zenoh
//! router (`mode=client`); it talks to the endpoints given (`connect`, `listen`), and with
//! `scouting=true` also to the peers and routers that multicast scouting finds on the LAN (off by
//! default: nothing but the endpoints given). As with `mqtt`, the pipeline never waits: messages
//! wait in a buffer of the last `buffer` seconds of each stream's messages that a thread of its
//! own (`octopipe-zenoh`) puts; older ones are dropped and counted. The report has a line of
//! what became of them:
//!
//! ```text
//! zenoh octopipe/{stream}/objects: 300 messages = 280 sent to a subscriber + 20 published, no peer seen + 0 dropped (buffer full)
//! ```
//!
//! A message counts as sent only when a subscriber (or a router or storage) matched its key
//! when it was put; one put with nobody matching is "published, no peer seen": Zenoh keeps no
//! message for a subscriber that is not there (a subscriber that must not miss any uses a Zenoh
//! storage, or MQTT at QoS 1). A sink that sent none of its messages to anyone fails the run
//! at its end, saying so.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ::zenoh::qos::CongestionControl;
use ::zenoh::Wait;

use super::backlog::Backlog;
use super::broker::{BrokerSink, Sending, SendingProps, Transport};
use super::error::SinkError;
use super::message::{Delivery, Topic};
use octopipe_core::budget::Tally;
use octopipe_core::description::DescribeError;
use octopipe_core::error::Error;
use octopipe_core::stage::{
    Element, OpenContext, PropChoice, Properties, Props, Role, Running, StageDecl,
};

/// How the Zenoh session takes part (`mode=peer|client`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
pub(crate) enum ZenohMode {
    /// A peer: talks to peers directly.
    Peer,
    /// A client of a Zenoh router.
    Client,
}

/// The `zenoh` sink's properties, declared once ([`ZENOH`]).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct ZenohProps {
    /// the key expression; {stream} is replaced by the stream id
    #[prop(default = "octopipe/{stream}/objects")]
    pub key: String,
    /// a peer (talks to peers directly) or a client of a Zenoh router
    #[prop(default = "peer")]
    pub mode: ZenohMode,
    /// endpoints to connect to, comma-separated (tcp/127.0.0.1:7447)
    #[prop(value = Vec::new())]
    pub connect: Vec<String>,
    /// endpoints to listen on, comma-separated (tcp/0.0.0.0:7447)
    #[prop(value = Vec::new())]
    pub listen: Vec<String>,
    /// also find peers and routers on the LAN by multicast scouting
    #[prop(default = false)]
    pub scouting: bool,
    /// `per=`, `buffer=`, `flush-timeout=`.
    #[prop(flatten)]
    pub sending: SendingProps,
}

/// `zenoh key=... connect=... listen=...`.
pub const ZENOH: StageDecl = StageDecl {
    name: "zenoh",
    role: Role::Sink,
    doc: "the mqtt sink's JSON messages on Zenoh key expressions, peer to peer; never waits",
    props: ZenohProps::PROPS,
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
    /// Messages, buffer, flush.
    pub sending: Sending,
}

/// [`ZenohProps`], then the checks across them (someone to talk to, TCP endpoints, a session
/// configuration Zenoh takes).
fn make_zenoh(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let z = ZenohProps::from_props(p)?;
    let key =
        Topic::parse(&z.key, &['*', '$', '?', '#']).map_err(|e| p.error("key", e.to_string()))?;
    let config = ZenohConfig {
        key,
        client: z.mode == ZenohMode::Client,
        connect: z.connect,
        listen: z.listen,
        scouting: z.scouting,
        sending: z.sending.into(),
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
        let sink = start(*self, ctx.tally.clone())?.stopped_by(ctx.stopped_early.clone());
        Ok(Running::stage(Box::new(sink)))
    }
}

/// Open the Zenoh session (it connects to the endpoints given, waiting for what their peers
/// declared, within Zenoh's own timeouts) and start the thread that puts messages.
fn start(config: ZenohConfig, tally: Tally) -> Result<BrokerSink<Zenoh>, SinkError> {
    let name = config.name();
    let error = |reason: String| SinkError::network(name.clone(), reason);
    let session = ::zenoh::open(config.session_config().map_err(error)?)
        .wait()
        .map_err(|e| error(format!("cannot open the Zenoh session: {e}")))?;
    let delivery = Delivery::new();
    let backlog = Backlog::new(config.sending.buffer, delivery.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let put = Put {
        name: name.clone(),
        key: config.key.clone(),
        session,
        delivery: delivery.clone(),
        backlog: backlog.clone(),
        stop: stop.clone(),
    };
    let thread = thread::Builder::new()
        .name("octopipe-zenoh".into())
        .spawn(move || put.drive())
        .map_err(|e| error(format!("cannot start its thread: {e}")).caused_by(e))?;
    let zenoh = Zenoh {
        stop,
        thread: Some(thread),
    };
    Ok(BrokerSink::new(
        name,
        config.sending,
        (delivery, backlog),
        zenoh,
        tally,
    ))
}

/// The `zenoh` sink's transport: the thread that puts what the backlog holds.
struct Zenoh {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Transport for Zenoh {
    fn alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// What is still held is not sent (counted: taken, not sent); the thread ends after the
    /// message it is putting, and closes the session.
    fn close(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn delivered(&self) -> &'static str {
        "sent to a subscriber"
    }
}

/// The thread's side: puts messages, oldest first, each on its stream's publisher, and counts
/// whether anyone matched it.
struct Put {
    name: String,
    key: Topic,
    session: ::zenoh::Session,
    delivery: Arc<Delivery>,
    backlog: Arc<Backlog>,
    stop: Arc<AtomicBool>,
}

impl Put {
    fn drive(self) {
        let mut publishers = HashMap::new();
        let mut told = false;
        while !self.stop.load(Ordering::SeqCst) {
            let Some(m) = self.backlog.pop(Duration::from_millis(50)) else {
                continue;
            };
            let publisher = match publishers.entry(m.stream) {
                std::collections::hash_map::Entry::Occupied(p) => p.into_mut(),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    let declared = self
                        .session
                        .declare_publisher(self.key.of(m.stream))
                        .congestion_control(CongestionControl::Block)
                        .wait();
                    match declared {
                        Ok(p) => slot.insert(p),
                        Err(e) => {
                            tracing::warn!("{}: cannot declare a publisher: {e}", self.name);
                            continue;
                        }
                    }
                }
            };
            let matched = publisher
                .matching_status()
                .wait()
                .is_ok_and(|s| s.matching());
            match publisher.put(m.payload).wait() {
                Ok(()) if matched => {
                    self.delivery.delivered.fetch_add(1, Ordering::SeqCst);
                }
                Ok(()) => {
                    self.delivery.unmatched.fetch_add(1, Ordering::SeqCst);
                    if !std::mem::replace(&mut told, true) {
                        tracing::warn!(
                            "{}: published with no subscriber or peer seen for {}: nobody gets these messages (counted)",
                            self.name,
                            self.key.of(m.stream)
                        );
                    }
                }
                Err(e) => {
                    self.delivery.unmatched.fetch_add(1, Ordering::SeqCst);
                    tracing::warn!("{}: put failed: {e}", self.name);
                }
            }
        }
        drop(publishers);
        if let Err(e) = self.session.close().wait() {
            tracing::debug!("{}: closing the session: {e}", self.name);
        }
    }
}
