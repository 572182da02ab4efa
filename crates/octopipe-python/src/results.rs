//! Results as frames finish: the observer that collects each frame's objects on the
//! pipeline's collector thread, and the `Frame` objects Python gets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyList};

use octopipe::batch::CropBatch;
use octopipe::{Object, Observer};

/// How often a full results channel looks whether the application gave up reading.
const POLL: Duration = Duration::from_millis(50);

/// One finished frame's objects (all its parts').
pub struct FrameItem {
    stream: u32,
    index: u64,
    pts_ms: Option<f64>,
    source: Arc<str>,
    timestamp: Arc<str>,
    size: (u32, u32),
    objects: Vec<Object>,
}

/// Collects each frame's objects (a frame in parts once its last part is through) and sends the
/// frame on; waits while the channel is full (the application reads slower than the pipeline
/// runs) unless the application gave up reading (`abandon`).
pub struct ResultsObserver {
    tx: Sender<FrameItem>,
    abandon: Arc<AtomicBool>,
    parts: HashMap<(u32, u64), FrameItem>,
}

impl ResultsObserver {
    pub fn new(tx: Sender<FrameItem>, abandon: Arc<AtomicBool>) -> Self {
        ResultsObserver {
            tx,
            abandon,
            parts: HashMap::new(),
        }
    }

    fn send(&self, mut item: FrameItem) {
        loop {
            if self.abandon.load(Ordering::SeqCst) {
                return;
            }
            match self.tx.send_timeout(item, POLL) {
                Ok(()) | Err(SendTimeoutError::Disconnected(_)) => return,
                Err(SendTimeoutError::Timeout(back)) => item = back,
            }
        }
    }
}

impl Observer for ResultsObserver {
    fn batch(&mut self, batch: &CropBatch, _budget: Duration) {
        for f in &batch.frames {
            let key = (f.stream, f.seq);
            let mut item = self.parts.remove(&key).unwrap_or_else(|| FrameItem {
                stream: f.stream,
                index: f.seq,
                pts_ms: f.pts.map(|p| p.as_secs_f64() * 1000.0),
                source: f.uri.clone(),
                timestamp: octopipe::sink::timestamp(f).into(),
                size: (f.layout.width, f.layout.height),
                objects: Vec::new(),
            });
            item.objects.extend(Object::in_frame(f));
            if f.part.is_last() {
                self.send(item);
            } else {
                self.parts.insert(key, item);
            }
        }
    }
}

/// A frame that went through the pipeline, with its objects.
#[pyclass(frozen, module = "octopipe")]
pub struct Frame {
    item: FrameItem,
}

impl From<FrameItem> for Frame {
    fn from(item: FrameItem) -> Self {
        Frame { item }
    }
}

#[pymethods]
impl Frame {
    /// The stream (branch) the frame came in on: its source's place in the description.
    #[getter]
    fn stream(&self) -> u32 {
        self.item.stream
    }

    /// The frame's number in its stream (the JSONL's `frame`).
    #[getter]
    fn index(&self) -> u64 {
        self.item.index
    }

    /// Presentation time in milliseconds, or None when the frame has none.
    #[getter]
    fn pts_ms(&self) -> Option<f64> {
        self.item.pts_ms
    }

    /// The frame's source as a URI (the JSONL's `source`): `file:///...` for an image or a
    /// file, `octopipe:NAME` for a pushed frame's name.
    #[getter]
    fn source(&self) -> &str {
        &self.item.source
    }

    /// The frame's wall-clock time, RFC 3339 in UTC with milliseconds (the JSONL's
    /// `timestamp`): a live source's capture time, otherwise when it was decoded or pushed.
    #[getter]
    fn timestamp(&self) -> &str {
        &self.item.timestamp
    }

    /// The frame's width in pixels.
    #[getter]
    fn width(&self) -> u32 {
        self.item.size.0
    }

    /// The frame's height in pixels.
    #[getter]
    fn height(&self) -> u32 {
        self.item.size.1
    }

    /// The frame's objects, in box order: one dict per object with exactly the fields of its
    /// line in a `jsonl` sink's output (`json.loads(line)` of that line compares equal). A new
    /// list each time.
    #[getter]
    fn objects<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut text = String::from("[");
        for (i, o) in self.item.objects.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            let line = serde_json::to_string(o)
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
            text.push_str(&line);
        }
        text.push(']');
        py.import("json")?.call_method1("loads", (text,))
    }

    /// The objects as NumPy arrays, for bulk use: a dict with `boxes` (N x 4 int32: x, y, w, h),
    /// `class_ids` (int64, -1 where unlabelled), `scores` (float32, NaN where unlabelled),
    /// `tracks` (int64, -1 where no track) and `labels` (str, '' where unlabelled); where several
    /// classifiers classify the boxes, `classifiers` too: by each classifier's name, its own
    /// `class_ids`, `scores` and `labels` (the top-level ones are the first classifier's).
    fn objects_array<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let np = py.import("numpy")?;
        let objects = &self.item.objects;
        let n = objects.len();
        let array =
            |bytes: Vec<u8>, dtype: &str, shape: (usize, usize)| -> PyResult<Bound<'py, PyAny>> {
                let buf = PyByteArray::new(py, &bytes);
                let a = np.call_method1("frombuffer", (buf, dtype))?;
                if shape.1 == 0 {
                    Ok(a)
                } else {
                    a.call_method1("reshape", (shape,))
                }
            };
        let mut boxes = Vec::with_capacity(n * 16);
        let (mut classes, mut scores, mut tracks) = (Vec::new(), Vec::new(), Vec::new());
        let labels = PyList::empty(py);
        for o in objects {
            for v in o.bbox {
                boxes.extend_from_slice(&(v.min(i32::MAX as u32) as i32).to_le_bytes());
            }
            classes.extend_from_slice(&o.class_id.map_or(-1, i64::from).to_le_bytes());
            scores.extend_from_slice(&o.score.unwrap_or(f32::NAN).to_le_bytes());
            tracks.extend_from_slice(&o.track.map_or(-1, i64::from).to_le_bytes());
            labels.append(o.label.as_deref().unwrap_or(""))?;
        }
        let out = PyDict::new(py);
        out.set_item("boxes", array(boxes, "<i4", (n, 4))?)?;
        out.set_item("class_ids", array(classes, "<i8", (n, 0))?)?;
        out.set_item("scores", array(scores, "<f4", (n, 0))?)?;
        out.set_item("tracks", array(tracks, "<i8", (n, 0))?)?;
        out.set_item("labels", np.call_method1("array", (labels, "U"))?)?;
        // Several classifiers on the boxes: each one's answers by its name, in chain order.
        let mut names: Vec<&str> = Vec::new();
        for (name, _) in objects.iter().flat_map(|o| &o.classifiers.0) {
            if !names.contains(&&**name) {
                names.push(name);
            }
        }
        if !names.is_empty() {
            let by_name = PyDict::new(py);
            for name in names {
                let (mut classes, mut scores) = (Vec::new(), Vec::new());
                let labels = PyList::empty(py);
                for o in objects {
                    let answer = o.classifiers.get(name);
                    classes
                        .extend_from_slice(&answer.map_or(-1, |a| a.class_id as i64).to_le_bytes());
                    scores.extend_from_slice(&answer.map_or(f32::NAN, |a| a.score).to_le_bytes());
                    labels.append(answer.map_or("", |a| &*a.label))?;
                }
                let arrays = PyDict::new(py);
                arrays.set_item("class_ids", array(classes, "<i8", (n, 0))?)?;
                arrays.set_item("scores", array(scores, "<f4", (n, 0))?)?;
                arrays.set_item("labels", np.call_method1("array", (labels, "U"))?)?;
                by_name.set_item(name, arrays)?;
            }
            out.set_item("classifiers", by_name)?;
        }
        Ok(out)
    }

    fn __len__(&self) -> usize {
        self.item.objects.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Frame(stream={}, index={}, source={:?}, objects={})",
            self.item.stream,
            self.item.index,
            &*self.item.source,
            self.item.objects.len()
        )
    }
}
