/* topk_cuda.h - what the CUDA parts of vector search share: the scoring
 * kernels' launcher (topk_cuda.cu) and how a failed CUDA call becomes a
 * status.  Only with DLK_HAVE_CUDA. */
#ifndef DLK_QUERY_TOPK_CUDA_H
#define DLK_QUERY_TOPK_CUDA_H

#include <cuda_runtime_api.h>
#include <stdint.h>

/* Score n rows of dim values (f32, or f64 when f64 is set) at x (device
 * memory) against q (device, dim floats; qq = q.q as the CPU sums it)
 * into out[0..n), queued on stream st. */
cudaError_t Dlk_cuda_topk_score(const void *x, int f64, uint64_t n,
                                uint32_t dim, const float *q, double qq,
                                int metric, double *out, cudaStream_t st);

/* Return DLK_EGPU from the calling function (which has a dlk_error *err)
 * when a CUDA call fails. */
#define CU(call, what)                                                      \
    do {                                                                    \
        cudaError_t e_ = (call);                                            \
        if (e_ != cudaSuccess)                                              \
            return Dlk_fail(err, DLK_EGPU, "vector search on the GPU: %s: " \
                            "%s", what, cudaGetErrorString(e_));            \
    } while (0)

#endif
