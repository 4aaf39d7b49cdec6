/* index_gpu.c - a resident index's rows on GPU 0: loaded once through
 * the CUDA engine's pinned slots (q_load_cuda), then each search scores
 * every row there with the engine's kernel (topk_cuda.cu, the CPU's
 * scores bit for bit), one launch a query, and copies the goodness back
 * (8 bytes a row) for the CPU's heaps (q_index_select), so ties break as
 * everywhere else.  Queries go in batches of two buffers: the GPU scores
 * one batch while the CPU selects from the one before. */
#include "index.h"

#ifdef DLK_HAVE_CUDA
#include "topk_cuda.h"

#include <stdlib.h>
#include <string.h>

/* The goodness a batch of queries holds (device and pinned host, each
 * of two buffers). */
#define BATCH_BYTES ((size_t)32 << 20)
/* Room left on the GPU beside the rows: a search's buffers, the
 * staging of the load, the context's own needs. */
#define GPU_SPARE ((uint64_t)512 << 20)

struct q_gpu_index {
    void *dx;                 /* the rows */
    cudaStream_t st;
    bool have_stream;
    float *dq;                /* the queries */
    size_t dq_cap;            /* floats */
    double *dg[2], *hg[2];    /* goodness: device, pinned host */
    cudaEvent_t done[2];
    uint32_t batch;           /* queries a buffer */
};

static dlk_status prepare(dlk_index *ix, uint32_t nq, dlk_error *err);

dlk_status q_gpu_index_load(dlk_index *ix, const q_topk_job *j, bool *fits,
                            dlk_error *err)
{
    CU(cudaSetDevice(0), "cudaSetDevice");
    size_t avail = 0, total = 0;
    CU(cudaMemGetInfo(&avail, &total), "cudaMemGetInfo");
    uint64_t bytes = ix->n * ix->stride;
    uint64_t need = bytes + ix->n * sizeof(double) * 2 + GPU_SPARE;
    if (need > avail) {
        if (fits) {
            *fits = false;
            return DLK_OK;
        }
        return Dlk_fail(err, DLK_ENOMEM, "tensor '%s': %llu rows of %u "
                        "values are %llu bytes; GPU 0 has %zu bytes free "
                        "(of %zu), %llu needed with a search's buffers",
                        ix->tensor, (unsigned long long)ix->n, ix->dim,
                        (unsigned long long)bytes, avail, total,
                        (unsigned long long)need);
    }
    struct q_gpu_index *g = calloc(1, sizeof *g);
    ix->rows = malloc((ix->n ? ix->n : 1) * sizeof *ix->rows);
    if (!g || !ix->rows) {
        free(g);
        return Dlk_oom(err);
    }
    ix->gpu = g;
    CU(cudaMalloc(&g->dx, bytes ? bytes : 1), "cudaMalloc");
    dlk_status rc = q_load_cuda(j, g->dx, ix->rows, NULL, err);
    /* a search's buffers now, not in the first search */
    return rc ? rc : prepare(ix, 1, err);
}

void q_gpu_index_free(dlk_index *ix)
{
    struct q_gpu_index *g = ix->gpu;
    if (!g)
        return;
    if (g->have_stream) {
        cudaStreamSynchronize(g->st);
        cudaStreamDestroy(g->st);
    }
    for (int i = 0; i < 2; i++) {
        if (g->done[i])
            cudaEventDestroy(g->done[i]);
        if (g->dg[i])
            cudaFree(g->dg[i]);
        if (g->hg[i])
            cudaFreeHost(g->hg[i]);
    }
    if (g->dq)
        cudaFree(g->dq);
    if (g->dx)
        cudaFree(g->dx);
    free(g);
    ix->gpu = NULL;
}

/* The stream, the events and the goodness buffers (made once), and
 * room for nq queries on the GPU. */
static dlk_status prepare(dlk_index *ix, uint32_t nq, dlk_error *err)
{
    struct q_gpu_index *g = ix->gpu;
    CU(cudaSetDevice(0), "cudaSetDevice");
    if (!g->have_stream) {
        CU(cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking),
           "cudaStreamCreate");
        g->have_stream = true;
        for (int i = 0; i < 2; i++)
            CU(cudaEventCreateWithFlags(&g->done[i], cudaEventDisableTiming),
               "cudaEventCreate");
        uint64_t per = (ix->n ? ix->n : 1) * sizeof(double);
        g->batch = BATCH_BYTES / per ? (uint32_t)(BATCH_BYTES / per) : 1;
        for (int i = 0; i < 2; i++) {
            CU(cudaMalloc((void **)&g->dg[i], g->batch * per), "cudaMalloc");
            CU(cudaHostAlloc((void **)&g->hg[i], g->batch * per,
                             cudaHostAllocDefault), "cudaHostAlloc");
        }
    }
    size_t want = (size_t)nq * ix->dim;
    if (want > g->dq_cap) {
        if (g->dq)
            CU(cudaFree(g->dq), "cudaFree");
        g->dq = NULL;
        g->dq_cap = 0;
        CU(cudaMalloc((void **)&g->dq, want * sizeof(float)), "cudaMalloc");
        g->dq_cap = want;
    }
    return DLK_OK;
}

/* Queue batch b's scoring into buffer b % 2 and its copy back. */
static dlk_status launch(dlk_index *ix, const double *qq, uint32_t q0,
                         uint32_t nb, int buf, dlk_metric metric,
                         dlk_error *err)
{
    struct q_gpu_index *g = ix->gpu;
    for (uint32_t i = 0; i < nb; i++)
        CU(Dlk_cuda_topk_score(g->dx, ix->f64, ix->n, ix->dim,
                               g->dq + (size_t)(q0 + i) * ix->dim,
                               qq[q0 + i], (int)metric,
                               g->dg[buf] + (size_t)i * ix->n, g->st),
           "scoring kernel");
    CU(cudaMemcpyAsync(g->hg[buf], g->dg[buf],
                       (size_t)nb * ix->n * sizeof(double),
                       cudaMemcpyDeviceToHost, g->st), "copy from the GPU");
    CU(cudaEventRecord(g->done[buf], g->st), "cudaEventRecord");
    return DLK_OK;
}

static dlk_status wait_for(dlk_index *ix, int buf, dlk_error *err)
{
    CU(cudaEventSynchronize(ix->gpu->done[buf]), "scoring");
    return DLK_OK;
}

dlk_status q_gpu_index_search(dlk_index *ix, const float *qs,
                              const double *qq, uint32_t nq, uint32_t k,
                              dlk_metric metric, uint64_t *rows,
                              double *scores, dlk_error *err)
{
    dlk_status rc = prepare(ix, nq, err);
    if (rc)
        return rc;
    struct q_gpu_index *g = ix->gpu;
    CU(cudaMemcpyAsync(g->dq, qs, (size_t)nq * ix->dim * sizeof(float),
                       cudaMemcpyHostToDevice, g->st), "copy to the GPU");
    uint32_t b = g->batch;
    rc = launch(ix, qq, 0, nq < b ? nq : b, 0, metric, err);
    for (uint32_t q0 = 0, i = 0; !rc && q0 < nq; q0 += b, i++) {
        uint32_t nb = nq - q0 < b ? nq - q0 : b;
        /* the next batch scores on the GPU while this one is selected */
        if (q0 + nb < nq)
            rc = launch(ix, qq, q0 + nb,
                        nq - q0 - nb < b ? nq - q0 - nb : b, (int)(~i & 1),
                        metric, err);
        if (!rc)
            rc = wait_for(ix, (int)(i & 1), err);
        if (!rc)
            rc = q_index_select(ix, NULL, qq + q0, g->hg[i & 1], nb, k,
                                metric, rows + (size_t)q0 * k,
                                scores + (size_t)q0 * k, err);
    }
    /* nothing queued may outlive the caller's query array */
    cudaStreamSynchronize(g->st);
    return rc;
}

#else

dlk_status q_gpu_index_load(dlk_index *ix, const q_topk_job *j, bool *fits,
                            dlk_error *err)
{
    (void)ix;
    (void)j;
    (void)fits;
    return Dlk_fail(err, DLK_EGPU, "cannot search on a CUDA GPU: this dlk "
                    "was built without CUDA");
}

dlk_status q_gpu_index_search(dlk_index *ix, const float *qs,
                              const double *qq, uint32_t nq, uint32_t k,
                              dlk_metric metric, uint64_t *rows,
                              double *scores, dlk_error *err)
{
    (void)ix;
    (void)qs;
    (void)qq;
    (void)nq;
    (void)k;
    (void)metric;
    (void)rows;
    (void)scores;
    return Dlk_fail(err, DLK_EGPU, "cannot search on a CUDA GPU: this dlk "
                    "was built without CUDA");
}

void q_gpu_index_free(dlk_index *ix)
{
    (void)ix;
}

#endif
