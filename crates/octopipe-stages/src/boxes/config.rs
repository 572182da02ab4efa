//! The boxes stage's declaration: its properties, declared once, and how they make its settings.

use std::path::PathBuf;

use super::settings::{BoxSource, BoxesConfig};
use octopipe_core::description::DescribeError;
use octopipe_core::stage::{Element, PropChoice, Properties, Props, Role, StageDecl};

/// Where the boxes stage's boxes come from (`format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
#[non_exhaustive]
pub enum BoxFormat {
    /// VisDrone DET annotations ([`BoxSource::Det`]).
    Det,
    /// A VisDrone MOT sequence file ([`BoxSource::Mot`]).
    Mot,
    /// The synthetic generator ([`BoxSource::Synthetic`]).
    Synthetic,
}

/// What a malformed annotation line does (`bad-lines`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
#[non_exhaustive]
pub enum BadLines {
    /// Fails the run, naming file and line.
    Error,
    /// Is skipped and counted.
    Skip,
}

/// The boxes stage's properties, declared once ([`BOXES`]).
#[derive(Debug, Clone, PartialEq, Properties)]
#[non_exhaustive]
pub struct BoxesProps {
    /// where boxes come from
    #[prop(default = "det")]
    pub format: BoxFormat,
    /// DET: folder of NAME.txt per image; MOT: the sequence's file
    pub location: Option<PathBuf>,
    /// synthetic: boxes per frame
    #[prop(default = 28, range = ..=octopipe_core::stage::limits::MAX_BOXES)]
    pub count: usize,
    /// synthetic: seed
    #[prop(default = 7, unbounded)]
    pub seed: u64,
    /// also classify ignored regions (category 0 or score 0)
    #[prop(default = false)]
    pub keep_ignored: bool,
    /// a malformed annotation line fails the run (file:line), or is skipped and counted
    #[prop(default = "error")]
    pub bad_lines: BadLines,
    /// categories not classified (VisDrone 11: others)
    #[prop(default = super::settings::DEFAULT_SKIP_CATEGORIES, range = ..=11)]
    pub skip_categories: Vec<i64>,
}

/// `boxes format=det|mot|synthetic`: annotation replay or the synthetic generator.
pub const BOXES: StageDecl = StageDecl {
    name: "boxes",
    role: Role::Boxes,
    doc: "attach detection boxes: VisDrone DET/MOT annotations or the synthetic generator",
    props: BoxesProps::PROPS,
    needs: &[],
    provides: &[],
    make: boxes_config,
};

/// [`BoxesProps`]; `location` is needed by the annotation formats.
fn boxes_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let b = BoxesProps::from_props(p)?;
    let source = match b.format {
        BoxFormat::Mot => BoxSource::Mot {
            location: PathBuf::from(p.required("location")?),
        },
        BoxFormat::Synthetic => BoxSource::Synthetic {
            count: u32::try_from(b.count).unwrap_or(u32::MAX),
            seed: b.seed,
        },
        BoxFormat::Det => BoxSource::Det {
            location: PathBuf::from(p.required("location")?),
        },
    };
    let mut cfg = BoxesConfig::new(source);
    cfg.keep_ignored = b.keep_ignored;
    cfg.skip_categories = b.skip_categories.into_iter().map(|c| c as u8).collect();
    cfg.skip_bad_lines = b.bad_lines == BadLines::Skip;
    Ok(Box::new(cfg))
}
