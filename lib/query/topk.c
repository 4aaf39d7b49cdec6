/* topk.c - exact vector search: every candidate row of an embedding
 * tensor [D] is scored against the query, chunk by chunk on several
 * threads, each keeping its own k best in a heap; the heaps are merged at
 * the end.  The scoring loop reads the chunk in place (mapped from the
 * page cache when the store maps) and is memory-bound: one pass computes
 * both x.q and x.x, which every metric needs, and the chunk's checksum is
 * computed in the same pass (window by window, each scored while it is
 * in cache), not in a pass of its own.  With DLK_QUERY_DEVICE_CUDA the
 * rows are scored on a GPU instead (topk_gpu.c), to the same scores. */
#include "topk.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* x.q and x.x over n floats, in 16 lanes (the compiler's vectors; an
 * AVX2 or AVX-512 clone where the CPU has it). */
typedef float v8f __attribute__((vector_size(32)));
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "arch=haswell", "default")))
#endif
static void dot_f32(const float *x, const float *q, size_t n, double *dot,
                    double *xx)
{
    v8f d0 = {0}, d1 = {0}, n0 = {0}, n1 = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v8f a, b, c, e;
        memcpy(&a, x + i, 32);
        memcpy(&b, x + i + 8, 32);
        memcpy(&c, q + i, 32);
        memcpy(&e, q + i + 8, 32);
        d0 += a * c;
        d1 += b * e;
        n0 += a * a;
        n1 += b * b;
    }
    double d = 0, s = 0;
    for (int l = 0; l < 8; l++) {
        d += (double)d0[l] + (double)d1[l];
        s += (double)n0[l] + (double)n1[l];
    }
    for (; i < n; i++) {
        d += (double)x[i] * q[i];
        s += (double)x[i] * x[i];
    }
    *dot = d;
    *xx = s;
}

static void dot_f64(const double *x, const float *q, size_t n, double *dot,
                    double *xx)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += x[i] * q[i];
        s += x[i] * x[i];
    }
    *dot = d;
    *xx = s;
}

void q_dot(const void *x, bool f64, const float *q, uint32_t dim,
           double *dot, double *xx)
{
    if (f64)
        dot_f64(x, q, dim, dot, xx);
    else
        dot_f32(x, q, dim, dot, xx);
}

double q_norm2(const float *q, uint32_t dim)
{
    double qq = 0;
    for (uint32_t i = 0; i < dim; i++)
        qq += (double)q[i] * q[i];
    return qq;
}

/* topk_cuda.cu's goodness() is this one, operation for operation. */
double q_goodness(dlk_metric metric, double qq, double dot, double xx)
{
    switch (metric) {
    case DLK_METRIC_IP: return dot;
    case DLK_METRIC_L2: return -(xx - 2 * dot + qq);
    default:
        return xx > 0 && qq > 0 ? dot / (sqrt(xx) * sqrt(qq)) : 0;
    }
}

dlk_status q_walk(const q_topk_job *j, q_work *w, q_rows_fn fn, void *ctx,
                  uint64_t *bytes, dlk_error *err)
{
    const Dlk_tensor *t = &j->ds->m.tensors[j->ti];
    size_t want = (size_t)j->dim * (t->spec.dtype == DLK_F64 ? 8 : 4);
    q_chunk qc = {.index = -1};
    dlk_status rc = DLK_OK;
    Dlk_hash64_stream *hs = j->fused ? Dlk_hash64_stream_new() : NULL;
    if (j->fused && !hs)
        rc = Dlk_oom(err);
    while (!rc && !atomic_load(&w->failed)) {
        size_t k = atomic_fetch_add(&w->next, 1);
        if (k >= j->nchunks)
            break;
        size_t ci = j->chunks[k];
        if ((rc = q_chunk_get(j->ds, j->ti, ci, j->mode, &qc, bytes, err)))
            break;
        const uint8_t *p = qc.c->payload;
        size_t stride = qc.c->sample_bytes;
        if (stride != want) {
            rc = Dlk_fail(err, DLK_ECORRUPT, "chunk 'chunks/%s/%s': %zu "
                          "bytes a row, not %zu", t->spec.name,
                          t->chunks[ci].key, stride, want);
            break;
        }
        size_t total = (size_t)(qc.end - qc.first) * stride, done = 0;
        uint64_t i = q_cands_lower(j->cands, 0, j->cands->n, qc.first);
        uint64_t i1 = q_cands_lower(j->cands, 0, j->cands->n, qc.end);
        if (hs)
            Dlk_hash64_stream_reset(hs);
        while (!rc && (done < total || i < i1)) {
            /* hash the next window, then hand on the rows it completes
             * (runs of consecutive rows at once) */
            size_t upto = total;
            if (hs) {
                upto = done + Q_HASH_WINDOW < total ? done + Q_HASH_WINDOW
                                                    : total;
                Dlk_hash64_stream_update(hs, p + done, upto - done);
            }
            done = upto;
            while (i < i1) {
                uint64_t row = q_cand(j->cands, i);
                size_t off = (size_t)(row - qc.first) * stride;
                if (off + stride > done)
                    break;
                uint64_t run = 1;
                while (i + run < i1 && q_cand(j->cands, i + run) == row + run &&
                       off + (run + 1) * stride <= done)
                    run++;
                if ((rc = fn(j, ctx, p + off, row, run, err)))
                    break;
                i += run;
            }
        }
        if (!rc && hs && Dlk_hash64_stream_digest(hs) != qc.c->h.stored_hash)
            rc = Dlk_fail(err, DLK_ECORRUPT, "chunk 'chunks/%s/%s': payload "
                          "checksum mismatch", t->spec.name,
                          t->chunks[ci].key);
        if (!rc)
            q_chunk_drop(j->ds, &qc);
    }
    q_chunk_drop(j->ds, &qc);
    Dlk_hash64_stream_free(hs);
    if (rc)
        q_work_fail(w, rc, err);
    return rc;
}

void q_work_init(q_work *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
}

void q_work_fail(q_work *w, dlk_status rc, const dlk_error *err)
{
    pthread_mutex_lock(&w->mu);
    if (!w->rc) {
        w->rc = rc;
        w->err = *err;
    }
    pthread_mutex_unlock(&w->mu);
    atomic_store(&w->failed, 1);
}

dlk_status q_work_end(q_work *w, dlk_error *err)
{
    pthread_mutex_destroy(&w->mu);
    if (w->rc && err)
        *err = w->err;
    return w->rc;
}

void q_parallel(uint32_t n, void *(*fn)(void *), void *args, size_t size)
{
    pthread_t *tid = n > 1 ? calloc(n - 1, sizeof *tid) : NULL;
    uint32_t started = 0;
    for (uint32_t i = 1; tid && i < n; i++)
        if (pthread_create(&tid[started], NULL, fn,
                           (char *)args + (size_t)i * size) == 0)
            started++;
    fn(args);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    free(tid);
}

typedef struct walker {
    const q_topk_job *j;
    q_work *w;
    q_rows_fn fn;
    void *ctx;
    uint64_t bytes;
} walker;

static void *walker_main(void *arg)
{
    walker *a = arg;
    dlk_error err;
    q_walk(a->j, a->w, a->fn, a->ctx, &a->bytes, &err);
    return NULL;
}

dlk_status q_walk_all(const q_topk_job *j, q_rows_fn fn, void *ctx,
                      size_t ctx_size, uint64_t *bytes, dlk_error *err)
{
    walker *args = calloc(j->threads, sizeof *args);
    if (!args)
        return Dlk_oom(err);
    q_work w;
    q_work_init(&w);
    for (uint32_t i = 0; i < j->threads; i++)
        args[i] = (walker){j, &w, fn, (char *)ctx + i * ctx_size, 0};
    q_parallel(j->threads, walker_main, args, sizeof *args);
    for (uint32_t i = 0; i < j->threads; i++)
        if (bytes)
            *bytes += args[i].bytes;
    free(args);
    return q_work_end(&w, err);
}

/* q_walk's fn for the CPU engine: score the rows into the heap (ctx). */
static dlk_status score_rows(const q_topk_job *j, void *ctx,
                             const uint8_t *src, uint64_t row0, uint64_t n,
                             dlk_error *err)
{
    (void)err;
    heap *h = ctx;
    bool f64 = j->ds->m.tensors[j->ti].spec.dtype == DLK_F64;
    size_t stride = (size_t)j->dim * (f64 ? 8 : 4);
    for (uint64_t r = 0; r < n; r++) {
        double dot, xx;
        q_dot(src + r * stride, f64, j->q, j->dim, &dot, &xx);
        q_heap_push(h, (hit){q_goodness(j->metric, j->qq, dot, xx),
                             row0 + r});
    }
    return DLK_OK;
}

static int cmp_hit(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    return q_hit_better(x, y) ? -1 : q_hit_better(y, x) ? 1 : 0;
}

/* Where the search runs: CUDA when asked (an error when there is no
 * GPU), else the CPU.  Auto is the CPU, without touching CUDA: for
 * chunks in host memory the CPU's one pass beats CUDA's start-up (0.1
 * to 0.2 s a process) plus the copy over PCIe, at every size (an H100
 * host of 16 cores: 33 ms against 210 ms or more for 1 M x 512 f32,
 * docs/benchmarks.md). */
static dlk_status pick_device(dlk_query_device want, dlk_query_device *out,
                              dlk_error *err)
{
    char why[256] = "";
    *out = DLK_QUERY_DEVICE_CPU;
    if (want != DLK_QUERY_DEVICE_CUDA)
        return DLK_OK;
    if (!dlk_cuda_available(why, sizeof why))
        return Dlk_fail(err, DLK_EGPU, "cannot search on a CUDA GPU: %s",
                        why);
    *out = DLK_QUERY_DEVICE_CUDA;
    return DLK_OK;
}

dlk_status q_topk_job_init(q_topk_job *j, dlk_dataset *ds, size_t ti,
                           uint32_t dim, const q_cands *cands,
                           uint32_t threads, bool verify, dlk_error *err)
{
    memset(j, 0, sizeof *j);
    const Dlk_tensor *t = &ds->m.tensors[ti];
    if ((t->spec.dtype != DLK_F32 && t->spec.dtype != DLK_F64) ||
        t->spec.ndim != 1 || t->spec.shape[0] == DLK_DIM_VARIABLE)
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s' is not an embedding: "
                        "vector search takes f32 or f64 of a fixed shape "
                        "[D]", t->spec.name);
    if ((uint64_t)t->spec.shape[0] != dim)
        return Dlk_fail(err, DLK_EINVAL, "the query vector has %u values; "
                        "tensor '%s' has %lld", dim, t->spec.name,
                        (long long)t->spec.shape[0]);
    j->ds = ds;
    j->ti = ti;
    j->dim = dim;
    j->cands = cands;
    j->threads = threads ? threads : 1;
    /* uncompressed: the payload is the stored bytes, hashed as it is
     * scored; compressed chunks are checked as they are decompressed */
    j->fused = verify && t->spec.codec == DLK_CODEC_NONE;
    j->mode = (verify && !j->fused ? DLK_DECODE_VERIFY : 0) |
              (cands->rows ? 0 : Q_WHOLE);
    size_t *chunks = malloc((t->nchunks ? t->nchunks : 1) * sizeof *chunks);
    if (!chunks)
        return Dlk_oom(err);
    for (size_t c = 0; c < t->nchunks; c++) {
        const Dlk_chunk_entry *e = &t->chunks[c];
        if (q_cands_lower(cands, 0, cands->n, e->first) <
            q_cands_lower(cands, 0, cands->n, e->first + e->samples))
            chunks[j->nchunks++] = c;
    }
    j->chunks = chunks;
    return DLK_OK;
}

uint64_t q_heaps_merge(heap *heaps, uint32_t nheaps, hit *all, uint32_t k,
                       dlk_metric metric, uint64_t *rows, double *scores)
{
    uint64_t got = 0;
    for (uint32_t i = 0; i < nheaps; i++) {
        memmove(all + got, heaps[i].v, heaps[i].n * sizeof *all);
        got += heaps[i].n;
    }
    qsort(all, got, sizeof *all, cmp_hit);
    if (got > k)
        got = k;
    for (uint64_t i = 0; i < got; i++) {
        rows[i] = all[i].row;
        scores[i] = metric == DLK_METRIC_L2 ? sqrt(fmax(0, -all[i].g))
                                            : all[i].g;
    }
    return got;
}

dlk_status q_topk(dlk_dataset *ds, size_t ti, const float *q, uint32_t dim,
                  dlk_metric metric, uint32_t k, const q_cands *cands,
                  uint32_t threads, bool verify, dlk_query_device device,
                  dlk_query_device *used, uint64_t **rows, double **scores,
                  uint64_t *n, uint64_t *bytes, dlk_error *err)
{
    *rows = NULL;
    *scores = NULL;
    *n = 0;
    q_topk_job j;
    dlk_status rc = q_topk_job_init(&j, ds, ti, dim, cands, threads, verify,
                                    err);
    if (rc)
        return rc;
    dlk_query_device dev;
    if ((rc = pick_device(device, &dev, err))) {
        free((void *)j.chunks);
        return rc;
    }
    if (used)
        *used = dev;
    j.q = q;
    j.metric = metric;
    j.k = k;
    j.qq = q_norm2(q, dim);
    heap *heaps = calloc(j.threads, sizeof *heaps);
    hit *all = calloc((size_t)j.threads * k, sizeof *all);
    *rows = malloc(k * sizeof **rows);
    *scores = malloc(k * sizeof **scores);
    if (!heaps || !all || !*rows || !*scores)
        rc = Dlk_oom(err);
    for (uint32_t i = 0; !rc && i < j.threads; i++)
        heaps[i] = (heap){all + (size_t)i * k, 0, k};
    /* the CPU engine: heap i on thread i */
    if (!rc)
        rc = dev == DLK_QUERY_DEVICE_CUDA
                 ? q_topk_cuda(&j, heaps, bytes, err)
                 : q_walk_all(&j, score_rows, heaps, sizeof *heaps, bytes,
                              err);
    if (!rc)
        *n = q_heaps_merge(heaps, j.threads, all, k, metric, *rows, *scores);
    free(heaps);
    free(all);
    free((void *)j.chunks);
    if (rc) {
        free(*rows);
        free(*scores);
        *rows = NULL;
        *scores = NULL;
    }
    return rc;
}
