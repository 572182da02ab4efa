// octopipe's detector engine: the plan's steps on FP16 NHWC activations (crates/octopipe-engine/
// src/gpu/). Convolutions carry their fused epilogue (bias, activations, residual add, per-channel
// gate, constant scale and shift) and, where the plan took one, the squeeze-excite gate on their
// input; products accumulate in f32. The other steps: the global average pool, the bilinear
// resize, the channel concat with its activations, the broadcast product.
//
// Activations are [pixels, channels] with the pixel index m = (n * H + y) * W + x over the batch;
// a graph output is written NCHW (the layout the model declares and the peak decoder reads).
#include "common.cuh"

__device__ __forceinline__ float half_to_float(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 float_to_half(float v) { return to_half(v); }

// The epilogue's operations (gpu/launch.rs `EpiKind`).
#define E_BIAS 1
#define E_RELU 2
#define E_HARDSWISH 3
#define E_HARDSIGMOID 4
#define E_SIGMOID 5
#define E_CLIP 6
#define E_RESIDUAL 7
#define E_GATE 8
#define E_SCALE 9
#define E_SHIFT 10
#define EPI_MAX 6

// One operation: its kind, a pointer (bias, scale, shift: f32 per channel or one value
// (`count` 1); residual: f16 like the output; gate: f16 [n, channels]) and two numbers (the hard
// sigmoid's alpha and beta, the clip's bounds).
struct EpiOp {
    u32 kind;
    u32 count;
    float a;
    float b;
    u64 ptr;
};

// What follows a step's value, in order; how its output is laid out.
struct Epi {
    EpiOp op[EPI_MAX];
    u32 n;         // operations used
    u32 nchw;      // 1: the output is written NCHW (a graph output)
    u32 hw;        // pixels per image
    u32 channels;  // the output's channels
};

// A convolution's geometry.
struct Geom {
    u32 n, ih, iw, cin, oh, ow, cout;
    u32 kh, kw, sh, sw, dh, dw, pt, pl;
};

__device__ __forceinline__ float epilogue(const Epi& e, float v, u64 m, u32 c) {
    for (u32 i = 0; i < e.n; ++i) {
        const EpiOp& o = e.op[i];
        switch (o.kind) {
            case E_BIAS: v += reinterpret_cast<const float*>(o.ptr)[o.count == 1 ? 0 : c]; break;
            case E_RELU: v = fmaxf(v, 0.f); break;
            case E_HARDSWISH: v = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) * (1.f / 6.f); break;
            case E_HARDSIGMOID: v = fminf(fmaxf(o.a * v + o.b, 0.f), 1.f); break;
            case E_SIGMOID: v = 1.f / (1.f + __expf(-v)); break;
            case E_CLIP: v = fminf(fmaxf(v, o.a), o.b); break;
            case E_RESIDUAL: v += half_to_float(reinterpret_cast<const u16*>(o.ptr)[m * e.channels + c]); break;
            case E_GATE: v *= half_to_float(reinterpret_cast<const u16*>(o.ptr)[(m / e.hw) * e.channels + c]); break;
            case E_SCALE: v *= reinterpret_cast<const float*>(o.ptr)[o.count == 1 ? 0 : c]; break;
            case E_SHIFT: v += reinterpret_cast<const float*>(o.ptr)[o.count == 1 ? 0 : c]; break;
            default: break;
        }
    }
    return v;
}

// Where output element (m, c) goes: NHWC, or NCHW for a graph output.
__device__ __forceinline__ u64 out_index(const Epi& e, u64 m, u32 c) {
    if (!e.nchw) return m * e.channels + c;
    const u64 n = m / e.hw, p = m - n * e.hw;
    return (n * e.channels + c) * e.hw + p;
}

// ---- convolutions ----

// The 1 x 1 convolution as a matrix product: out[m, co] = sum_ci x[m, ci] * gin[n, ci] * w[ci, co].
// A block computes 64 pixels x 64 output channels in 256 threads of 4 x 4 each, over the input
// channels in slices of 32 held in shared memory as f32.
#define PW_BM 64
#define PW_BN 64
#define PW_BK 32
extern "C" __global__ void __launch_bounds__(256)
engine_conv1x1(const u16* __restrict__ x, const u16* __restrict__ w, const u16* __restrict__ gin,
               u16* __restrict__ out, u64 pixels, u32 cin, u32 cout, Epi e) {
    __shared__ float as[PW_BK][PW_BM + 4];
    __shared__ float bs[PW_BK][PW_BN];
    const u32 tid = threadIdx.x;
    const u32 tx = tid % 16, ty = tid / 16;
    const u64 m0 = (u64)blockIdx.x * PW_BM;
    const u32 n0 = blockIdx.y * PW_BN;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    for (u32 k0 = 0; k0 < cin; k0 += PW_BK) {
#pragma unroll
        for (int r = 0; r < (PW_BM * PW_BK) / 256; ++r) {
            const u32 el = tid + 256 * r;
            const u32 px = el / PW_BK, k = el % PW_BK;
            const u64 m = m0 + px;
            float v = 0.f;
            if (m < pixels && k0 + k < cin) {
                v = half_to_float(x[m * cin + k0 + k]);
                if (gin) v *= half_to_float(gin[(m / e.hw) * cin + k0 + k]);
            }
            as[k][px] = v;
        }
#pragma unroll
        for (int r = 0; r < (PW_BN * PW_BK) / 256; ++r) {
            const u32 el = tid + 256 * r;
            const u32 k = el / PW_BN, c = el % PW_BN;
            bs[k][c] = (k0 + k < cin && n0 + c < cout) ? half_to_float(w[(u64)(k0 + k) * cout + n0 + c]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < PW_BK; ++k) {
            const float4 a = *reinterpret_cast<const float4*>(&as[k][ty * 4]);
            const float4 b = *reinterpret_cast<const float4*>(&bs[k][tx * 4]);
            const float av[4] = {a.x, a.y, a.z, a.w};
            const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const u64 m = m0 + ty * 4 + i;
        if (m >= pixels) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const u32 c = n0 + tx * 4 + j;
            if (c < cout) out[out_index(e, m, c)] = float_to_half(epilogue(e, acc[i][j], m, c));
        }
    }
}

// Depthwise convolution (one filter per channel), any kernel size, stride and padding: one thread
// per output element, the filter f32 [kh * kw, channels].
extern "C" __global__ void engine_conv_dw(const u16* __restrict__ x, const float* __restrict__ w,
                                          const u16* __restrict__ gin, u16* __restrict__ out,
                                          Geom g, Epi e) {
    const u64 total = (u64)g.n * g.oh * g.ow * g.cout;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 c = i % g.cout;
        const u64 m = i / g.cout;
        const u32 ox = m % g.ow;
        const u32 oy = (m / g.ow) % g.oh;
        const u32 n = m / ((u64)g.ow * g.oh);
        float acc = 0.f;
        for (u32 ky = 0; ky < g.kh; ++ky) {
            const int iy = (int)(oy * g.sh + ky * g.dh) - (int)g.pt;
            if (iy < 0 || iy >= (int)g.ih) continue;
            for (u32 kx = 0; kx < g.kw; ++kx) {
                const int ix = (int)(ox * g.sw + kx * g.dw) - (int)g.pl;
                if (ix < 0 || ix >= (int)g.iw) continue;
                const u64 src = (((u64)n * g.ih + iy) * g.iw + ix) * g.cin + c;
                acc = fmaf(half_to_float(x[src]), w[(ky * g.kw + kx) * g.cout + c], acc);
            }
        }
        if (gin) acc *= half_to_float(gin[(u64)n * g.cin + c]);
        out[out_index(e, m, c)] = float_to_half(epilogue(e, acc, m, c));
    }
}

// A dense convolution of any kernel size (the stem): one thread per output element, the filter
// f32 [kh, kw, cin, cout].
extern "C" __global__ void engine_conv_direct(const u16* __restrict__ x, const float* __restrict__ w,
                                              const u16* __restrict__ gin, u16* __restrict__ out,
                                              Geom g, Epi e) {
    const u64 total = (u64)g.n * g.oh * g.ow * g.cout;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 c = i % g.cout;
        const u64 m = i / g.cout;
        const u32 ox = m % g.ow;
        const u32 oy = (m / g.ow) % g.oh;
        const u32 n = m / ((u64)g.ow * g.oh);
        float acc = 0.f;
        for (u32 ky = 0; ky < g.kh; ++ky) {
            const int iy = (int)(oy * g.sh + ky * g.dh) - (int)g.pt;
            if (iy < 0 || iy >= (int)g.ih) continue;
            for (u32 kx = 0; kx < g.kw; ++kx) {
                const int ix = (int)(ox * g.sw + kx * g.dw) - (int)g.pl;
                if (ix < 0 || ix >= (int)g.iw) continue;
                const u64 src = (((u64)n * g.ih + iy) * g.iw + ix) * g.cin;
                const float* wk = w + ((u64)(ky * g.kw + kx) * g.cin) * g.cout + c;
                for (u32 ci = 0; ci < g.cin; ++ci) {
                    float v = half_to_float(x[src + ci]);
                    if (gin) v *= half_to_float(gin[(u64)n * g.cin + ci]);
                    acc = fmaf(v, wk[(u64)ci * g.cout], acc);
                }
            }
        }
        out[out_index(e, m, c)] = float_to_half(epilogue(e, acc, m, c));
    }
}

// ---- the other steps ----

// The mean over each image's pixels: out[n, c]. A block sums 32 channels of one image over its
// pixels in 8 lanes.
extern "C" __global__ void engine_gap(const u16* __restrict__ x, u16* __restrict__ out, u32 hw,
                                      u32 channels) {
    __shared__ float part[8][33];
    const u32 c = blockIdx.y * 32 + threadIdx.x;
    const u32 n = blockIdx.x;
    float s = 0.f;
    if (c < channels)
        for (u32 p = threadIdx.y; p < hw; p += 8)
            s += half_to_float(x[((u64)n * hw + p) * channels + c]);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < channels) {
        float t = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) t += part[i][threadIdx.x];
        out[(u64)n * channels + c] = float_to_half(t / (float)hw);
    }
}

// ONNX Resize, linear, `asymmetric` coordinates: source = destination / scale, the last row and
// column repeated past the edge.
extern "C" __global__ void engine_resize_linear(const u16* __restrict__ x, u16* __restrict__ out,
                                                u32 n, u32 ih, u32 iw, u32 oh, u32 ow, u32 c,
                                                float sy, float sx, Epi e) {
    const u64 total = (u64)n * oh * ow * c;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 ch = i % c;
        const u64 m = i / c;
        const u32 ox = m % ow;
        const u32 oy = (m / ow) % oh;
        const u32 b = m / ((u64)ow * oh);
        const float fy = fminf((float)oy / sy, (float)(ih - 1));
        const float fx = fminf((float)ox / sx, (float)(iw - 1));
        const u32 y0 = (u32)fy, x0 = (u32)fx;
        const u32 y1 = min(y0 + 1, ih - 1), x1 = min(x0 + 1, iw - 1);
        const float wy = fy - y0, wx = fx - x0;
        const u64 base = (u64)b * ih;
        const float v00 = half_to_float(x[((base + y0) * iw + x0) * c + ch]);
        const float v01 = half_to_float(x[((base + y0) * iw + x1) * c + ch]);
        const float v10 = half_to_float(x[((base + y1) * iw + x0) * c + ch]);
        const float v11 = half_to_float(x[((base + y1) * iw + x1) * c + ch]);
        const float top = v00 + (v01 - v00) * wx, bottom = v10 + (v11 - v10) * wx;
        out[out_index(e, m, ch)] = float_to_half(epilogue(e, top + (bottom - top) * wy, m, ch));
    }
}

// Two tensors joined along the channels, the joined activations applied as it writes.
extern "C" __global__ void engine_concat2(const u16* __restrict__ a, const u16* __restrict__ b,
                                          u16* __restrict__ out, u64 pixels, u32 ca, u32 cb, Epi e) {
    const u32 c = ca + cb;
    const u64 total = pixels * c;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 ch = i % c;
        const u64 m = i / c;
        const float v = ch < ca ? half_to_float(a[m * ca + ch]) : half_to_float(b[m * cb + ch - ca]);
        out[out_index(e, m, ch)] = float_to_half(epilogue(e, v, m, ch));
    }
}

// An elementwise step: x with its epilogue (a product by a per-image gate, a sum with a tensor of
// its shape, an activation).
extern "C" __global__ void engine_pointwise(const u16* __restrict__ x, u16* __restrict__ out,
                                            u64 pixels, u32 c, Epi e) {
    const u64 total = pixels * c;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 ch = i % c;
        const u64 m = i / c;
        out[out_index(e, m, ch)] = float_to_half(epilogue(e, half_to_float(x[i]), m, ch));
    }
}
