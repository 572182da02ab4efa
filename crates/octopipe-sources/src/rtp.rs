//! The sender's presentation times of a GStreamer head's frames received over RTP.
//!
//! A live head stamps a frame with the time its packets arrived (udpsrc), or that time smoothed
//! (rtpjitterbuffer): on a busy receiver, or behind a busy sender or network, a frame can arrive
//! more than half a frame interval off its schedule, and numbering frames by arrival would give
//! it the wrong number (and, with boxes keyed by frame number, another frame's boxes). Every RTP
//! packet carries the sender's presentation time of its frame (the RTP timestamp, in ticks of the
//! stream's clock rate). A probe on the depayloader's sink pad notes, per RTP timestamp, the
//! stamps its packets entered with; a decoded frame keeps its access unit's stamp, which is one of
//! them, so the frame's RTP timestamp is found again at the end of the head and frames are
//! numbered by the sender's clock.
//!
//! This works when the head holds exactly one RTP depayloader as an element of its own
//! (`udpsrc ... ! rtph264depay ! avdec_h264`, `rtspsrc ... ! rtph264depay ! ...`); a head that
//! depayloads inside a bin (`uridecodebin rtsp://...`) is numbered by its buffers' stamps.
//!
//! The same probe keeps what is not the stream out of the depayloader: anyone can send packets
//! to a UDP port, and garbage that reaches a depayloader poisons it (rtph264depay keeps a
//! garbage "SPS" it parsed and sends it before every keyframe after, so the decoder never
//! recovers). Packets pass from one sender (SSRC) at a time, and of the stream's payload
//! type; a new sender (one that restarted) takes over once it sent [`LOCK_RUN`] packets in
//! sequence, which random packets never do. What was kept out is counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;

/// Frames (distinct RTP timestamps) remembered: enough for the frames between the depayloader
/// and the end of the head (decoder delay and reordering, queues).
const FRAMES_KEPT: usize = 256;

/// Where a sender's first frame lies on the times given, in RTP ticks: far enough from zero that
/// a frame presented before it (a B-frame decoded after it) still has a time.
const FIRST_FRAME_TICKS: i64 = 1 << 32;

/// Packets in sequence after which a sender is the stream's (the first sender, or one that
/// restarted with a new SSRC).
pub(super) const LOCK_RUN: u16 = 4;

/// Senders heard but not taken, remembered at once (garbage comes from random SSRCs).
const CANDIDATES: usize = 16;

/// Which sender the stream is, and who else is sending.
#[derive(Debug, Default)]
struct Senders {
    current: Option<u32>,
    /// (SSRC, next sequence number, packets in sequence so far).
    candidates: VecDeque<(u32, u16, u16)>,
}

impl Senders {
    /// Whether a packet of `ssrc` numbered `seq` is the stream's.
    fn admit(&mut self, ssrc: u32, seq: u16) -> bool {
        if self.current == Some(ssrc) {
            return true;
        }
        let run = match self.candidates.iter_mut().find(|c| c.0 == ssrc) {
            Some(c) => {
                c.2 = if c.1 == seq { c.2 + 1 } else { 1 };
                c.1 = seq.wrapping_add(1);
                c.2
            }
            None => {
                if self.candidates.len() == CANDIDATES {
                    self.candidates.pop_front();
                }
                self.candidates.push_back((ssrc, seq.wrapping_add(1), 1));
                1
            }
        };
        if run >= LOCK_RUN {
            self.current = Some(ssrc);
            self.candidates.clear();
            return true;
        }
        false
    }
}

/// The packets of one frame (one RTP timestamp of one sender) and the stamps they entered the
/// depayloader with.
#[derive(Debug, Clone, Copy)]
struct FramePackets {
    ssrc: u32,
    rtp: u32,
    first: gst::ClockTime,
    last: gst::ClockTime,
}

/// Where the numbering stands: the last frame's sender and its extended RTP timestamp.
#[derive(Debug, Default)]
struct Unwrapped {
    last: Option<(u32, u32, i64)>,
}

/// The RTP timestamps of the frames of one head, noted as their packets enter its depayloader.
#[derive(Debug, Default)]
pub(super) struct RtpTimes {
    frames: Mutex<VecDeque<FramePackets>>,
    unwrapped: Mutex<Unwrapped>,
    /// The stream's RTP clock rate (from the depayloader's caps), 0 until known.
    clock_rate: AtomicI32,
    /// The stream's payload type (from the depayloader's caps), -1 until known.
    payload: AtomicI32,
    senders: Mutex<Senders>,
    /// Packets kept out of the depayloader: not RTP, another payload type, or not the
    /// stream's sender.
    foreign: AtomicU64,
}

/// A frame's presentation time on its sender's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SenderTime {
    /// Since an arbitrary origin of the sender's (RTP timestamps start at a random value).
    pub(super) time: Duration,
    /// The frame comes from another sender than the frame before it (a new SSRC: the sender
    /// restarted), whose clock has an origin of its own.
    pub(super) new_sender: bool,
}

impl RtpTimes {
    /// Watch the one RTP depayloader of `head`, if it has exactly one.
    pub(super) fn watch(head: &gst::Bin) -> Option<Arc<RtpTimes>> {
        let depayloaders: Vec<gst::Element> = head
            .iterate_recurse()
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| {
                e.factory().is_some_and(|f| {
                    let klass = f.metadata(gst::ELEMENT_METADATA_KLASS).unwrap_or("");
                    klass.contains("Depayloader") && klass.contains("RTP")
                })
            })
            .collect();
        let [depay] = depayloaders.as_slice() else {
            return None;
        };
        let pad = depay.static_pad("sink")?;
        let times = Arc::new(RtpTimes {
            payload: AtomicI32::new(-1),
            ..RtpTimes::default()
        });
        let noted = Arc::downgrade(&times);
        pad.add_probe(
            gst::PadProbeType::BUFFER | gst::PadProbeType::BUFFER_LIST,
            move |pad, info| {
                let Some(times) = noted.upgrade() else {
                    return gst::PadProbeReturn::Remove;
                };
                if times.clock_rate.load(Ordering::Relaxed) <= 0 {
                    times.note_caps(pad);
                }
                match &mut info.data {
                    Some(gst::PadProbeData::Buffer(buffer)) => {
                        if !times.admit(buffer) {
                            // Handled: the binding lets go of the buffer it holds (Drop would
                            // have GStreamer unref it a second time).
                            return gst::PadProbeReturn::Handled;
                        }
                        times.note(buffer);
                    }
                    Some(gst::PadProbeData::BufferList(list)) => {
                        list.make_mut().foreach_mut(|b, _| {
                            let keep = times.admit(&b);
                            if keep {
                                times.note(&b);
                            }
                            std::ops::ControlFlow::Continue(keep.then_some(b))
                        });
                    }
                    _ => {}
                }
                gst::PadProbeReturn::Ok
            },
        )?;
        Some(times)
    }

    fn note_caps(&self, pad: &gst::Pad) {
        let Some(caps) = pad.current_caps() else {
            return;
        };
        let Some(s) = caps.structure(0) else { return };
        if let Ok(rate) = s.get::<i32>("clock-rate") {
            self.clock_rate.store(rate, Ordering::Relaxed);
        }
        if let Ok(payload) = s.get::<i32>("payload") {
            self.payload.store(payload, Ordering::Relaxed);
        }
    }

    /// Whether `buffer` is a packet of the stream (see the module doc); counts it when not.
    fn admit(&self, buffer: &gst::BufferRef) -> bool {
        let ok = buffer.map_readable().ok().is_some_and(|map| {
            let Some((_, ssrc)) = rtp_header(&map) else {
                return false;
            };
            let payload = i32::from(map[1] & 0x7f);
            let expected = self.payload.load(Ordering::Relaxed);
            if expected >= 0 && payload != expected {
                return false;
            }
            let seq = u16::from_be_bytes([map[2], map[3]]);
            self.senders
                .lock()
                .map(|mut s| s.admit(ssrc, seq))
                .unwrap_or(true)
        });
        if !ok {
            self.foreign.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Packets kept out of the depayloader so far.
    pub(super) fn foreign(&self) -> u64 {
        self.foreign.load(Ordering::Relaxed)
    }

    /// Note one RTP packet: its sender, RTP timestamp and the stamp it entered with.
    fn note(&self, buffer: &gst::BufferRef) {
        let Some(pts) = buffer.pts() else { return };
        let Ok(map) = buffer.map_readable() else {
            return;
        };
        let Some((rtp, ssrc)) = rtp_header(&map) else {
            return;
        };
        let Ok(mut frames) = self.frames.lock() else {
            return;
        };
        match frames
            .iter_mut()
            .rev()
            .find(|f| f.rtp == rtp && f.ssrc == ssrc)
        {
            Some(f) => {
                f.first = f.first.min(pts);
                f.last = f.last.max(pts);
            }
            None => {
                if frames.len() == FRAMES_KEPT {
                    frames.pop_front();
                }
                frames.push_back(FramePackets {
                    ssrc,
                    rtp,
                    first: pts,
                    last: pts,
                });
            }
        }
    }

    /// The sender's time of the decoded frame stamped `pts` (the stamp its access unit left the
    /// depayloader with), if its packets were seen.
    pub(super) fn sender_time(&self, pts: gst::ClockTime) -> Option<SenderTime> {
        let rate = self.clock_rate.load(Ordering::Relaxed);
        if rate <= 0 {
            return None;
        }
        let found = *self
            .frames
            .lock()
            .ok()?
            .iter()
            .rfind(|f| f.first <= pts && pts <= f.last)?;
        let mut unwrapped = self.unwrapped.lock().ok()?;
        let (extended, new_sender) = match unwrapped.last {
            // RTP timestamps wrap at 2^32 ticks (13 h at 90 kHz): a frame is the nearest
            // timestamp to the one before it.
            Some((ssrc, rtp, ext)) if ssrc == found.ssrc => {
                (ext + i64::from(found.rtp.wrapping_sub(rtp) as i32), false)
            }
            last => (FIRST_FRAME_TICKS, last.is_some()),
        };
        unwrapped.last = Some((found.ssrc, found.rtp, extended));
        Some(SenderTime {
            time: Duration::from_secs_f64(extended.max(0) as f64 / f64::from(rate)),
            new_sender,
        })
    }
}

/// The RTP timestamp and SSRC of an RTP packet (version 2), if `packet` is one.
fn rtp_header(packet: &[u8]) -> Option<(u32, u32)> {
    if packet.len() < 12 || packet[0] >> 6 != 2 {
        return None;
    }
    let word = |at: usize| {
        u32::from_be_bytes([packet[at], packet[at + 1], packet[at + 2], packet[at + 3]])
    };
    Some((word(4), word(8)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(rtp: u32, ssrc: u32) -> gst::Buffer {
        let mut bytes = vec![0x80, 96];
        bytes.extend_from_slice(&[0, 1]);
        bytes.extend_from_slice(&rtp.to_be_bytes());
        bytes.extend_from_slice(&ssrc.to_be_bytes());
        bytes.extend_from_slice(&[0; 8]);
        gst::init().unwrap();
        gst::Buffer::from_mut_slice(bytes)
    }

    fn times() -> RtpTimes {
        gst::init().unwrap();
        let t = RtpTimes::default();
        t.clock_rate.store(90_000, Ordering::Relaxed);
        t
    }

    fn note(t: &RtpTimes, rtp: u32, ssrc: u32, ms: u64) {
        let mut b = packet(rtp, ssrc);
        b.get_mut()
            .unwrap()
            .set_pts(gst::ClockTime::from_mseconds(ms));
        t.note(&b);
    }

    fn ms(t: &RtpTimes, at: u64) -> Option<(i64, bool)> {
        t.sender_time(gst::ClockTime::from_mseconds(at)).map(|s| {
            let since = s.time.as_secs_f64() - FIRST_FRAME_TICKS as f64 / 90_000.0;
            ((since * 1000.0).round() as i64, s.new_sender)
        })
    }

    #[test]
    fn frames_take_their_rtp_time_whatever_their_packets_arrival() {
        let t = times();
        // Frame 0 (rtp 1000) arrives on time; frame 1 (+3000 ticks = 33.3 ms) 60 ms late, in two
        // packets; frame 2 on time again.
        note(&t, 1000, 7, 0);
        note(&t, 4000, 7, 93);
        note(&t, 4000, 7, 95);
        note(&t, 7000, 7, 97);
        assert_eq!(ms(&t, 0), Some((0, false)));
        assert_eq!(ms(&t, 95), Some((33, false)));
        assert_eq!(ms(&t, 97), Some((67, false)));
        assert_eq!(ms(&t, 500), None, "a stamp no packet had");
    }

    #[test]
    fn timestamps_wrap_and_senders_restart() {
        let t = times();
        note(&t, u32::MAX - 1499, 7, 0);
        note(&t, 1500, 7, 33);
        assert_eq!(ms(&t, 0), Some((0, false)));
        assert_eq!(ms(&t, 33), Some((33, false)), "3000 ticks across the wrap");
        note(&t, 5, 9, 66);
        assert_eq!(ms(&t, 66), Some((0, true)), "a new SSRC is a new sender");
    }

    #[test]
    fn one_sender_at_a_time_and_garbage_never_takes_over() {
        let mut s = Senders::default();
        // Garbage first: random SSRCs and numbers.
        let mut x = 0x9e37_79b9_u32;
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            assert!(!s.admit(x, (x >> 7) as u16));
        }
        // The sender: its first LOCK_RUN - 1 packets wait, then it is the stream.
        let admitted: Vec<bool> = (100..110).map(|seq| s.admit(7, seq)).collect();
        assert_eq!(
            admitted,
            [false, false, false, true, true, true, true, true, true, true]
        );
        assert!(!s.admit(8, 1), "another sender");
        assert!(s.admit(7, 500), "the sender, whatever its numbers");
        // It restarts with a new SSRC.
        let restarted: Vec<bool> = (0..5).map(|seq| s.admit(9, seq)).collect();
        assert_eq!(restarted, [false, false, false, true, true]);
        assert!(!s.admit(7, 501), "the old sender is gone");
    }

    #[test]
    fn only_rtp_version_2_packets_are_read() {
        assert_eq!(rtp_header(&[0x80; 11]), None);
        assert_eq!(rtp_header(&[0x40; 12]), None);
        let p = packet(0x01020304, 0x0a0b0c0d);
        assert_eq!(
            rtp_header(&p.map_readable().unwrap()),
            Some((0x01020304, 0x0a0b0c0d))
        );
    }
}
