//! The `rtp` source stage: video over RTP on a UDP port, described by octopipe's own typed
//! properties (what a stream added over HTTP uses instead of a GStreamer launch fragment).
//!
//! ```text
//! rtp port=5004 encoding=h264 ! boxes format=synthetic ! ...
//! rtp address=127.0.0.1 port=5004 encoding=h265 latency=50 decoder=nvdec ! ...
//! ```
//!
//! It is the GStreamer head a user would write, built from checked values only (an IP address,
//! numbers, one of the listed encodings), so no property can reach GStreamer's parser as text of
//! its own:
//!
//! ```text
//! udpsrc address=A port=P caps="application/x-rtp,media=video,encoding-name=H264,payload=96,clock-rate=90000"
//!   [! rtpjitterbuffer latency=L] ! rtph264depay ! avdec_h264          (decoder=cpu)
//!                                 ! rtph264depay ! h264parse ! decodebin (decoder=nvdec|auto)
//! ```
//!
//! Frames are numbered by the sender's RTP timestamps. Garbage on the port (packets that are
//! not this stream's RTP) is dropped and counted, and the stream goes on
//! ([`GstSource`](super::GstSource)).

use std::net::IpAddr;

use super::watch::{RETRY, RETRY_INTERVAL, START_TIMEOUT, TIMEOUT, TIMEOUT_ACTION};
use super::{decoder_of, Decoder, SourceConfig, SourceKind, Watch, DECODER, DEVICE};
use crate::stage::{PropSpec, PropType, Role, StageDecl};

/// The encodings `rtp` takes: (name, RTP encoding name, depayloader, parser, software decoder).
const ENCODINGS: &[(&str, &str, &str, &str, &str)] = &[
    ("h264", "H264", "rtph264depay", "h264parse", "avdec_h264"),
    ("h265", "H265", "rtph265depay", "h265parse", "avdec_h265"),
];

/// `rtp port=P encoding=h264|h265`: video over RTP on a UDP port.
pub const RTP: StageDecl = StageDecl {
    name: "rtp",
    role: Role::Source,
    doc: "video over RTP on a UDP port (H.264/H.265), from typed properties: what a stream added over HTTP uses",
    props: &[
        PropSpec::new(
            "address",
            PropType::Str,
            "0.0.0.0",
            "the local IP address to receive on (a multicast group joins it)",
        ),
        PropSpec::new(
            "port",
            PropType::Int { min: 1, max: 65535 },
            "-",
            "the UDP port",
        ),
        PropSpec::new(
            "encoding",
            PropType::Choice(&["h264", "h265"]),
            "h264",
            "the video's encoding",
        ),
        PropSpec::new(
            "payload",
            PropType::Int { min: 96, max: 127 },
            "96",
            "the RTP payload type",
        ),
        PropSpec::new(
            "clock-rate",
            PropType::Int {
                min: 1,
                max: 1_000_000,
            },
            "90000",
            "the RTP clock rate (Hz)",
        ),
        PropSpec::new(
            "latency",
            PropType::Int { min: 0, max: 10_000 },
            "0",
            "milliseconds of a jitter buffer that puts packets back in order (0: none)",
        ),
        PropSpec::new(
            "framerate",
            PropType::POSITIVE_FLOAT,
            "-",
            "frames per second when the stream says none: frames are numbered by time at it",
        ),
        DECODER,
        DEVICE,
        TIMEOUT,
        TIMEOUT_ACTION,
        START_TIMEOUT,
        RETRY,
        RETRY_INTERVAL,
    ],
    needs: &[],
    provides: &[],
    make: |p| {
        let address = p.str("address").unwrap_or("0.0.0.0");
        let address: IpAddr = address
            .parse()
            .map_err(|_| p.error("address", format!("'{address}' is not an IP address")))?;
        let port = p.required("port")?;
        let port: u16 = port
            .parse()
            .map_err(|_| p.error("port", "expected a port number"))?;
        let encoding = p.str("encoding").unwrap_or("h264");
        let (_, name, depay, parse, decode) = ENCODINGS
            .iter()
            .find(|e| e.0 == encoding)
            .copied()
            .unwrap_or(ENCODINGS[0]);
        let payload = p.int("payload").unwrap_or(96);
        let clock_rate = p.int("clock-rate").unwrap_or(90_000);
        let decoder = p.str("decoder").map_or(Decoder::Cpu, decoder_of);
        let mut fragment = format!(
            "udpsrc address={address} port={port} \
             caps=\"application/x-rtp,media=video,encoding-name={name},payload={payload},clock-rate={clock_rate}\""
        );
        match p.int("latency").unwrap_or(0) {
            0 => {}
            ms => fragment += &format!(" ! rtpjitterbuffer latency={ms}"),
        }
        fragment += &format!(" ! {depay}");
        let cpu = decoder == Decoder::Cpu;
        fragment += &match cpu {
            true => format!(" ! {decode}"),
            false => format!(" ! {parse}"),
        };
        let mut cfg = SourceConfig::new(SourceKind::Launch {
            fragment,
            decode: !cpu,
        });
        cfg.live = true;
        cfg.watch = Watch::from_props(p);
        cfg.decoder = decoder;
        cfg.device = p.usize("device").unwrap_or(0);
        if let Some(framerate) = p.float("framerate") {
            cfg.framerate = framerate;
            cfg.head_framerate = Some(framerate);
        }
        Ok(Box::new(cfg))
    },
};
