/* eval.c - a checked expression over the rows of a dataset.
 *
 * The candidate rows are cut into tasks at the chunk boundaries of the
 * first tensor the expression names (and into pieces small enough for
 * every thread to have several); threads take tasks in turn.  Inside a
 * task, rows go in batches that lie in one chunk of every tensor named,
 * and each node of the tree is evaluated over the whole batch (a column
 * of doubles), so a comparison of a scalar tensor is a tight loop over
 * the chunk's payload, read in place from the page cache when the store
 * maps it; a lone `scalar op constant` is one loop in the scalar's own
 * dtype (kernels.c).  Checksums are verified once per chunk before that
 * (a pass over the chunks in parallel, which keeps them mapped for the
 * tasks), not once per task. */
#include "query.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The column loops below are the hot path: vectorized at -O3 (the
 * build's -O2 vectorizes only loops of a known trip count). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#define BATCH 2048
#define PIECE_MIN ((uint64_t)16384)

/* ---- evaluation over a batch --------------------------------------- */

typedef struct worker {
    dlk_dataset *ds;
    const q_expr *e;
    q_chunk *qc;        /* by slot: chunks this thread read */
    const q_chunk **cur; /* by slot: the chunk in use (its own, or one
                            the check pass kept mapped) */
    double *scratch;    /* a batch per node */
    bool contig;        /* rows[i] == rows[0] + i */
    uint64_t rows[BATCH];
} worker;

/* shape(t)[d], len, sum, mean, min and max: each row's sample of t read
 * whole. */
static void sample_stats(const q_node *x, const Dlk_tensor *t,
                         const q_chunk *qc, const uint64_t *rows, size_t n,
                         double *o)
{
    size_t esz = dlk_dtype_size(t->spec.dtype);
    for (size_t i = 0; i < n; i++) {
        int64_t shape[DLK_MAX_NDIM];
        size_t nb;
        const uint8_t *p = dlk_chunk_sample(qc->c,
                                            (uint32_t)(rows[i] - qc->first),
                                            &nb, shape);
        size_t ne = esz ? nb / esz : 0;
        double v;
        if (x->kind == N_SHAPE) {
            v = (double)shape[x->dim];
        } else if (x->kind == N_LEN) {
            v = (double)ne;
        } else if (x->kind == N_SUM || x->kind == N_MEAN) {
            v = 0;
            for (size_t k = 0; k < ne; k++)
                v += q_elem(t->spec.dtype, p, k);
            if (x->kind == N_MEAN)
                v = ne ? v / (double)ne : NAN;
        } else {
            v = NAN;
            for (size_t k = 0; k < ne; k++) {
                double y = q_elem(t->spec.dtype, p, k);
                if (k == 0 || (x->kind == N_MIN ? y < v : y > v))
                    v = y;
            }
        }
        o[i] = v;
    }
}

/* ==, in, contains and like of a text tensor: 1 where a row's sample
 * matches one of the node's strings (0 with not). */
static void text_matches(const q_node *x, const q_chunk *qc,
                         const uint64_t *rows, size_t n, double *o)
{
    for (size_t i = 0; i < n; i++) {
        size_t nb;
        int64_t shape[DLK_MAX_NDIM];
        const uint8_t *p = dlk_chunk_sample(qc->c,
                                            (uint32_t)(rows[i] - qc->first),
                                            &nb, shape);
        bool hit = false;
        for (size_t k = 0; !hit && k < x->nlist; k++) {
            const char *s = x->strs[k];
            size_t sl = x->lens[k];
            if (x->kind == N_CONTAINS)
                hit = sl == 0 || (nb >= sl && memmem(p, nb, s, sl));
            else if (x->kind == N_LIKE)
                hit = q_like(p, nb, s, sl);
            else
                hit = nb == sl && memcmp(p, s, sl) == 0;
        }
        o[i] = hit != x->negate;
    }
}

/* One loop per operator of N_ARITH and N_CMP over column a, rhs the
 * right operand at row i. */
#define LOOP(expr) for (size_t i = 0; i < n; i++) o[i] = (expr); break
#define BINARY_LOOPS(rhs)                       \
    switch (op) {                               \
    case '+': LOOP(a[i] + (rhs));               \
    case '-': LOOP(a[i] - (rhs));               \
    case '*': LOOP(a[i] * (rhs));               \
    case '/': LOOP(a[i] / (rhs));               \
    case '%': LOOP(fmod(a[i], (rhs)));          \
    case '=': LOOP(a[i] == (rhs));              \
    case '!': LOOP(a[i] != (rhs));              \
    case '<': LOOP(a[i] < (rhs));               \
    case 'l': LOOP(a[i] <= (rhs));              \
    case '>': LOOP(a[i] > (rhs));               \
    case 'g': LOOP(a[i] >= (rhs));              \
    }

/* a op c of a column and a constant. */
static void binary_const(int op, const double *a, double c, size_t n,
                         double *o)
{
    BINARY_LOOPS(c)
}

/* a op b of two columns. */
static void binary_cols(int op, const double *a, const double *b, size_t n,
                        double *o)
{
    BINARY_LOOPS(b[i])
}

#undef BINARY_LOOPS
#undef LOOP

/* A leaf that reads no tensor (a number, the row, random()) over rows. */
static void leaf(const q_node *x, const uint64_t *rows, size_t n, double *o)
{
    switch (x->kind) {
    case N_NUM:
        for (size_t i = 0; i < n; i++)
            o[i] = x->num;
        break;
    case N_ROW:
        for (size_t i = 0; i < n; i++)
            o[i] = (double)rows[i];
        break;
    default: /* N_RANDOM */
        for (size_t i = 0; i < n; i++)
            o[i] = q_random(x->seed, rows[i]);
    }
}

/* abs, -, not and in of the column a. */
static void unary(const q_node *x, const double *a, size_t n, double *o)
{
    switch (x->kind) {
    case N_ABS:
        for (size_t i = 0; i < n; i++)
            o[i] = fabs(a[i]);
        break;
    case N_NEG:
        for (size_t i = 0; i < n; i++)
            o[i] = -a[i];
        break;
    case N_NOT:
        for (size_t i = 0; i < n; i++)
            o[i] = !q_truth(a[i]);
        break;
    default: /* N_IN */
        for (size_t i = 0; i < n; i++) {
            bool hit = false;
            for (size_t k = 0; k < x->nlist && !hit; k++)
                hit = a[i] == x->list[k];
            o[i] = hit != x->negate;
        }
    }
}

/* a and b (and: true), else a or b, of two columns. */
static void logical(bool and, const double *a, const double *b, size_t n,
                    double *o)
{
    if (and)
        for (size_t i = 0; i < n; i++)
            o[i] = q_truth(a[i]) && q_truth(b[i]);
    else
        for (size_t i = 0; i < n; i++)
            o[i] = q_truth(a[i]) || q_truth(b[i]);
}

/* Node ni over the batch's first n rows: a column in the node's scratch. */
static const double *ev(worker *w, int ni, size_t n)
{
    const q_node *x = &w->e->nodes[ni];
    double *o = w->scratch + (size_t)ni * BATCH;
    const uint64_t *rows = w->rows;
    const q_chunk *qc = x->slot >= 0 ? w->cur[x->slot] : NULL;
    const Dlk_tensor *t = x->tensor >= 0 ? &w->ds->m.tensors[x->tensor]
                                         : NULL;
    switch (x->kind) {
    case N_NUM: case N_ROW: case N_RANDOM:
        leaf(x, rows, n, o);
        break;
    case N_SCALAR:
        q_load_scalar(t->spec.dtype, qc->c->payload, qc->first, rows, n,
                    w->contig, o);
        break;
    case N_SHAPE: case N_LEN: case N_MEAN: case N_SUM: case N_MIN:
    case N_MAX:
        sample_stats(x, t, qc, rows, n, o);
        break;
    case N_TEXT_EQ: case N_TEXT_IN: case N_CONTAINS: case N_LIKE:
        text_matches(x, qc, rows, n, o);
        break;
    case N_ABS: case N_NEG: case N_NOT: case N_IN:
        unary(x, ev(w, x->a, n), n, o);
        break;
    case N_AND: case N_OR: {
        const double *a = ev(w, x->a, n), *b = ev(w, x->b, n);
        logical(x->kind == N_AND, a, b, n, o);
        break;
    }
    case N_ARITH: case N_CMP: {
        const q_node *xb = &w->e->nodes[x->b];
        const double *a = ev(w, x->a, n);
        if (xb->kind == N_NUM) /* a constant: no column of it */
            binary_const(x->op, a, xb->num, n, o);
        else
            binary_cols(x->op, a, ev(w, x->b, n), n, o);
        break;
    }
    default: /* parse.c lets no other kind through */
        for (size_t i = 0; i < n; i++)
            o[i] = NAN;
    }
    return o;
}

/* ---- the common case: a scalar compared with a constant -------------- */

/* The root is `scalar op constant` of a dtype cmp_const reads. */
static bool simple_cmp(const q_expr *e, const Dlk_manifest *m)
{
    const q_node *x = &e->nodes[e->root];
    if (x->kind != N_CMP)
        return false;
    const q_node *a = &e->nodes[x->a], *b = &e->nodes[x->b];
    if (a->kind != N_SCALAR || b->kind != N_NUM)
        return false;
    dlk_dtype t = m->tensors[a->tensor].spec.dtype;
    return t != DLK_F16 && t != DLK_BF16;
}

/* ---- tasks and threads ---------------------------------------------- */

typedef struct task {
    uint64_t i0, i1;     /* candidate positions */
    uint64_t *out;
    uint64_t nout, cap;
} task;

typedef struct run {
    dlk_dataset *ds;
    const q_expr *e;
    const q_cands *cands;
    unsigned mode;
    task *tasks;
    size_t ntasks;
    /* chunk checks before the tasks: (tensor, chunk) pairs */
    size_t (*verify)[2];
    size_t nverify;
    atomic_size_t next;
    atomic_int failed;
    pthread_mutex_t mu;
    dlk_error err;
    dlk_status rc;
    uint64_t bytes;
    uint64_t *out;       /* the result, a slot per candidate; NULL: count */
    bool simple;         /* simple_cmp: the typed loop */
    /* chunks the check pass mapped, kept for the tasks: by slot, then by
     * chunk index (NULL where none) */
    q_chunk *kept;       /* one per verify entry */
    q_chunk ***shared;
} run;

static void run_fail(run *r, dlk_status rc, const dlk_error *err)
{
    pthread_mutex_lock(&r->mu);
    if (!r->rc) {
        r->rc = rc;
        r->err = *err;
    }
    pthread_mutex_unlock(&r->mu);
    atomic_store(&r->failed, 1);
}


/* Each tensor's chunk that holds candidate row r0 current in w (a
 * chunk the check pass kept, else read into the worker's own), *limit
 * the first row past the shortest of them. */
static dlk_status load_chunks(run *r, worker *w, uint64_t r0, uint64_t *limit,
                              uint64_t *bytes, dlk_error *err)
{
    const q_expr *e = r->e;
    dlk_dataset *ds = r->ds;
    *limit = UINT64_MAX;
    for (int s = 0; s < e->ntensors; s++) {
        const q_chunk *qc = w->cur[s];
        if (!qc || !qc->c || r0 < qc->first || r0 >= qc->end) {
            const Dlk_tensor *t = &ds->m.tensors[e->tensors[s]];
            ssize_t ci = Dlk_tensor_find_chunk(t, r0);
            if (ci < 0)
                return Dlk_fail(err, DLK_ECORRUPT, "tensor '%s' has no "
                                "row %llu", t->spec.name,
                                (unsigned long long)r0);
            if (r->shared && r->shared[s] && r->shared[s][ci]) {
                qc = r->shared[s][ci];
            } else {
                dlk_status rc = q_chunk_get(ds, (size_t)e->tensors[s],
                                            (size_t)ci, r->mode,
                                            &w->qc[s], bytes, err);
                if (rc)
                    return rc;
                qc = &w->qc[s];
            }
            w->cur[s] = qc;
        }
        if (qc->end < *limit)
            *limit = qc->end;
    }
    return DLK_OK;
}

/* The end of the task's positions from i that the current chunks hold
 * (candidates a range of rows from base; limit the chunks' end). */
static uint64_t range_end(const run *r, const task *tk, uint64_t limit)
{
    uint64_t base = r->cands->base;
    return tk->i1 < limit - base ? tk->i1 : limit - base;
}

/* The simple case (simple_cmp over a range of rows): positions i.. of
 * the chunk at r0 compared by the typed loop.  Returns the next
 * position. */
static uint64_t cmp_span(const run *r, worker *w, task *tk, uint64_t i,
                         uint64_t r0, uint64_t limit)
{
    const q_expr *e = r->e;
    const q_node *x = &e->nodes[e->root];
    const q_node *a = &e->nodes[x->a];
    const q_chunk *qc = w->cur[a->slot];
    /* positions: rows less the range's base */
    uint64_t end = range_end(r, tk, limit);
    tk->nout = q_cmp_const(r->ds->m.tensors[a->tensor].spec.dtype, x->op,
                           qc->c->payload, (size_t)(r0 - qc->first),
                           e->nodes[x->b].num, r0, (size_t)(end - i),
                           tk->out, tk->nout);
    return end;
}

/* The next batch of candidates from position *i that the current
 * chunks hold into w->rows (at most BATCH, below limit); their number. */
static size_t next_batch(const run *r, worker *w, const task *tk, uint64_t *i,
                         uint64_t limit)
{
    size_t n = 0;
    if (!r->cands->rows) { /* a range of rows: consecutive */
        uint64_t base = r->cands->base;
        uint64_t end = range_end(r, tk, limit);
        n = end - *i < BATCH ? (size_t)(end - *i) : BATCH;
        for (size_t k = 0; k < n; k++)
            w->rows[k] = base + *i + k;
        *i += n;
        w->contig = true;
    } else {
        while (*i < tk->i1 && n < BATCH) {
            uint64_t row = r->cands->rows[*i];
            if (row >= limit)
                break;
            w->rows[n++] = row;
            (*i)++;
        }
        w->contig = false;
    }
    return n;
}

/* The batch's rows whose value v is true appended to the task's
 * matches (counted only, without a result). */
static void keep_matches(const worker *w, task *tk, const double *v, size_t n)
{
    uint64_t *out = tk->out, m = tk->nout;
    if (out)
        for (size_t k = 0; k < n; k++) {
            out[m] = w->rows[k];
            m += q_truth(v[k]);
        }
    else
        for (size_t k = 0; k < n; k++)
            m += q_truth(v[k]);
    tk->nout = m;
}

static dlk_status run_task(run *r, worker *w, task *tk, uint64_t *bytes,
                           dlk_error *err)
{
    uint64_t i = tk->i0;
    /* the task's matches go to its own stretch of the result (room for
     * every candidate, so the append needs no branch on the result),
     * closed up when every task is done */
    tk->out = r->out ? r->out + tk->i0 : NULL;
    while (i < tk->i1) {
        if (atomic_load(&r->failed))
            return DLK_OK;
        uint64_t r0 = q_cand(r->cands, i), limit;
        dlk_status rc = load_chunks(r, w, r0, &limit, bytes, err);
        if (rc)
            return rc;
        if (!r->cands->rows && r->simple) {
            i = cmp_span(r, w, tk, i, r0, limit);
            continue;
        }
        size_t n = next_batch(r, w, tk, &i, limit);
        keep_matches(w, tk, ev(w, r->e->root, n), n);
    }
    return DLK_OK;
}

/* The checksums of the chunks the tasks will read, one chunk at a time. */
static void *verify_main(void *arg)
{
    run *r = arg;
    dlk_error err = {0};
    uint64_t bytes = 0;
    dlk_status rc = DLK_OK;
    while (!rc && !atomic_load(&r->failed)) {
        size_t k = atomic_fetch_add(&r->next, 1);
        if (k >= r->nverify)
            break;
        size_t slot = r->verify[k][0], ci = r->verify[k][1];
        q_chunk *qc = &r->kept[k];
        qc->index = -1;
        rc = q_chunk_get(r->ds, (size_t)r->e->tensors[slot], ci,
                         DLK_DECODE_VERIFY, qc, &bytes, &err);
        if (!rc && qc->map)  /* mapped: the tasks use it as it is */
            r->shared[slot][ci] = qc;
        else
            q_chunk_drop(r->ds, qc);
    }
    if (rc)
        run_fail(r, rc, &err);
    return (void *)(uintptr_t)bytes;
}

static void *task_main(void *arg)
{
    run *r = arg;
    worker w = {0};
    w.ds = r->ds;
    w.e = r->e;
    dlk_error err = {0};
    uint64_t bytes = 0;
    dlk_status rc = DLK_OK;
    w.qc = calloc((size_t)(r->e->ntensors ? r->e->ntensors : 1), sizeof *w.qc);
    w.cur = calloc((size_t)(r->e->ntensors ? r->e->ntensors : 1),
                   sizeof *w.cur);
    w.scratch = malloc(r->e->n * BATCH * sizeof *w.scratch);
    if (!w.qc || !w.cur || !w.scratch)
        rc = Dlk_oom(&err);
    for (int s = 0; w.qc && s < r->e->ntensors; s++)
        w.qc[s].index = -1;
    while (!rc && !atomic_load(&r->failed)) {
        size_t k = atomic_fetch_add(&r->next, 1);
        if (k >= r->ntasks)
            break;
        rc = run_task(r, &w, &r->tasks[k], r->nverify ? NULL : &bytes, &err);
    }
    for (int s = 0; w.qc && s < r->e->ntensors; s++)
        q_chunk_drop(r->ds, &w.qc[s]);
    free(w.qc);
    free(w.cur);
    free(w.scratch);
    if (rc)
        run_fail(r, rc, &err);
    return (void *)(uintptr_t)bytes;
}

/* Run fn on `threads` threads (the caller's one of them); their byte
 * counts summed into r->bytes. */
static void run_threads(run *r, uint32_t threads, void *(*fn)(void *))
{
    atomic_store(&r->next, 0);
    pthread_t *tid = calloc(threads, sizeof *tid);
    uint32_t started = 0;
    for (uint32_t i = 1; tid && i < threads; i++) {
        if (pthread_create(&tid[started], NULL, fn, r) != 0)
            break;
        started++;
    }
    r->bytes += (uint64_t)(uintptr_t)fn(r);
    for (uint32_t i = 0; i < started; i++) {
        void *b;
        pthread_join(tid[i], &b);
        r->bytes += (uint64_t)(uintptr_t)b;
    }
    free(tid);
}

static dlk_status add_task(run *r, size_t *cap, uint64_t i0, uint64_t i1,
                           dlk_error *err)
{
    if (!DLK_GROW(r->tasks, r->ntasks, *cap, 64))
        return Dlk_oom(err);
    r->tasks[r->ntasks++] = (task){i0, i1, NULL, 0, 0};
    return DLK_OK;
}

/* The chunks of the tensors named that hold candidates, to verify. */
static dlk_status plan_verify(run *r, dlk_error *err)
{
    const q_expr *e = r->e;
    size_t cap = 0;
    for (int s = 0; s < e->ntensors; s++) {
        const Dlk_tensor *t = &r->ds->m.tensors[e->tensors[s]];
        for (size_t c = 0; c < t->nchunks; c++) {
            const Dlk_chunk_entry *ce = &t->chunks[c];
            uint64_t i = q_cands_lower(r->cands, 0, r->cands->n,
                                       ce->first);
            if (i >= r->cands->n ||
                q_cand(r->cands, i) >= ce->first + ce->samples)
                continue;
            if (!DLK_GROW(r->verify, r->nverify, cap, 64))
                return Dlk_oom(err);
            r->verify[r->nverify][0] = (size_t)s;
            r->verify[r->nverify][1] = c;
            r->nverify++;
        }
    }
    return DLK_OK;
}

/* r set up for e over cands; returns the most candidates a task takes:
 * compressed chunks are decompressed once per task (one task a chunk,
 * verified as it is read, r->mode), otherwise pieces, verified first. */
static uint64_t run_init(run *r, dlk_dataset *ds, const q_expr *e,
                         const q_cands *cands, uint32_t threads, bool verify,
                         bool *compressed)
{
    memset(r, 0, sizeof *r);
    r->ds = ds;
    r->e = e;
    r->cands = cands;
    r->simple = simple_cmp(e, &ds->m);
    pthread_mutex_init(&r->mu, NULL);
    *compressed = false;
    for (int s = 0; s < e->ntensors; s++)
        *compressed |= ds->m.tensors[e->tensors[s]].spec.codec !=
                       DLK_CODEC_NONE;
    uint64_t piece = *compressed ? UINT64_MAX
                   : cands->n / ((uint64_t)threads * 4) + 1;
    if (piece < PIECE_MIN)
        piece = PIECE_MIN;
    r->mode = verify && *compressed ? DLK_DECODE_VERIFY : 0;
    return piece;
}

/* The candidates cut into tasks of at most piece, none across a chunk
 * of the first tensor. */
static dlk_status plan_tasks(run *r, uint64_t piece, dlk_error *err)
{
    const q_expr *e = r->e;
    const q_cands *cands = r->cands;
    const Dlk_tensor *drv = e->ntensors ? &r->ds->m.tensors[e->tensors[0]]
                                        : NULL;
    size_t cap = 0;
    dlk_status rc = DLK_OK;
    for (uint64_t i = 0; !rc && i < cands->n;) {
        uint64_t end = cands->n;
        if (drv) {
            ssize_t ci = Dlk_tensor_find_chunk(drv, q_cand(cands, i));
            if (ci < 0)
                return Dlk_fail(err, DLK_ECORRUPT, "tensor '%s' has no row "
                                "%llu", drv->spec.name,
                                (unsigned long long)q_cand(cands, i));
            const Dlk_chunk_entry *ce = &drv->chunks[ci];
            end = q_cands_lower(cands, i, cands->n,
                                ce->first + ce->samples);
        }
        if (end - i > piece)
            end = i + piece;
        rc = add_task(r, &cap, i, end, err);
        i = end;
    }
    return rc;
}

/* Room for the chunks the check pass keeps for the tasks. */
static dlk_status keep_room(run *r, dlk_error *err)
{
    const q_expr *e = r->e;
    const Dlk_manifest *m = &r->ds->m;
    r->kept = calloc(r->nverify, sizeof *r->kept);
    r->shared = calloc((size_t)e->ntensors, sizeof *r->shared);
    for (int s = 0; r->shared && s < e->ntensors; s++)
        if (!(r->shared[s] = calloc(m->tensors[e->tensors[s]].nchunks + 1,
                                    sizeof **r->shared)))
            break;
    bool all = r->kept && r->shared;
    for (int s = 0; all && s < e->ntensors; s++)
        all = r->shared[s] != NULL;
    return all ? DLK_OK : Dlk_oom(err);
}

/* The tasks' matches closed up at the start of the result; their number. */
static uint64_t close_up(run *r)
{
    uint64_t total = 0;
    for (size_t t = 0; t < r->ntasks; t++) {
        if (r->out && total != r->tasks[t].i0)
            memmove(r->out + total, r->tasks[t].out,
                    r->tasks[t].nout * sizeof *r->out);
        total += r->tasks[t].nout;
    }
    return total;
}

/* What r holds but its result. */
static void run_free(run *r)
{
    for (size_t k = 0; r->kept && k < r->nverify; k++)
        q_chunk_drop(r->ds, &r->kept[k]);
    free(r->kept);
    for (int s = 0; r->shared && s < r->e->ntensors; s++)
        free(r->shared[s]);
    free(r->shared);
    free(r->tasks);
    free(r->verify);
    pthread_mutex_destroy(&r->mu);
}

dlk_status q_filter(dlk_dataset *ds, const q_expr *e, const q_cands *cands,
                    uint32_t threads, bool verify, uint64_t **rows,
                    uint64_t *n, uint64_t *bytes, dlk_error *err)
{
    if (rows)
        *rows = NULL;
    *n = 0;
    if (!threads)
        threads = 1;
    run r;
    bool compressed;
    uint64_t piece = run_init(&r, ds, e, cands, threads, verify, &compressed);
    dlk_status rc = DLK_OK;
    if (verify && !compressed)
        rc = plan_verify(&r, err);
    if (!rc)
        rc = plan_tasks(&r, piece, err);
    if (!rc && rows && !(r.out = malloc((cands->n ? cands->n : 1) *
                                        sizeof *r.out)))
        rc = Dlk_oom(err);
    if (!rc && r.nverify)
        rc = keep_room(&r, err);
    if (!rc && r.nverify)
        run_threads(&r, threads, verify_main);
    if (!rc && !r.rc)
        run_threads(&r, threads, task_main);
    if (!rc && r.rc) {
        rc = r.rc;
        if (err)
            *err = r.err;
    }
    uint64_t total = close_up(&r);
    run_free(&r);
    uint64_t *out = r.out;
    if (out && total < cands->n) { /* give back what was not used */
        uint64_t *shrunk = realloc(out, (total ? total : 1) * sizeof *out);
        out = shrunk ? shrunk : out;
    }
    if (bytes)
        *bytes += r.bytes;
    if (rc) {
        free(out);
        return rc;
    }
    if (rows)
        *rows = out;
    *n = total;
    return DLK_OK;
}
