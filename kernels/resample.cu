// Strategy C ("Octopus", one CUDA block per BlockMeta entry) for the settings the bilinear fast path
// of octopus.cu does not cover: area-weighted (antialiased) downscaling, as OpenCV INTER_AREA, and
// letterbox (aspect-preserving resize into the output, centred, padded), with either filter.
//
// Reference: src/preprocess/cpu.rs (`area_taps`, `run_pixels_general`). The tap tables are computed
// in f64 exactly as the CPU (and OpenCV) compute them, and every float operation is rounded as the
// CPU rounds it (no FMA contraction), so the two backends agree bit for bit.
//
// Blocks for area mode come from CropBatch::build_blocks_weighted: a block of a heavily downscaled
// crop covers fewer output pixels, so that blocks read balanced numbers of source pixels.
#include "common.cuh"

#define RESAMPLE_MAX_THREADS 256
#ifndef RESAMPLE_MIN_BLOCKS
#define RESAMPLE_MIN_BLOCKS 4
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

template <int FMT, bool AREA, typename OUT>
__device__ __forceinline__ void resample(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                         const CropMeta* __restrict__ crops, const BlockMeta* __restrict__ blocks,
                                         u32 tile_pixels, Norm n, u32 letterbox, float pad, OUT* __restrict__ out) {
    const BlockMeta b = blocks[blockIdx.x];
    const CropMeta c = crops[b.crop];
    const FrameDesc& f = frames[c.frame];
    const u32 npix = c.out_w * c.out_h;
    const u32 p0 = b.tile_begin * tile_pixels;
    const u32 p1 = min(b.tile_end * tile_pixels, npix);
    u32 offx = 0, offy = 0, nw = c.out_w, nh = c.out_h;
    if (letterbox) letterbox_rect(c.w, c.h, c.out_w, c.out_h, offx, offy, nw, nh);
    const bool boxed = c.w >= nw && c.h >= nh;
    // Per block: OpenCV's inv_scale = dsize / ssize and scale = 1 / inv_scale (f64); bilinear scales (f32).
    const double invx = __ddiv_rn((double)nw, (double)c.w), invy = __ddiv_rn((double)nh, (double)c.h);
    const double scx = __ddiv_rn(1.0, invx), scy = __ddiv_rn(1.0, invy);
    const float sx = __fdiv_rn((float)c.w, (float)nw), sy = __fdiv_rn((float)c.h, (float)nh);
    for (u32 p = p0 + threadIdx.x; p < p1; p += blockDim.x) {
        const u32 oy = p / c.out_w;
        const u32 ox = p - oy * c.out_w;
        float rgb[3];
        if (ox < offx || ox >= offx + nw || oy < offy || oy >= offy + nh) {
            rgb[0] = rgb[1] = rgb[2] = pad;
        } else if (AREA) {
            const u32 ix = ox - offx, iy = oy - offy;
            const AreaTaps xt = area_taps(ix, c.w, invx, scx, boxed);
            const AreaTaps yt = area_taps(iy, c.h, invy, scy, boxed);
            for (u32 ky = 0; ky < yt.n; ++ky) {
                const u32 y = min(yt.i0 + ky, c.h - 1);
                const float wy = tap_weight(yt, ky);
                float h[3] = {0.0f, 0.0f, 0.0f};
                for (u32 kx = 0; kx < xt.n; ++kx) {
                    const u32 x = min(xt.i0 + kx, c.w - 1);
                    const float wx = tap_weight(xt, kx);
                    float v[3];
                    sample_rgb<FMT>(arena, f, c.x + x, c.y + y, v[0], v[1], v[2]);
#pragma unroll
                    for (int k = 0; k < 3; ++k) h[k] = __fadd_rn(h[k], __fmul_rn(v[k], wx));
                }
#pragma unroll
                for (int k = 0; k < 3; ++k) rgb[k] = ky == 0 ? __fmul_rn(wy, h[k]) : __fadd_rn(rgb[k], __fmul_rn(wy, h[k]));
            }
        } else {
            const u32 ix = ox - offx, iy = oy - offy;
            u32 x0, x1, y0, y1;
            float ax, ay;
            linear_taps_s(ix, c.w, sx, x0, x1, ax);
            linear_taps_s(iy, c.h, sy, y0, y1, ay);
            float v[4][3];
            sample_rgb<FMT>(arena, f, c.x + x0, c.y + y0, v[0][0], v[0][1], v[0][2]);
            sample_rgb<FMT>(arena, f, c.x + x1, c.y + y0, v[1][0], v[1][1], v[1][2]);
            sample_rgb<FMT>(arena, f, c.x + x0, c.y + y1, v[2][0], v[2][1], v[2][2]);
            sample_rgb<FMT>(arena, f, c.x + x1, c.y + y1, v[3][0], v[3][1], v[3][2]);
            blend(v, ax, ay, rgb);
        }
        store_pixel<OUT>(c, p, rgb, n, out);
    }
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
