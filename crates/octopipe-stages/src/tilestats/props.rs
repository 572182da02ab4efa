//! The tilestats stage's properties, and its settings made of them and the parsed `keep` rule.

use crate::preprocess::BackendProps;
use octopipe_core::description::DescribeError;
use octopipe_core::stage::{Element, PropChoice, Properties, Props};

use super::config::{BandName, TileStatsConfig};
use super::rule::{Property, Rule};

/// What `score` ranks by: the properties of a tile's values ([`Property`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PropChoice)]
#[non_exhaustive]
pub enum Score {
    /// [`Property::Mean`].
    Mean,
    /// [`Property::Std`].
    Std,
    /// [`Property::Min`].
    Min,
    /// [`Property::Max`].
    Max,
    /// [`Property::Above`].
    Above,
    /// [`Property::Pixels`].
    Pixels,
}

/// The tilestats stage's properties, declared once ([`TILESTATS`]); [`TileStatsConfig`] is made
/// from them and the parsed `keep` rule.
///
/// [`TILESTATS`]: super::TILESTATS
#[derive(Debug, Clone, PartialEq, Properties)]
#[non_exhaustive]
pub struct TileStatsProps {
    /// value = sample * scale + offset (auto: 1/65535 for 16-bit samples, 1/255 for 8-bit)
    #[prop(default = "auto", positive)]
    pub scale: Option<f64>,
    /// value = sample * scale + offset
    #[prop(default = 0, range = f64::MIN..=f64::MAX)]
    pub offset: f64,
    /// the value 'above' counts the samples above (the fraction of the tile's samples)
    #[prop(default = 0.5, range = f64::MIN..=f64::MAX)]
    pub level: f64,
    /// rule: comparisons of mean, std, min, max, above, pixels, width, height with and/or/not
    /// (e.g. "mean>0.535"); none keeps all
    pub keep: Option<String>,
    /// keep at most this many of a frame's tiles that pass the rule, the highest score first
    #[prop(range = 1..=octopipe_core::stage::limits::MAX_BOXES)]
    pub top_k: Option<usize>,
    /// what top-k ranks by
    #[prop(default = "mean")]
    pub score: Score,
    /// the band of colour frames (grey and YUV frames: their one band or luma plane)
    #[prop(default = "luma")]
    pub band: BandName,
    /// `backend`, `threads`.
    #[prop(flatten)]
    pub compute: BackendProps,
    /// the GPU of the CUDA backend
    #[prop(default = 0, range = ..=octopipe_core::stage::limits::MAX_DEVICE)]
    pub device: usize,
    /// pixels per block of work (a tile gets one block per this many of its pixels)
    #[prop(default = super::DEFAULT_BLOCK_PIXELS, range = 32..=16777216)]
    pub block_pixels: u32,
    /// downlink rate for the report's downlink times (megabits per second)
    #[prop(default = 2, positive)]
    pub downlink_mbps: f64,
}

impl TileStatsConfig {
    /// The settings of `props` with the parsed `keep` rule.
    pub(crate) fn from_props(props: TileStatsProps, keep: Option<Rule>) -> Self {
        TileStatsConfig {
            scale: props.scale,
            offset: props.offset,
            level: props.level,
            keep,
            top_k: props.top_k,
            score: match props.score {
                Score::Mean => Property::Mean,
                Score::Std => Property::Std,
                Score::Min => Property::Min,
                Score::Max => Property::Max,
                Score::Above => Property::Above,
                Score::Pixels => Property::Pixels,
            },
            band: props.band,
            backend: props.compute.backend,
            threads: props.compute.threads,
            device: props.device,
            block_pixels: props.block_pixels,
            downlink_mbps: props.downlink_mbps,
        }
    }
}

/// [`TileStatsProps`], then the `keep` rule parsed.
pub(super) fn tilestats_config(p: &Props) -> Result<Box<dyn Element>, DescribeError> {
    let props = TileStatsProps::from_props(p)?;
    let keep = match &props.keep {
        Some(text) => Some(Rule::parse(text).map_err(|e| {
            p.error_in(
                "keep",
                e.column - 1..e.column - 1 + e.len,
                format!(
                    "tilestats: keep: {} (column {} of the rule)",
                    e.message, e.column
                ),
            )
        })?),
        None => None,
    };
    Ok(Box::new(TileStatsConfig::from_props(props, keep)))
}

impl Default for TileStatsConfig {
    /// Each property's declared default ([`TileStatsProps`]).
    fn default() -> Self {
        TileStatsConfig::from_props(TileStatsProps::default(), None)
    }
}
