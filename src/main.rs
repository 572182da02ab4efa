//! The `octopipe` command line: parses arguments and calls the library.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

#[cfg(feature = "bench")]
use octopipe::bench::{self, PreprocessBenchOptions, ProbeOptions, Workload};
use octopipe::describe;
#[cfg(feature = "bench")]
use octopipe::frame::PixelFormat;
use octopipe::observe;
use octopipe::pipeline::{Pipeline, RunPath};
use octopipe::stage::Registry;

#[derive(Parser)]
#[command(
    name = "octopipe",
    version,
    about = "Real-time drone-video preprocessing: decode, boxes, ragged crop batches, classify, within a frame budget"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline given as text (`stage prop=value ! stage ...`) or as a .pipe file.
    Run {
        /// The description, or a file holding it.
        pipeline: String,
        /// Set a variable used as ${name} in the description (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        vars: Vec<String>,
        /// Per-frame budget in ms (default: one frame interval of the source, 33.3 ms at 30 fps).
        #[arg(long)]
        budget_ms: Option<f64>,
        /// Replace earlier output: every sink's and option's file or folder (else an existing
        /// one is refused).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        observe: ObserveArgs,
    },
    /// List the stages and their properties, or show one stage.
    Inspect {
        /// A stage name.
        stage: Option<String>,
    },
    /// Write the synthetic satellite scene (one 16-bit band: ocean, sea ice, clouds) as a 16-bit
    /// greyscale PNG, for pipelines/satellite-filter.pipe.
    Scene {
        /// The PNG to write, a new file (its folder is made if missing).
        #[arg(long)]
        out: PathBuf,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
        /// Width and height in pixels.
        #[arg(long, default_value_t = 8192)]
        size: u32,
        /// The scene's seed (the same pixels for the same seed and size).
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Make a continuous test video: a camera panning and zooming over a real VisDrone frame
    /// (H.264, OUT/video.mp4) and the ground truth its motion implies (MOT, OUT/gt.txt).
    Pan {
        /// The folder to write video.mp4 and gt.txt into (made if missing).
        #[arg(long)]
        out: PathBuf,
        /// The source image (default: a frame of $OCTOPIPE_DATA's clip).
        #[arg(long, requires = "annotations")]
        image: Option<PathBuf>,
        /// Its VisDrone DET annotations.
        #[arg(long, requires = "image")]
        annotations: Option<PathBuf>,
        /// Frames, at 30 fps.
        #[arg(long, default_value_t = octopipe::pan::DEFAULT_FRAMES)]
        frames: u32,
        /// Replace an earlier video and ground truth.
        #[arg(long)]
        force: bool,
    },
    /// Score a run's output against ground truth: detections, tracks (IDF1) or labels.
    Eval {
        #[command(subcommand)]
        what: octopipe::eval::EvalCommand,
    },
    /// Benchmarks and `probe` come with the `bench` feature: this build says how to get them.
    #[cfg(not(feature = "bench"))]
    #[command(hide = true, name = "bench", alias = "probe")]
    NoBench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Benchmarks (release builds only give meaningful numbers).
    #[cfg(feature = "bench")]
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// Pick the GPU strategy and tile size for the present GPU with micro-benchmarks.
    #[cfg(feature = "bench")]
    Probe {
        /// Shared data folder (real VisDrone box sizes); default $OCTOPIPE_DATA.
        #[arg(long)]
        data: Option<PathBuf>,
    },
}

#[cfg(feature = "bench")]
#[derive(Subcommand)]
enum BenchCommand {
    /// Crop + resize + normalize: CPU backend, naive CPU baseline, and GPU strategies A to E.
    Preprocess(PreprocessArgs),
    /// The detector's input: a frame's tiles preprocessed as one batch, CPU and GPU.
    DetectTiles {
        /// Seconds spent timing each row.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// CPU worker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Skip the GPU row.
        #[arg(long)]
        no_gpu: bool,
    },
    /// A model alone in ONNX Runtime: time per run and items per second, per execution provider,
    /// input memory (host, or device with the CUDA one) and batch size.
    Infer {
        /// The ONNX model.
        #[arg(long)]
        model: PathBuf,
        /// Execution providers: cpu, cuda (comma-separated).
        #[arg(long, default_value = "cpu,cuda", value_delimiter = ',')]
        ep: Vec<String>,
        /// Batch sizes (comma-separated).
        #[arg(long, default_value = "28,448", value_delimiter = ',')]
        batch: Vec<usize>,
        /// Timed runs per row.
        #[arg(long, default_value_t = 30)]
        runs: usize,
        /// ONNX Runtime intra-op threads (0: its default).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Ways of running on CUDA, each its own rows: plain, or +-joined bound (fixed batch
        /// sizes through bound buffers), graph (CUDA graphs, implies bound), nhwc, exhaustive,
        /// fusebias (each convolution's bias inside its cuDNN call).
        #[arg(long, default_value = "plain", value_delimiter = ',')]
        cuda: Vec<String>,
        /// Leave out the rows of changing batch sizes run as they come.
        #[arg(long)]
        fixed_only: bool,
    },
    /// The tracker on the VisDrone MOT ground truth with ids hidden: IDF1, ID switches, MOTA.
    Track {
        /// Shared data folder (visdrone/mot-test-dev-annotations); default $OCTOPIPE_DATA.
        #[arg(long)]
        data: Option<PathBuf>,
    },
    /// The broker sinks' messages: bytes per message (per frame, per object) on the clip and on
    /// synthetic boxes, and with --mqtt-port, messages a second through that broker.
    Messages {
        /// The clip folder; default $OCTOPIPE_DATA/visdrone/clip-9999999.
        #[arg(long)]
        clip: Option<PathBuf>,
        /// The classifier; default $OCTOPIPE_DATA/models/visdrone-crops-64.onnx.
        #[arg(long)]
        model: Option<PathBuf>,
        /// An MQTT broker on 127.0.0.1 to run messages through (QoS 1, then 0).
        #[arg(long)]
        mqtt_port: Option<u16>,
        /// Frames of each broker run.
        #[arg(long, default_value_t = 3000)]
        frames: u32,
    },
    /// The satellite tile filter: an 8192x8192 16-bit scene, 727 random tiles of 128..512 px,
    /// per-tile statistics and keep rule on the CPU, and on the GPU in one launch against one
    /// launch per tile and every tile padded to 512x512.
    Tiles {
        /// Scene width and height.
        #[arg(long, default_value_t = 8192)]
        size: u32,
        /// Tiles: the grid seed is the first from 1 whose random grid has this many.
        #[arg(long, default_value_t = 727)]
        tiles: usize,
        /// The grid seed (instead of searching for --tiles).
        #[arg(long)]
        grid_seed: Option<u64>,
        /// The keep rule.
        #[arg(long, default_value = "mean>0.535")]
        keep: String,
        /// Pixels per block of work.
        #[arg(long, default_value_t = octopipe::tilestats::DEFAULT_BLOCK_PIXELS)]
        block_pixels: u32,
        /// Seconds spent timing each CPU row.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// CPU worker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Skip the GPU rows.
        #[arg(long)]
        no_gpu: bool,
    },
    /// The whole pipeline (decode, boxes, batch, preprocess, classify) on N streams of H.264
    /// encoded from the clip: fps, latency, CPU and GPU use per streams x decoder x ep.
    Pipeline(Box<PipelineArgs>),
}

/// `octopipe bench pipeline`.
#[cfg(feature = "bench")]
#[derive(clap::Args)]
struct PipelineArgs {
    /// Stream counts, comma separated (file mode).
    #[arg(long, value_delimiter = ',', default_values_t = bench::pipeline::DEFAULT_STREAMS)]
    streams: Vec<usize>,
    /// Decoders of the media source, comma separated: cpu, nvdec, auto.
    #[arg(long = "decoder", value_delimiter = ',', default_value = "cpu")]
    decoders: Vec<String>,
    /// Classifier execution providers, comma separated: cpu, cuda.
    #[arg(long = "ep", value_delimiter = ',', default_value = "cpu")]
    eps: Vec<String>,
    /// Preprocess backend, cpu or cuda (default: cuda with ep=cuda or decoder=nvdec, else cpu).
    #[arg(long)]
    backend: Option<String>,
    /// Seconds of video per stream, at 30 fps.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The clip folder (its images/ are the video's frames); default
    /// $OCTOPIPE_DATA/visdrone/clip-9999999.
    #[arg(long)]
    clip: Option<PathBuf>,
    /// The classifier; default $OCTOPIPE_DATA/models/visdrone-crops-64.onnx.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Play the streams live at 30 fps and search the most held (p99 < 33.3 ms, nothing
    /// dropped) for each decoder and ep, instead of the --streams list.
    #[arg(long)]
    live: bool,
    /// Bound of the --live search.
    #[arg(long, default_value_t = bench::pipeline::DEFAULT_MAX_STREAMS)]
    max_streams: usize,
    /// With --live: play these stream counts (comma separated) instead of searching.
    #[arg(long, value_delimiter = ',')]
    live_streams: Vec<usize>,
    /// With --live: the p99 end-to-end latency a run must stay under to hold (default: one
    /// frame interval, 33.3 ms).
    #[arg(long)]
    p99_ms: Option<f64>,
    /// Largest number of frames in one batch (max-frames = min(streams, this)).
    #[arg(long, default_value_t = bench::pipeline::DEFAULT_BATCH_FRAMES)]
    batch_frames: usize,
    /// Synthetic boxes per frame.
    #[arg(long, default_value_t = bench::pipeline::DEFAULT_BOXES)]
    boxes: u32,
    /// Keep the encoded video at this new path (to rerun a row with `octopipe run`).
    #[arg(long)]
    keep_video: Option<PathBuf>,
    /// Spread the streams over these GPUs (comma-separated ordinals; each its own batch,
    /// preprocess and classify chain; one report).
    #[arg(long, value_delimiter = ',')]
    devices: Vec<usize>,
    /// Classifiers per chain (`classify workers=N`, each with its share of the cores as ONNX
    /// Runtime threads): for the CPU execution provider.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// `preprocess gather=auto|host|device` of the CUDA backend: crop rectangles pulled by the
    /// GPU from page-locked frames, or gathered on the host (default: auto).
    #[arg(long, value_parser = ["auto", "host", "device"])]
    gather: Option<String>,
    /// Boxes from this ONNX detector (the shared CenterNet's form), one `detect` stage shared
    /// by the streams, then `track`, instead of synthetic boxes.
    #[arg(long)]
    detector: Option<PathBuf>,
    /// The detector's tile size, WxH.
    #[arg(long, default_value = "640x640")]
    tiles: String,
    /// Detect every Nth frame of each stream (`detect interval=N`).
    #[arg(long, default_value_t = 1)]
    interval: u64,
    /// Most tiles per detector call (`detect max-batch`).
    #[arg(long, default_value_t = 64)]
    detector_batch: usize,
    /// Each stream its own detect and track stages (the baseline) instead of one shared.
    #[arg(long)]
    detector_per_stream: bool,
    /// More properties of the detect stage, as written in a description (e.g.
    /// "prefer-nhwc=true").
    #[arg(long, default_value = "")]
    detector_props: String,
    /// Video width (small values keep tests fast).
    #[arg(long, default_value_t = 1920, hide = true)]
    width: u32,
    /// Video height.
    #[arg(long, default_value_t = 1080, hide = true)]
    height: u32,
}

/// `octopipe bench preprocess`.
#[cfg(feature = "bench")]
#[derive(clap::Args)]
struct PreprocessArgs {
    /// Workloads: drone28, crops1000, streams16 (repeatable; default all).
    #[arg(long = "workload")]
    workloads: Vec<String>,
    /// Frame pixel format: i420, nv12, rgb, bgr, rgba, bgra.
    #[arg(long, default_value = "i420")]
    format: String,
    /// Output size WxH.
    #[arg(long, default_value = "224x224")]
    size: String,
    /// Shared data folder (real VisDrone box sizes); default $OCTOPIPE_DATA.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Seconds spent timing each CPU row.
    #[arg(long, default_value_t = 2.0)]
    cpu_seconds: f64,
    /// CPU worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Skip the GPU rows.
    #[arg(long)]
    no_gpu: bool,
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("octopipe: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<ExitCode> {
    ignore_file_size_signal();
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    } else {
        // Warnings (a live source gone quiet, a reconnect) are for the user: one plain line each.
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .event_format(PlainLines)
            .with_writer(std::io::stderr)
            .init();
    }
    match Cli::parse().command {
        Command::Run {
            pipeline,
            vars,
            budget_ms,
            force,
            observe,
        } => run(&pipeline, &vars, budget_ms, force, &observe),
        Command::Inspect { stage } => {
            print!("{}", inspect(stage.as_deref())?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Scene {
            out,
            force,
            size,
            seed,
        } => {
            if size == 0 {
                bail!("--size must be at least 1");
            }
            octopipe::tiles::scene::write_png(&out, size, size, seed, force)
                .map_err(anyhow::Error::msg)?;
            eprintln!(
                "octopipe: wrote {} ({size}x{size}, 16-bit grey, seed {seed})",
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Pan {
            out,
            image,
            annotations,
            frames,
            force,
        } => {
            let data = std::env::var_os("OCTOPIPE_DATA").map(PathBuf::from);
            let mut opts = match (image, annotations, data) {
                (Some(image), Some(annotations), _) => octopipe::pan::PanOptions {
                    image,
                    annotations,
                    ..octopipe::pan::PanOptions::shared(std::path::Path::new(""), &out)
                },
                (_, _, Some(data)) => octopipe::pan::PanOptions::shared(&data, &out),
                _ => bail!("the source image is needed: --image FILE --annotations FILE, or $OCTOPIPE_DATA (. scripts/env.sh)"),
            };
            (opts.frames, opts.overwrite) = (frames, force);
            let made = octopipe::pan::make(&opts)?;
            eprintln!(
                "octopipe: wrote {} ({} frames of {}x{} at {} fps, panning over {}) and {} ({} objects, {} rows)",
                made.video.display(),
                made.frames,
                opts.size.0,
                opts.size.1,
                octopipe::pan::FPS,
                opts.image.display(),
                made.truth.display(),
                made.objects,
                made.rows
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval { what } => {
            print!("{}", what.run()?);
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(not(feature = "bench"))]
        Command::NoBench { .. } => bail!(
            "`octopipe bench` and `octopipe probe` are in builds with the `bench` feature: cargo build --release --features bench (scoring a run's output is `octopipe eval`)"
        ),
        #[cfg(feature = "bench")]
        Command::Bench { what } => bench_command(what),
        #[cfg(feature = "bench")]
        Command::Probe { data } => {
            print!(
                "{}",
                bench::probe(&ProbeOptions {
                    data_dir: data.or_else(data_dir)
                })?
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A write past the file-size limit (`ulimit -f`) fails with an error the sinks report (after
/// cutting their output back to its last complete line), instead of SIGXFSZ killing the process
/// with no report. Set first thing: GStreamer may write its registry cache while it starts.
fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code; it is
    // process-wide and done once, before any other thread starts.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// `octopipe bench ...`.
#[cfg(feature = "bench")]
fn bench_command(what: BenchCommand) -> Result<ExitCode> {
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
        } => {
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
    Ok(ExitCode::SUCCESS)
}

/// `octopipe bench pipeline`: one row per run (or per step of the live search), progress on
/// stderr.
#[cfg(feature = "bench")]
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
                    props: args.detector_props.clone(),
                })
            }
            None => None,
        },
        ..PipelineBenchOptions::new(clip, model)
    };
    let table = bench::pipeline::pipeline(&opts, &mut |line| eprintln!("{line}"))?;
    print!("{table}");
    Ok(())
}

/// `octopipe bench preprocess`: the table of every backend and GPU strategy.
#[cfg(feature = "bench")]
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

/// `$OCTOPIPE_DATA`, if set.
#[cfg(feature = "bench")]
fn data_dir() -> Option<PathBuf> {
    std::env::var_os("OCTOPIPE_DATA").map(PathBuf::from)
}

fn run(
    pipeline: &str,
    vars: &[String],
    budget_ms: Option<f64>,
    force: bool,
    observe: &ObserveArgs,
) -> Result<ExitCode> {
    let vars = vars
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .with_context(|| format!("--set {kv}: expected NAME=VALUE"))
        })
        .collect::<Result<HashMap<_, _>>>()?;
    let (origin, text) = describe::load(pipeline)
        .with_context(|| format!("cannot read pipeline file {pipeline}"))?;
    let desc = describe::parse_with_env(&origin, &text, &vars)?;
    let registry = Registry::builtin();
    let mut graph = match observe.streams {
        true => describe::build_open(&desc, &registry)?,
        false => describe::build_with(&desc, &registry)?,
    };
    if let Some(ms) = budget_ms {
        if !(ms > 0.0 && ms.is_finite()) {
            bail!("--budget-ms must be a positive number of milliseconds, found {ms}");
        }
        graph.budget = Duration::from_secs_f64(ms / 1000.0);
    }
    // Before anything opens: no output of ours may land on an input of the run, nor replace
    // earlier output unless --force, and no station takes streams where anyone may add them.
    graph.check_paths(&observe.outputs())?;
    octopipe::sink::output::check_new(&observe.outputs(), force)?;
    graph.overwrite = force;
    let control = observe.control.config()?;
    if let (true, Some(addr)) = (observe.streams, &observe.metrics_addr) {
        control.check_exposure(addr)?;
    }
    let mut report = ReportTarget::open(observe, graph.writes_stdout(), force)?;
    let mut pipeline = Pipeline::build(graph)?;
    let streams = match observe.streams {
        true => Some(pipeline.streams(&registry)?),
        false => None,
    };
    let metrics = add_observers(&mut pipeline, observe, control)?;
    if let (Some(metrics), Some(streams)) = (&metrics, streams) {
        metrics.serve_streams(streams)?;
    }
    let signals = Signals::install(pipeline.stop_handle(), observe.report);
    let outcome = pipeline.run();
    let report_error = if signals.take_report() {
        report.write(&outcome.report).err()
    } else {
        None
    };
    if let Some(e) = &report_error {
        eprintln!("octopipe: error: {e}");
    }
    let code = match signals.exit_code() {
        Some(code) => {
            if let Some(e) = &outcome.error {
                eprintln!("octopipe: error: {e}");
            }
            eprintln!("octopipe: stopped by {}", signal_name(code - 128));
            code
        }
        None => match &outcome.error {
            Some(e) => {
                eprintln!("octopipe: error: {e}");
                1
            }
            None if report_error.is_some() => 1,
            None => 0,
        },
    };
    // The run is over, its outputs closed and its report written: end the process now, without
    // the C exit handlers. Stages still busy (a batch in a model, a sink blocked on its reader)
    // keep their threads, and libraries' own threads (GStreamer's, ONNX Runtime's, the CUDA
    // driver's) may still be winding down: exit handlers tearing libraries down under them
    // crashed two-GPU runs after their report (SIGSEGV in a library thread; BENCHMARKS.md).
    if outcome.abandoned.is_empty() {
        // (A sink blocked on its reader may be stuck in stdout: then nothing is flushed.)
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
    exit_now(code)
}

/// The end-of-run report: a table on stderr, or one JSON object on stdout.
fn print_report(report: &octopipe::budget::Report, format: ReportFormat) {
    if format == ReportFormat::Json {
        match serde_json::to_value(report) {
            Ok(json) => println!("{json}"),
            Err(e) => eprintln!("octopipe: error: the report as JSON: {e}"),
        }
    } else {
        eprintln!("{report}");
    }
}

/// End the process with `code` at once, skipping the exit handlers. Nothing is flushed: stderr
/// is unbuffered, the report's JSON line went out with its newline, and stdout may belong to a
/// sink blocked on a reader that stopped reading.
fn exit_now(code: i32) -> ! {
    // SAFETY: _exit ends the process; nothing after it runs.
    unsafe { libc::_exit(code) }
}

/// Where the end-of-run report goes: `--report-file`, else a JSON report on stdout (on stderr
/// when stdout carries the JSONL), else the text table on stderr.
enum ReportTarget {
    File {
        path: PathBuf,
        file: std::fs::File,
        json: bool,
    },
    Stdout,
    Stderr {
        json: bool,
    },
}

impl ReportTarget {
    /// Create the report file now, as the run starts (a folder that does not exist fails
    /// before the run, not after it).
    fn open(args: &ObserveArgs, stdout_taken: bool, force: bool) -> Result<ReportTarget> {
        let json = args.report == ReportFormat::Json;
        Ok(match &args.report_file {
            Some(path) => ReportTarget::File {
                file: octopipe::sink::output::create_file(path, force).map_err(|e| {
                    anyhow::anyhow!("--report-file {}: {}", path.display(), e.reason)
                })?,
                path: path.clone(),
                json,
            },
            None if json && !stdout_taken => ReportTarget::Stdout,
            None => ReportTarget::Stderr { json },
        })
    }

    /// Write `report`; a report file that cannot be written is an error, and the report goes to
    /// stderr instead.
    fn write(&mut self, report: &octopipe::budget::Report) -> std::result::Result<(), String> {
        use std::io::Write;
        let text = |json: bool| {
            if json {
                serde_json::to_string(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
            } else {
                report.to_string()
            }
        };
        match self {
            ReportTarget::Stdout => println!("{}", text(true)),
            ReportTarget::Stderr { json } => eprintln!("{}", text(*json)),
            ReportTarget::File { path, file, json } => {
                if let Err(e) = writeln!(file, "{}", text(*json)).and_then(|_| file.flush()) {
                    eprintln!("{report}");
                    return Err(format!(
                        "--report-file {}: write failed: {e}",
                        path.display()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What a run shows besides its output (`octopipe::observe`).
#[derive(clap::Args)]
struct ObserveArgs {
    /// Live progress on stderr: auto (a bar when stderr is a terminal, nothing otherwise), on (a
    /// bar on a terminal, a plain line every 2 s otherwise), bar, lines, off.
    #[arg(long, value_name = "WHEN", default_value = "auto", default_missing_value = "on", num_args = 0..=1)]
    progress: ProgressArg,
    /// End-of-run report: a text table on stderr, or one JSON object on stdout (on stderr when
    /// the JSONL goes to stdout, `jsonl location=-`).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    report: ReportFormat,
    /// Write the report (in the --report format) to this file instead; it may not be an input
    /// of the run.
    #[arg(long, value_name = "PATH")]
    report_file: Option<PathBuf>,
    /// Write a latency plot (per-frame end-to-end with the budget, per-stage stack): .svg or .png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Draw boxes, labels and scores on the frames: a folder of PNG files, or FILE.mp4 (a live
    /// stream skips frames, counted, when the writer falls behind).
    #[arg(long, value_name = "DIR|FILE.mp4")]
    annotate: Option<PathBuf>,
    /// Write the first crops as the classifier saw them (de-normalized tensors) as a PNG grid.
    #[arg(long, value_name = "FILE.png")]
    mosaic: Option<PathBuf>,
    /// Crops in the mosaic.
    #[arg(long, value_name = "N", default_value_t = 48)]
    mosaic_crops: usize,
    /// Serve Prometheus metrics at http://ADDR/metrics while running (e.g. 127.0.0.1:9184), and
    /// the pipeline's health at /health.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<String>,
    /// Take streams while running: POST /streams, DELETE /streams/ID, GET /streams on the
    /// --metrics-addr address. The run lasts until stopped (Ctrl-C, SIGTERM), and the
    /// description may have no source of its own (`batch ! classify model=m.onnx ! mqtt`).
    #[arg(long, requires = "metrics_addr")]
    streams: bool,
    #[command(flatten)]
    control: Box<ControlArgs>,
    /// Report GPU energy per frame from NVML (or why it is not available).
    #[arg(long)]
    energy: bool,
}

impl ObserveArgs {
    /// The files and folders these options write, for the check against the run's inputs.
    fn outputs(&self) -> Vec<RunPath> {
        let annotate = self
            .annotate
            .as_ref()
            .map(|path| match observe::AnnotateTarget::from_path(path) {
                observe::AnnotateTarget::Mp4(_) => RunPath::file("--annotate", path),
                observe::AnnotateTarget::PngDir(_) => RunPath::folder("--annotate", path),
            });
        let files = [
            ("--plot", &self.plot),
            ("--mosaic", &self.mosaic),
            ("--report-file", &self.report_file),
        ];
        files
            .into_iter()
            .filter_map(|(what, path)| path.as_ref().map(|p| RunPath::file(what, p)))
            .chain(annotate)
            .collect()
    }
}

/// How the control plane guards the streams of `--streams` (docs/security.md).
#[derive(clap::Args)]
struct ControlArgs {
    /// A file whose first line is the API token `/streams` asks for (as OCTOPIPE_API_TOKEN
    /// does); needed to take streams on an address that is not loopback.
    #[arg(long, value_name = "FILE")]
    api_token_file: Option<PathBuf>,
    /// A directory whose files streams added over HTTP may read (repeatable; none by default).
    #[arg(long, value_name = "DIR")]
    allow_dir: Vec<PathBuf>,
    /// GStreamer elements streams added over HTTP may name (comma-separated; none by default).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    allow_element: Vec<String>,
    /// A host name a request's Host may give besides IP addresses and localhost (repeatable).
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
    /// The most streams added over HTTP running at once (429 beyond).
    #[arg(long, value_name = "N", default_value_t = octopipe::control::DEFAULT_MAX_STREAMS)]
    max_streams: usize,
    /// The most HTTP connections served at once (503 beyond).
    #[arg(long, value_name = "N", default_value_t = octopipe::control::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
}

impl ControlArgs {
    fn config(&self) -> Result<octopipe::control::ControlConfig> {
        Ok(octopipe::control::ControlConfig::from_options(
            self.api_token_file.as_deref(),
            &self.allow_dir,
            &self.allow_element,
            &self.allow_host,
            self.max_streams,
            self.max_connections,
        )?)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProgressArg {
    Auto,
    On,
    Bar,
    Lines,
    Off,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ReportFormat {
    Text,
    Json,
}

/// Attach the observers `args` asks for; the metrics server (if any) lives as long as the value
/// returned.
fn add_observers(
    pipeline: &mut Pipeline,
    args: &ObserveArgs,
    control: octopipe::control::ControlConfig,
) -> Result<Option<octopipe::control::ControlPlane>> {
    use std::io::IsTerminal;
    let every = Duration::from_secs(2);
    let style = match (args.progress, std::io::stderr().is_terminal()) {
        (ProgressArg::Off, _) | (ProgressArg::Auto, false) => None,
        (ProgressArg::Bar, _) | (ProgressArg::Auto | ProgressArg::On, true) => {
            Some(observe::ProgressStyle::Bar)
        }
        (ProgressArg::Lines, _) | (ProgressArg::On, false) => {
            Some(observe::ProgressStyle::Lines(every))
        }
    };
    if let Some(style) = style {
        pipeline.observe(Box::new(observe::Progress::new(style)));
    }
    if let Some(path) = &args.plot {
        pipeline.observe(Box::new(observe::LatencyPlot::new(path)));
    }
    if let Some(path) = &args.annotate {
        let target = observe::AnnotateTarget::from_path(path);
        let interval = pipeline.frame_interval().unwrap_or(pipeline.budget());
        let annotator = observe::Annotator::new(target, interval)
            .map_err(|e| anyhow::anyhow!("--annotate {}: {e}", path.display()))?;
        let live = pipeline.is_live();
        pipeline.keep_pixels(true);
        pipeline.observe(Box::new(annotator.skip_when_behind(live)));
    }
    if let Some(path) = &args.mosaic {
        let preprocess = pipeline.caps().preprocess.clone().unwrap_or_default();
        let mosaic = observe::Mosaic::new(path, preprocess, args.mosaic_crops, 2);
        pipeline.observe(Box::new(mosaic));
    }
    if args.energy {
        pipeline.observe(Box::new(observe::Energy::new()));
    }
    let metrics = match &args.metrics_addr {
        Some(addr) => {
            let server = octopipe::control::ControlPlane::start(addr, control)?;
            eprintln!("metrics: http://{}/metrics", server.local_addr());
            pipeline.observe(server.observer());
            Some(server)
        }
        None => None,
    };
    Ok(metrics)
}

fn inspect(stage: Option<&str>) -> Result<String> {
    let registry = Registry::builtin();
    registry.inspect(stage).with_context(|| {
        let hint = stage
            .and_then(|name| describe::closest(name, registry.names()))
            .map(|c| format!(" (did you mean '{c}'?)"))
            .unwrap_or_default();
        format!("unknown stage '{}'{hint}", stage.unwrap_or_default())
    })
}

/// SIGINT and SIGTERM during a run: the first is acknowledged at once and stops the run (it
/// ends within the stop grace, the report printed); the second prints the report so far and
/// exits at once. Either way the exit status is 128 + the signal (130 SIGINT, 143 SIGTERM).
struct Signals {
    /// The first signal received, 0 while none.
    got: std::sync::Arc<std::sync::atomic::AtomicI32>,
    /// Whether the report was printed (by the main thread or on a second signal).
    reported: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Signals {
    fn install(stop: octopipe::pipeline::StopHandle, format: ReportFormat) -> Signals {
        use signal_hook::consts::{SIGINT, SIGTERM};
        use std::sync::atomic::Ordering;
        let signals = Signals {
            got: Default::default(),
            reported: Default::default(),
        };
        let (got, reported) = (signals.got.clone(), signals.reported.clone());
        match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
            Ok(mut incoming) => {
                std::thread::spawn(move || {
                    for sig in incoming.forever() {
                        let name = signal_name(sig);
                        if got.swap(sig, Ordering::SeqCst) == 0 {
                            eprintln!("octopipe: {name}: stopping (again to exit now)");
                            stop.stop();
                            continue;
                        }
                        eprintln!("octopipe: second {name}: exiting now");
                        if !reported.swap(true, Ordering::SeqCst) {
                            print_report_within(stop.report(), format, Duration::from_secs(1));
                        }
                        exit_now(128 + sig);
                    }
                });
            }
            Err(e) => eprintln!("octopipe: warning: cannot handle SIGINT/SIGTERM: {e}"),
        }
        signals
    }

    /// Whether the caller is to print the report (false once a second signal printed it).
    fn take_report(&self) -> bool {
        !self
            .reported
            .swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// 128 + the first signal received, if any.
    fn exit_code(&self) -> Option<i32> {
        let sig = self.got.load(std::sync::atomic::Ordering::SeqCst);
        (sig != 0).then_some(128 + sig)
    }
}

/// Print `report` from a thread of its own and wait at most `limit`: a reader that stopped
/// reading stdout must not keep the process from exiting.
fn print_report_within(report: octopipe::budget::Report, format: ReportFormat, limit: Duration) {
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        print_report(&report, format);
        let _ = done.send(());
    });
    let _ = wait.recv_timeout(limit);
}

fn signal_name(sig: i32) -> &'static str {
    if sig == signal_hook::consts::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    }
}

/// Warnings and errors logged by the library, as `octopipe: warning: ...` lines.
struct PlainLines;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for PlainLines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            _ => "note",
        };
        write!(writer, "octopipe: {level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
