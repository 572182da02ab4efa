// CenterNet heads to peaks (the detect stage's `decoder=centernet` on the GPU): one pass over a
// batch's score maps [images, classes, h, w] (f32 or f16) that keeps every cell at or over the
// score threshold whose score is the largest of its 3x3 neighbourhood in its class (the max-pool
// test of the CenterNet decode), with the four distances [images, 4, h, w] at that cell. Each image's peaks
// go to its own list of `cap` slots through one atomicAdd per peak (peaks are few: a cell must beat
// its eight neighbours and the threshold); the count may exceed `cap`, which the host reports. The
// host then takes the best 100 of each list (src/detect/centernet.rs `select`, the same for the CPU
// path), so the order the atomics give does not matter.
#include "common.cuh"

// detect::centernet::Peak.
struct Peak {
    float score;
    u32 index;  // (class * h + y) * w + x
    float d[4];
};

// A score or distance as f32: the heads are f32, or f16 (IEEE half bits) for a float16 model.
__device__ __forceinline__ float head(const float* p, u64 i) { return p[i]; }
__device__ __forceinline__ float head(const u16* p, u64 i) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(p[i]));
    return f;
}

// `min_score` is in the heads' own units: a probability, or its logit for a model whose score map
// holds logits (the host takes the sigmoid of the peaks' scores).
template <typename T>
__device__ __forceinline__ void peaks(const T* __restrict__ heat, const T* __restrict__ wh,
                                      u32 images, u32 classes, u32 h, u32 w, float min_score,
                                      u32 cap, u32* __restrict__ counts, Peak* __restrict__ peaks) {
    const u64 plane = (u64)h * w;
    const u64 per = plane * classes;
    const u64 total = per * images;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const float s = head(heat, i);
        if (!(s >= min_score)) continue;  // NaN is never a peak
        const u64 img = i / per;
        const u64 r = i - img * per;
        const u64 c = r / plane;
        const u32 p = (u32)(r - c * plane);
        const u32 y = p / w, x = p - y * w;
        const T* map = heat + img * per + c * plane;
        bool peak = true;
        for (u32 yy = y > 0 ? y - 1 : 0; peak && yy <= y + 1 && yy < h; ++yy)
            for (u32 xx = x > 0 ? x - 1 : 0; xx <= x + 1 && xx < w; ++xx)
                if (head(map, (u64)yy * w + xx) > s) {
                    peak = false;
                    break;
                }
        if (!peak) continue;
        const u32 k = atomicAdd(&counts[img], 1u);
        if (k >= cap) continue;
        const T* d = wh + img * 4 * plane + p;
        Peak q;
        q.score = s;
        q.index = (u32)r;
        q.d[0] = head(d, 0);
        q.d[1] = head(d, plane);
        q.d[2] = head(d, 2 * plane);
        q.d[3] = head(d, 3 * plane);
        peaks[img * cap + k] = q;
    }
}

#define CENTERNET_PEAKS(NAME, T)                                                                   \
    extern "C" __global__ void NAME(const T* __restrict__ heat, const T* __restrict__ wh,          \
                                    u32 images, u32 classes, u32 h, u32 w, float min_score,       \
                                    u32 cap, u32* __restrict__ counts, Peak* __restrict__ out) {  \
        peaks<T>(heat, wh, images, classes, h, w, min_score, cap, counts, out);                    \
    }

CENTERNET_PEAKS(centernet_peaks_f32, float)
CENTERNET_PEAKS(centernet_peaks_f16, u16)
