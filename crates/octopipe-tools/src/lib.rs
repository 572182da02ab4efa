//! # octopipe-tools
//!
//! The `octopipe` command line's own commands, beside the library an embedder builds: the
//! benchmarks and the GPU auto-tuner (`bench`: `octopipe bench ...`, `octopipe probe`; the
//! cargo feature `bench`), the scoring of a run's output against ground truth ([`eval`]:
//! `octopipe eval ...`) and the panning test clip ([`pan`]: `octopipe pan`). The `octopipe`
//! binary (the facade's `cli` feature) and the facade's tests use it; it depends on the member
//! crates directly.

#![warn(missing_docs)]

#[cfg(feature = "bench")]
pub mod bench;
pub mod eval;
pub mod pan;
