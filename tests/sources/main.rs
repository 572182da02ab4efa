//! Integration tests, one binary: sources: files, images, live and RTSP streams, NVDEC, timing, isolation, shutdown.

#[path = "../common/mod.rs"]
mod common;

mod big_frames;
mod by_time;
mod damaged;
mod fleet;
mod isolation;
mod jpeg_fidelity;
mod live;
mod nvdec;
mod nvjpeg;
mod resolution;
mod shutdown;
mod source;
mod workers;
