// augment.cu - the loader's augmentation on a CUDA device: one thread
// block a (sample, frame), reading the stored pixels straight from the
// chunk's device copy, so that the augmentation is the gather (one pass
// over the bytes).  Same parameters as the cpu (augment_params.h,
// computed on the host for each sample) and the same filter, taken as a
// direct 2-D sum of the separable weights.
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "augment_params.h"
}

struct Dlk_aug_item {  // mirrors Dlk_aug_item in device_cuda.c
    const uint8_t *src;
    uint64_t dst_off;      // of frame 0
    uint64_t in_frame, out_frame;
    int32_t h, w, c, frames;
    Dlk_aug_params p;
};

// One dimension's filter for output index i: first source index, count,
// and the normaliser; the weight of tap j is tap(...).
struct span1 {
    int32_t lo, n;
    float center, inv, tot;
};

__device__ static span1 span_of(int32_t in, int32_t out, int32_t i)
{
    span1 s;
    float scale = (float)in / (float)out;
    float support = scale >= 1.f ? scale : 1.f;
    s.inv = scale >= 1.f ? 1.f / scale : 1.f;
    s.center = scale * (i + 0.5f);
    int32_t lo = (int32_t)(s.center - support + 0.5f);
    int32_t hi = (int32_t)(s.center + support + 0.5f);
    s.lo = lo < 0 ? 0 : lo;
    s.n = (hi > in ? in : hi) - s.lo;
    s.tot = 0;
    for (int32_t j = 0; j < s.n; j++) {
        float x = ((float)(j + s.lo) - s.center + 0.5f) * s.inv;
        float w = 1.f - fabsf(x);
        s.tot += w > 0 ? w : 0;
    }
    return s;
}

__device__ static float tap(const span1 &s, int32_t j)
{
    float x = ((float)(j + s.lo) - s.center + 0.5f) * s.inv;
    float w = 1.f - fabsf(x);
    return w > 0 ? w / s.tot : 0;
}

__device__ static float clamp01(float x) { return fminf(fmaxf(x, 0.f), 1.f); }

// The resampled, brightness-adjusted pixel (oy, ox) (unflipped) on 0..1.
__device__ static void pixel(const Dlk_aug_item &it, const uint8_t *src,
                             int32_t oy, int32_t ox, float *v)
{
    const Dlk_aug_params &p = it.p;
    span1 sy = span_of(p.h, p.rh, p.oy + oy);
    span1 sx = span_of(p.w, p.rw, p.ox + ox);
    float a[3] = {0, 0, 0};
    for (int32_t y = 0; y < sy.n; y++) {
        float wy = tap(sy, y);
        const uint8_t *row =
            src + ((size_t)(p.top + sy.lo + y) * it.w + p.left + sx.lo) * it.c;
        for (int32_t x = 0; x < sx.n; x++) {
            float w = wy * tap(sx, x);
            for (int32_t c = 0; c < it.c; c++)
                a[c] += w * row[(size_t)x * it.c + c];
        }
    }
    for (int32_t c = 0; c < it.c; c++) {
        v[c] = a[c] / 255.f;
        if (p.bright != 1.f)
            v[c] = clamp01(v[c] * p.bright);
    }
}

__device__ static float gray(const float *v, int32_t c)
{
    return c == 3 ? 0.299f * v[0] + 0.587f * v[1] + 0.114f * v[2] : v[0];
}

__global__ void augment_kernel(const Dlk_aug_item *items, Dlk_aug_spec sp,
                               uint8_t *dst)
{
    const Dlk_aug_item it = items[blockIdx.x];
    int32_t f = (int32_t)blockIdx.y;
    if (f >= it.frames)
        return;
    const uint8_t *src = it.src + it.in_frame * f;
    uint8_t *out = dst + it.dst_off + it.out_frame * f;
    int32_t OH = (int32_t)sp.out_h, OW = (int32_t)sp.out_w;
    int32_t npx = OH * OW;
    size_t plane = (size_t)npx;
    __shared__ float mean;
    if (it.p.contrast != 1.f) {
        // the contrast blend needs the image's mean gray: a first pass
        __shared__ float sum;
        if (threadIdx.x == 0)
            sum = 0;
        __syncthreads();
        float local = 0;
        for (int32_t i = threadIdx.x; i < npx; i += blockDim.x) {
            float v[3];
            pixel(it, src, i / OW, i % OW, v);
            local += gray(v, it.c);
        }
        atomicAdd(&sum, local);
        __syncthreads();
        if (threadIdx.x == 0)
            mean = sum / (float)npx;
        __syncthreads();
    }
    for (int32_t i = threadIdx.x; i < npx; i += blockDim.x) {
        int32_t oy = i / OW, ox = i % OW;
        int32_t sy = it.p.vflip ? OH - 1 - oy : oy;
        int32_t sx = it.p.hflip ? OW - 1 - ox : ox;
        float v[3];
        pixel(it, src, sy, sx, v);
        if (it.p.contrast != 1.f)
            for (int32_t c = 0; c < it.c; c++)
                v[c] = clamp01(it.p.contrast * v[c] +
                               (1.f - it.p.contrast) * mean);
        if (it.p.satur != 1.f && it.c == 3) {
            float g = gray(v, 3);
            for (int32_t c = 0; c < 3; c++)
                v[c] = clamp01(it.p.satur * v[c] + (1.f - it.p.satur) * g);
        }
        for (int32_t c = 0; c < it.c; c++) {
            float x = v[c];
            if (sp.normalize)
                x = (x - sp.mean[c % 3]) / sp.std[c % 3];
            size_t at = sp.layout == DLK_AUG_NCHW
                            ? (size_t)c * plane + (size_t)oy * OW + ox
                            : ((size_t)oy * OW + ox) * it.c + c;
            switch (sp.dtype) {
            case DLK_AUG_U8: {
                float r = rintf(x * 255.f);
                out[at] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
                break;
            }
            case DLK_AUG_F16: ((uint16_t *)out)[at] = Dlk_aug_f16(x); break;
            case DLK_AUG_BF16: ((uint16_t *)out)[at] = Dlk_aug_bf16(x); break;
            default: ((float *)out)[at] = x; break;
            }
        }
    }
}

extern "C" cudaError_t Dlk_cuda_augment(const void *items, unsigned n,
                                        unsigned max_frames,
                                        const Dlk_aug_spec *sp, void *dst,
                                        cudaStream_t s)
{
    if (n == 0)
        return cudaSuccess;
    dim3 grid(n, max_frames ? max_frames : 1);
    augment_kernel<<<grid, 256, 0, s>>>((const Dlk_aug_item *)items, *sp,
                                        (uint8_t *)dst);
    return cudaGetLastError();
}
