/* copy_rate.c - the pinned host-to-device copy rate of a GPU: the line
 * rate a loader's figures are set beside (dlk_cuda_copy_rate). */
#include "util/error.h"
#include "util/clock.h"
#include "dlk_bench.h"

#include "dlk_bench.h"

#ifdef DLK_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <string.h>

#define PIECE ((size_t)16 << 20) /* as the loader's spans are copied */
#define STREAMS 4
#define COPIES 16                /* a stream's in a trial: 1 GiB in all */
#define TRIALS 3

/* One trial's copies, queued on every stream, then waited for. */
static cudaError_t trial(const char *host, char *dev, cudaStream_t *st,
                         int copies, double *seconds)
{
    cudaError_t e = cudaDeviceSynchronize();
    double t0 = Dlk_now_s();
    for (int r = 0; !e && r < copies; r++)
        for (int i = 0; !e && i < STREAMS; i++)
            e = cudaMemcpyAsync(dev + i * PIECE, host + i * PIECE, PIECE,
                                cudaMemcpyHostToDevice, st[i]);
    if (!e)
        e = cudaDeviceSynchronize();
    *seconds = Dlk_now_s() - t0;
    return e;
}

dlk_status dlk_cuda_copy_rate(int device, double *bytes_per_s, dlk_error *err)
{
    *bytes_per_s = 0;
    int before = -1;
    cudaGetDevice(&before);
    char *host = NULL, *dev = NULL;
    cudaStream_t st[STREAMS] = {0};
    const char *what = "cudaSetDevice";
    cudaError_t e = cudaSetDevice(device);
    if (!e && (what = "cudaHostAlloc",
               e = cudaHostAlloc((void **)&host, STREAMS * PIECE,
                                 cudaHostAllocDefault)) == cudaSuccess)
        what = "cudaMalloc", e = cudaMalloc((void **)&dev, STREAMS * PIECE);
    for (int i = 0; !e && i < STREAMS; i++)
        what = "cudaStreamCreate", e = cudaStreamCreateWithFlags(
                                       &st[i], cudaStreamNonBlocking);
    double s = 0, best = 0;
    if (!e) {
        /* the pages touched and the link woken, untimed */
        memset(host, 1, STREAMS * PIECE);
        what = "cudaMemcpyAsync", e = trial(host, dev, st, 1, &s);
    }
    for (int t = 0; !e && t < TRIALS; t++) {
        e = trial(host, dev, st, COPIES, &s);
        double rate = s > 0 ? (double)COPIES * STREAMS * PIECE / s : 0;
        if (rate > best)
            best = rate;
    }
    for (int i = 0; i < STREAMS; i++)
        if (st[i])
            cudaStreamDestroy(st[i]);
    cudaFree(dev);
    cudaFreeHost(host);
    if (before >= 0)
        cudaSetDevice(before);
    if (e)
        return Dlk_fail(err, DLK_EGPU, "cuda:%d: %s: %s", device, what,
                        cudaGetErrorString(e));
    *bytes_per_s = best;
    return DLK_OK;
}
#else
dlk_status dlk_cuda_copy_rate(int device, double *bytes_per_s, dlk_error *err)
{
    *bytes_per_s = 0;
    return Dlk_fail(err, DLK_EGPU, "cuda:%d: this dlk was built without "
                    "CUDA", device);
}
#endif
