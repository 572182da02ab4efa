//! What every element shares: its properties from the stages' tables ([`props`]), the frame made
//! of a buffer ([`frame`]), the metadata contract ([`meta`]), the stages opened outside a
//! pipeline and driven one frame at a time ([`stages`]), and the BaseTransform every element is
//! ([`element`]: the [`Work`] an element does, and [`element::OctoElement`], the trait whose
//! default methods each element's vfuncs call; its buffers: [`flow`]), the stages several
//! elements share, on the core's stage driver ([`shared`]), and the buffers an element keeps in
//! flight in a shared stage ([`flight`]); with the `analytics` feature, the objects as a
//! `GstAnalyticsRelationMeta` too (`analytics`).

#[cfg(feature = "analytics")]
pub(crate) mod analytics;
pub(crate) mod cuda;
pub(crate) mod element;
mod error;
pub(crate) mod flight;
pub(crate) mod flow;
pub(crate) mod frame;
pub(crate) mod meta;
pub(crate) mod own;
pub(crate) mod props;
pub(crate) mod report;
pub(crate) mod shared;
pub(crate) mod stages;
mod work;

pub(crate) use element::TIMING;
pub use error::PluginError;
pub(crate) use props::Values;
pub(crate) use work::Work;
