// The crop rectangles of UploadMode::Rects pulled by the GPU itself: the frames lie in page-locked
// host memory, which the GPU reads over the bus (unified addressing), so no host thread gathers rows
// and no copy is queued for them. The table of rectangles is the kernel's parameter (no copy to wait
// for): the gather starts at once and runs while the host builds the batch's metadata.
//
// One CUDA block row per GatherRect (grid.x = entries, grid.y = blocks per entry); each thread first
// issues GATHER_UNROLL independent loads, then stores them, so that a warp keeps several bus reads in
// flight instead of waiting for each.
#include "common.cuh"

#ifndef GATHER_UNROLL
#define GATHER_UNROLL 8
#endif
// Entries per launch: the parameter (8 + 32 * GATHER_MAX bytes) stays under 4 KiB.
#define GATHER_MAX 120

struct GatherTable {
    u32 n;
    u32 pad_;
    GatherRect rects[GATHER_MAX];
};

extern "C" __global__ void gather_rects(const GatherTable table, u8* __restrict__ arena) {
    if (blockIdx.x >= table.n) return;
    const GatherRect r = table.rects[blockIdx.x];
    const u8* src = reinterpret_cast<const u8*>(r.src);
    u8* dst = arena + r.dst;
    const u32 n = r.row_bytes * r.rows;
    const u32 step = blockDim.x * GATHER_UNROLL;
    for (u32 base = blockIdx.y * step + threadIdx.x; base < n; base += gridDim.y * step) {
        u8 v[GATHER_UNROLL];
#pragma unroll
        for (int k = 0; k < GATHER_UNROLL; ++k) {
            const u32 i = base + k * blockDim.x;
            if (i < n) {
                const u32 row = i / r.row_bytes;
                v[k] = src[(u64)row * r.src_stride + (i - row * r.row_bytes)];
            }
        }
#pragma unroll
        for (int k = 0; k < GATHER_UNROLL; ++k) {
            const u32 i = base + k * blockDim.x;
            if (i < n) dst[i] = v[k];
        }
    }
}
