//! The `mqtt` sink: one JSON message per frame (or per object) to an MQTT broker.
//!
//! ```text
//! ... ! classify model=m.onnx ! mqtt host=127.0.0.1 port=1883 topic=octopipe/{stream}/objects qos=1
//! ... ! mqtt host=broker.example port=8883 tls=true ca-file=ca.pem username=station-7 password-env=MQTT_PASSWORD
//! ```
//!
//! Messages (schema in docs/messages.md, `"v":2`) go on `topic` with `{stream}` replaced by the
//! stream id. The sink never waits for the broker: a message goes into a buffer holding the
//! last `buffer` seconds of each stream's messages, which a thread of its own (`octopipe-mqtt`,
//! with rumqttc) sends from while connected; a stream's message older than that when a newer
//! one comes is dropped and counted, so the pipeline is held back by nothing but its own edges
//! and a broker outage shorter than `buffer` loses nothing. A lost connection is made again
//! with a backoff (0.1 s doubling to 1 s); at QoS 1 the messages sent but not acknowledged are
//! sent again (a receiver may then see a message twice: QoS 1 is at least once; `stream` and
//! `frame` identify it). At the end of the stream the sink waits up to `flush-timeout` for what
//! it holds to be delivered; the report has a line of what became of the messages, and a sink
//! that delivered none of what it was given fails the run, saying so:
//!
//! ```text
//! mqtt 127.0.0.1:1883: 300 messages = 290 acknowledged + 10 dropped (buffer full); 1 reconnect
//! ```
//!
//! **TLS** (`tls=true`, rustls): the broker's certificate is checked against `ca-file` (PEM),
//! or the system's CA bundle without one; `cert-file` and `key-file` (PEM) authenticate the
//! station. **Credentials**: `username`, and the password from `password-file` (its first line)
//! or the environment variable `password-env` names, never from the description, never shown.
//! The default client id is unique per host and process: `octopipe-HOST-PID-RANDOM` (two
//! sinks with one id take the broker's session from each other).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rumqttc::{
    Client, Connection, Event, MqttOptions, Outgoing, Packet, QoS, TlsConfiguration,
    Transport as Tls,
};

use super::backlog::Backlog;
use super::broker::{BrokerSink, Sending, SendingProps, Transport, MAX_MESSAGE};
use super::error::SinkError;
use super::message::{Delivery, Topic};
use super::mqtt_pem::{certificates, private_key};
use octopipe_core::budget::Tally;
use octopipe_core::description::DescribeError;
use octopipe_core::error::Error;
use octopipe_core::stage::{
    Element, OpenContext, PropChoice, Properties, Props, Role, Running, StageDecl,
};

/// First wait before connecting again; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait before connecting again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A quiet connection is checked with a ping this often (a broker gone without closing it is
/// noticed within about twice this).
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// How often the threads look whether the sink is stopping.
const POLL: Duration = Duration::from_millis(10);
/// Requests rumqttc queues between the pump and its event loop.
const QUEUED: usize = 64;
/// Where Debian keeps the system's CA certificates (`tls=true` without `ca-file`).
const SYSTEM_CA: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The largest PEM or password file read.
const MAX_SECRET_FILE: u64 = 1 << 20;

/// The MQTT quality of service (`qos=0|1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
pub(crate) enum Qos {
    /// QoS 0: at most once.
    #[choice(name = "0")]
    AtMostOnce,
    /// QoS 1: at least once (sent again until acknowledged).
    #[choice(name = "1")]
    AtLeastOnce,
}

/// The `mqtt` sink's properties, declared once ([`MQTT`]).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct MqttProps {
    /// the broker's host name or address
    #[prop(default = "127.0.0.1")]
    pub host: String,
    /// the broker's port
    #[prop(default = 1883, range = 1..=65535)]
    pub port: u16,
    /// the topic; {stream} is replaced by the stream id
    #[prop(default = "octopipe/{stream}/objects")]
    pub topic: String,
    /// 0: at most once; 1: at least once (sent again until acknowledged)
    #[prop(default = "1")]
    pub qos: Qos,
    /// the MQTT client id (unique per broker)
    #[prop(default = "octopipe-HOST-PID-RANDOM", value = None)]
    pub client_id: Option<String>,
    /// TLS (rustls): the broker's certificate is checked
    #[prop(default = false)]
    pub tls: bool,
    /// with tls: the CA certificates (PEM) the broker's is checked against (default: the system's)
    pub ca_file: Option<PathBuf>,
    /// with tls: this station's certificate (PEM)
    pub cert_file: Option<PathBuf>,
    /// with tls: this station's private key (PEM)
    pub key_file: Option<PathBuf>,
    /// the user name to connect as
    pub username: Option<String>,
    /// with username: a file whose first line is the password
    pub password_file: Option<PathBuf>,
    /// with username: the environment variable holding the password
    pub password_env: Option<String>,
    /// `per=`, `buffer=`, `flush-timeout=`.
    #[prop(flatten)]
    pub sending: SendingProps,
}

/// `mqtt host=... port=... topic=... qos=0|1`.
pub const MQTT: StageDecl = StageDecl {
    name: "mqtt",
    role: Role::Sink,
    doc: "one JSON message per frame (or object) to an MQTT broker (TLS, credentials); never waits for it",
    props: MqttProps::PROPS,
    needs: &[Role::Boxes, Role::Batch],
    provides: &[],
    make: make_mqtt,
};

/// A secret (a password): its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// TLS settings: PEM bytes read when the sink was described.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificates.
    pub ca: Vec<u8>,
    /// The station's certificate and key, for client authentication.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TlsFiles(ca: {} bytes, client: {})",
            self.ca.len(),
            self.client.is_some()
        )
    }
}

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
    /// The client id; `None`: `octopipe-HOST-PID-RANDOM`.
    pub client_id: Option<String>,
    /// TLS, when on.
    pub tls: Option<TlsFiles>,
    /// User name and password.
    pub credentials: Option<(String, Secret)>,
    /// Messages, buffer, flush.
    pub sending: Sending,
}

/// The bytes of a file of a property, bounded.
fn read_file(p: &Props, key: &str, path: &Path) -> Result<Vec<u8>, DescribeError> {
    octopipe_core::files::read_bounded(path, MAX_SECRET_FILE)
        .map_err(|e| p.error(key, format!("mqtt: {key} '{}': {e}", path.display())))
}

/// [`MqttProps`], then the checks across them and the files they name (read now, so a missing
/// certificate is a description error).
fn make_mqtt(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let m = MqttProps::from_props(p)?;
    let topic = Topic::parse(&m.topic, &['+', '#']).map_err(|e| p.error("topic", e.to_string()))?;
    if m.host.is_empty() {
        return Err(p.error("host", "a host name or address is needed"));
    }
    if m.client_id.as_deref() == Some("") {
        return Err(p.error(
            "client-id",
            "an empty client id: leave it out for a unique one",
        ));
    }
    let tls = match m.tls {
        true => Some(tls_files(p, &m)?),
        false => {
            let given = [
                ("ca-file", &m.ca_file),
                ("cert-file", &m.cert_file),
                ("key-file", &m.key_file),
            ];
            if let Some((key, _)) = given.into_iter().find(|(_, v)| v.is_some()) {
                return Err(p.error(key, format!("{key} needs tls=true")));
            }
            None
        }
    };
    let credentials = credentials(p, &m)?;
    Ok(Box::new(MqttConfig {
        host: m.host,
        port: m.port,
        topic,
        at_least_once: m.qos == Qos::AtLeastOnce,
        client_id: m.client_id,
        tls,
        credentials,
        sending: m.sending.into(),
    }))
}

fn tls_files(p: &Props, m: &MqttProps) -> Result<TlsFiles, DescribeError> {
    let ca = match &m.ca_file {
        Some(path) => certificates(p, "ca-file", path, read_file(p, "ca-file", path)?)?,
        None => octopipe_core::files::read_bounded(Path::new(SYSTEM_CA), 16 << 20).map_err(|e| {
            p.error("tls", format!("mqtt: tls=true without ca-file: the system's CA certificates ({SYSTEM_CA}): {e}; give ca-file=PEM"))
        })?,
    };
    let client = match (&m.cert_file, &m.key_file) {
        (Some(cert), Some(key)) => Some((
            certificates(p, "cert-file", cert, read_file(p, "cert-file", cert)?)?,
            private_key(p, key, read_file(p, "key-file", key)?)?,
        )),
        (None, None) => None,
        (Some(_), None) => return Err(p.error("cert-file", "cert-file needs key-file")),
        (None, Some(_)) => return Err(p.error("key-file", "key-file needs cert-file")),
    };
    Ok(TlsFiles { ca, client })
}

/// User name and password: the password from a file or an environment variable, never from
/// the description itself (which is logged and shown).
fn credentials(p: &Props, m: &MqttProps) -> Result<Option<(String, Secret)>, DescribeError> {
    let password = match (&m.password_file, &m.password_env) {
        (Some(_), Some(_)) => {
            return Err(p.error(
                "password-env",
                "give password-file or password-env, not both",
            ))
        }
        (Some(path), None) => {
            let bytes = read_file(p, "password-file", path)?;
            let text = String::from_utf8(bytes).map_err(|_| {
                p.error(
                    "password-file",
                    format!("mqtt: password-file '{}': not UTF-8 text", path.display()),
                )
            })?;
            Some(text.lines().next().unwrap_or("").to_string())
        }
        (None, Some(var)) => Some(std::env::var(var).map_err(|_| {
            p.error(
                "password-env",
                format!("mqtt: password-env: the environment variable {var} is not set"),
            )
        })?),
        (None, None) => None,
    };
    match (&m.username, password) {
        (Some(u), password) => Ok(Some((u.clone(), Secret(password.unwrap_or_default())))),
        (None, Some(_)) => Err(p.error("username", "a password needs username=")),
        (None, None) => Ok(None),
    }
}

impl MqttConfig {
    /// How the report and errors name the broker: `mqtt HOST:PORT`.
    pub fn name(&self) -> String {
        format!("mqtt {}:{}", self.host, self.port)
    }
}

impl Element for MqttConfig {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let sink = start(*self, ctx.tally.clone())?.stopped_by(ctx.stopped_early.clone());
        Ok(Running::stage(Box::new(sink)))
    }
}

/// A client id unique per host and process: `octopipe-HOST-PID-RANDOM`.
pub fn unique_client_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static CLIENTS: AtomicU64 = AtomicU64::new(0);
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer we own.
    let ok = unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } == 0;
    let host = match ok {
        true => {
            let end = host.iter().position(|b| *b == 0).unwrap_or(host.len());
            String::from_utf8_lossy(&host[..end]).into_owned()
        }
        false => "host".to_string(),
    };
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    // Random keys per process (the standard library seeds them from the OS).
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(CLIENTS.fetch_add(1, Ordering::Relaxed));
    format!(
        "octopipe-{host}-{}-{:08x}",
        std::process::id(),
        h.finish() as u32
    )
}

/// Start the `mqtt` sink: its threads connect, and connect again, on their own; nothing waits
/// for the broker here.
fn start(config: MqttConfig, tally: Tally) -> Result<BrokerSink<Mqtt>, SinkError> {
    let name = config.name();
    let id = config.client_id.clone().unwrap_or_else(unique_client_id);
    let mut options = MqttOptions::new(id, &config.host, config.port);
    options
        .set_keep_alive(KEEP_ALIVE)
        .set_max_packet_size(64 * 1024, MAX_MESSAGE + 64 * 1024);
    if let Some((user, Secret(password))) = &config.credentials {
        options.set_credentials(user.clone(), password.clone());
    }
    if let Some(tls) = &config.tls {
        options.set_transport(Tls::tls_with_config(TlsConfiguration::Simple {
            ca: tls.ca.clone(),
            alpn: None,
            client_auth: tls.client.clone(),
        }));
    }
    let (client, connection) = Client::new(options, QUEUED);
    let delivery = Delivery::new();
    let backlog = Backlog::new(config.sending.buffer, delivery.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let up = Arc::new(AtomicBool::new(false));
    let spawn_error = |e: std::io::Error| {
        SinkError::network(name.clone(), format!("cannot start its thread: {e}")).caused_by(e)
    };
    let link = Link {
        name: name.clone(),
        at_least_once: config.at_least_once,
        delivery: delivery.clone(),
        stop: stop.clone(),
        up: up.clone(),
    };
    let link = thread::Builder::new()
        .name("octopipe-mqtt".into())
        .spawn(move || link.drive(connection))
        .map_err(spawn_error)?;
    let qos = match config.at_least_once {
        true => QoS::AtLeastOnce,
        false => QoS::AtMostOnce,
    };
    let pump = Pump {
        client: client.clone(),
        topic: config.topic,
        qos,
        backlog: backlog.clone(),
        stop: stop.clone(),
        up,
    };
    let pump = thread::Builder::new()
        .name("octopipe-mqtt-send".into())
        .spawn(move || pump.run())
        .map_err(spawn_error)?;
    let mqtt = Mqtt {
        client: Some(client),
        qos,
        stop,
        threads: vec![link, pump],
    };
    Ok(BrokerSink::new(
        name,
        config.sending,
        (delivery, backlog),
        mqtt,
        tally,
    ))
}

/// The `mqtt` sink's transport: rumqttc's client, its connection thread and the thread that
/// takes messages from the backlog while connected.
struct Mqtt {
    client: Option<Client>,
    qos: QoS,
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Transport for Mqtt {
    fn alive(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// Say goodbye to the broker and stop the threads.
    fn close(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(client) = self.client.take() {
            let _ = client.try_disconnect();
        }
        for t in self.threads.drain(..) {
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

/// Takes messages from the backlog to rumqttc while connected (while not, they wait in the
/// backlog, which keeps each stream's last `buffer` seconds).
struct Pump {
    client: Client,
    topic: Topic,
    qos: QoS,
    backlog: Arc<Backlog>,
    stop: Arc<AtomicBool>,
    up: Arc<AtomicBool>,
}

impl Pump {
    fn run(self) {
        while !self.stop.load(Ordering::SeqCst) {
            if !self.up.load(Ordering::SeqCst) {
                thread::sleep(POLL);
                continue;
            }
            let Some(m) = self.backlog.pop(POLL * 5) else {
                continue;
            };
            let (stream, frame) = (m.stream, m.frame);
            let topic = self.topic.of(stream);
            if self
                .client
                .try_publish(topic, self.qos, false, m.payload.clone())
                .is_err()
            {
                // rumqttc's queue is full: wait for its event loop.
                self.backlog.unpop(super::message::Message {
                    stream,
                    frame,
                    payload: m.payload,
                });
                thread::sleep(POLL);
            }
        }
    }
}

/// The connection thread's side: drives rumqttc's event loop, counts deliveries, connects again
/// with a backoff.
struct Link {
    name: String,
    at_least_once: bool,
    delivery: Arc<Delivery>,
    stop: Arc<AtomicBool>,
    up: Arc<AtomicBool>,
}

impl Link {
    fn drive(self, mut connection: Connection) {
        let mut backoff = MIN_BACKOFF;
        // Whether connected ever, and whether the failure was said.
        let (mut ever, mut warned) = (false, false);
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
                    (ever, warned) = (true, false);
                    self.up.store(true, Ordering::SeqCst);
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
                    let was_up = self.up.swap(false, Ordering::SeqCst);
                    if !warned {
                        let what = if was_up {
                            "connection lost"
                        } else {
                            "cannot connect"
                        };
                        tracing::warn!(
                            "{}: {what} ({e}); connecting again with a backoff (at most {} s), holding each stream's last messages",
                            self.name,
                            MAX_BACKOFF.as_secs_f64()
                        );
                        warned = true;
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_differ_within_and_across_processes() {
        let (a, b) = (unique_client_id(), unique_client_id());
        assert_ne!(a, b);
        let pid = std::process::id().to_string();
        assert!(
            a.starts_with("octopipe-") && a.contains(&format!("-{pid}-")),
            "{a}"
        );
        assert!(
            a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{a}"
        );
        assert_eq!(format!("{:?}", Secret("hunter2".into())), "Secret(***)");
    }

    #[test]
    fn the_broker_sinks_default_sending_is_the_declared_one() {
        let d = Sending::from(SendingProps::default());
        assert_eq!(d.per, super::super::message::Per::Frame);
        assert_eq!(d.buffer, Duration::from_secs(10));
        assert_eq!(d.flush_timeout, Duration::from_secs(3));
        let m = MqttProps::default();
        assert_eq!((m.port, m.qos, m.client_id), (1883, Qos::AtLeastOnce, None));
    }
}
