//! The command line's arguments: the clap structs and enums.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[cfg(feature = "bench")]
use super::bench_args::BenchCommand;
use octopipe::observe;
use octopipe::pipeline::RunPath;

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
    /// Default: three quarters of the smaller of the machine's memory and the cgroup's limit,
    /// at most half of what the address-space limit (`ulimit -v`) leaves.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub(crate) memory_budget: Option<u64>,
    /// URI schemes a stream added over HTTP may read besides rtsp and srt (caller mode): http,
    /// https, rtsps, rtmp, ... (comma-separated; the answers of https and rtsps servers are not
    /// bounded by the station, which does not read TLS).
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
