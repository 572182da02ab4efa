//! `batch devices=all|0,1`: the streams of one batch stage spread over GPUs, written out as one
//! chain per GPU before the graph is built.
//!
//! ```text
//! media location=a.mp4 decoder=nvdec ! boxes format=synthetic ! mux.       # stream 0: GPU 0
//! media location=b.mp4 decoder=nvdec ! boxes format=synthetic ! mux.       # stream 1: GPU 1
//! media location=c.mp4 decoder=nvdec ! boxes format=synthetic              # stream 2: GPU 0
//!   ! batch name=mux devices=0,1 ! preprocess backend=cuda memory=device
//!   ! classify model=m.onnx ep=cuda ! jsonl location=o.jsonl
//! ```
//!
//! is built as if it read
//!
//! ```text
//! media location=a.mp4 decoder=nvdec device=0 ! boxes format=synthetic ! mux.
//! media location=b.mp4 decoder=nvdec device=1 ! boxes format=synthetic ! mux@1.
//! media location=c.mp4 decoder=nvdec device=0 ! boxes format=synthetic ! mux.
//! batch name=mux ! preprocess backend=cuda memory=device device=0
//!   ! classify model=m.onnx ep=cuda device=0 ! jsonl name=@jsonl location=o.jsonl
//! batch name=mux@1 ! preprocess backend=cuda memory=device device=1
//!   ! classify model=m.onnx ep=cuda device=1 ! @jsonl.
//! ```
//!
//! The streams feeding the batch stage (the chains ending in `NAME.` and the stages before it in
//! its own chain, in description order) go to the GPUs in runs of consecutive streams: of N
//! streams over K GPUs, stream j to `devices[j * K / N]`.
//! Each GPU gets a copy of the batch stage and of every stage after it (so its own engine,
//! memory pool and ONNX Runtime sessions), and every stage declaring a `device` property, on the
//! streams' side too (NVDEC decodes on the GPU that preprocesses), is set to that GPU. The copies
//! meet in the one sink, so one report covers them all. Copies after the first get derived names
//! (`NAME@GPU`) that no other stage has. Stream numbers do not change. The rewritten
//! description keeps the original text and spans: an error in a copy points at what was
//! written, and a `device` it was given points at `devices=`.
//!
//! Where the streams meet in a shared detector before the batch stage (`media ... ! det.` into
//! `detect name=det ! track ! batch devices=0,1 ! ...`), they are spread at the detector
//! instead: the streams are the chains ending in `det.` (and the stages before the detector in
//! its own chain), and each GPU gets a copy of the detector and of every stage after it, so one
//! detector per GPU batches the tiles of its own streams.

use std::borrow::Cow;
use std::collections::HashSet;

use super::{DescribeError, Description, Prop, StageDesc};
use octopipe_core::stage::{Registry, Role};

pub use octopipe_stages::batch::DEVICES;

/// What `devices=` accepts, for messages.
const ACCEPTED: &str = "'all' (every GPU of the host) or distinct GPU ordinals separated by \
                        commas (devices=0,1)";

/// `desc` with every batch stage that has `devices=` written out as one chain per GPU (see the
/// module doc); `desc` itself when none has. `gpus` counts the host's CUDA devices, asked only
/// for `devices=all`; with none, `all` leaves the batch stage as it is (one chain) and says so
/// in a log line.
pub fn expand_devices<'a>(
    desc: &'a Description,
    registry: &Registry,
    gpus: &dyn Fn() -> usize,
) -> Result<Cow<'a, Description>, DescribeError> {
    let mut desc = Cow::Borrowed(desc);
    while let Some(at) = desc.stages.iter().position(|s| sharded(registry, s)) {
        desc = Cow::Owned(expand(&desc, registry, at, gpus)?);
    }
    Ok(desc)
}

/// The first `devices=` of a batch stage in `desc`, refused: a pipeline that takes streams while
/// it runs has one batch stage the streams join.
pub(super) fn refuse_devices(desc: &Description, registry: &Registry) -> Result<(), DescribeError> {
    let Some(prop) = desc
        .stages
        .iter()
        .filter(|s| sharded(registry, s))
        .find_map(|s| s.props.iter().find(|p| p.key == DEVICES))
    else {
        return Ok(());
    };
    Err(desc.error(
        prop.key_span,
        "devices= cannot be used by a pipeline that takes streams while it runs (--streams): \
         streams added while running join its one batch stage; leave devices= out, or run one \
         pipeline per GPU",
    ))
}

/// The CUDA devices of the host (0 without a driver or a GPU).
pub(super) fn cuda_devices() -> usize {
    octopipe_cuda::device_count().unwrap_or(0)
}

/// Whether `s` is a batch stage given `devices=`.
fn sharded(registry: &Registry, s: &StageDesc) -> bool {
    !s.reference
        && registry
            .get(&s.kind)
            .is_some_and(|d| d.role == Role::Batch && d.props.iter().any(|p| p.name == DEVICES))
        && s.props.iter().any(|p| p.key == DEVICES)
}

/// The GPUs of `prop` (`all`: `0..gpus()`).
fn devices(
    desc: &Description,
    prop: &Prop,
    gpus: &dyn Fn() -> usize,
) -> Result<Vec<usize>, DescribeError> {
    if prop.value == "all" {
        return Ok((0..gpus()).collect());
    }
    let bad = |why: String| {
        desc.error(
            prop.value_span,
            format!(
                "batch: devices must be {ACCEPTED}, found '{}'{why}",
                prop.value
            ),
        )
    };
    let mut list = Vec::new();
    for item in prop.value.split(',') {
        let ordinal = item
            .parse::<usize>()
            .ok()
            .filter(|_| item.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad(String::new()))?;
        if list.contains(&ordinal) {
            return Err(bad(format!(" (GPU {ordinal} twice)")));
        }
        list.push(ordinal);
    }
    Ok(list)
}

/// `desc` with its batch stage at `at` written out per GPU.
fn expand(
    desc: &Description,
    registry: &Registry,
    at: usize,
    gpus: &dyn Fn() -> usize,
) -> Result<Description, DescribeError> {
    let batch = &desc.stages[at];
    let prop = batch
        .props
        .iter()
        .find(|p| p.key == DEVICES)
        .expect("sharded: it has devices=");
    let devices = devices(desc, prop, gpus)?;
    let mut chains: Vec<Vec<StageDesc>> = desc.chains().map(<[StageDesc]>::to_vec).collect();
    let home = chains
        .iter()
        .position(|c| c[0].chain == batch.chain)
        .expect("the batch stage is in a chain");
    let split = at - chains[..home].iter().map(Vec::len).sum::<usize>();
    chains[home][split].props.retain(|p| p.key != DEVICES);
    if devices.is_empty() {
        tracing::info!(
            "{}: batch devices=all: no CUDA GPU here, so the pipeline runs as one chain",
            desc.origin
        );
        return Ok(join(desc, chains));
    }
    let mut taken: HashSet<String> = desc
        .stages
        .iter()
        .flat_map(|s| s.props.iter().filter(|p| p.key == "name"))
        .map(|p| p.value.clone())
        .collect();
    // Streams meeting in a detector before the batch stage (`... ! det.`) are spread at the
    // detector: each GPU gets its own copy of it and of every stage after it.
    let split = shared_detector(&chains, home, split, registry).unwrap_or(split);
    let mut tail = chains[home].split_off(split);
    let prefix = std::mem::take(&mut chains[home]);
    let batch_name = match name_of(&tail[0]) {
        Some(n) => n.to_string(),
        None => named(&mut tail[0], fresh("@batch", &mut taken)),
    };

    let (stream, feeders) = streams(&chains, home, &prefix, &batch_name);
    let replicas = devices.len().min(feeders).max(1);
    let devices = &devices[..replicas];
    tracing::info!(
        "{}: batch {batch_name}: {feeders} streams over GPUs {devices:?}",
        desc.origin
    );

    let device_prop = |d: usize| Prop {
        key: "device".into(),
        value: d.to_string(),
        key_span: prop.key_span,
        value_span: prop.value_span,
    };
    let set_device = |stages: &mut [StageDesc], d: usize| -> Result<(), DescribeError> {
        for s in stages.iter_mut().filter(|s| !s.reference) {
            let declares = registry
                .get(&s.kind)
                .is_some_and(|decl| decl.props.iter().any(|p| p.name == "device"));
            if !declares {
                continue;
            }
            if let Some(given) = s.props.iter().find(|p| p.key == "device") {
                return Err(desc.error(
                    given.key_span,
                    format!(
                        "{}: device= is set by the batch stage's devices= (each GPU's chain gets \
                         its own): remove device= here",
                        s.kind
                    ),
                ));
            }
            s.props.push(device_prop(d));
        }
        Ok(())
    };

    // The copies of the batch stage and the stages after it, one per GPU.
    let sink_last = tail
        .last()
        .and_then(|s| registry.get(&s.kind).filter(|_| !s.reference))
        .is_some_and(|d| d.role == Role::Sink);
    let sink_name = match (sink_last && replicas > 1, tail.last_mut()) {
        (true, Some(sink)) => Some(match name_of(sink) {
            Some(n) => n.to_string(),
            None => {
                let base = format!("@{}", sink.kind);
                let name = fresh(&base, &mut taken);
                named(sink, name)
            }
        }),
        _ => None,
    };
    let mut copies: Vec<Vec<StageDesc>> = Vec::with_capacity(replicas);
    let mut batch_names = vec![batch_name.clone()];
    for (r, &d) in devices.iter().enumerate() {
        let mut copy = tail.clone();
        if r > 0 {
            if let Some(sink) = &sink_name {
                let last = copy.pop().expect("a sink ends it");
                copy.push(reference(&last, sink));
            }
            for s in copy.iter_mut().filter(|s| !s.reference) {
                if let Some(n) = name_of(s).map(String::from) {
                    named(s, fresh(&format!("{n}@{d}"), &mut taken));
                }
            }
            batch_names.push(name_of(&copy[0]).expect("named above").to_string());
        }
        set_device(&mut copy, d)?;
        copies.push(copy);
    }

    // The streams, each on its GPU; a reference to the batch stage goes to that GPU's copy.
    // Each GPU takes a run of consecutive streams (the first `feeders / K` or one more to GPU 0,
    // ...): measured on two H200s, streams given to the GPUs in turn started 1.4 s later (their
    // NVDEC decoders opened alternating between the GPUs) and ran 16% slower over 64 streams.
    let gpu_of = |j: usize| j * replicas / feeders;
    let mut out = Vec::with_capacity(chains.len() + replicas + 1);
    let mut prefix = Some(prefix);
    for (c, mut chain) in chains.into_iter().enumerate() {
        if c == home {
            let mut prefix = prefix.take().expect("one home chain");
            if let Some(j) = stream[c] {
                set_device(&mut prefix, devices[gpu_of(j)])?;
                let to = &batch_names[gpu_of(j)];
                prefix.push(reference(&copies[0][0], to));
                out.push(prefix);
            }
            out.append(&mut copies);
            continue;
        }
        if let Some(j) = stream[c] {
            set_device(&mut chain, devices[gpu_of(j)])?;
            if ends_in(&chain, &batch_name) {
                let last = chain.last_mut().expect("chains are not empty");
                last.kind = batch_names[gpu_of(j)].clone();
            }
        }
        out.push(chain);
    }
    Ok(join(desc, out))
}

/// The place in chain `home`, before the batch stage at `batch`, of the first detector (a stage
/// of role `Boxes`) that other chains join: the streams' shared detector.
fn shared_detector(
    chains: &[Vec<StageDesc>],
    home: usize,
    batch: usize,
    registry: &Registry,
) -> Option<usize> {
    chains[home][..batch].iter().position(|s| {
        !s.reference
            && registry.get(&s.kind).is_some_and(|d| d.role == Role::Boxes)
            && name_of(s).is_some_and(|n| {
                chains
                    .iter()
                    .enumerate()
                    .any(|(c, chain)| c != home && ends_in(chain, n))
            })
    })
}

/// Which stream (its place among the batch stage's feeders, in description order) each of
/// `chains` belongs to, and how many streams there are. The batch stage, named `batch_name`, is
/// in chain `home`, after `prefix`. A chain feeding a named stage of a stream's chain belongs to
/// that stream.
fn streams(
    chains: &[Vec<StageDesc>],
    home: usize,
    prefix: &[StageDesc],
    batch_name: &str,
) -> (Vec<Option<usize>>, usize) {
    let stages = |c: usize| if c == home { prefix } else { &chains[c][..] };
    let mut stream: Vec<Option<usize>> = vec![None; chains.len()];
    let mut feeders = 0;
    for c in 0..chains.len() {
        let feeds = if c == home {
            !prefix.is_empty()
        } else {
            ends_in(&chains[c], batch_name)
        };
        if feeds {
            stream[c] = Some(feeders);
            feeders += 1;
        }
    }
    // One pass per chain at most: each pass settles the chains one reference further away.
    for _ in 0..chains.len() {
        for c in 0..chains.len() {
            let Some(target) = chains[c]
                .last()
                .filter(|s| s.reference && stream[c].is_none())
            else {
                continue;
            };
            stream[c] = (0..chains.len())
                .find(|&o| stages(o).iter().any(|s| name_of(s) == Some(&target.kind)))
                .and_then(|o| stream[o]);
        }
    }
    (stream, feeders)
}

/// `chains` as a description like `desc`, numbered anew.
fn join(desc: &Description, chains: Vec<Vec<StageDesc>>) -> Description {
    let stages = chains
        .into_iter()
        .enumerate()
        .flat_map(|(c, chain)| {
            chain.into_iter().map(move |mut s| {
                s.chain = c;
                s
            })
        })
        .collect();
    Description {
        origin: desc.origin.clone(),
        text: desc.text.clone(),
        stages,
    }
}

/// Whether `chain` ends in `name.`.
fn ends_in(chain: &[StageDesc], name: &str) -> bool {
    chain.last().is_some_and(|s| s.reference && s.kind == name)
}

/// The `name=` of `s`.
fn name_of(s: &StageDesc) -> Option<&str> {
    s.props
        .iter()
        .find(|p| p.key == "name")
        .map(|p| p.value.as_str())
}

/// Give `s` the name `name` (replacing its own), and return it.
fn named(s: &mut StageDesc, name: String) -> String {
    match s.props.iter_mut().find(|p| p.key == "name") {
        Some(p) => p.value = name.clone(),
        None => s.props.push(Prop {
            key: "name".into(),
            value: name.clone(),
            key_span: s.span,
            value_span: s.span,
        }),
    }
    name
}

/// `base`, or `base` with `@`s appended, whichever no stage is named yet (now taken).
fn fresh(base: &str, taken: &mut HashSet<String>) -> String {
    let mut name = base.to_string();
    while taken.contains(&name) {
        name.push('@');
    }
    taken.insert(name.clone());
    name
}

/// A reference `name.`, placed (for messages) where `at` is.
fn reference(at: &StageDesc, name: &str) -> StageDesc {
    StageDesc {
        kind: name.to_string(),
        span: at.span,
        props: Vec::new(),
        chain: at.chain,
        reference: true,
        end: at.span.start + at.span.len,
    }
}

/// Streams a, e, c, d into a `batch` over two GPUs, and `media location=b` tracked with c (the
/// expansion here and the graph it builds in describe's tests).
#[cfg(test)]
pub(super) const BRANCH_INTO_STREAMS: &str = "media location=a ! boxes format=synthetic ! mux.\n\
     media location=e ! boxes format=synthetic ! mux.\n\
     media location=c ! boxes format=synthetic ! track name=t ! mux.\n\
     media location=b ! boxes format=synthetic ! t.\n\
     media location=d ! boxes format=synthetic ! batch name=mux devices=0,1 ! jsonl location=o";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::Builtin;
    use std::collections::HashMap;

    fn expanded(text: &str, gpus: usize) -> Result<Vec<String>, DescribeError> {
        let desc = super::super::parse("t", text, &HashMap::new())?;
        let out = expand_devices(&desc, &Registry::builtin(), &|| gpus)?;
        let mut lines: Vec<String> = Vec::new();
        for s in &out.stages {
            let mut word = s.kind.clone();
            if s.reference {
                word.push('.');
            }
            for p in &s.props {
                word += &format!(" {}={}", p.key, p.value);
            }
            match lines.get_mut(s.chain) {
                Some(line) => *line += &format!(" ! {word}"),
                None => lines.push(word),
            }
        }
        Ok(lines)
    }

    #[test]
    fn a_run_of_streams_per_gpu_and_one_sink() {
        let text = "testsrc ! boxes format=synthetic ! mux.\n\
                    testsrc ! boxes format=synthetic ! mux.\n\
                    testsrc ! boxes format=synthetic ! batch name=mux devices=1,0 \
                    ! queue size=2 ! preprocess ! classify model=m.onnx ! jsonl location=o";
        // Three streams over two GPUs: streams 0 and 1 on the first listed (GPU 1), 2 on GPU 0.
        assert_eq!(
            expanded(text, 0).unwrap(),
            [
                "testsrc ! boxes format=synthetic ! mux.",
                "testsrc ! boxes format=synthetic ! mux.",
                "testsrc ! boxes format=synthetic ! mux@0.",
                "batch name=mux ! queue size=2 ! preprocess device=1 \
                 ! classify model=m.onnx device=1 ! jsonl location=o name=@jsonl",
                "batch name=mux@0 ! queue size=2 ! preprocess device=0 \
                 ! classify model=m.onnx device=0 ! @jsonl.",
            ]
        );
    }

    #[test]
    fn fewer_streams_than_gpus_make_fewer_chains() {
        let text = "media location=a decoder=nvdec ! boxes format=synthetic ! batch devices=all \
                    ! classify model=m.onnx ! out.\njsonl name=out location=o";
        // One stream on a host of 4 GPUs: one chain, on GPU 0, into the same sink.
        assert_eq!(
            expanded(text, 4).unwrap(),
            [
                "media location=a decoder=nvdec device=0 ! boxes format=synthetic ! @batch.",
                "batch name=@batch ! classify model=m.onnx device=0 ! out.",
                "jsonl name=out location=o",
            ]
        );
        // Two streams on two GPUs: both chains end in the same reference.
        let two = format!(
            "testsrc ! boxes format=synthetic ! mux.\n{}",
            text.replace("batch", "batch name=mux")
        );
        let lines = expanded(&two, 2).unwrap();
        assert_eq!(
            lines[2],
            "batch name=mux ! classify model=m.onnx device=0 ! out."
        );
        assert_eq!(
            lines[3],
            "batch name=mux@1 ! classify model=m.onnx device=1 ! out."
        );
        assert_eq!(lines[4], "jsonl name=out location=o");
        // No GPU: left as it is, without devices=.
        assert_eq!(
            expanded(text, 0).unwrap(),
            [
                "media location=a decoder=nvdec ! boxes format=synthetic ! batch \
                 ! classify model=m.onnx ! out.",
                "jsonl name=out location=o",
            ]
        );
    }

    #[test]
    fn a_branch_into_a_streams_stage_goes_to_its_gpu() {
        // Streams a, e, c, d: a and e on GPU 0, c and d on GPU 1; `media location=b` is tracked
        // with c, so it goes to GPU 1 too.
        let text = BRANCH_INTO_STREAMS;
        let lines = expanded(text, 0).unwrap();
        assert_eq!(
            lines[..5],
            [
                "media location=a device=0 ! boxes format=synthetic ! mux.",
                "media location=e device=0 ! boxes format=synthetic ! mux.",
                "media location=c device=1 ! boxes format=synthetic ! track name=t ! mux@1.",
                "media location=b device=1 ! boxes format=synthetic ! t.",
                "media location=d device=1 ! boxes format=synthetic ! mux@1.",
            ]
        );
        // The graph it builds: describe's tests (`a_branch_into_a_streams_stage_builds_per_gpu`).
    }

    #[test]
    fn streams_into_a_shared_detector_get_one_detector_per_gpu() {
        let text = "media location=a decoder=nvdec ! det.\n\
                    media location=b decoder=nvdec ! det.\n\
                    media location=c decoder=nvdec ! det.\n\
                    detect name=det model=d.onnx ep=cuda ! track ! batch devices=0,1 \
                    ! classify model=m.onnx ep=cuda ! jsonl location=o";
        // Streams a and b on GPU 0, c on GPU 1; each GPU's detector, tracker, batch and
        // classifier, into the one sink.
        assert_eq!(
            expanded(text, 0).unwrap(),
            [
                "media location=a decoder=nvdec device=0 ! det.",
                "media location=b decoder=nvdec device=0 ! det.",
                "media location=c decoder=nvdec device=1 ! det@1.",
                "detect name=det model=d.onnx ep=cuda device=0 ! track ! batch \
                 ! classify model=m.onnx ep=cuda device=0 ! jsonl location=o name=@jsonl",
                "detect name=det@1 model=d.onnx ep=cuda device=1 ! track ! batch \
                 ! classify model=m.onnx ep=cuda device=1 ! @jsonl.",
            ]
        );
        // A stream before the detector in its own chain is one of them (the fourth: a and b on
        // GPU 0, c and d on GPU 1).
        let own = text.replace("detect name=det", "media location=d ! detect name=det");
        let lines = expanded(&own, 0).unwrap();
        assert_eq!(lines[1], "media location=b decoder=nvdec device=0 ! det.");
        assert_eq!(lines[2], "media location=c decoder=nvdec device=1 ! det@1.");
        assert_eq!(lines[3], "media location=d device=1 ! det@1.");
    }

    #[test]
    fn derived_names_never_clash() {
        let text = "testsrc ! boxes format=synthetic ! m.\n\
                    testsrc ! boxes format=synthetic ! batch name=m devices=0,1 \
                    ! preprocess name=m@1 ! jsonl location=o";
        let lines = expanded(text, 0).unwrap();
        assert_eq!(lines[0], "testsrc ! boxes format=synthetic ! m.");
        assert_eq!(lines[1], "testsrc ! boxes format=synthetic ! m@1@.");
        assert_eq!(
            lines[3],
            "batch name=m@1@ ! preprocess name=m@1@1 device=1 ! @jsonl."
        );
    }
}
