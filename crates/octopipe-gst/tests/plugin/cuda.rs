//! Frames in CUDA memory: the elements that read pixels take NV12 in CUDA memory (what
//! `nvh264dec` gives) and read it where the decoder wrote it, and `octooverlay` draws on it
//! there; where that cannot be done (no GPU, a stage set to read system memory) the pipeline
//! fails with an element error saying why.

use std::sync::{Arc, Mutex};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::VideoFrameExt;

use super::*;

/// The CUDA memory caps feature.
const CUDA: &str = "memory:CUDAMemory";

#[test]
fn octodetect_and_octoclassify_take_nv12_in_cuda_memory() {
    let _serial = serial();
    init();
    for (name, cuda) in [
        ("octodetect", true),
        ("octoclassify", true),
        ("octoboxes", false),
        ("octotrack", false),
        ("octojsonl", false),
        ("octooverlay", true),
    ] {
        let factory = gst::ElementFactory::find(name).unwrap();
        for template in factory.static_pad_templates() {
            let caps = template.caps();
            let nv12 = caps.iter_with_features().any(|(s, f)| {
                f.contains(CUDA)
                    && s.get::<&str>("format") == Ok("NV12")
                    && s.name() == "video/x-raw"
            });
            // The others take any memory (they read no pixels).
            let any = caps
                .iter_with_features()
                .any(|(_, f)| f.is_any() || f.contains(CUDA));
            assert_eq!(nv12, cuda, "{name} {}: {caps}", template.name_template());
            assert!(any, "{name} {}: {caps}", template.name_template());
        }
    }
    // As gst-inspect-1.0 shows them.
    let Some(plugins) = plugin_dir() else { return };
    for name in ["octodetect", "octoclassify", "octooverlay"] {
        let out = gst_command("gst-inspect-1.0", &plugins)
            .arg(name)
            .output()
            .expect("gst-inspect-1.0 runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("video/x-raw(memory:CUDAMemory)"),
            "gst-inspect-1.0 {name}:\n{text}"
        );
    }
}

/// Each element that reads or draws pixels is asked, through the elements before it that read
/// none, for the CUDA context the decoder upstream decodes into (`nvh264dec` asks downstream
/// when it opens), and answers with its GPU's primary context. Without a GPU it cannot answer,
/// and says why in its debug log.
#[test]
fn the_decoders_cuda_context_query_reaches_every_element_that_reads_or_draws_pixels() {
    let _serial = serial();
    init();
    for (name, category) in [
        ("octodetect", "octopipe-OctoDetect"),
        ("octoclassify", "octopipe-OctoClassify"),
        ("octooverlay", "octopipe-OctoOverlay"),
    ] {
        let refusals = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = refusals.clone();
        gst::log::set_active(true);
        gst::log::set_threshold_for_name(category, gst::DebugLevel::Debug);
        let hook = gst::log::add_log_function(move |cat, _level, _file, _fn, _line, _obj, msg| {
            if let (true, Some(text)) = (cat.name() == category, msg.get()) {
                if text.starts_with("no CUDA context to give") {
                    seen.lock().unwrap().push(text.to_string());
                }
            }
        });
        // Between the decoder and the element: elements that read no pixels pass the query on.
        let pipeline = gst::parse::launch(&format!(
            "fakesrc name=src ! octotrack ! octojsonl location=/dev/null ! {name} ! fakesink"
        ))
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
        let src = pipeline.by_name("src").unwrap().static_pad("src").unwrap();
        let mut query = gst::query::Context::new("gst.cuda.context");
        let answered = src.peer_query(&mut query);
        let context = query.context().map(|c| c.context_type().to_string());
        gst::log::remove_log_function(hook);
        gst::log::set_threshold_for_name(category, gst::DebugLevel::None);
        let refusals = refusals.lock().unwrap().clone();
        if answered {
            assert_eq!(context.as_deref(), Some("gst.cuda.context"), "{name}");
        } else {
            assert!(
                !refusals.is_empty(),
                "{name} was not asked for the CUDA context (nothing answered, nothing logged)"
            );
            eprintln!("{name}: {}", refusals[0]);
        }
    }
}

/// The error of `element` given one NV12 buffer whose caps say CUDA memory (an `appsrc`: a
/// buffer in system memory, which no CUDA context can read).
fn cuda_caps_error(element: &str) -> String {
    init();
    let pipeline = gst::parse::launch(&format!(
        "appsrc name=src format=time caps=video/x-raw(memory:CUDAMemory),format=NV12,width=64,\
         height=48,framerate=30/1 ! {element} ! fakesink"
    ))
    .unwrap()
    .downcast::<gst::Pipeline>()
    .unwrap();
    let src = pipeline.by_name("src").unwrap();
    let mut buffer = gst::Buffer::from_mut_slice(vec![128u8; 64 * 48 * 3 / 2]);
    buffer.get_mut().unwrap().set_pts(gst::ClockTime::ZERO);
    pipeline.set_state(gst::State::Paused).ok();
    let _ = src.emit_by_name::<gst::FlowReturn>("push-buffer", &[&buffer]);
    let _ = src.emit_by_name::<gst::FlowReturn>("end-of-stream", &[]);
    run(&pipeline).expect_err("the pipeline fails")
}

#[test]
fn cuda_memory_a_stage_cannot_read_is_an_element_error_saying_why() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    let model = data.join("models/visdrone-crops-64.onnx");
    // Set to read system memory: refused at negotiation, saying what to set.
    let e = cuda_caps_error(&format!(
        "octoclassify name=classifier model={} labels={LABELS} backend=cpu",
        model.display()
    ));
    assert!(e.starts_with("classifier: "), "{e}");
    assert!(
        e.contains("backend=cpu reads system memory: set backend=cuda (or auto)"),
        "{e}"
    );
    // Without a GPU (or, with one, memory that is not CUDA memory): an element error, no panic.
    let e = cuda_caps_error(&format!(
        "octodetect name=detector model={} labels=coco",
        data.join("models/coco-centernet-512.onnx").display()
    ));
    assert!(e.starts_with("detector: "), "{e}");
    assert!(e.contains("CUDA memory"), "{e}");
    assert!(!e.contains("panic"), "{e}");
    eprintln!("{e}");
    if octopipe_sources::nvdec_available().is_err() {
        assert!(
            e.contains(
                "frames in CUDA memory (video/x-raw(memory:CUDAMemory)) cannot be read on GPU 0"
            ),
            "{e}"
        );
    }
}

/// The objects `octojsonl` wrote, each as (frame, box, detector category, class label, score),
/// in file order.
fn labelled(path: &Path) -> Vec<(u64, Vec<i64>, u64, String, f64)> {
    objects(path)
        .iter()
        .map(|o| {
            let text = |k: &str| o[k].as_str().unwrap_or_default().to_string();
            let b = o["bbox"]
                .as_array()
                .map(|b| {
                    b.iter()
                        .map(|v| v.as_f64().unwrap_or(-1.0) as i64)
                        .collect()
                })
                .unwrap_or_default();
            (
                o["frame"].as_u64().unwrap(),
                b,
                o["category"].as_u64().unwrap_or(999),
                text("label"),
                o["score"].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect()
}

/// The clip's frames encoded to H.264 in a fresh folder named after `test` (its folder, frame
/// count and MP4), where NVDEC can decode it into CUDA memory; `None`, the skip printed, where
/// it cannot (no GPU, no `nvh264dec`, `x264enc` or `cudadownload`).
fn nvdec_clip(data: &Path, test: &str) -> Option<(PathBuf, usize, PathBuf)> {
    init();
    if let Err(e) = octopipe_sources::nvdec_available() {
        skip_gpu(&format!("NVDEC into CUDA memory cannot run here: {e}"));
        return None;
    }
    for needed in ["x264enc", "nvh264dec", "cudadownload"] {
        if gst::ElementFactory::find(needed).is_none() {
            skip_gpu(&format!("{needed} missing"));
            return None;
        }
    }
    let dir = tmp(test);
    let n = numbered_clip(data, &dir.join("frames"));
    let mp4 = clip_h264(&dir, n);
    Some((dir, n, mp4))
}

#[test]
fn nvh264dec_frames_read_in_cuda_memory_give_the_objects_of_system_memory() {
    let _serial = serial();
    let Some(data) = data_and_ort() else { return };
    let Some((dir, n, mp4)) = nvdec_clip(&data, "cuda-memory") else {
        return;
    };
    let models = data.join("models");
    // The same decoder and stages; the frames stay in CUDA memory, or are copied to the host
    // (`cudadownload`) and read from there.
    let run_with = |download: &str, out: &Path| -> String {
        let launch = format!(
            "filesrc location={} ! qtdemux ! h264parse ! nvh264dec {download} \
             ! octodetect name=det model={} labels=coco scale=1 tiles=640x640 overlap=0.15 ep=cuda backend=cuda \
             ! octotrack ! octoclassify model={} labels={LABELS} ep=cuda backend=cuda memory=device \
             ! octojsonl location={} ! fakesink",
            mp4.display(),
            models.join("coco-centernet-512.onnx").display(),
            models.join("visdrone-crops-64.onnx").display(),
            out.display()
        );
        let pipeline = gst::parse::launch(&launch)
            .unwrap()
            .downcast::<gst::Pipeline>()
            .unwrap();
        let caps = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let seen = caps.clone();
        let pad = pipeline.by_name("det").unwrap().static_pad("sink").unwrap();
        pad.add_probe(gst::PadProbeType::EVENT_DOWNSTREAM, move |_, info| {
            if let Some(gst::PadProbeData::Event(e)) = &info.data {
                if let gst::EventView::Caps(c) = e.view() {
                    *seen.lock().unwrap() = c.caps().to_string();
                }
            }
            gst::PadProbeReturn::Ok
        });
        run(&pipeline).unwrap_or_else(|e| panic!("{launch}: {e}"));
        let caps = caps.lock().unwrap().clone();
        caps
    };
    let (device, host) = (dir.join("device.jsonl"), dir.join("host.jsonl"));
    let device_caps = run_with("", &device);
    let host_caps = run_with("! cudadownload ! video/x-raw,format=NV12", &host);
    assert!(device_caps.contains(CUDA), "{device_caps}");
    assert!(!host_caps.contains(CUDA), "{host_caps}");
    let (device, host) = (labelled(&device), labelled(&host));
    assert!(device.len() > 100, "{} objects", device.len());
    assert_eq!(device.len(), host.len());
    for (d, h) in device.iter().zip(&host) {
        assert_eq!((d.0, &d.1, &d.2, &d.3), (h.0, &h.1, &h.2, &h.3));
        assert!((d.4 - h.4).abs() < 1e-3, "{d:?} {h:?}");
    }
    eprintln!(
        "{} objects in {n} frames alike, read in CUDA memory ({device_caps}) and in system memory",
        device.len()
    );
}

#[test]
fn octooverlay_given_cuda_memory_without_a_gpu_is_an_element_error_saying_why() {
    let _serial = serial();
    init();
    let Err(why) = octopipe_sources::plugin::SharedCuda::new(0) else {
        skip_gpu("CUDA memory can be drawn on here: the refusal is for machines without it");
        return;
    };
    let e = cuda_caps_error("octooverlay name=overlay");
    assert!(e.starts_with("overlay: "), "{e}");
    assert!(
        e.contains(&format!(
            "frames in CUDA memory (video/x-raw(memory:CUDAMemory)) cannot be read on GPU 0: {why}"
        )),
        "{e}"
    );
    assert!(!e.contains("panic"), "{e}");
    // Its `device` names the GPU it would draw on.
    let e = cuda_caps_error("octooverlay name=overlay device=1");
    assert!(
        e.contains(
            "frames in CUDA memory (video/x-raw(memory:CUDAMemory)) cannot be read on GPU 1"
        ),
        "{e}"
    );
}

/// The NV12 frames `launch` gives at `appsink name=sink` (NV12 in system memory), each as its
/// visible bytes (the luma rows, then the chroma rows), and the caps the element named
/// `overlay` took on its sink pad (empty without one).
fn nv12_frames(launch: &str) -> (Vec<Vec<u8>>, String) {
    let pipeline = gst::parse::launch(launch)
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
    let caps = Arc::new(Mutex::new(String::new()));
    if let Some(overlay) = pipeline.by_name("overlay") {
        let seen = caps.clone();
        let pad = overlay.static_pad("sink").unwrap();
        pad.add_probe(gst::PadProbeType::EVENT_DOWNSTREAM, move |_, info| {
            if let Some(gst::PadProbeData::Event(e)) = &info.data {
                if let gst::EventView::Caps(c) = e.view() {
                    *seen.lock().unwrap() = c.caps().to_string();
                }
            }
            gst::PadProbeReturn::Ok
        });
    }
    let frames = sink_samples(&pipeline, launch, |sample| {
        let info = gst_video::VideoInfo::from_caps(sample.caps().unwrap()).unwrap();
        assert_eq!(info.format(), gst_video::VideoFormat::Nv12);
        let frame =
            gst_video::VideoFrameRef::from_buffer_ref_readable(sample.buffer().unwrap(), &info)
                .unwrap();
        let (w, h) = (info.width() as usize, info.height() as usize);
        let mut bytes = Vec::with_capacity(w * h * 3 / 2);
        for (plane, rows, row) in [(0, h, w), (1, h.div_ceil(2), 2 * w.div_ceil(2))] {
            let stride = frame.plane_stride()[plane] as usize;
            let data = frame.plane_data(plane as u32).unwrap();
            for r in 0..rows {
                bytes.extend_from_slice(&data[r * stride..r * stride + row]);
            }
        }
        bytes
    });
    let caps = caps.lock().unwrap().clone();
    (frames, caps)
}

#[test]
fn octooverlay_draws_nv12_in_cuda_memory_as_it_draws_it_in_system_memory() {
    let _serial = serial();
    let Some(data) = data() else { return };
    let Some((dir, n, mp4)) = nvdec_clip(&data, "cuda-overlay") else {
        return;
    };
    // The decoder's frames drawn on in CUDA memory, or copied to the host first (`cudadownload`
    // before the boxes: a copying transform need not carry the ROI metas over), or not drawn on.
    // The boxes are the clip's annotations, replayed: the same objects on either memory.
    let download = "cudadownload ! video/x-raw,format=NV12";
    let replay = format!(
        "octoboxes format=det location={}",
        data.join("visdrone/clip-9999999/annotations").display()
    );
    let overlay = "octooverlay name=overlay scores=false tracks=false";
    let run_with = |middle: &str| {
        nv12_frames(&format!(
            "filesrc location={} ! qtdemux ! h264parse ! nvh264dec ! {middle} \
             ! appsink name=sink sync=false",
            mp4.display()
        ))
    };
    let (device_jsonl, host_jsonl) = (dir.join("device.jsonl"), dir.join("host.jsonl"));
    let (device, device_caps) = run_with(&format!(
        "{replay} ! octojsonl location={} ! {overlay} ! {download}",
        device_jsonl.display()
    ));
    let (host, host_caps) = run_with(&format!(
        "{download} ! {replay} ! octojsonl location={} ! {overlay}",
        host_jsonl.display()
    ));
    let (plain, _) = run_with(download);
    assert!(device_caps.contains(CUDA), "{device_caps}");
    assert!(
        !host_caps.is_empty() && !host_caps.contains(CUDA),
        "{host_caps}"
    );
    assert_eq!((device.len(), host.len(), plain.len()), (n, n, n));
    // What was drawn: the same objects on both.
    let boxes = |path: &Path| -> Vec<_> {
        labelled(path)
            .into_iter()
            .map(|(frame, b, category, label, _)| (frame, b, category, label))
            .collect()
    };
    let objects = boxes(&device_jsonl);
    assert!(objects.len() > 100, "{} objects", objects.len());
    assert_eq!(objects, boxes(&host_jsonl));
    let differ = |a: &[u8], b: &[u8]| a.iter().zip(b).filter(|(a, b)| a != b).count();
    for (i, (d, h)) in device.iter().zip(&host).enumerate() {
        assert!(
            d == h,
            "frame {i}: {} of {} bytes differ (the first at {:?}) between the overlay in CUDA \
             memory and in system memory ({} and {} bytes drawn)",
            differ(d, h),
            d.len(),
            d.iter().zip(h).position(|(a, b)| a != b),
            differ(d, &plain[i]),
            differ(h, &plain[i])
        );
    }
    // Something was drawn.
    let drawn = device.iter().zip(&plain).filter(|(d, p)| d != p).count();
    let bytes: usize = device.iter().zip(&plain).map(|(d, p)| differ(d, p)).sum();
    assert!(drawn > n / 2, "{drawn} of {n} frames drawn on");
    eprintln!(
        "{n} frames alike drawn in CUDA memory ({device_caps}) and in system memory: {} \
         objects, {drawn} frames and {bytes} bytes drawn",
        objects.len()
    );
}
