// Shared device code of the preprocess kernels: the metadata structs (mirrored by #[repr(C)] structs
// in crates/octopipe-stages/src/preprocess/cuda/meta.rs), the reference sampling semantics of
// crates/octopipe-stages/src/preprocess/cpu/ (sampler.rs, linear.rs), and the
// output writers. Every kernel family includes this header (the Rust side prepends it at compile time).
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Pixel formats, as template arguments.
#define FMT_I420 0
#define FMT_NV12 1
#define FMT_PACKED 2

// One frame's planes inside the frame arena.
struct FrameDesc {
    u64 plane[3];     // byte offset of each plane in the arena (absolute, frame base included)
    u32 stride[3];    // row stride in bytes of each plane
    u32 width;
    u32 height;
    u32 format;       // FMT_*
    u32 bpp;          // bytes per pixel of a packed format
    u32 rgb[3];       // byte index of R, G, B inside a packed pixel
    float y_off;      // YUV: luma offset
    float m[9];       // YUV: row-major 3x3 matrix, rgb = m * (Y - y_off, U - 128, V - 128)
    float x_shift;    // YUV: horizontal chroma siting shift (0.25 centred, 0 left)
    u32 jpeg;         // YUV: 1 for JPEG colorimetry, converted with libjpeg-turbo's integer arithmetic
};

// batch::CropMeta.
struct CropMeta {
    u32 frame, x, y, w, h, out_w, out_h, out_offset;
};

// batch::BlockMeta.
struct BlockMeta {
    u32 crop, tile_begin, tile_end;
};

// One plane rectangle of a crop for kernels/gather.cu: `rows` rows of `row_bytes` bytes, the first at
// device address `src` (page-locked host memory), rows `src_stride` apart, packed to arena byte `dst`.
struct GatherRect {
    u64 src;
    u64 dst;
    u32 src_stride;
    u32 row_bytes;
    u32 rows;
    u32 pad_;
};

// Output normalization: out[k] = v[src[k]] * a[k] + b[k], layout NCHW (nhwc = 0) or NHWC (nhwc = 1).
struct Norm {
    float a[3];
    float b[3];
    u32 bgr;    // 1: output channel 0 is blue
    u32 nhwc;
};

// OpenCV INTER_LINEAR taps with `scale = len / out_len` computed by the caller, exactly as
// cpu::linear_taps (no FMA contraction).
__device__ __forceinline__ void linear_taps_s(u32 o, u32 len, float scale, u32& i0, u32& i1, float& a) {
    float f = __fsub_rn(__fmul_rn(__fadd_rn((float)o, 0.5f), scale), 0.5f);
    float fl = floorf(f);
    a = __fsub_rn(f, fl);
    int i = (int)fl;
    int last = (int)len - 1;
    if (i < 0) { i = 0; a = 0.0f; }
    if (i >= last) { i = last; a = 0.0f; }
    i0 = (u32)i;
    i1 = (u32)min(i + 1, last);
}

// cpu::linear_taps.
__device__ __forceinline__ void linear_taps(u32 o, u32 len, u32 out_len, u32& i0, u32& i1, float& a) {
    linear_taps_s(o, len, __fdiv_rn((float)len, (float)out_len), i0, i1, a);
}

// cpu::chroma_taps.
__device__ __forceinline__ void chroma_taps(float pos, int len, int& i0, int& i1, float& a) {
    float fl = floorf(pos);
    int i = (int)fl;
    if (i < 0) { i0 = 0; i1 = 0; a = 0.0f; }
    else if (i >= len - 1) { i0 = len - 1; i1 = len - 1; a = 0.0f; }
    else { i0 = i; i1 = i + 1; a = __fsub_rn(pos, fl); }
}

__device__ __forceinline__ float lerp_ref(float p, float q, float a) {
    // p + (q - p) * a, rounded as the CPU rounds it.
    return __fadd_rn(p, __fmul_rn(__fsub_rn(q, p), a));
}

// JPEG frames (FrameDesc.jpeg): libjpeg-turbo's own integer decoding, as src/preprocess/jpeg.rs.
// The chroma samples luma column (or row) i takes: nearer (weight 3) and further (weight 1), clamped
// to a plane of len samples; a plane 2 samples wide or less is replicated instead (not fancy).
__device__ __forceinline__ void jpeg_taps(u32 i, int len, bool fancy, int& near, int& far) {
    near = (int)(i >> 1);
    far = !fancy ? near : (i & 1) ? min(near + 1, len - 1) : max(near - 1, 0);
}

// h2v2_fancy_upsample's chroma byte at luma column x: column sums 3 * nearer row + further row,
// then 3 * nearer column + further column with the bias 8 (even x) or 7 (odd x), shifted by 4.
__device__ __forceinline__ int jpeg_chroma(const u8* __restrict__ p, u32 step, u32 cs, int xn, int xf, int yn,
                                           int yf, u32 x) {
    const u32 rn = (u32)yn * cs, rf = (u32)yf * cs;
    int sn = 3 * (int)__ldg(p + rn + (u32)xn * step) + (int)__ldg(p + rf + (u32)xn * step);
    int sf = 3 * (int)__ldg(p + rn + (u32)xf * step) + (int)__ldg(p + rf + (u32)xf * step);
    return (3 * sn + sf + 8 - (int)(x & 1)) >> 4;
}

// ycc_rgb_convert with jdcolor.c's tables: SCALEBITS 16, ONE_HALF 32768, FIX(1.40200) = 91881,
// FIX(1.77200) = 116130, FIX(0.71414) = 46802, FIX(0.34414) = 22554; arithmetic shifts, clamped.
__device__ __forceinline__ void jpeg_rgb(int y, int cb, int cr, float& r, float& g, float& b) {
    cb -= 128;
    cr -= 128;
    r = (float)min(max(y + ((91881 * cr + 32768) >> 16), 0), 255);
    g = (float)min(max(y + ((-22554 * cb + 32768 - 46802 * cr) >> 16), 0), 255);
    b = (float)min(max(y + ((116130 * cb + 32768) >> 16), 0), 255);
}

// RGB (0..255) at frame pixel (x, y), as cpu::Sampler::rgb.
template <int FMT>
__device__ __forceinline__ void sample_rgb(const u8* __restrict__ arena, const FrameDesc& f, u32 x, u32 y,
                                           float& r, float& g, float& b) {
    if (FMT == FMT_PACKED) {
        const u8* p = arena + f.plane[0] + (u64)y * f.stride[0] + (u64)x * f.bpp;
        r = (float)__ldg(p + f.rgb[0]);
        g = (float)__ldg(p + f.rgb[1]);
        b = (float)__ldg(p + f.rgb[2]);
    } else {
        const u8 y8 = __ldg(arena + f.plane[0] + (u64)y * f.stride[0] + x);
        int cw = (int)((f.width + 1) / 2), ch = (int)((f.height + 1) / 2);
        const u8* up = arena + f.plane[1];
        const u8* vp = (FMT == FMT_I420) ? arena + f.plane[2] : arena + f.plane[1] + 1;
        const u32 step = (FMT == FMT_I420) ? 1 : 2;
        const u32 cs = f.stride[1];
        if (f.jpeg) {
            const bool fancy = cw > 2;
            int xn, xf, yn, yf;
            jpeg_taps(x, cw, fancy, xn, xf);
            jpeg_taps(y, ch, fancy, yn, yf);
            jpeg_rgb((int)y8, jpeg_chroma(up, step, cs, xn, xf, yn, yf, x), jpeg_chroma(vp, step, cs, xn, xf, yn, yf, x),
                     r, g, b);
            return;
        }
        float luma = __fsub_rn((float)y8, f.y_off);
        int x0, x1, y0, y1;
        float ax, ay;
        chroma_taps(__fsub_rn((float)x * 0.5f, f.x_shift), cw, x0, x1, ax);
        chroma_taps(__fsub_rn((float)y * 0.5f, 0.25f), ch, y0, y1, ay);
        u32 o00 = (u32)y0 * cs + (u32)x0 * step, o01 = (u32)y0 * cs + (u32)x1 * step;
        u32 o10 = (u32)y1 * cs + (u32)x0 * step, o11 = (u32)y1 * cs + (u32)x1 * step;
        float t, bo;
        t = lerp_ref((float)__ldg(up + o00), (float)__ldg(up + o01), ax);
        bo = lerp_ref((float)__ldg(up + o10), (float)__ldg(up + o11), ax);
        float cb = __fsub_rn(lerp_ref(t, bo, ay), 128.0f);
        t = lerp_ref((float)__ldg(vp + o00), (float)__ldg(vp + o01), ax);
        bo = lerp_ref((float)__ldg(vp + o10), (float)__ldg(vp + o11), ax);
        float cr = __fsub_rn(lerp_ref(t, bo, ay), 128.0f);
        r = fminf(fmaxf(__fadd_rn(__fadd_rn(__fmul_rn(f.m[0], luma), __fmul_rn(f.m[1], cb)), __fmul_rn(f.m[2], cr)), 0.0f), 255.0f);
        g = fminf(fmaxf(__fadd_rn(__fadd_rn(__fmul_rn(f.m[3], luma), __fmul_rn(f.m[4], cb)), __fmul_rn(f.m[5], cr)), 0.0f), 255.0f);
        b = fminf(fmaxf(__fadd_rn(__fadd_rn(__fmul_rn(f.m[6], luma), __fmul_rn(f.m[7], cb)), __fmul_rn(f.m[8], cr)), 0.0f), 255.0f);
    }
}

// The output pixels p0..p1 (raster order) of crop c that block entry b covers (empty when p0 >= p1).
__device__ __forceinline__ void block_pixels(const BlockMeta& b, const CropMeta& c, u32 tile_pixels, u32& p0, u32& p1) {
    p0 = b.tile_begin * tile_pixels;
    p1 = min(b.tile_end * tile_pixels, c.out_w * c.out_h);
}

// Staging: source rows sy0 .. sy0 + spx / c.w - 1 of crop c as RGB float4 (w unused) in shared memory,
// each pixel converted once; every thread of the block takes part, then waits for the others.
template <int FMT>
__device__ __forceinline__ void stage_rows(float4* stage, const u8* __restrict__ arena, const FrameDesc& f,
                                           const CropMeta& c, u32 sy0, u32 spx) {
    for (u32 i = threadIdx.x; i < spx; i += blockDim.x) {
        const u32 r = i / c.w;
        const u32 x = i - r * c.w;
        float4 v;
        sample_rgb<FMT>(arena, f, c.x + x, c.y + sy0 + r, v.x, v.y, v.z);
        v.w = 0.0f;
        stage[i] = v;
    }
    __syncthreads();
}

// Output element writers.
__device__ __forceinline__ void store(float* out, u64 i, float v) { out[i] = v; }
__device__ __forceinline__ u16 to_half(float v);
__device__ __forceinline__ void store(u16* out, u64 i, float v) { out[i] = to_half(v); }

// Normalized value of channel k (output order) of an RGB triple.
__device__ __forceinline__ float norm_channel(const float rgb[3], int k, const Norm& n) {
    float s = n.bgr ? rgb[2 - k] : rgb[k];
    return __fadd_rn(__fmul_rn(s, n.a[k]), n.b[k]);
}

__device__ __forceinline__ u16 to_half(float v) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

// Vector output stores: plain, or streaming (`st.global.cs`, evict-first: the output is written once
// and read by nobody on the device before it leaves L2) when OCTOPUS_STCS is 1.
#ifndef OCTOPUS_STCS
#define OCTOPUS_STCS 1
#endif
__device__ __forceinline__ void st_vec(float4* p, float4 v) {
#if OCTOPUS_STCS
    __stcs(p, v);
#else
    *p = v;
#endif
}
__device__ __forceinline__ void st_vec(uint2* p, uint2 v) {
#if OCTOPUS_STCS
    __stcs(p, v);
#else
    *p = v;
#endif
}

// Store four consecutive output pixels q..q+3 of one row with 16-byte (f32) or 8-byte (f16) stores.
// Needs q, out_offset and out_w * out_h divisible by 4.
__device__ __forceinline__ void store_quad(const CropMeta& c, u32 q, const float rgb[4][3], const Norm& n,
                                           float* __restrict__ out) {
    const u64 base = c.out_offset;
    if (n.nhwc) {
        float v[12];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int k = 0; k < 3; ++k) v[3 * j + k] = norm_channel(rgb[j], k, n);
        float4* o = reinterpret_cast<float4*>(out + base + (u64)q * 3);
        st_vec(o, make_float4(v[0], v[1], v[2], v[3]));
        st_vec(o + 1, make_float4(v[4], v[5], v[6], v[7]));
        st_vec(o + 2, make_float4(v[8], v[9], v[10], v[11]));
    } else {
        const u32 plane = c.out_w * c.out_h;
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            st_vec(reinterpret_cast<float4*>(out + base + (u64)k * plane + q),
                   make_float4(norm_channel(rgb[0], k, n), norm_channel(rgb[1], k, n), norm_channel(rgb[2], k, n),
                               norm_channel(rgb[3], k, n)));
        }
    }
}
__device__ __forceinline__ void store_quad(const CropMeta& c, u32 q, const float rgb[4][3], const Norm& n,
                                           u16* __restrict__ out) {
    const u64 base = c.out_offset;
    if (n.nhwc) {
        u16 v[12];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int k = 0; k < 3; ++k) v[3 * j + k] = to_half(norm_channel(rgb[j], k, n));
        uint2* o = reinterpret_cast<uint2*>(out + base + (u64)q * 3);
#pragma unroll
        for (int i = 0; i < 3; ++i)
            st_vec(o + i, make_uint2((u32)v[4 * i] | ((u32)v[4 * i + 1] << 16), (u32)v[4 * i + 2] | ((u32)v[4 * i + 3] << 16)));
    } else {
        const u32 plane = c.out_w * c.out_h;
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            u16 h0 = to_half(norm_channel(rgb[0], k, n)), h1 = to_half(norm_channel(rgb[1], k, n));
            u16 h2 = to_half(norm_channel(rgb[2], k, n)), h3 = to_half(norm_channel(rgb[3], k, n));
            st_vec(reinterpret_cast<uint2*>(out + base + (u64)k * plane + q),
                   make_uint2((u32)h0 | ((u32)h1 << 16), (u32)h2 | ((u32)h3 << 16)));
        }
    }
}

// Normalize the RGB value of output pixel p of crop c and store its three channels.
template <typename OUT>
__device__ __forceinline__ void store_pixel(const CropMeta& c, u32 p, const float rgb[3], const Norm& n,
                                            OUT* __restrict__ out) {
    const u64 base = c.out_offset;
    const u32 plane = c.out_w * c.out_h;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        float s = n.bgr ? rgb[2 - k] : rgb[k];
        float val = __fadd_rn(__fmul_rn(s, n.a[k]), n.b[k]);
        u64 idx = n.nhwc ? base + (u64)p * 3 + k : base + (u64)k * plane + p;
        store(out, idx, val);
    }
}

// Bilinear blend of four RGB taps, rounded as the CPU rounds it.
__device__ __forceinline__ void blend(const float v[4][3], float ax, float ay, float rgb[3]) {
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        float top = lerp_ref(v[0][k], v[1][k], ax);
        float bot = lerp_ref(v[2][k], v[3][k], ax);
        rgb[k] = lerp_ref(top, bot, ay);
    }
}

// Bilinear value of output pixel p (raster order) of crop c, sampled straight from the frame,
// normalized and stored.
template <int FMT, typename OUT>
__device__ __forceinline__ void bilinear_pixel(const u8* __restrict__ arena, const FrameDesc& f, const CropMeta& c,
                                               u32 p, const Norm& n, OUT* __restrict__ out) {
    u32 oy = p / c.out_w;
    u32 ox = p - oy * c.out_w;
    u32 x0, x1, y0, y1;
    float ax, ay;
    linear_taps(ox, c.w, c.out_w, x0, x1, ax);
    linear_taps(oy, c.h, c.out_h, y0, y1, ay);
    float v[4][3];
    sample_rgb<FMT>(arena, f, c.x + x0, c.y + y0, v[0][0], v[0][1], v[0][2]);
    sample_rgb<FMT>(arena, f, c.x + x1, c.y + y0, v[1][0], v[1][1], v[1][2]);
    sample_rgb<FMT>(arena, f, c.x + x0, c.y + y1, v[2][0], v[2][1], v[2][2]);
    sample_rgb<FMT>(arena, f, c.x + x1, c.y + y1, v[3][0], v[3][1], v[3][2]);
    float rgb[3];
    blend(v, ax, ay, rgb);
    store_pixel<OUT>(c, p, rgb, n, out);
}
