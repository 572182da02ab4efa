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

use super::config::{SourceConfig, SourceKind};
use super::props::DecoderProps;
use super::watch::{RetryProps, StallProps, WaitProps, Watch};
use octopipe_core::stage::{PropChoice, Properties, Role, StageDecl};

/// The encodings `rtp` takes (`encoding=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
pub(crate) enum Encoding {
    /// H.264.
    H264,
    /// H.265.
    H265,
}

impl Encoding {
    /// (RTP encoding name, depayloader, parser, software decoder).
    fn elements(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Encoding::H264 => ("H264", "rtph264depay", "h264parse", "avdec_h264"),
            Encoding::H265 => ("H265", "rtph265depay", "h265parse", "avdec_h265"),
        }
    }
}

/// The `rtp` source's properties, declared once ([`RTP`]).
#[derive(Debug, Clone, PartialEq, Properties)]
pub(crate) struct RtpProps {
    /// the local IP address to receive on (a multicast group joins it)
    #[prop(default = "0.0.0.0")]
    pub address: String,
    /// the UDP port
    #[prop(required, range = 1..=65535)]
    pub port: u16,
    /// the video's encoding
    #[prop(default = "h264")]
    pub encoding: Encoding,
    /// the RTP payload type
    #[prop(default = 96, range = 96..=127)]
    pub payload: u8,
    /// the RTP clock rate (Hz)
    #[prop(default = 90000, range = 1..=1_000_000)]
    pub clock_rate: u32,
    /// milliseconds of a jitter buffer that puts packets back in order (0: none)
    #[prop(default = 0, range = 0..=10_000)]
    pub latency: u32,
    /// frames per second when the stream says none: frames are numbered by time at it
    #[prop(positive)]
    pub framerate: Option<f64>,
    /// `decoder=`, `device=`.
    #[prop(flatten)]
    pub decode: DecoderProps,
    /// `timeout=`, `timeout-action=`, `start-timeout=`.
    #[prop(flatten)]
    pub wait: WaitProps,
    /// `retry=`, `retry-interval=`.
    #[prop(flatten)]
    pub retry: RetryProps,
}

/// `rtp port=P encoding=h264|h265`: video over RTP on a UDP port.
pub const RTP: StageDecl = StageDecl {
    name: "rtp",
    role: Role::Source,
    doc: "video over RTP on a UDP port (H.264/H.265), from typed properties: what a stream added over HTTP uses",
    props: RtpProps::PROPS,
    needs: &[],
    provides: &[],
    make: |p| {
        let r = RtpProps::from_props(p)?;
        let address = &r.address;
        let address: IpAddr = address
            .parse()
            .map_err(|_| p.error("address", format!("'{address}' is not an IP address")))?;
        let (name, depay, parse, decode) = r.encoding.elements();
        let (port, payload, clock_rate) = (r.port, r.payload, r.clock_rate);
        let decoder = r.decode.decoder;
        let mut fragment = format!(
            "udpsrc address={address} port={port} \
             caps=\"application/x-rtp,media=video,encoding-name={name},payload={payload},clock-rate={clock_rate}\""
        );
        match r.latency {
            0 => {}
            ms => fragment += &format!(" ! rtpjitterbuffer latency={ms}"),
        }
        fragment += &format!(" ! {depay}");
        let cpu = decoder == super::Decoder::Cpu;
        fragment += &match cpu {
            true => format!(" ! {decode}"),
            false => format!(" ! {parse}"),
        };
        let mut cfg = SourceConfig::new(SourceKind::Launch {
            fragment,
            decode: !cpu,
        });
        cfg.live = true;
        // `rtp` declares no stall-timeout: a stream is never stalled, only quiet.
        cfg.watch = Watch::of(&r.wait, &StallProps::default(), &r.retry);
        cfg.decoder = decoder;
        cfg.device = r.decode.device.device;
        if let Some(framerate) = r.framerate {
            cfg.framerate = framerate;
            cfg.head_framerate = Some(framerate);
        }
        Ok(Box::new(cfg))
    },
};
