/* loader.c - the streaming loader: a plan per epoch (order.c), I/O threads
 * that read whole chunks ahead of the consumer within a memory budget,
 * and batches gathered on the device (device_*.c).
 *
 * The plan turns the rank's sample stream into "slots": a chunk of a
 * tensor needed over a run of consecutive stream positions.  Slots are
 * loaded in the order they are first needed, as the budget allows (a slot
 * the current batch needs is always admitted, so the loader never
 * deadlocks), and released once the consumer has passed their last use. */
#include "loader_int.h"
#include "augment_batch.h"
#include "util/abi.h"
#include "util/check.h"
#include "util/clock.h"
#include "dlk_bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- planning ------------------------------------------------------ */

void Dlk_plan_free(dlk_loader *l, Dlk_plan *pl, bool stopped)
{
    for (size_t i = 0; i < pl->nslots; i++) {
        Dlk_slot *s = &pl->slots[i];
        /* no worker holds a ready or failed slot (a failed one may hold
         * a buffer, and its bytes count against the budget) */
        if (s->state == SLOT_READY || s->state == SLOT_FAILED ||
            (stopped && s->state == SLOT_LOADING && (s->ch || s->host)))
            Dlk_loader_release_slot(l, s); /* queued uploads too */
        Dlk_slot_free_err(s);
    }
    free(pl->slots);
    free(pl->sched);
    for (size_t t = 0; pl->key_slot && t < l->nt; t++)
        free(pl->key_slot[t]);
    free(pl->key_slot);
    Dlk_order_free(&pl->order);
    memset(pl, 0, sizeof *pl);
}

/* The state at the start of the epoch after st's. */
static dlk_loader_state next_epoch_state(const dlk_loader *l,
                                         const dlk_loader_state *st)
{
    dlk_loader_state n = *st;
    n.epoch++;
    n.nseg = 1;
    n.seg[0].world = l->o.world_size;
    n.seg[0].batch = l->o.batch_size;
    n.seg[0].steps = 0;
    n.samples = 0;
    return n;
}

/* The chunk of tensor lt holding `sample`, and the key of its slots: the
 * chunk, or the unit of it read in spans (parts [*p0, *p1)); false when
 * the tensor has no such sample. */
static bool sample_key(const Dlk_loader_tensor *lt, uint64_t sample,
                       size_t *chunk, size_t *key, uint32_t *p0,
                       uint32_t *p1)
{
    const Dlk_tensor *tt = lt->tensor;
    ssize_t c = Dlk_tensor_find_chunk(tt, sample);
    if (c < 0)
        return false;
    *chunk = (size_t)c;
    *key = (size_t)c;
    *p0 = *p1 = 0;
    if (lt->need) { /* some rows only: the run of parts holding them */
        uint32_t p = Dlk_span_part_of(lt, (size_t)c,
                                      (uint32_t)(sample - tt->chunks[c].first));
        *key = (size_t)Dlk_view_run(lt, (size_t)c, p, p0, p1);
    } else if (lt->unit_parts) {
        uint32_t np = Dlk_span_nparts(lt, (size_t)c);
        uint32_t u = Dlk_span_part_of(lt, (size_t)c,
                                      (uint32_t)(sample - tt->chunks[c].first)) /
                     lt->unit_parts;
        *key = (size_t)(lt->unit_base[c] + u);
        *p0 = u * lt->unit_parts;
        *p1 = *p0 + lt->unit_parts < np ? *p0 + lt->unit_parts : np;
    }
    return true;
}

/* The slot of tensor t that position pos of plan pl reads, its sample
 * being `sample`. */
dlk_status Dlk_pos_slot(const dlk_loader *l, const Dlk_plan *pl, size_t t,
                        uint64_t pos, uint64_t sample, uint32_t *out,
                        dlk_error *err)
{
    size_t c, k;
    uint32_t p0, p1;
    uint32_t si = UINT32_MAX;
    if (sample_key(&l->t[t], sample, &c, &k, &p0, &p1))
        si = pl->key_slot[t][k];
    while (si != UINT32_MAX && pl->slots[si].last_pos < pos)
        si = pl->slots[si].next_same;
    if (si == UINT32_MAX || pl->slots[si].first_pos > pos)
        return Dlk_fail(err, DLK_EINTERNAL, "no slot for position %llu of "
                        "tensor '%s'", (unsigned long long)pos,
                        l->t[t].tensor->spec.name);
    *out = si;
    return DLK_OK;
}

/* Making a plan's slots for one tensor: from runs of samples a window
 * holds (its chunks or units found once a run, not once a position), or
 * position by position where the order cannot list them so. */
typedef struct planner {
    const dlk_loader *l;
    Dlk_plan *pl;
    size_t t;
    uint32_t *last;             /* per key: its latest slot */
    size_t cap;
    uint64_t gap;
    uint64_t a, b;              /* the window being planned */
    bool shuffled;
    dlk_status rc;
    dlk_error *err;
} planner;

/* Key k of the tensor (chunk c, parts [p0, p1)) is read over positions
 * [fp, lp]: its latest slot grows to lp, or a new one starts when the
 * last use was more than `gap` positions before. */
static void use_key(planner *pt, size_t c, size_t k, uint32_t p0,
                    uint32_t p1, uint64_t fp, uint64_t lp)
{
    Dlk_plan *pl = pt->pl;
    uint32_t si = pt->last[k];
    if (si != UINT32_MAX && (fp <= pl->slots[si].last_pos ||
                             fp - pl->slots[si].last_pos <= pt->gap)) {
        if (lp > pl->slots[si].last_pos)
            pl->slots[si].last_pos = lp;
        return;
    }
    if (!DLK_GROW(pl->slots, pl->nslots, pt->cap, 64)) {
        pt->rc = Dlk_oom(pt->err);
        return;
    }
    if (pl->nslots >= UINT32_MAX) {
        pt->rc = Dlk_fail(pt->err, DLK_ENOMEM, "too many slots planned");
        return;
    }
    uint32_t prev = si;
    si = (uint32_t)pl->nslots++;
    Dlk_slot *s = &pl->slots[si];
    memset(s, 0, sizeof *s);
    s->tensor = pt->t;
    s->chunk = c;
    s->p0 = p0;
    s->p1 = p1;
    s->first_pos = fp;
    s->last_pos = lp;
    s->next_same = UINT32_MAX;
    if (prev == UINT32_MAX)
        pl->key_slot[pt->t][k] = si;
    else
        pl->slots[prev].next_same = si;
    pt->last[k] = si;
}

static void no_sample(planner *pt, uint64_t sample)
{
    pt->rc = Dlk_fail(pt->err, DLK_ECORRUPT, "tensor '%s' has no sample "
                      "%llu", pt->l->t[pt->t].tensor->spec.name,
                      (unsigned long long)sample);
}

/* Samples [s0, s0 + cnt) of the window, at positions from pos on when it
 * is not shuffled, anywhere in it when it is. */
static void use_run(void *ud, uint64_t s0, uint64_t cnt, uint64_t pos)
{
    planner *pt = ud;
    const Dlk_loader_tensor *lt = &pt->l->t[pt->t];
    const Dlk_tensor *tt = lt->tensor;
    uint64_t end = s0 + cnt;
    for (uint64_t x = s0; x < end && !pt->rc;) {
        size_t c, k;
        uint32_t p0, p1;
        if (!sample_key(lt, x, &c, &k, &p0, &p1)) {
            no_sample(pt, x);
            return;
        }
        const Dlk_chunk_entry *e = &tt->chunks[c];
        uint64_t kend = e->first + e->samples; /* the key's end */
        if (lt->unit_parts)
            kend = e->first + Dlk_part_first(p1, e->samples,
                                             Dlk_span_nparts(lt, c));
        if (kend > end)
            kend = end;
        if (kend <= x)
            kend = x + 1;
        if (pt->shuffled)
            use_key(pt, c, k, p0, p1, pt->a, pt->b - 1);
        else
            use_key(pt, c, k, p0, p1, pos + (x - s0), pos + (kend - 1 - s0));
        x = kend;
    }
}

/* Positions [a, b), one by one. */
static void use_positions(planner *pt, uint64_t a, uint64_t b)
{
    enum { PIECE = 1024 };
    uint64_t sv[PIECE];
    const Dlk_loader_tensor *lt = &pt->l->t[pt->t];
    for (uint64_t pos = a; pos < b && !pt->rc; pos += PIECE) {
        uint64_t m = b - pos < PIECE ? b - pos : PIECE;
        Dlk_order_at(&pt->pl->order, pos, m, sv, NULL);
        for (uint64_t i = 0; i < m && !pt->rc; i++) {
            size_t c, k;
            uint32_t p0, p1;
            if (!sample_key(lt, sv[i], &c, &k, &p0, &p1))
                no_sample(pt, sv[i]);
            else
                use_key(pt, c, k, p0, p1, pos + i, pos + i);
        }
    }
}

/* A resumed plan's piece: a whole window of segment 0's, or positions
 * one by one. */
static void use_piece(void *ud, const Dlk_order *src, size_t win,
                      uint64_t a, uint64_t b)
{
    planner *pt = ud;
    if (pt->rc)
        return;
    if (src) {
        pt->a = a;
        pt->b = b;
        pt->shuffled = true;
        Dlk_order_runs(src, win, use_run, pt);
    } else {
        use_positions(pt, a, b);
    }
}

/* Build into pl (empty) the plan of the epoch in state st; *skip is the
 * position the state has consumed up to, whose slots need no load. */
static dlk_status build_plan(dlk_loader *l, Dlk_plan *pl,
                             const dlk_loader_state *st, uint64_t *skip,
                             dlk_error *err)
{
    Dlk_order_params p = {l->o.shuffle, l->o.seed, l->window_blocks,
                          l->chunk_blocks, l->o.drop_last, l->o.rows,
                          l->o.nrows};
    dlk_status rc = Dlk_order_build(l->block_first, l->block_count,
                                    l->nblocks, &p, st, l->o.rank,
                                    &pl->order, err);
    if (rc)
        return rc;
    uint64_t n = pl->order.n;
    planner pt = {.l = l, .pl = pl, .cap = 64, .err = err};
    /* a chunk needed again after more than `gap` positions is loaded
     * again rather than held (padding wraps to the start, say) */
    pt.gap = l->window_blocks * l->avg_block + l->o.batch_size;
    pl->slots = malloc(pt.cap * sizeof *pl->slots);
    pl->key_slot = calloc(l->nt, sizeof *pl->key_slot);
    if (!pl->slots || !pl->key_slot)
        return Dlk_oom(err);
    size_t nwin = Dlk_order_nwindows(&pl->order);
    for (size_t t = 0; t < l->nt && !pt.rc; t++) {
        const Dlk_loader_tensor *lt = &l->t[t];
        const Dlk_tensor *tt = lt->tensor;
        /* a slot per chunk, or per unit of a chunk read in spans, or
         * over some rows per part (the first of a run) */
        size_t nkeys = lt->need ? (size_t)lt->part_base[tt->nchunks]
                       : lt->unit_parts ? (size_t)lt->unit_base[tt->nchunks]
                                        : tt->nchunks;
        pt.t = t;
        pt.last = malloc((nkeys ? nkeys : 1) * sizeof *pt.last);
        pl->key_slot[t] = malloc((nkeys ? nkeys : 1) *
                                 sizeof *pl->key_slot[t]);
        if (!pt.last || !pl->key_slot[t]) {
            free(pt.last);
            return Dlk_fail(err, DLK_ENOMEM, "out of memory planning");
        }
        for (size_t c = 0; c < nkeys; c++)
            pt.last[c] = pl->key_slot[t][c] = UINT32_MAX;
        /* a shuffled window's slots span it: its chunks are all needed
         * from its first batches on, each of them about to its end */
        uint64_t end = 0;
        bool resumed = Dlk_order_resumed(&pl->order);
        if (resumed)
            end = Dlk_order_pieces(&pl->order, use_piece, &pt);
        for (size_t k = 0; k < nwin && !pt.rc && !resumed; k++) {
            uint64_t a, b;
            bool whole = Dlk_order_window(&pl->order, k, &pt.a, &pt.b,
                                          &pt.shuffled);
            a = pt.a;
            b = pt.b;
            if (a < b && whole)
                Dlk_order_runs(&pl->order, k, use_run, &pt);
            else if (a < b)
                use_positions(&pt, a, b);
            if (b > end)
                end = b;
        }
        if (!pt.rc)
            use_positions(&pt, end, n); /* the last batch's padding */
        free(pt.last);
    }
    if (pt.rc)
        return pt.rc;
    /* load order: by first use; key_slot and next_same point into this
     * array, so sort a permutation instead of the slots themselves */
    pl->sched = malloc((pl->nslots ? pl->nslots : 1) * sizeof *pl->sched);
    if (!pl->sched)
        return Dlk_oom(err);
    for (size_t i = 0; i < pl->nslots; i++)
        pl->sched[i] = (uint32_t)i;
    Dlk_sort_slots_by_first(pl->sched, pl->nslots, pl->slots);
    /* skip what a restored state already consumed */
    *skip = st->seg[st->nseg - 1].steps * pl->order.batch;
    if (*skip > n)
        *skip = n;
    for (size_t i = 0; i < pl->nslots; i++)
        if (pl->slots[i].last_pos < *skip)
            pl->slots[i].state = SLOT_DONE;
    return DLK_OK;
}

/* Plan the next epoch ahead, once every slot of this one is taken (and
 * unless the consumer said this epoch is its last: then only the
 * positions of tail_pos). */
static dlk_status plan_ahead(dlk_loader *l, dlk_error *err)
{
    bool last = l->o.epochs && l->st.epoch + 1 >= l->o.epochs;
    if (l->have_ahead ||
        (last && !(l->tail_pos && l->st.epoch + 1 == l->o.epochs)))
        return DLK_OK;
    pthread_mutex_lock(&l->mu);
    bool taken = l->plan.next_sched >= l->plan.nslots;
    pthread_mutex_unlock(&l->mu);
    if (!taken)
        return DLK_OK;
    dlk_loader_state st = next_epoch_state(l, &l->st);
    Dlk_plan pl;
    memset(&pl, 0, sizeof pl);
    uint64_t skip;
    dlk_status rc = build_plan(l, &pl, &st, &skip, err);
    if (rc) {
        Dlk_plan_free(l, &pl, false);
        return rc;
    }
    pl.upto = last ? l->tail_pos : 0;
    pthread_mutex_lock(&l->mu);
    l->ahead = pl;
    l->have_ahead = true;
    pthread_cond_signal(&l->work); /* one wakes, and wakes the next */
    pthread_mutex_unlock(&l->mu);
    return DLK_OK;
}

/* ---- consumer ------------------------------------------------------- */

void Dlk_loader_release_slot(dlk_loader *l, Dlk_slot *s)
{
    Dlk_loader_copy_forget(l, s);
    if (s->dev_ptr || s->dev_handle)
        l->dev->ops->release(l->dev, s->dev_handle, s->dev_ptr);
    dlk_chunk_free(s->ch);
    if (s->map_p)
        Dlk_store_unmap(l->ds->store, s->map_p, s->map_n);
    if (s->host)
        l->dev->ops->host_free(l->dev, s->host);
    if (!s->fold_kept)
        free(s->fold);
    DLK_ASSERT(l->resident >= s->bytes);
    l->resident -= s->bytes;
    Dlk_slot_free_err(s);
    memset(&s->ch, 0, sizeof *s - offsetof(Dlk_slot, ch));
    s->state = SLOT_DONE;
}

/* A load that could not record its error says so: never a failed slot
 * without one. */
static dlk_error slot_err_lost = {DLK_ENOMEM, "a chunk's read failed (its "
                                  "error was lost: out of memory)"};

void Dlk_slot_set_err(Dlk_slot *s, const dlk_error *err)
{
    if (!s->err && !(s->err = malloc(sizeof *s->err))) {
        s->err = &slot_err_lost;
        return;
    }
    if (s->err != &slot_err_lost)
        *s->err = *err;
}

const dlk_error *Dlk_slot_err(const Dlk_slot *s)
{
    return s->err ? s->err : &slot_err_lost;
}

void Dlk_slot_free_err(Dlk_slot *s)
{
    if (s->err != &slot_err_lost)
        free(s->err);
    s->err = NULL;
}

static bool plan_loading(const Dlk_plan *pl)
{
    for (size_t i = 0; i < pl->nslots; i++)
        if (pl->slots[i].state == SLOT_LOADING)
            return true;
    return false;
}

/* Begin the epoch of l->st.  Its plan read ahead (the state is then the
 * fresh one it was made for) takes over without stopping the workers:
 * every slot of the epoch that ended was used, so none is loading. */
static dlk_status start_epoch(dlk_loader *l, bool fresh, dlk_error *err)
{
    pthread_mutex_lock(&l->mu);
    bool swap = fresh && l->have_ahead && !plan_loading(&l->plan);
    if (swap) {
        Dlk_plan_free(l, &l->plan, false);
        l->plan = l->ahead;
        memset(&l->ahead, 0, sizeof l->ahead);
        l->have_ahead = false;
        l->pos = 0;
        l->want_pos = 0;
        pthread_cond_broadcast(&l->work);
    }
    pthread_mutex_unlock(&l->mu);
    if (!swap) {
        Dlk_loader_pause_workers(l);
        Dlk_plan_free(l, &l->plan, false);
        Dlk_plan_free(l, &l->ahead, false);
        l->have_ahead = false;
        uint64_t skip = 0;
        dlk_status rc = build_plan(l, &l->plan, &l->st, &skip, err);
        if (rc)
            Dlk_plan_free(l, &l->plan, false);
        l->pos = skip;
        Dlk_loader_resume_workers(l);
        if (rc)
            return rc;
    }
    l->epoch_t0 = Dlk_now_s();
    l->bad_epoch = 0;
    l->first_batch_pending = true;
    l->planned = true;
    return DLK_OK;
}

dlk_status Dlk_loader_wait_slot(dlk_loader *l, Dlk_slot *s, dlk_error *err)
{
    dlk_status rc = DLK_OK;
    while (!rc && s->state != SLOT_READY && s->state != SLOT_FAILED) {
        /* the timeline: each stretch of waiting goes to what the chunk
         * was doing when it began */
        int late = s->state == SLOT_WAITING ? DLK_LATE_QUEUED
                   : s->uploading ? DLK_LATE_H2D : DLK_LATE_STORAGE;
        double w0 = Dlk_now_s();
        int timed_out = 0;
        if (!l->o.cancel)
            pthread_cond_wait(&l->ready, &l->mu);
        else
            timed_out = Dlk_cond_wait_ms(&l->ready, &l->mu, 100) ==
                        ETIMEDOUT;
        l->cur_late[late] += Dlk_now_s() - w0;
        if (!timed_out)
            continue;
        /* the callback may run the caller's code: not under the lock the
         * workers need */
        pthread_mutex_unlock(&l->mu);
        int stop = l->o.cancel(l->o.cancel_ud);
        pthread_mutex_lock(&l->mu);
        if (stop)
            rc = Dlk_fail(err, DLK_ECANCELED, "canceled while waiting for "
                          "a batch");
    }
    return rc;
}

/* Wait until every slot that positions [p0, p1) need is ready; with
 * on_bad skip, positions whose read failed are given other rows
 * (loader_bad.c). */
static dlk_status wait_ready(dlk_loader *l, uint64_t p0, uint64_t p1,
                             dlk_error *err)
{
    double t0 = Dlk_now_s();
    /* the batch's samples and slots, for assemble too */
    uint32_t b = l->cap;
    Dlk_order_at(&l->plan.order, p0, p1 - p0, l->bidx, l->bpad);
    for (size_t t = 0; t < l->nt; t++)
        for (uint64_t p = p0; p < p1; p++) {
            dlk_status rc = Dlk_pos_slot(l, &l->plan, t, p, l->bidx[p - p0],
                                         &l->bslot[t * b + (p - p0)], err);
            if (rc)
                return rc;
        }
    memset(l->bbad, 0, p1 - p0);
    bool any_bad = false;
    pthread_mutex_lock(&l->mu);
    l->want_pos = p1;
    pthread_cond_signal(&l->work); /* one wakes, and wakes the next */
    dlk_status rc = DLK_OK;
    for (size_t t = 0; t < l->nt && !rc; t++) {
        for (uint64_t p = p0; p < p1 && !rc; p++) {
            Dlk_slot *s = &l->plan.slots[l->bslot[t * b + (p - p0)]];
            rc = Dlk_loader_wait_slot(l, s, err);
            if (!rc && s->state == SLOT_FAILED &&
                !Dlk_bad_skips(l, Dlk_slot_err(s)->code))
                rc = Dlk_fail(err, Dlk_slot_err(s)->code, "%s",
                              Dlk_slot_err(s)->msg);
            if (!rc && Dlk_bad_row(l, s, l->bidx[p - p0])) {
                l->bbad[p - p0] = 1; /* on_bad skip: replaced below */
                any_bad = true;
                continue;
            }
            if (!rc && s->dev_check) {
                /* its parts' check on the device: over long ago, as a
                 * rule (it follows the copy); no batch uses a span
                 * before it has passed */
                pthread_mutex_unlock(&l->mu);
                rc = Dlk_span_confirm(l, s, err);
                pthread_mutex_lock(&l->mu);
            }
        }
    }
    l->cur_resident = l->resident;
    pthread_mutex_unlock(&l->mu);
    if (!rc && any_bad)
        rc = Dlk_bad_replace(l, p0, p1, err);
    double waited = Dlk_now_s() - t0;
    l->stats.wait_s += waited;
    l->cur_wait += waited;
    return rc;
}

static void release_passed(dlk_loader *l, uint64_t pos)
{
    Dlk_plan *pl = &l->plan;
    pthread_mutex_lock(&l->mu);
    for (size_t i = pl->release_from; i < pl->nslots; i++) {
        Dlk_slot *s = &pl->slots[pl->sched[i]];
        if (s->first_pos >= pos)
            break;
        /* a failed one too: its rows were replaced (on_bad skip) */
        if ((s->state == SLOT_READY || s->state == SLOT_FAILED) &&
            s->last_pos < pos)
            Dlk_loader_release_slot(l, s);
    }
    while (pl->release_from < pl->nslots &&
           pl->slots[pl->sched[pl->release_from]].state == SLOT_DONE)
        pl->release_from++;
    pthread_cond_signal(&l->work); /* room in the budget: a chain of wakes */
    pthread_mutex_unlock(&l->mu);
}

/* The gather entries of the batch's b samples (their slots found by
 * wait_ready): tensor t's at l->gather + t * l->cap, the offsets and
 * shapes of a variable tensor's, and the host's fold (check mode); the
 * bytes of tensor t into total[t]. */
static dlk_status collect(dlk_loader *l, uint32_t b, uint64_t *total,
                          dlk_error *err)
{
    for (size_t t = 0; t < l->nt; t++) {
        Dlk_loader_tensor *lt = &l->t[t];
        total[t] = 0;
        for (uint32_t i = 0; i < b; i++) {
            Dlk_slot *s = &l->plan.slots[l->bslot[t * l->cap + i]];
            const Dlk_chunk_entry *e = &lt->tensor->chunks[s->chunk];
            size_t nb, off_in_chunk;
            int64_t shape[DLK_MAX_NDIM];
            /* the place alone: a span's host buffer may be back in
             * the pool once its copy is over */
            if (!Dlk_slot_place(
                    s, (uint32_t)(l->bidx[i] - e->first),
                    &nb, &off_in_chunk, shape))
                return Dlk_fail(err, DLK_EINTERNAL, "sample outside chunk");
            Dlk_gather *g = &l->gather[t * l->cap + i];
            g->src = (const uint8_t *)s->dev_ptr + off_in_chunk;
            g->handle = s->dev_handle;
            g->dst_off = total[t];
            g->nbytes = nb;
            if ((long)t == l->aug_t) {
                int nd = lt->tensor->spec.ndim;
                memcpy(l->aug_shapes + (size_t)i * nd, shape,
                       sizeof(int64_t) * (size_t)nd);
                nb = Dlk_aug_sample_bytes(&l->aug, shape, nd);
            } else if (lt->variable) {
                lt->offsets[i] = total[t];
                for (int d = 0; d < lt->out.ndim; d++)
                    lt->shapes[(size_t)i * lt->out.ndim + d] = shape[d];
            }
            total[t] += nb;
            /* atomic: a slot of the same span in the next epoch may be
             * storing the same fold into a kept array meanwhile */
            if (l->o.check)
                l->host_fold += __atomic_load_n(
                    &s->fold[l->bidx[i] - e->first - s->fold_first],
                    __ATOMIC_RELAXED);
        }
        if (lt->variable && (long)t != l->aug_t)
            lt->offsets[b] = total[t];
    }
    return DLK_OK;
}

dlk_status Dlk_loader_gather(dlk_loader *l, size_t t, uint32_t b,
                             uint64_t total, dlk_error *err)
{
    Dlk_loader_tensor *lt = &l->t[t];
    if (!lt->buf)
        Dlk_loader_take_spare(l, lt, total);
    if (total > lt->cap) {
        if (lt->buf)
            l->dev->ops->batch_free(l->dev, lt->buf);
        lt->cap = total + total / 4;
        lt->buf = l->dev->ops->batch_alloc(l->dev, lt->cap);
        if (!lt->buf)
            return Dlk_fail(err, DLK_ENOMEM, "cannot allocate a batch of "
                            "%llu bytes for tensor '%s'",
                            (unsigned long long)lt->cap, lt->out.name);
    }
    Dlk_gather *gl = l->gather + t * l->cap;
    /* the augmented tensor is its gather: one pass over its bytes */
    dlk_status rc =
        (long)t == l->aug_t
            ? Dlk_augment_batch(l->dev, &l->aug, gl,
                                l->aug_rows ? l->aug_rows : l->bidx,
                                l->aug_shapes, lt->tensor->spec.ndim, b,
                                l->st.epoch, l->st.seed, lt->buf, err)
            : l->dev->ops->gather(l->dev, gl, b, lt->buf, err);
    if (rc)
        return rc;
    lt->out.data = lt->buf;
    lt->out.nbytes = total;
    l->bt_out[t] = lt->out;
    return DLK_OK;
}

static dlk_status assemble(dlk_loader *l, uint64_t p0, uint32_t b,
                           dlk_error *err)
{
    dlk_status rc = collect(l, b, l->btotal, err);
    for (size_t t = 0; t < l->nt && !rc; t++)
        rc = Dlk_loader_gather(l, t, b, l->btotal[t], err);
    if (rc)
        return rc;
    dlk_batch *bt = &l->batch;
    bt->size = b;
    bt->epoch = l->st.epoch;
    bt->step = p0 / l->plan.order.batch;
    bt->indices = l->bidx;
    bt->pad = l->bpad;
    return DLK_OK;
}

dlk_status dlk_loader_next(dlk_loader *l, const dlk_batch **out,
                           dlk_error *err)
{
    *out = NULL;
    if (l->mix)
        return Dlk_mix_next(l, out, err);
    dlk_status rc;
    double t_in = Dlk_now_s();
    Dlk_trace_enter(l, t_in);
    if (!l->planned && (rc = start_epoch(l, true, err)))
        return rc;
    uint32_t b = l->plan.order.batch;
    if (l->pos >= l->plan.order.n) {
        /* end of the epoch: the next call starts the following one */
        l->st = next_epoch_state(l, &l->st);
        l->planned = false;
        return DLK_OK;
    }
    if (l->pos)
        release_passed(l, l->pos);
    if ((rc = wait_ready(l, l->pos, l->pos + b, err)))
        return rc;
    if ((rc = assemble(l, l->pos, b, err)))
        return rc;
    if (l->first_batch_pending) {
        l->stats.first_batch_s = Dlk_now_s() - l->epoch_t0;
        l->first_batch_pending = false;
    }
    if ((rc = plan_ahead(l, err)))
        return rc;
    l->pos += b;
    Dlk_loader_batch_done(l, t_in, b);
    *out = &l->batch;
    return DLK_OK;
}

void Dlk_loader_batch_done(dlk_loader *l, double t_in, uint32_t b)
{
    l->st.seg[l->st.nseg - 1].steps++;
    l->stats.samples += b;
    l->stats.batches++;
    l->have_batch = true;
    l->batch_kept = false;
    Dlk_trace_batch(l, t_in, Dlk_now_s(), b);
}

/* Free the plans of epochs that ended within the last take: the batch
 * that read their slots is gathered (queued, on a device, before the
 * releases' events). */
static void free_retired(dlk_loader *l)
{
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->nretired; i++)
        Dlk_plan_free(l, &l->retired[i], false);
    l->nretired = 0;
    pthread_mutex_unlock(&l->mu);
}

dlk_status Dlk_loader_take(dlk_loader *l, uint32_t n, Dlk_take_fn fn,
                           void *ud, dlk_error *err)
{
    dlk_status rc;
    free_retired(l);
    bool took = false; /* of the plan being read, in this take */
    while (n) {
        if (!l->planned) {
            if ((rc = start_epoch(l, true, err)))
                return rc;
            if (!l->plan.order.n)
                return Dlk_fail(err, DLK_EINVAL, "'%s' has no rows for "
                                "rank %u of %u", l->ds->url, l->o.rank,
                                l->o.world_size);
        }
        if (l->pos >= l->plan.order.n) {
            l->st = next_epoch_state(l, &l->st);
            l->planned = false;
            if (took) {
                /* its slots hold samples of the batch being taken */
                if (!DLK_GROW(l->retired, l->nretired, l->capretired, 4))
                    return Dlk_oom(err);
                pthread_mutex_lock(&l->mu);
                l->retired[l->nretired++] = l->plan;
                memset(&l->plan, 0, sizeof l->plan);
                pthread_mutex_unlock(&l->mu);
                took = false;
            }
            continue;
        }
        uint64_t left = l->plan.order.n - l->pos;
        uint32_t k = left < n ? (uint32_t)left : n;
        if (l->pos)
            release_passed(l, l->pos);
        if ((rc = wait_ready(l, l->pos, l->pos + k, err)) ||
            (rc = collect(l, k, l->btotal, err)))
            return rc;
        fn(ud, l, k);
        took = true;
        if ((rc = plan_ahead(l, err)))
            return rc;
        l->pos += k;
        l->st.seg[l->st.nseg - 1].steps += k;
        l->stats.samples += k;
        n -= k;
    }
    return DLK_OK;
}

dlk_status dlk_loader_step(dlk_loader *l, double step_ms, dlk_error *err)
{
    if (!l->have_batch)
        return Dlk_fail(err, DLK_EINVAL, "no current batch");
    for (size_t t = 0; t < l->nt; t++) {
        dlk_status rc = l->dev->ops->step(l->dev, l->t[t].out.data,
                                          l->gather + t * l->cap,
                                          l->batch.size,
                                          t == 0 ? step_ms : 0, err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

uint64_t dlk_loader_batches(const dlk_loader *l)
{
    if (l->mix)
        return Dlk_mix_batches(l);
    if (l->planned)
        return l->plan.order.batches; /* of the epoch being read */
    /* before the epoch's first batch: its order, made to be counted */
    Dlk_order_params p = {l->o.shuffle, l->o.seed, l->window_blocks,
                          l->chunk_blocks, l->o.drop_last, l->o.rows,
                          l->o.nrows};
    Dlk_order o;
    memset(&o, 0, sizeof o);
    uint64_t n = Dlk_order_build(l->block_first, l->block_count, l->nblocks,
                                 &p, &l->st, l->o.rank, &o, NULL)
                 ? 0 : o.batches;
    Dlk_order_free(&o);
    return n;
}

void dlk_loader_state_get(const dlk_loader *l, dlk_loader_state *out)
{
    *out = l->st;
    uint64_t n = 0;
    for (uint32_t i = 0; i < out->nseg; i++)
        n += out->seg[i].steps * out->seg[i].batch * out->seg[i].world;
    out->samples = n;
}

dlk_status dlk_loader_restore(dlk_loader *l, const dlk_loader_state *st,
                              dlk_error *err)
{
    if (l->mix)
        return Dlk_fail(err, DLK_EINVAL, "a mixing loader continues from "
                        "its whole state (dlk_loader_load), its sources' "
                        "included");
    if (st->nseg < 1 || st->nseg > DLK_LOADER_MAX_SEGMENTS)
        return Dlk_fail(err, DLK_EINVAL, "bad loader state");
    if (st->seed != l->o.seed)
        return Dlk_fail(err, DLK_EINVAL, "loader state is for seed %llu, "
                        "this loader uses %llu", (unsigned long long)st->seed,
                        (unsigned long long)l->o.seed);
    dlk_loader_state s = *st;
    uint32_t last = s.nseg - 1;
    if (s.seg[last].world != l->o.world_size ||
        s.seg[last].batch != l->o.batch_size) {
        if (s.nseg == DLK_LOADER_MAX_SEGMENTS)
            return Dlk_fail(err, DLK_ELIMIT, "an epoch resumed with new "
                            "layouts more than %d times",
                            DLK_LOADER_MAX_SEGMENTS - 1);
        s.seg[s.nseg].world = l->o.world_size;
        s.seg[s.nseg].batch = l->o.batch_size;
        s.seg[s.nseg].steps = 0;
        s.nseg++;
    }
    l->st = s;
    return start_epoch(l, false, err);
}

dlk_status Dlk_loader_begin(dlk_loader *l, const dlk_loader_state *st,
                            dlk_error *err)
{
    return st ? dlk_loader_restore(l, st, err) : start_epoch(l, false, err);
}

void dlk_loader_checksums(const dlk_loader *l, uint64_t *device,
                          uint64_t *host)
{
    Dlk_dev_times t = {0};
    l->dev->ops->sync(l->dev, &t, NULL);
    *device = t.checksum;
    *host = l->mix ? Dlk_mix_host_fold(l) : l->host_fold;
}

static void stats_get(const dlk_loader *l, dlk_loader_stats *out);

void dlk_loader_stats_get(const dlk_loader *l, dlk_loader_stats *out)
{
    dlk_loader_stats own = DLK_LOADER_STATS_INIT;
    if (l->mix)
        Dlk_mix_stats(l, &own);
    else
        stats_get(l, &own);
    abi_copy_out(out, &own, sizeof own);
}

void Dlk_loader_stats_one(const dlk_loader *l, dlk_loader_stats *out)
{
    stats_get(l, out);
}

static void stats_get(const dlk_loader *l, dlk_loader_stats *out)
{
    /* the workers add to it from the loader's open on */
    pthread_mutex_lock((pthread_mutex_t *)&l->mu);
    *out = l->stats;
    out->chunks_verified = __atomic_load_n(&l->chunks_verified,
                                           __ATOMIC_RELAXED);
    out->peak_buffer_bytes = l->peak_resident;
    out->io_threads = l->o.io_threads;
    out->window_chunks = l->o.window_chunks;
    out->prefetch_chunks = l->o.prefetch_chunks;
    out->span_bytes = l->span_bytes;
    out->io_cpu_s = l->busy_sampled_s > 0
        ? out->io_busy_s * l->cpu_sampled_s / l->busy_sampled_s : 0;
    pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
    Dlk_cache_stats cs;
    Dlk_store_cache_stats(l->cache, &cs);
    out->cache_on = l->cache != NULL;
    out->cache_hits = cs.hits;
    out->cache_fetched = cs.fetched;
    out->cache_evicted = cs.evicted;
    out->cache_dropped = cs.dropped;
    out->cache_limit = cs.limit;
    memcpy(out->cache_warning, cs.warning, sizeof out->cache_warning);
    Dlk_dev_times t = {0};
    l->dev->ops->sync(l->dev, &t, NULL);
    out->gather_s = t.gather_s;
    out->step_s = t.step_s;
    out->gpu_busy_s = t.gather_s + t.step_s;
    if (l->dev->ops->on_device)
        out->h2d_s = t.copy_s;
}

dlk_status dlk_loader_mark(dlk_loader *l, size_t *id, dlk_error *err)
{
    dlk_status rc = l->dev->ops->mark(l->dev, id, err);
    if (!rc)
        l->nmarks++;
    return rc;
}

dlk_status dlk_loader_span(dlk_loader *l, size_t from, size_t to,
                           double *seconds, double *busy_s, dlk_error *err)
{
    if (from > to || to >= l->nmarks)
        return Dlk_fail(err, DLK_EINVAL, "no span from mark %zu to mark %zu "
                        "(%zu marks made)", from, to, l->nmarks);
    return l->dev->ops->span(l->dev, from, to, seconds, busy_s, err);
}

char *dlk_loader_save(const dlk_loader *l)
{
    if (l->mix)
        return Dlk_mix_save(l);
    dlk_loader_state st;
    dlk_loader_state_get(l, &st);
    return dlk_loader_state_json(&st);
}

dlk_status dlk_loader_load(dlk_loader *l, const char *json, dlk_error *err)
{
    if (l->mix)
        return Dlk_mix_load(l, json, err);
    dlk_loader_state st;
    dlk_status rc = dlk_loader_state_parse(json, &st, err);
    return rc ? rc : dlk_loader_restore(l, &st, err);
}
