/* topk.h - what the two vector-search engines share: the search as set
 * up (topk.c), the heap of the k best, and how a row's score is made
 * from x.q and x.x.  The CPU engine is topk.c, the CUDA one topk_gpu.c
 * (kernels in topk_cuda.cu); both push the same scores into the same
 * heaps, so they pick the same rows in the same order. */
#ifndef DLK_QUERY_TOPK_H
#define DLK_QUERY_TOPK_H

#include "query.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct hit {
    double g;          /* goodness: larger is better (-distance for l2) */
    uint64_t row;
} hit;

/* The order of the result: higher goodness first, then the lower row. */
static inline bool q_hit_better(const hit *a, const hit *b)
{
    return a->g > b->g || (a->g == b->g && a->row < b->row);
}

/* A heap of the k best, its root the worst of them. */
typedef struct heap {
    hit *v;
    uint32_t n, k;
} heap;

static inline void q_heap_sift_down(heap *h, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < h->n && q_hit_better(&h->v[w], &h->v[l]))
            w = l;
        if (r < h->n && q_hit_better(&h->v[w], &h->v[r]))
            w = r;
        if (w == i)
            return;
        hit t = h->v[i];
        h->v[i] = h->v[w];
        h->v[w] = t;
        i = w;
    }
}

static inline void q_heap_push(heap *h, hit x)
{
    if (h->n < h->k) {
        uint32_t i = h->n++;
        h->v[i] = x;
        while (i) {
            uint32_t p = (i - 1) / 2;
            if (!q_hit_better(&h->v[p], &h->v[i]))
                break;
            hit t = h->v[p];
            h->v[p] = h->v[i];
            h->v[i] = t;
            i = p;
        }
    } else if (q_hit_better(&x, &h->v[0])) {
        h->v[0] = x;
        q_heap_sift_down(h, 0);
    }
}

/* One search, as both engines take it. */
typedef struct q_topk_job {
    dlk_dataset *ds;
    size_t ti;
    const float *q;
    uint32_t dim;
    double qq;           /* q.q, summed in double in index order */
    dlk_metric metric;
    uint32_t k;
    const q_cands *cands;
    unsigned mode;       /* q_chunk_get's */
    bool fused;          /* the checksum is computed by the engine */
    const size_t *chunks; /* chunks holding candidates */
    size_t nchunks;
    uint32_t threads;
} q_topk_job;

/* What an engine's threads share: the next of j->chunks to take, and the
 * first failure, after which every thread stops before its next chunk. */
typedef struct q_work {
    atomic_size_t next;
    atomic_int failed;
    pthread_mutex_t mu;
    dlk_status rc;
    dlk_error err;
} q_work;

void q_work_init(q_work *w);
/* A thread's failure, kept if it is the first. */
void q_work_fail(q_work *w, dlk_status rc, const dlk_error *err);
/* The first failure (DLK_OK: none), into *err (may be NULL); w's lock
 * is freed. */
dlk_status q_work_end(q_work *w, dlk_error *err);

/* Rows of the payload hashed at a time, each window's rows then staged
 * or scored while it is in cache. */
#define Q_HASH_WINDOW ((size_t)256 << 10)

/* What a walk of j does with a run of n consecutive candidate rows
 * (row0, row0+1, ...) of a chunk, their bytes at src (a row's bytes
 * each), while they are in cache. */
typedef dlk_status (*q_rows_fn)(const q_topk_job *j, void *ctx,
                                const uint8_t *src, uint64_t row0,
                                uint64_t n, dlk_error *err);

/* One thread's share of a walk over j's chunks: takes the next chunk
 * from w until none is left or a thread failed; reads it (*bytes: the
 * bytes read), hashes it window by window when j->fused, and hands fn
 * the runs of candidate rows each window completes.  A chunk whose
 * checksum is wrong fails after its rows went to fn: the caller then
 * drops what fn made of them.  Failures are also kept in w. */
dlk_status q_walk(const q_topk_job *j, q_work *w, q_rows_fn fn, void *ctx,
                  uint64_t *bytes, dlk_error *err);

/* A walk of j on j->threads threads (q_parallel), thread i handing fn
 * the context ctx + i * ctx_size (ctx_size 0: ctx for all); *bytes
 * (may be NULL) gets the bytes read.  Returns the first failure. */
dlk_status q_walk_all(const q_topk_job *j, q_rows_fn fn, void *ctx,
                      size_t ctx_size, uint64_t *bytes, dlk_error *err);

/* fn(args + i * size) for i in [0, n): on n-1 new threads and the
 * calling one.  A thread that cannot start leaves its arg unrun, so fn
 * must take its work from a shared queue. */
void q_parallel(uint32_t n, void *(*fn)(void *), void *args, size_t size);

/* Checks that tensor ti is an embedding of dim values and fills j's
 * walk (ds, ti, dim, cands, threads, mode, fused, chunks: malloc'd, the
 * caller frees them) for a search or an index over cands. */
dlk_status q_topk_job_init(q_topk_job *j, dlk_dataset *ds, size_t ti,
                           uint32_t dim, const q_cands *cands,
                           uint32_t threads, bool verify, dlk_error *err);

/* q.q as both engines take it: summed in double in index order. */
double q_norm2(const float *q, uint32_t dim);

/* x.q and x.x of one row (f32, or f64 when f64), and the goodness of a
 * row from them: what both engines and the index score with. */
void q_dot(const void *x, bool f64, const float *q, uint32_t dim,
           double *dot, double *xx);
double q_goodness(dlk_metric metric, double qq, double dot, double xx);

/* The k best of nheaps heaps, best first, into rows and scores (the
 * metric's value: a distance for l2); the heaps' slots are reordered.
 * all: room for the heaps' hits, which may be the heaps' own memory
 * when it is one array (heap i at all + i * k).  Returns how many. */
uint64_t q_heaps_merge(heap *heaps, uint32_t nheaps, hit *all, uint32_t k,
                       dlk_metric metric, uint64_t *rows, double *scores);

/* The CUDA engine: each of j->threads workers fills heap i of heaps
 * (k slots each, n 0 on entry); *bytes gets the chunk bytes read.
 * DLK_EGPU when a CUDA call fails; a build without CUDA returns
 * DLK_EGPU at once. */
dlk_status q_topk_cuda(const q_topk_job *j, heap *heaps, uint64_t *bytes,
                       dlk_error *err);

/* The CUDA engine's walk without scoring: j's candidate rows copied
 * through its pinned slots into dst (device memory of GPU 0, room for
 * every candidate), in the order the workers take them, with the row
 * of each in rows (host).  DLK_EGPU as q_topk_cuda. */
dlk_status q_load_cuda(const q_topk_job *j, void *dst, uint64_t *rows,
                       uint64_t *bytes, dlk_error *err);

#endif
