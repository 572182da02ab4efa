//! The table of stages and their properties: what `build` accepts and `octopipe inspect` shows.

/// One property of a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropSpec {
    /// Name as written in descriptions (kebab-case).
    pub name: &'static str,
    /// Value type, for people.
    pub kind: &'static str,
    /// Default, for people (`-` for required, `auto` for derived).
    pub default: &'static str,
    /// What it does.
    pub doc: &'static str,
}

/// One stage kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageSpec {
    /// Name as written in descriptions.
    pub name: &'static str,
    /// Pipeline role: `source`, `boxes`, `batch`, `preprocess`, `classify`, `sink` or `edge`.
    pub role: &'static str,
    /// What it does.
    pub doc: &'static str,
    /// Its properties.
    pub props: &'static [PropSpec],
}

const fn p(
    name: &'static str,
    kind: &'static str,
    default: &'static str,
    doc: &'static str,
) -> PropSpec {
    PropSpec {
        name,
        kind,
        default,
        doc,
    }
}

const LIVE: PropSpec = p(
    "live",
    "bool",
    "false",
    "release frames at their presentation time (a live-rate stream)",
);
const FRAMERATE: PropSpec = p(
    "framerate",
    "float",
    "30",
    "frames per second; also sets the budget (1/framerate)",
);

/// Every stage octopipe knows, in pipeline order.
pub const STAGES: &[StageSpec] = &[
    StageSpec {
        name: "images",
        role: "source",
        doc: "JPEG/PNG images in file-name order, decoded by GStreamer",
        props: &[
            p(
                "location",
                "path",
                "-",
                "a folder of .jpg/.jpeg/.png files, or a glob such as dir/*.jpg",
            ),
            FRAMERATE,
            p(
                "loop",
                "int",
                "1",
                "play the images this many times (pts and frame numbers go on)",
            ),
            LIVE,
        ],
    },
    StageSpec {
        name: "media",
        role: "source",
        doc: "any media file or URI through GStreamer's decodebin, delivered as I420/NV12",
        props: &[p("location", "path or URI", "-", "the file or URI"), LIVE],
    },
    StageSpec {
        name: "testsrc",
        role: "source",
        doc: "GStreamer videotestsrc",
        props: &[
            p(
                "pattern",
                "string",
                "smpte",
                "videotestsrc pattern (smpte, ball, snow, ...)",
            ),
            p("width", "int", "1280", "frame width"),
            p("height", "int", "720", "frame height"),
            p("num-buffers", "int", "90", "frames before end of stream"),
            p(
                "format",
                "i420|nv12|rgb|bgr|rgba|bgra",
                "i420",
                "pixel format",
            ),
            FRAMERATE,
            LIVE,
        ],
    },
    StageSpec {
        name: "boxes",
        role: "boxes",
        doc: "attach detection boxes: VisDrone DET/MOT annotations or the synthetic generator",
        props: &[
            p(
                "format",
                "det|mot|synthetic",
                "det",
                "where boxes come from",
            ),
            p(
                "location",
                "path",
                "-",
                "DET: folder of NAME.txt per image; MOT: the sequence's file",
            ),
            p("count", "int", "28", "synthetic: boxes per frame"),
            p("seed", "int", "7", "synthetic: seed"),
            p(
                "keep-ignored",
                "bool",
                "false",
                "also classify ignored regions (category 0 or score 0)",
            ),
            p(
                "bad-lines",
                "error|skip",
                "error",
                "a malformed annotation line fails the run (file:line), or is skipped and counted",
            ),
            p(
                "skip-categories",
                "list of int",
                "11",
                "categories not classified (VisDrone 11: others)",
            ),
        ],
    },
    StageSpec {
        name: "batch",
        role: "batch",
        doc: "collect crops of consecutive frames into ragged batches with block metadata",
        props: &[
            p(
                "max-crops",
                "int",
                "256",
                "close a batch at this many crops",
            ),
            p(
                "max-frames",
                "int",
                "8",
                "close a batch at this many frames",
            ),
            p(
                "max-wait-ms",
                "float",
                "auto",
                "longest a frame waits for others (auto: from its remaining budget)",
            ),
            p("tile-pixels", "int", "256", "output pixels per tile"),
            p("tiles-per-block", "int", "4", "tiles per block of work"),
            p("late", "process|drop|cap", "process", "a frame predicted to miss its budget: process it anyway, drop it, or keep only the crops that fit"),
            p("cap-priority", "largest|confident", "largest", "with late=cap: which crops a late frame keeps"),
        ],
    },
    StageSpec {
        name: "preprocess",
        role: "preprocess",
        doc: "crop + bilinear resize (OpenCV INTER_LINEAR) + colour conversion + mean/std",
        props: &[
            p(
                "size",
                "WxH",
                "auto",
                "output size (auto: the model's input size)",
            ),
            p(
                "mean",
                "3 floats",
                "0.485,0.456,0.406",
                "per-channel mean, after scale",
            ),
            p(
                "std",
                "3 floats",
                "0.229,0.224,0.225",
                "per-channel standard deviation, after scale",
            ),
            p(
                "scale",
                "float",
                "0.00392157",
                "factor from 0..255 to the units of mean/std (1/255)",
            ),
            p("channels", "rgb|bgr", "rgb", "channel order of the tensor"),
            p("layout", "nchw|nhwc", "nchw", "tensor layout"),
            p(
                "backend",
                "auto|cpu|cuda",
                "auto",
                "implementation (auto: CUDA when a GPU is present)",
            ),
            p(
                "threads",
                "int",
                "0",
                "CPU worker threads (0: one per core)",
            ),
            p(
                "interpolation",
                "bilinear|area",
                "bilinear",
                "OpenCV INTER_LINEAR, or INTER_AREA (antialiased downscaling)",
            ),
            p(
                "letterbox",
                "0..255",
                "-",
                "keep the aspect ratio and pad with this value (0..255 scale) instead of stretching",
            ),
        ],
    },
    StageSpec {
        name: "classify",
        role: "classify",
        doc: "ONNX Runtime classifier: softmax, top-k",
        props: &[
            p("model", "path", "-", "the .onnx file"),
            p(
                "labels",
                "list",
                "class0,...",
                "class names in class-index order",
            ),
            p(
                "labels-file",
                "path",
                "-",
                "a file with one class name per line",
            ),
            p(
                "max-batch",
                "int",
                "256",
                "largest number of crops per inference call",
            ),
            p("top-k", "int", "1", "results per crop"),
            p(
                "threads",
                "int",
                "0",
                "ONNX Runtime intra-op threads (0: its default)",
            ),
        ],
    },
    StageSpec {
        name: "jsonl",
        role: "sink",
        doc: "one JSON line per classified object",
        props: &[p("location", "path", "-", "output file, or - for stdout")],
    },
    StageSpec {
        name: "queue",
        role: "edge",
        doc: "sets the capacity and policy of the edge it stands on (between two stages)",
        props: &[
            p(
                "size",
                "int",
                "4 (live: 1)",
                "frames or batches the edge holds before its policy applies",
            ),
            p(
                "policy",
                "block|drop-oldest",
                "block (live: drop-oldest)",
                "when full: the upstream stage waits, or the oldest item is dropped and counted",
            ),
        ],
    },
];

/// The stage called `name`.
pub fn stage(name: &str) -> Option<&'static StageSpec> {
    STAGES.iter().find(|s| s.name == name)
}
