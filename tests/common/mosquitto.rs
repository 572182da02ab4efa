//! A real MQTT broker for the tests: Debian's `mosquitto` (installed by scripts/setup.sh) on a free
//! 127.0.0.1 port, with a generated configuration and its persistence in a folder of the test's,
//! started, stopped and started again by the test itself.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use super::messages::Received;

/// A mosquitto process of the test's.
pub struct Mosquitto {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Mosquitto {
    /// Start a broker on a free port; `None` (a printed skip, a failure under CI) when mosquitto
    /// is not installed.
    pub fn start(name: &str) -> Option<Mosquitto> {
        if Command::new("mosquitto").arg("-h").output().is_err() {
            super::skip("mosquitto is not installed: apt-get install mosquitto (scripts/setup.sh)");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let dir = super::temp_dir(&format!("mosquitto-{name}"));
        // Run as root (a container), mosquitto would switch to its own user, which cannot write
        // the test's folder.
        let user = if unsafe { libc::getuid() } == 0 {
            "user root\n"
        } else {
            ""
        };
        let config = format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n\
             persistence_location {}/\nlog_dest file {}/mosquitto.log\n{user}",
            dir.display(),
            dir.display()
        );
        std::fs::write(dir.join("mosquitto.conf"), config).unwrap();
        let mut broker = Mosquitto {
            port,
            dir,
            child: None,
        };
        broker.resume();
        Some(broker)
    }

    /// Start the broker again on the same port, with what it saved when it stopped.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "mosquitto is running already");
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(self.dir.join("mosquitto.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mosquitto");
        self.child = Some(child);
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "mosquitto did not listen on {} within 10 s:\n{}",
                self.port,
                self.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop the broker as a service manager would (SIGTERM: it saves its sessions and queued
    /// messages, then exits).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The broker's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("mosquitto.log")).unwrap_or_default()
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A subscriber with a persistent session (QoS 1, clean session off): the broker keeps what
/// arrives for it while it is away, also across a broker restart. Messages come on a channel; it
/// connects again on its own.
pub struct Subscriber {
    pub rx: mpsc::Receiver<Received>,
    client: rumqttc::Client,
    stop: Arc<AtomicBool>,
}

impl Subscriber {
    /// Subscribe to `filter` on the broker at `port`; returns once the broker confirmed.
    pub fn new(port: u16, id: &str, filter: &str) -> Subscriber {
        use rumqttc::{Event, MqttOptions, Packet, QoS};
        let mut options = MqttOptions::new(id, "127.0.0.1", port);
        options
            .set_clean_session(false)
            .set_keep_alive(Duration::from_secs(5))
            .set_max_packet_size(2 << 20, 64 << 10);
        let (client, mut connection) = rumqttc::Client::new(options, 100);
        client.subscribe(filter, QoS::AtLeastOnce).unwrap();
        let (tx, rx) = mpsc::channel();
        let (subscribed_tx, subscribed) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        thread::spawn(move || loop {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            match connection.recv() {
                Err(_) => return,
                Ok(Ok(Event::Incoming(Packet::SubAck(_)))) => {
                    let _ = subscribed_tx.send(());
                }
                Ok(Ok(Event::Incoming(Packet::Publish(p)))) => {
                    let json = serde_json::from_slice(&p.payload)
                        .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", p.payload));
                    if tx
                        .send(Received {
                            topic: p.topic,
                            json,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect))) => return,
                Ok(Ok(_)) => {}
                Ok(Err(_)) => thread::sleep(Duration::from_millis(100)),
            }
        });
        subscribed
            .recv_timeout(Duration::from_secs(10))
            .expect("the broker confirmed the subscription");
        Subscriber { rx, client, stop }
    }

    /// Take messages until `done` says so or nothing came for `quiet`.
    pub fn collect(
        &self,
        quiet: Duration,
        mut done: impl FnMut(&[Received]) -> bool,
    ) -> Vec<Received> {
        let mut got = Vec::new();
        while !done(&got) {
            match self.rx.recv_timeout(quiet) {
                Ok(m) => got.push(m),
                Err(_) => break,
            }
        }
        got
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.client.try_disconnect();
    }
}
