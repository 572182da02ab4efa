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

// ---- the tuned kernels ----

__device__ __forceinline__ u32 pack_half2(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }

// The epilogue on a thread's R x C values: rows m[r] (pixels; rows at or past `rows` are not
// read), columns c[j] (channels; those at or past e.channels are not read). The operations loop
// once per kernel, each applied to every value, so that each operation's code exists once (the
// simple kernels' per-value epilogue inlines every operation for every value).
template <int R, int C>
__device__ __forceinline__ void epilogue_tile(const Epi& e, float (&v)[R][C], const u64 (&m)[R],
                                              const u32 (&c)[C], u64 rows) {
#pragma unroll 1
    for (u32 i = 0; i < e.n; ++i) {
        const EpiOp o = e.op[i];
        switch (o.kind) {
            case E_BIAS:
            case E_SCALE:
            case E_SHIFT: {
                const float* p = reinterpret_cast<const float*>(o.ptr);
#pragma unroll
                for (int j = 0; j < C; ++j) {
                    const float w = o.count == 1 ? p[0] : (c[j] < e.channels ? p[c[j]] : 0.f);
#pragma unroll
                    for (int r = 0; r < R; ++r) v[r][j] = o.kind == E_SCALE ? v[r][j] * w : v[r][j] + w;
                }
                break;
            }
            case E_RELU:
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int j = 0; j < C; ++j) v[r][j] = fmaxf(v[r][j], 0.f);
                break;
            case E_HARDSWISH:
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int j = 0; j < C; ++j) {
                        const float x = v[r][j];
                        v[r][j] = x * fminf(fmaxf(x + 3.f, 0.f), 6.f) * (1.f / 6.f);
                    }
                break;
            case E_HARDSIGMOID:
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int j = 0; j < C; ++j) v[r][j] = fminf(fmaxf(o.a * v[r][j] + o.b, 0.f), 1.f);
                break;
            case E_SIGMOID:
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int j = 0; j < C; ++j) v[r][j] = 1.f / (1.f + __expf(-v[r][j]));
                break;
            case E_CLIP:
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int j = 0; j < C; ++j) v[r][j] = fminf(fmaxf(v[r][j], o.a), o.b);
                break;
            case E_RESIDUAL:
            case E_GATE: {
                const u16* p = reinterpret_cast<const u16*>(o.ptr);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    if (m[r] >= rows) continue;
                    const u64 base = (o.kind == E_GATE ? m[r] / e.hw : m[r]) * e.channels;
#pragma unroll
                    for (int j = 0; j < C; ++j) {
                        if (c[j] >= e.channels) continue;
                        const float t = half_to_float(p[base + c[j]]);
                        v[r][j] = o.kind == E_GATE ? v[r][j] * t : v[r][j] + t;
                    }
                }
                break;
            }
            default:
                break;
        }
    }
}

// The 1 x 1 convolution on tensor cores (sm_80 and newer): mma.sync m16n8k16, f16 products
// accumulated in f32. A block of 4 warps computes 128 pixels x BN output channels (each warp 32
// pixels: two 16-row tiles, BN / 8 8-column tiles), over the input channels in slices of 32 held in
// shared memory as f16 rows padded to 40 values (the fragments' 32-bit reads then fall in distinct
// banks). The filter is [cout, cinp] f16 (input channels contiguous, zero-padded to cinp, a multiple
// of 8). VEC: the input's channels are a multiple of 8, read 16 bytes at a time, the next slice
// into registers while the current one is multiplied.
#define TC_BM 128
#define TC_BK 32
#define TC_LD (TC_BK + 8)
#define TC_AV (TC_BM * TC_BK / 8 / 128)

// x (8 halves) times the gate g (8 halves), rounded to f16.
__device__ __forceinline__ uint4 gate8(uint4 v, const u16* g) {
    const uint4 gv = *reinterpret_cast<const uint4*>(g);
    u32* a = reinterpret_cast<u32*>(&v);
    const u32* b = reinterpret_cast<const u32*>(&gv);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float lo = half_to_float(a[i] & 0xffff) * half_to_float(b[i] & 0xffff);
        const float hi = half_to_float(a[i] >> 16) * half_to_float(b[i] >> 16);
        a[i] = pack_half2(float_to_half(lo), float_to_half(hi));
    }
    return v;
}

__device__ __forceinline__ void mma16816(float* c, const u32* a, u32 b0, u32 b1) {
#if __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

// Slice k0 of the input tile (VEC: into registers ra; otherwise straight into shared memory).
template <bool VEC>
__device__ __forceinline__ void tc_fetch_a(uint4 (&ra)[TC_AV], u16* as, const u16* __restrict__ x,
                                           const u16* __restrict__ gin, u64 m0, u64 pixels,
                                           u32 cin, u32 k0, u32 hw) {
    const u32 tid = threadIdx.x;
    if (VEC) {
#pragma unroll
        for (int r = 0; r < TC_AV; ++r) {
            const u32 el = tid + 128 * r, k = k0 + (el % 4) * 8;
            const u64 m = m0 + el / 4;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (m < pixels && k < cin) {
                v = *reinterpret_cast<const uint4*>(x + m * cin + k);
                if (gin) v = gate8(v, gin + (m / hw) * cin + k);
            }
            ra[r] = v;
        }
    } else {
#pragma unroll 4
        for (int r = 0; r < TC_BM * TC_BK / 128; ++r) {
            const u32 el = tid + 128 * r, kk = el % TC_BK, k = k0 + kk;
            const u64 m = m0 + el / TC_BK;
            u16 v = 0;
            if (m < pixels && k < cin) {
                v = x[m * cin + k];
                if (gin) v = float_to_half(half_to_float(v) * half_to_float(gin[(m / hw) * cin + k]));
            }
            as[(el / TC_BK) * TC_LD + kk] = v;
        }
    }
}

template <int BN>
__device__ __forceinline__ void tc_fetch_b(uint4 (&rb)[(BN * TC_BK / 8 + 127) / 128],
                                           const u16* __restrict__ w, u32 n0, u32 cout, u32 cinp,
                                           u32 k0) {
#pragma unroll
    for (int r = 0; r < (BN * TC_BK / 8 + 127) / 128; ++r) {
        const u32 el = threadIdx.x + 128 * r, row = el / 4, k = k0 + (el % 4) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (el < BN * 4 && n0 + row < cout && k < cinp)
            v = *reinterpret_cast<const uint4*>(w + (u64)(n0 + row) * cinp + k);
        rb[r] = v;
    }
}

template <int BN, bool VEC>
__device__ __forceinline__ void conv1x1_tc(u16* as, u16* bs, const u16* __restrict__ x,
                                           const u16* __restrict__ w, const u16* __restrict__ gin,
                                           u16* __restrict__ out, u64 pixels, u32 cin, u32 cinp,
                                           u32 cout, const Epi& e) {
    constexpr int NT = BN / 8;
    constexpr int BV = (BN * TC_BK / 8 + 127) / 128;
    const u32 tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const u32 g = lane >> 2, t = lane & 3;
    const u32 n0 = blockIdx.x * BN;
    const u64 tiles = (pixels + TC_BM - 1) / TC_BM;
    for (u64 tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        const u64 m0 = tile * TC_BM;
        float acc[2][NT][4];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;
        uint4 ra[TC_AV], rb[BV];
        if (VEC) tc_fetch_a<VEC>(ra, as, x, gin, m0, pixels, cin, 0, e.hw);
        tc_fetch_b<BN>(rb, w, n0, cout, cinp, 0);
        for (u32 k0 = 0; k0 < cin; k0 += TC_BK) {
            if (!VEC) tc_fetch_a<VEC>(ra, as, x, gin, m0, pixels, cin, k0, e.hw);
            if (VEC) {
#pragma unroll
                for (int r = 0; r < TC_AV; ++r) {
                    const u32 el = tid + 128 * r;
                    *reinterpret_cast<uint4*>(&as[(el / 4) * TC_LD + (el % 4) * 8]) = ra[r];
                }
            }
#pragma unroll
            for (int r = 0; r < BV; ++r) {
                const u32 el = tid + 128 * r;
                if (el < BN * 4) *reinterpret_cast<uint4*>(&bs[(el / 4) * TC_LD + (el % 4) * 8]) = rb[r];
            }
            __syncthreads();
            if (k0 + TC_BK < cin) {
                if (VEC) tc_fetch_a<VEC>(ra, as, x, gin, m0, pixels, cin, k0 + TC_BK, e.hw);
                tc_fetch_b<BN>(rb, w, n0, cout, cinp, k0 + TC_BK);
            }
#pragma unroll
            for (int kk = 0; kk < TC_BK; kk += 16) {
                u32 a[2][4];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const u16* p = &as[(warp * 32 + i * 16 + g) * TC_LD + kk + 2 * t];
                    a[i][0] = *reinterpret_cast<const u32*>(p);
                    a[i][1] = *reinterpret_cast<const u32*>(p + 8 * TC_LD);
                    a[i][2] = *reinterpret_cast<const u32*>(p + 8);
                    a[i][3] = *reinterpret_cast<const u32*>(p + 8 * TC_LD + 8);
                }
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    const u16* p = &bs[(j * 8 + g) * TC_LD + kk + 2 * t];
                    const u32 b0 = *reinterpret_cast<const u32*>(p);
                    const u32 b1 = *reinterpret_cast<const u32*>(p + 8);
#pragma unroll
                    for (int i = 0; i < 2; ++i) mma16816(acc[i][j], a[i], b0, b1);
                }
            }
            __syncthreads();
        }
        // The thread's values: rows (i, h) -> pixel m0 + warp * 32 + i * 16 + h * 8 + g, columns
        // (j, q) -> channel n0 + j * 8 + 2 * t + q.
        float v[4][2 * NT];
        u64 m[4];
        u32 c[2 * NT];
#pragma unroll
        for (int r = 0; r < 4; ++r) m[r] = m0 + warp * 32 + (r / 2) * 16 + (r % 2) * 8 + g;
#pragma unroll
        for (int j = 0; j < 2 * NT; ++j) c[j] = n0 + (j / 2) * 8 + 2 * t + (j % 2);
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int j = 0; j < 2 * NT; ++j) v[r][j] = acc[r / 2][j / 2][(r % 2) * 2 + (j % 2)];
        epilogue_tile<4, 2 * NT>(e, v, m, c, pixels);
        // The tile leaves through shared memory (free since the last slice's barrier): NHWC rows
        // in 16-byte stores, a graph output (NCHW) a channel's consecutive pixels at a time.
        constexpr int OL = BN + 8;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const u32 lr = warp * 32 + (r / 2) * 16 + (r % 2) * 8 + g;
#pragma unroll
            for (int j = 0; j < 2 * NT; j += 2) {
                const u32 lc = (j / 2) * 8 + 2 * t;
                *reinterpret_cast<u32*>(&as[lr * OL + lc]) =
                    pack_half2(float_to_half(v[r][j]), float_to_half(v[r][j + 1]));
            }
        }
        __syncthreads();
        if (e.nchw) {
            for (u32 q = tid; q < BN * TC_BM; q += 128) {
                const u32 lc = q / TC_BM, lr = q % TC_BM;
                const u64 mm = m0 + lr;
                const u32 cc = n0 + lc;
                if (mm < pixels && cc < cout) out[out_index(e, mm, cc)] = as[lr * OL + lc];
            }
        } else {
            for (u32 q = tid; q < TC_BM * (BN / 8); q += 128) {
                const u32 lr = q / (BN / 8), lc = (q % (BN / 8)) * 8;
                const u64 mm = m0 + lr;
                const u32 cc = n0 + lc;
                if (mm >= pixels || cc >= cout) continue;
                if ((cout & 7) == 0) {
                    *reinterpret_cast<uint4*>(out + mm * cout + cc) =
                        *reinterpret_cast<const uint4*>(&as[lr * OL + lc]);
                } else {
                    for (u32 k = 0; k < 8 && cc + k < cout; ++k) out[mm * cout + cc + k] = as[lr * OL + lc + k];
                }
            }
        }
        __syncthreads();
    }
}

// Shared memory of a tensor-core block: the A and B slices, later the output tile.
#define TC_SMEM(BN) ((TC_BM + BN) * TC_LD > TC_BM * (BN + 8) ? (TC_BM + BN) * TC_LD : TC_BM * (BN + 8))

// MINB: blocks a multiprocessor keeps (4: at most 128 registers a thread; the widest tiles take 3).
#define CONV1X1_TC(BN, MINB)                                                                        \
    extern "C" __global__ void __launch_bounds__(128, MINB)                                         \
        engine_conv1x1_tc##BN(const u16* __restrict__ x, const u16* __restrict__ w,                 \
                              const u16* __restrict__ gin, u16* __restrict__ out, u64 pixels,       \
                              u32 cin, u32 cinp, u32 cout, const __grid_constant__ Epi e) {         \
        __shared__ __align__(16) u16 sm[TC_SMEM(BN)];                                               \
        if ((cin & 7) == 0)                                                                         \
            conv1x1_tc<BN, true>(sm, sm + TC_BM * TC_LD, x, w, gin, out, pixels, cin, cinp, cout, e); \
        else                                                                                        \
            conv1x1_tc<BN, false>(sm, sm + TC_BM * TC_LD, x, w, gin, out, pixels, cin, cinp, cout, e); \
    }
CONV1X1_TC(8, 4)
CONV1X1_TC(16, 4)
CONV1X1_TC(24, 4)
CONV1X1_TC(32, 4)
CONV1X1_TC(40, 4)
CONV1X1_TC(48, 3)
CONV1X1_TC(56, 3)
CONV1X1_TC(64, 3)

// Depthwise convolution, V channels a thread (V = 8: 16-byte reads; the channels a multiple of V).
template <int V>
__device__ __forceinline__ void conv_dw_vec(const u16* __restrict__ x, const float* __restrict__ w,
                                            const u16* __restrict__ gin, u16* __restrict__ out,
                                            const Geom& g, const Epi& e) {
    const u32 groups = g.cout / V;
    const u64 total = (u64)g.n * g.oh * g.ow * groups;
    const u64 rows = (u64)g.n * g.oh * g.ow;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 c0 = (i % groups) * V;
        const u64 mm = i / groups;
        const u32 ox = mm % g.ow;
        const u32 oy = (mm / g.ow) % g.oh;
        const u32 n = mm / ((u64)g.ow * g.oh);
        float acc[1][V];
#pragma unroll
        for (int v = 0; v < V; ++v) acc[0][v] = 0.f;
        for (u32 ky = 0; ky < g.kh; ++ky) {
            const int iy = (int)(oy * g.sh + ky * g.dh) - (int)g.pt;
            if (iy < 0 || iy >= (int)g.ih) continue;
            for (u32 kx = 0; kx < g.kw; ++kx) {
                const int ix = (int)(ox * g.sw + kx * g.dw) - (int)g.pl;
                if (ix < 0 || ix >= (int)g.iw) continue;
                const u16* src = x + (((u64)n * g.ih + iy) * g.iw + ix) * g.cin + c0;
                const float* wk = w + (ky * g.kw + kx) * g.cout + c0;
                __align__(16) u16 xv[V];
                if (V == 8) {
                    *reinterpret_cast<uint4*>(xv) = *reinterpret_cast<const uint4*>(src);
                } else {
#pragma unroll
                    for (int v = 0; v < V; ++v) xv[v] = src[v];
                }
#pragma unroll
                for (int v = 0; v < V; ++v) acc[0][v] = fmaf(half_to_float(xv[v]), wk[v], acc[0][v]);
            }
        }
        if (gin) {
#pragma unroll
            for (int v = 0; v < V; ++v) acc[0][v] *= half_to_float(gin[(u64)n * g.cin + c0 + v]);
        }
        const u64 m[1] = {mm};
        u32 c[V];
#pragma unroll
        for (int v = 0; v < V; ++v) c[v] = c0 + v;
        epilogue_tile<1, V>(e, acc, m, c, rows);
        __align__(16) u16 ov[V];
#pragma unroll
        for (int v = 0; v < V; ++v) ov[v] = float_to_half(acc[0][v]);
        if (V == 8 && !e.nchw) {
            *reinterpret_cast<uint4*>(out + mm * g.cout + c0) = *reinterpret_cast<const uint4*>(ov);
        } else {
#pragma unroll
            for (int v = 0; v < V; ++v) out[out_index(e, mm, c0 + v)] = ov[v];
        }
    }
}

extern "C" __global__ void engine_conv_dw8(const u16* __restrict__ x, const float* __restrict__ w,
                                           const u16* __restrict__ gin, u16* __restrict__ out,
                                           Geom g, const __grid_constant__ Epi e) {
    conv_dw_vec<8>(x, w, gin, out, g, e);
}

extern "C" __global__ void engine_conv_dw2(const u16* __restrict__ x, const float* __restrict__ w,
                                           const u16* __restrict__ gin, u16* __restrict__ out,
                                           Geom g, const __grid_constant__ Epi e) {
    conv_dw_vec<2>(x, w, gin, out, g, e);
}

// Depthwise convolution of a K x K filter at stride S (dilation 1), 8 channels and OX
// neighbouring outputs of a row a thread: each input value of the (OX - 1) * S + K columns under
// the outputs is read once for every output and tap that uses it (K = 5, S = 1, OX = 4: 40 reads
// instead of 100). The channels a multiple of 8; the index below fits in 32 bits (the host checks).
template <int K, int S, int OX>
__device__ __forceinline__ void conv_dw_tile(const u16* __restrict__ x, const float* __restrict__ w,
                                             const u16* __restrict__ gin, u16* __restrict__ out,
                                             const Geom& g, const Epi& e) {
    const u32 groups = g.cout / 8, xtiles = (g.ow + OX - 1) / OX;
    const u32 total = g.n * g.oh * xtiles * groups;
    const u64 rows = (u64)g.n * g.oh * g.ow;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const u32 c0 = (i % groups) * 8;
        const u32 r = i / groups;
        const u32 ox0 = (r % xtiles) * OX;
        const u32 row = r / xtiles;  // n * oh + oy
        const u32 oy = row % g.oh, n = row / g.oh;
        float acc[OX][8];
#pragma unroll
        for (int o = 0; o < OX; ++o)
#pragma unroll
            for (int v = 0; v < 8; ++v) acc[o][v] = 0.f;
        const int ix0 = (int)(ox0 * S) - (int)g.pl;
#pragma unroll 1
        for (int ky = 0; ky < K; ++ky) {
            const int iy = (int)(oy * S + ky) - (int)g.pt;
            if (iy < 0 || iy >= (int)g.ih) continue;
            float wk[K][8];
#pragma unroll
            for (int kx = 0; kx < K; ++kx) {
                const float4* p = reinterpret_cast<const float4*>(w + (ky * K + kx) * g.cout + c0);
                const float4 a = p[0], b = p[1];
                wk[kx][0] = a.x; wk[kx][1] = a.y; wk[kx][2] = a.z; wk[kx][3] = a.w;
                wk[kx][4] = b.x; wk[kx][5] = b.y; wk[kx][6] = b.z; wk[kx][7] = b.w;
            }
            const u16* src = x + ((u64)n * g.ih + iy) * g.iw * g.cin + c0;
#pragma unroll
            for (int j = 0; j < (OX - 1) * S + K; ++j) {
                const int ix = ix0 + j;
                if (ix < 0 || ix >= (int)g.iw) continue;
                const uint4 raw = *reinterpret_cast<const uint4*>(src + (u64)ix * g.cin);
                const u16* h = reinterpret_cast<const u16*>(&raw);
                float xv[8];
#pragma unroll
                for (int v = 0; v < 8; ++v) xv[v] = half_to_float(h[v]);
#pragma unroll
                for (int o = 0; o < OX; ++o) {
                    const int kx = j - o * S;
                    if (kx < 0 || kx >= K) continue;
#pragma unroll
                    for (int v = 0; v < 8; ++v) acc[o][v] = fmaf(xv[v], wk[kx][v], acc[o][v]);
                }
            }
        }
        if (gin) {
#pragma unroll
            for (int v = 0; v < 8; ++v) {
                const float t = half_to_float(gin[(u64)n * g.cin + c0 + v]);
#pragma unroll
                for (int o = 0; o < OX; ++o) acc[o][v] *= t;
            }
        }
        u64 m[OX];
#pragma unroll
        for (int o = 0; o < OX; ++o) m[o] = ox0 + o < g.ow ? (u64)row * g.ow + ox0 + o : ~0ull;
        u32 c[8];
#pragma unroll
        for (int v = 0; v < 8; ++v) c[v] = c0 + v;
        epilogue_tile<OX, 8>(e, acc, m, c, rows);
#pragma unroll
        for (int o = 0; o < OX; ++o) {
            if (m[o] >= rows) continue;
            __align__(16) u16 ov[8];
#pragma unroll
            for (int v = 0; v < 8; ++v) ov[v] = float_to_half(acc[o][v]);
            if (!e.nchw) {
                *reinterpret_cast<uint4*>(out + m[o] * g.cout + c0) = *reinterpret_cast<const uint4*>(ov);
            } else {
#pragma unroll
                for (int v = 0; v < 8; ++v) out[out_index(e, m[o], c0 + v)] = ov[v];
            }
        }
    }
}

#define CONV_DW_TILE(K, S)                                                                          \
    extern "C" __global__ void engine_conv_dw_k##K##s##S(                                           \
        const u16* __restrict__ x, const float* __restrict__ w, const u16* __restrict__ gin,        \
        u16* __restrict__ out, Geom g, const __grid_constant__ Epi e) {                             \
        conv_dw_tile<K, S, 4>(x, w, gin, out, g, e);                                                \
    }
CONV_DW_TILE(3, 1)
CONV_DW_TILE(5, 1)
CONV_DW_TILE(3, 2)
CONV_DW_TILE(5, 2)

// ONNX Resize, linear, asymmetric, 8 channels a thread (the channels a multiple of 8).
extern "C" __global__ void engine_resize_linear8(const u16* __restrict__ x, u16* __restrict__ out,
                                                 u32 n, u32 ih, u32 iw, u32 oh, u32 ow, u32 c,
                                                 float sy, float sx, const __grid_constant__ Epi e) {
    const u32 groups = c / 8;
    const u32 total = n * oh * ow * groups;
    const u64 rows = (u64)n * oh * ow;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const u32 c0 = (i % groups) * 8;
        const u32 mm = i / groups;
        const u32 ox = mm % ow, oy = (mm / ow) % oh, b = mm / (ow * oh);
        const float fy = fminf((float)oy / sy, (float)(ih - 1));
        const float fx = fminf((float)ox / sx, (float)(iw - 1));
        const u32 y0 = (u32)fy, x0 = (u32)fx;
        const u32 y1 = min(y0 + 1, ih - 1), x1 = min(x0 + 1, iw - 1);
        const float wy = fy - y0, wx = fx - x0;
        const u64 base = (u64)b * ih;
        const uint4 r00 = *reinterpret_cast<const uint4*>(x + ((base + y0) * iw + x0) * c + c0);
        const uint4 r01 = *reinterpret_cast<const uint4*>(x + ((base + y0) * iw + x1) * c + c0);
        const uint4 r10 = *reinterpret_cast<const uint4*>(x + ((base + y1) * iw + x0) * c + c0);
        const uint4 r11 = *reinterpret_cast<const uint4*>(x + ((base + y1) * iw + x1) * c + c0);
        const u16 *h00 = reinterpret_cast<const u16*>(&r00), *h01 = reinterpret_cast<const u16*>(&r01);
        const u16 *h10 = reinterpret_cast<const u16*>(&r10), *h11 = reinterpret_cast<const u16*>(&r11);
        float v[1][8];
        u32 cc[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const float v00 = half_to_float(h00[k]), v01 = half_to_float(h01[k]);
            const float v10 = half_to_float(h10[k]), v11 = half_to_float(h11[k]);
            const float top = v00 + (v01 - v00) * wx, bottom = v10 + (v11 - v10) * wx;
            v[0][k] = top + (bottom - top) * wy;
            cc[k] = c0 + k;
        }
        const u64 m[1] = {mm};
        epilogue_tile<1, 8>(e, v, m, cc, rows);
        __align__(16) u16 ov[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) ov[k] = float_to_half(v[0][k]);
        if (!e.nchw) {
            *reinterpret_cast<uint4*>(out + (u64)mm * c + c0) = *reinterpret_cast<const uint4*>(ov);
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k) out[out_index(e, mm, c0 + k)] = ov[k];
        }
    }
}

// A dense convolution, 8 output channels a thread (the stem: 3 input channels): each input value
// read once for the 8, the filter f32 [kh, kw, cin, cout] (cout a multiple of 8).
extern "C" __global__ void engine_conv_direct8(const u16* __restrict__ x, const float* __restrict__ w,
                                               const u16* __restrict__ gin, u16* __restrict__ out,
                                               Geom g, const __grid_constant__ Epi e) {
    const u32 groups = g.cout / 8;
    const u64 rows = (u64)g.n * g.oh * g.ow;
    const u64 total = rows * groups;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 c0 = (i % groups) * 8;
        const u64 mm = i / groups;
        const u32 ox = mm % g.ow;
        const u32 oy = (mm / g.ow) % g.oh;
        const u32 n = mm / ((u64)g.ow * g.oh);
        float acc[1][8];
#pragma unroll
        for (int v = 0; v < 8; ++v) acc[0][v] = 0.f;
        for (u32 ky = 0; ky < g.kh; ++ky) {
            const int iy = (int)(oy * g.sh + ky * g.dh) - (int)g.pt;
            if (iy < 0 || iy >= (int)g.ih) continue;
            for (u32 kx = 0; kx < g.kw; ++kx) {
                const int ix = (int)(ox * g.sw + kx * g.dw) - (int)g.pl;
                if (ix < 0 || ix >= (int)g.iw) continue;
                const u64 src = (((u64)n * g.ih + iy) * g.iw + ix) * g.cin;
                const float* wk = w + ((u64)(ky * g.kw + kx) * g.cin) * g.cout + c0;
                for (u32 ci = 0; ci < g.cin; ++ci) {
                    float xv = half_to_float(x[src + ci]);
                    if (gin) xv *= half_to_float(gin[(u64)n * g.cin + ci]);
                    const float4 w0 = *reinterpret_cast<const float4*>(wk + (u64)ci * g.cout);
                    const float4 w1 = *reinterpret_cast<const float4*>(wk + (u64)ci * g.cout + 4);
                    acc[0][0] = fmaf(xv, w0.x, acc[0][0]);
                    acc[0][1] = fmaf(xv, w0.y, acc[0][1]);
                    acc[0][2] = fmaf(xv, w0.z, acc[0][2]);
                    acc[0][3] = fmaf(xv, w0.w, acc[0][3]);
                    acc[0][4] = fmaf(xv, w1.x, acc[0][4]);
                    acc[0][5] = fmaf(xv, w1.y, acc[0][5]);
                    acc[0][6] = fmaf(xv, w1.z, acc[0][6]);
                    acc[0][7] = fmaf(xv, w1.w, acc[0][7]);
                }
            }
        }
        const u64 m[1] = {mm};
        u32 c[8];
#pragma unroll
        for (int v = 0; v < 8; ++v) c[v] = c0 + v;
        epilogue_tile<1, 8>(e, acc, m, c, rows);
        __align__(16) u16 ov[8];
#pragma unroll
        for (int v = 0; v < 8; ++v) ov[v] = float_to_half(acc[0][v]);
        if (!e.nchw) {
            *reinterpret_cast<uint4*>(out + mm * g.cout + c0) = *reinterpret_cast<const uint4*>(ov);
        } else {
#pragma unroll
            for (int v = 0; v < 8; ++v) out[out_index(e, mm, c0 + v)] = ov[v];
        }
    }
}

// An elementwise step 8 channels a thread (the channels a multiple of 8).
extern "C" __global__ void engine_pointwise8(const u16* __restrict__ x, u16* __restrict__ out,
                                             u64 pixels, u32 c, const __grid_constant__ Epi e) {
    const u32 groups = c / 8;
    const u64 total = pixels * groups;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 c0 = (i % groups) * 8;
        const u64 mm = i / groups;
        const uint4 raw = *reinterpret_cast<const uint4*>(x + mm * c + c0);
        const u16* h = reinterpret_cast<const u16*>(&raw);
        float v[1][8];
        u32 cc[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            v[0][k] = half_to_float(h[k]);
            cc[k] = c0 + k;
        }
        const u64 m[1] = {mm};
        epilogue_tile<1, 8>(e, v, m, cc, pixels);
        __align__(16) u16 ov[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) ov[k] = float_to_half(v[0][k]);
        if (!e.nchw) {
            *reinterpret_cast<uint4*>(out + mm * c + c0) = *reinterpret_cast<const uint4*>(ov);
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k) out[out_index(e, mm, c0 + k)] = ov[k];
        }
    }
}

// Two tensors joined along the channels, 8 channels a thread (both counts multiples of 8).
extern "C" __global__ void engine_concat8(const u16* __restrict__ a, const u16* __restrict__ b,
                                          u16* __restrict__ out, u64 pixels, u32 ca, u32 cb,
                                          const __grid_constant__ Epi e) {
    const u32 c = ca + cb, groups = c / 8;
    const u64 total = pixels * groups;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u32 c0 = (i % groups) * 8;
        const u64 mm = i / groups;
        const uint4 raw = c0 < ca ? *reinterpret_cast<const uint4*>(a + mm * ca + c0)
                                  : *reinterpret_cast<const uint4*>(b + mm * cb + c0 - ca);
        const u16* h = reinterpret_cast<const u16*>(&raw);
        float v[1][8];
        u32 cc[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            v[0][k] = half_to_float(h[k]);
            cc[k] = c0 + k;
        }
        const u64 m[1] = {mm};
        epilogue_tile<1, 8>(e, v, m, cc, pixels);
        __align__(16) u16 ov[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) ov[k] = float_to_half(v[0][k]);
        if (!e.nchw) {
            *reinterpret_cast<uint4*>(out + mm * c + c0) = *reinterpret_cast<const uint4*>(ov);
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k) out[out_index(e, mm, c0 + k)] = ov[k];
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
