//! The command line's arguments: the clap structs and enums.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use octopipe::observe;
use octopipe::pipeline::RunPath;
#[cfg(feature = "bench")]
use octopipe_tools::bench;

#[derive(Parser)]
#[command(
    name = "octopipe",
    version,
    about = "Real-time drone-video preprocessing: decode, boxes, ragged crop batches, classify, within a frame budget"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Say more: GStreamer's debug detail after an error (the element and source line that
    /// posted it), and the library's notes (`info` lines) as they come.
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    /// How a thread waiting on a GPU waits: `auto` (CUDA's choice: spin while there are more
    /// cores than contexts), `spin`, `yield`, or `block` (sleep until the GPU signals: no core
    /// busy while waiting, a little more latency per wait). For every GPU of the process.
    #[arg(long, global = true, value_name = "HOW", default_value = "auto", value_parser = parse_host_wait)]
    pub(crate) cuda_wait: octopipe::cuda::HostWait,
}

fn parse_host_wait(s: &str) -> Result<octopipe::cuda::HostWait, String> {
    s.parse()
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
        #[arg(long, default_value_t = octopipe_tools::pan::DEFAULT_FRAMES)]
        frames: u32,
        /// Replace an earlier video and ground truth.
        #[arg(long)]
        force: bool,
    },
    /// Score a run's output against ground truth: detections, tracks (IDF1) or labels.
    Eval {
        #[command(subcommand)]
        what: octopipe_tools::eval::EvalCommand,
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
pub(crate) enum BenchCommand {
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
        /// With a bound tuning on CUDA: this many copies of the model, each with its sessions
        /// and CUDA stream, run at once from threads of their own (their throughput together).
        #[arg(long, default_value_t = 1)]
        concurrent: usize,
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
    /// The whole pipeline (decode, boxes, batch, preprocess, classify) on N streams of H.264 or
    /// H.265 encoded from the clip, or of a folder's JPEG files (--images): fps, latency, CPU and
    /// GPU use per streams x decoder x ep, against the decoder alone.
    Pipeline(Box<PipelineArgs>),
    /// The decoders alone on N streams of the clip encoded as H.264 or H.265: when each stream's
    /// first frame came (the start) and the frames per second while every stream decoded (the
    /// steady state), per way of starting the streams.
    Decode {
        /// The clip folder; default $OCTOPIPE_DATA/visdrone/clip-9999999.
        #[arg(long)]
        clip: Option<PathBuf>,
        /// Stream counts (comma-separated).
        #[arg(long, default_value = "1,16", value_delimiter = ',')]
        streams: Vec<usize>,
        /// Decoders: cpu, nvdec, auto (comma-separated).
        #[arg(long, default_value = "nvdec", value_delimiter = ',')]
        decoder: Vec<String>,
        /// Codecs: h264, h265 (comma-separated).
        #[arg(long, default_value = "h264", value_delimiter = ',')]
        codec: Vec<String>,
        /// Ways of starting: one-pipeline, serial, threads, threads-own-context
        /// (comma-separated).
        #[arg(long, default_value = "one-pipeline,threads", value_delimiter = ',')]
        start: Vec<String>,
        /// Seconds of video a stream.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// The videos' bitrate, kbit/s.
        #[arg(long, default_value_t = octopipe_tools::bench::pipeline::BITRATE_KBPS)]
        bitrate: u32,
        /// GPUs the streams spread over (comma-separated; default GPU 0).
        #[arg(long, value_delimiter = ',')]
        devices: Vec<usize>,
    },
}

/// `octopipe bench pipeline`.
#[cfg(feature = "bench")]
#[derive(clap::Args)]
pub(crate) struct PipelineArgs {
    /// Stream counts, comma separated (file mode).
    #[arg(long, value_delimiter = ',', default_values_t = bench::pipeline::DEFAULT_STREAMS)]
    pub(crate) streams: Vec<usize>,
    /// Decoders, comma separated, each its own rows: cpu, nvdec, auto (the video's media
    /// source); cpu, nvjpeg, auto with --images.
    #[arg(
        long = "decoder",
        alias = "decoders",
        value_delimiter = ',',
        default_value = "cpu"
    )]
    pub(crate) decoders: Vec<String>,
    /// Image streams of this folder instead of the video: a clip folder (its images/, with
    /// annotations/ as the boxes) or a folder of JPEG files (synthetic boxes), looped to
    /// --seconds at 30 frames a stream; --decoders cpu,nvjpeg compares the decoders in one run.
    #[arg(long)]
    pub(crate) images: Option<PathBuf>,
    /// The video's codec: h264 (x264enc) or h265 (x265enc).
    #[arg(long, default_value = "h264", value_parser = ["h264", "h265"])]
    pub(crate) codec: String,
    /// The video's bitrate, kbit/s.
    #[arg(long, default_value_t = bench::pipeline::BITRATE_KBPS)]
    pub(crate) bitrate: u32,
    /// Classifier stages one after the other (the second and later: copies of --model with
    /// labels prefixed c2:, c3:, ...).
    #[arg(long, default_value_t = 1)]
    pub(crate) classifiers: usize,
    /// Classify a tracked box once every N frames of its stream (`classify reinfer-interval=N`
    /// on every classifier; in between it keeps its track's label, and a box whose size changes
    /// by more than 25% a side is classified again); DeepStream's classifiers behind a tracker
    /// classify an object once, and again only when its area grows by 20%.
    #[arg(long, default_value_t = 1)]
    pub(crate) reinfer: u64,
    /// Leave out the decode-only ceiling (the same streams decoded by GStreamer alone, run
    /// once per stream count and decoder).
    #[arg(long)]
    pub(crate) no_decode_only: bool,
    /// Leave out the detector model alone (with --detector: run once per batch size its calls
    /// ran at, to give the pipeline's detector as a share of it).
    #[arg(long)]
    pub(crate) no_detector_alone: bool,
    /// Classifier execution providers, comma separated: cpu, cuda.
    #[arg(long = "ep", value_delimiter = ',', default_value = "cpu")]
    pub(crate) eps: Vec<String>,
    /// Preprocess backend, cpu or cuda (default: cuda with ep=cuda or decoder=nvdec, else cpu).
    #[arg(long)]
    pub(crate) backend: Option<String>,
    /// Seconds of video per stream, at 30 fps.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) seconds: f64,
    /// The clip folder (its images/ are the video's frames); default
    /// $OCTOPIPE_DATA/visdrone/clip-9999999.
    #[arg(long)]
    pub(crate) clip: Option<PathBuf>,
    /// The classifier; default $OCTOPIPE_DATA/models/visdrone-crops-64.onnx.
    #[arg(long)]
    pub(crate) model: Option<PathBuf>,
    /// Play the streams live at 30 fps and search the most held (p99 < 33.3 ms, nothing
    /// dropped) for each decoder and ep, instead of the --streams list.
    #[arg(long)]
    pub(crate) live: bool,
    /// Bound of the --live search.
    #[arg(long, default_value_t = bench::pipeline::DEFAULT_MAX_STREAMS)]
    pub(crate) max_streams: usize,
    /// With --live: play these stream counts (comma separated) instead of searching.
    #[arg(long, value_delimiter = ',')]
    pub(crate) live_streams: Vec<usize>,
    /// With --live: the p99 end-to-end latency a run must stay under to hold (default: one
    /// frame interval, 33.3 ms).
    #[arg(long)]
    pub(crate) p99_ms: Option<f64>,
    /// The pipeline's per-frame budget, ms, as `octopipe run --budget-ms` (the detect and batch
    /// stages' collections wait by it; default: one frame interval, 33.3 ms).
    #[arg(long)]
    pub(crate) budget_ms: Option<f64>,
    /// Largest number of frames in one batch (max-frames = min(streams, this)).
    #[arg(long, default_value_t = bench::pipeline::DEFAULT_BATCH_FRAMES)]
    pub(crate) batch_frames: usize,
    /// Synthetic boxes per frame.
    #[arg(long, default_value_t = bench::pipeline::DEFAULT_BOXES)]
    pub(crate) boxes: u32,
    /// Keep the encoded video at this new path (to rerun a row with `octopipe run`).
    #[arg(long)]
    pub(crate) keep_video: Option<PathBuf>,
    /// Spread the streams over these GPUs (comma-separated ordinals; each its own batch,
    /// preprocess and classify chain, and with --detector its own detector and tracker; one
    /// report).
    #[arg(long, value_delimiter = ',')]
    pub(crate) devices: Vec<usize>,
    /// Classifiers per chain (`classify workers=N`, each with its share of the cores as ONNX
    /// Runtime threads): for the CPU execution provider.
    #[arg(long, default_value_t = 1)]
    pub(crate) workers: usize,
    /// `preprocess gather=auto|host|device` of the CUDA backend: crop rectangles pulled by the
    /// GPU from page-locked frames, or gathered on the host (default: auto).
    #[arg(long, value_parser = ["auto", "host", "device"])]
    pub(crate) gather: Option<String>,
    /// Boxes from this ONNX detector (the shared CenterNet's form), one `detect` stage shared
    /// by the streams, then `track`, instead of synthetic boxes.
    #[arg(long)]
    pub(crate) detector: Option<PathBuf>,
    /// The detector's tile size, WxH.
    #[arg(long, default_value = "640x640")]
    pub(crate) tiles: String,
    /// Detect every Nth frame of each stream (`detect interval=N`).
    #[arg(long, default_value_t = 1)]
    pub(crate) interval: u64,
    /// Most tiles per detector call (`detect max-batch`).
    #[arg(long, default_value_t = 64)]
    pub(crate) detector_batch: usize,
    /// Each stream its own detect and track stages (the baseline) instead of one shared.
    #[arg(long)]
    pub(crate) detector_per_stream: bool,
    /// Frames each stream's edge into the shared detect holds (`queue size=N`; default: the
    /// pipeline's, 4 frames live).
    #[arg(long)]
    pub(crate) detector_queue: Option<usize>,
    /// More properties of the detect stage, as written in a description (e.g.
    /// "prefer-nhwc=true"; "labels=..." for a model cut to some classes, in place of COCO's).
    #[arg(long, default_value = "")]
    pub(crate) detector_props: String,
    /// More properties of the preprocess stage (e.g. "gpu-priority=high").
    #[arg(long, default_value = "")]
    pub(crate) preprocess_props: String,
    /// More properties of every classify stage (e.g. "gpu-priority=high").
    #[arg(long, default_value = "")]
    pub(crate) classify_props: String,
    /// Video width (small values keep tests fast).
    #[arg(long, default_value_t = 1920, hide = true)]
    pub(crate) width: u32,
    /// Video height.
    #[arg(long, default_value_t = 1080, hide = true)]
    pub(crate) height: u32,
}

/// `octopipe bench preprocess`.
#[cfg(feature = "bench")]
#[derive(clap::Args)]
pub(crate) struct PreprocessArgs {
    /// Workloads: drone28, crops1000, streams16 (repeatable; default all).
    #[arg(long = "workload")]
    pub(crate) workloads: Vec<String>,
    /// Frame pixel format: i420, nv12, rgb, bgr, rgba, bgra.
    #[arg(long, default_value = "i420")]
    pub(crate) format: String,
    /// Output size WxH.
    #[arg(long, default_value = "224x224")]
    pub(crate) size: String,
    /// Shared data folder (real VisDrone box sizes); default $OCTOPIPE_DATA.
    #[arg(long)]
    pub(crate) data: Option<PathBuf>,
    /// Seconds spent timing each CPU row.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) cpu_seconds: f64,
    /// CPU worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub(crate) threads: usize,
    /// Skip the GPU rows.
    #[arg(long)]
    pub(crate) no_gpu: bool,
}

/// What a run shows besides its output (`octopipe::observe`).
#[derive(clap::Args)]
pub(crate) struct ObserveArgs {
    /// Live progress on stderr: auto (a bar when stderr is a terminal, otherwise a plain line
    /// every 10 s once frames flow), always/on (a bar on a terminal, a plain line every 2 s
    /// otherwise), bar, lines, never/off.
    #[arg(long, value_name = "WHEN", default_value = "auto", default_missing_value = "on", num_args = 0..=1)]
    pub(crate) progress: ProgressArg,
    /// End-of-run report: a text table on stderr, or one JSON object on stdout (on stderr when
    /// the JSONL goes to stdout, `jsonl location=-`).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub(crate) report: ReportFormat,
    /// Write the report (in the --report format) to this file instead; it may not be an input
    /// of the run.
    #[arg(long, value_name = "PATH")]
    pub(crate) report_file: Option<PathBuf>,
    /// Write a latency plot (per-frame end-to-end with the budget, per-stage stack): .svg or .png.
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// Draw boxes, labels and scores on the frames: a folder of PNG files, or FILE.mp4 (a live
    /// stream skips frames, counted, when the writer falls behind).
    #[arg(long, value_name = "DIR|FILE.mp4")]
    pub(crate) annotate: Option<PathBuf>,
    /// Write the first crops as the classifier saw them (de-normalized tensors) as a PNG grid.
    #[arg(long, value_name = "FILE.png")]
    pub(crate) mosaic: Option<PathBuf>,
    /// Crops in the mosaic.
    #[arg(long, value_name = "N", default_value_t = 48)]
    pub(crate) mosaic_crops: usize,
    /// Serve Prometheus metrics at http://ADDR/metrics while running (e.g. 127.0.0.1:9184), and
    /// the pipeline's health at /health.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_addr: Option<String>,
    /// Take streams while running: POST /streams, DELETE /streams/ID, GET /streams on the
    /// --metrics-addr address. The run lasts until stopped (Ctrl-C, SIGTERM), and the
    /// description may have no source of its own (`batch ! classify model=m.onnx ! mqtt`).
    #[arg(long, requires = "metrics_addr")]
    pub(crate) streams: bool,
    #[command(flatten)]
    pub(crate) control: Box<ControlArgs>,
    /// Report GPU energy per frame from NVML (or why it is not available).
    #[arg(long)]
    pub(crate) energy: bool,
}

impl ObserveArgs {
    /// The files and folders these options write, for the check against the run's inputs.
    pub(crate) fn outputs(&self) -> Vec<RunPath> {
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
pub(crate) struct ControlArgs {
    /// A file whose first line is the API token `/streams` asks for (as OCTOPIPE_API_TOKEN
    /// does); needed to take streams on an address that is not loopback.
    #[arg(long, value_name = "FILE")]
    pub(crate) api_token_file: Option<PathBuf>,
    /// A directory whose files streams added over HTTP may read (repeatable; none by default).
    #[arg(long, value_name = "DIR")]
    pub(crate) allow_dir: Vec<PathBuf>,
    /// GStreamer elements streams added over HTTP may name (comma-separated; none by default).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub(crate) allow_element: Vec<String>,
    /// A host name a request's Host may give besides IP addresses and localhost (repeatable).
    #[arg(long, value_name = "NAME")]
    pub(crate) allow_host: Vec<String>,
    /// The most streams added over HTTP running at once (429 beyond).
    #[arg(long, value_name = "N", default_value_t = octopipe::control::DEFAULT_MAX_STREAMS)]
    pub(crate) max_streams: usize,
    /// The most HTTP connections served at once (503 beyond).
    #[arg(long, value_name = "N", default_value_t = octopipe::control::DEFAULT_MAX_CONNECTIONS)]
    pub(crate) max_connections: usize,
    /// The most memory one stream added over HTTP may hold in frames (its queues full of the
    /// largest frames its source may give), checked before it opens: bytes, or with KiB, MiB,
    /// GiB.
    #[arg(long, value_name = "SIZE", default_value = "2GiB", value_parser = parse_bytes)]
    pub(crate) max_stream_memory: u64,
    /// The most memory the streams added over HTTP may hold together (each its estimate, from
    /// its admission until it has truly stopped; 429 beyond): bytes, or with KiB, MiB, GiB.
    /// Default: three quarters of the smaller of the machine's memory and the cgroup's limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub(crate) memory_budget: Option<u64>,
    /// URI schemes a stream added over HTTP may read besides rtsp, rtsps and srt (caller mode):
    /// http, https, rtmp, ... (comma-separated).
    #[arg(long, value_name = "SCHEMES", value_delimiter = ',')]
    pub(crate) allow_scheme: Vec<String>,
    /// UDP ports a stream added over HTTP may receive on (udp:// locations and `rtp port=`):
    /// ports and ranges, comma-separated (5004,6000-6031); none by default.
    #[arg(long, value_name = "PORTS", value_delimiter = ',', value_parser = parse_ports)]
    pub(crate) allow_udp_port: Vec<std::ops::RangeInclusive<u16>>,
}

/// A UDP port or a range of them: `5004`, `6000-6031`.
fn parse_ports(s: &str) -> Result<std::ops::RangeInclusive<u16>, String> {
    let port = |p: &str| {
        p.trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                format!("'{s}': expected a UDP port (1-65535) or a range such as 6000-6031")
            })
    };
    let (first, last) = match s.split_once('-') {
        Some((a, b)) => (port(a)?, port(b)?),
        None => (port(s)?, port(s)?),
    };
    match first <= last {
        true => Ok(first..=last),
        false => Err(format!("'{s}': the range's first port is above its last")),
    }
}

/// A size in bytes: a number, or a number with KiB, MiB or GiB (also K, M, G).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "'{s}': expected bytes, or a number with KiB, MiB or GiB"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{s}': expected bytes, or a number with KiB, MiB or GiB"))?;
    let bytes = value * factor as f64;
    match bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64 {
        true => Ok(bytes as u64),
        false => Err(format!("'{s}': expected a size of at least 1 byte")),
    }
}

impl ControlArgs {
    pub(crate) fn config(&self) -> Result<octopipe::control::ControlConfig> {
        let mut config = octopipe::control::ControlConfig::from_options(
            self.api_token_file.as_deref(),
            &self.allow_dir,
            &self.allow_element,
            &self.allow_host,
            self.max_streams,
            self.max_connections,
        )?;
        config.max_stream_memory = self.max_stream_memory;
        if let Some(budget) = self.memory_budget {
            config.memory_budget = budget;
        }
        for scheme in self.allow_scheme.iter().filter(|s| !s.is_empty()) {
            config.policy.allow_scheme(scheme);
        }
        for port in self.allow_udp_port.iter().flat_map(|r| r.clone()) {
            config.policy.allow_udp_port(port);
        }
        Ok(config)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProgressArg {
    Auto,
    #[value(alias = "always")]
    On,
    Bar,
    Lines,
    #[value(alias = "never")]
    Off,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReportFormat {
    Text,
    Json,
}
