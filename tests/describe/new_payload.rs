//! A payload type defined here, in the test file alone (`Embedding`, one vector per frame), with
//! a stage making it from frames (`embed`) and a stage consuming it that passes the frames on
//! as batches for the sink (`embstore`): each registered with one line, run in a description,
//! checked like a built-in stage, and opened outside a pipeline. Neither the core nor the runner
//! names the payload.

use crate::common;

use octopipe::batch::CropBatch;
use octopipe::budget::Tally;
use octopipe::error::PipelineError;
use octopipe::frame::Frame;
use octopipe::stage::{
    Caps, Element, Item, OpenContext, Payload, PropSpec, PropType, Registry, Role, Running, Stage,
    StageDecl,
};
use octopipe::Builtin;
use octopipe::{Error, Pipeline};

/// One vector per frame, with the frame it was made from (so its times are stamped as it
/// travels, and a drop counts the frame).
struct Embedding {
    frame: Frame,
    vector: Vec<f32>,
}

impl Payload for Embedding {
    const NAME: &'static str = "embeddings";
    fn frames(&self) -> &[Frame] {
        std::slice::from_ref(&self.frame)
    }
    fn frames_mut(&mut self) -> &mut [Frame] {
        std::slice::from_mut(&mut self.frame)
    }
}

/// What travels between `embed` and `embstore`.
const EMBEDDINGS: Item = Item::of::<Embedding>();

/// The size of the vectors `embed` makes, told to later stages through the caps' map.
#[derive(Debug, Clone, Copy, PartialEq)]
struct EmbeddingSize(usize);

/// `embed`: a frame's vector is its boxes' count and mean width and height.
#[derive(Debug)]
struct Embed;

struct Embedder;

impl Stage<Frame, Embedding> for Embedder {
    fn process(&mut self, frame: Frame, out: &mut Vec<Embedding>) -> Result<(), Error> {
        let n = frame.detections.len() as f32;
        let mean = |k: usize| {
            let sum: u32 = frame.detections.iter().map(|d| d.bbox[k]).sum();
            sum as f32 / n.max(1.0)
        };
        let vector = vec![n, mean(2), mean(3)];
        out.push(Embedding { frame, vector });
        Ok(())
    }
}

impl Element for Embed {
    fn configure(&mut self, caps: &mut Caps) {
        caps.insert(EmbeddingSize(3));
    }
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::stage(Box::new(Embedder)))
    }
}

const EMBED: StageDecl = StageDecl {
    name: "embed",
    role: Role::Convert {
        input: Item::FRAMES,
        output: EMBEDDINGS,
    },
    doc: "one vector per frame: its boxes' count and mean size",
    props: &[],
    needs: &[Role::Boxes],
    provides: &[],
    make: |_| Ok(Box::new(Embed)),
};

/// `embstore`: keeps the vectors (here: counts them and checks their size) and passes the
/// frames on as batches, so a sink can follow and the report counts the frames.
#[derive(Debug)]
struct EmbStore {
    /// Frames per batch it passes on.
    frames: usize,
}

struct Store {
    frames: usize,
    size: usize,
    vectors: u64,
    boxes: f32,
    held: CropBatch,
    tally: Tally,
}

impl Store {
    fn flush(&mut self, out: &mut Vec<CropBatch>) {
        if !self.held.frames.is_empty() {
            out.push(std::mem::take(&mut self.held));
        }
    }
}

impl Stage<Embedding, CropBatch> for Store {
    fn process(&mut self, e: Embedding, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        assert_eq!(e.vector.len(), self.size, "the size embed told");
        self.vectors += 1;
        self.boxes += e.vector[0];
        self.held.frames.push(e.frame);
        if self.held.frames.len() >= self.frames {
            self.flush(out);
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<CropBatch>) -> Result<(), Error> {
        self.flush(out);
        let (vectors, boxes) = (self.vectors, self.boxes);
        self.tally.with(|t| {
            t.note("embeddings stored", vectors);
            t.add_line(format!("embstore: {vectors} vectors, {boxes} boxes"));
        });
        Ok(())
    }
}

impl Element for EmbStore {
    fn open(self: Box<Self>, ctx: &mut OpenContext) -> Result<Running, Error> {
        let size = ctx.caps.get::<EmbeddingSize>().map_or(0, |s| s.0);
        Ok(Running::stage(Box::new(Store {
            frames: self.frames,
            size,
            vectors: 0,
            boxes: 0.0,
            held: CropBatch::default(),
            tally: ctx.tally.clone(),
        })))
    }
}

const EMBSTORE: StageDecl = StageDecl {
    name: "embstore",
    role: Role::Convert {
        input: EMBEDDINGS,
        output: Item::BATCHES,
    },
    doc: "keeps the vectors and passes the frames on as batches",
    props: &[PropSpec::new(
        "frames",
        PropType::Int { min: 1, max: 256 },
        "4",
        "frames per batch passed on",
    )],
    needs: &[],
    provides: &[],
    make: |p| {
        Ok(Box::new(EmbStore {
            frames: p.int("frames").unwrap_or(4) as usize,
        }))
    },
};

fn registry() -> Registry {
    let mut r = Registry::builtin();
    r.register(EMBED);
    r.register(EMBSTORE);
    r
}

fn graph(registry: &Registry, text: &str) -> Result<octopipe::pipeline::Graph, String> {
    let desc = octopipe::describe::parse("<test>", text, &Default::default()).unwrap();
    octopipe::describe::build_with(&desc, registry).map_err(|e| e.message)
}

#[test]
fn a_payload_defined_in_a_test_travels_between_its_own_stages() {
    let registry = registry();
    let list = registry.inspect(None).unwrap();
    assert!(
        list.lines()
            .any(|l| l.starts_with("embed ") && l.contains("convert")),
        "{list}"
    );
    let dir = common::temp_dir("new-payload");
    let out = dir.join("o.jsonl");
    let text = format!(
        "testsrc width=160 height=120 num-buffers=24 ! boxes format=synthetic count=3 \
         ! embed ! embstore frames=5 ! jsonl location={}",
        out.display()
    );
    let graph = graph(&registry, &text).unwrap();
    let kinds: Vec<&str> = graph.nodes.iter().map(|n| n.kind).collect();
    assert_eq!(kinds, ["testsrc", "boxes", "embed", "embstore", "jsonl"]);
    let outcome = Pipeline::build(graph).unwrap().run();
    assert!(outcome.error.is_none(), "{:?}", outcome.error);

    let r = &outcome.report;
    let rows: Vec<&str> = r.stages.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        rows,
        ["decode", "boxes", "embed", "embstore", "sink"],
        "{r}"
    );
    // Every frame went through both stages (their rows timed it) and reached the end.
    assert_eq!((r.frames_in, r.processed), (24, 24), "{r}");
    assert_eq!(r.stages[2].1.count, 24, "{r}");
    assert_eq!(r.stages[3].1.count, 24, "{r}");
    assert!(
        r.actions
            .iter()
            .any(|(a, n)| a == "embeddings stored" && *n == 24),
        "{r}"
    );
    assert!(
        r.extra
            .iter()
            .any(|l| l == "embstore: 24 vectors, 72 boxes"),
        "{r}"
    );
    // The sink wrote every box of every frame the batches carried.
    assert_eq!(common::read_jsonl(&out).len(), 24 * 3);
}

#[test]
fn a_description_wiring_the_payload_wrongly_is_refused() {
    let registry = registry();
    let head = "testsrc num-buffers=4 ! boxes format=synthetic";
    // The sink takes batches, not embeddings: the stages that take them are named.
    let e = graph(&registry, &format!("{head} ! embed ! jsonl location=o")).unwrap_err();
    assert_eq!(
        e,
        "stage 'jsonl' cannot come here: expected one of 'embstore'"
    );
    // embstore takes embeddings, not frames.
    let e = graph(&registry, &format!("{head} ! embstore ! jsonl location=o")).unwrap_err();
    assert!(e.starts_with("stage 'embstore' cannot come here"), "{e}");
    // A chain that ends in embeddings ends early.
    let e = graph(&registry, &format!("{head} ! embed")).unwrap_err();
    assert!(e.starts_with("the pipeline ends early"), "{e}");
    // A stream added while running ends with frames: embeddings cannot join the batch stage.
    let desc =
        octopipe::describe::parse("<stream>", &format!("{head} ! embed"), &Default::default())
            .unwrap();
    let e = octopipe::describe::build_branch(&desc, &registry, false, true).unwrap_err();
    assert!(
        e.message.starts_with("stage 'embed' cannot come here"),
        "{}",
        e.message
    );
}

/// `embed`'s settings opening a stage of the wrong items (frames to frames): the stage after it
/// is fed frames where it takes embeddings, the runner's wiring error.
#[derive(Debug)]
struct Miswired;

struct PassFrames;

impl Stage<Frame, Frame> for PassFrames {
    fn process(&mut self, frame: Frame, out: &mut Vec<Frame>) -> Result<(), Error> {
        out.push(frame);
        Ok(())
    }
}

impl Element for Miswired {
    fn open(self: Box<Self>, _ctx: &mut OpenContext) -> Result<Running, Error> {
        Ok(Running::stage(Box::new(PassFrames)))
    }
}

#[test]
fn a_stage_giving_other_items_than_its_role_says_is_the_wiring_error() {
    let registry = registry();
    let mut graph = graph(
        &registry,
        "testsrc num-buffers=8 ! boxes format=synthetic ! embed ! embstore ! jsonl location=-",
    )
    .unwrap();
    let embed = graph.nodes.iter_mut().find(|n| n.kind == "embed").unwrap();
    embed.element = Box::new(Miswired);
    let outcome = Pipeline::build(graph).unwrap().run();
    let e = outcome.error.expect("the wiring error");
    assert!(
        matches!(&e, Error::Pipeline(PipelineError::Wiring { .. })),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "stage 'embstore' takes embeddings but is fed frames"
    );
}

#[test]
fn a_built_in_stage_opens_and_runs_outside_a_pipeline() {
    // `track`, made from its properties and opened with the default services: no pipeline.
    let track = Registry::builtin().get("track").copied().unwrap();
    let mut element = track.element(&[("min-hits", "2")]).unwrap();
    let mut caps = Caps::default();
    element.configure(&mut caps);
    let (running, tally) = {
        let mut ctx = OpenContext::new(&mut caps);
        let tally = ctx.tally.clone();
        (element.open(&mut ctx).unwrap(), tally)
    };
    assert!(
        caps.get::<octopipe::track::Tracked>().is_some(),
        "track tells the detector before it"
    );
    assert_eq!(running.items(), (Some(Item::FRAMES), Item::FRAMES));
    let mut stage = running.into_stage::<Frame, Frame>().ok().unwrap();
    // One box moving right by 2 pixels a frame: one track, from the second frame on.
    let mut out = Vec::new();
    for seq in 0..6 {
        let mut frame = common::random_frame(octopipe::PixelFormat::Rgb, 64, 48, seq);
        let x = 10 + 2 * seq as u32;
        frame
            .detections
            .push(octopipe::frame::Detection::new([x, 10, 12, 12]));
        stage.process(frame, &mut out).unwrap();
    }
    stage.finish(&mut out).unwrap();
    assert_eq!(out.len(), 6);
    let ids: Vec<Option<u32>> = out.iter().map(|f| f.detections[0].track).collect();
    assert!(
        ids[1].is_some() && ids.iter().skip(1).all(|id| *id == ids[1]),
        "{ids:?}"
    );
    let report = tally.with(|t| t.finish()).unwrap();
    let sections = report.sections::<octopipe::track::TrackSection>();
    assert_eq!(sections.len(), 1, "{report}");
    assert_eq!((sections[0].born, sections[0].min_hits), (1, 2));
    // A property it does not have is refused as in a description.
    let e = track.element(&[("hihg", "0.5")]).unwrap_err();
    assert!(e.message.contains("did you mean 'high'"), "{}", e.message);
}
