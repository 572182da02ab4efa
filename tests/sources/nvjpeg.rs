//! `images decoder=cpu|nvjpeg|auto`: JPEG sequences decoded by nvJPEG into CUDA memory (I420 of
//! JPEG colorimetry), read in place by the CUDA preprocess kernel. Here (any machine):
//! `libnvjpeg` loads or says why, `decoder=auto` without it decodes on the CPU with the frames
//! of `decoder=cpu`, `decoder=nvjpeg` without it (or on PNG files) is an error naming the input.
//! On a GPU (`scripts/device-ort-cuda.sh` with the `sources` binary): the clip's crops from
//! nvJPEG against the CPU decode's through `preprocess backend=cuda` (within a stated
//! tolerance: the IDCTs differ), frames in device memory, and the files nvJPEG's batched decoder
//! does not take (progressive, grey, CMYK, 4:4:4) decoded on the CPU and counted; on two GPUs,
//! many streams spread over both through nvJPEG with each stream's objects those of the CPU
//! decode. GPU tests say why they skip.

use crate::common;
use crate::nvdec::crop_tensors;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use octopipe::frame::{BufferPool, Frame, Memory, PixelFormat};
use octopipe::preprocess::cuda;
use octopipe::source::{
    self, FrameSource, GstSource, ImageDecoder, SourceConfig, SourceError, SourceKind,
};
use octopipe::Pipeline;

fn images(location: &Path, decoder: ImageDecoder) -> SourceConfig {
    let mut config = SourceConfig::new(SourceKind::Images {
        location: location.display().to_string(),
    });
    config.image_decoder = decoder;
    config
}

fn drain(mut source: GstSource) -> Vec<Frame> {
    std::iter::from_fn(|| source.next_frame().expect("a frame or the end")).collect()
}

/// Whether nvJPEG and a GPU are here; prints why a GPU test skips.
fn nvjpeg(test: &str) -> bool {
    match cuda::available()
        .map_err(|e| e.to_string())
        .and_then(|()| source::nvjpeg_available(0).map_err(|e| e.to_string()))
    {
        Ok(_) => true,
        Err(why) => {
            eprintln!("SKIPPED {test}: no nvJPEG ({why})");
            false
        }
    }
}

/// The first `n` files of the shared clip, linked into a folder of their own.
fn clip_files(test: &str, n: usize) -> Option<PathBuf> {
    let clip = common::shared_data()?.join("visdrone/clip-9999999/images");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&clip)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let dir = common::temp_dir(test);
    for f in files.iter().take(n) {
        std::os::unix::fs::symlink(f, dir.join(f.file_name().unwrap())).unwrap();
    }
    Some(dir)
}

#[test]
fn the_nvjpeg_library_loads_or_says_why() {
    match source::nvjpeg_available(0) {
        Ok(backend) => eprintln!("nvJPEG decodes on cuda:0 with its {backend} backend"),
        Err(why) => {
            let why = why.to_string();
            assert!(
                why.contains("libnvjpeg") || why.contains("GPU") || why.contains("CUDA"),
                "{why}"
            );
            eprintln!("nvJPEG not available: {why}");
        }
    }
}

#[test]
fn auto_without_nvjpeg_decodes_on_the_cpu_with_the_same_frames() {
    let test = "auto_without_nvjpeg_decodes_on_the_cpu_with_the_same_frames";
    if source::nvjpeg_available(0).is_ok() {
        eprintln!(
            "SKIPPED {test}: nvJPEG is present (auto decodes with it; the GPU test covers that)"
        );
        return;
    }
    let Some(dir) = clip_files(test, 3) else {
        return;
    };
    let open = |decoder| GstSource::open(&images(&dir, decoder), BufferPool::new()).unwrap();
    let cpu = drain(open(ImageDecoder::Cpu));
    let auto = drain(open(ImageDecoder::Auto));
    assert_eq!(cpu.len(), 3);
    assert_eq!(auto.len(), cpu.len());
    for (a, c) in auto.iter().zip(&cpu) {
        assert_eq!(a.memory(), Some(Memory::Host));
        assert_eq!(
            (a.seq, a.layout, a.colorimetry),
            (c.seq, c.layout, c.colorimetry)
        );
        assert!(a.data() == c.data(), "frame {} differs", a.seq);
    }
}

#[test]
fn nvjpeg_without_nvjpeg_or_on_png_is_an_error_naming_the_input() {
    let test = "nvjpeg_without_nvjpeg_or_on_png_is_an_error_naming_the_input";
    // PNG files: refused wherever nvJPEG is.
    let pngs = common::temp_dir("nvjpeg-png");
    image::RgbImage::from_pixel(8, 8, image::Rgb([1, 2, 3]))
        .save(pngs.join("a.png"))
        .unwrap();
    let e = GstSource::open(&images(&pngs, ImageDecoder::Nvjpeg), BufferPool::new())
        .err()
        .expect("decoder=nvjpeg on PNG files fails");
    assert!(matches!(e, SourceError::Nvjpeg { .. }), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains("nvjpeg-png")
            && message.contains("decoder=nvjpeg: ")
            && message.contains("PNG"),
        "{message}"
    );

    if source::nvjpeg_available(0).is_ok() {
        eprintln!("SKIPPED the rest of {test}: nvJPEG is present");
        return;
    }
    let Some(dir) = clip_files(test, 1) else {
        return;
    };
    // From a description, as `octopipe run` builds it: the error names the folder.
    let vars = HashMap::from([("dir".to_string(), dir.display().to_string())]);
    let e = Pipeline::from_description(
        "images location=${dir} decoder=nvjpeg ! boxes format=synthetic ! jsonl location=-",
        &vars,
    )
    .err()
    .expect("the pipeline does not build");
    let message = e.to_string();
    assert!(
        message.contains(&dir.display().to_string()) && message.contains("decoder=nvjpeg: "),
        "{message}"
    );
}

#[test]
fn nvjpeg_crops_match_the_cpu_decode_through_the_cuda_kernel() {
    let test = "nvjpeg_crops_match_the_cpu_decode_through_the_cuda_kernel";
    if !nvjpeg(test) {
        return;
    }
    let Some(data) = common::shared_data() else {
        return;
    };
    let root = data.join("visdrone/clip-9999999");
    let out = common::temp_dir(test);
    let vars = HashMap::from([
        ("root".to_string(), root.display().to_string()),
        ("out".to_string(), out.display().to_string()),
    ]);
    let run = |decoder: &str| {
        crop_tensors(
            &format!(
                "images location=${{root}}/images decoder={decoder} \
                 ! boxes format=det location=${{root}}/annotations \
                 ! batch max-frames=8 ! preprocess backend=cuda size=64x64 \
                 ! tensors location=${{out}}/{decoder}"
            ),
            &vars,
        )
    };
    let (gpu, report) = run("nvjpeg");
    let (cpu, _) = run("cpu");
    assert_eq!(gpu.len(), cpu.len());
    assert!(gpu.len() > 2000, "{} crops", gpu.len());
    assert!(
        !report.iter().any(|l| l.contains("decoded on the CPU")),
        "{report:?}"
    );
    // One level of a byte is 1/255/std ~ 0.0171 after ImageNet normalization.
    let level = 1.0 / 255.0 / 0.225;
    let (mut max, mut sum, mut n, mut over2) = (0f32, 0f64, 0usize, 0usize);
    for (k, g) in &gpu {
        let c = &cpu[k];
        for (a, b) in g.iter().zip(c) {
            let d = (a - b).abs() / level;
            max = max.max(d);
            sum += d as f64;
            n += 1;
            over2 += (d > 2.0) as usize;
        }
    }
    let mean = sum / n as f64;
    eprintln!(
        "{test}: {} crops, {n} values: nvJPEG against jpegdec (libjpeg islow) through the same kernel: mean |diff| {mean:.3} levels, max {max:.2}, {:.4}% over 2 levels",
        gpu.len(),
        100.0 * over2 as f64 / n as f64
    );
    assert!(mean < 0.5, "mean {mean} levels");
    assert!(
        (over2 as f64) < 0.01 * n as f64,
        "{over2} of {n} values over 2 levels"
    );
}

#[test]
fn nvjpeg_frames_are_device_i420_and_other_files_decode_on_the_cpu_counted() {
    let test = "nvjpeg_frames_are_device_i420_and_other_files_decode_on_the_cpu_counted";
    if !nvjpeg(test) {
        return;
    }
    let Some(clip) = clip_files(test, 2) else {
        return;
    };
    // The variants beside the clip's two frames, in file-name order after them.
    let variants = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jpeg");
    for name in [
        "x1-progressive.jpg",
        "x2-gray.jpg",
        "x3-cmyk.jpg",
        "x4-444.jpg",
    ] {
        std::fs::copy(variants.join(name), clip.join(name)).unwrap();
    }
    let frames =
        drain(GstSource::open(&images(&clip, ImageDecoder::Nvjpeg), BufferPool::new()).unwrap());
    assert_eq!(frames.len(), 6);
    for f in &frames[..2] {
        assert!(
            matches!(f.memory(), Some(Memory::Device(0))),
            "{:?}",
            f.memory()
        );
        assert_eq!(
            (f.layout.format, f.layout.width, f.layout.height),
            (PixelFormat::I420, 2000, 1500)
        );
    }
    for f in &frames[2..] {
        assert_eq!(f.memory(), Some(Memory::Host), "{}", f.source);
        assert_eq!(f.layout.format, PixelFormat::I420);
        assert_eq!((f.layout.width, f.layout.height), (64, 48));
    }
    // Counted per stream in the report, by reason.
    let vars = HashMap::from([("dir".to_string(), clip.display().to_string())]);
    let pipeline = Pipeline::from_description(
        "images location=${dir} decoder=nvjpeg ! boxes format=synthetic count=2 ! batch ! preprocess backend=cuda ! jsonl location=/dev/null",
        &vars,
    )
    .unwrap();
    let outcome = pipeline.run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let report = outcome.report.to_string();
    for reason in [
        "not a baseline JPEG",
        "not 3 components",
        "chroma not sampled 4:2:0",
    ] {
        assert!(report.contains(reason), "{reason}: {report}");
    }
    eprintln!("{test}: {report}");
}

/// Many image streams over two GPUs through nvJPEG: `batch devices=0,1` puts streams 0-3 on GPU
/// 0's nvJPEG decoder and preprocess chain and 4-7 on GPU 1's; each stream gets the objects of
/// the CPU decode through the same chains, its labels (classifier on the CPU) as the CPU
/// decode's but for crops within the IDCTs' difference of a class boundary, and no file leaves
/// nvJPEG for the CPU. Skips, saying why, with fewer than 2 GPUs or no nvJPEG on either.
#[test]
fn many_nvjpeg_streams_over_two_gpus_give_each_stream_the_objects_of_the_cpu_decode() {
    let test = "many_nvjpeg_streams_over_two_gpus_give_each_stream_the_objects_of_the_cpu_decode";
    if !nvjpeg(test) {
        return;
    }
    let gpus = cudarc::driver::CudaContext::device_count().unwrap_or(0);
    if gpus < 2 {
        eprintln!("SKIPPED {test}: {gpus} GPU here, 2 needed");
        return;
    }
    if let Err(why) = source::nvjpeg_available(1) {
        eprintln!("SKIPPED {test}: no nvJPEG on cuda:1 ({why})");
        return;
    }
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    const STREAMS: usize = 8;
    let root = data.join("visdrone/clip-9999999");
    let out = common::temp_dir(test);
    let vars = HashMap::from([
        ("root".to_string(), root.display().to_string()),
        ("out".to_string(), out.display().to_string()),
        (
            "model".to_string(),
            data.join("models/visdrone-crops-64.onnx")
                .display()
                .to_string(),
        ),
    ]);
    // Each stream's objects: (source file, box) -> label.
    type Objects = Vec<HashMap<(String, String), String>>;
    let run = |decoder: &str| -> (Objects, octopipe::budget::Report) {
        let branch = format!(
            "images location=${{root}}/images decoder={decoder} \
             ! boxes format=det location=${{root}}/annotations"
        );
        let mut text = String::new();
        for _ in 1..STREAMS {
            text += &format!("{branch} ! mux.\n");
        }
        text += &format!(
            "{branch} ! batch name=mux max-frames=4 devices=0,1 ! preprocess backend=cuda \
             ! classify model=${{model}} ep=cpu ! jsonl location=${{out}}/{decoder}.jsonl"
        );
        let desc = octopipe::describe::parse(test, &text, &vars).unwrap();
        let graph = octopipe::describe::build(&desc).unwrap_or_else(|e| panic!("{e}"));
        for s in graph.elements::<SourceConfig>() {
            assert_eq!(
                s.device,
                s.stream as usize * 2 / STREAMS,
                "stream {}",
                s.stream
            );
        }
        let outcome = Pipeline::build(graph).unwrap().run();
        assert!(outcome.error.is_none(), "{decoder}: {:?}", outcome.error);
        let mut objects = vec![HashMap::new(); STREAMS];
        for o in common::read_jsonl(&out.join(format!("{decoder}.jsonl"))) {
            let stream = o["stream"].as_u64().unwrap() as usize;
            let key = (o["source"].to_string(), o["bbox"].to_string());
            objects[stream].insert(key, o["label"].to_string());
        }
        (objects, outcome.report)
    };
    let (gpu, report) = run("nvjpeg");
    let (cpu, cpu_report) = run("cpu");
    for r in [&report, &cpu_report] {
        assert_eq!(
            (r.frames_in, r.processed, r.dropped_total()),
            (34 * STREAMS as u64, 34 * STREAMS as u64, 0)
        );
    }
    let text = report.to_string();
    assert!(!text.contains("decoded on the CPU"), "{text}");
    for s in 0..STREAMS {
        let (g, c) = (&gpu[s], &cpu[s]);
        assert_eq!(g.len(), c.len(), "stream {s}");
        assert!(
            c.keys().all(|k| g.contains_key(k)),
            "stream {s}: the same objects"
        );
        assert!(c.len() > 2000, "stream {s}: {} objects", c.len());
        let same = c.iter().filter(|(k, v)| g.get(*k) == Some(*v)).count();
        eprintln!(
            "{test}: stream {s} (cuda:{}): {same} of {} labels as the CPU decode's",
            s * 2 / STREAMS,
            c.len()
        );
        assert!(
            same as f64 >= 0.98 * c.len() as f64,
            "stream {s}: {same} of {} labels",
            c.len()
        );
    }
}
