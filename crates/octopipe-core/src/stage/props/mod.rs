//! Properties: their declared type, default, range and doc, and typed access to a stage's values.
//!
//! A value is checked against its [`PropType`] before the stage's constructor sees it, and a
//! property left out takes its declared default (when the default is a value of its type; `-`
//! means none, `auto` means the stage derives it), so the declaration is the one place a default
//! lives.

mod access;
mod concat;
mod declare;
mod parse;
mod shown;
mod spec;
mod value;

pub use access::{Props, StageDecl};
pub use concat::{props_concat, props_len};
pub use declare::Properties;
pub use parse::{parse_bool, BOOL_SPELLINGS};
pub use shown::{Shown, ShownText};
pub use spec::{PropSpec, PropType, NAME_PROP};
pub use value::{prop_default, ChoiceError, PropChoice, PropValue};
