// Strategy C, "Octopus": one CUDA block per BlockMeta entry (tiles tile_begin..tile_end of one crop),
// built on the host in O(blocks). No lookup table, no search, no padding to the largest crop.
//
// Because a block knows its crop and its output rows, it can first convert the source rows those
// outputs read to RGB once, in shared memory ("staging"), and then resize from there: an upscaled
// crop (most VisDrone objects are smaller than the model input) reads each source pixel for many
// outputs, and the YUV to RGB conversion is the costly part. A block stages only when its rows fit
// STAGE_FLOATS and staging converts fewer pixels than the direct path would (4 taps per output);
// otherwise it samples the frame directly. Both paths compute the same values.
#include "common.cuh"

#ifndef STAGE_FLOATS
#define STAGE_FLOATS 2048  // 8 KiB of RGB floats per block
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
        const float* s = stage + 3 * ((y - sy0) * c.w + x);
        v[0] = s[0];
        v[1] = s[1];
        v[2] = s[2];
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
__device__ __forceinline__ void octopus_pixels(const float* stage, u32 sy0, const u8* __restrict__ arena,
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

template <int FMT, typename OUT>
__device__ __forceinline__ void octopus_bilinear(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                                 const CropMeta* __restrict__ crops,
                                                 const BlockMeta* __restrict__ blocks, u32 tile_pixels, Norm n,
                                                 OUT* __restrict__ out) {
    __shared__ float stage[STAGE_FLOATS];
    const BlockMeta b = blocks[blockIdx.x];
    const CropMeta c = crops[b.crop];
    const FrameDesc& f = frames[c.frame];
    const u32 npix = c.out_w * c.out_h;
    const u32 p0 = b.tile_begin * tile_pixels;
    const u32 p1 = min(b.tile_end * tile_pixels, npix);
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
    if (staged_px * 3 <= STAGE_FLOATS && staged_px < 4 * (p1 - p0)) {
        for (u32 i = threadIdx.x; i < staged_px; i += blockDim.x) {
            u32 r = i / c.w;
            u32 x = i - r * c.w;
            sample_rgb<FMT>(arena, f, c.x + x, c.y + sy0 + r, stage[3 * i], stage[3 * i + 1], stage[3 * i + 2]);
        }
        __syncthreads();
        octopus_pixels<FMT, true, OUT>(stage, sy0, arena, f, c, p0, p1, sx, sy, quads, n, out);
    } else {
        octopus_pixels<FMT, false, OUT>(stage, sy0, arena, f, c, p0, p1, sx, sy, false, n, out);
    }
}

#define OCTOPUS(NAME, FMT, OUT)                                                                              \
    extern "C" __global__ void __launch_bounds__(OCTOPUS_MAX_THREADS, OCTOPUS_MIN_BLOCKS)                     \
        NAME(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,      \
                                    const CropMeta* __restrict__ crops, const BlockMeta* __restrict__ blocks, \
                                    u32 tile_pixels, Norm n, OUT* __restrict__ out) {                        \
        octopus_bilinear<FMT, OUT>(arena, frames, crops, blocks, tile_pixels, n, out);                       \
    }

OCTOPUS(octopus_bilinear_i420_f32, FMT_I420, float)
OCTOPUS(octopus_bilinear_nv12_f32, FMT_NV12, float)
OCTOPUS(octopus_bilinear_packed_f32, FMT_PACKED, float)
OCTOPUS(octopus_bilinear_i420_f16, FMT_I420, u16)
OCTOPUS(octopus_bilinear_nv12_f16, FMT_NV12, u16)
OCTOPUS(octopus_bilinear_packed_f16, FMT_PACKED, u16)
