//! The pipeline benchmark's descriptions and search.

use super::*;
use std::collections::HashMap;

/// `text` parsed and built as `octopipe run` would, with every variable the benchmark's
/// descriptions use; a failure panics with the description.
fn built(text: &str) -> octopipe_pipeline::describe::Graph {
    let vars = HashMap::from(
        [
            ("video", "v.mp4"),
            ("model", "m.onnx"),
            ("detector", "d.onnx"),
            ("images", "clip/images"),
            ("annotations", "clip/annotations"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let desc = octopipe_pipeline::describe::parse("bench", text, &vars)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    octopipe_pipeline::describe::build(&desc).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn spec(streams: usize, ep: Compute) -> RunSpec {
    RunSpec {
        streams,
        decoder: "cpu".into(),
        ep,
        backend: ep,
        boxes: 28,
        batch_frames: 16,
        live: false,
        devices: Vec::new(),
        workers: 1,
        gather: None,
        detector: None,
        images: None,
        classifiers: 1,
        reinfer: 1,
        preprocess_props: String::new(),
        classify_props: String::new(),
        budget_ms: None,
    }
}

#[test]
fn the_search_finds_the_largest_held() {
    for limit in 0..40 {
        let mut tried = Vec::new();
        let got = search_streams(32, |n| {
            tried.push(n);
            n <= limit
        });
        assert_eq!(got, limit.min(32), "limit {limit}, tried {tried:?}");
        assert!(tried.len() <= 11, "limit {limit}, tried {tried:?}");
    }
    assert_eq!(search_streams(96, |_| true), 96);
}

#[test]
fn descriptions_have_one_branch_per_stream_into_one_batch() {
    let text = description(&spec(3, Compute::Cpu));
    assert_eq!(text.matches("media location=${video}").count(), 3);
    assert_eq!(text.matches("! mux.").count(), 2);
    assert!(text.contains("batch name=mux max-frames=3 max-crops=84\n"));
    assert!(text.contains("preprocess backend=cpu\n"));
    assert!(!text.contains("device="), "{text}");
    assert!(text.contains("classify model=${model} ep=cpu max-batch=84"));
    assert!(text.contains("decoder=cpu"), "{text}");
    let cuda = description(&RunSpec {
        decoder: "nvdec".into(),
        ..spec(40, Compute::Cuda)
    });
    assert!(cuda.contains("decoder=nvdec"));
    assert!(cuda.contains("max-frames=16 max-crops=448"));
    assert!(cuda.contains("preprocess backend=cuda memory=device"));
    let live = description(&RunSpec {
        live: true,
        ..spec(1, Compute::Cpu)
    });
    assert!(live.contains("live=true"));
    // Two GPUs: the batch stage spreads the streams, a batch holds one GPU's streams.
    let two = description(&RunSpec {
        decoder: "nvdec".into(),
        devices: vec![0, 1],
        ..spec(5, Compute::Cuda)
    });
    assert!(
        two.contains("batch name=mux max-frames=3 max-crops=84 devices=0,1\n"),
        "{two}"
    );
    assert!(!two.contains("device="), "{two}");
    // Built: streams 0, 1, 2 decoded and batched on GPU 0, streams 3, 4 on GPU 1, each GPU's
    // preprocess and classifier on it, one sink.
    let graph = built(&two);
    let batches: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| graph.nodes[i].role == octopipe_core::stage::Role::Batch)
        .collect();
    assert_eq!(batches.len(), 2);
    let device_of_batch = |b: usize| {
        let mut at = graph.nodes[b].output;
        while let Some(i) = at {
            if let Some(p) = graph.nodes[i]
                .element
                .downcast_ref::<octopipe_stages::preprocess::PreprocessConfig>()
            {
                return p.device;
            }
            at = graph.nodes[i].output;
        }
        panic!("no preprocess after batch node {b}");
    };
    for (i, source) in graph.sources().enumerate() {
        let media = source
            .element
            .downcast_ref::<octopipe_sources::SourceConfig>()
            .unwrap();
        assert_eq!((media.stream, media.device), (i as u32, i * 2 / 5));
        let mut at = source.output;
        while let Some(n) = at.filter(|n| !batches.contains(n)) {
            at = graph.nodes[n].output;
        }
        assert_eq!(device_of_batch(at.unwrap()), i * 2 / 5, "stream {i}");
    }
    for b in &batches {
        let cfg = graph.nodes[*b]
            .element
            .downcast_ref::<octopipe_stages::batch::BatchConfig>()
            .unwrap();
        assert_eq!((cfg.max_frames, cfg.max_crops), (3, 84));
    }
    let eps: Vec<octopipe_onnx::onnx::Ep> = graph
        .elements::<octopipe_onnx::classify::ClassifyConfig>()
        .map(|c| c.ep)
        .collect();
    assert_eq!(eps.len(), 2);
    assert!(
        eps.contains(&octopipe_onnx::onnx::Ep::Cuda(0))
            && eps.contains(&octopipe_onnx::onnx::Ep::Cuda(1))
    );
    let sinks = graph
        .nodes
        .iter()
        .filter(|n| n.role == octopipe_core::stage::Role::Sink);
    assert_eq!(sinks.count(), 1);
}

#[test]
fn preprocess_runs_where_the_frames_or_the_classifier_need_it() {
    assert_eq!(default_backend("cpu", Compute::Cpu), Compute::Cpu);
    assert_eq!(default_backend("cpu", Compute::Cuda), Compute::Cuda);
    assert_eq!(default_backend("nvdec", Compute::Cpu), Compute::Cuda);
    assert_eq!(default_backend("auto", Compute::Cpu), Compute::Cpu);
}

#[test]
fn workers_go_to_the_classify_stage() {
    let text = description(&RunSpec {
        workers: 4,
        ..spec(8, Compute::Cpu)
    });
    assert!(text.contains(" workers=4 ort-threads="), "{text}");
    assert!(!description(&spec(8, Compute::Cpu)).contains("workers="));
}

#[test]
fn the_detector_alone_runs_with_the_stages_cuda_options() {
    let mut d = DetectBench {
        model: "d.onnx".into(),
        tiles: (640, 640),
        interval: 1,
        max_batch: 64,
        per_stream: false,
        queue: None,
        props: String::new(),
    };
    let run = RunSpec {
        detector: Some(d.clone()),
        ..spec(2, Compute::Cuda)
    };
    let t = run::detect_config(&run, &d).cuda;
    assert!(!t.graph && !t.nhwc, "the stage's defaults");
    assert_eq!(t.priority, octopipe_cuda::StreamPriority::Normal);
    d.props = "cuda-graph=true prefer-nhwc=true gpu-priority=high".into();
    let run = RunSpec {
        detector: Some(d.clone()),
        ..run
    };
    let c = run::detect_config(&run, &d);
    assert!(c.cuda.graph && c.cuda.nhwc, "as --detector-props sets them");
    assert_eq!(c.cuda.priority, octopipe_cuda::StreamPriority::High);
    // The model alone is timed on what runs it in the stage: ONNX Runtime by default,
    // octopipe's engine with `engine=octopipe`.
    use octopipe_onnx::detect::DetectEngine;
    assert_eq!(c.engine, DetectEngine::Ort);
    d.props = "engine=octopipe".into();
    let run = RunSpec {
        detector: Some(d.clone()),
        ..run
    };
    assert_eq!(run::detect_config(&run, &d).engine, DetectEngine::Octopipe);
}

#[test]
fn with_a_detector_the_streams_join_it_and_a_tracker() {
    let d = DetectBench {
        model: "d.onnx".into(),
        tiles: (640, 640),
        interval: 2,
        max_batch: 64,
        per_stream: false,
        queue: None,
        props: String::new(),
    };
    let text = description(&RunSpec {
        detector: Some(d.clone()),
        ..spec(3, Compute::Cuda)
    });
    assert_eq!(text.matches("! det.").count(), 2, "{text}");
    assert!(!text.contains("boxes format=synthetic"), "{text}");
    assert!(text.contains("detect name=det model=${detector}"), "{text}");
    assert!(
        text.contains("tiles=640x640") && text.contains("interval=2"),
        "{text}"
    );
    assert!(text.contains("ep=cuda backend=cuda max-batch=64"), "{text}");
    assert!(text.contains("\n  ! track\n  ! batch name=mux"), "{text}");
    assert!(text.contains("labels=coco"), "{text}");
    let six = DetectBench {
        props: "labels=person,bicycle,car,motorcycle,bus,truck".into(),
        ..d.clone()
    };
    let cut = description(&RunSpec {
        detector: Some(six),
        ..spec(3, Compute::Cuda)
    });
    assert!(
        !cut.contains("labels=coco"),
        "a cut model's own labels: {cut}"
    );
    assert_eq!(cut.matches("labels=person,bicycle").count(), 1, "{cut}");
    let queued = description(&RunSpec {
        detector: Some(DetectBench {
            queue: Some(4),
            ..d.clone()
        }),
        ..spec(3, Compute::Cuda)
    });
    assert_eq!(
        queued.matches("! queue size=4 ! det.").count(),
        2,
        "{queued}"
    );
    assert_eq!(queued.matches("! queue size=4\n").count(), 1, "{queued}");
    let graph = built(&text);
    let detectors: Vec<&octopipe_onnx::detect::DetectConfig> = graph
        .elements::<octopipe_onnx::detect::DetectConfig>()
        .collect();
    assert_eq!(detectors.len(), 1, "one detector for the three streams");
    assert_eq!(graph.sources().count(), 3);

    // Two GPUs: one detector each, for its streams (0 and 1 on GPU 0, 2 on GPU 1).
    let text = description(&RunSpec {
        detector: Some(d.clone()),
        devices: vec![0, 1],
        ..spec(3, Compute::Cuda)
    });
    let graph = built(&text);
    let mut devices: Vec<usize> = graph
        .elements::<octopipe_onnx::detect::DetectConfig>()
        .map(|c| c.device)
        .collect();
    devices.sort();
    assert_eq!(devices, [0, 1], "{text}");
    let decoded: Vec<usize> = graph
        .sources()
        .map(|s| {
            let media = s.element.downcast_ref::<octopipe_sources::SourceConfig>();
            media.unwrap().device
        })
        .collect();
    assert_eq!(decoded, [0, 0, 1]);

    built(&queued);

    // The baseline: a detector and a tracker in each stream's branch.
    let text = description(&RunSpec {
        detector: Some(DetectBench {
            per_stream: true,
            ..d
        }),
        ..spec(3, Compute::Cuda)
    });
    assert!(!text.contains("det."), "{text}");
    assert_eq!(text.matches(" ! track ! mux.").count(), 2, "{text}");
    let graph = built(&text);
    let detectors = graph
        .elements::<octopipe_onnx::detect::DetectConfig>()
        .count();
    assert_eq!(detectors, 3, "one detector per stream:\n{text}");
}

#[test]
fn image_streams_and_more_classifiers_are_written_into_the_description() {
    let images = ImageStreams {
        images: "clip/images".into(),
        annotations: Some("clip/annotations".into()),
        files: 34,
        loops: 1,
    }
    .with_frames(90);
    assert_eq!((images.loops, images.frames_per_stream()), (3, 102));
    let text = description(&RunSpec {
        decoder: "nvjpeg".into(),
        backend: default_backend("nvjpeg", Compute::Cpu),
        images: Some(images.clone()),
        classifiers: 2,
        ..spec(2, Compute::Cpu)
    });
    assert_eq!(
        text.matches("images location=${images} loop=3 decoder=nvjpeg ! boxes format=det location=${annotations}")
            .count(),
        2,
        "{text}"
    );
    assert!(!text.contains("media "), "{text}");
    assert!(text.contains("preprocess backend=cuda\n"), "{text}");
    let heads: Vec<&str> = text.lines().filter(|l| l.contains("! classify ")).collect();
    assert_eq!(heads.len(), 2, "{text}");
    assert!(heads[0].ends_with("labels=person,two-wheeler,car,large-vehicle"));
    assert!(heads[1].ends_with("labels=c2:person,c2:two-wheeler,c2:car,c2:large-vehicle"));
    // Every classifier reuses its tracks' labels with --reinfer.
    let reused = description(&RunSpec {
        classifiers: 2,
        reinfer: 900,
        ..spec(2, Compute::Cpu)
    });
    assert_eq!(
        reused.matches(" reinfer-interval=900").count(),
        2,
        "{reused}"
    );
    assert!(!text.contains("reinfer-interval"), "{text}");
    built(&reused);
    // --preprocess-props and --classify-props reach their stages (every classifier).
    let tuned = description(&RunSpec {
        classifiers: 2,
        preprocess_props: "gpu-priority=high".into(),
        classify_props: " gpu-priority=high ".into(),
        ..spec(2, Compute::Cuda)
    });
    assert_eq!(tuned.matches(" gpu-priority=high\n").count(), 3, "{tuned}");
    assert!(tuned.contains("! preprocess backend=cuda memory=device gpu-priority=high\n"));
    built(&tuned);
    // Spread over two GPUs: streams 0 and 1 decoded by GPU 0's nvJPEG, 2 by GPU 1's.
    let spread = description(&RunSpec {
        decoder: "nvjpeg".into(),
        images: Some(images.clone()),
        devices: vec![0, 1],
        ..spec(3, Compute::Cuda)
    });
    let graph = built(&spread);
    let decoded: Vec<(u32, usize)> = graph
        .elements::<octopipe_sources::SourceConfig>()
        .map(|s| (s.stream, s.device))
        .collect();
    assert_eq!(decoded, [(0, 0), (1, 0), (2, 1)], "{spread}");
    // A folder without annotations: synthetic boxes.
    let bare = description(&RunSpec {
        images: Some(ImageStreams {
            annotations: None,
            ..images
        }),
        ..spec(1, Compute::Cpu)
    });
    assert!(
        bare.contains("decoder=cpu ! boxes format=synthetic count=28\n"),
        "{bare}"
    );
}

#[test]
fn bad_options_are_refused_naming_the_flag() {
    let dir = std::env::temp_dir().join(format!("octopipe-bench-opts-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("images")).unwrap();
    std::fs::write(dir.join("model.onnx"), b"").unwrap();
    let base = PipelineBenchOptions::new(dir.clone(), dir.join("model.onnx"));
    let refused = |opts: PipelineBenchOptions| opts.check().unwrap_err().to_string();
    assert_eq!(
        refused(PipelineBenchOptions {
            decoders: vec!["nvjpeg".into()],
            ..base.clone()
        }),
        "--decoder nvjpeg: expected auto, cpu, nvdec"
    );
    assert_eq!(
        refused(PipelineBenchOptions {
            bitrate: 0,
            ..base.clone()
        }),
        "--bitrate 0: expected 1 to 102400 kbit/s"
    );
    assert_eq!(
        refused(PipelineBenchOptions {
            classifiers: 5,
            ..base.clone()
        }),
        "--classifiers 5: expected 1 to 4"
    );
    assert_eq!(
        refused(PipelineBenchOptions {
            budget_ms: Some(0.0),
            ..base.clone()
        }),
        "--budget-ms 0: expected a budget above 0 ms and at most 1e12 ms"
    );
    for b in [1e300, f64::NAN, f64::INFINITY] {
        let e = refused(PipelineBenchOptions {
            budget_ms: Some(b),
            ..base.clone()
        });
        assert!(
            e.ends_with("expected a budget above 0 ms and at most 1e12 ms"),
            "{e}"
        );
    }
    assert_eq!(
        refused(PipelineBenchOptions {
            reinfer: 0,
            ..base.clone()
        }),
        "--reinfer 0: expected 1 to 1000000 frames"
    );
    assert_eq!(
        refused(PipelineBenchOptions {
            reinfer: 30,
            workers: 2,
            ..base.clone()
        }),
        "--reinfer 30 with --workers 2: a classifier that reuses its tracks' labels runs one worker"
    );
    // Image streams: a folder with no JPEG file, then nvdec (a video decoder).
    let images = PipelineBenchOptions {
        images: Some(dir.clone()),
        ..base.clone()
    };
    assert_eq!(
        refused(images.clone()),
        format!(
            "--images {}: no JPEG files (*.jpg, *.jpeg) in it",
            dir.display()
        )
    );
    std::fs::write(dir.join("images/a.jpg"), b"").unwrap();
    images.check().unwrap();
    assert_eq!(
        refused(PipelineBenchOptions {
            keep_video: Some(dir.join("v.mp4")),
            ..images.clone()
        }),
        "--keep-video: image streams (--images) make no video"
    );
    assert_eq!(
        refused(PipelineBenchOptions {
            decoders: vec!["nvdec".into()],
            ..images
        }),
        "--decoder nvdec: expected auto, cpu, nvjpeg (with --images)"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
