/* index.h - a resident vector index (dlk_index_*): what index.c (the
 * index and its CPU search) and index_gpu.c (its rows on a GPU) share. */
#ifndef DLK_QUERY_INDEX_H
#define DLK_QUERY_INDEX_H

#include "topk.h"

struct dlk_index {
    dlk_query_device device;   /* CPU or CUDA */
    char tensor[DLK_NAME_MAX + 1];
    uint32_t dim;
    bool f64;
    size_t stride;             /* bytes a row */
    uint64_t n;                /* rows */
    uint64_t *rows;            /* the dataset row of each resident one */
    void *host;                /* CPU: the rows, n x stride bytes */
    uint32_t threads;          /* CPU threads a search may use */
    struct q_gpu_index *gpu;   /* CUDA: the rows and a search's buffers */
};

/* A search's selection on the CPU: the k best of each of nq queries
 * into rows and scores (nq x k each), from the goodness of every row
 * for each query (g: nq x n, query i's at g + i * n), or, with g NULL,
 * scoring the rows in host memory.  qq: each query's q.q. */
dlk_status q_index_select(const dlk_index *ix, const float *qs,
                          const double *qq, const double *g, uint32_t nq,
                          uint32_t k, dlk_metric metric, uint64_t *rows,
                          double *scores, dlk_error *err);

/* CUDA (index_gpu.c).  Loads the rows j walks onto GPU 0 (ix->gpu),
 * with their rows in ix->rows; DLK_ENOMEM naming the tensor and bytes
 * when they do not fit its free memory (fits NULL), or *fits false and
 * DLK_OK then (fits given: auto picks the CPU instead). */
dlk_status q_gpu_index_load(dlk_index *ix, const q_topk_job *j, bool *fits,
                            dlk_error *err);
/* The search on the GPU: every row scored there for each query, the
 * goodness copied back, then q_index_select. */
dlk_status q_gpu_index_search(dlk_index *ix, const float *qs,
                              const double *qq, uint32_t nq, uint32_t k,
                              dlk_metric metric, uint64_t *rows,
                              double *scores, dlk_error *err);
void q_gpu_index_free(dlk_index *ix);

#endif
