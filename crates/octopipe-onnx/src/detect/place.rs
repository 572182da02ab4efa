//! Boxes back to their frames: a call's boxes of one frame checked against the labels, kept by
//! class, merged (NMS; classes a `map` renames alike merge as one), named and rounded to whole
//! pixels inside the frame, as its detections.

use std::sync::Arc;

use super::detector::Detector;
use super::error::DetectError;
use super::nms;
use super::raw::RawBox;
use octopipe_core::frame::{BoxOrigin, Detection, Frame, SkipReason};

impl Detector {
    /// Filter, merge and round `boxes` (in `frame`'s pixels) into `frame`'s detections. A box of
    /// a class past the labels is an error: labels name the model's classes one for one (an
    /// end-to-end output's class count shows only in its boxes).
    pub(super) fn place(
        &mut self,
        frame: &mut Frame,
        boxes: &mut Vec<RawBox>,
    ) -> Result<(), DetectError> {
        let (w, h) = (frame.layout.width, frame.layout.height);
        let labels = &self.config.labels;
        if let Some(past) = boxes
            .iter()
            .map(|b| b.class)
            .filter(|&c| !labels.is_empty() && c as usize >= labels.len())
            .max()
        {
            let more = if labels.len() > 3 { ",..." } else { "" };
            return Err(DetectError::Model {
                path: self.config.model.display().to_string(),
                reason: format!(
                    "it gave a box of class {past} (stream {} frame {}) but the labels name {} ({}{more}): give one name per class, in class-index order{}",
                    frame.stream,
                    frame.seq,
                    labels.len(),
                    labels[..labels.len().min(3)].join(","),
                    super::io::fewer_labels_hint(labels, (past as usize + 1).max(80))
                ),
            });
        }
        if let Some(keep) = &self.keep {
            let before = boxes.len();
            boxes.retain(|b| keep.contains(&b.class));
            self.split.other_classes += (before - boxes.len()) as u64;
        }
        // Classes a map renames alike are merged as one.
        let top = boxes.iter().map(|b| b.class).max().unwrap_or(0);
        self.name(top);
        let groups = &self.groups;
        nms(
            boxes,
            self.config.suppress,
            self.config.max_detections,
            |c| groups[c as usize],
        );
        frame.detections.clear();
        for b in boxes.iter() {
            match pixel_box(b.b, w, h) {
                Ok(bbox) => {
                    let label = self.name(b.class);
                    // The output label's id: classes a map renames alike share the lowest
                    // index among them (car, bus, truck -> vehicle: 2), so one label has one id.
                    let class_id = self.groups[b.class as usize];
                    frame.detections.push(Detection {
                        bbox,
                        class_id: Some(class_id),
                        origin: BoxOrigin::Detector,
                        label: Some(label),
                        score: b.score,
                        track: None,
                        classification: None,
                        classifications: Vec::new(),
                        stats: None,
                    });
                }
                Err(reason) => frame.skip(reason),
            }
        }
        self.split.kept += frame.detections.len() as u64;
        Ok(())
    }

    /// The shared name of class `id`, after `map`.
    fn name(&mut self, id: u32) -> Arc<str> {
        while self.names.len() <= id as usize {
            let next = self.names.len();
            let name = self
                .config
                .labels
                .get(next)
                .cloned()
                .unwrap_or_else(|| format!("class{next}"));
            let name = self
                .config
                .map
                .iter()
                .find(|(from, _)| *from == name)
                .map_or(name, |(_, to)| to.clone());
            let first = self.names.iter().position(|n| **n == *name);
            self.groups.push(first.unwrap_or(next) as u32);
            self.names.push(Arc::from(name));
        }
        self.names[id as usize].clone()
    }
}

/// A frame box `[x1, y1, x2, y2]` as whole pixels `[x, y, w, h]` inside a `fw`x`fh` frame (edges
/// rounded to the nearest pixel); refused when outside or under 2 px.
pub(super) fn pixel_box(b: [f32; 4], fw: u32, fh: u32) -> Result<[u32; 4], SkipReason> {
    let x0 = b[0].round() as i64;
    let y0 = b[1].round() as i64;
    let x1 = b[2].round() as i64;
    let y1 = b[3].round() as i64;
    octopipe_stages::boxes::clip_box([x0, y0, x1 - x0, y1 - y0], fw, fh)
}
