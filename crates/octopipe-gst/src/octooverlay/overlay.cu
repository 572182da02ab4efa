// octooverlay on NV12 in CUDA memory (octooverlay/gpu.rs launches these): the renderer's
// rectangles as octopipe_observe::RecordingCanvas records them (clipped to the frame, the colour
// already the frame's Y, U, V), filled as FrameCanvas fills NV12 in system memory, byte for byte:
// the luma pixels x0..x1, y0..y1 and the chroma samples under them at 2x2 (YuvRect::chroma).
//
// The renderer draws in order, a later rectangle over an earlier one (a caption over another
// object's box, a glyph over its caption's background), and blocks run in no order. So each luma
// pixel and each chroma sample is first claimed by the greatest index of the rectangles covering
// it (`overlay_claim_nv12`, atomicMax on an owner plane the launcher zeroes per frame), then
// written by that rectangle only (`overlay_paint_nv12`, launched after it on the same stream):
// the last one drawn wins, as on the CPU. One rectangle per block (grid-stride over the list),
// the block's threads over its pixels.
#include "common.cuh"

// One recorded rectangle as the launcher packs it (five u32): luma pixels x0..x1, y0..y1, and
// its Y, U and V bytes in bits 0-7, 8-15 and 16-23 of `yuv`.
struct OverlayRect {
    u32 x0, y0, x1, y1, yuv;
};

// Calls `luma(x, y)` for each luma pixel of `r` (x0..x1, y0..y1) and then `chroma(x, y)` for each
// chroma sample under them (YuvRect::chroma: columns x0/2 .. (x1-1)/2, rows y0/2 .. (y1-1)/2),
// the block's threads spread over each.
template <typename Luma, typename Chroma>
__device__ __forceinline__ void cover(const OverlayRect& r, Luma luma, Chroma chroma) {
    const u32 w = r.x1 - r.x0;
    const u64 pixels = (u64)w * (r.y1 - r.y0);
    for (u64 p = threadIdx.x; p < pixels; p += blockDim.x) {
        luma(r.x0 + (u32)(p % w), r.y0 + (u32)(p / w));
    }
    const u32 cx0 = r.x0 / 2, cy0 = r.y0 / 2;
    const u32 cw = (r.x1 - 1) / 2 + 1 - cx0, chh = (r.y1 - 1) / 2 + 1 - cy0;
    const u64 samples = (u64)cw * chh;
    for (u64 p = threadIdx.x; p < samples; p += blockDim.x) {
        chroma(cx0 + (u32)(p % cw), cy0 + (u32)(p / cw));
    }
}

// Pass 1: each pixel and chroma sample of rectangle i is claimed with i + 1 (0: no rectangle);
// the greatest claim stays. `owner_y` is `width` entries a row, `owner_uv` `cw` (chroma columns).
extern "C" __global__ void overlay_claim_nv12(const OverlayRect* __restrict__ rects, u32 n, u32 width, u32 cw,
                                              u32* __restrict__ owner_y, u32* __restrict__ owner_uv) {
    for (u32 i = blockIdx.x; i < n; i += gridDim.x) {
        const u32 me = i + 1;
        cover(
            rects[i], [&](u32 x, u32 y) { atomicMax(&owner_y[(u64)y * width + x], me); },
            [&](u32 x, u32 y) { atomicMax(&owner_uv[(u64)y * cw + x], me); });
    }
}

// Pass 2: rectangle i writes its Y byte on the pixels it owns and its U, V pair on the chroma
// samples it owns; `luma` and `uv` are the frame's planes, rows `luma_pitch` and `uv_pitch`
// bytes apart.
extern "C" __global__ void overlay_paint_nv12(const OverlayRect* __restrict__ rects, u32 n, u32 width, u32 cw,
                                              const u32* __restrict__ owner_y, const u32* __restrict__ owner_uv,
                                              u8* __restrict__ luma, u32 luma_pitch, u8* __restrict__ uv,
                                              u32 uv_pitch) {
    for (u32 i = blockIdx.x; i < n; i += gridDim.x) {
        const OverlayRect r = rects[i];
        const u32 me = i + 1;
        const u8 yy = (u8)(r.yuv & 0xff), u = (u8)((r.yuv >> 8) & 0xff), v = (u8)((r.yuv >> 16) & 0xff);
        cover(
            r,
            [&](u32 x, u32 y) {
                if (owner_y[(u64)y * width + x] == me) luma[(u64)y * luma_pitch + x] = yy;
            },
            [&](u32 x, u32 y) {
                if (owner_uv[(u64)y * cw + x] == me) {
                    u8* q = uv + (u64)y * uv_pitch + 2 * (u64)x;
                    q[0] = u;
                    q[1] = v;
                }
            });
    }
}
