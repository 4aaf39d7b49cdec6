/* index.c - a resident vector index (include/dlk.h, dlk_index_*): the
 * candidate rows of an embedding tensor read once by the vector search's
 * own chunk walk (q_walk: its threads, its checksums) into host memory,
 * or through the CUDA engine's pinned slots into GPU memory
 * (index_gpu.c); then each search scores every resident row with the
 * engines' own scoring (q_dot and q_goodness on the CPU, the same
 * kernel on a GPU) into the engines' heaps, merged as they merge.  The
 * scores are the same and the order of hits is total (goodness, then
 * row), so the rows, their order and their scores are dlk_select's. */
#include "index.h"
#include "util/abi.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rows scored at a time on the CPU: a block stays in cache while every
 * query of a batch is scored against it. */
#define BLOCK_BYTES ((size_t)256 << 10)
/* Goodness values a thread takes at a time when they come from a GPU. */
#define BLOCK_SCORES ((uint64_t)1 << 16)
/* Blocks a search's thread takes at the least (on average). */
#define THREAD_BLOCKS 4
/* The heaps of a search (threads x queries x k hits) stay under this:
 * larger query sets go in batches. */
#define HEAP_BYTES ((size_t)64 << 20)

/* Memory the host can give without swapping: MemAvailable, else all of
 * it. */
static uint64_t host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (kb)
        return (uint64_t)kb << 10;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz
                                : UINT64_MAX;
}

/* ---- loading into host memory ---------------------------------------- */

/* q_walk's fn: the rows to their place among the candidates. */
static dlk_status copy_rows(const q_topk_job *j, void *ctx,
                            const uint8_t *src, uint64_t row0, uint64_t n,
                            dlk_error *err)
{
    (void)err;
    dlk_index *ix = ctx;
    uint64_t at = q_cands_lower(j->cands, 0, j->cands->n, row0);
    memcpy((uint8_t *)ix->host + at * ix->stride, src, n * ix->stride);
    return DLK_OK;
}

static dlk_status load_host(dlk_index *ix, const q_topk_job *j,
                            dlk_error *err)
{
    uint64_t bytes = ix->n * ix->stride, avail = host_available();
    if (bytes > avail)
        return Dlk_fail(err, DLK_ENOMEM, "tensor '%s': %llu rows of %u "
                        "values are %llu bytes; the host has %llu bytes "
                        "free", ix->tensor, (unsigned long long)ix->n,
                        ix->dim, (unsigned long long)bytes,
                        (unsigned long long)avail);
    if (!(ix->host = malloc(bytes ? bytes : 1)))
        return Dlk_fail(err, DLK_ENOMEM, "tensor '%s': cannot allocate "
                        "%llu bytes for %llu rows", ix->tensor,
                        (unsigned long long)bytes,
                        (unsigned long long)ix->n);
    return q_walk_all(j, copy_rows, ix, 0, NULL, err);
}

/* ---- open and close -------------------------------------------------- */

static dlk_status index_open(dlk_dataset *ds, const dlk_index_opts *o,
                             dlk_index **out, dlk_error *err);

ABI_OPEN_WRAPPER(dlk_index_open, index_open, dlk_index_opts, dlk_index)

static dlk_status index_open(dlk_dataset *ds, const dlk_index_opts *o,
                             dlk_index **out, dlk_error *err)
{
    if (o->error_column)
        *o->error_column = 0;
    if (!o->tensor)
        return Dlk_fail(err, DLK_EINVAL, "an index needs a tensor");
    int ti = dlk_dataset_find(ds, o->tensor);
    if (ti < 0)
        return Dlk_fail(err, DLK_ENOTFOUND, "no tensor '%s' in '%s' to "
                        "index", o->tensor, ds->url);
    if ((unsigned)o->device > DLK_QUERY_DEVICE_CUDA)
        return Dlk_fail(err, DLK_EINVAL, "unknown device %d", o->device);
    const Dlk_tensor *t = &ds->m.tensors[ti];
    uint32_t dim = t->spec.ndim == 1 && t->spec.shape[0] > 0 &&
                   t->spec.shape[0] <= UINT32_MAX
                       ? (uint32_t)t->spec.shape[0] : 0;
    uint32_t threads = o->threads ? o->threads : (uint32_t)dlk_cpu_count();
    if (threads > 256)
        threads = 256;
    bool verify = !o->no_verify;
    char why[256] = "";
    bool cuda = o->device != DLK_QUERY_DEVICE_CPU &&
                dlk_cuda_available(why, sizeof why);
    if (o->device == DLK_QUERY_DEVICE_CUDA && !cuda)
        return Dlk_fail(err, DLK_EGPU, "cannot search on a CUDA GPU: %s",
                        why);
    q_expr e;
    memset(&e, 0, sizeof e);
    bool have_expr = o->where && *o->where;
    size_t col = 0;
    dlk_status rc = have_expr ? q_parse(o->where, &ds->m, &e, &col, err)
                              : DLK_OK;
    if (rc && o->error_column)
        *o->error_column = col;
    uint64_t *cand = NULL, n = 0;
    if (!rc)
        rc = q_candidates(ds, have_expr ? &e : NULL, o->view, threads,
                          verify, &cand, &n, NULL, err);
    q_expr_free(&e);
    q_cands c = {cand, n};
    q_topk_job j;
    memset(&j, 0, sizeof j);
    if (!rc)
        rc = q_topk_job_init(&j, ds, (size_t)ti, dim, &c, threads, verify,
                             err);
    dlk_index *ix = rc ? NULL : calloc(1, sizeof *ix);
    if (!rc && !ix)
        rc = Dlk_oom(err);
    if (!rc) {
        snprintf(ix->tensor, sizeof ix->tensor, "%s", t->spec.name);
        ix->dim = dim;
        ix->f64 = t->spec.dtype == DLK_F64;
        ix->stride = (size_t)dim * (ix->f64 ? 8 : 4);
        ix->n = n;
        ix->threads = threads;
        ix->device = DLK_QUERY_DEVICE_CPU;
        bool fits = true;
        if (cuda) {
            /* auto: on the GPU when the rows fit there, else here */
            rc = q_gpu_index_load(ix, &j,
                                  o->device == DLK_QUERY_DEVICE_AUTO ? &fits
                                                                     : NULL,
                                  err);
            if (!rc && fits)
                ix->device = DLK_QUERY_DEVICE_CUDA;
        }
        if (!rc && (!cuda || !fits)) {
            ix->rows = cand;
            cand = NULL;
            rc = load_host(ix, &j, err);
        }
    }
    free((void *)j.chunks);
    free(cand);
    if (rc) {
        dlk_index_close(ix);
        return rc;
    }
    *out = ix;
    return DLK_OK;
}

void dlk_index_close(dlk_index *ix)
{
    if (!ix)
        return;
    q_gpu_index_free(ix);
    free(ix->host);
    free(ix->rows);
    free(ix);
}

uint64_t dlk_index_rows(const dlk_index *ix) { return ix->n; }
uint32_t dlk_index_dim(const dlk_index *ix) { return ix->dim; }
uint64_t dlk_index_bytes(const dlk_index *ix)
{
    return ix->n * ix->stride;
}
dlk_query_device dlk_index_device(const dlk_index *ix)
{
    return ix->device;
}

/* ---- search ---------------------------------------------------------- */

typedef struct sel {
    const dlk_index *ix;
    const float *qs;
    const double *qq;
    const double *g;
    uint32_t nq;          /* the queries of this batch */
    dlk_metric metric;
    uint64_t block;       /* rows a task */
    uint64_t nblocks;
    atomic_uint_fast64_t next;
} sel;

typedef struct sarg {
    sel *s;
    heap *h;              /* one a query */
} sarg;

static void *select_main(void *arg)
{
    sarg *a = arg;
    sel *s = a->s;
    const dlk_index *ix = s->ix;
    for (;;) {
        uint64_t b = atomic_fetch_add(&s->next, 1);
        if (b >= s->nblocks)
            break;
        uint64_t i0 = b * s->block;
        uint64_t i1 = i0 + s->block < ix->n ? i0 + s->block : ix->n;
        for (uint32_t qi = 0; qi < s->nq; qi++) {
            heap *h = &a->h[qi];
            if (s->g) {
                const double *g = s->g + (size_t)qi * ix->n;
                for (uint64_t i = i0; i < i1; i++)
                    q_heap_push(h, (hit){g[i], ix->rows[i]});
                continue;
            }
            const float *q = s->qs + (size_t)qi * ix->dim;
            for (uint64_t i = i0; i < i1; i++) {
                double dot, xx;
                q_dot((const uint8_t *)ix->host + i * ix->stride, ix->f64, q,
                      ix->dim, &dot, &xx);
                q_heap_push(h, (hit){q_goodness(s->metric, s->qq[qi], dot,
                                                xx), ix->rows[i]});
            }
        }
    }
    return NULL;
}

dlk_status q_index_select(const dlk_index *ix, const float *qs,
                          const double *qq, const double *g, uint32_t nq,
                          uint32_t k, dlk_metric metric, uint64_t *rows,
                          double *scores, dlk_error *err)
{
    uint64_t block = g ? BLOCK_SCORES
                       : BLOCK_BYTES / ix->stride ? BLOCK_BYTES / ix->stride
                                                  : 1;
    uint64_t nblocks = (ix->n + block - 1) / block;
    /* a thread for every few blocks at most, so that starting threads
     * costs little beside their work on small indexes */
    uint64_t most = (nblocks + THREAD_BLOCKS - 1) / THREAD_BLOCKS;
    uint32_t t = ix->threads < most ? ix->threads : (uint32_t)most;
    if (!t)
        t = 1;
    size_t per_query = (size_t)t * k * sizeof(hit);
    uint32_t batch = HEAP_BYTES / per_query;
    if (batch > nq)
        batch = nq;
    if (!batch)
        batch = 1;
    hit *all = malloc((size_t)batch * per_query);
    hit *merge = malloc(per_query);
    heap *heaps = calloc((size_t)t * batch, sizeof *heaps);
    heap *one = calloc(t, sizeof *one);
    sarg *args = calloc(t, sizeof *args);
    dlk_status rc = all && merge && heaps && one && args
                        ? DLK_OK : Dlk_oom(err);
    for (uint32_t q0 = 0; !rc && q0 < nq; q0 += batch) {
        uint32_t nb = nq - q0 < batch ? nq - q0 : batch;
        sel s = {
            .ix = ix, .qs = qs ? qs + (size_t)q0 * ix->dim : NULL,
            .qq = qq ? qq + q0 : NULL, .g = g ? g + (size_t)q0 * ix->n : NULL, .nq = nb,
            .metric = metric, .block = block, .nblocks = nblocks,
        };
        atomic_init(&s.next, 0);
        /* heap (thread i, query qi) at heaps[i * nb + qi] */
        for (size_t h = 0; h < (size_t)t * nb; h++)
            heaps[h] = (heap){all + h * k, 0, k};
        for (uint32_t i = 0; i < t; i++)
            args[i] = (sarg){&s, heaps + (size_t)i * nb};
        q_parallel(t, select_main, args, sizeof *args);
        for (uint32_t qi = 0; qi < nb; qi++) {
            for (uint32_t i = 0; i < t; i++)
                one[i] = heaps[(size_t)i * nb + qi];
            q_heaps_merge(one, t, merge, k, metric,
                          rows + (size_t)(q0 + qi) * k,
                          scores + (size_t)(q0 + qi) * k);
        }
    }
    free(args);
    free(one);
    free(heaps);
    free(merge);
    free(all);
    return rc;
}

dlk_status dlk_index_search(dlk_index *ix, const float *queries, uint32_t nq,
                            uint32_t k, dlk_metric metric, uint64_t *rows,
                            double *scores, uint32_t *n, dlk_error *err)
{
    *n = 0;
    if (!nq || !queries)
        return Dlk_fail(err, DLK_EINVAL, "a search takes one query vector "
                        "or more");
    if (!k || k > 1000000)
        return Dlk_fail(err, DLK_EINVAL, "k %u is not from 1 to 1000000", k);
    if ((unsigned)metric > DLK_METRIC_IP)
        return Dlk_fail(err, DLK_EINVAL, "unknown metric %d", metric);
    if (!ix->n)
        return DLK_OK;
    double *qq = malloc(nq * sizeof *qq);
    if (!qq)
        return Dlk_oom(err);
    for (uint32_t i = 0; i < nq; i++)
        qq[i] = q_norm2(queries + (size_t)i * ix->dim, ix->dim);
    dlk_status rc =
        ix->device == DLK_QUERY_DEVICE_CUDA
            ? q_gpu_index_search(ix, queries, qq, nq, k, metric, rows,
                                 scores, err)
            : q_index_select(ix, queries, qq, NULL, nq, k, metric, rows,
                             scores, err);
    free(qq);
    if (!rc)
        *n = ix->n < k ? (uint32_t)ix->n : k;
    return rc;
}
