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

/* The CUDA engine: each of j->threads workers fills heap i of heaps
 * (k slots each, n 0 on entry); *bytes gets the chunk bytes read.
 * DLK_EGPU when a CUDA call fails; a build without CUDA returns
 * DLK_EGPU at once. */
dlk_status q_topk_cuda(const q_topk_job *j, heap *heaps, uint64_t *bytes,
                       dlk_error *err);

#endif
