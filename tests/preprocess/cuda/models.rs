//! The CUDA preprocessing feeding models: the detector's tiles in one launch, and the shared
//! classifier and detector on ONNX Runtime's CUDA execution provider reading device tensors.

use super::clip::{clip_boxes, rgb_to_i420};
use super::*;

/// The detector's input: the 12 tiles of a real 2000x1500 clip frame (640x640, overlap 0.15) to
/// 512x512 as the shared CenterNet takes them (NHWC, raw 0..255; and letterboxed NCHW f16 as
/// YOLO exports take them) are one kernel launch, equal to the CPU backend's pass.
#[test]
fn detector_tiles_are_one_launch_and_match_the_cpu() {
    if !common::gpu("detector_tiles_are_one_launch_and_match_the_cpu") {
        return;
    }
    use octopipe::detect::{region_batch, DetectConfig, Fit};
    let path = data_dir().join("visdrone/clip-9999999/images/9999999_00023_d_0000001.jpg");
    let img = image::open(&path).unwrap().to_rgb8();
    let (w, h) = img.dimensions();
    let rgb = img.into_raw();
    let mut cfg = DetectConfig::new("-");
    cfg.tiles = Some((640, 640));
    cfg.overlap = 0.15;
    cfg.scale = 1.0;
    let regions = cfg.regions(w, h);
    assert_eq!(regions.len(), 12);
    for format in [PixelFormat::Rgb, PixelFormat::I420] {
        let data = match format {
            PixelFormat::Rgb => rgb.clone(),
            _ => rgb_to_i420(&rgb, w as usize, h as usize),
        };
        let frame = frame_from(
            FrameLayout::packed(format, w, h),
            Colorimetry::JPEG,
            data,
            0,
        );
        let pool = octopipe::batch::BatchPool::new();
        let mut batch = region_batch(&pool, frame, &regions, (512, 512));
        let config = cfg.preprocess_config((512, 512), Layout::Nhwc, DType::F32);
        let mut gpu = CudaBackend::new(config.clone()).unwrap();
        let before = gpu.engine().launches;
        gpu.run(&mut batch).unwrap();
        assert_eq!(
            gpu.engine().launches - before,
            1,
            "one launch for the 12 tiles"
        );
        compare_backends(&mut batch, &config, &format!("detector tiles {format}"));
        // Letterboxed, f16, NCHW, /255.
        let mut lb = cfg.clone();
        lb.fit = Fit::Letterbox;
        lb.scale = 1.0 / 255.0;
        let config = lb.preprocess_config((640, 384), Layout::Nchw, DType::F16);
        let mut cpu = CpuBackend::new(config.clone()).unwrap();
        let mut batch = region_batch(&pool, batch.frames.pop().unwrap(), &regions, (640, 384));
        cpu.run(&mut batch).unwrap();
        let reference = batch.tensor.as_f16().unwrap().to_vec();
        let mut gpu = CudaBackend::new(config).unwrap();
        gpu.run(&mut batch).unwrap();
        assert_eq!(gpu.engine().launches, 1);
        let worst = batch
            .tensor
            .as_f16()
            .unwrap()
            .iter()
            .zip(&reference)
            .map(|(a, b)| (f16_to_f32(*a) - f16_to_f32(*b)).abs() * 255.0)
            .fold(0.0f32, f32::max);
        eprintln!("detector tiles letterbox f16 {format}: max diff {worst:.3} (0..255)");
        assert!(
            worst <= TOL + 0.5,
            "letterboxed f16 tiles differ by {worst}"
        );
    }
}

/// `octopipe bench detect-tiles` on the device.
#[test]
#[ignore = "benchmark: run explicitly"]
fn detect_tiles_table() {
    println!(
        "{}",
        bench::detect_tiles(&bench::DetectTilesOptions::default()).unwrap()
    );
}

/// The classifier on ONNX Runtime's CUDA execution provider, reading the preprocess output where
/// the CUDA backend left it (`memory=device`: no host copy of the tensor, only logits come back),
/// against the CPU pipeline (CPU backend, CPU execution provider) on every object of the real
/// clip: the same label for >= 99.5% of them. Needs an ONNX Runtime with its CUDA execution
/// provider (`ORT_DYLIB_PATH`; ../shared/tools/pack-ort-cuda.py) and the shared classifier.
#[test]
fn classifier_on_the_cuda_ep_reads_device_tensors_and_matches_the_cpu() {
    use octopipe::classify::{Classifier, ClassifyConfig};
    use octopipe::frame::Detection;
    use octopipe::onnx::Ep;
    let test = "classifier_on_the_cuda_ep_reads_device_tensors_and_matches_the_cpu";
    if !common::gpu(test) {
        return;
    }
    let model = data_dir().join("models/visdrone-crops-64.onnx");
    let root = data_dir().join("visdrone/clip-9999999");
    if !model.is_file() || !root.is_dir() {
        eprintln!("SKIPPED {test}: shared data not found (set OCTOPIPE_DATA)");
        return;
    }
    // The GPU side at its default high stream priority (`gpu-priority`), as the CPU's answers.
    let config = |ep| {
        let mut c = ClassifyConfig::new(&model);
        c.ep = ep;
        c
    };
    let mut cuda_ep = match Classifier::new(config(Ep::Cuda(0)), Layout::Nchw, Some((64, 64))) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIPPED {test}: no CUDA execution provider in this ONNX Runtime ({e})");
            return;
        }
    };
    let mut cpu_ep = Classifier::new(config(Ep::Cpu), Layout::Nchw, Some((64, 64))).unwrap();
    let host = PreprocessConfig {
        size: Some((64, 64)),
        ..PreprocessConfig::default()
    };
    let device = PreprocessConfig {
        device_output: true,
        ..host.clone()
    };
    let mut cpu = CpuBackend::new(host).unwrap();
    let mut gpu = CudaBackend::new(device).unwrap();
    let images = common::sorted_files(&root.join("images"));
    let (mut objects, mut same) = (0usize, 0usize);
    let (mut t_cpu, mut t_gpu) = (0.0f64, 0.0f64);
    for path in &images {
        let img = image::open(path).unwrap().to_rgb8();
        let (w, h) = img.dimensions();
        let text = std::fs::read_to_string(
            root.join("annotations")
                .join(path.file_stem().unwrap())
                .with_extension("txt"),
        )
        .unwrap();
        let labels = |backend: &mut dyn Backend, classifier: &mut Classifier, ms: &mut f64| {
            let mut frame = frame_from(
                FrameLayout::packed(PixelFormat::Rgb, w, h),
                Colorimetry::JPEG,
                img.as_raw().clone(),
                0,
            );
            frame.detections = clip_boxes(&text, w, h)
                .into_iter()
                .map(|(x, y, bw, bh)| Detection::new([x, y, bw, bh]))
                .collect();
            let mut batch = CropBatch::default();
            batch.push_frame(frame, 64, 64, 3);
            batch.build_blocks(256, 4);
            let t = std::time::Instant::now();
            backend.run(&mut batch).unwrap();
            classifier.classify(&mut batch).unwrap();
            *ms += t.elapsed().as_secs_f64() * 1e3;
            batch.frames[0]
                .detections
                .iter()
                .map(|d| d.classification.as_ref().map(|c| c.best.class_id))
                .collect::<Vec<_>>()
        };
        let a = labels(&mut cpu, &mut cpu_ep, &mut t_cpu);
        let b = labels(&mut gpu, &mut cuda_ep, &mut t_gpu);
        assert_eq!(a.len(), b.len());
        assert!(
            b.iter().all(Option::is_some),
            "every crop classified on the GPU"
        );
        objects += a.len();
        same += a.iter().zip(&b).filter(|(x, y)| x == y).count();
    }
    let share = same as f64 / objects as f64;
    eprintln!(
        "CUDA EP on device tensors vs CPU: {same} of {objects} labels equal ({:.2}%); {} frames: preprocess+classify {t_cpu:.1} ms (CPU backend, CPU EP) vs {t_gpu:.1} ms (CUDA backend, CUDA EP, first frame included)",
        share * 100.0,
        images.len()
    );
    assert!(objects > 1900, "{objects} objects");
    assert!(share >= 0.995, "{same} of {objects} labels equal");
}

/// The real COCO detector on ONNX Runtime's CUDA execution provider, its 12 tiles a frame
/// preprocessed by the CUDA backend and read where they are (device memory), against the CPU
/// backend and execution provider, on the clip's first frames (pipelines/visdrone-detect.pipe's
/// settings): the same boxes (a box of one matches a box of the other of its class at IoU >= 0.9)
/// for >= 99% of them. Needs the ONNX Runtime CUDA build and the shared detector.
#[test]
fn detector_on_the_cuda_ep_reads_device_tiles_and_matches_the_cpu() {
    use octopipe::detect::{DetectConfig, Detector};
    use octopipe::onnx::Ep;
    use octopipe::preprocess::BackendKind;
    use octopipe::track::iou_u32;
    let test = "detector_on_the_cuda_ep_reads_device_tiles_and_matches_the_cpu";
    if !common::gpu(test) {
        return;
    }
    let model = data_dir().join("models/coco-centernet-512.onnx");
    let root = data_dir().join("visdrone/clip-9999999/images");
    if !model.is_file() || !root.is_dir() {
        eprintln!("SKIPPED {test}: shared data not found (set OCTOPIPE_DATA)");
        return;
    }
    let config = |ep, backend| {
        let mut c = DetectConfig::new(&model);
        c.scale = 1.0;
        c.tiles = Some((640, 640));
        c.overlap = 0.15;
        c.score = 0.3;
        c.ep = ep;
        c.backend = backend;
        c
    };
    let mut cuda = match Detector::new(config(Ep::Cuda(0), BackendKind::Cuda)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIPPED {test}: no CUDA execution provider in this ONNX Runtime ({e})");
            return;
        }
    };
    let mut cpu = Detector::new(config(Ep::Cpu, BackendKind::Cpu)).unwrap();
    let images = common::sorted_files(&root);
    let (mut boxes, mut matched) = (0usize, 0usize);
    let (mut t_cpu, mut t_gpu) = (0.0f64, 0.0f64);
    for path in images.iter().take(6) {
        let img = image::open(path).unwrap().to_rgb8();
        let (w, h) = img.dimensions();
        let run = |d: &mut Detector, ms: &mut f64| {
            let frame = frame_from(
                FrameLayout::packed(PixelFormat::Rgb, w, h),
                Colorimetry::JPEG,
                img.as_raw().clone(),
                0,
            );
            let t = std::time::Instant::now();
            let frame = d.detect(frame).unwrap();
            *ms += t.elapsed().as_secs_f64() * 1e3;
            frame
                .detections
                .iter()
                .map(|d| (d.bbox, d.label.clone()))
                .collect::<Vec<_>>()
        };
        let a = run(&mut cpu, &mut t_cpu);
        let b = run(&mut cuda, &mut t_gpu);
        for (x, y) in [(&a, &b), (&b, &a)] {
            boxes += x.len();
            matched += x
                .iter()
                .filter(|(p, l)| y.iter().any(|(q, m)| l == m && iou_u32(*p, *q) >= 0.9))
                .count();
        }
    }
    let share = matched as f64 / boxes as f64;
    eprintln!(
        "detector on the CUDA EP (device tiles) vs CPU: {matched} of {boxes} boxes matched ({:.2}%); 6 frames of 12 tiles: {t_cpu:.1} ms (CPU backend, CPU EP) vs {t_gpu:.1} ms (CUDA backend, CUDA EP)",
        share * 100.0
    );
    assert!(boxes > 100, "{boxes} boxes");
    assert!(share >= 0.99, "{matched} of {boxes} boxes matched");
}
