// Baseline strategies, each producing the same output as strategy C (octopus.cu):
//   A  lut_*:     one thread per output pixel of the batch; a per-pixel table names its crop.
//   B  bsearch_*: one thread per output pixel; binary search over the crops' first-pixel prefix sums.
//   D  percrop_*: one launch per crop.
//   E  pad_*:     gather every crop (as RGB bytes) into a buffer padded to the largest crop, then
//                 resize the padded stack.
#include "common.cuh"

// A: `lut[g]` is the crop of batch pixel g; `first[crop]` its first batch pixel.
template <int FMT>
__device__ __forceinline__ void lut_body(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                         const CropMeta* __restrict__ crops, const u32* __restrict__ lut,
                                         const u32* __restrict__ first, u32 total, Norm n, float* __restrict__ out) {
    u32 g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= total) return;
    u32 ci = lut[g];
    const CropMeta c = crops[ci];
    bilinear_pixel<FMT, float>(arena, frames[c.frame], c, g - first[ci], n, out);
}

// B: `first` has ncrops + 1 entries (prefix sums of output pixels).
template <int FMT>
__device__ __forceinline__ void bsearch_body(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                             const CropMeta* __restrict__ crops, const u32* __restrict__ first,
                                             u32 ncrops, Norm n, float* __restrict__ out) {
    u32 g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= first[ncrops]) return;
    u32 lo = 0, hi = ncrops;  // invariant: first[lo] <= g < first[hi]
    while (hi - lo > 1) {
        u32 mid = (lo + hi) / 2;
        if (first[mid] <= g) lo = mid; else hi = mid;
    }
    const CropMeta c = crops[lo];
    bilinear_pixel<FMT, float>(arena, frames[c.frame], c, g - first[lo], n, out);
}

// D: crop `ci` only.
template <int FMT>
__device__ __forceinline__ void percrop_body(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                             const CropMeta* __restrict__ crops, u32 ci, Norm n,
                                             float* __restrict__ out) {
    const CropMeta c = crops[ci];
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= c.out_w * c.out_h) return;
    bilinear_pixel<FMT, float>(arena, frames[c.frame], c, p, n, out);
}

// E, step 1: crop `blockIdx.y` converted to RGB bytes into slot `blockIdx.y` of `pad`
// (pad_w x pad_h pixels of 3 bytes per slot).
template <int FMT>
__device__ __forceinline__ void pad_gather_body(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                                const CropMeta* __restrict__ crops, u32 pad_w, u32 pad_h,
                                                u8* __restrict__ pad) {
    const CropMeta c = crops[blockIdx.y];
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= c.w * c.h) return;
    u32 y = p / c.w, x = p - y * c.w;
    float r, g, b;
    sample_rgb<FMT>(arena, frames[c.frame], c.x + x, c.y + y, r, g, b);
    u8* o = pad + ((u64)blockIdx.y * pad_h * pad_w + (u64)y * pad_w + x) * 3;
    o[0] = (u8)__float2int_rn(r);
    o[1] = (u8)__float2int_rn(g);
    o[2] = (u8)__float2int_rn(b);
}

#define BASELINES(SUFFIX, FMT)                                                                                   \
    extern "C" __global__ void lut_bilinear_##SUFFIX##_f32(const u8* __restrict__ arena,                        \
                                                           const FrameDesc* __restrict__ frames,                \
                                                           const CropMeta* __restrict__ crops,                  \
                                                           const u32* __restrict__ lut,                         \
                                                           const u32* __restrict__ first, u32 total, Norm n,    \
                                                           float* __restrict__ out) {                           \
        lut_body<FMT>(arena, frames, crops, lut, first, total, n, out);                                         \
    }                                                                                                           \
    extern "C" __global__ void bsearch_bilinear_##SUFFIX##_f32(const u8* __restrict__ arena,                    \
                                                               const FrameDesc* __restrict__ frames,            \
                                                               const CropMeta* __restrict__ crops,              \
                                                               const u32* __restrict__ first, u32 ncrops,       \
                                                               Norm n, float* __restrict__ out) {               \
        bsearch_body<FMT>(arena, frames, crops, first, ncrops, n, out);                                         \
    }                                                                                                           \
    extern "C" __global__ void percrop_bilinear_##SUFFIX##_f32(const u8* __restrict__ arena,                    \
                                                               const FrameDesc* __restrict__ frames,            \
                                                               const CropMeta* __restrict__ crops, u32 ci,      \
                                                               Norm n, float* __restrict__ out) {               \
        percrop_body<FMT>(arena, frames, crops, ci, n, out);                                                    \
    }                                                                                                           \
    extern "C" __global__ void pad_gather_##SUFFIX##_u8(const u8* __restrict__ arena,                           \
                                                        const FrameDesc* __restrict__ frames,                   \
                                                        const CropMeta* __restrict__ crops, u32 pad_w,          \
                                                        u32 pad_h, u8* __restrict__ pad) {                      \
        pad_gather_body<FMT>(arena, frames, crops, pad_w, pad_h, pad);                                          \
    }

BASELINES(i420, FMT_I420)
BASELINES(nv12, FMT_NV12)
BASELINES(packed, FMT_PACKED)

// E, step 2: resize every slot of the padded RGB stack; grid (pixels of the largest output / block, crops).
// The padded stack is read as a packed RGB "frame" per slot.
extern "C" __global__ void pad_resize_rgb_f32(const u8* __restrict__ pad, const CropMeta* __restrict__ crops,
                                              u32 pad_w, u32 pad_h, Norm n, float* __restrict__ out) {
    CropMeta c = crops[blockIdx.y];
    u32 p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= c.out_w * c.out_h) return;
    FrameDesc f;
    f.plane[0] = (u64)blockIdx.y * pad_h * pad_w * 3;
    f.stride[0] = pad_w * 3;
    f.width = pad_w;
    f.height = pad_h;
    f.format = FMT_PACKED;
    f.bpp = 3;
    f.rgb[0] = 0; f.rgb[1] = 1; f.rgb[2] = 2;
    c.x = 0;
    c.y = 0;
    bilinear_pixel<FMT_PACKED, float>(pad, f, c, p, n, out);
}
