//! A stage's properties declared once, as a struct ([`Properties`]).

use super::access::Props;
use super::spec::PropSpec;
use crate::description::DescribeError;

/// A stage's properties declared once, as a struct: `#[derive(Properties)]` (re-exported here)
/// makes the table, the parsing and `Default` from its fields, their types, doc comments and
/// `#[prop(...)]` attributes (see the derive's crate, `octopipe-props-derive`):
///
/// ```
/// use octopipe_core::stage::{PropChoice, Properties};
///
/// /// How a tile is fitted.
/// #[derive(Debug, Clone, Copy, PartialEq, PropChoice)]
/// pub enum Fit {
///     /// Stretched.
///     Stretch,
///     /// Letterboxed.
///     Letterbox,
/// }
///
/// /// The `fit` stage's properties.
/// #[derive(Debug, Properties)]
/// pub struct FitProps {
///     /// the .onnx model
///     #[prop(required)]
///     pub model: std::path::PathBuf,
///     /// fraction of a tile shared with its neighbours
///     #[prop(default = 0.2, range = 0.0..=0.9)]
///     pub overlap: f64,
///     /// how a tile is fitted to the input
///     #[prop(default = "stretch")]
///     pub fit: Fit,
///     /// tile size (unset: the whole frame)
///     pub tiles: Option<(u32, u32)>,
/// }
///
/// let names: Vec<_> = FitProps::PROPS.iter().map(|p| p.name).collect();
/// assert_eq!(names, ["model", "overlap", "fit", "tiles"]);
/// assert_eq!(FitProps::PROPS[2].ty.name(), "stretch|letterbox");
/// assert_eq!(FitProps::default().overlap, 0.2);
/// ```
///
/// A `StageDecl`'s `props` is `FitProps::PROPS`, its `make` starts with
/// `FitProps::from_props(p)?`; checks across properties follow there.
pub trait Properties: Sized {
    /// The properties, in the order of the fields (a flattened block's where it stands).
    const PROPS: &'static [PropSpec];
    /// The values of checked properties ([`Props::check`]), each left out at its default.
    fn from_props(p: &Props<'_>) -> Result<Self, DescribeError>;
}
