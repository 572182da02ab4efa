//! The `octojsonl` element: the `jsonl` sink stage on each frame, as a batch of one frame.

use octopipe_core::crops::{BatchPool, CropBatch};
use octopipe_core::frame::Frame;
use octopipe_core::stage::Stage;
use octopipe_stages::sink::JSONL;

use crate::common::stages::{alone, open_stages, settings};

/// The jsonl stage, and the empty batches a frame travels in.
pub(crate) struct JsonlWork {
    stage: Box<dyn Stage<CropBatch, CropBatch>>,
    pool: BatchPool,
}

impl Work for JsonlWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[&JSONL];
    const LONG_NAME: &'static str = "octopipe JSON Lines writer";
    const DESCRIPTION: &'static str =
        "Writes one JSON line per object of the ROI metadata (octopipe's jsonl schema) to a file";
    const PIXELS: bool = false;
    const READS_OBJECTS: bool = true;
    const WRITES_OBJECTS: bool = false;
    const REPORTS: bool = true;

    fn start(values: &Values, _element: &str, _shared: Option<&str>) -> Result<Self, PluginError> {
        let [jsonl] = open_stages([settings(&JSONL, values, &[])?], alone)?;
        let stage = jsonl.stage::<CropBatch, CropBatch>()?;
        Ok(JsonlWork {
            stage,
            pool: BatchPool::new(),
        })
    }

    fn process(&mut self, frame: Frame) -> Result<Frame, PluginError> {
        let mut batch = self.pool.batch();
        batch.frames.push(frame);
        let mut out = Vec::with_capacity(1);
        self.stage.process(batch, &mut out)?;
        out.pop()
            .and_then(|mut b| b.frames.pop())
            .ok_or_else(|| PluginError::Buffer("the jsonl stage kept the frame".into()))
    }

    fn eos(&mut self) -> Result<(), PluginError> {
        self.stage.finish(&mut Vec::new())?;
        Ok(())
    }
}

octo_element!(OctoJsonlImp, OctoJsonl, JsonlWork, "GstOctoJsonl");
