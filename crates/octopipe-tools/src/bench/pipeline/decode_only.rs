//! The decode-only ceiling of a row: the same streams of the same video decoded by GStreamer
//! alone, nothing after the decoder but a `fakesink`, all streams in one pipeline:
//!
//! ```text
//! filesrc location=clip.mp4 ! qtdemux ! h264parse ! avdec_h264 ! fakesink sync=false    (cpu)
//! filesrc location=clip.mp4 ! qtdemux ! h264parse ! nvh264dec
//!   ! video/x-raw(memory:CUDAMemory) ! fakesink sync=false                             (nvdec)
//! filesrc location=clip.mp4 ! decodebin ! fakesink sync=false                           (auto)
//! ```
//!
//! (H.265: `h265parse`, `avdec_h265`, `nvh265dec`; the CPU decoder is the first of libav's and
//! `openh264dec` (`libde265dec` for H.265) that is installed; GPU N's NVDEC decoder is `nvh264deviceNdec`,
//! stream `i` of N on the GPU the batch stage gives it). Its frames per second (decoded frames of
//! all streams over the wall time from start to end of stream) is what the decoder can give the
//! pipeline: a row near it is held by the decoder.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::video::Codec;

/// The longest a decode-only run may take.
const TIMEOUT_S: u64 = 600;

/// The launch line of `streams` streams of `video` decoded by `decoder` (`cpu`, `nvdec`,
/// `auto`), spread over `devices` as the batch stage spreads them (empty: GPU 0).
pub fn decode_only_line(
    video: &Path,
    codec: Codec,
    decoder: &str,
    streams: usize,
    devices: &[usize],
) -> String {
    let cpu = cpu_decoder(codec, |name| gst::ElementFactory::find(name).is_some());
    let k = devices.len().clamp(1, streams.max(1));
    let location = video.display().to_string().replace('"', "\\\"");
    let mut text = String::new();
    for i in 0..streams {
        let gpu = devices.get(i * k / streams).copied().unwrap_or(0);
        let codec_name = codec.name();
        let decode = match decoder {
            "cpu" => format!("{} ! {cpu}", codec.parser()),
            "nvdec" => {
                let element = match gpu {
                    0 => format!("nv{codec_name}dec"),
                    n => format!("nv{codec_name}device{n}dec"),
                };
                format!(
                    "{} ! {element} ! video/x-raw(memory:CUDAMemory)",
                    codec.parser()
                )
            }
            _ => "decodebin".to_string(),
        };
        let demux = if decoder == "auto" { "" } else { "qtdemux ! " };
        text.push_str(&format!(
            "filesrc location=\"{location}\" ! {demux}{decode} ! fakesink name=s{i} sync=false\n"
        ));
    }
    text
}

/// The CPU decoder of `codec`: the first of libav's and the other software decoders that
/// `exists`; libav's name when none is (its launch then says what is missing).
fn cpu_decoder(codec: Codec, exists: impl Fn(&str) -> bool) -> &'static str {
    let choices: &[&'static str] = match codec {
        Codec::H264 => &["avdec_h264", "openh264dec"],
        Codec::H265 => &["avdec_h265", "libde265dec"],
    };
    choices
        .iter()
        .copied()
        .find(|name| exists(name))
        .unwrap_or(choices[0])
}

/// Decode `streams` streams of `video` with `decoder` and nothing else (`decode_only_line`):
/// frames per second of all streams together, or why it could not run.
pub fn decode_only(
    video: &Path,
    codec: Codec,
    decoder: &str,
    streams: usize,
    devices: &[usize],
) -> Result<f64, String> {
    gst::init().map_err(|e| format!("GStreamer could not be initialised: {e}"))?;
    let text = decode_only_line(video, codec, decoder, streams, devices);
    let pipeline = gst::parse::launch(&text)
        .map_err(|e| format!("{e}: {}", text.lines().next().unwrap_or_default()))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "not a pipeline".to_string())?;
    let frames = Arc::new(AtomicU64::new(0));
    for i in 0..streams {
        let pad = pipeline
            .by_name(&format!("s{i}"))
            .and_then(|s| s.static_pad("sink"))
            .ok_or_else(|| format!("no fakesink s{i}"))?;
        let count = frames.clone();
        pad.add_probe(gst::PadProbeType::BUFFER, move |_, _| {
            count.fetch_add(1, Ordering::Relaxed);
            gst::PadProbeReturn::Ok
        });
    }
    let bus = pipeline.bus().ok_or("the pipeline has no bus")?;
    let t0 = Instant::now();
    let outcome = match pipeline.set_state(gst::State::Playing) {
        Err(_) => Err("the pipeline did not start".to_string()),
        Ok(_) => loop {
            let Some(msg) = bus.timed_pop_filtered(
                gst::ClockTime::from_seconds(TIMEOUT_S),
                &[gst::MessageType::Eos, gst::MessageType::Error],
            ) else {
                break Err(format!("no end of stream in {TIMEOUT_S} s"));
            };
            match msg.view() {
                gst::MessageView::Eos(_) => break Ok(()),
                gst::MessageView::Error(e) => {
                    break Err(format!(
                        "{}{}",
                        e.error(),
                        e.debug().map(|d| format!(" ({d})")).unwrap_or_default()
                    ))
                }
                _ => {}
            }
        },
    };
    let wall = t0.elapsed().as_secs_f64();
    let _ = pipeline.set_state(gst::State::Null);
    outcome?;
    Ok(frames.load(Ordering::Relaxed) as f64 / wall.max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stream_decodes_on_its_gpu() {
        gst::init().unwrap();
        let v = Path::new("/t/c.mp4");
        let line = decode_only_line(v, Codec::H265, "nvdec", 3, &[0, 1]);
        let lines: Vec<&str> = line.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("h265parse ! nvh265dec ! video/x-raw(memory:CUDAMemory)"));
        assert!(lines[1].contains("! nvh265dec !"), "{line}");
        assert!(lines[2].contains("! nvh265device1dec !"), "{line}");
        assert!(lines[2].ends_with("fakesink name=s2 sync=false"), "{line}");
        assert_eq!(
            cpu_decoder(Codec::H264, |n| n == "openh264dec"),
            "openh264dec"
        );
        assert_eq!(cpu_decoder(Codec::H265, |_| true), "avdec_h265");
        assert_eq!(cpu_decoder(Codec::H265, |_| false), "avdec_h265");
    }
}
