// Strategy C, "Octopus": one CUDA block per BlockMeta entry (tiles tile_begin..tile_end of one crop),
// built on the host in O(blocks). No lookup table, no search, no padding to the largest crop.
//
// Because a block knows its crop and its output rows, it can first convert the source rows those
// outputs read to RGB once, in shared memory ("staging"), and then resize from there: an upscaled
// crop (most VisDrone objects are smaller than the model input) reads each source pixel for many
// outputs, and the YUV to RGB conversion is the costly part. A block stages only when its rows fit
// STAGE_FLOATS and staging converts fewer pixels than the direct path would (4 taps per output);
// otherwise it samples the frame directly. Both paths compute the same values.
//
// Separable path (OCTOPUS_SEPARABLE, off by default): the bilinear blend is separable in the CPU's
// own order (top = lerp(row y0 at x0, x1), bot = the same on row y1, out = lerp(top, bot, ay)), so a
// block converts its source rows to RGB once (S), then blends each staged row horizontally once per
// output column (H, planar, one float4 per 4 columns), then each output quad is two float4 reads per
// channel and one vertical lerp: about half the instructions per output pixel of the direct and
// staged paths. Rows are taken in chunks that fit the stages, so large (downscaled) crops stage too.
// The grid may be smaller than the block list (persistent: each CUDA block loops over BlockMeta
// entries, stride gridDim.x).
#include "common.cuh"

// The separable path: for experiments (-DOCTOPUS_SEPARABLE=1); the direct and staged paths are
// faster (docs/gpu-notes.md).
#ifndef OCTOPUS_SEPARABLE
#define OCTOPUS_SEPARABLE 0
#endif
// Persistent grid: each CUDA block loops over BlockMeta entries blockIdx.x, + gridDim.x, ... (the
// host may then launch fewer blocks than entries). Off by default: the loop's extra live state
// makes the I420 kernels spill, which costs more than the launch tail it removes once the stores
// stream (docs/gpu-notes.md). Engine::new reads this define to allow a smaller grid.
#ifndef OCTOPUS_PERSISTENT
#define OCTOPUS_PERSISTENT 0
#endif
// Staged pixels as float4 (R, G, B, unused): one 16-byte shared load per tap instead of three
// 4-byte ones (OCTOPUS_STAGE4=0: three floats per pixel). The stage holds 32 KiB (STAGE_FLOATS) so
// that the blocks of larger crops stage too.
#ifndef OCTOPUS_STAGE4
#define OCTOPUS_STAGE4 1
#endif
#if OCTOPUS_STAGE4
#define STAGE_PX_FLOATS 4
#else
#define STAGE_PX_FLOATS 3
#endif
#ifndef STAGE_FLOATS
#if OCTOPUS_SEPARABLE
#define STAGE_FLOATS 4096  // 16 KiB of RGB floats per block (source rows)
#else
#define STAGE_FLOATS 8192  // 32 KiB of staged floats per block
#endif
#endif
#ifndef HSTAGE_FLOATS
#define HSTAGE_FLOATS 6144  // 24 KiB: horizontally blended rows, 3 planes x rows x out_w
#endif
#ifndef XTAB_MAX
#define XTAB_MAX 512  // widest output row of the separable path
#endif
// Out-of-line paths keep the register allocation of each path to itself (the persistent loop adds
// loop-carried state): 1 = __noinline__.
#ifndef OCTOPUS_NOINLINE_PIXELS
#define OCTOPUS_NOINLINE_PIXELS 0
#endif
#ifndef OCTOPUS_NOINLINE_SEP
#define OCTOPUS_NOINLINE_SEP 1
#endif
#if OCTOPUS_NOINLINE_PIXELS
#define PIXELS_INLINE __noinline__
#else
#define PIXELS_INLINE __forceinline__
#endif
#if OCTOPUS_NOINLINE_SEP
#define SEP_INLINE __noinline__
#else
#define SEP_INLINE __forceinline__
#endif
// At most 256 threads per block, and registers capped so that 4 such blocks (or 8 of 128 threads)
// fit an SM: the kernel is latency bound, so occupancy matters more than registers.
#define OCTOPUS_MAX_THREADS 256
#ifndef OCTOPUS_MIN_BLOCKS
#define OCTOPUS_MIN_BLOCKS 4
#endif

// RGB of crop pixel (x, y): from the staged rows (sy0 onwards) or straight from the frame.
template <int FMT, bool STAGED>
__device__ __forceinline__ void tap(const float* stage, u32 sy0, const u8* __restrict__ arena, const FrameDesc& f,
                                    const CropMeta& c, u32 x, u32 y, float v[3]) {
    if (STAGED) {
#if OCTOPUS_STAGE4
        const float4 s = reinterpret_cast<const float4*>(stage)[(y - sy0) * c.w + x];
        v[0] = s.x;
        v[1] = s.y;
        v[2] = s.z;
#else
        const float* s = stage + 3 * ((y - sy0) * c.w + x);
        v[0] = s[0];
        v[1] = s[1];
        v[2] = s[2];
#endif
    } else {
        sample_rgb<FMT>(arena, f, c.x + x, c.y + y, v[0], v[1], v[2]);
    }
}

template <int FMT, bool STAGED>
__device__ __forceinline__ void bilinear_rgb(const float* stage, u32 sy0, const u8* __restrict__ arena,
                                             const FrameDesc& f, const CropMeta& c, u32 ox, float sx, u32 y0, u32 y1,
                                             float ay, float rgb[3]) {
    u32 x0, x1;
    float ax;
    linear_taps_s(ox, c.w, sx, x0, x1, ax);
    float v[4][3];
    tap<FMT, STAGED>(stage, sy0, arena, f, c, x0, y0, v[0]);
    tap<FMT, STAGED>(stage, sy0, arena, f, c, x1, y0, v[1]);
    tap<FMT, STAGED>(stage, sy0, arena, f, c, x0, y1, v[2]);
    tap<FMT, STAGED>(stage, sy0, arena, f, c, x1, y1, v[3]);
    blend(v, ax, ay, rgb);
}

// Output pixels p0..p1 of crop c: four pixels of one row per thread with vector stores where the
// crop's output allows it, else one pixel per thread.
template <int FMT, bool STAGED, typename OUT>
__device__ PIXELS_INLINE void octopus_pixels(const float* stage, u32 sy0, const u8* __restrict__ arena,
                                               const FrameDesc& f, const CropMeta& c, u32 p0, u32 p1, float sx,
                                               float sy, bool quads, const Norm& n, OUT* __restrict__ out) {
    if (quads) {
        for (u32 q = p0 + 4 * threadIdx.x; q < p1; q += 4 * blockDim.x) {
            u32 oy = q / c.out_w;
            u32 ox = q - oy * c.out_w;
            u32 y0, y1;
            float ay;
            linear_taps_s(oy, c.h, sy, y0, y1, ay);
            float rgb[4][3];
#pragma unroll
            for (int j = 0; j < 4; ++j) bilinear_rgb<FMT, STAGED>(stage, sy0, arena, f, c, ox + j, sx, y0, y1, ay, rgb[j]);
            store_quad(c, q, rgb, n, out);
        }
    } else {
        for (u32 p = p0 + threadIdx.x; p < p1; p += blockDim.x) {
            u32 oy = p / c.out_w;
            u32 ox = p - oy * c.out_w;
            u32 y0, y1;
            float ay;
            linear_taps_s(oy, c.h, sy, y0, y1, ay);
            float rgb[3];
            bilinear_rgb<FMT, STAGED>(stage, sy0, arena, f, c, ox, sx, y0, y1, ay, rgb);
            store_pixel<OUT>(c, p, rgb, n, out);
        }
    }
}

// Shared memory of one block.
struct OctoShared {
    __align__(16) float stage[STAGE_FLOATS];
#if OCTOPUS_SEPARABLE
    float4 h4[HSTAGE_FLOATS / 4];
    u32 xt0[XTAB_MAX];
    float xta[XTAB_MAX];
#endif
};

#if OCTOPUS_SEPARABLE
// Output rows ra..rb-1 (pixels qa..qb-1 of them) of crop c through the two stages: stage the source
// rows they read, blend them horizontally, then vertically. Ends with a barrier.
template <int FMT, typename OUT>
__device__ SEP_INLINE void separable_chunk(OctoShared& sh, const u8* __restrict__ arena, const FrameDesc& f,
                                                const CropMeta& c, u32 sy0, u32 nrows, u32 qa, u32 qb, float sy,
                                                const Norm& n, OUT* __restrict__ out) {
    // 1. Source rows sy0 .. sy0 + nrows - 1 as RGB floats (interleaved).
    const u32 spx = nrows * c.w;
    for (u32 i = threadIdx.x; i < spx; i += blockDim.x) {
        u32 r = i / c.w;
        u32 x = i - r * c.w;
        sample_rgb<FMT>(arena, f, c.x + x, c.y + sy0 + r, sh.stage[3 * i], sh.stage[3 * i + 1], sh.stage[3 * i + 2]);
    }
    __syncthreads();
    // 2. H[k][r][ox] = lerp(S[r][x0][k], S[r][x1][k], ax): planar, row pitch out_w (a multiple of 4).
    float* h = reinterpret_cast<float*>(sh.h4);
    const u32 hn = nrows * c.out_w;
    const u32 plane = hn;
    const u32 last = c.w - 1;
    for (u32 i = threadIdx.x; i < hn; i += blockDim.x) {
        u32 r = i / c.out_w;
        u32 ox = i - r * c.out_w;
        u32 x0 = sh.xt0[ox];
        u32 x1 = min(x0 + 1, last);
        float ax = sh.xta[ox];
        const float* s0 = sh.stage + 3 * (r * c.w + x0);
        const float* s1 = sh.stage + 3 * (r * c.w + x1);
#pragma unroll
        for (int k = 0; k < 3; ++k) h[k * plane + i] = lerp_ref(s0[k], s1[k], ax);
    }
    __syncthreads();
    // 3. Quads: out = lerp(H[y0], H[y1], ay), normalized, vector stores.
    for (u32 q = qa + 4 * threadIdx.x; q < qb; q += 4 * blockDim.x) {
        u32 oy = q / c.out_w;
        u32 ox = q - oy * c.out_w;
        u32 y0, y1;
        float ay;
        linear_taps_s(oy, c.h, sy, y0, y1, ay);
        const u32 i0 = ((y0 - sy0) * c.out_w + ox) >> 2, i1 = ((y1 - sy0) * c.out_w + ox) >> 2;
        const u32 p4 = plane >> 2;
        float rgb[4][3];
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            float4 t = sh.h4[k * p4 + i0];
            float4 b = sh.h4[k * p4 + i1];
            rgb[0][k] = lerp_ref(t.x, b.x, ay);
            rgb[1][k] = lerp_ref(t.y, b.y, ay);
            rgb[2][k] = lerp_ref(t.z, b.z, ay);
            rgb[3][k] = lerp_ref(t.w, b.w, ay);
        }
        store_quad(c, q, rgb, n, out);
    }
    __syncthreads();
}
#endif

// One BlockMeta entry. Every thread of the block calls it (it contains barriers).
template <int FMT, typename OUT>
__device__ __forceinline__ void octopus_block(OctoShared& sh, const BlockMeta b, const u8* __restrict__ arena,
                                              const FrameDesc* __restrict__ frames, const CropMeta* __restrict__ crops,
                                              u32 tile_pixels, const Norm& n, OUT* __restrict__ out) {
    const CropMeta c = crops[b.crop];
    const FrameDesc& f = frames[c.frame];
    u32 p0, p1;
    block_pixels(b, c, tile_pixels, p0, p1);
    if (p0 >= p1) return;
    const float sx = __fdiv_rn((float)c.w, (float)c.out_w);
    const float sy = __fdiv_rn((float)c.h, (float)c.out_h);
    // Source rows read by output rows p0 / out_w ..= (p1 - 1) / out_w.
    u32 sy0, sy1, t;
    float a;
    linear_taps_s(p0 / c.out_w, c.h, sy, sy0, t, a);
    linear_taps_s((p1 - 1) / c.out_w, c.h, sy, t, sy1, a);
    const u32 staged_px = (sy1 - sy0 + 1) * c.w;
    const bool quads = (c.out_w & 3) == 0 && (c.out_offset & 3) == 0 && (tile_pixels & 3) == 0;
#if OCTOPUS_SEPARABLE
    // Two rows of source and of H must fit for one output row at a time.
    if (quads && c.out_w <= XTAB_MAX && 2 * c.w * 3 <= STAGE_FLOATS && 2 * c.out_w * 3 <= HSTAGE_FLOATS &&
        staged_px < 4 * (p1 - p0)) {
        for (u32 ox = threadIdx.x; ox < c.out_w; ox += blockDim.x) {
            u32 x0, x1;
            float ax;
            linear_taps_s(ox, c.w, sx, x0, x1, ax);
            sh.xt0[ox] = x0;
            sh.xta[ox] = ax;
        }
        // (The barrier after the staging of the first chunk orders these writes before their reads.)
        const u32 row_end = (p1 - 1) / c.out_w + 1;
        const u32 max_rows = min(STAGE_FLOATS / (3 * c.w), HSTAGE_FLOATS / (3 * c.out_w));
        if (sy1 - sy0 + 1 <= max_rows) {  // the usual case: the whole block in one chunk
            separable_chunk<FMT, OUT>(sh, arena, f, c, sy0, sy1 - sy0 + 1, p0, p1, sy, n, out);
            return;
        }
        u32 ra = p0 / c.out_w;
        while (ra < row_end) {
            // Largest rb such that output rows ra..rb-1 read at most max_rows source rows (uniform).
            u32 a0, a1, b0, b1;
            float fa;
            (void)a1;
            linear_taps_s(ra, c.h, sy, a0, a1, fa);
            u32 rb = ra + 1;
            while (rb < row_end) {
                linear_taps_s(rb, c.h, sy, b0, b1, fa);
                if (b1 - a0 + 1 > max_rows) break;
                ++rb;
            }
            linear_taps_s(rb - 1, c.h, sy, b0, b1, fa);
            const u32 qa = max(p0, ra * c.out_w), qb = min(p1, rb * c.out_w);
            separable_chunk<FMT, OUT>(sh, arena, f, c, a0, b1 - a0 + 1, qa, qb, sy, n, out);
            ra = rb;
        }
        return;
    }
#endif
    if (staged_px * STAGE_PX_FLOATS <= STAGE_FLOATS && staged_px < 4 * (p1 - p0)) {
#if OCTOPUS_STAGE4
        stage_rows<FMT>(reinterpret_cast<float4*>(sh.stage), arena, f, c, sy0, staged_px);
#else
        for (u32 i = threadIdx.x; i < staged_px; i += blockDim.x) {
            u32 r = i / c.w;
            u32 x = i - r * c.w;
            sample_rgb<FMT>(arena, f, c.x + x, c.y + sy0 + r, sh.stage[3 * i], sh.stage[3 * i + 1], sh.stage[3 * i + 2]);
        }
        __syncthreads();
#endif
        octopus_pixels<FMT, true, OUT>(sh.stage, sy0, arena, f, c, p0, p1, sx, sy, quads, n, out);
#if OCTOPUS_PERSISTENT
        __syncthreads();  // the next entry's staging overwrites the stage
#endif
    } else {
        octopus_pixels<FMT, false, OUT>(sh.stage, sy0, arena, f, c, p0, p1, sx, sy, false, n, out);
    }
}

// CUDA block i handles BlockMeta entry i (OCTOPUS_PERSISTENT: entries i, i + gridDim.x, ...).
template <int FMT, typename OUT>
__device__ __forceinline__ void octopus_bilinear(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                                 const CropMeta* __restrict__ crops,
                                                 const BlockMeta* __restrict__ blocks, u32 nblocks, u32 tile_pixels,
                                                 Norm n, OUT* __restrict__ out) {
    __shared__ OctoShared sh;
#if OCTOPUS_PERSISTENT
    for (u32 i = blockIdx.x; i < nblocks; i += gridDim.x) {
        octopus_block<FMT, OUT>(sh, blocks[i], arena, frames, crops, tile_pixels, n, out);
    }
#else
    if (blockIdx.x < nblocks) octopus_block<FMT, OUT>(sh, blocks[blockIdx.x], arena, frames, crops, tile_pixels, n, out);
#endif
}

#define OCTOPUS(NAME, FMT, OUT)                                                                              \
    extern "C" __global__ void __launch_bounds__(OCTOPUS_MAX_THREADS, OCTOPUS_MIN_BLOCKS)                     \
        NAME(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,      \
                                    const CropMeta* __restrict__ crops, const BlockMeta* __restrict__ blocks, \
                                    u32 nblocks, u32 tile_pixels, Norm n, OUT* __restrict__ out) {           \
        octopus_bilinear<FMT, OUT>(arena, frames, crops, blocks, nblocks, tile_pixels, n, out);              \
    }

OCTOPUS(octopus_bilinear_i420_f32, FMT_I420, float)
OCTOPUS(octopus_bilinear_nv12_f32, FMT_NV12, float)
OCTOPUS(octopus_bilinear_packed_f32, FMT_PACKED, float)
OCTOPUS(octopus_bilinear_i420_f16, FMT_I420, u16)
OCTOPUS(octopus_bilinear_nv12_f16, FMT_NV12, u16)
OCTOPUS(octopus_bilinear_packed_f16, FMT_PACKED, u16)
