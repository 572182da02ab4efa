//! Description -> typed configs: every stage and property checked before anything starts.

use std::path::PathBuf;
use std::time::Duration;

use super::stages::{stage, StageSpec, STAGES};
use super::{closest, DescribeError, Description, Prop, Span, StageDesc};
use crate::batch::{BatchConfig, CapPriority, LatePolicy};
use crate::classify::ClassifyConfig;
use crate::detect::{BoxSource, DetectConfig, DEFAULT_SEED, DEFAULT_SYNTHETIC_COUNT};
use crate::frame::PixelFormat;
use crate::preprocess::{
    BackendKind, ChannelOrder, DType, Interpolation, Layout, PreprocessConfig,
};
use crate::runner::{BranchConfig, EdgePolicy, PipelineConfig, Queue};
use crate::sink::JsonlConfig;
use crate::source::{SourceConfig, SourceKind, DEFAULT_NUM_BUFFERS, DEFAULT_TEST_SIZE};

/// The roles in the order a pipeline must have them; `true` where the stage may be left out.
const ORDER: [(&str, bool); 6] = [
    ("source", false),
    ("boxes", false),
    ("batch", true),
    ("preprocess", true),
    ("classify", false),
    ("sink", false),
];

/// What one chain of the description holds.
#[derive(Default)]
struct Chain {
    source: Option<SourceConfig>,
    detect: Option<DetectConfig>,
    batch: Option<(BatchConfig, Option<String>, Span)>,
    preprocess: Option<PreprocessConfig>,
    classify: Option<ClassifyConfig>,
    sink: Option<JsonlConfig>,
    /// `name.` the chain ends in.
    target: Option<(String, Span)>,
    /// Edge settings from `queue size=N policy=...` (what is unset takes the file or live default).
    queues: [(Option<usize>, Option<EdgePolicy>); 5],
    /// The role index expected next, and the last element's span.
    next_role: usize,
    last: Span,
}

/// Check `desc` against the stage table and make the pipeline's configs.
///
/// A description is one or more chains. A *branch* chain starts with a source (an octopipe source
/// stage, or GStreamer elements that octopipe hands to GStreamer with an appsink appended) and a
/// `boxes` stage, and either continues into the batch stage or ends in `NAME.`, a reference to the
/// batch stage named NAME. Exactly one chain holds the batch (explicit or implied), preprocess,
/// classify and sink stages; every branch feeds that batch as its own stream (0, 1, ... in order).
pub fn build(desc: &Description) -> Result<PipelineConfig, DescribeError> {
    let mut chains: Vec<Chain> = Vec::new();
    let mut start = 0;
    while start < desc.stages.len() {
        let n = desc.stages[start..]
            .iter()
            .take_while(|s| s.chain == desc.stages[start].chain)
            .count();
        chains.push(chain(desc, &desc.stages[start..start + n])?);
        start += n;
    }
    // A live pipeline keeps its queues short and drops the oldest: a live frame must not wait
    // behind others.
    let live = chains
        .iter()
        .any(|c| c.source.as_ref().is_some_and(|s| s.live));
    let default = if live { Queue::LIVE } else { Queue::FILE };
    let resolve = |(size, policy): (Option<usize>, Option<EdgePolicy>)| Queue {
        size: size.unwrap_or(default.size),
        policy: policy.unwrap_or(default.policy),
    };
    let mut main: Option<Chain> = None;
    let mut branches = Vec::new();
    let mut targets = Vec::new();
    for mut c in chains {
        if let (Some(source), Some(detect)) = (c.source.take(), c.detect.take()) {
            branches.push(BranchConfig {
                source,
                detect,
                queues: [resolve(c.queues[0]), resolve(c.queues[1])],
            });
        }
        if let Some(t) = c.target.take() {
            targets.push(t);
            continue;
        }
        if c.classify.is_none() || c.sink.is_none() {
            return Err(desc.error(
                c.last,
                format!(
                    "the pipeline ends early: expected {} next",
                    expected(c.next_role)
                ),
            ));
        }
        if main.is_some() {
            return Err(desc.error(
                c.last,
                "a second chain ends in classify ! jsonl: a pipeline has one (branches feed its batch stage by name)",
            ));
        }
        main = Some(c);
    }
    let main = main.ok_or_else(|| {
        desc.error(
            Span::default(),
            "the pipeline has no classify ! jsonl chain",
        )
    })?;
    let (batch, batch_name, _) =
        main.batch
            .clone()
            .unwrap_or((BatchConfig::default(), None, Span::default()));
    for (name, span) in &targets {
        if batch_name.as_deref() != Some(name.as_str()) {
            let hint = batch_name
                .as_deref()
                .map(|b| format!(" (the batch stage is named '{b}')"))
                .unwrap_or_else(|| " (give the batch stage name=...)".into());
            return Err(desc.error(*span, format!("no batch stage is named '{name}'{hint}")));
        }
    }
    if branches.is_empty() {
        return Err(desc.error(
            desc.stages[0].span,
            format!("the pipeline has no source: expected {}", expected(0)),
        ));
    }
    let budget = branches
        .iter()
        .map(|b| b.source.frame_interval())
        .min()
        .unwrap_or(crate::budget::DEFAULT_BUDGET);
    for (i, b) in branches.iter_mut().enumerate() {
        b.source.stream = i as u32;
    }
    Ok(PipelineConfig {
        branches,
        batch,
        preprocess: main.preprocess.unwrap_or_default(),
        classify: main.classify.unwrap_or_else(|| ClassifyConfig::new("")),
        sink: main.sink,
        budget,
        queues: [2, 3, 4].map(|i| resolve(main.queues[i])),
    })
}

/// Whether `kind` names a GStreamer element or caps (an element of a branch's GStreamer head).
fn is_gstreamer(desc: &Description, st: &StageDesc) -> Result<bool, DescribeError> {
    if st.reference || stage(&st.kind).is_some() {
        return Ok(false);
    }
    if let Some(c) = closest(&st.kind, STAGES.iter().map(|s| s.name)) {
        return Err(desc.error(
            st.span,
            format!("unknown stage '{}' (did you mean '{c}'?)", st.kind),
        ));
    }
    if st.kind.contains('/') || crate::source::element_exists(&st.kind) {
        return Ok(true);
    }
    let elements = crate::source::element_names();
    let hint = closest(&st.kind, elements.iter().map(String::as_str))
        .map(|c| format!(" (did you mean the GStreamer element '{c}'?)"))
        .unwrap_or_default();
    Err(desc.error(
        st.span,
        format!(
            "unknown stage '{}': neither an octopipe stage ({}) nor an installed GStreamer element{hint}",
            st.kind,
            STAGES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        ),
    ))
}

/// Check one chain's stages in order.
fn chain(desc: &Description, stages: &[StageDesc]) -> Result<Chain, DescribeError> {
    let mut c = Chain {
        last: stages[0].span,
        ..Chain::default()
    };
    let mut edge = 0;
    // A GStreamer head: the elements before the first octopipe stage.
    let mut head = 0;
    while head < stages.len() && is_gstreamer(desc, &stages[head])? {
        head += 1;
    }
    if head > 0 {
        // Rebuilt from the parsed elements, so that variables are substituted.
        let fragment = stages[..head]
            .iter()
            .map(|st| {
                let mut e = st.kind.clone();
                for p in &st.props {
                    let quote = p.value.is_empty()
                        || p.value
                            .contains(|c: char| c.is_whitespace() || "!\"'#".contains(c));
                    if quote {
                        e += &format!(" {}=\"{}\"", p.key, p.value.replace('"', "\\\""));
                    } else {
                        e += &format!(" {}={}", p.key, p.value);
                    }
                }
                e
            })
            .collect::<Vec<_>>()
            .join(" ! ");
        let live = crate::source::fragment_is_live(&fragment);
        let mut source = SourceConfig::new(SourceKind::Launch { fragment });
        source.live = live;
        c.source = Some(source);
        c.next_role = 1;
        edge = 1;
    }
    for (i, st) in stages.iter().enumerate().skip(head) {
        c.last = Span {
            start: st.span.start,
            len: st.end - st.span.start,
        };
        if st.reference {
            if c.next_role < 2 || i + 1 != stages.len() {
                return Err(desc.error(
                    st.span,
                    "a reference 'NAME.' ends a branch, after its boxes stage",
                ));
            }
            c.target = Some((st.kind.clone(), st.span));
            return Ok(c);
        }
        let spec = stage(&st.kind).ok_or_else(|| {
            let hint = closest(&st.kind, STAGES.iter().map(|s| s.name))
                .map(|c| format!(" (did you mean '{c}'?)"))
                .unwrap_or_else(|| {
                    format!(
                        " (stages: {})",
                        STAGES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
                    )
                });
            desc.error(st.span, format!("unknown stage '{}'{hint}", st.kind))
        })?;
        let props = Props {
            desc,
            stage: st,
            spec,
        };
        props.check_known()?;
        if spec.role == "edge" {
            if edge == 0 || edge >= ORDER.len() {
                return Err(desc.error(st.span, "a queue must stand between two stages"));
            }
            c.queues[edge - 1] = (
                props.parse("size", "a positive integer", positive)?,
                props.parse("policy", "block or drop-oldest", |s| match s {
                    "block" => Some(EdgePolicy::Block),
                    "drop-oldest" => Some(EdgePolicy::DropOldest),
                    _ => None,
                })?,
            );
            continue;
        }
        // A chain may start at the batch stage (its branches reference it by name).
        if i == head && c.next_role == 0 && spec.role == "batch" {
            c.next_role = 2;
        }
        let Some(pos) = ORDER[c.next_role..]
            .iter()
            .position(|(r, _)| *r == spec.role)
        else {
            return Err(desc.error(
                st.span,
                format!(
                    "stage '{}' cannot come here: expected {}",
                    st.kind,
                    expected(c.next_role)
                ),
            ));
        };
        if let Some((missing, _)) = ORDER[c.next_role..c.next_role + pos]
            .iter()
            .find(|(_, optional)| !optional)
        {
            return Err(desc.error(
                st.span,
                format!("a {missing} stage must come before '{}'", st.kind),
            ));
        }
        // Edges are numbered by the role they lead into; skipped optional roles share it.
        edge = c.next_role + pos + 1;
        c.next_role += pos + 1;
        match spec.role {
            "source" => c.source = Some(source_config(&props)?),
            "boxes" => c.detect = Some(detect_config(&props)?),
            "batch" => {
                let name = props.get("name").map(|p| p.value.clone());
                c.batch = Some((batch_config(&props)?, name, st.span));
            }
            "preprocess" => c.preprocess = Some(preprocess_config(&props)?),
            "classify" => c.classify = Some(classify_config(&props)?),
            _ => {
                c.sink = Some(JsonlConfig {
                    location: PathBuf::from(props.required("location")?),
                })
            }
        }
    }
    if c.source.is_some() && c.detect.is_none() {
        return Err(desc.error(
            c.last,
            format!("the branch ends early: expected {} next", expected(1)),
        ));
    }
    Ok(c)
}

fn expected(role: usize) -> String {
    let mut names = Vec::new();
    for (r, optional) in &ORDER[role..] {
        names.extend(
            STAGES
                .iter()
                .filter(|s| s.role == *r)
                .map(|s| format!("'{}'", s.name)),
        );
        if !optional {
            break;
        }
    }
    format!("one of {}", names.join(", "))
}

fn positive(s: &str) -> Option<usize> {
    s.parse().ok().filter(|n| *n > 0)
}

fn boolean(s: &str) -> Option<bool> {
    match s {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

fn floats3(s: &str) -> Option<[f32; 3]> {
    let v: Vec<f32> = s
        .split(',')
        .map(|x| x.trim().parse().ok())
        .collect::<Option<_>>()?;
    v.try_into().ok()
}

/// Property access for one stage; errors point at the value.
struct Props<'a> {
    desc: &'a Description,
    stage: &'a StageDesc,
    spec: &'static StageSpec,
}

impl Props<'_> {
    fn get(&self, key: &str) -> Option<&Prop> {
        self.stage.props.iter().find(|p| p.key == key)
    }

    fn check_known(&self) -> Result<(), DescribeError> {
        for p in &self.stage.props {
            if p.key != "name" && !self.spec.props.iter().any(|s| s.name == p.key) {
                let hint = closest(&p.key, self.spec.props.iter().map(|s| s.name))
                    .map(|c| format!(" (did you mean '{c}'?)"))
                    .unwrap_or_else(|| {
                        format!(
                            " (properties: {})",
                            self.spec
                                .props
                                .iter()
                                .map(|s| s.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    });
                return Err(self.desc.error(
                    p.key_span,
                    format!(
                        "stage '{}' has no property '{}'{hint}",
                        self.spec.name, p.key
                    ),
                ));
            }
        }
        Ok(())
    }

    fn parse<T>(
        &self,
        key: &str,
        expected: &str,
        f: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, DescribeError> {
        let Some(p) = self.get(key) else {
            return Ok(None);
        };
        f(&p.value).map(Some).ok_or_else(|| {
            self.desc.error(
                p.value_span,
                format!(
                    "{}: {key} must be {expected}, found '{}'",
                    self.spec.name, p.value
                ),
            )
        })
    }

    fn required(&self, key: &str) -> Result<&str, DescribeError> {
        match self.get(key) {
            Some(p) if !p.value.is_empty() => Ok(&p.value),
            Some(p) => Err(self
                .desc
                .error(p.value_span, format!("{}: {key} is empty", self.spec.name))),
            None => Err(self.desc.error(
                self.stage.span,
                format!("stage '{}' needs {key}=...", self.spec.name),
            )),
        }
    }
}

fn source_config(p: &Props) -> Result<SourceConfig, DescribeError> {
    let kind = match p.spec.name {
        "images" => SourceKind::Images {
            location: p.required("location")?.to_string(),
        },
        "media" => SourceKind::Media {
            location: p.required("location")?.to_string(),
        },
        _ => SourceKind::Test {
            pattern: p.get("pattern").map_or("smpte".into(), |v| v.value.clone()),
            width: p
                .parse("width", "a positive integer", positive)?
                .unwrap_or(DEFAULT_TEST_SIZE.0 as usize) as u32,
            height: p
                .parse("height", "a positive integer", positive)?
                .unwrap_or(DEFAULT_TEST_SIZE.1 as usize) as u32,
            num_buffers: p
                .parse("num-buffers", "a positive integer", positive)?
                .unwrap_or(DEFAULT_NUM_BUFFERS as usize) as u32,
            format: p
                .parse(
                    "format",
                    "one of i420, nv12, rgb, bgr, rgba, bgra",
                    |s| match s {
                        "i420" => Some(PixelFormat::I420),
                        "nv12" => Some(PixelFormat::Nv12),
                        "rgb" => Some(PixelFormat::Rgb),
                        "bgr" => Some(PixelFormat::Bgr),
                        "rgba" => Some(PixelFormat::Rgba),
                        "bgra" => Some(PixelFormat::Bgra),
                        _ => None,
                    },
                )?
                .unwrap_or(PixelFormat::I420),
        },
    };
    let mut cfg = SourceConfig::new(kind);
    if let Some(fps) = p.parse("framerate", "a positive number", |s| {
        s.parse::<f64>().ok().filter(|f| *f > 0.0 && f.is_finite())
    })? {
        cfg.framerate = fps;
    }
    if let Some(n) = p.parse("loop", "a count of at least 1", |s| {
        s.parse::<u32>().ok().filter(|n| *n >= 1)
    })? {
        cfg.loops = n;
    }
    cfg.live = p.parse("live", "true or false", boolean)?.unwrap_or(false);
    Ok(cfg)
}

fn detect_config(p: &Props) -> Result<DetectConfig, DescribeError> {
    let format = p.get("format").map_or("det", |v| v.value.as_str());
    let source = match format {
        "det" => BoxSource::Det {
            location: PathBuf::from(p.required("location")?),
        },
        "mot" => BoxSource::Mot {
            location: PathBuf::from(p.required("location")?),
        },
        "synthetic" => BoxSource::Synthetic {
            count: p
                .parse("count", "a non-negative integer", |s| s.parse::<u32>().ok())?
                .unwrap_or(DEFAULT_SYNTHETIC_COUNT),
            seed: p
                .parse("seed", "a non-negative integer", |s| s.parse::<u64>().ok())?
                .unwrap_or(DEFAULT_SEED),
        },
        other => {
            let span = p
                .get("format")
                .map(|v| v.value_span)
                .unwrap_or(p.stage.span);
            return Err(p.desc.error(
                span,
                format!("boxes: format must be one of det, mot, synthetic, found '{other}'"),
            ));
        }
    };
    let mut cfg = DetectConfig::new(source);
    cfg.keep_ignored = p
        .parse("keep-ignored", "true or false", boolean)?
        .unwrap_or(false);
    if let Some(v) = p.parse(
        "skip-categories",
        "a comma-separated list of categories 0..11",
        |s| {
            if s.is_empty() {
                return Some(Vec::new());
            }
            s.split(',')
                .map(|c| c.trim().parse::<u8>().ok().filter(|c| *c <= 11))
                .collect()
        },
    )? {
        cfg.skip_categories = v;
    }
    cfg.skip_bad_lines = p
        .parse("bad-lines", "error or skip", |s| match s {
            "error" => Some(false),
            "skip" => Some(true),
            _ => None,
        })?
        .unwrap_or(false);
    Ok(cfg)
}

fn batch_config(p: &Props) -> Result<BatchConfig, DescribeError> {
    let d = BatchConfig::default();
    let priority = p
        .parse("cap-priority", "largest or confident", |s| match s {
            "largest" => Some(CapPriority::Largest),
            "confident" => Some(CapPriority::Confident),
            _ => None,
        })?
        .unwrap_or_default();
    Ok(BatchConfig {
        late: p
            .parse("late", "process, drop or cap", |s| match s {
                "process" => Some(LatePolicy::Process),
                "drop" => Some(LatePolicy::Drop),
                "cap" => Some(LatePolicy::Cap(priority)),
                _ => None,
            })?
            .unwrap_or_default(),
        max_crops: p
            .parse("max-crops", "a positive integer", positive)?
            .unwrap_or(d.max_crops),
        max_frames: p
            .parse("max-frames", "a positive integer", positive)?
            .unwrap_or(d.max_frames),
        max_wait: p.parse(
            "max-wait-ms",
            "a non-negative number of milliseconds",
            |s| {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| *v >= 0.0 && v.is_finite())
                    .map(|v| Duration::from_secs_f64(v / 1000.0))
            },
        )?,
        tile_pixels: p
            .parse("tile-pixels", "a positive integer", positive)?
            .map_or(d.tile_pixels, |v| v as u32),
        tiles_per_block: p
            .parse("tiles-per-block", "a positive integer", positive)?
            .map_or(d.tiles_per_block, |v| v as u32),
        input_per_block: d.input_per_block,
    })
}

fn preprocess_config(p: &Props) -> Result<PreprocessConfig, DescribeError> {
    let d = PreprocessConfig::default();
    let std_ok = |s: &str| floats3(s).filter(|v| v.iter().all(|x| *x > 0.0));
    Ok(PreprocessConfig {
        interpolation: p
            .parse("interpolation", "bilinear or area", |s| match s {
                "bilinear" => Some(Interpolation::Bilinear),
                "area" => Some(Interpolation::Area),
                _ => None,
            })?
            .unwrap_or(d.interpolation),
        letterbox: p.parse("letterbox", "a pad value from 0 to 255", |s| {
            s.parse::<f32>().ok().filter(|v| (0.0..=255.0).contains(v))
        })?,
        // f16 output is for device-side consumers of the library; the classify stage takes f32.
        dtype: DType::F32,
        size: p.parse(
            "size",
            "WIDTHxHEIGHT with both at least 1, e.g. 64x64",
            |s| {
                let (w, h) = s.split_once('x')?;
                Some((
                    w.parse::<u32>().ok().filter(|v| *v > 0)?,
                    h.parse::<u32>().ok().filter(|v| *v > 0)?,
                ))
            },
        )?,
        mean: p
            .parse("mean", "three comma-separated numbers", floats3)?
            .unwrap_or(d.mean),
        std: p
            .parse("std", "three comma-separated positive numbers", std_ok)?
            .unwrap_or(d.std),
        scale: p
            .parse("scale", "a positive number", |s| {
                s.parse::<f32>().ok().filter(|v| *v > 0.0)
            })?
            .unwrap_or(d.scale),
        channels: p
            .parse("channels", "rgb or bgr", |s| match s {
                "rgb" => Some(ChannelOrder::Rgb),
                "bgr" => Some(ChannelOrder::Bgr),
                _ => None,
            })?
            .unwrap_or(d.channels),
        layout: p
            .parse("layout", "nchw or nhwc", |s| match s {
                "nchw" => Some(Layout::Nchw),
                "nhwc" => Some(Layout::Nhwc),
                _ => None,
            })?
            .unwrap_or(d.layout),
        backend: p
            .parse("backend", "auto, cpu or cuda", |s| match s {
                "auto" => Some(BackendKind::Auto),
                "cpu" => Some(BackendKind::Cpu),
                "cuda" => Some(BackendKind::Cuda),
                _ => None,
            })?
            .unwrap_or(d.backend),
        threads: p
            .parse("threads", "a non-negative integer", |s| {
                s.parse::<usize>().ok()
            })?
            .unwrap_or(d.threads),
    })
}

fn classify_config(p: &Props) -> Result<ClassifyConfig, DescribeError> {
    let mut cfg = ClassifyConfig::new(p.required("model")?);
    if let Some(l) = p.get("labels") {
        cfg.labels = l.value.split(',').map(|s| s.trim().to_string()).collect();
    }
    if let Some(f) = p.get("labels-file") {
        let text = std::fs::read_to_string(&f.value).map_err(|e| {
            p.desc.error(
                f.value_span,
                format!("classify: cannot read labels-file '{}': {e}", f.value),
            )
        })?;
        cfg.labels = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
    }
    cfg.max_batch = p
        .parse("max-batch", "a positive integer", positive)?
        .unwrap_or(cfg.max_batch);
    cfg.top_k = p
        .parse("top-k", "a positive integer", positive)?
        .unwrap_or(cfg.top_k);
    cfg.threads = p
        .parse("threads", "a non-negative integer", |s| {
            s.parse::<usize>().ok()
        })?
        .unwrap_or(cfg.threads);
    Ok(cfg)
}
