//! The `octoboxes` element: the `boxes` stage on each frame.

use std::path::PathBuf;
use std::sync::Arc;

use octopipe_core::frame::Frame;
use octopipe_stages::boxes::BOXES;

use crate::common::stages::{alone, open_stages, settings, Driven};

/// The boxes stage, and for DET replay the annotation files in name order.
pub(crate) struct BoxesWork {
    stage: Driven<Frame>,
    /// DET: the folder and each file's name without `.txt` (the frame's name, which the stage
    /// matches to `NAME.txt`), frame N taking the Nth.
    det: Option<(PathBuf, Vec<Arc<str>>)>,
}

impl BoxesWork {
    /// The names of the DET files of `folder` (`NAME.txt`), in name order.
    fn det_files(folder: &std::path::Path) -> Result<Vec<Arc<str>>, PluginError> {
        let entries = std::fs::read_dir(folder).map_err(|e| {
            PluginError::Property(format!(
                "location {}: not a folder of DET annotation files: {e}",
                folder.display()
            ))
        })?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter_map(|n| n.strip_suffix(".txt").map(str::to_string))
            .collect();
        names.sort();
        Ok(names.into_iter().map(Arc::from).collect())
    }
}

impl Work for BoxesWork {
    const DECLS: &'static [&'static octopipe_core::stage::StageDecl] = &[&BOXES];
    const LONG_NAME: &'static str = "octopipe annotation boxes";
    const DESCRIPTION: &'static str =
        "Attaches boxes (VisDrone DET/MOT annotations or the synthetic generator) as ROI metadata";
    const PIXELS: bool = false;
    const READS_OBJECTS: bool = false;
    const WRITES_OBJECTS: bool = true;

    fn start(values: &Values, _element: &str, _shared: Option<&str>) -> Result<Self, PluginError> {
        let element = settings(&BOXES, values, &[])?;
        let det = match (
            values.text("format").unwrap_or("det"),
            values.text("location"),
        ) {
            ("det", Some(location)) => {
                let folder = PathBuf::from(location);
                let files = Self::det_files(&folder)?;
                Some((folder, files))
            }
            _ => None,
        };
        let [boxes] = open_stages([element], alone)?;
        let stage = Driven::new(boxes.stage()?);
        Ok(BoxesWork { stage, det })
    }

    fn process(&mut self, mut frame: Frame) -> Result<Frame, PluginError> {
        if let Some((folder, files)) = &self.det {
            let name = usize::try_from(frame.seq)
                .ok()
                .and_then(|n| files.get(n))
                .ok_or_else(|| {
                    PluginError::Buffer(format!(
                        "frame {} has no annotation file: {} holds {} (frame N takes the Nth in name order)",
                        frame.seq,
                        folder.display(),
                        files.len()
                    ))
                })?;
            frame.uri = octopipe_core::frame::source_uri(name).into();
            frame.source = name.clone();
        }
        let mut out = Vec::with_capacity(1);
        self.stage.run(frame, &mut out)?;
        out.pop()
            .ok_or_else(|| PluginError::Buffer("the boxes stage kept the frame".into()))
    }
}

octo_element!(OctoBoxesImp, OctoBoxes, BoxesWork, "GstOctoBoxes");
