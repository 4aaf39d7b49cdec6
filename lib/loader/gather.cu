// gather.cu - the loader's device kernels: gather samples from chunks into
// a batch, and a simulated training step that reads every byte of it.
// Plain C entry points (launchers) so that device_cuda.c stays C.
#include <cuda_runtime.h>
#include <stdint.h>

struct dlk_gather_item {  // mirrors dlk_gather in device.h
    const void *src;
    uint64_t dst_off;
    uint64_t nbytes;
    void *handle;
};

__global__ void gather_kernel(const dlk_gather_item *items, uint8_t *dst)
{
    const dlk_gather_item it = items[blockIdx.x];
    const uint8_t *s = (const uint8_t *)it.src;
    uint8_t *d = dst + it.dst_off;
    uint64_t n = it.nbytes;
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
__global__ void fold_kernel(const uint8_t *buf, const dlk_gather_item *items,
                            unsigned long long *acc)
{
    const dlk_gather_item it = items[blockIdx.x];
    const uint8_t *p = buf + it.dst_off;
    uint64_t words = it.nbytes / 8, tail = it.nbytes % 8;
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
}

// Keep the stream busy for about `ns` nanoseconds (a model's compute).
__global__ void spin_kernel(unsigned long long ns)
{
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 >= ns)
            break;
    }
}

extern "C" cudaError_t dlk_cuda_gather(const void *items, unsigned n,
                                       void *dst, cudaStream_t s)
{
    if (n == 0)
        return cudaSuccess;
    gather_kernel<<<n, 256, 0, s>>>((const dlk_gather_item *)items,
                                    (uint8_t *)dst);
    return cudaGetLastError();
}

extern "C" cudaError_t dlk_cuda_fold(const void *buf, const void *items,
                                     unsigned n, unsigned long long *acc,
                                     cudaStream_t s)
{
    if (n == 0)
        return cudaSuccess;
    fold_kernel<<<n, 256, 0, s>>>((const uint8_t *)buf,
                                  (const dlk_gather_item *)items, acc);
    return cudaGetLastError();
}

extern "C" cudaError_t dlk_cuda_spin(double ms, cudaStream_t s)
{
    if (ms <= 0)
        return cudaSuccess;
    spin_kernel<<<1, 32, 0, s>>>((unsigned long long)(ms * 1e6));
    return cudaGetLastError();
}
