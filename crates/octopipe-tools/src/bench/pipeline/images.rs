//! Image streams in the pipeline benchmark (`--images DIR`): each stream plays the folder's
//! JPEG files (`images location=... loop=N decoder=cpu|nvjpeg|auto`), with the VisDrone
//! annotations beside them as its boxes (`boxes format=det`) where the folder has them, else
//! synthetic boxes; the rows compare the CPU decode with nvJPEG's in the same run.

use std::path::{Path, PathBuf};

use crate::bench::error::BenchError;

/// The image folder of `--images`: its JPEG files and the boxes they come with.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageStreams {
    /// The folder of JPEG files each stream plays.
    pub images: PathBuf,
    /// VisDrone `det` annotations of those files (a clip's `annotations/`), if there.
    pub annotations: Option<PathBuf>,
    /// JPEG files in the folder.
    pub files: usize,
    /// Times each stream plays them (`images loop=`).
    pub loops: u32,
}

impl ImageStreams {
    /// The image streams of `dir`: a clip folder (its `images/`, with `annotations/` beside
    /// them when there) or a folder of JPEG files (its sibling `annotations/` used when it is a
    /// clip's `images/`). Played once each until [`loops`](Self::loops) is set.
    pub fn find(dir: &Path) -> Result<Self, BenchError> {
        let bad = |m: String| BenchError::Options(format!("--images {}: {m}", dir.display()));
        let (images, annotations) = if dir.join("images").is_dir() {
            (dir.join("images"), dir.join("annotations"))
        } else {
            let beside = dir
                .parent()
                .filter(|_| dir.file_name().is_some_and(|n| n == "images"))
                .map_or_else(PathBuf::new, |p| p.join("annotations"));
            (dir.to_path_buf(), beside)
        };
        let entries = std::fs::read_dir(&images).map_err(|e| bad(e.to_string()))?;
        let files = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                    e.eq_ignore_ascii_case("jpg") || e.eq_ignore_ascii_case("jpeg")
                })
            })
            .count();
        if files == 0 {
            return Err(bad("no JPEG files (*.jpg, *.jpeg) in it".into()));
        }
        Ok(ImageStreams {
            images,
            annotations: annotations.is_dir().then_some(annotations),
            files,
            loops: 1,
        })
    }

    /// Loop the files so that each stream has at least `frames` frames.
    pub fn with_frames(mut self, frames: u64) -> Self {
        let loops = frames.div_ceil(self.files as u64).max(1);
        self.loops = u32::try_from(loops).unwrap_or(u32::MAX);
        self
    }

    /// Frames of one stream.
    pub fn frames_per_stream(&self) -> u64 {
        self.files as u64 * self.loops as u64
    }

    /// One stream's source and boxes, with `${images}` (and `${annotations}`) for the paths.
    pub(super) fn branch(&self, decoder: &str, live: bool, boxes: u32) -> String {
        let mut text = format!(
            "images location=${{images}} loop={} decoder={decoder}",
            self.loops
        );
        if live {
            text.push_str(" live=true");
        }
        match &self.annotations {
            Some(_) => text.push_str(" ! boxes format=det location=${annotations}"),
            None => text.push_str(&format!(" ! boxes format=synthetic count={boxes}")),
        }
        text
    }

    /// The variables [`branch`](Self::branch) refers to.
    pub(super) fn vars(&self) -> Vec<(String, String)> {
        let mut vars = vec![("images".to_string(), self.images.display().to_string())];
        if let Some(a) = &self.annotations {
            vars.push(("annotations".into(), a.display().to_string()));
        }
        vars
    }
}

/// Why nvJPEG cannot decode on the GPUs of `devices` (empty: GPU 0), or `None` when it can:
/// the row of a decoder that cannot run says so instead of running.
pub(super) fn nvjpeg_missing(devices: &[usize]) -> Option<String> {
    if let Err(e) = octopipe_stages::preprocess::cuda::available() {
        return Some(format!("nvJPEG needs a GPU: {e}"));
    }
    let devices = if devices.is_empty() {
        &[0][..]
    } else {
        devices
    };
    devices.iter().find_map(|&d| {
        octopipe_sources::nvjpeg_available(d)
            .err()
            .map(|e| format!("no nvJPEG on cuda:{d}: {e}"))
    })
}

/// Files the nvJPEG route decoded on the CPU instead (its `decoded on the CPU: ...` events),
/// over the streams of `report`.
pub(super) fn fallbacks(report: &octopipe_core::budget::Report) -> u64 {
    report
        .streams
        .iter()
        .flat_map(|s| &s.events)
        .filter(|(event, _)| event.starts_with("decoded on the CPU"))
        .map(|(_, n)| n)
        .sum()
}
