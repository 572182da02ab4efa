// Strategy C ("Octopus", one CUDA block per BlockMeta entry) for the settings the bilinear fast path
// of octopus.cu does not cover: area-weighted (antialiased) downscaling, as OpenCV INTER_AREA, and
// letterbox (aspect-preserving resize into the output, centred, padded), with either filter.
//
// Reference: src/preprocess/cpu/general.rs (`area_taps`, `run_pixels_general`). The tap tables are
// computed in f64 exactly as the CPU (and OpenCV) compute them, and every float operation is
// rounded as the CPU rounds it (no FMA contraction), so the two backends agree bit for bit.
//
// Blocks for area mode come from CropBatch::build_blocks_weighted: a block of a heavily downscaled
// crop covers fewer output pixels, so that blocks read balanced numbers of source pixels. A block
// whose source rows fit converts them to RGB once in shared memory ("staging", as octopus.cu).
#include "common.cuh"

#define RESAMPLE_MAX_THREADS 256
#ifndef RESAMPLE_MIN_BLOCKS
#define RESAMPLE_MIN_BLOCKS 4
#endif
// Source pixels a block may stage as float4 RGB (32 KiB, as octopus.cu).
#ifndef RESAMPLE_STAGE_PX
#define RESAMPLE_STAGE_PX 2048
#endif

// cpu::AreaTaps.
struct AreaTaps {
    u32 i0, n;
    float w_first, w_mid, w_last;
    bool lead, trail;
};

__device__ __forceinline__ float tap_weight(const AreaTaps& t, u32 k) {
    return (k == 0 && t.lead) ? t.w_first : ((k + 1 == t.n && t.trail) ? t.w_last : t.w_mid);
}

// cpu::area_taps with inv = out_len / len and scale = 1 / inv computed by the caller (f64, as OpenCV).
__device__ __forceinline__ AreaTaps area_taps(u32 o, u32 len, double inv, double scale, bool boxed) {
    AreaTaps t;
    const long long last = (long long)len - 1;
    if (boxed) {
        double fsx1 = __dmul_rn((double)o, scale);
        double fsx2 = __dadd_rn(fsx1, scale);
        double cell = fmin(scale, __dsub_rn((double)len, fsx1));
        long long sx2 = min((long long)floor(fsx2), last);
        long long sx1 = min((long long)ceil(fsx1), sx2);
        double lead_part = __dsub_rn((double)sx1, fsx1);
        double trail_part = __dsub_rn(fsx2, (double)sx2);
        t.lead = lead_part > 1e-3;
        t.trail = trail_part > 1e-3;
        long long i0 = t.lead ? sx1 - 1 : sx1;
        long long end = t.trail ? sx2 : sx2 - 1;
        t.i0 = (u32)i0;
        t.n = (u32)max(end - i0 + 1, 1LL);
        t.w_first = __double2float_rn(__ddiv_rn(lead_part, cell));
        t.w_mid = __double2float_rn(__ddiv_rn(1.0, cell));
        t.w_last = __double2float_rn(__ddiv_rn(fmin(fmin(trail_part, 1.0), cell), cell));
    } else {
        long long sx = (long long)floor(__dmul_rn((double)o, scale));
        float fx = __double2float_rn(__dsub_rn((double)(o + 1), __dmul_rn((double)(sx + 1), inv)));
        fx = fx <= 0.0f ? 0.0f : __fsub_rn(fx, floorf(fx));
        if (sx >= last) { sx = last; fx = 0.0f; }
        t.i0 = (u32)sx;
        t.n = 2;
        t.w_first = __fsub_rn(1.0f, fx);
        t.w_mid = 0.0f;
        t.w_last = fx;
        t.lead = true;
        t.trail = true;
    }
    return t;
}

// preprocess::letterbox_rect (integers: the same on both backends).
__device__ __forceinline__ void letterbox_rect(u32 w, u32 h, u32 ow, u32 oh, u32& ox, u32& oy, u32& nw, u32& nh) {
    u64 W = w, H = h, OW = ow, OH = oh;
    u64 a, b;
    if (OW * H <= OH * W) {
        a = OW;
        b = (2 * H * OW + W) / (2 * W);
        b = b < 1 ? 1 : (b > OH ? OH : b);
    } else {
        a = (2 * W * OH + H) / (2 * H);
        a = a < 1 ? 1 : (a > OW ? OW : a);
        b = OH;
    }
    nw = (u32)a;
    nh = (u32)b;
    ox = (ow - nw) / 2;
    oy = (oh - nh) / 2;
}

// RGB of crop pixel (x, y): from the staged rows (sy0 onwards, float4 per pixel) or the frame.
template <int FMT, bool STAGED>
__device__ __forceinline__ void fetch(const float4* stage, u32 sy0, const u8* __restrict__ arena, const FrameDesc& f,
                                      const CropMeta& c, u32 x, u32 y, float v[3]) {
    if (STAGED) {
        const float4 s = stage[(y - sy0) * c.w + x];
        v[0] = s.x;
        v[1] = s.y;
        v[2] = s.z;
    } else {
        sample_rgb<FMT>(arena, f, c.x + x, c.y + y, v[0], v[1], v[2]);
    }
}

// The source rows r0..=r1 that content row iy reads.
template <bool AREA>
__device__ __forceinline__ void src_rows(u32 iy, u32 h, double invy, double scy, float sy, bool boxed, u32& r0,
                                         u32& r1) {
    if (AREA) {
        const AreaTaps t = area_taps(iy, h, invy, scy, boxed);
        r0 = min(t.i0, h - 1);
        r1 = min(t.i0 + t.n - 1, h - 1);
    } else {
        float a;
        linear_taps_s(iy, h, sy, r0, r1, a);
    }
}

// Per-crop scales and letterbox placement, as the CPU computes them.
struct Geometry {
    u32 offx, offy, nw, nh;
    bool boxed;
    double invx, invy, scx, scy;  // OpenCV's inv_scale = dsize / ssize and scale = 1 / inv_scale (f64)
    float sx, sy;                 // bilinear scales (f32)
};

template <int FMT, bool AREA, bool STAGED, typename OUT>
__device__ __forceinline__ void resample_pixels(const float4* stage, u32 sy0, const u8* __restrict__ arena,
                                                const FrameDesc& f, const CropMeta& c, const Geometry& g, u32 p0,
                                                u32 p1, const Norm& n, float pad, OUT* __restrict__ out) {
    for (u32 p = p0 + threadIdx.x; p < p1; p += blockDim.x) {
        const u32 oy = p / c.out_w;
        const u32 ox = p - oy * c.out_w;
        float rgb[3];
        if (ox < g.offx || ox >= g.offx + g.nw || oy < g.offy || oy >= g.offy + g.nh) {
            rgb[0] = rgb[1] = rgb[2] = pad;
        } else if (AREA) {
            const u32 ix = ox - g.offx, iy = oy - g.offy;
            const AreaTaps xt = area_taps(ix, c.w, g.invx, g.scx, g.boxed);
            const AreaTaps yt = area_taps(iy, c.h, g.invy, g.scy, g.boxed);
            for (u32 ky = 0; ky < yt.n; ++ky) {
                const u32 y = min(yt.i0 + ky, c.h - 1);
                const float wy = tap_weight(yt, ky);
                float h[3] = {0.0f, 0.0f, 0.0f};
                for (u32 kx = 0; kx < xt.n; ++kx) {
                    const u32 x = min(xt.i0 + kx, c.w - 1);
                    const float wx = tap_weight(xt, kx);
                    float v[3];
                    fetch<FMT, STAGED>(stage, sy0, arena, f, c, x, y, v);
#pragma unroll
                    for (int k = 0; k < 3; ++k) h[k] = __fadd_rn(h[k], __fmul_rn(v[k], wx));
                }
#pragma unroll
                for (int k = 0; k < 3; ++k) rgb[k] = ky == 0 ? __fmul_rn(wy, h[k]) : __fadd_rn(rgb[k], __fmul_rn(wy, h[k]));
            }
        } else {
            const u32 ix = ox - g.offx, iy = oy - g.offy;
            u32 x0, x1, y0, y1;
            float ax, ay;
            linear_taps_s(ix, c.w, g.sx, x0, x1, ax);
            linear_taps_s(iy, c.h, g.sy, y0, y1, ay);
            float v[4][3];
            fetch<FMT, STAGED>(stage, sy0, arena, f, c, x0, y0, v[0]);
            fetch<FMT, STAGED>(stage, sy0, arena, f, c, x1, y0, v[1]);
            fetch<FMT, STAGED>(stage, sy0, arena, f, c, x0, y1, v[2]);
            fetch<FMT, STAGED>(stage, sy0, arena, f, c, x1, y1, v[3]);
            blend(v, ax, ay, rgb);
        }
        store_pixel<OUT>(c, p, rgb, n, out);
    }
}

// One BlockMeta entry: the block first converts the source rows its outputs read to RGB once, in
// shared memory, when they fit RESAMPLE_STAGE_PX and that converts fewer pixels than 4 per output
// (upscaled and mildly downscaled crops); otherwise it samples the frame per tap. Both paths
// compute the same values.
template <int FMT, bool AREA, typename OUT>
__device__ __forceinline__ void resample(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                         const CropMeta* __restrict__ crops, const BlockMeta* __restrict__ blocks,
                                         u32 tile_pixels, Norm n, u32 letterbox, float pad, OUT* __restrict__ out) {
    __shared__ float4 stage[RESAMPLE_STAGE_PX];
    const BlockMeta b = blocks[blockIdx.x];
    const CropMeta c = crops[b.crop];
    const FrameDesc& f = frames[c.frame];
    u32 p0, p1;
    block_pixels(b, c, tile_pixels, p0, p1);
    if (p0 >= p1) return;
    Geometry g;
    g.offx = 0;
    g.offy = 0;
    g.nw = c.out_w;
    g.nh = c.out_h;
    if (letterbox) letterbox_rect(c.w, c.h, c.out_w, c.out_h, g.offx, g.offy, g.nw, g.nh);
    g.boxed = c.w >= g.nw && c.h >= g.nh;
    g.invx = __ddiv_rn((double)g.nw, (double)c.w);
    g.invy = __ddiv_rn((double)g.nh, (double)c.h);
    g.scx = __ddiv_rn(1.0, g.invx);
    g.scy = __ddiv_rn(1.0, g.invy);
    g.sx = __fdiv_rn((float)c.w, (float)g.nw);
    g.sy = __fdiv_rn((float)c.h, (float)g.nh);
    // Content rows (outside the letterbox pad) of the block's output rows, and the source rows they read.
    const u32 cy0 = max(p0 / c.out_w, g.offy), cy1 = min((p1 - 1) / c.out_w, g.offy + g.nh - 1);
    if (cy0 <= cy1) {
        u32 sy0, sy1, t;
        src_rows<AREA>(cy0 - g.offy, c.h, g.invy, g.scy, g.sy, g.boxed, sy0, t);
        src_rows<AREA>(cy1 - g.offy, c.h, g.invy, g.scy, g.sy, g.boxed, t, sy1);
        const u32 spx = (sy1 - sy0 + 1) * c.w;
        if (spx <= RESAMPLE_STAGE_PX && spx < 4 * (p1 - p0)) {
            stage_rows<FMT>(stage, arena, f, c, sy0, spx);
            resample_pixels<FMT, AREA, true, OUT>(stage, sy0, arena, f, c, g, p0, p1, n, pad, out);
            return;
        }
    }
    resample_pixels<FMT, AREA, false, OUT>(stage, 0, arena, f, c, g, p0, p1, n, pad, out);
}

#define RESAMPLE(NAME, FMT, AREA, OUT)                                                                          \
    extern "C" __global__ void __launch_bounds__(RESAMPLE_MAX_THREADS, RESAMPLE_MIN_BLOCKS)                     \
        NAME(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames, const CropMeta* __restrict__ crops, \
             const BlockMeta* __restrict__ blocks, u32 tile_pixels, Norm n, u32 letterbox, float pad,          \
             OUT* __restrict__ out) {                                                                           \
        resample<FMT, AREA, OUT>(arena, frames, crops, blocks, tile_pixels, n, letterbox, pad, out);            \
    }

RESAMPLE(resample_bilinear_i420_f32, FMT_I420, false, float)
RESAMPLE(resample_bilinear_nv12_f32, FMT_NV12, false, float)
RESAMPLE(resample_bilinear_packed_f32, FMT_PACKED, false, float)
RESAMPLE(resample_bilinear_i420_f16, FMT_I420, false, u16)
RESAMPLE(resample_bilinear_nv12_f16, FMT_NV12, false, u16)
RESAMPLE(resample_bilinear_packed_f16, FMT_PACKED, false, u16)
RESAMPLE(resample_area_i420_f32, FMT_I420, true, float)
RESAMPLE(resample_area_nv12_f32, FMT_NV12, true, float)
RESAMPLE(resample_area_packed_f32, FMT_PACKED, true, float)
RESAMPLE(resample_area_i420_f16, FMT_I420, true, u16)
RESAMPLE(resample_area_nv12_f16, FMT_NV12, true, u16)
RESAMPLE(resample_area_packed_f16, FMT_PACKED, true, u16)
