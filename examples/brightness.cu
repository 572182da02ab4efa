// The `brightness` stage of examples/03-cuda-stage.rs: the sum of each box's samples in the frame's
// luma plane, one CUDA block per box. Compiled at run time by octopipe-cuda (NVRTC), which pastes
// the shared header in place of the include.
#include "common.cuh"

#define BRIGHTNESS_THREADS 256

// `boxes`: x, y, w, h per box (inside the plane); `sums[b]`: box b's sum of samples.
extern "C" __global__ void __launch_bounds__(BRIGHTNESS_THREADS)
    box_luma_sums(const u8* __restrict__ plane, u32 stride, const u32* __restrict__ boxes,
                  u64* __restrict__ sums) {
    const u32* box = boxes + 4 * blockIdx.x;
    const u32 x0 = box[0], y0 = box[1], w = box[2], h = box[3];
    u64 acc = 0;
    for (u32 i = threadIdx.x; i < w * h; i += blockDim.x) {
        acc += plane[(u64)(y0 + i / w) * stride + x0 + i % w];
    }
    __shared__ u64 part[BRIGHTNESS_THREADS];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (u32 s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = part[0];
}
