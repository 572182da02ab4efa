//! The application's own frames: it decodes the VisDrone clip's JPEGs itself (the `image` crate),
//! reads their DET annotations itself, and pushes each RGB frame with its boxes into a pipeline
//! through an `app` source; the classified objects come back on a channel.
//!
//! ```text
//! this program: image::open(jpeg) -> RGB, own DET parser -> boxes
//!   --push(AppFrame)--> app name=cam (pts = index / 30 s, name = file name)
//!   ! batch ! preprocess (CPU or CUDA) ! classify (MODEL)
//!   ! appsink --> Receiver<Object>   (no file written)
//! ```
//!
//! ```sh
//! . scripts/env.sh
//! export OCTOPIPE_DATA=../shared/data
//! cargo run --release --example 02-app-frames                         # $OCTOPIPE_DATA, its model
//! cargo run --release --example 02-app-frames -- DATA_DIR [MODEL.onnx]
//! ```
//!
//! `DATA_DIR` holds `visdrone/clip-9999999/{images,annotations}`; the model defaults to
//! `DATA_DIR/models/visdrone-crops-64.onnx`. Like `pipelines/visdrone-classify.pipe`, ignored regions
//! (score 0 or category 0) and category 11 ("others") are not classified; each box carries its
//! VisDrone category as class id and the category's name as label, so the program can say which
//! share of the objects the classifier labels as annotated.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use octopipe::{AppBox, AppFrame, Pipeline, PixelFormat};

/// The classifier's classes, in output order.
const LABELS: [&str; 4] = ["person", "two-wheeler", "car", "large-vehicle"];

/// VisDrone's category names, by category number.
const CATEGORIES: [&str; 12] = octopipe::boxes::VISDRONE_CATEGORIES;

/// The classifier's class of a VisDrone category (none for ignored regions and "others").
fn class_of(category: u32) -> Option<u32> {
    match category {
        1 | 2 => Some(0),
        3 | 7 | 8 | 10 => Some(1),
        4 => Some(2),
        5 | 6 | 9 => Some(3),
        _ => None,
    }
}

/// The classifiable boxes of a VisDrone DET annotation file
/// (`x,y,w,h,score,category,truncation,occlusion` per line): ignored regions (score 0 or
/// category 0) and category 11 ("others") left out.
fn read_det(path: &Path) -> Result<Vec<AppBox>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut boxes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let fields: Vec<i64> = line
            .trim_end_matches(',')
            .split(',')
            .map(|f| f.trim().parse::<i64>())
            .collect::<Result<_, _>>()
            .with_context(|| format!("{}: not a list of integers: {line:?}", at()))?;
        let [x, y, w, h, score, category] = match fields.get(..6) {
            Some(&[x, y, w, h, s, c]) => [x, y, w, h, s, c],
            _ => bail!(
                "{}: expected at least 6 fields, found {}",
                at(),
                fields.len()
            ),
        };
        let Some(name) = usize::try_from(category)
            .ok()
            .and_then(|c| CATEGORIES.get(c))
        else {
            bail!("{}: category {category} is not a VisDrone category", at());
        };
        if score == 0 || category == 0 || category == 11 {
            continue;
        }
        boxes.push(
            AppBox::new(x as f64, y as f64, w as f64, h as f64)
                .class(category as u32)
                .label(*name),
        );
    }
    Ok(boxes)
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let data = match args.next() {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(
            std::env::var_os("OCTOPIPE_DATA")
                .context("usage: 02-app-frames [DATA_DIR [MODEL.onnx]] (or set OCTOPIPE_DATA)")?,
        ),
    };
    let model = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| data.join("models/visdrone-crops-64.onnx"));
    let clip = data.join("visdrone/clip-9999999");
    let mut images: Vec<PathBuf> = std::fs::read_dir(clip.join("images"))
        .with_context(|| format!("cannot list {}", clip.join("images").display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("jpg")))
        .collect();
    images.sort();
    if images.is_empty() {
        bail!("no .jpg files in {}", clip.join("images").display());
    }

    let vars = HashMap::from([("model".to_string(), model.display().to_string())]);
    let mut pipeline = Pipeline::from_description(
        "app name=cam framerate=30 \
         ! classify model=${model} labels=person,two-wheeler,car,large-vehicle \
         ! appsink",
        &vars,
    )?;
    let cam = pipeline
        .app_source(Some("cam"))
        .context("no app source 'cam'")?;
    let objects = pipeline.results(1024);
    // The pipeline runs on its own threads, the results are read on another one: pushing here
    // never waits on a full results channel.
    let run = std::thread::spawn(move || pipeline.run());
    let reader = std::thread::spawn(move || objects.into_iter().collect::<Vec<_>>());

    let pushed = (|| -> Result<()> {
        for (index, path) in images.iter().enumerate() {
            let rgb = image::open(path)
                .with_context(|| format!("cannot decode {}", path.display()))?
                .to_rgb8();
            let (w, h) = rgb.dimensions();
            let stem = path.file_stem().unwrap_or_default();
            let boxes = read_det(&clip.join("annotations").join(stem).with_extension("txt"))?;
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let frame = AppFrame::packed(PixelFormat::Rgb, w, h, rgb.into_raw())
                .pts(Duration::from_secs_f64(index as f64 / 30.0))
                .name(name)
                .boxes(boxes);
            cam.push(frame)?;
        }
        Ok(())
    })();
    // Close in any case, so the pipeline finishes what it has and the threads end.
    cam.close();
    let outcome = run
        .join()
        .map_err(|_| anyhow::anyhow!("pipeline thread panicked"))?;
    let objects = reader
        .join()
        .map_err(|_| anyhow::anyhow!("results thread panicked"))?;
    if let Some(e) = outcome.error {
        return Err(e.into());
    }
    pushed?;

    let mut per_label: BTreeMap<&str, usize> = BTreeMap::new();
    let mut right = 0;
    for o in &objects {
        *per_label
            .entry(o.label.as_deref().unwrap_or("-"))
            .or_default() += 1;
        right += usize::from(
            o.detection
                .as_ref()
                .and_then(|d| d.class_id)
                .and_then(class_of)
                .is_some_and(|c| Some(c) == o.class_id),
        );
    }
    for label in LABELS {
        per_label.entry(label).or_default();
    }
    println!("{}", outcome.report);
    println!("objects per label:");
    for (label, n) in &per_label {
        println!("  {label:<14} {n:>5}");
    }
    println!(
        "labelled as annotated: {right} of {} ({:.2}%)",
        objects.len(),
        100.0 * right as f64 / objects.len().max(1) as f64
    );
    Ok(())
}
