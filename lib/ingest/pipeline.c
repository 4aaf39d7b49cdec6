/* pipeline.c - the ingest pipeline: fetch threads (many GETs in flight;
 * from S3 one thread starting GETs that the store's I/O threads answer)
 * -> decode threads -> appending in sorted order, and checkpoints.  Rows
 * move through a window of W slots, so memory is bounded by W rows (their
 * source objects and decoded samples) plus the chunks being built and
 * written, whatever the size of the source.
 *
 *   slot k % W:  EMPTY -> FETCHING -> FETCHED -> DECODING -> DONE
 *                -> APPENDING -> APPENDED -> EMPTY
 *   fetchers take row k only while k < base + W (base: lowest row not yet
 *   appended); decoders take the lowest FETCHED row (with no fetchers, as
 *   from a local directory, each decoder reads the next row itself: a
 *   local read costs less than handing the row over); the thread that
 *   finishes row `base` (or, --unordered, any row) appends it and every
 *   row after it that is done, unless another thread is appending.  No
 *   thread waits to be woken to append: on a 16-core host, handing each row
 *   to a sleeping appender cost more than the appending.
 */
#include "pipeline.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OBJECT_MAX ((uint64_t)1 << 30)
#define ERRORS_KEPT 10000
#define VAL_KEEP ((size_t)4 << 20) /* a row's sample buffers kept up to */

enum { EMPTY, FETCHING, FETCHED, DECODING, DONE, APPENDING, APPENDED };

typedef struct slot {
    size_t row;
    Dlk_buf *bufs;
    size_t nbufs;
    ing_val *vals;
    dlk_status rc;        /* row error (rc && !fatal) or fatal error */
    bool fatal;
    const char *bad_key;
    char reason[DLK_ERRMSG_MAX];
    uint64_t bytes_in;
    size_t k;             /* the window row it holds (get_start) */
    size_t pending;       /* GETs not yet answered (atomic; get_start) */
} slot;

typedef struct pipe_state {
    ing_run *run;
    const ing_ctx *c;
    const size_t *todo;
    size_t ntodo;
    slot *slots;
    unsigned char *state; /* of slot k % W: apart, so that looking for a
                             row to take touches a few cache lines */
    size_t W;
    pthread_mutex_t mu;
    pthread_cond_t cv_fetch, cv_decode, cv_append;
    size_t next_fetch, base;
    size_t nfetchers;     /* 0: the decoders read their own rows */
    /* A store that starts GETs without waiting (S3: Dlk_store_get_start):
     * one thread submits rows' GETs and the store's I/O threads hand each
     * row on as its answers come (no fetch thread waits for them).
     * reqs[i * maxn + j]: slot i's object j. */
    bool async;
    Dlk_get_req *reqs;
    size_t batch;         /* rows a fetcher takes at once: their GETs go
                             out together (Dlk_store_get_start) */
    size_t fetching;      /* rows the fetchers hold: at most depth */
    size_t nfetch;        /* --fetch: the most rows they may hold */
    size_t depth;         /* what depth() gave last (read under p->mu
                             without asking the store) */
    size_t maxn;          /* objects in a row at most */
    size_t scan;          /* rows below it (and from base) are taken or
                             failed: no decoder looks there again */
    /* Sample buffers between rows, one stack per tensor: a row's go back
     * here when it is appended and a decoder takes the latest when it
     * starts one, so that only rows being decoded or waiting to be
     * appended hold them (not every slot of the window), and the one a
     * decoder writes was in use moments ago. */
    Dlk_buf **spare;
    size_t *nspare;
    bool stop;
    bool appending;       /* a thread is in drain() */
    dlk_status rc;        /* the first fatal error, which stops the run */
    dlk_error err;
    double t0, last_report, last_ckpt, every;
    uint64_t done, since_ckpt;
    /* summed over the threads, added as each thread exits */
    double fetch_s, decode_s, decode_wait_s, decode_lock_s;
} pipe_state;

static slot *slot_of(pipe_state *p, size_t k) { return &p->slots[k % p->W]; }
static unsigned char *state_of(pipe_state *p, size_t k)
{
    return &p->state[k % p->W];
}

/* The most a GET of o may bring: the size its listing gave (a body
 * longer than that, or a Content-Length claiming more, is refused before
 * anything is reserved for it), OBJECT_MAX when none was given. */
static uint64_t object_max(const ing_obj *o)
{
    return o->size < OBJECT_MAX ? o->size : OBJECT_MAX;
}

/* A row's fetch failed on object o. */
static void fetch_failed(slot *s, const ing_obj *o, dlk_status rc,
                         const char *msg)
{
    s->rc = rc;
    s->bad_key = o->key;
    const char *why = rc == DLK_ELIMIT && o->size < OBJECT_MAX
                          ? " (the size its listing gave)" : "";
    snprintf(s->reason, sizeof s->reason, "%.*s%s",
             (int)(sizeof s->reason - strlen(why) - 1), msg, why);
    /* gone since the listing, or too big: the row's fault; the rest
     * (network, access) stops the run, which can resume */
    s->fatal = rc != DLK_ENOTFOUND && rc != DLK_ELIMIT;
}

static void fetch_start(slot *s)
{
    s->rc = DLK_OK;
    s->fatal = false;
    s->bytes_in = 0;
}

static void fetch_row(pipe_state *p, slot *s)
{
    const ing_source *src = p->c->src;
    const ing_row *r = &src->rows[s->row];
    fetch_start(s);
    for (uint32_t i = 0; i < r->n; i++) {
        const ing_obj *o = &src->objs[r->first + i];
        Dlk_buf *b = &s->bufs[i];
        b->len = 0;
        if (o->role == ING_NONE)
            continue;
        dlk_error e;
        dlk_status rc = ing_obj_get(src, o, object_max(o), b, &e);
        if (rc) {
            fetch_failed(s, o, rc, e.msg);
            return;
        }
        s->bytes_in += b->len;
    }
}

static void drain(pipe_state *p);
static bool may_fetch(pipe_state *p);

/* Row k is fetched (or failed): on to a decoder (or, failed, to the
 * appender), and its place to a fetcher (under p->mu). */
static void row_ready(pipe_state *p, size_t k)
{
    slot *s = slot_of(p, k);
    DLK_ASSERT(*state_of(p, k) == FETCHING && p->fetching > 0);
    *state_of(p, k) = s->rc ? DONE : FETCHED;
    p->fetching--;
    /* one row for one thread: a broadcast would wake every idle decoder
     * (or fetcher) to find nothing, which on few cores costs more than
     * the decoding */
    if (!s->rc)
        pthread_cond_signal(&p->cv_decode);
    else
        drain(p);
    if (may_fetch(p) ||
        (p->async && !p->fetching)) /* the submitter waits for the last */
        pthread_cond_signal(&p->cv_fetch);
}

/* Free slots a fetcher waits for: a batch, or the rows left (p->mu). */
static size_t fetch_need(const pipe_state *p)
{
    size_t left = p->ntodo - p->next_fetch;
    return left < p->batch ? left : p->batch;
}

/* Rows the fetchers may hold now: --fetch, or while the store keeps few
 * GETs in flight (a store that answers at once: its limit stays at its
 * default) that many and a few batches more, so that its slots never
 * wait for a fetch thread.  More rows queued there than it serves only
 * cost (16-core host, 0 ms: 256 rows 5-7% slower than 64). */
static size_t depth(const pipe_state *p)
{
    int in = Dlk_store_want_inflight(p->c->src->store, 0);
    size_t d = in > 0 && (size_t)in < p->nfetch ? (size_t)in + 8 * p->batch
                                                : p->nfetch;
    return d < p->nfetch ? d : p->nfetch;
}

/* A fetcher may take a batch (or as many rows as depth allows): rows
 * left, room in the window and under depth. */
static bool may_fetch(pipe_state *p)
{
    if (p->next_fetch >= p->ntodo)
        return false;
    size_t need = fetch_need(p), d = p->depth;
    if (need > d)
        need = d;
    return p->base + p->W - p->next_fetch >= need &&
           p->fetching + need <= d;
}

/* A fetcher waits until it may take rows (under p->mu); false when it is
 * to leave: the run stopped or every row is taken. */
static bool wait_fetch(pipe_state *p)
{
    while (!p->stop && p->next_fetch < p->ntodo && !may_fetch(p))
        pthread_cond_wait(&p->cv_fetch, &p->mu);
    return !p->stop && p->next_fetch < p->ntodo;
}

static void *fetcher(void *arg)
{
    pipe_state *p = arg;
    double busy = 0;
    pthread_mutex_lock(&p->mu);
    while (wait_fetch(p)) {
        size_t k = p->next_fetch++;
        *state_of(p, k) = FETCHING;
        slot_of(p, k)->row = p->todo[k];
        p->fetching++;
        pthread_mutex_unlock(&p->mu);
        double t = Dlk_now_s();
        fetch_row(p, slot_of(p, k));
        busy += Dlk_now_s() - t;
        pthread_mutex_lock(&p->mu);
        row_ready(p, k);
    }
    p->fetch_s += busy;
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Every GET of the row in slot s (the window's row k) is answered
 * (get_start): its result as fetch_row gives it, on to a decoder. */
static void row_answered(pipe_state *p, slot *s)
{
    const ing_source *src = p->c->src;
    const ing_row *r = &src->rows[s->row];
    Dlk_get_req *g = &p->reqs[(size_t)(s - p->slots) * p->maxn];
    for (uint32_t i = 0; i < r->n; i++) {
        const ing_obj *o = &src->objs[r->first + i];
        if (o->role == ING_NONE)
            continue;
        if (g[i].rc && !s->rc) /* the row's first failure, in key order */
            fetch_failed(s, o, g[i].rc, g[i].err.msg);
        if (!g[i].rc)
            s->bytes_in += s->bufs[i].len;
    }
    pthread_mutex_lock(&p->mu);
    row_ready(p, s->k);
    pthread_mutex_unlock(&p->mu);
}

/* A GET of get_start is answered (on the store's I/O thread): the row's
 * last one hands the row on. */
static void get_answered(void *ud, Dlk_get_req *q)
{
    pipe_state *p = ud;
    slot *s = &p->slots[(size_t)(q - p->reqs) / p->maxn];
    if (__atomic_sub_fetch(&s->pending, 1, __ATOMIC_ACQ_REL) == 0)
        row_answered(p, s);
}

/* The one fetch thread of a get_start store: it takes rows as the window
 * and depth allow and starts their GETs; the store's threads hand them
 * on (get_answered).  It leaves when every row it started is answered,
 * so that none is answered into a freed window. */
static void *submitter(void *arg)
{
    pipe_state *p = arg;
    const ing_source *src = p->c->src;
    double busy = 0;
    Dlk_get_req **qs = calloc(p->batch * p->maxn, sizeof *qs);
    pthread_mutex_lock(&p->mu);
    if (!qs && !p->stop) {
        p->rc = Dlk_oom(&p->err);
        p->stop = true;
        pthread_cond_broadcast(&p->cv_decode);
        pthread_cond_signal(&p->cv_append);
    }
    while (wait_fetch(p)) {
        size_t k0 = p->next_fetch, n = 0, d = p->depth;
        while (n < p->batch && p->next_fetch < p->ntodo &&
               p->next_fetch < p->base + p->W && p->fetching + n < d) {
            size_t k = p->next_fetch++;
            *state_of(p, k) = FETCHING;
            slot_of(p, k)->row = p->todo[k];
            n++;
        }
        p->fetching += n;
        pthread_mutex_unlock(&p->mu);
        double t = Dlk_now_s();
        size_t nq = 0;
        slot *bare[8]; /* rows with no object to GET (a batch: 8) */
        size_t nbare = 0;
        for (size_t k = k0; k < k0 + n; k++) {
            slot *s = slot_of(p, k);
            const ing_row *r = &src->rows[s->row];
            Dlk_get_req *g = &p->reqs[(size_t)(s - p->slots) * p->maxn];
            fetch_start(s);
            s->k = k;
            size_t m = 0;
            for (uint32_t i = 0; i < r->n; i++) {
                s->bufs[i].len = 0;
                if (src->objs[r->first + i].role == ING_NONE)
                    continue;
                const ing_obj *o = &src->objs[r->first + i];
                g[i] = (Dlk_get_req){.key = o->key, .max = object_max(o),
                                     .out = &s->bufs[i]};
                qs[nq++] = &g[i];
                m++;
            }
            __atomic_store_n(&s->pending, m, __ATOMIC_RELEASE);
            if (!m)
                bare[nbare++] = s;
        }
        Dlk_store_get_start(src->store, qs, nq, get_answered, p);
        for (size_t i = 0; i < nbare; i++)
            row_answered(p, bare[i]);
        busy += Dlk_now_s() - t;
        size_t d2 = depth(p); /* the store's limit may have grown */
        pthread_mutex_lock(&p->mu);
        p->depth = d2;
    }
    while (p->fetching) /* answers still to come */
        pthread_cond_wait(&p->cv_fetch, &p->mu);
    p->fetch_s += busy;
    pthread_mutex_unlock(&p->mu);
    free(qs);
    return NULL;
}

/* The lowest fetched row, or p->next_fetch when none (under p->mu).
 * Fetchers finish nearly in order, so this looks at the rows still being
 * fetched, not the whole window. */
static size_t fetched_row(pipe_state *p)
{
    if (p->scan < p->base)
        p->scan = p->base;
    while (p->scan < p->next_fetch && *state_of(p, p->scan) > FETCHED)
        p->scan++;
    size_t k = p->scan;
    while (k < p->next_fetch && *state_of(p, k) != FETCHED)
        k++;
    return k;
}

/* A decode thread waits for a row (or, reading its own, for room in the
 * window), its wait added to *waited (under p->mu). */
static void wait_decode(pipe_state *p, double *waited)
{
    double t = Dlk_now_s();
    pthread_cond_wait(&p->cv_decode, &p->mu);
    *waited += Dlk_now_s() - t;
}

/* A row about to be decoded takes a spare buffer for each tensor whose
 * value has none (under p->mu). */
static void take_spares(pipe_state *p, slot *s)
{
    for (size_t t = 0; t < p->c->ntensors; t++)
        if (!s->vals[t].data.cap && p->nspare[t])
            s->vals[t].data = p->spare[t][--p->nspare[t]];
}

/* An appended row's sample buffers (cleared, kept up to VAL_KEEP) back to
 * the spares (under p->mu), W a tensor at most (past that a buffer stays
 * with its slot, where it is reused for the slot's next row). */
static void give_spares(pipe_state *p, slot *s)
{
    for (size_t t = 0; t < p->c->ntensors; t++) {
        Dlk_buf *b = &s->vals[t].data;
        if (b->cap && p->nspare[t] < p->W) {
            p->spare[t][p->nspare[t]++] = *b;
            Dlk_buf_init(b);
        }
    }
}

static void *decoder(void *arg)
{
    pipe_state *p = arg;
    double busy = 0, wait = 0, lock = 0, fetch = 0;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        size_t k;
        slot *s;
        if (p->nfetchers == 0) {
            /* no fetch threads: take the next row and read it here */
            if (p->next_fetch >= p->ntodo)
                break;
            if (p->next_fetch >= p->base + p->W) {
                wait_decode(p, &wait);
                continue;
            }
            k = p->next_fetch++;
            s = slot_of(p, k);
            *state_of(p, k) = FETCHING;
            s->row = p->todo[k];
            take_spares(p, s);
            pthread_mutex_unlock(&p->mu);
            double t = Dlk_now_s();
            fetch_row(p, s);
            fetch += Dlk_now_s() - t;
            if (s->rc) {
                pthread_mutex_lock(&p->mu);
                *state_of(p, k) = DONE;
                drain(p);
                continue;
            }
        } else {
            if ((k = fetched_row(p)) >= p->next_fetch) {
                wait_decode(p, &wait);
                continue;
            }
            s = slot_of(p, k);
            *state_of(p, k) = DECODING;
            take_spares(p, s);
            pthread_mutex_unlock(&p->mu);
        }
        dlk_error e;
        e.msg[0] = '\0';
        double t = Dlk_now_s();
        s->rc = ing_row_build(p->c, s->row, s->bufs, s->vals, &s->bad_key,
                              &e);
        if (s->rc) {
            snprintf(s->reason, sizeof s->reason, "%s", e.msg);
            s->fatal = s->rc == DLK_ENOMEM || s->rc == DLK_EINTERNAL;
        }
        /* the source bytes are not needed any more: keep small buffers */
        const ing_row *r = &p->c->src->rows[s->row];
        for (uint32_t i = 0; i < r->n; i++)
            if (s->bufs[i].cap > (4u << 20))
                Dlk_buf_free(&s->bufs[i]);
        double t1 = Dlk_now_s();
        busy += t1 - t;
        pthread_mutex_lock(&p->mu);
        lock += Dlk_now_s() - t1;
        *state_of(p, k) = DONE;
        drain(p);
    }
    p->decode_s += busy;
    p->fetch_s += fetch;
    p->decode_wait_s += wait;
    p->decode_lock_s += lock;
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Reset a slot's values for its next row; keep is the largest buffer
 * kept (0: free them all).  Keeping them (as spares) spares a fresh
 * block, and its page faults, per image. */
static void clear_vals(ing_val *v, size_t n, size_t keep)
{
    for (size_t i = 0; i < n; i++) {
        Dlk_buf b = v[i].data;
        if (b.cap > keep || b.fixed)
            Dlk_buf_free(&b);
        b.len = 0;
        memset(&v[i], 0, sizeof v[i]);
        v[i].data = b;
    }
}

static char *stem_dup(const ing_source *src, size_t row)
{
    size_t len;
    const char *st = ing_row_stem(src, row, &len);
    return strndup(st, len);
}

static dlk_status progress_stems(ing_run *run, pipe_state *p,
                                 dlk_error *err);

/* Publish progress: seal the open chunks, then write the staging document
 * listing them with the stem done through (and, unordered, beyond). */
static dlk_status checkpoint(ing_run *run, pipe_state *p, dlk_error *err)
{
    dlk_status rc = Dlk_dataset_seal(run->ds, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&p->mu);
    rc = progress_stems(run, p, err);
    pthread_mutex_unlock(&p->mu);
    if (rc)
        return rc;
    return ing_stage_write(run->ds, run->stage_key, run->source,
                           run->shard, run->nshards, run->options,
                           &run->prog, err);
}

/* done_through and done_also from the window (under the lock). */
static dlk_status progress_stems(ing_run *run, pipe_state *p, dlk_error *err)
{
    ing_progress *pr = &run->prog;
    if (p->base > 0) {
        char *st = stem_dup(p->c->src, p->todo[p->base - 1]);
        if (!st)
            return Dlk_oom(err);
        /* rows skipped by resume before todo[0] are done as well */
        free(pr->done_through);
        pr->done_through = st;
    }
    for (size_t i = 0; i < pr->n_done_also; i++)
        free(pr->done_also[i]);
    pr->n_done_also = 0;
    size_t extra = 0;
    for (size_t k = p->base; k < p->next_fetch; k++)
        extra += *state_of(p, k) == APPENDED;
    if (extra) {
        char **v = realloc(pr->done_also, extra * sizeof *v);
        if (!v)
            return Dlk_oom(err);
        pr->done_also = v;
        for (size_t k = p->base; k < p->next_fetch; k++)
            if (*state_of(p, k) == APPENDED &&
                !(v[pr->n_done_also++] = stem_dup(p->c->src, p->todo[k])))
                return Dlk_oom(err);
    }
    return DLK_OK;
}

static void report(ing_run *run, double t0, uint64_t done, size_t total)
{
    if (!run->o->progress)
        return;
    dlk_ingest_progress pg = {
        .rows_done = done, .rows_total = total,
        .bytes_in = run->res->bytes_in, .bytes_out = run->res->bytes_out,
        .seconds = Dlk_now_s() - t0,
    };
    run->o->progress(run->o->ud, &pg);
}

/* The appender's work on one finished slot. */
static dlk_status take(ing_run *run, pipe_state *p, slot *s, dlk_error *err)
{
    const ing_ctx *c = p->c;
    run->res->bytes_in += s->bytes_in;
    run->prog.bytes_in += s->bytes_in;
    if (s->rc && s->fatal)
        return Dlk_fail(err, s->rc, "%s", s->reason);
    if (s->rc) {
        const char *key = s->bad_key ? s->bad_key : "?";
        if (run->o->on_bad)
            run->o->on_bad(run->o->ud, key, s->reason);
        run->res->skipped++;
        run->prog.skipped++;
        if (json_array_size(run->prog.errors) < ERRORS_KEPT)
            json_array_append_new(run->prog.errors,
                                  json_pack("{s:s,s:s}", "key", key,
                                            "reason", s->reason));
        if (run->o->on_error == DLK_ON_ERROR_FAIL) {
            run->failed = true;
            return Dlk_fail(err, DLK_EDECODE, "cannot ingest '%s': %s", key,
                            s->reason);
        }
        return DLK_OK;
    }
    for (size_t t = 0; t < c->ntensors; t++) {
        ing_val *v = &s->vals[t];
        size_t n = v->data.len;
        /* a large sample's buffer goes into the chunk as it is; the slot
         * gets one the chunk writers are done with */
        dlk_status rc = Dlk_append_take(run->ds, t, &v->data, v->shape,
                                        v->ndim, err);
        if (rc)
            return rc;
        run->res->bytes_out += n;
        run->prog.bytes_out += n;
    }
    run->res->ingested++;
    run->prog.ingested++;
    return DLK_OK;
}

/* The next row that may be appended: row base when done, or with
 * --unordered the lowest done row in the window; p->next_fetch when none.
 * Under p->mu. */
static size_t appendable(pipe_state *p)
{
    if (!p->run->o->unordered)
        return p->base < p->next_fetch && *state_of(p, p->base) == DONE
                   ? p->base
                   : p->next_fetch;
    size_t k = p->base;
    while (k < p->next_fetch && *state_of(p, k) != DONE)
        k++;
    return k;
}

/* Under p->mu (released while appending): append every row that can go
 * now, unless another thread is at it; it will see ours before it stops,
 * as both look under the lock.  Progress and checkpoints happen here. */
static void drain(pipe_state *p)
{
    if (p->appending)
        return;
    p->appending = true;
    ing_run *run = p->run;
    size_t k;
    while (!p->stop && (k = appendable(p)) < p->next_fetch) {
        slot *s = slot_of(p, k);
        if (s->rc == DLK_ECANCELED) {
            /* the source's GETs were ended as the run stops (its cancel
             * asks o->stop): the row is the next run's, not a failure */
            run->interrupted = true;
            p->stop = true;
            pthread_cond_broadcast(&p->cv_fetch);
            pthread_cond_broadcast(&p->cv_decode);
            pthread_cond_signal(&p->cv_append);
            break;
        }
        /* in order, only the lowest row not yet appended is taken */
        DLK_ASSERT(*state_of(p, k) == DONE &&
                   (run->o->unordered || k == p->base));
        *state_of(p, k) = APPENDING;
        pthread_mutex_unlock(&p->mu);
        dlk_error e;
        double ta = Dlk_now_s();
        dlk_status rc = take(run, p, s, &e);
        clear_vals(s->vals, run->ctx.ntensors, VAL_KEEP);
        double now = Dlk_now_s();
        run->res->append_seconds += now - ta;
        p->done++;
        p->since_ckpt++;
        if (!rc && now - p->last_report >= 0.1) {
            report(run, p->t0, p->done, p->ntodo);
            p->last_report = now;
        }
        pthread_mutex_lock(&p->mu);
        give_spares(p, s);
        *state_of(p, k) = APPENDED;
        while (p->base < p->next_fetch &&
               *state_of(p, p->base) == APPENDED) {
            *state_of(p, p->base) = EMPTY;
            p->base++;
            /* one slot, one decoder reading its own; a batch of slots,
             * one fetcher */
            if (!p->nfetchers)
                pthread_cond_signal(&p->cv_decode);
            else if (may_fetch(p))
                pthread_cond_signal(&p->cv_fetch);
        }
        if (!rc && now - p->last_ckpt >= p->every && p->base < p->ntodo) {
            pthread_mutex_unlock(&p->mu);
            rc = checkpoint(run, p, &e);
            p->last_ckpt = Dlk_now_s();
            p->since_ckpt = 0;
            pthread_mutex_lock(&p->mu);
        }
        if (rc) {
            p->rc = rc;
            p->err = e;
            p->stop = true;
            pthread_cond_broadcast(&p->cv_fetch);
            pthread_cond_broadcast(&p->cv_decode);
        }
        if (p->stop || p->base >= p->ntodo)
            pthread_cond_signal(&p->cv_append);
    }
    p->appending = false;
}

/* The window's slots, their buffers and the spares (nt tensors; any of
 * them may be missing after an allocation failed). */
static void free_window(pipe_state *p, size_t nt)
{
    for (size_t i = 0; p->slots && i < p->W; i++) {
        for (size_t j = 0; p->slots[i].bufs && j < p->slots[i].nbufs; j++)
            Dlk_buf_free(&p->slots[i].bufs[j]);
        if (p->slots[i].vals)
            clear_vals(p->slots[i].vals, p->c->ntensors, 0);
        free(p->slots[i].bufs);
        free(p->slots[i].vals);
    }
    for (size_t t = 0; p->spare && p->nspare && t < nt; t++) {
        for (size_t i = 0; p->spare[t] && i < p->nspare[t]; i++)
            Dlk_buf_free(&p->spare[t][i]);
        free(p->spare[t]);
    }
    free(p->slots);
    free(p->reqs);
    free(p->state);
    free(p->spare);
    free(p->nspare);
}

/* The fetch threads and the window: how many of each, how many rows in
 * flight (p->W), the largest row's object count (p->maxn).  Returns
 * the number of fetch threads. */
static size_t plan_window(pipe_state *p, ing_run *run)
{
    /* --fetch GETs in flight: from a store that keeps many in flight
     * without a thread each (S3), started 8 rows at a time */
    const Dlk_store_ops *ops = run->ctx.src->store->ops;
    /* a tar member is a range of its shard: read by the fetch threads
     * (get_start GETs whole objects) */
    bool whole = ops->get_start && !run->ctx.src->nshards;
    p->batch = whole ? 8 : 1;
    size_t nfetch = (size_t)run->fetchers, njobs = (size_t)run->jobs;
    size_t nthreads = (nfetch + p->batch - 1) / p->batch;
    /* a store that answers on threads of its own needs one thread to
     * start its GETs, none to wait for them (16-core host: the decoders
     * waited on the lock that 32 fetch threads took for each row).
     * Slower by 5% on that host: each decode thread with a
     * thread-less engine of its own, turned between images - libcurl's
     * work on the decoders' cores cost more than on an I/O thread. */
    p->async = whole && nthreads;
    if (p->async)
        nthreads = 1;
    p->nfetchers = nthreads;
    p->nfetch = nfetch;
    /* 16 rows a decoder: a decoder descheduled for a few ms (16 decoders,
     * 4 writers and the fetchers share the cores) holds back every row
     * after its own, and with 2 a decoder (64 rows at 16 jobs) the others
     * sat idle 30% of the time (H200 host, 16 cores: 7,670 files/s; 256
     * rows: 8,536, decoders idle 8%; 1,024 rows: no better) */
    p->W = 2 * nfetch + 16 * njobs;
    if (p->W < 8)
        p->W = 8;
    size_t maxn = 1;
    for (size_t i = 0; i < run->ctx.src->nrows; i++)
        if (run->ctx.src->rows[i].n > maxn)
            maxn = run->ctx.src->rows[i].n;
    p->maxn = maxn;
    return nthreads;
}

/* The window's slots, spare buffers and requests; false when out of
 * memory (free_window frees what was made). */
static bool alloc_window(pipe_state *p, size_t nt)
{
    p->slots = calloc(p->W, sizeof *p->slots);
    p->state = calloc(p->W, sizeof *p->state);
    p->spare = calloc(nt, sizeof *p->spare);
    p->nspare = calloc(nt, sizeof *p->nspare);
    bool oom = !p->slots || !p->state || !p->spare || !p->nspare;
    for (size_t i = 0; !oom && i < p->W; i++) {
        p->slots[i].bufs = calloc(p->maxn, sizeof *p->slots[i].bufs);
        p->slots[i].nbufs = p->maxn;
        p->slots[i].vals = calloc(nt, sizeof *p->slots[i].vals);
        oom = !p->slots[i].bufs || !p->slots[i].vals;
    }
    for (size_t t = 0; !oom && t < nt; t++)
        oom = !(p->spare[t] = calloc(p->W, sizeof *p->spare[t]));
    if (!oom && p->async)
        oom = !(p->reqs = calloc(p->W * p->maxn, sizeof *p->reqs));
    return !oom;
}

/* nthreads fetch (or submit) threads, then njobs decoders; the number
 * started, with *rc set when one could not be. */
static size_t start_threads(pipe_state *p, pthread_t *th, size_t nthreads,
                            size_t njobs, dlk_status *rc, dlk_error *err)
{
    size_t started = 0;
    for (size_t i = 0; i < nthreads + njobs; i++) {
        void *(*fn)(void *) = i >= nthreads ? decoder
                              : p->async    ? submitter
                                            : fetcher;
        if (pthread_create(&th[i], NULL, fn, p)) {
            *rc = Dlk_fail(err, DLK_EIO, "cannot start a thread");
            break;
        }
        /* names for top -H and /proc/PID/task/TID/comm */
        pthread_setname_np(th[i], i < nthreads ? "dlk-fetch" : "dlk-decode");
        started++;
    }
    return started;
}

/* Under p->mu: until the last row is appended, a thread's fatal error,
 * or the caller's stop (run->interrupted). */
static void wait_rows(pipe_state *p, ing_run *run, dlk_status rc)
{
    const dlk_ingest_opts *o = run->o;
    /* the rows are appended by the threads that finish them (drain);
     * this one waits for the last, or for a fatal error */
    while (!rc && !p->stop && p->base < p->ntodo) {
        if (!o->stop) {
            pthread_cond_wait(&p->cv_append, &p->mu);
            continue;
        }
        /* polled here, on the caller's thread, a few times a second */
        Dlk_cond_wait_ms(&p->cv_append, &p->mu, 100);
        if (!p->stop && p->base < p->ntodo && o->stop(o->ud)) {
            /* the rows appended so far are checkpointed below; those
             * fetched or decoded are left for the next run */
            run->interrupted = true;
            break;
        }
    }
}

/* The stages' times into the run's result. */
static void take_timings(const pipe_state *p, ing_run *run)
{
    run->res->fetch_seconds = p->fetch_s;
    run->res->decode_seconds = p->decode_s;
    run->res->decode_wait_seconds = p->decode_wait_s;
    run->res->decode_lock_seconds = p->decode_lock_s;
    run->res->write_wait_seconds = Dlk_seal_wait_seconds(run->ds);
}

dlk_status ing_pipeline_run(ing_run *run, const size_t *todo, size_t ntodo,
                            dlk_error *err)
{
    const dlk_ingest_opts *o = run->o;
    pipe_state p;
    memset(&p, 0, sizeof p);
    p.c = &run->ctx;
    p.todo = todo;
    p.ntodo = ntodo;
    size_t nthreads = plan_window(&p, run), njobs = (size_t)run->jobs;
    size_t nt = run->ctx.ntensors ? run->ctx.ntensors : 1;
    bool ok = alloc_window(&p, nt);
    pthread_t *th = calloc(nthreads + njobs, sizeof *th);
    if (!ok || !th) {
        free_window(&p, nt);
        free(th);
        return Dlk_oom(err);
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv_fetch, NULL);
    pthread_cond_init(&p.cv_decode, NULL);
    pthread_cond_init(&p.cv_append, NULL);
    p.run = run;
    p.depth = nthreads ? depth(&p) : 0;
    p.t0 = p.last_ckpt = Dlk_now_s();
    p.every = o->checkpoint_seconds > 0 ? o->checkpoint_seconds : 30;
    dlk_status rc = ing_tgz_plan(run->ctx.src, todo, ntodo, err);
    report(run, p.t0, 0, ntodo); /* the rows' count, before the first */
    size_t started = rc ? 0 : start_threads(&p, th, nthreads, njobs, &rc,
                                            err);
    pthread_mutex_lock(&p.mu);
    wait_rows(&p, run, rc);
    if (!rc && p.rc) {
        rc = p.rc;
        if (err)
            *err = p.err;
    }
    run->res->rows_seconds = Dlk_now_s() - p.t0;
    p.stop = true;
    pthread_cond_broadcast(&p.cv_fetch);
    pthread_cond_broadcast(&p.cv_decode);
    pthread_mutex_unlock(&p.mu);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    take_timings(&p, run);
    run->res->shard_reads += ing_tgz_reads(run->ctx.src->tgz);
    if (!rc && p.since_ckpt)
        rc = checkpoint(run, &p, err);
    if (!rc)
        report(run, p.t0, p.done, ntodo);
    free_window(&p, nt);
    free(th);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv_fetch);
    pthread_cond_destroy(&p.cv_decode);
    pthread_cond_destroy(&p.cv_append);
    return rc;
}
