//! Integration tests, one binary: the description language: parsing, building, properties, the command line, bad input, GPUs.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod bounds_props;
mod cli;
mod describe;
mod devices;
mod docs;
mod hostile_numbers;
mod new_payload;
mod new_stage;
mod properties;
