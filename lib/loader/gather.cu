// gather.cu - the loader's device kernels: gather samples from chunks into
// a batch, and a simulated training step that reads every byte of it.
// Plain C entry points (launchers) so that device_cuda.c stays C.
#include <cuda_runtime.h>
#include <stdint.h>

struct Dlk_gather_item {  // mirrors Dlk_gather in device.h
    const void *src;
    uint64_t dst_off;
    uint64_t nbytes;
    void *handle;
};

// Each sample is split into pieces of PIECE bytes, one block a piece
// (blockIdx.y), so that large samples fill the GPU.
#define PIECE (64u << 10)

__global__ void gather_kernel(const Dlk_gather_item *items, uint8_t *dst)
{
    const Dlk_gather_item it = items[blockIdx.x];
    uint64_t start = (uint64_t)blockIdx.y * PIECE;
    if (start >= it.nbytes)
        return;
    const uint8_t *s = (const uint8_t *)it.src + start;
    uint8_t *d = dst + it.dst_off + start;
    uint64_t n = it.nbytes - start < PIECE ? it.nbytes - start : PIECE;
    if ((((uintptr_t)s | (uintptr_t)d) & 15) == 0) {
        const uint4 *s4 = (const uint4 *)s;
        uint4 *d4 = (uint4 *)d;
        uint64_t n4 = n / 16;
        for (uint64_t i = threadIdx.x; i < n4; i += blockDim.x)
            d4[i] = s4[i];
        for (uint64_t i = n4 * 16 + threadIdx.x; i < n; i += blockDim.x)
            d[i] = s[i];
    } else {
        for (uint64_t i = threadIdx.x; i < n; i += blockDim.x)
            d[i] = s[i];
    }
}

// Each sample's fold: the sum of its little-endian 64-bit words, a short
// tail zero-padded.  Summed over the batch into *acc.
__global__ void fold_kernel(const uint8_t *buf, const Dlk_gather_item *items,
                            unsigned long long *acc, unsigned long long spin_ns)
{
    unsigned long long t0 = 0;
    if (spin_ns)
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    const Dlk_gather_item it = items[blockIdx.x];
    // pieces of PIECE bytes (a multiple of 8): word boundaries stay those
    // of the whole sample, so the fold is the same however it is split
    uint64_t start = (uint64_t)blockIdx.y * PIECE;
    if (start >= it.nbytes)
        return;
    uint64_t len = it.nbytes - start < PIECE ? it.nbytes - start : PIECE;
    const uint8_t *p = buf + it.dst_off + start;
    uint64_t words = len / 8, tail = len % 8;
    unsigned long long s = 0;
    if (((uintptr_t)p & 7) == 0) {
        const unsigned long long *w = (const unsigned long long *)p;
        for (uint64_t i = threadIdx.x; i < words; i += blockDim.x)
            s += w[i];
    } else {
        for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) {
            unsigned long long v = 0;
            for (int k = 7; k >= 0; k--)
                v = (v << 8) | p[i * 8 + k];
            s += v;
        }
    }
    if (threadIdx.x == 0 && tail) {
        unsigned long long v = 0;
        for (int k = (int)tail - 1; k >= 0; k--)
            v = (v << 8) | p[words * 8 + k];
        s += v;
    }
    // block reduction
    __shared__ unsigned long long part[32];
    for (int o = 16; o > 0; o /= 2)
        s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0;
        for (int o = 16; o > 0; o /= 2)
            s += __shfl_down_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0)
            atomicAdd(acc, s);
    }
    // the rest of the step: one thread keeps the kernel running until
    // spin_ns after it started (a model's compute, in the same launch)
    if (spin_ns && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        for (;;) {
            unsigned long long t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            if (t - t0 >= spin_ns)
                break;
        }
}

extern "C" cudaError_t Dlk_cuda_gather(const void *items, unsigned n,
                                       uint64_t max_bytes, void *dst,
                                       cudaStream_t s)
{
    if (n == 0)
        return cudaSuccess;
    dim3 grid(n, (unsigned)((max_bytes + PIECE - 1) / PIECE) ?: 1);
    gather_kernel<<<grid, 256, 0, s>>>((const Dlk_gather_item *)items,
                                       (uint8_t *)dst);
    return cudaGetLastError();
}

// The step: fold every byte, and keep the launch busy for step_ms.
extern "C" cudaError_t Dlk_cuda_fold(const void *buf, const void *items,
                                     unsigned n, uint64_t max_bytes,
                                     unsigned long long *acc, double step_ms,
                                     cudaStream_t s)
{
    if (n == 0)
        return cudaSuccess;
    dim3 grid(n, (unsigned)((max_bytes + PIECE - 1) / PIECE) ?: 1);
    fold_kernel<<<grid, 256, 0, s>>>((const uint8_t *)buf,
                                     (const Dlk_gather_item *)items, acc,
                                     step_ms > 0 ? (unsigned long long)(step_ms * 1e6) : 0);
    return cudaGetLastError();
}

// Both kernels' module loaded now (CUDA loads it at a first launch):
// asking for a kernel's attributes loads it.
extern "C" cudaError_t Dlk_cuda_gather_load(void)
{
    cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, gather_kernel);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&a, fold_kernel);
    return e;
}
