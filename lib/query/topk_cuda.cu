// topk_cuda.cu - vector search's scoring kernels: the goodness of each
// staged row against the query, computed with the same floating-point
// operations in the same order as the CPU engine (topk.c: dot_f32,
// dot_f64, goodness), so that both give bit-identical scores and hence
// the same rows in the same order.  Every operation is an explicitly
// rounded intrinsic: nvcc would otherwise fuse a multiply and an add
// into one FMA, which rounds once where the CPU rounds twice.
// A plain C entry point (the launcher) keeps topk_gpu.c C.
#include <cuda_runtime.h>
#include <stdint.h>

// goodness() of topk.c; metric as dlk_metric (0 cosine, 1 l2, 2 ip)
__device__ static double goodness(int metric, double dot, double xx,
                                  double qq)
{
    if (metric == 2)
        return dot;
    if (metric == 1)
        return -__dadd_rn(__dsub_rn(xx, __dmul_rn(2.0, dot)), qq);
    return xx > 0 && qq > 0
               ? __ddiv_rn(dot, __dmul_rn(__dsqrt_rn(xx), __dsqrt_rn(qq)))
               : 0.0;
}

// f32 rows: 16 threads a row, thread l holding lane l of dot_f32's 16
// float lanes (elements l, l+16, l+32, ...), so that each lane's sums
// are the CPU's; the lanes are then added in double in dot_f32's order
// and the tail (dim % 16 elements) in double by the row's first thread.
#define LANES 16
#define F32_BLOCK 256

__global__ void score_f32(const float *__restrict__ x, uint64_t n,
                          uint32_t dim, const float *__restrict__ q,
                          double qq, int metric, double *__restrict__ out)
{
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t row = t / LANES;
    unsigned lane = threadIdx.x % LANES;
    bool live = row < n;
    const float *r = x + (live ? row : 0) * dim;
    uint32_t body = dim - dim % LANES;
    float d = 0.0f, s = 0.0f;
    if (live)
        for (uint32_t i = lane; i < body; i += LANES) {
            float a = r[i], c = q[i];
            d = __fadd_rn(d, __fmul_rn(a, c));
            s = __fadd_rn(s, __fmul_rn(a, a));
        }
    // dot_f32: for l in 0..7: acc += (double)d0[l] + (double)d1[l],
    // where d0[l] is lane l and d1[l] lane l + 8
    float d8 = __shfl_down_sync(0xffffffffu, d, 8, LANES);
    float s8 = __shfl_down_sync(0xffffffffu, s, 8, LANES);
    double pd = __dadd_rn((double)d, (double)d8);
    double ps = __dadd_rn((double)s, (double)s8);
    double dot = 0.0, xx = 0.0;
    for (int l = 0; l < 8; l++) {
        double a = __shfl_sync(0xffffffffu, pd, l, LANES);
        double b = __shfl_sync(0xffffffffu, ps, l, LANES);
        dot = __dadd_rn(dot, a);
        xx = __dadd_rn(xx, b);
    }
    if (!live || lane != 0)
        return;
    for (uint32_t i = body; i < dim; i++) {
        double a = r[i];
        dot = __dadd_rn(dot, __dmul_rn(a, (double)q[i]));
        xx = __dadd_rn(xx, __dmul_rn(a, a));
    }
    out[row] = goodness(metric, dot, xx, qq);
}

// f64 rows: dot_f64 is one sequential sum, so one thread a row.
#define F64_BLOCK 128

__global__ void score_f64(const double *__restrict__ x, uint64_t n,
                          uint32_t dim, const float *__restrict__ q,
                          double qq, int metric, double *__restrict__ out)
{
    uint64_t row = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n)
        return;
    const double *r = x + row * dim;
    double dot = 0.0, xx = 0.0;
    for (uint32_t i = 0; i < dim; i++) {
        double a = r[i];
        dot = __dadd_rn(dot, __dmul_rn(a, (double)q[i]));
        xx = __dadd_rn(xx, __dmul_rn(a, a));
    }
    out[row] = goodness(metric, dot, xx, qq);
}

// Score n rows of dim values (f32, or f64 when f64 is set) at x (device
// memory) against q (device, dim floats; qq = q.q as the CPU sums it)
// into out[0..n), queued on stream st.
extern "C" cudaError_t Dlk_cuda_topk_score(const void *x, int f64,
                                           uint64_t n, uint32_t dim,
                                           const float *q, double qq,
                                           int metric, double *out,
                                           cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    if (f64) {
        uint64_t blocks = (n + F64_BLOCK - 1) / F64_BLOCK;
        score_f64<<<(unsigned)blocks, F64_BLOCK, 0, st>>>(
            (const double *)x, n, dim, q, qq, metric, out);
    } else {
        uint64_t blocks = (n * LANES + F32_BLOCK - 1) / F32_BLOCK;
        score_f32<<<(unsigned)blocks, F32_BLOCK, 0, st>>>(
            (const float *)x, n, dim, q, qq, metric, out);
    }
    return cudaGetLastError();
}
