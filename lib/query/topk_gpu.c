/* topk_gpu.c - vector search on a CUDA GPU (GPU 0).  Each worker thread
 * takes chunks as the CPU engine's threads do, and for each window of a
 * chunk hashes it (the chunk's checksum, as the CPU engine does: the
 * hash is sequential, so it stays on the CPU) and copies the candidate
 * rows it completes, while in cache, into a pinned staging slot.  A full
 * slot is copied to the GPU on the worker's own stream, scored there
 * (topk_cuda.cu) and its scores copied back; meanwhile the worker fills
 * its next slot.  A slot's scores go into the worker's heap when it is
 * reused, so the heap and the final merge are the CPU engine's: the
 * same scores give the same rows in the same order.  Rows copied to the
 * GPU before their chunk's checksum is found wrong are scored, but the
 * search then fails: nothing of it is returned.  The scores that come
 * back are 8 bytes a row, under 1% of the rows' bytes for D >= 256.
 * q_load_cuda runs the same workers but copies each full slot into a
 * resident index's device memory instead of scoring it (index.c). */
#include "topk.h"

#ifdef DLK_HAVE_CUDA
#include "topk_cuda.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Bytes of rows a slot holds: big enough that a copy's fixed cost is
 * small, small enough that all workers' slots pin quickly. */
#define SLAB ((size_t)1 << 20)
#define NSLOT 4

typedef struct slot {
    uint8_t *stage;      /* pinned: the rows */
    double *scores;      /* pinned: their goodness, back from the GPU */
    uint64_t *rows;      /* the row of each staged one */
    void *dx;            /* device: the rows */
    double *dscores;     /* device: the goodness */
    uint64_t n;
    cudaEvent_t done;
    bool pending;        /* queued, scores not yet taken */
} slot;

typedef struct gsearch {
    const q_topk_job *j;
    const float *dq;     /* the query on the GPU */
    size_t stride;       /* bytes a row */
    uint64_t cap;        /* rows a slot */
    bool f64;
    q_work w;
    /* loading (q_load_cuda) instead of scoring: each full slot goes to
     * dst at the next free place, its rows to dst_rows there */
    uint8_t *dst;
    uint64_t *dst_rows;
    atomic_uint_fast64_t filled;
} gsearch;

typedef struct worker {
    gsearch *s;
    heap *h;
    uint64_t bytes;
    cudaStream_t st;
    bool have_stream;
    slot sl[NSLOT];
    int cur;
    void *host;          /* the pinned mapping of all slots */
    size_t host_len;
    bool registered;
    void *dev;           /* the device memory of all slots */
    uint64_t *rowmem;
} worker;


/* Pinned staging: mapped, faulted in by this worker, then registered
 * (cudaHostAlloc pins one call at a time in the driver, several times
 * slower for the same bytes; lib/loader/device_cuda.c measured it). */
static dlk_status worker_open(worker *w, dlk_error *err)
{
    gsearch *s = w->s;
    CU(cudaSetDevice(0), "cudaSetDevice");
    CU(cudaStreamCreateWithFlags(&w->st, cudaStreamNonBlocking),
       "cudaStreamCreate");
    w->have_stream = true;
    size_t rows_b = s->cap * s->stride, sc_b = s->cap * sizeof(double);
    size_t per = (rows_b + sc_b + 63) & ~(size_t)63;
    w->host_len = ((per * NSLOT) + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, w->host_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return Dlk_fail(err, DLK_ENOMEM, "out of memory (%zu bytes of "
                        "staging)", w->host_len);
    w->host = p;
    for (size_t o = 0; o < w->host_len; o += 4096)
        ((volatile char *)p)[o] = 0;
    CU(cudaHostRegister(p, w->host_len, cudaHostRegisterPortable),
       "cudaHostRegister");
    w->registered = true;
    CU(cudaMalloc(&w->dev, per * NSLOT), "cudaMalloc");
    w->rowmem = malloc(s->cap * NSLOT * sizeof *w->rowmem);
    if (!w->rowmem)
        return Dlk_oom(err);
    for (int i = 0; i < NSLOT; i++) {
        slot *sl = &w->sl[i];
        sl->stage = (uint8_t *)p + per * i;
        sl->scores = (double *)(sl->stage + ((rows_b + 63) & ~(size_t)63));
        sl->dx = (uint8_t *)w->dev + per * i;
        sl->dscores = (double *)((uint8_t *)sl->dx +
                                 ((rows_b + 63) & ~(size_t)63));
        sl->rows = w->rowmem + s->cap * i;
        CU(cudaEventCreateWithFlags(&sl->done, cudaEventDisableTiming),
           "cudaEventCreate");
    }
    return DLK_OK;
}

/* Waits for everything queued, then frees (also after a failure: the
 * staging must not be unmapped under a copy). */
static void worker_close(worker *w)
{
    if (w->have_stream) {
        cudaStreamSynchronize(w->st);
        cudaStreamDestroy(w->st);
    }
    for (int i = 0; i < NSLOT; i++)
        if (w->sl[i].done)
            cudaEventDestroy(w->sl[i].done);
    if (w->dev)
        cudaFree(w->dev);
    if (w->registered)
        cudaHostUnregister(w->host);
    if (w->host)
        munmap(w->host, w->host_len);
    free(w->rowmem);
}

/* Take a queued slot's scores into the heap. */
static dlk_status slot_take(worker *w, slot *sl, dlk_error *err)
{
    if (!sl->pending)
        return DLK_OK;
    CU(cudaEventSynchronize(sl->done), w->s->dst ? "copy to the GPU"
                                                 : "scoring");
    for (uint64_t i = 0; !w->s->dst && i < sl->n; i++)
        q_heap_push(w->h, (hit){sl->scores[i], sl->rows[i]});
    sl->pending = false;
    sl->n = 0;
    return DLK_OK;
}

/* Queue the current slot (rows up, score, scores down) and make the
 * next one current, taking its earlier scores first. */
static dlk_status slot_submit(worker *w, dlk_error *err)
{
    gsearch *s = w->s;
    slot *sl = &w->sl[w->cur];
    if (sl->n && s->dst) {
        uint64_t at = atomic_fetch_add(&s->filled, sl->n);
        memcpy(s->dst_rows + at, sl->rows, sl->n * sizeof *sl->rows);
        CU(cudaMemcpyAsync(s->dst + at * s->stride, sl->stage,
                           sl->n * s->stride, cudaMemcpyHostToDevice, w->st),
           "copy to the GPU");
        CU(cudaEventRecord(sl->done, w->st), "cudaEventRecord");
        sl->pending = true;
    } else if (sl->n) {
        CU(cudaMemcpyAsync(sl->dx, sl->stage, sl->n * s->stride,
                           cudaMemcpyHostToDevice, w->st), "copy to the GPU");
        CU(Dlk_cuda_topk_score(sl->dx, s->f64, sl->n, s->j->dim, s->dq,
                               s->j->qq, (int)s->j->metric, sl->dscores,
                               w->st), "scoring kernel");
        CU(cudaMemcpyAsync(sl->scores, sl->dscores, sl->n * sizeof(double),
                           cudaMemcpyDeviceToHost, w->st),
           "copy from the GPU");
        CU(cudaEventRecord(sl->done, w->st), "cudaEventRecord");
        sl->pending = true;
    }
    w->cur = (w->cur + 1) % NSLOT;
    return slot_take(w, &w->sl[w->cur], err);
}

/* q_walk's fn: stage rows row0.. (n of them, consecutive) from src. */
static dlk_status stage(const q_topk_job *j, void *ctx, const uint8_t *src,
                        uint64_t row0, uint64_t n, dlk_error *err)
{
    (void)j;
    worker *w = ctx;
    gsearch *s = w->s;
    while (n) {
        slot *sl = &w->sl[w->cur];
        uint64_t take = s->cap - sl->n < n ? s->cap - sl->n : n;
        memcpy(sl->stage + sl->n * s->stride, src, take * s->stride);
        for (uint64_t i = 0; i < take; i++)
            sl->rows[sl->n + i] = row0 + i;
        sl->n += take;
        src += take * s->stride;
        row0 += take;
        n -= take;
        dlk_status rc;
        if (sl->n == s->cap && (rc = slot_submit(w, err)))
            return rc;
    }
    return DLK_OK;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    gsearch *s = w->s;
    dlk_error err = {0};
    dlk_status rc = worker_open(w, &err);
    if (!rc)
        rc = q_walk(s->j, &s->w, stage, w, &w->bytes, &err);
    /* the last slot, then every slot's scores */
    if (!rc)
        rc = slot_submit(w, &err);
    for (int i = 0; !rc && i < NSLOT; i++)
        rc = slot_take(w, &w->sl[i], &err);
    worker_close(w);
    if (rc)
        q_work_fail(&s->w, rc, &err);
    return NULL;
}

static dlk_status upload_query(const q_topk_job *j, float **dq,
                               dlk_error *err)
{
    CU(cudaSetDevice(0), "cudaSetDevice");
    CU(cudaMalloc((void **)dq, j->dim * sizeof(float)), "cudaMalloc");
    CU(cudaMemcpy(*dq, j->q, j->dim * sizeof(float), cudaMemcpyHostToDevice),
       "copy to the GPU");
    return DLK_OK;
}

/* The workers over s's job: worker i fills heap i (heaps NULL when
 * loading). */
static dlk_status run_workers(gsearch *s, heap *heaps, uint64_t *bytes,
                              dlk_error *err)
{
    const q_topk_job *j = s->j;
    /* no more workers than chunks: each one pins its own staging */
    uint32_t nw = j->threads < j->nchunks ? j->threads : (uint32_t)j->nchunks;
    worker *ws = calloc(nw, sizeof *ws);
    if (!ws)
        return Dlk_oom(err);
    q_work_init(&s->w);
    for (uint32_t i = 0; i < nw; i++) {
        ws[i].s = s;
        ws[i].h = heaps ? &heaps[i] : NULL;
    }
    q_parallel(nw, worker_main, ws, sizeof *ws);
    for (uint32_t i = 0; i < nw; i++)
        if (bytes)
            *bytes += ws[i].bytes;
    free(ws);
    return q_work_end(&s->w, err);
}

static void gsearch_init(gsearch *s, const q_topk_job *j)
{
    memset(s, 0, sizeof *s);
    s->j = j;
    s->f64 = j->ds->m.tensors[j->ti].spec.dtype == DLK_F64;
    s->stride = (size_t)j->dim * (s->f64 ? 8 : 4);
    s->cap = SLAB / s->stride ? SLAB / s->stride : 1;
}

dlk_status q_topk_cuda(const q_topk_job *j, heap *heaps, uint64_t *bytes,
                       dlk_error *err)
{
    if (!j->nchunks)
        return DLK_OK;
    gsearch s;
    gsearch_init(&s, j);
    float *dq = NULL;
    dlk_status rc = upload_query(j, &dq, err);
    s.dq = dq;
    if (!rc)
        rc = run_workers(&s, heaps, bytes, err);
    if (dq)
        cudaFree(dq);
    return rc;
}

dlk_status q_load_cuda(const q_topk_job *j, void *dst, uint64_t *rows,
                       uint64_t *bytes, dlk_error *err)
{
    if (!j->nchunks)
        return DLK_OK;
    gsearch s;
    gsearch_init(&s, j);
    s.dst = dst;
    s.dst_rows = rows;
    CU(cudaSetDevice(0), "cudaSetDevice");
    return run_workers(&s, NULL, bytes, err);
}

#else

dlk_status q_topk_cuda(const q_topk_job *j, heap *heaps, uint64_t *bytes,
                       dlk_error *err)
{
    (void)j;
    (void)heaps;
    (void)bytes;
    return Dlk_fail(err, DLK_EGPU, "cannot search on a CUDA GPU: this dlk "
                    "was built without CUDA");
}

dlk_status q_load_cuda(const q_topk_job *j, void *dst, uint64_t *rows,
                       uint64_t *bytes, dlk_error *err)
{
    (void)j;
    (void)dst;
    (void)rows;
    (void)bytes;
    return Dlk_fail(err, DLK_EGPU, "cannot search on a CUDA GPU: this dlk "
                    "was built without CUDA");
}

#endif
