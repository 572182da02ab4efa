//! Messages for brokers (the `mqtt` and `zenoh` sinks): one JSON message per frame or per object,
//! schema version [`SCHEMA_VERSION`] (docs/messages.md), on a topic made from a template with
//! `{stream}` in it.
//!
//! A frame's message (`per=frame`) holds its objects exactly as the `jsonl` sink writes them,
//! under a header naming the frame; an object's message (`per=object`) is a `jsonl` line with the
//! version added. Both carry `"v":2`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use super::object::{pts_ms, timestamp, Object};
use crate::batch::CropBatch;

/// The version of the message schema (the `v` field); changed only when a field changes meaning
/// or goes away (fields may be added within a version).
pub const SCHEMA_VERSION: u32 = 2;

/// What one message carries (`per=frame|object`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, octopipe_core::stage::PropChoice)]
#[non_exhaustive]
pub enum Per {
    /// A frame with all its objects (also a frame with none).
    Frame,
    /// One object.
    Object,
}

/// A message ready to publish.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Message {
    /// Its stream (the topic's `{stream}`).
    pub stream: u32,
    /// Its frame.
    pub frame: u64,
    /// The JSON bytes.
    pub payload: Vec<u8>,
}

/// A frame's message.
#[derive(Serialize)]
struct FrameMessage<'a> {
    v: u32,
    stream: u32,
    frame: u64,
    source: &'a str,
    pts_ms: Option<f64>,
    timestamp: String,
    width: u32,
    height: u32,
    objects: &'a [Object],
}

/// An object's message.
#[derive(Serialize)]
struct ObjectMessage<'a> {
    v: u32,
    #[serde(flatten)]
    object: &'a Object,
}

/// The objects of a frame whose parts are still arriving.
struct Held {
    frame: u64,
    objects: Vec<Object>,
}

/// Turns finished batches into messages. A frame that travelled in parts (more boxes than the
/// batch stage's `max-crops`) is one message, made when its last part arrives; when its last part
/// was dropped on a live edge (the report counts the frame as dropped), the parts held are let go
/// when the stream's next frame comes.
pub struct Messages {
    per: Per,
    held: HashMap<u32, Held>,
}

impl Messages {
    /// Messages of the kind `per`.
    pub fn new(per: Per) -> Self {
        Messages {
            per,
            held: HashMap::new(),
        }
    }

    /// The messages of `batch`'s frames, in frame order, appended to `out`.
    pub fn of(&mut self, batch: &CropBatch, out: &mut Vec<Message>) -> serde_json::Result<()> {
        for frame in &batch.frames {
            let (stream, seq) = (frame.stream, frame.seq);
            if self.per == Per::Object {
                for object in Object::in_frame(frame) {
                    let v = SCHEMA_VERSION;
                    let payload = serde_json::to_vec(&ObjectMessage { v, object: &object })?;
                    out.push(Message {
                        stream,
                        frame: seq,
                        payload,
                    });
                }
                continue;
            }
            let held = self.held.remove(&stream).filter(|h| h.frame == seq);
            let mut objects = held.map(|h| h.objects).unwrap_or_default();
            objects.extend(Object::in_frame(frame));
            if !frame.part.is_last() {
                self.held.insert(
                    stream,
                    Held {
                        frame: seq,
                        objects,
                    },
                );
                continue;
            }
            let payload = serde_json::to_vec(&FrameMessage {
                v: SCHEMA_VERSION,
                stream,
                frame: seq,
                source: &frame.uri,
                pts_ms: pts_ms(frame),
                timestamp: timestamp(frame),
                width: frame.layout.width,
                height: frame.layout.height,
                objects: &objects,
            })?;
            out.push(Message {
                stream,
                frame: seq,
                payload,
            });
        }
        Ok(())
    }
}

/// A topic (MQTT) or key expression (Zenoh) template: `{stream}` is replaced by the stream id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic(String);

/// A topic template that cannot be published on ([`Topic::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopicError {
    /// The template is empty.
    #[error("a topic is needed")]
    Empty,
    /// Braces around something else than `{stream}`.
    #[error("'{template}': only {{stream}} may stand in braces")]
    Braces {
        /// The template as given.
        template: String,
    },
    /// One of the broker's wildcards.
    #[error("'{template}': '{wildcard}' is a wildcard, not allowed in a topic to publish on")]
    Wildcard {
        /// The template as given.
        template: String,
        /// The wildcard.
        wildcard: char,
    },
}

impl Topic {
    /// Check `template`: not empty, no braces but `{stream}`, none of `forbidden` (the broker's
    /// wildcards); `Err` says what is wrong.
    pub fn parse(template: &str, forbidden: &[char]) -> Result<Topic, TopicError> {
        let rest = template.replace("{stream}", "");
        if template.is_empty() {
            return Err(TopicError::Empty);
        }
        if rest.contains(['{', '}']) {
            return Err(TopicError::Braces {
                template: template.to_string(),
            });
        }
        if let Some(wildcard) = rest.chars().find(|c| forbidden.contains(c)) {
            return Err(TopicError::Wildcard {
                template: template.to_string(),
                wildcard,
            });
        }
        Ok(Topic(template.to_string()))
    }

    /// The topic of stream `stream`.
    pub fn of(&self, stream: u32) -> String {
        self.0.replace("{stream}", &stream.to_string())
    }

    /// The template as given.
    pub fn template(&self) -> &str {
        &self.0
    }
}

/// What became of a sink's messages, counted as they go (shared by the sink and the thread
/// that talks to the broker).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Delivery {
    /// Messages taken into the buffer.
    pub accepted: AtomicU64,
    /// Messages the broker has: acknowledged (MQTT QoS 1), or written to the connection (QoS 0),
    /// or put where a subscriber matched (Zenoh).
    pub delivered: AtomicU64,
    /// Messages put with no subscriber or peer matching them (Zenoh: nobody got them).
    pub unmatched: AtomicU64,
    /// Messages dropped from the buffer: older than its `buffer` seconds when newer ones of
    /// their stream came (the receiver away or slow for too long).
    pub dropped: AtomicU64,
    /// Messages dropped because they were larger than the sink sends.
    pub too_large: AtomicU64,
    /// Connections made again after one was lost.
    pub reconnects: AtomicU64,
}

impl Delivery {
    /// Shared counters, all zero.
    pub fn new() -> Arc<Delivery> {
        Arc::new(Delivery::default())
    }

    /// Messages accepted and neither delivered, put with nobody there, nor dropped yet.
    pub fn outstanding(&self) -> u64 {
        let n = |c: &AtomicU64| c.load(Ordering::SeqCst);
        n(&self.accepted)
            .saturating_sub(n(&self.delivered))
            .saturating_sub(n(&self.unmatched))
            .saturating_sub(n(&self.dropped))
    }

    /// The report's line: `NAME: M messages = D delivered + ... dropped (buffer full) ...`.
    #[cfg(test)]
    pub fn line(&self, name: &str, delivered: &str) -> String {
        self.section(name, delivered).to_string()
    }

    /// The report's section: the counts so far, for the sink `name` (`mqtt HOST:PORT`,
    /// `zenoh ...`), whose delivery is called `delivered` (`acknowledged`, `sent`).
    pub fn section(&self, name: &str, delivered: &str) -> BrokerSection {
        let n = |c: &AtomicU64| c.load(Ordering::SeqCst);
        let (dropped, too_large) = (n(&self.dropped), n(&self.too_large));
        BrokerSection {
            broker: name.to_string(),
            delivery: delivered.to_string(),
            messages: n(&self.accepted) + too_large,
            delivered: n(&self.delivered),
            unmatched: n(&self.unmatched),
            dropped_buffer_full: dropped,
            dropped_too_large: too_large,
            outstanding: self.outstanding(),
            reconnects: n(&self.reconnects),
        }
    }
}

/// What became of a broker sink's messages (JSON report: `sections.brokers`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct BrokerSection {
    /// The sink and its broker (`mqtt 127.0.0.1:1883`, `zenoh ...`).
    pub broker: String,
    /// What `delivered` means for it: `acknowledged` (MQTT QoS 1) or `sent`.
    pub delivery: String,
    /// Messages made: `delivered + unmatched + dropped_buffer_full + dropped_too_large +
    /// outstanding`.
    pub messages: u64,
    /// Messages the broker has.
    pub delivered: u64,
    /// Messages put with no subscriber or peer matching them (Zenoh: nobody got them).
    pub unmatched: u64,
    /// Messages dropped because the buffer was full.
    pub dropped_buffer_full: u64,
    /// Messages dropped for being larger than the sink sends.
    pub dropped_too_large: u64,
    /// Messages taken but not delivered when the sink closed.
    pub outstanding: u64,
    /// Connections made again after one was lost.
    pub reconnects: u64,
}

impl octopipe_core::budget::SectionKind for BrokerSection {
    const KIND: &'static str = "brokers";
}

impl std::fmt::Display for BrokerSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let delivered = &self.delivery;
        write!(
            f,
            "{}: {} messages = {} {delivered}",
            self.broker, self.messages, self.delivered
        )?;
        if self.unmatched > 0 {
            write!(f, " + {} published, no peer seen", self.unmatched)?;
        }
        write!(f, " + {} dropped (buffer full)", self.dropped_buffer_full)?;
        if self.dropped_too_large > 0 {
            write!(f, " + {} dropped (too large)", self.dropped_too_large)?;
        }
        if self.outstanding > 0 {
            write!(f, " + {} not {delivered} at the end", self.outstanding)?;
        }
        if self.reconnects > 0 {
            let s = plural(self.reconnects);
            write!(f, "; {} reconnect{s}", self.reconnects)?;
        }
        Ok(())
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_take_the_stream_and_refuse_wildcards() {
        let t = Topic::parse("octopipe/{stream}/objects", &['+', '#']).unwrap();
        assert_eq!(t.of(7), "octopipe/7/objects");
        let e = Topic::parse("a/+/b", &['+', '#']).unwrap_err().to_string();
        assert!(e.contains("'+' is a wildcard"), "{e}");
        let e = Topic::parse("a/{frame}", &[]).unwrap_err().to_string();
        assert!(e.contains("only {stream}"), "{e}");
        assert!(Topic::parse("", &[]).is_err());
    }

    #[test]
    fn the_line_adds_up() {
        let d = Delivery::default();
        d.accepted.store(13, Ordering::SeqCst);
        d.delivered.store(7, Ordering::SeqCst);
        d.dropped.store(3, Ordering::SeqCst);
        d.reconnects.store(1, Ordering::SeqCst);
        assert_eq!(
            d.line("mqtt 127.0.0.1:1883", "acknowledged"),
            "mqtt 127.0.0.1:1883: 13 messages = 7 acknowledged + 3 dropped (buffer full) \
             + 3 not acknowledged at the end; 1 reconnect"
        );
    }
}
