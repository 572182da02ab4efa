// Per-tile statistics (the tilestats stage): for every tile of a frame, the exact integer sums of
// one band's samples (sum, sum of squares, samples at or above a threshold, min, max), in ONE
// launch for all the tiles of a frame, however different their sizes.
//
// Block metadata balanced by tile area: the host cuts each tile's pixels (in raster order) into
// runs of `block_pixels` (one BlockMeta entry each, `tile_begin..tile_end` counted in runs of
// block_pixels), so a 512x512 tile gets 16 CUDA blocks and a 128x128 one gets 1 with the default
// 16384. Two-level reduction: each CUDA block reduces its run (warp shuffles, then the warps'
// partials in shared memory) to one TileSums; a tile of one block writes it out; a tile of several
// blocks has each block store its partial, and the block that finishes last (one atomicAdd per
// block on the tile's counter: at most a few dozen per tile, never one per pixel) reduces the
// tile's partials and resets the counter for the next launch. Integer sums are exact, so every
// backend gives the same numbers (src/tilestats/cpu.rs is the reference).
//
// The baseline of `octopipe bench tiles` is here too: tilestats_padded_gray16 pads every tile to
// pad_w x pad_h (the same number of blocks per tile, no metadata), with the same reduction. The
// other baseline, one launch per tile, is tilestats_gray16 launched on one tile's blocks at a time
// (`block_base`).
#include "common.cuh"

#define TS_THREADS 256
#define TS_WARPS (TS_THREADS / 32)
#define FULL_MASK 0xffffffffu

// The band a frame gives, as template arguments.
#define BAND_GRAY16 0  // one little-endian 16-bit sample per pixel
#define BAND_GRAY8 1   // one byte per pixel (the luma plane of a YUV frame)
#define BAND_PACKED 2  // (w0 * c0 + w1 * c1 + w2 * c2 + 128) >> 8 of a packed RGB pixel

// tilestats::Band: how one sample is read.
struct Band {
    u32 stride;      // bytes per row
    u32 bpp;         // packed: bytes per pixel
    u32 idx[3];      // packed: byte index of the three weighted channels (R, G, B)
    u32 weight[3];   // packed: their weights (sum 256)
    u32 above_from;  // samples >= this count as above the level
};

// frame::PixelSums.
struct TileSums {
    u64 sum;
    u64 sum_sq;
    u64 above;
    u32 min;
    u32 max;
};

__device__ __forceinline__ TileSums empty_sums() {
    TileSums s;
    s.sum = 0;
    s.sum_sq = 0;
    s.above = 0;
    s.min = 0xffffffffu;
    s.max = 0;
    return s;
}

__device__ __forceinline__ void merge(TileSums& a, const TileSums& b) {
    a.sum += b.sum;
    a.sum_sq += b.sum_sq;
    a.above += b.above;
    a.min = min(a.min, b.min);
    a.max = max(a.max, b.max);
}

template <int FMT>
__device__ __forceinline__ u32 sample(const u8* __restrict__ frame, const Band& b, u32 x, u32 y) {
    const u8* row = frame + (u64)y * b.stride;
    if (FMT == BAND_GRAY16) return (u32)__ldg(reinterpret_cast<const u16*>(row) + x);
    if (FMT == BAND_GRAY8) return (u32)__ldg(row + x);
    const u8* p = row + (u64)x * b.bpp;
    return (b.weight[0] * __ldg(p + b.idx[0]) + b.weight[1] * __ldg(p + b.idx[1]) +
            b.weight[2] * __ldg(p + b.idx[2]) + 128u) >> 8;
}

__device__ __forceinline__ void add(TileSums& s, u32 v, u32 above_from) {
    const u64 w = v;
    s.sum += w;
    s.sum_sq += w * w;
    s.above += (v >= above_from);
    s.min = min(s.min, v);
    s.max = max(s.max, v);
}

__device__ __forceinline__ void warp_reduce(TileSums& s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        s.sum += __shfl_down_sync(FULL_MASK, s.sum, o);
        s.sum_sq += __shfl_down_sync(FULL_MASK, s.sum_sq, o);
        s.above += __shfl_down_sync(FULL_MASK, s.above, o);
        s.min = min(s.min, __shfl_down_sync(FULL_MASK, s.min, o));
        s.max = max(s.max, __shfl_down_sync(FULL_MASK, s.max, o));
    }
}

// The block's sums, valid in thread 0. Every thread of the block must call it.
__device__ TileSums block_reduce(TileSums s) {
    __shared__ TileSums warps[TS_WARPS];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // a previous call's readers are done with `warps`
    warp_reduce(s);
    if (lane == 0) warps[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (blockDim.x >> 5) ? warps[lane] : empty_sums();
        warp_reduce(s);
    }
    return s;
}

// The second level: `s` (valid in thread 0) is block `gb`'s part of tile `tile`, whose `nb` blocks
// are gb_first..gb_first + nb. One block: written out. Several: stored as a partial; the last block
// to finish sums the tile's partials (read through L2: other blocks wrote them) and resets the
// tile's counter.
__device__ void finish_tile(TileSums s, u32 tile, u32 gb, u32 gb_first, u32 nb,
                            TileSums* __restrict__ partials, u32* __restrict__ counters,
                            TileSums* __restrict__ out) {
    __shared__ bool last;
    if (nb == 1) {
        if (threadIdx.x == 0) out[tile] = s;
        return;
    }
    if (threadIdx.x == 0) {
        partials[gb] = s;
        __threadfence();
        last = atomicAdd(&counters[tile], 1u) == nb - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    TileSums t = empty_sums();
    for (u32 i = gb_first + threadIdx.x; i < gb_first + nb; i += blockDim.x) {
        const TileSums* p = partials + i;
        TileSums q;
        q.sum = __ldcg(&p->sum);
        q.sum_sq = __ldcg(&p->sum_sq);
        q.above = __ldcg(&p->above);
        q.min = __ldcg(&p->min);
        q.max = __ldcg(&p->max);
        merge(t, q);
    }
    t = block_reduce(t);
    if (threadIdx.x == 0) {
        out[tile] = t;
        counters[tile] = 0;
    }
}

// One CUDA block per BlockMeta entry block_base + blockIdx.x; `first[t]..first[t + 1]` are tile
// t's entries (tiles = the crops' rectangles, in frame pixels).
template <int FMT>
__device__ void tilestats_blocks(const u8* __restrict__ frame, const Band band,
                                 const CropMeta* __restrict__ tiles, const BlockMeta* __restrict__ blocks,
                                 const u32* __restrict__ first, u32 block_pixels, u32 block_base,
                                 TileSums* __restrict__ partials, u32* __restrict__ counters,
                                 TileSums* __restrict__ out) {
    const u32 gb = block_base + blockIdx.x;
    const BlockMeta m = blocks[gb];
    const CropMeta c = tiles[m.crop];
    const u32 n = c.w * c.h;
    const u32 end = min(m.tile_end * block_pixels, n);
    TileSums s = empty_sums();
    // Pixel p of the tile is (p % w, p / w); threads stride by blockDim.x, carried incrementally.
    u32 p = m.tile_begin * block_pixels + threadIdx.x;
    u32 ly = p / c.w, lx = p - ly * c.w;
    const u32 sy = blockDim.x / c.w, sx = blockDim.x - sy * c.w;
    for (; p < end; p += blockDim.x) {
        add(s, sample<FMT>(frame, band, c.x + lx, c.y + ly), band.above_from);
        lx += sx;
        ly += sy;
        if (lx >= c.w) {
            lx -= c.w;
            ly += 1;
        }
    }
    s = block_reduce(s);
    const u32 f = first[m.crop];
    finish_tile(s, m.crop, gb, f, first[m.crop + 1] - f, partials, counters, out);
}

#define TILESTATS_ENTRY(name, FMT)                                                                     \
    extern "C" __global__ void __launch_bounds__(TS_THREADS)                                           \
        name(const u8* __restrict__ frame, const Band band, const CropMeta* __restrict__ tiles,        \
             const BlockMeta* __restrict__ blocks, const u32* __restrict__ first, u32 block_pixels,   \
             u32 block_base, TileSums* __restrict__ partials, u32* __restrict__ counters,             \
             TileSums* __restrict__ out) {                                                             \
        tilestats_blocks<FMT>(frame, band, tiles, blocks, first, block_pixels, block_base, partials, \
                              counters, out);                                                          \
    }

TILESTATS_ENTRY(tilestats_gray16, BAND_GRAY16)
TILESTATS_ENTRY(tilestats_gray8, BAND_GRAY8)
TILESTATS_ENTRY(tilestats_packed, BAND_PACKED)

// The padded baseline: every tile padded to pad_w x pad_h, `per_tile` CUDA blocks of block_pixels
// padded pixels each; the pixels outside the tile are skipped (but their threads still step over
// them). Tiles larger than the pad are refused by the launcher.
extern "C" __global__ void __launch_bounds__(TS_THREADS)
    tilestats_padded_gray16(const u8* __restrict__ frame, const Band band, const CropMeta* __restrict__ tiles,
                            u32 pad_w, u32 pad_h, u32 block_pixels, u32 per_tile,
                            TileSums* __restrict__ partials, u32* __restrict__ counters,
                            TileSums* __restrict__ out) {
    const u32 tile = blockIdx.x / per_tile, k = blockIdx.x - tile * per_tile;
    const CropMeta c = tiles[tile];
    const u32 end = min((k + 1) * block_pixels, pad_w * pad_h);
    TileSums s = empty_sums();
    // Padded pixel q is (q % pad_w, q / pad_w), carried incrementally as in tilestats_blocks.
    u32 q = k * block_pixels + threadIdx.x;
    u32 ly = q / pad_w, lx = q - ly * pad_w;
    const u32 sy = blockDim.x / pad_w, sx = blockDim.x - sy * pad_w;
    for (; q < end; q += blockDim.x) {
        if (lx < c.w && ly < c.h)
            add(s, sample<BAND_GRAY16>(frame, band, c.x + lx, c.y + ly), band.above_from);
        lx += sx;
        ly += sy;
        if (lx >= pad_w) {
            lx -= pad_w;
            ly += 1;
        }
    }
    s = block_reduce(s);
    finish_tile(s, tile, blockIdx.x, tile * per_tile, per_tile, partials, counters, out);
}
