//! The arguments of `octopipe bench ...` (the `bench` feature): its subcommands and their
//! clap structs.

use std::path::PathBuf;

use clap::Subcommand;

use octopipe_tools::bench;

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
        /// Engines (comma-separated): ort (ONNX Runtime, per --ep and --cuda), octopipe (the
        /// engine's own kernels on GPU 0, input on the device, one CUDA graph per batch).
        #[arg(long, default_value = "ort", value_delimiter = ',')]
        engine: Vec<String>,
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
        /// Ways of starting: one-pipeline, serial, threads, threads-own-context, threads-4-contexts
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
    /// How the video moves: still (each of the clip's images a frame, in turn) or pan (each
    /// image a one-second shot of a camera panning across it: tracks last the shot, as in real
    /// video).
    #[arg(long, default_value = "still")]
    pub(crate) motion: String,
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
