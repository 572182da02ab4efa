//! The CPU backend: the reference semantics, multi-threaded over the batch's blocks.
//!
//! ```text
//! ... ! preprocess backend=cpu size=64x64 ! ...
//! ```

mod backend;
mod general;
mod linear;
mod out;
mod rgb;
mod sampler;

pub use backend::CpuBackend;
pub use general::{area_taps, AreaTaps};
pub use rgb::{frame_to_rgb, rect_to_rgb};
