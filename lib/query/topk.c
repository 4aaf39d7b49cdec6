/* topk.c - exact vector search: every candidate row of an embedding
 * tensor [D] is scored against the query, chunk by chunk on several
 * threads, each keeping its own k best in a heap; the heaps are merged at
 * the end.  The scoring loop reads the chunk in place (mapped from the
 * page cache when the store maps) and is memory-bound: one pass computes
 * both x.q and x.x, which every metric needs, and the chunk's checksum is
 * computed in the same pass (window by window, each scored while it is
 * in cache), not in a pass of its own. */
#include "query.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct hit {
    double g;          /* goodness: larger is better (-distance for l2) */
    uint64_t row;
} hit;

static inline bool better(const hit *a, const hit *b)
{
    return a->g > b->g || (a->g == b->g && a->row < b->row);
}

/* A heap of the k best, its root the worst of them. */
typedef struct heap {
    hit *v;
    uint32_t n, k;
} heap;

static void sift_down(heap *h, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < h->n && better(&h->v[w], &h->v[l]))
            w = l;
        if (r < h->n && better(&h->v[w], &h->v[r]))
            w = r;
        if (w == i)
            return;
        hit t = h->v[i];
        h->v[i] = h->v[w];
        h->v[w] = t;
        i = w;
    }
}

static void heap_push(heap *h, hit x)
{
    if (h->n < h->k) {
        uint32_t i = h->n++;
        h->v[i] = x;
        while (i) {
            uint32_t p = (i - 1) / 2;
            if (!better(&h->v[p], &h->v[i]))
                break;
            hit t = h->v[p];
            h->v[p] = h->v[i];
            h->v[i] = t;
            i = p;
        }
    } else if (better(&x, &h->v[0])) {
        h->v[0] = x;
        sift_down(h, 0);
    }
}

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

typedef struct search {
    dlk_dataset *ds;
    size_t ti;
    const float *q;
    uint32_t dim;
    double qq;
    dlk_metric metric;
    uint32_t k;
    const q_cands *cands;
    unsigned mode;
    bool fused;          /* the checksum in the scoring pass */
    size_t *chunks;      /* chunks holding candidates */
    size_t nchunks;
    atomic_size_t next;
    atomic_int failed;
    pthread_mutex_t mu;
    dlk_status rc;
    dlk_error err;
    heap *heaps;         /* one a thread */
    uint64_t bytes;
} search;


static double goodness(const search *s, double dot, double xx)
{
    switch (s->metric) {
    case DLK_METRIC_IP: return dot;
    case DLK_METRIC_L2: return -(xx - 2 * dot + s->qq);
    default:
        return xx > 0 && s->qq > 0 ? dot / (sqrt(xx) * sqrt(s->qq)) : 0;
    }
}

typedef struct targ {
    search *s;
    heap *h;
    uint64_t bytes;
} targ;

#define HASH_WINDOW ((size_t)256 << 10)

static void *search_main(void *arg)
{
    targ *a = arg;
    search *s = a->s;
    const dlk_tensor *t = &s->ds->m.tensors[s->ti];
    bool f32 = t->spec.dtype == DLK_F32;
    q_chunk qc = {.index = -1};
    dlk_error err = {0};
    dlk_status rc = DLK_OK;
    dlk_hash64_stream *hs = s->fused ? dlk_hash64_stream_new() : NULL;
    if (s->fused && !hs)
        rc = dlk_fail(&err, DLK_ENOMEM, "out of memory");
    while (!rc && !atomic_load(&s->failed)) {
        size_t k = atomic_fetch_add(&s->next, 1);
        if (k >= s->nchunks)
            break;
        size_t ci = s->chunks[k];
        if ((rc = q_chunk_get(s->ds, s->ti, ci, s->mode, &qc, &a->bytes,
                              &err)))
            break;
        const uint8_t *p = qc.c->payload;
        size_t stride = qc.c->sample_bytes;
        size_t total = (size_t)(qc.end - qc.first) * stride, done = 0;
        uint64_t i = q_cands_lower(s->cands, 0, s->cands->n, qc.first);
        uint64_t i1 = q_cands_lower(s->cands, 0, s->cands->n, qc.end);
        if (hs)
            dlk_hash64_stream_reset(hs);
        while (done < total || i < i1) {
            /* hash the next window, then score the rows it completes */
            size_t upto = total;
            if (hs) {
                upto = done + HASH_WINDOW < total ? done + HASH_WINDOW : total;
                dlk_hash64_stream_update(hs, p + done, upto - done);
            }
            done = upto;
            for (; i < i1; i++) {
                uint64_t row = q_cand(s->cands, i);
                size_t off = (size_t)(row - qc.first) * stride;
                if (off + stride > done)
                    break;
                double dot, xx;
                if (f32)
                    dot_f32((const void *)(p + off), s->q, s->dim, &dot, &xx);
                else
                    dot_f64((const void *)(p + off), s->q, s->dim, &dot, &xx);
                heap_push(a->h, (hit){goodness(s, dot, xx), row});
            }
        }
        if (hs && dlk_hash64_stream_digest(hs) != qc.c->h.stored_hash) {
            rc = dlk_fail(&err, DLK_ECORRUPT, "chunk 'chunks/%s/%s': payload "
                          "checksum mismatch", t->spec.name,
                          t->chunks[ci].key);
            break;
        }
        q_chunk_drop(s->ds, &qc);
    }
    q_chunk_drop(s->ds, &qc);
    dlk_hash64_stream_free(hs);
    if (rc) {
        pthread_mutex_lock(&s->mu);
        if (!s->rc) {
            s->rc = rc;
            s->err = err;
        }
        pthread_mutex_unlock(&s->mu);
        atomic_store(&s->failed, 1);
    }
    return NULL;
}

static int cmp_hit(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    return better(x, y) ? -1 : better(y, x) ? 1 : 0;
}

dlk_status q_topk(dlk_dataset *ds, size_t ti, const float *q, uint32_t dim,
                  dlk_metric metric, uint32_t k, const q_cands *cands,
                  uint32_t threads, bool verify, uint64_t **rows,
                  double **scores, uint64_t *n, uint64_t *bytes,
                  dlk_error *err)
{
    *rows = NULL;
    *scores = NULL;
    *n = 0;
    const dlk_tensor *t = &ds->m.tensors[ti];
    if ((t->spec.dtype != DLK_F32 && t->spec.dtype != DLK_F64) ||
        t->spec.ndim != 1 || t->spec.shape[0] == DLK_DIM_VARIABLE)
        return dlk_fail(err, DLK_EINVAL, "tensor '%s' is not an embedding: "
                        "vector search takes f32 or f64 of a fixed shape "
                        "[D]", t->spec.name);
    if ((uint64_t)t->spec.shape[0] != dim)
        return dlk_fail(err, DLK_EINVAL, "the query vector has %u values; "
                        "tensor '%s' has %lld", dim, t->spec.name,
                        (long long)t->spec.shape[0]);
    if (!threads)
        threads = 1;
    search s;
    memset(&s, 0, sizeof s);
    s.ds = ds;
    s.ti = ti;
    s.q = q;
    s.dim = dim;
    s.metric = metric;
    s.k = k;
    s.cands = cands;
    /* uncompressed: the payload is the stored bytes, hashed as it is
     * scored; compressed chunks are checked as they are decompressed */
    s.fused = verify && t->spec.codec == DLK_CODEC_NONE;
    s.mode = (verify && !s.fused ? DLK_DECODE_VERIFY : 0) |
             (cands->rows ? 0 : Q_WHOLE);
    for (uint32_t i = 0; i < dim; i++)
        s.qq += (double)q[i] * q[i];
    pthread_mutex_init(&s.mu, NULL);
    dlk_status rc = DLK_OK;
    s.chunks = malloc((t->nchunks ? t->nchunks : 1) * sizeof *s.chunks);
    targ *args = calloc(threads, sizeof *args);
    hit *all = calloc((size_t)threads * k, sizeof *all);
    if (!s.chunks || !args || !all)
        rc = dlk_fail(err, DLK_ENOMEM, "out of memory");
    for (size_t c = 0; !rc && c < t->nchunks; c++) {
        const dlk_chunk_entry *e = &t->chunks[c];
        if (q_cands_lower(cands, 0, cands->n, e->first) <
            q_cands_lower(cands, 0, cands->n, e->first + e->samples))
            s.chunks[s.nchunks++] = c;
    }
    pthread_t *tid = rc ? NULL : calloc(threads, sizeof *tid);
    uint32_t started = 0;
    if (!rc) {
        for (uint32_t i = 0; i < threads; i++) {
            args[i].s = &s;
            args[i].h = calloc(1, sizeof(heap));
            if (!args[i].h)
                continue;
            args[i].h->v = all + (size_t)i * k;
            args[i].h->k = k;
        }
        for (uint32_t i = 1; tid && i < threads; i++)
            if (args[i].h &&
                pthread_create(&tid[started++], NULL, search_main,
                               &args[i]) != 0)
                started--;
        if (args[0].h)
            search_main(&args[0]);
        for (uint32_t i = 0; i < started; i++)
            pthread_join(tid[i], NULL);
        if (s.rc) {
            rc = s.rc;
            if (err)
                *err = s.err;
        }
    }
    free(tid);
    uint64_t got = 0;
    for (uint32_t i = 0; args && i < threads; i++) {
        if (args[i].h) {
            memmove(all + got, args[i].h->v, args[i].h->n * sizeof *all);
            got += args[i].h->n;
            free(args[i].h);
        }
        if (bytes)
            *bytes += args[i].bytes;
    }
    free(args);
    free(s.chunks);
    pthread_mutex_destroy(&s.mu);
    if (!rc) {
        qsort(all, got, sizeof *all, cmp_hit);
        if (got > k)
            got = k;
        *rows = malloc((got ? got : 1) * sizeof **rows);
        *scores = malloc((got ? got : 1) * sizeof **scores);
        if (!*rows || !*scores)
            rc = dlk_fail(err, DLK_ENOMEM, "out of memory");
        for (uint64_t i = 0; !rc && i < got; i++) {
            (*rows)[i] = all[i].row;
            (*scores)[i] = metric == DLK_METRIC_L2
                               ? sqrt(fmax(0, -all[i].g)) : all[i].g;
        }
        *n = got;
    }
    free(all);
    if (rc) {
        free(*rows);
        free(*scores);
        *rows = NULL;
        *scores = NULL;
        *n = 0;
    }
    return rc;
}
