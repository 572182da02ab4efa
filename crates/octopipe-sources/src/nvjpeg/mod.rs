//! nvJPEG: an image sequence's JPEG files decoded on the GPU into device memory
//! (`images decoder=nvjpeg`), read in place by the CUDA preprocess kernel.
//!
//! One decoder per GPU serves every stream of the process that decodes there: each stream hands
//! it the next file's bytes, and it decodes what has come in from all of them in one batched
//! call (`nvjpegDecodeBatched`) on the GPU's JPEG engines where it has them (A100, H100, L4:
//! nvJPEG's hardware backend), on its cores otherwise. The planes come out as they are coded (Y,
//! Cb, Cr at 4:2:0), so the frame is I420 of JPEG colorimetry and the crop kernel does libjpeg's
//! own chroma upsampling and colour conversion, as for CPU-decoded JPEG. What the batched
//! decoder does not take (progressive, grey, CMYK, 4:2:2/4:4:4, a damaged file) is decoded on
//! the CPU instead, file by file, and counted per stream in the report.

mod cpu;
mod decoder;
mod error;
mod ffi;
mod header;
mod route;

pub(crate) use decoder::{available, NvjpegDecoder};
pub use error::NvjpegError;
pub(crate) use route::JpegRoute;
