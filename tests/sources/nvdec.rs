//! `media decoder=cpu|nvdec|auto` and `head decoder=...`: NVDEC frames stay in CUDA memory and
//! reach the CUDA preprocess kernel with no copy. Here (any machine): `libgstcuda-1.0` loads or
//! says why, `decoder=auto` without NVDEC decodes on the CPU and gives the same frames as
//! `decoder=cpu`, a head octopipe decodes gives `media`'s frames,
//! `decoder=nvdec` without NVDEC is an error naming the input. On a GPU with NVDEC
//! (`scripts/device-nvdec.sh`): the tensors of `decoder=nvdec` equal those of `decoder=cpu`
//! through `preprocess backend=cuda`, frames are device frames, and the decoder's pool does not
//! grow; CPU-decoded frames land in page-locked buffers the GPU gathers crops from, with the
//! tensors of the host gather. GPU tests say why they skip.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use octopipe::batch::CropBatch;
use octopipe::frame::{BufferPool, Frame, Memory, PixelFormat};
use octopipe::preprocess::cuda;
use octopipe::source::{
    self, Decoder, FrameSource, GstSource, SourceConfig, SourceError, SourceKind,
};
use octopipe::Pipeline;

/// An H.264 MP4 of `frames` moving test frames at `w`x`h`, encoded from I420 (NVDEC decodes
/// 4:2:0 H.264 only, not x264's High 4:4:4 from RGB input) in the constrained-baseline profile,
/// which every software decoder reads (the device's GStreamer pack has openh264dec, not libav).
fn h264(dir: &Path, w: u32, h: u32, frames: u32) -> PathBuf {
    let path = dir.join(format!("ball-{w}x{h}.mp4"));
    common::encode(&format!(
        "videotestsrc num-buffers={frames} pattern=ball motion=sweep \
         ! video/x-raw,format=I420,width={w},height={h},framerate=30/1 \
         ! x264enc speed-preset=ultrafast key-int-max=15 \
         ! video/x-h264,profile=constrained-baseline ! mp4mux ! filesink location={}",
        path.display()
    ));
    path
}

fn media(path: &Path, decoder: Decoder) -> SourceConfig {
    let mut config = SourceConfig::new(SourceKind::Media {
        location: path.display().to_string(),
    });
    config.decoder = decoder;
    config
}

fn drain(mut source: GstSource) -> Vec<Frame> {
    std::iter::from_fn(|| source.next_frame().expect("a frame or the end")).collect()
}

/// Whether NVDEC can run here; prints why a GPU test skips.
fn nvdec(test: &str) -> bool {
    match cuda::available()
        .map_err(|e| e.to_string())
        .and_then(|()| source::nvdec_available().map_err(|e| e.to_string()))
    {
        Ok(()) => true,
        Err(why) => {
            eprintln!("SKIPPED {test}: no NVDEC ({why})");
            false
        }
    }
}

#[test]
fn the_gstcuda_library_loads_or_says_why() {
    match source::gst_cuda_library() {
        Ok(()) => eprintln!("libgstcuda-1.0 loads"),
        Err(why) => {
            assert!(why.to_string().contains("libgstcuda-1.0"), "{why}");
            eprintln!("libgstcuda-1.0 does not load: {why}");
        }
    }
    // Without a GPU this says why, and never crashes.
    if let Err(why) = source::nvdec_available() {
        assert!(!why.to_string().is_empty());
        eprintln!("NVDEC not available: {why}");
    }
}

#[test]
fn auto_without_nvdec_decodes_on_the_cpu_with_the_same_frames() {
    if !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly") {
        return;
    }
    if source::nvdec_available().is_ok() {
        eprintln!("SKIPPED auto_without_nvdec_decodes_on_the_cpu_with_the_same_frames: NVDEC is present (auto decodes with it; the GPU test covers that)");
        return;
    }
    let dir = common::temp_dir("nvdec-auto");
    let path = h264(&dir, 320, 240, 12);
    let open = |decoder| GstSource::open(&media(&path, decoder), BufferPool::new()).unwrap();
    let cpu = drain(open(Decoder::Cpu));
    let auto = drain(open(Decoder::Auto));
    assert_eq!(cpu.len(), 12);
    assert_eq!(auto.len(), cpu.len());
    for (a, c) in auto.iter().zip(&cpu) {
        assert_eq!(a.memory(), Some(Memory::Host));
        assert_eq!(
            (a.seq, a.pts, a.layout, a.colorimetry),
            (c.seq, c.pts, c.layout, c.colorimetry)
        );
        assert!(a.data() == c.data(), "frame {} differs", a.seq);
    }
}

/// A launch head reading `path` that ends in the encoded stream, decoded by octopipe with
/// `decoder` (`head decoder=`).
fn head(path: &Path, decoder: Decoder) -> SourceConfig {
    let mut config = SourceConfig::new(SourceKind::Launch {
        fragment: format!("filesrc location={} ! qtdemux ! h264parse", path.display()),
        decode: true,
    });
    config.decoder = decoder;
    config
}

#[test]
fn a_head_octopipe_decodes_gives_the_frames_of_media() {
    if !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly") {
        return;
    }
    let dir = common::temp_dir("head-decoder");
    let path = h264(&dir, 320, 240, 12);
    let open = |config: &SourceConfig| GstSource::open(config, BufferPool::new()).unwrap();
    // The same decoder choice as `media`: software decoders, never NVIDIA's.
    let reference = drain(open(&media(&path, Decoder::Cpu)));
    assert_eq!(reference.len(), 12);
    let mut decoders = vec![Decoder::Cpu];
    if source::nvdec_available().is_err() {
        // Without NVDEC, auto decodes on the CPU: the same frames.
        decoders.push(Decoder::Auto);
    }
    for decoder in decoders {
        let frames = drain(open(&head(&path, decoder)));
        assert_eq!(frames.len(), reference.len(), "{decoder:?}");
        for (a, r) in frames.iter().zip(&reference) {
            assert_eq!(a.memory(), Some(Memory::Host));
            assert_eq!((a.seq, a.layout), (r.seq, r.layout), "{decoder:?}");
            assert!(a.data() == r.data(), "{decoder:?}: frame {} differs", a.seq);
        }
    }
    // A head that decodes itself gives as many frames.
    let itself = SourceConfig::new(SourceKind::Launch {
        fragment: format!("filesrc location={} ! decodebin", path.display()),
        decode: false,
    });
    assert_eq!(drain(open(&itself)).len(), reference.len());
}

#[test]
fn a_head_decoded_with_nvdec_gives_device_frames() {
    let test = "a_head_decoded_with_nvdec_gives_device_frames";
    if !nvdec(test) || !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly") {
        return;
    }
    let dir = common::temp_dir("head-nvdec");
    let path = h264(&dir, 640, 480, 30);
    let open = |decoder| GstSource::open(&head(&path, decoder), BufferPool::new()).unwrap();
    let gpu = drain(open(Decoder::Nvdec));
    let cpu = drain(open(Decoder::Cpu));
    assert_eq!(gpu.len(), 30);
    assert_eq!(gpu.len(), cpu.len());
    for (g, c) in gpu.iter().zip(&cpu) {
        assert!(
            matches!(g.memory(), Some(Memory::Device(0))),
            "{:?}",
            g.memory()
        );
        assert_eq!(g.layout.format, PixelFormat::Nv12);
        assert_eq!((g.seq, g.layout.width, g.layout.height), (c.seq, 640, 480));
    }
    eprintln!("{test}: 30 frames from `filesrc ! qtdemux ! h264parse ! head decoder=nvdec` in CUDA memory");
}

#[test]
fn nvdec_without_nvdec_is_an_error_naming_the_input() {
    if source::nvdec_available().is_ok() {
        eprintln!("SKIPPED nvdec_without_nvdec_is_an_error_naming_the_input: NVDEC is present");
        return;
    }
    let dir = common::temp_dir("nvdec-missing");
    let path = dir.join("flight.mp4");
    std::fs::write(&path, b"not decoded: the check comes first").unwrap();
    let e = GstSource::open(&media(&path, Decoder::Nvdec), BufferPool::new())
        .err()
        .expect("decoder=nvdec without NVDEC fails");
    assert!(matches!(e, SourceError::Nvdec { .. }), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains("flight.mp4") && message.contains("decoder=nvdec"),
        "{message}"
    );

    // The same from a description, as `octopipe run` builds it.
    let vars = HashMap::from([("file".to_string(), path.display().to_string())]);
    let e = Pipeline::from_description(
        "media location=${file} decoder=nvdec ! boxes format=synthetic ! jsonl location=-",
        &vars,
    )
    .err()
    .expect("the pipeline does not build");
    let message = e.to_string();
    assert!(
        message.contains("flight.mp4") && message.contains("decoder=nvdec:"),
        "{message}"
    );

    // And for a GStreamer head that octopipe decodes.
    let e = Pipeline::from_description(
        "filesrc location=${file} ! qtdemux ! h264parse ! head decoder=nvdec \
         ! boxes format=synthetic ! jsonl location=-",
        &vars,
    )
    .err()
    .expect("the pipeline does not build");
    let message = e.to_string();
    assert!(
        message.contains("filesrc location=") && message.contains("decoder=nvdec:"),
        "{message}"
    );
}

/// (frame, crop) -> the crop's tensor values.
pub(crate) type Crops = HashMap<(u64, usize), Vec<f32>>;

/// The crops of every batch of `description`, and the report's lines (its extra lines among them).
pub(crate) fn crop_tensors(
    description: &str,
    vars: &HashMap<String, String>,
) -> (Crops, Vec<String>) {
    let mut pipeline = Pipeline::from_description(description, vars).unwrap();
    let batches = pipeline.batches(64);
    let run = std::thread::spawn(move || pipeline.run());
    let batches: Vec<CropBatch> = batches.into_iter().collect();
    let outcome = run.join().unwrap();
    assert!(
        outcome.error.is_none(),
        "{description}: {:?}",
        outcome.error
    );
    let mut crops = HashMap::new();
    for b in &batches {
        let t = b.tensor.as_f32().expect("a host f32 tensor");
        for (c, o) in b.crops.iter().zip(&b.origins) {
            let len = 3 * (c.out_w * c.out_h) as usize;
            let values = t[c.out_offset as usize..c.out_offset as usize + len].to_vec();
            crops.insert(
                (b.frames[c.frame as usize].seq, o.detection as usize),
                values,
            );
        }
    }
    let lines = outcome
        .report
        .to_string()
        .lines()
        .map(String::from)
        .collect();
    (crops, lines)
}

#[test]
fn nvdec_tensors_equal_cpu_decoding_through_the_cuda_kernel() {
    let test = "nvdec_tensors_equal_cpu_decoding_through_the_cuda_kernel";
    if !nvdec(test) || !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly") {
        return;
    }
    let dir = common::temp_dir("nvdec-tensors");
    let path = h264(&dir, 1920, 1080, 60);
    let run = |decoder: &str| {
        let vars = HashMap::from([
            ("file".to_string(), path.display().to_string()),
            ("out".to_string(), dir.join(decoder).display().to_string()),
        ]);
        crop_tensors(
            &format!(
                "media location=${{file}} decoder={decoder} ! boxes format=synthetic \
                 ! batch ! preprocess backend=cuda ! tensors location=${{out}}"
            ),
            &vars,
        )
        .0
    };
    let gpu = run("nvdec");
    let cpu = run("cpu");
    assert!(!cpu.is_empty());
    assert_eq!(
        gpu.keys().collect::<HashSet<_>>(),
        cpu.keys().collect::<HashSet<_>>()
    );
    // H.264 decoding is bit-exact, and the kernel reads NV12 (NVDEC) and I420 (avdec_h264)
    // samples with the same arithmetic: the values agree to float rounding (the two formats'
    // chroma fetches are compiled separately, so a contraction may differ in the last bit).
    let (mut worst, mut unequal, mut values) = (0f32, 0usize, 0usize);
    for (key, c) in &cpu {
        for (a, b) in gpu[key].iter().zip(c) {
            values += 1;
            if a.to_bits() != b.to_bits() {
                unequal += 1;
                worst = worst.max((a - b).abs());
            }
        }
    }
    eprintln!(
        "{test}: {} crops, {values} values: {unequal} not bit-equal, largest difference {worst:e}",
        cpu.len()
    );
    assert!(worst <= 1e-5, "largest difference {worst}");
}

/// CPU decoding on a GPU host: the source copies its frames into page-locked pooled buffers
/// (a CUDA preprocess stage downstream), the GPU pulls every crop's rectangle straight out of
/// them (`gather=auto`), and the tensors are bit for bit those of the host gather
/// (`gather=host`, pageable frames); the report counts the batches gathered on the GPU.
#[test]
fn cpu_decoded_frames_are_page_locked_and_the_gpu_gathers_their_crops() {
    let test = "cpu_decoded_frames_are_page_locked_and_the_gpu_gathers_their_crops";
    if !common::gpu(test) || !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly") {
        return;
    }
    let dir = common::temp_dir("page-locked");
    let path = h264(&dir, 1920, 1080, 45);
    let run = |gather: &str| {
        let vars = HashMap::from([
            ("file".to_string(), path.display().to_string()),
            ("out".to_string(), dir.join(gather).display().to_string()),
        ]);
        crop_tensors(
            &format!(
                "media location=${{file}} decoder=cpu ! boxes format=synthetic count=28 \
                 ! batch max-frames=4 max-crops=112 \
                 ! preprocess backend=cuda gather={gather} \
                 ! tensors location=${{out}}"
            ),
            &vars,
        )
    };
    let (host, host_lines) = run("host");
    assert!(!host.is_empty());
    let summary = |lines: &[String]| {
        lines
            .iter()
            .find(|l| l.starts_with("preprocess on cuda:0: "))
            .cloned()
            .unwrap_or_else(|| panic!("no preprocess summary in {lines:?}"))
    };
    // "preprocess on cuda:0: X of Y batches of host frames had their crop rectangles ...": (X, Y).
    let counts = |line: &str| -> (u64, u64) {
        let words: Vec<&str> = line.split_whitespace().collect();
        (words[3].parse().unwrap(), words[5].parse().unwrap())
    };
    assert_eq!(counts(&summary(&host_lines)).0, 0, "{host_lines:?}");
    for gather in ["auto", "device"] {
        let (gpu, lines) = run(gather);
        let line = summary(&lines);
        eprintln!("{test}: gather={gather}: {line}");
        let (gathered, batches) = counts(&line);
        assert!(batches > 0 && gathered == batches, "{line}");
        assert_eq!(gpu.len(), host.len());
        for (key, values) in &host {
            let got = &gpu[key];
            assert!(
                got.iter()
                    .zip(values)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "gather={gather}: crop {key:?} differs from the host gather"
            );
        }
    }
}

#[test]
fn nvdec_frames_are_device_frames_and_the_pool_does_not_grow() {
    let test = "nvdec_frames_are_device_frames_and_the_pool_does_not_grow";
    if !nvdec(test) || !common::element_or_skip("x264enc", "gstreamer1.0-plugins-ugly") {
        return;
    }
    let dir = common::temp_dir("nvdec-pool");
    let path = h264(&dir, 1920, 1080, 150);
    let mut source = GstSource::open(&media(&path, Decoder::Nvdec), BufferPool::new()).unwrap();
    let mut buffers = HashSet::new();
    let mut held = std::collections::VecDeque::new();
    let mut frames = 0;
    while let Some(frame) = source.next_frame().unwrap() {
        assert_eq!(
            frame.memory(),
            Some(Memory::Device(0)),
            "frame {}",
            frame.seq
        );
        assert_eq!(frame.layout.format, PixelFormat::Nv12);
        assert_eq!((frame.layout.width, frame.layout.height), (1920, 1080));
        assert!(frame.layout.strides[0] >= 1920 && frame.layout.offsets[1] >= 1920 * 1080);
        let planes = frame.planes.as_deref().and_then(|p| p.device()).unwrap();
        buffers.insert(planes.ptr());
        // Hold a few frames, as the batch stage does, then give them back.
        held.push_back(frame);
        if held.len() > 4 {
            held.pop_front();
        }
        frames += 1;
    }
    drop(held);
    eprintln!(
        "{test}: {frames} frames in {} distinct decoder buffers",
        buffers.len()
    );
    assert_eq!(frames, 150);
    // Frames held + the appsink's queue + what the decoder works on: buffers come back and are
    // reused; a leak would give one buffer per frame.
    assert!(
        buffers.len() <= 16,
        "{} buffers for {frames} frames",
        buffers.len()
    );
}

/// The whole GPU-resident pipeline against the CPU one on the real clip: its 34 frames encoded to
/// H.264 (I420, near-lossless), its annotated objects replayed from a MOT file by frame index;
/// `media decoder=nvdec ! ... ! preprocess backend=cuda memory=device ! classify ep=cuda` (frames
/// and tensors never in host memory) against `media decoder=cpu ! ... ! preprocess backend=cpu !
/// classify ep=cpu`: the same label for >= 99.5% of the objects. Needs NVDEC, ONNX Runtime's
/// CUDA build (`scripts/device-ort-cuda.sh`) and the shared data.
#[test]
fn nvdec_and_the_cuda_ep_label_the_clip_as_the_cpu_pipeline() {
    let test = "nvdec_and_the_cuda_ep_label_the_clip_as_the_cpu_pipeline";
    if !nvdec(test) || !common::ort_ready() {
        return;
    }
    let Some(data) = common::shared_data() else {
        return;
    };
    let clip = data.join("visdrone/clip-9999999");
    let images = common::sorted_files(&clip.join("images"));
    let dir = common::temp_dir("nvdec-clip");
    // MOT frame index k + 1 for the k-th image (the video's frame k).
    let mut mot = String::new();
    let mut track = 0;
    for (k, image) in images.iter().enumerate() {
        let name = image.with_extension("txt");
        let text =
            std::fs::read_to_string(clip.join("annotations").join(name.file_name().unwrap()))
                .unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            track += 1;
            mot.push_str(&format!("{},{track},{}\n", k + 1, line.trim()));
        }
    }
    let mot_path = dir.join("clip-mot.txt");
    std::fs::write(&mot_path, mot).unwrap();
    let video = dir.join("clip.mp4");
    let frames: Vec<(PathBuf, u64)> = images.iter().cloned().zip(0..).collect();
    common::play_jpegs(
        &frames,
        &format!(
            "video/x-raw,format=I420 ! x264enc speed-preset=ultrafast pass=quant quantizer=10 key-int-max=30 \
             ! video/x-h264,profile=high ! mp4mux ! filesink location={}",
            video.display()
        ),
    );
    let model = data.join("models/visdrone-crops-64.onnx");
    let labels = |decoder: &str, backend: &str, memory: &str, ep: &str| {
        let out = dir.join(format!("{decoder}-{ep}.jsonl"));
        let text = format!(
            "media location={} decoder={decoder} ! boxes format=mot location={} \
             ! batch max-crops=256 \
             ! preprocess backend={backend} memory={memory} channels=rgb layout=nchw mean=0.485,0.456,0.406 std=0.229,0.224,0.225 \
             ! classify model={} ep={ep} labels=person,two-wheeler,car,large-vehicle ! jsonl location={}",
            video.display(),
            mot_path.display(),
            model.display(),
            out.display()
        );
        let t = std::time::Instant::now();
        let outcome = Pipeline::from_description(&text, &HashMap::new())
            .unwrap()
            .run();
        assert!(
            outcome.error.is_none(),
            "{decoder}/{ep}: {:?}",
            outcome.error
        );
        assert_eq!(outcome.report.processed, 34, "{}", outcome.report);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let objects: HashMap<(u64, String), String> = common::read_jsonl(&out)
            .iter()
            .map(|o| {
                (
                    (o["frame"].as_u64().unwrap(), o["bbox"].to_string()),
                    o["label"].as_str().unwrap_or("-").to_string(),
                )
            })
            .collect();
        (objects, ms)
    };
    let (gpu, gpu_ms) = labels("nvdec", "cuda", "device", "cuda");
    let (cpu, cpu_ms) = labels("cpu", "cpu", "host", "cpu");
    assert_eq!(gpu.len(), cpu.len());
    let same = cpu.iter().filter(|(k, v)| gpu.get(*k) == Some(*v)).count();
    let share = same as f64 / cpu.len() as f64;
    eprintln!(
        "{test}: {same} of {} objects labelled alike ({:.2}%); NVDEC + CUDA backend + CUDA EP {gpu_ms:.0} ms, CPU decoding + CPU backend + CPU EP {cpu_ms:.0} ms (34 frames, start-up included)",
        cpu.len(),
        share * 100.0
    );
    assert!(cpu.len() > 1900, "{} objects", cpu.len());
    assert!(share >= 0.995, "{same} of {}", cpu.len());
}
