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
 * back are 8 bytes a row, under 1% of the rows' bytes for D >= 256. */
#include "topk.h"

#ifdef DLK_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

cudaError_t dlk_cuda_topk_score(const void *x, int f64, uint64_t n,
                                uint32_t dim, const float *q, double qq,
                                int metric, double *out, cudaStream_t st);

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

#define CU(call, what)                                                      \
    do {                                                                    \
        cudaError_t e_ = (call);                                            \
        if (e_ != cudaSuccess)                                              \
            return dlk_fail(err, DLK_EGPU, "vector search on the GPU: %s: " \
                            "%s", what, cudaGetErrorString(e_));            \
    } while (0)

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
        return dlk_fail(err, DLK_ENOMEM, "out of memory (%zu bytes of "
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
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
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
    CU(cudaEventSynchronize(sl->done), "scoring");
    for (uint64_t i = 0; i < sl->n; i++)
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
    if (sl->n) {
        CU(cudaMemcpyAsync(sl->dx, sl->stage, sl->n * s->stride,
                           cudaMemcpyHostToDevice, w->st), "copy to the GPU");
        CU(dlk_cuda_topk_score(sl->dx, s->f64, sl->n, s->j->dim, s->dq,
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

/* Stage rows row0.. (n of them, consecutive) from src. */
static dlk_status stage(worker *w, const uint8_t *src, uint64_t row0,
                        uint64_t n, dlk_error *err)
{
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

/* One chunk: hash each window, stage the candidate rows it completes
 * (runs of consecutive rows in one copy). */
static dlk_status do_chunk(worker *w, size_t ci, q_chunk *qc,
                           dlk_hash64_stream *hs, dlk_error *err)
{
    const q_topk_job *j = w->s->j;
    const dlk_tensor *t = &j->ds->m.tensors[j->ti];
    dlk_status rc = q_chunk_get(j->ds, j->ti, ci, j->mode, qc, &w->bytes,
                                err);
    if (rc)
        return rc;
    const uint8_t *p = qc->c->payload;
    size_t stride = qc->c->sample_bytes;
    if (stride != w->s->stride)
        return dlk_fail(err, DLK_ECORRUPT, "chunk 'chunks/%s/%s': %zu bytes "
                        "a row, not %zu", t->spec.name, t->chunks[ci].key,
                        stride, w->s->stride);
    size_t total = (size_t)(qc->end - qc->first) * stride, done = 0;
    uint64_t i = q_cands_lower(j->cands, 0, j->cands->n, qc->first);
    uint64_t i1 = q_cands_lower(j->cands, 0, j->cands->n, qc->end);
    if (hs)
        dlk_hash64_stream_reset(hs);
    while (done < total || i < i1) {
        size_t upto = total;
        if (hs) {
            upto = done + Q_HASH_WINDOW < total ? done + Q_HASH_WINDOW : total;
            dlk_hash64_stream_update(hs, p + done, upto - done);
        }
        done = upto;
        while (i < i1) {
            uint64_t row = q_cand(j->cands, i);
            size_t off = (size_t)(row - qc->first) * stride;
            if (off + stride > done)
                break;
            uint64_t run = 1;
            while (i + run < i1 && q_cand(j->cands, i + run) == row + run &&
                   off + (run + 1) * stride <= done)
                run++;
            if ((rc = stage(w, p + off, row, run, err)))
                return rc;
            i += run;
        }
    }
    if (hs && dlk_hash64_stream_digest(hs) != qc->c->h.stored_hash)
        return dlk_fail(err, DLK_ECORRUPT, "chunk 'chunks/%s/%s': payload "
                        "checksum mismatch", t->spec.name, t->chunks[ci].key);
    q_chunk_drop(j->ds, qc);
    return DLK_OK;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    gsearch *s = w->s;
    const q_topk_job *j = s->j;
    q_chunk qc = {.index = -1};
    dlk_error err = {0};
    dlk_hash64_stream *hs = j->fused ? dlk_hash64_stream_new() : NULL;
    dlk_status rc = j->fused && !hs
                        ? dlk_fail(&err, DLK_ENOMEM, "out of memory")
                        : worker_open(w, &err);
    while (!rc && !atomic_load(&s->w.failed)) {
        size_t k = atomic_fetch_add(&s->w.next, 1);
        if (k >= j->nchunks)
            break;
        rc = do_chunk(w, j->chunks[k], &qc, hs, &err);
    }
    /* the last slot, then every slot's scores */
    if (!rc)
        rc = slot_submit(w, &err);
    for (int i = 0; !rc && i < NSLOT; i++)
        rc = slot_take(w, &w->sl[i], &err);
    q_chunk_drop(j->ds, &qc);
    dlk_hash64_stream_free(hs);
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

dlk_status q_topk_cuda(const q_topk_job *j, heap *heaps, uint64_t *bytes,
                       dlk_error *err)
{
    if (!j->nchunks)
        return DLK_OK;
    const dlk_tensor *t = &j->ds->m.tensors[j->ti];
    gsearch s;
    memset(&s, 0, sizeof s);
    s.j = j;
    s.f64 = t->spec.dtype == DLK_F64;
    s.stride = (size_t)j->dim * (s.f64 ? 8 : 4);
    s.cap = SLAB / s.stride ? SLAB / s.stride : 1;
    /* no more workers than chunks: each one pins its own staging */
    uint32_t nw = j->threads < j->nchunks ? j->threads : (uint32_t)j->nchunks;
    float *dq = NULL;
    dlk_status rc = upload_query(j, &dq, err);
    s.dq = dq;
    worker *ws = rc ? NULL : calloc(nw, sizeof *ws);
    pthread_t *tid = rc ? NULL : calloc(nw, sizeof *tid);
    if (!rc && (!ws || !tid))
        rc = dlk_fail(err, DLK_ENOMEM, "out of memory");
    if (!rc) {
        q_work_init(&s.w);
        uint32_t started = 0;
        for (uint32_t i = 0; i < nw; i++) {
            ws[i].s = &s;
            ws[i].h = &heaps[i];
        }
        for (uint32_t i = 1; i < nw; i++)
            if (pthread_create(&tid[started], NULL, worker_main, &ws[i]) == 0)
                started++;
        worker_main(&ws[0]);
        for (uint32_t i = 0; i < started; i++)
            pthread_join(tid[i], NULL);
        for (uint32_t i = 0; i < nw; i++)
            if (bytes)
                *bytes += ws[i].bytes;
        rc = q_work_end(&s.w, err);
    }
    free(tid);
    free(ws);
    if (dq)
        cudaFree(dq);
    return rc;
}

#else

dlk_status q_topk_cuda(const q_topk_job *j, heap *heaps, uint64_t *bytes,
                       dlk_error *err)
{
    (void)j;
    (void)heaps;
    (void)bytes;
    return dlk_fail(err, DLK_EGPU, "cannot search on a CUDA GPU: this dlk "
                    "was built without CUDA");
}

#endif
