// CenterNet heads to peaks (the detect stage's `decoder=centernet` on the GPU): one pass over a
// batch's score maps [images, classes, h, w] that keeps every cell at or over the score threshold
// whose score is the largest of its 3x3 neighbourhood in its class (the max-pool test of the
// CenterNet decode), with the four distances [images, 4, h, w] at that cell. Each image's peaks
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

extern "C" __global__ void centernet_peaks_f32(const float* __restrict__ heat,
                                               const float* __restrict__ wh, u32 images,
                                               u32 classes, u32 h, u32 w, float min_score, u32 cap,
                                               u32* __restrict__ counts, Peak* __restrict__ peaks) {
    const u64 plane = (u64)h * w;
    const u64 per = plane * classes;
    const u64 total = per * images;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const float s = heat[i];
        if (!(s >= min_score)) continue;  // NaN is never a peak
        const u64 img = i / per;
        const u64 r = i - img * per;
        const u64 c = r / plane;
        const u32 p = (u32)(r - c * plane);
        const u32 y = p / w, x = p - y * w;
        const float* map = heat + img * per + c * plane;
        bool peak = true;
        for (u32 yy = y > 0 ? y - 1 : 0; peak && yy <= y + 1 && yy < h; ++yy)
            for (u32 xx = x > 0 ? x - 1 : 0; xx <= x + 1 && xx < w; ++xx)
                if (map[(u64)yy * w + xx] > s) {
                    peak = false;
                    break;
                }
        if (!peak) continue;
        const u32 k = atomicAdd(&counts[img], 1u);
        if (k >= cap) continue;
        const float* d = wh + img * 4 * plane + p;
        Peak q;
        q.score = s;
        q.index = (u32)r;
        q.d[0] = d[0];
        q.d[1] = d[plane];
        q.d[2] = d[2 * plane];
        q.d[3] = d[3 * plane];
        peaks[img * cap + k] = q;
    }
}
