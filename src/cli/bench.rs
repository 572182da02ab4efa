//! `octopipe bench ...` (the `bench` feature): each benchmark's options from its arguments.

use anyhow::{bail, Context, Result};

use octopipe::frame::PixelFormat;
use octopipe_tools::bench::{self, PreprocessBenchOptions, Workload};

use super::bench_args::{BenchCommand, PipelineArgs, PreprocessArgs};
use super::run::data_dir;

/// `octopipe bench ...`.
pub(crate) fn bench_command(what: BenchCommand) -> Result<()> {
    match what {
        BenchCommand::Preprocess(args) => bench_preprocess(args)?,
        BenchCommand::DetectTiles {
            seconds,
            threads,
            no_gpu,
        } => {
            let opts = bench::DetectTilesOptions {
                seconds,
                threads,
                gpu: !no_gpu,
                ..Default::default()
            };
            print!("{}", bench::detect_tiles(&opts)?);
        }
        BenchCommand::Infer {
            model,
            ep,
            batch,
            runs,
            threads,
            cuda,
            fixed_only,
            concurrent,
            engine,
        } => {
            let (mut ort, mut own) = (false, false);
            for e in &engine {
                match e.as_str() {
                    "ort" => ort = true,
                    "octopipe" => own = true,
                    other => anyhow::bail!("--engine {other}: expected ort or octopipe"),
                }
            }
            let eps = ep
                .iter()
                .map(|e| match e.as_str() {
                    "cpu" => Ok(octopipe::onnx::Ep::Cpu),
                    "cuda" => Ok(octopipe::onnx::Ep::Cuda(0)),
                    other => anyhow::bail!("--ep {other}: expected cpu or cuda"),
                })
                .collect::<Result<_>>()?;
            let opts = bench::InferOptions {
                model,
                eps,
                batches: batch,
                runs,
                threads,
                tunings: cuda
                    .iter()
                    .map(|t| bench::Tuning::parse(t))
                    .collect::<Result<_, _>>()?,
                fixed_only,
                concurrent,
                ort,
                octopipe: own,
            };
            print!("{}", bench::infer(&opts)?);
        }
        BenchCommand::Track { data } => {
            let data = data
                .or_else(data_dir)
                .context("the shared data folder is needed: --data DIR or $OCTOPIPE_DATA")?;
            print!("{}", bench::mot::track_table(&data)?);
        }
        BenchCommand::Pipeline(args) => bench_pipeline(*args)?,
        BenchCommand::Decode {
            clip,
            streams,
            decoder,
            codec,
            start,
            seconds,
            bitrate,
            devices,
        } => {
            use bench::pipeline::{Codec, DecodeBenchOptions, DecodeStart};
            let clip = clip
                .or_else(|| data_dir().map(|d| d.join("visdrone/clip-9999999")))
                .context("the clip is needed: --clip DIR or $OCTOPIPE_DATA")?;
            let codecs = codec
                .iter()
                .map(|c| Codec::parse(c).with_context(|| format!("--codec {c}: give h264 or h265")))
                .collect::<Result<_>>()?;
            let starts = start
                .iter()
                .map(|s| {
                    DecodeStart::parse(s).with_context(|| {
                        format!("--start {s}: give one-pipeline, serial, threads, threads-own-context or threads-4-contexts")
                    })
                })
                .collect::<Result<_>>()?;
            for d in &decoder {
                if !["cpu", "nvdec", "auto"].contains(&d.as_str()) {
                    bail!("--decoder {d}: give cpu, nvdec or auto");
                }
            }
            let opts = DecodeBenchOptions {
                streams,
                decoders: decoder,
                codecs,
                bitrate,
                starts,
                seconds,
                devices,
                ..DecodeBenchOptions::new(clip)
            };
            let mut progress = |line: &str| eprintln!("{line}");
            print!("{}", bench::pipeline::decode_bench(&opts, &mut progress)?);
        }
        BenchCommand::Messages {
            clip,
            model,
            mqtt_port,
            frames,
        } => {
            let data = data_dir();
            let clip = clip
                .or_else(|| data.as_ref().map(|d| d.join("visdrone/clip-9999999")))
                .context("the clip is needed: --clip DIR or $OCTOPIPE_DATA")?;
            let model = model
                .or_else(|| data.map(|d| d.join("models/visdrone-crops-64.onnx")))
                .context("the classifier is needed: --model FILE or $OCTOPIPE_DATA")?;
            let opts = bench::messages::MessagesOptions {
                clip,
                model,
                mqtt_port,
                frames,
            };
            print!("{}", bench::messages::messages(&opts)?);
        }
        BenchCommand::Tiles {
            size,
            tiles,
            grid_seed,
            keep,
            block_pixels,
            seconds,
            threads,
            no_gpu,
        } => {
            let opts = bench::TilesBenchOptions {
                size,
                tiles,
                grid_seed,
                keep,
                block_pixels,
                seconds,
                threads,
                gpu: !no_gpu,
                ..Default::default()
            };
            print!("{}", bench::tiles(&opts)?);
        }
    }
    Ok(())
}

/// `octopipe bench pipeline`: one row per run (or per step of the live search), progress on
/// stderr.
fn bench_pipeline(args: PipelineArgs) -> Result<()> {
    use bench::pipeline::{Compute, PipelineBenchOptions};
    let compute = |flag: &str, v: &str| {
        Compute::parse(v).with_context(|| format!("{flag} {v}: expected cpu or cuda"))
    };
    let data = data_dir();
    let clip = args
        .clip
        .or_else(|| data.as_ref().map(|d| d.join("visdrone/clip-9999999")))
        .context("the clip is needed: --clip DIR or $OCTOPIPE_DATA")?;
    let model = args
        .model
        .or_else(|| {
            data.as_ref()
                .map(|d| d.join("models/visdrone-crops-64.onnx"))
        })
        .context("the classifier is needed: --model FILE or $OCTOPIPE_DATA")?;
    let opts = PipelineBenchOptions {
        seconds: args.seconds,
        size: (args.width, args.height),
        streams: args.streams,
        decoders: args.decoders,
        eps: args
            .eps
            .iter()
            .map(|e| compute("--ep", e))
            .collect::<Result<_>>()?,
        backend: args
            .backend
            .as_deref()
            .map(|b| compute("--backend", b))
            .transpose()?,
        boxes: args.boxes,
        batch_frames: args.batch_frames,
        live: args.live,
        max_streams: args.max_streams,
        live_streams: args.live_streams,
        p99_ms: args.p99_ms,
        budget_ms: args.budget_ms,
        keep_video: args.keep_video,
        devices: args.devices,
        workers: args.workers,
        gather: args.gather,
        detector: match args.detector {
            Some(model) => {
                let (w, h) = args
                    .tiles
                    .split_once('x')
                    .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
                    .filter(|&(w, h)| w > 0 && h > 0)
                    .with_context(|| format!("--tiles {}: expected WxH", args.tiles))?;
                Some(bench::pipeline::DetectBench {
                    model,
                    tiles: (w, h),
                    interval: args.interval,
                    max_batch: args.detector_batch,
                    per_stream: args.detector_per_stream,
                    queue: args.detector_queue,
                    props: args.detector_props.clone(),
                })
            }
            None => None,
        },
        images: args.images,
        codec: bench::pipeline::Codec::parse(&args.codec)
            .with_context(|| format!("--codec {}: expected h264 or h265", args.codec))?,
        bitrate: args.bitrate,
        motion: bench::pipeline::Motion::parse(&args.motion)
            .with_context(|| format!("--motion {}: expected still or pan", args.motion))?,
        classifiers: args.classifiers,
        reinfer: args.reinfer,
        preprocess_props: args.preprocess_props,
        classify_props: args.classify_props,
        decode_only: !args.no_decode_only,
        detector_alone: !args.no_detector_alone,
        ..PipelineBenchOptions::new(clip, model)
    };
    let table = bench::pipeline::pipeline(&opts, &mut |line| eprintln!("{line}"))?;
    print!("{table}");
    Ok(())
}

/// `octopipe bench preprocess`: the table of every backend and GPU strategy.
fn bench_preprocess(args: PreprocessArgs) -> Result<()> {
    let PreprocessArgs {
        workloads,
        format,
        size,
        data,
        cpu_seconds,
        threads,
        no_gpu,
    } = args;
    let workloads = workloads
        .iter()
        .map(|w| {
            Workload::parse(w).with_context(|| {
                format!("--workload {w}: expected drone28, crops1000 or streams16")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let format = match format.as_str() {
        "i420" => PixelFormat::I420,
        "nv12" => PixelFormat::Nv12,
        "rgb" => PixelFormat::Rgb,
        "bgr" => PixelFormat::Bgr,
        "rgba" => PixelFormat::Rgba,
        "bgra" => PixelFormat::Bgra,
        other => bail!("--format {other}: expected i420, nv12, rgb, bgr, rgba or bgra"),
    };
    let size = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .filter(|(w, h): &(u32, u32)| *w > 0 && *h > 0)
        .with_context(|| format!("--size {size}: expected WIDTHxHEIGHT, e.g. 224x224"))?;
    let opts = PreprocessBenchOptions {
        data_dir: data.or_else(data_dir),
        workloads,
        format,
        size,
        cpu_seconds,
        threads,
        gpu: !no_gpu,
        ..Default::default()
    };
    print!("{}", bench::preprocess(&opts)?);
    Ok(())
}
