//! `batch devices=all|0,1`: the streams of one batch stage spread over GPUs, one chain per GPU,
//! one sink. The graphs are built here without a GPU (explicit lists are taken as written, the
//! GPU count of `all` is given); the run uses the CPU backends, which ignore `device`.

use crate::common;

use std::collections::HashMap;

use octopipe::batch::BatchConfig;
use octopipe::classify::ClassifyConfig;
use octopipe::describe::{self, DescribeError, Description};
use octopipe::detect::DetectConfig;
use octopipe::onnx::Ep;
use octopipe::pipeline::{Graph, Pipeline};
use octopipe::preprocess::PreprocessConfig;
use octopipe::source::{SourceConfig, SourceKind};
use octopipe::stage::{Registry, Role};
use octopipe::Builtin;

fn parse(text: &str) -> Description {
    describe::parse("<test>", text, &HashMap::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// `text` built, with `gpus` CUDA devices for `devices=all`.
fn build(text: &str, gpus: usize) -> Result<Graph, DescribeError> {
    let desc = parse(text);
    let registry = Registry::builtin();
    let desc = describe::expand_devices(&desc, &registry, &|| gpus)?;
    describe::build_with(&desc, &registry)
}

/// The node each node of `graph` reaches first with role `role`, following outputs.
fn next_of(graph: &Graph, from: usize, role: Role) -> Option<usize> {
    let mut at = graph.nodes[from].output;
    while let Some(i) = at {
        if graph.nodes[i].role == role {
            return Some(i);
        }
        at = graph.nodes[i].output;
    }
    None
}

fn five_streams(batch_props: &str) -> String {
    let mut text = String::new();
    for s in 0..4 {
        text += &format!("media location=s{s}.mp4 decoder=nvdec ! boxes format=synthetic ! mux.\n");
    }
    text += &format!(
        "media location=s4.mp4 decoder=nvdec ! boxes format=synthetic\n\
         ! batch name=mux max-frames=3 {batch_props}\n\
         ! preprocess backend=cuda memory=device ! queue size=2\n\
         ! classify model=m.onnx ep=cuda ! jsonl location=o.jsonl"
    );
    text
}

/// A detector on the streams' side runs on its stream's GPU: its tiles preprocessed there and
/// its model on that GPU's execution provider.
#[test]
fn a_detector_on_a_stream_runs_on_its_gpu() {
    let text = "media location=a.mp4 decoder=nvdec ! detect model=d.onnx ep=cuda ! mux.\n\
                media location=b.mp4 decoder=nvdec ! detect model=d.onnx\n\
                ! batch name=mux devices=0,1 ! classify model=m.onnx ! jsonl location=o";
    let graph = build(text, 0).unwrap_or_else(|e| panic!("{e}"));
    let detectors: Vec<&DetectConfig> = graph.elements::<DetectConfig>().collect();
    assert_eq!(detectors.len(), 2);
    let mut got: Vec<(usize, Ep)> = detectors.iter().map(|d| (d.device, d.ep)).collect();
    got.sort_by_key(|g| g.0);
    assert_eq!(got, [(0, Ep::Cuda(0)), (1, Ep::Auto(1))]);
    let pre = detectors
        .iter()
        .map(|d| d.preprocess_config((512, 512), octopipe::Layout::Nchw, octopipe::DType::F32));
    let mut devices: Vec<usize> = pre.map(|p| p.device).collect();
    devices.sort();
    assert_eq!(devices, [0, 1]);
}

#[test]
fn five_streams_over_two_gpus_make_two_chains_into_one_sink() {
    let graph = build(&five_streams("devices=0,1"), 0).unwrap_or_else(|e| panic!("{e}"));
    let batches: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| graph.nodes[i].role == Role::Batch)
        .collect();
    assert_eq!(batches.len(), 2);
    // Each batch stage's chain: its preprocess and classifier on its GPU.
    let mut gpu_of_batch = HashMap::new();
    for &b in &batches {
        assert_eq!(
            graph.nodes[b]
                .element
                .downcast_ref::<BatchConfig>()
                .unwrap()
                .max_frames,
            3
        );
        let pre = next_of(&graph, b, Role::Preprocess).unwrap();
        let pre = graph.nodes[pre]
            .element
            .downcast_ref::<PreprocessConfig>()
            .unwrap();
        let classify = next_of(&graph, b, Role::Infer).unwrap();
        let classify = graph.nodes[classify]
            .element
            .downcast_ref::<ClassifyConfig>()
            .unwrap();
        assert!(pre.device_output);
        assert_eq!(classify.ep, Ep::Cuda(pre.device as i32));
        gpu_of_batch.insert(b, pre.device);
    }
    let mut gpus: Vec<usize> = gpu_of_batch.values().copied().collect();
    gpus.sort();
    assert_eq!(gpus, [0, 1]);
    // Streams keep their numbers (description order); 0, 1, 2 go to GPU 0, 3 and 4 to GPU 1,
    // decoded there.
    let sources: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| graph.nodes[i].role == Role::Source)
        .collect();
    assert_eq!(sources.len(), 5);
    for &s in &sources {
        let media = graph.nodes[s]
            .element
            .downcast_ref::<SourceConfig>()
            .unwrap();
        let stream = media.stream as usize;
        let SourceKind::Media { location } = &media.kind else {
            panic!("{:?}", media.kind)
        };
        assert_eq!(location, &format!("s{stream}.mp4"));
        assert_eq!(media.device, stream * 2 / 5, "stream {stream}");
        let batch = next_of(&graph, s, Role::Batch).unwrap();
        assert_eq!(gpu_of_batch[&batch], stream * 2 / 5, "stream {stream}");
    }
    // One sink, fed by both classifiers; the queue after preprocess is on both chains.
    let sinks: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| graph.nodes[i].role == Role::Sink)
        .collect();
    assert_eq!(sinks.len(), 1);
    let inputs = graph
        .nodes
        .iter()
        .filter(|n| n.output == Some(sinks[0]))
        .count();
    assert_eq!(inputs, 2);
    let queued = graph
        .nodes
        .iter()
        .filter(|n| n.role == Role::Preprocess && n.queue.size == 2)
        .count();
    assert_eq!(queued, 2);
}

#[test]
fn without_devices_the_description_is_untouched() {
    let desc = parse(&five_streams(""));
    let registry = Registry::builtin();
    let out = describe::expand_devices(&desc, &registry, &|| panic!("GPUs counted")).unwrap();
    assert!(matches!(out, std::borrow::Cow::Borrowed(_)));
    let graph = describe::build(&desc).unwrap();
    assert_eq!(
        graph.nodes.iter().filter(|n| n.role == Role::Batch).count(),
        1
    );
}

#[test]
fn all_takes_every_gpu_and_no_gpu_leaves_one_chain() {
    let batches = |g: &Graph| g.nodes.iter().filter(|n| n.role == Role::Batch).count();
    let text = five_streams("devices=all");
    assert_eq!(batches(&build(&text, 3).unwrap()), 3);
    assert_eq!(
        batches(&build(&text, 8).unwrap()),
        5,
        "no more chains than streams"
    );
    let none = build(&text, 0).unwrap();
    assert_eq!(batches(&none), 1);
    // Nothing is set to a device: the stages are as written.
    assert!(none.elements::<SourceConfig>().all(|s| s.device == 0));
    // The real count of this host.
    let real = describe::build(&parse(&text)).unwrap_or_else(|e| panic!("{e}"));
    let gpus = match octopipe::preprocess::cuda::available() {
        Ok(()) => cudarc::driver::CudaContext::device_count().unwrap() as usize,
        Err(why) => {
            eprintln!("no GPU here ({why}): devices=all makes one chain");
            0
        }
    };
    assert_eq!(batches(&real), gpus.clamp(1, 5));
}

#[test]
fn a_stage_given_its_own_device_is_refused() {
    for (text, at) in [
        (
            "testsrc ! boxes format=synthetic ! batch devices=0,1 ! preprocess device=1 ! jsonl location=o",
            "device=1",
        ),
        (
            "media location=a.mp4 device=0 ! boxes format=synthetic ! batch devices=0,1 ! preprocess ! jsonl location=o",
            "device=0",
        ),
    ] {
        let e = build(text, 0).unwrap_err();
        assert!(
            e.message
                .contains("device= is set by the batch stage's devices=")
                && e.message.contains("remove device="),
            "{e}"
        );
        assert_eq!(e.column, text.find(at).unwrap() + 1, "{e}");
    }
}

#[test]
fn bad_device_lists_are_refused_at_the_value() {
    for value in ["", "0,0", "x", "-1", "0,,1", "+1", "1.5"] {
        let text = format!(
            "testsrc ! boxes format=synthetic ! batch devices={value} ! preprocess ! jsonl location=o"
        );
        let e = build(&text, 2).expect_err(value);
        assert!(
            e.message.starts_with(
                "batch: devices must be 'all' (every GPU of the host) or distinct GPU ordinals"
            ) && e.message.contains(&format!("found '{value}'")),
            "{value}: {e}"
        );
        assert_eq!(e.column, text.find("devices=").unwrap() + 9, "{e}");
    }
    let e = build(
        "testsrc ! boxes format=synthetic ! batch devices=0,0 ! jsonl location=o",
        2,
    )
    .unwrap_err();
    assert!(e.message.ends_with("(GPU 0 twice)"), "{e}");
}

#[test]
fn a_pipeline_taking_streams_while_running_refuses_devices() {
    let text = "batch max-frames=8 devices=0,1 ! classify model=m.onnx ! jsonl location=o";
    let e = describe::build_open(&parse(text), &Registry::builtin()).unwrap_err();
    assert!(
        e.message.contains("takes streams while it runs") && e.message.contains("one batch stage"),
        "{e}"
    );
    assert_eq!(e.column, text.find("devices").unwrap() + 1);
    // The same without devices= is taken.
    let open = "batch max-frames=8 ! classify model=m.onnx ! jsonl location=o";
    describe::build_open(&parse(open), &Registry::builtin()).unwrap();
}

/// The shared clip as the four streams of pipelines/multistream.pipe, on the CPU backends, with
/// `devices` added to its batch stage (or not): the objects and the report.
fn run_multistream(
    data: &std::path::Path,
    devices: &str,
    out: &std::path::Path,
) -> (Vec<String>, octopipe::budget::Report) {
    let text = std::fs::read_to_string(common::root().join("pipelines/multistream.pipe")).unwrap();
    let text = text
        .replace("batch name=mux", &format!("batch name=mux {devices}"))
        .replace("! preprocess ", "! preprocess backend=cpu ")
        .replace("classify model=${model}", "classify model=${model} ep=cpu");
    let vars = common::vars(&[
        ("root", &data.join("visdrone/clip-9999999")),
        ("model", &data.join("models/visdrone-crops-64.onnx")),
        ("out", out),
    ]);
    let desc = describe::parse("multistream.pipe", &text, &vars).unwrap();
    let graph = describe::build(&desc).unwrap_or_else(|e| panic!("{e}"));
    let expected = if devices.is_empty() { 1 } else { 2 };
    assert_eq!(
        graph.nodes.iter().filter(|n| n.role == Role::Batch).count(),
        expected
    );
    let outcome = Pipeline::build(graph).unwrap().run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let mut lines = common::untimed_lines(out);
    lines.sort();
    (lines, outcome.report)
}

#[test]
fn four_streams_over_two_chains_give_the_objects_of_one() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("devices");
    let (one, one_report) = run_multistream(&data, "", &dir.join("one.jsonl"));
    let (two, two_report) = run_multistream(&data, "devices=0,1", &dir.join("two.jsonl"));
    assert_eq!(one.len(), 4 * 2012, "the clip's 2,012 objects per stream");
    assert_eq!(one, two, "the same objects, labels and scores");
    for r in [&one_report, &two_report] {
        assert_eq!((r.frames_in, r.processed, r.dropped_total()), (136, 136, 0));
        assert_eq!(r.streams.len(), 4);
    }
    assert_eq!(one_report.objects, two_report.objects);
}

/// Four streams meeting in one detector: with `devices=0,1` each GPU gets its own detector (and
/// tracker, batch stage and classifier) for a run of the streams, decoded on that GPU.
#[test]
fn streams_into_a_shared_detector_get_one_detector_per_gpu() {
    let mut text = String::new();
    for s in 0..4 {
        text += &format!("media location=s{s}.mp4 decoder=nvdec ! det.\n");
    }
    text += "detect name=det model=d.onnx ep=cuda max-batch=64 ! track ! batch devices=0,1\n\
             ! preprocess backend=cuda memory=device ! classify model=m.onnx ep=cuda\n\
             ! jsonl location=o.jsonl";
    let graph = build(&text, 0).unwrap_or_else(|e| panic!("{e}"));
    let detectors: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| graph.nodes[i].role == Role::Boxes)
        .collect();
    assert_eq!(detectors.len(), 2);
    for &d in &detectors {
        let det = graph.nodes[d]
            .element
            .downcast_ref::<DetectConfig>()
            .unwrap();
        assert_eq!((det.ep, det.max_batch), (Ep::Cuda(det.device as i32), 64));
        let classify = next_of(&graph, d, Role::Infer).unwrap();
        let classify = graph.nodes[classify]
            .element
            .downcast_ref::<ClassifyConfig>()
            .unwrap();
        assert_eq!(classify.ep, Ep::Cuda(det.device as i32));
        assert!(next_of(&graph, d, Role::Track).is_some());
    }
    // Streams 0 and 1 on GPU 0's detector, 2 and 3 on GPU 1's, decoded there.
    for s in (0..graph.nodes.len()).filter(|&i| graph.nodes[i].role == Role::Source) {
        let media = graph.nodes[s]
            .element
            .downcast_ref::<SourceConfig>()
            .unwrap();
        let gpu = media.stream as usize / 2;
        assert_eq!(media.device, gpu, "stream {}", media.stream);
        let det = next_of(&graph, s, Role::Boxes).unwrap();
        let det = graph.nodes[det].element.downcast_ref::<DetectConfig>();
        assert_eq!(det.unwrap().device, gpu, "stream {}", media.stream);
    }
    assert_eq!(
        graph.nodes.iter().filter(|n| n.role == Role::Sink).count(),
        1
    );
}

/// Three image streams of the shared data through one detector, on the CPU: spread over two
/// "GPUs" (two detectors, each with its streams) they give the objects of the one detector.
#[test]
fn streams_spread_over_two_detectors_give_the_boxes_of_one() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("devices-detect");
    let frames = data.join("visdrone/val-frames/images");
    let mut folders = Vec::new();
    for (s, skip) in [(0, 0), (1, 2), (2, 4)] {
        let to = dir.join(format!("s{s}"));
        std::fs::create_dir_all(&to).unwrap();
        for f in common::sorted_files(&frames).into_iter().skip(skip).take(2) {
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
        folders.push(to);
    }
    let run = |devices: &str, out: &str| {
        let out = dir.join(out);
        let mut text = String::new();
        for f in &folders {
            text += &format!("images location={} ! det.\n", f.display());
        }
        text += &format!(
            "detect name=det model={} ep=cpu labels=coco scale=1 tiles=960x960 overlap=0.15 \
             score=0.3 iou=0.5 max-batch=8 ! track ! batch {devices} ! jsonl location={}",
            data.join("models/coco-centernet-512.onnx").display(),
            out.display()
        );
        let graph = build(&text, 0).unwrap_or_else(|e| panic!("{e}"));
        let detectors = graph.nodes.iter().filter(|n| n.role == Role::Boxes).count();
        let outcome = Pipeline::build(graph).unwrap().run();
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        let mut lines = common::untimed_lines(&out);
        lines.sort();
        (detectors, lines, outcome.report)
    };
    let (one_detector, one, one_report) = run("", "one.jsonl");
    let (two_detectors, two, two_report) = run("devices=0,1", "two.jsonl");
    assert_eq!((one_detector, two_detectors), (1, 2));
    assert!(one.len() > 20, "{} objects", one.len());
    assert_eq!(one, two, "the same objects, boxes, tracks and scores");
    for r in [&one_report, &two_report] {
        assert_eq!((r.frames_in, r.processed, r.dropped_total()), (6, 6, 0));
        assert_eq!(r.streams.len(), 3);
    }
}

/// Live streams (image sequences played at their frame rate, `images live=true`) spread over
/// two "GPUs" (`batch devices=0,1`: two chains, each with its streams) give each stream the
/// objects, labels and scores it gets run alone; the file-mode test above, for live sources.
#[test]
fn live_streams_over_two_chains_give_each_stream_its_objects_alone() {
    let Some(data) = common::shared_data() else {
        return;
    };
    if !common::ort_ready() {
        return;
    }
    let dir = common::temp_dir("devices-live");
    let clip = data.join("visdrone/clip-9999999");
    let files = common::sorted_files(&clip.join("images"));
    let folders: Vec<_> = (0..3)
        .map(|s| {
            let to = dir.join(format!("s{s}"));
            std::fs::create_dir_all(&to).unwrap();
            for f in files.iter().skip(3 * s).take(3) {
                std::os::unix::fs::symlink(f, to.join(f.file_name().unwrap())).unwrap();
            }
            to
        })
        .collect();
    let branch = |f: &std::path::Path| {
        format!(
            "images location={} live=true framerate=2 ! boxes format=det location={}",
            f.display(),
            clip.join("annotations").display()
        )
    };
    let tail = |out: &std::path::Path| {
        format!(
            "! preprocess backend=cpu ! classify model={} ep=cpu ! jsonl location={}",
            data.join("models/visdrone-crops-64.onnx").display(),
            out.display()
        )
    };
    // Each object without its stream number and its wall-clock time: (stream, the rest of its
    // line).
    let run = |text: &str, batches: usize, out: &std::path::Path| {
        let graph = build(text, 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            graph.nodes.iter().filter(|n| n.role == Role::Batch).count(),
            batches
        );
        assert!(graph.elements::<SourceConfig>().all(|s| s.live));
        let outcome = Pipeline::build(graph).unwrap().run();
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        let mut objects: Vec<(u64, String)> = common::read_jsonl(out)
            .into_iter()
            .map(|mut o| {
                let stream = o["stream"].as_u64().unwrap();
                o.as_object_mut().unwrap().remove("stream");
                o.as_object_mut().unwrap().remove("timestamp");
                (stream, o.to_string())
            })
            .collect();
        objects.sort();
        (objects, outcome.report)
    };
    let mut spread = String::new();
    for f in &folders {
        spread += &format!("{} ! mux.\n", branch(f));
    }
    spread += &format!(
        "batch name=mux devices=0,1 {}",
        tail(&dir.join("spread.jsonl"))
    );
    let (together, report) = run(&spread, 2, &dir.join("spread.jsonl"));
    assert_eq!(
        (report.frames_in, report.processed, report.dropped_total()),
        (9, 9, 0),
        "live, nothing dropped: {report}"
    );
    for (s, f) in folders.iter().enumerate() {
        let out = dir.join(format!("alone{s}.jsonl"));
        let (alone, report) = run(&format!("{} ! batch {}", branch(f), tail(&out)), 1, &out);
        assert_eq!(
            (report.processed, report.dropped_total()),
            (3, 0),
            "{report}"
        );
        let alone: Vec<&String> = alone.iter().map(|(_, o)| o).collect();
        let mine: Vec<&String> = together
            .iter()
            .filter(|(stream, _)| *stream == s as u64)
            .map(|(_, o)| o)
            .collect();
        assert!(alone.len() > 100, "stream {s}: {} objects", alone.len());
        assert_eq!(mine.len(), alone.len(), "stream {s}: objects");
        if let Some((m, a)) = mine.iter().zip(&alone).find(|(m, a)| m != a) {
            panic!("stream {s}, spread: {m}\nalone: {a}");
        }
    }
}
