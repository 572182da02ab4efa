//! A workload as the GPU rows see it, and the frame and crop helpers they share.

use octopipe_stages::batch::{CropBatch, CropMeta};
use octopipe_stages::preprocess::cuda::meta::Norm;
use octopipe_stages::preprocess::cuda::HostFrame;

/// One workload as the strategy rows see it: the frames (in pinned memory), the crops, and the
/// strategy C settings for its size.
#[derive(Clone, Copy)]
pub(super) struct GpuInput<'a> {
    pub(super) frames: &'a [HostFrame<'a>],
    pub(super) crops: &'a [CropMeta],
    pub(super) norm: Norm,
    pub(super) out_len: usize,
    pub(super) tile: u32,
    pub(super) per_block: u32,
    pub(super) threads: u32,
    /// Source bytes the crops read (for the bytes-moved column).
    pub(super) read_bytes: u64,
}

/// Source bytes the crops of `batch` read: luma plus half as much chroma for YUV frames, else
/// the packed pixels.
pub(super) fn read_bytes(batch: &CropBatch) -> u64 {
    batch
        .crops
        .iter()
        .map(|c| {
            let f = &batch.frames[c.frame as usize].layout;
            let px = c.w as u64 * c.h as u64;
            if f.format.is_yuv() {
                px * 3 / 2
            } else {
                px * f.format.packed_bytes() as u64
            }
        })
        .sum()
}

/// `crops` split per frame (of `n`), each frame's crops renumbered to frame 0 with output offsets
/// from 0, and each frame's output length.
pub(super) fn per_frame_crops(n: usize, crops: &[CropMeta]) -> (Vec<Vec<CropMeta>>, Vec<usize>) {
    let per: Vec<Vec<CropMeta>> = (0..n)
        .map(|f| {
            let mine: Vec<CropMeta> = crops
                .iter()
                .filter(|c| c.frame as usize == f)
                .copied()
                .collect();
            let base = mine.first().map(|c| c.out_offset).unwrap_or(0);
            mine.into_iter()
                .map(|c| CropMeta {
                    frame: 0,
                    out_offset: c.out_offset - base,
                    ..c
                })
                .collect()
        })
        .collect();
    let lens = per
        .iter()
        .map(|c| {
            c.last()
                .map(|c| (c.out_offset + c.out_pixels() * 3) as usize)
                .unwrap_or(0)
        })
        .collect();
    (per, lens)
}

/// A copy of `f` (its stream, sequence number, layout and pixels) in an unpooled buffer.
pub(super) fn clone_frame(f: &octopipe_core::frame::Frame) -> octopipe_core::frame::Frame {
    octopipe_core::frame::Frame::new(
        f.stream,
        f.seq,
        "bench",
        f.layout,
        f.colorimetry,
        octopipe_core::frame::PooledBuf::unpooled(f.data().unwrap_or(&[]).to_vec()),
    )
}
