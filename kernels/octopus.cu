// Strategy C, "Octopus": one CUDA block per BlockMeta entry (tiles tile_begin..tile_end of one crop),
// built on the host in O(blocks). No lookup table, no search, no padding to the largest crop.
#include "common.cuh"

template <int FMT, typename OUT>
__device__ __forceinline__ void octopus_bilinear(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,
                                                 const CropMeta* __restrict__ crops,
                                                 const BlockMeta* __restrict__ blocks, u32 tile_pixels, Norm n,
                                                 OUT* __restrict__ out) {
    const BlockMeta b = blocks[blockIdx.x];
    const CropMeta c = crops[b.crop];
    const FrameDesc& f = frames[c.frame];
    const u32 npix = c.out_w * c.out_h;
    const u32 p0 = b.tile_begin * tile_pixels;
    const u32 p1 = min(b.tile_end * tile_pixels, npix);
    for (u32 p = p0 + threadIdx.x; p < p1; p += blockDim.x) {
        bilinear_pixel<FMT, OUT>(arena, f, c, p, n, out);
    }
}

#define OCTOPUS(NAME, FMT, OUT)                                                                              \
    extern "C" __global__ void NAME(const u8* __restrict__ arena, const FrameDesc* __restrict__ frames,      \
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
