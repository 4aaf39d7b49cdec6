/* loader_bad.c - on_bad skip: a batch position whose row a failed read
 * holds (a chunk or span that cannot be read whole, or a part of a span
 * whose checksum does not match) takes another row, so that a damaged object costs a few repeated rows
 * rather than the run, and every rank keeps its batch count (a rank
 * that stopped or stepped less would hang the others' collectives).
 *
 * The choice is a function of the batch and the epoch's order only (the
 * nearest readable position after the bad one within the batch, else
 * the epoch's next readable position): a re-run of the epoch gives the
 * same batches. */
#include "loader_int.h"

#include <stdlib.h>
#include <string.h>

bool Dlk_bad_skips(const dlk_loader *l, dlk_status code)
{
    /* what a damaged or missing object gives after the store's retries;
     * not memory, a device or a bug, which no other row would mend */
    return l->o.on_bad == DLK_ON_BAD_SKIP &&
           (code == DLK_ECORRUPT || code == DLK_ENOTFOUND ||
            code == DLK_EIO || code == DLK_ENET);
}

dlk_status Dlk_bad_part(const dlk_loader *l, Dlk_slot *s, uint32_t p,
                        dlk_status rc, const dlk_error *err)
{
    /* a mismatch only: the bytes were read whole, the other parts are
     * good; a span of more than 64 parts fails whole past its 64th */
    if (rc != DLK_ECORRUPT || l->o.on_bad != DLK_ON_BAD_SKIP ||
        p - s->p0 >= 64)
        return rc;
    if (!s->bad_parts)
        Dlk_slot_set_err(s, err);
    s->bad_parts |= 1ull << (p - s->p0);
    return DLK_OK;
}

bool Dlk_bad_row(const dlk_loader *l, const Dlk_slot *s, uint64_t sample)
{
    if (s->state == SLOT_FAILED)
        return true;
    if (!s->bad_parts)
        return false;
    const Dlk_loader_tensor *lt = &l->t[s->tensor];
    uint32_t p = Dlk_span_part_of(lt, s->chunk, (uint32_t)(
        sample - lt->tensor->chunks[s->chunk].first));
    return p >= s->p0 && p - s->p0 < 64 && (s->bad_parts >> (p - s->p0) & 1);
}

void Dlk_bad_defaults(dlk_loader *l)
{
    uint64_t most = 0;
    const Dlk_tensor *t = l->nt ? l->t[0].tensor : NULL;
    for (size_t c = 0; t && c < t->nchunks; c++)
        if (t->chunks[c].samples > most)
            most = t->chunks[c].samples;
    l->max_bad = most;
}

/* The cap of this epoch: opts' max_bad, or 0.1% of the rank's positions,
 * at least the largest chunk's samples (Dlk_bad_defaults). */
static uint64_t epoch_cap(const dlk_loader *l)
{
    if (l->o.max_bad)
        return l->o.max_bad;
    uint64_t share = (l->plan.order.n + 999) / 1000;
    return share > l->max_bad ? share : l->max_bad;
}

/* Tell the caller about one failed read: parts [p0, p1) of the slot's
 * chunk (0 and 0: the whole chunk). */
static void tell_read(dlk_loader *l, const Dlk_slot *s, uint32_t p0,
                      uint32_t p1)
{
    const Dlk_loader_tensor *lt = &l->t[s->tensor];
    const Dlk_tensor *t = lt->tensor;
    const Dlk_chunk_entry *e = &t->chunks[s->chunk];
    l->stats.reads_bad++;
    if (!l->o.on_bad_read)
        return;
    char key[DLK_CHUNK_KEY_MAX];
    Dlk_chunk_key(key, t->spec.name, e->key);
    dlk_bad_read b = {.tensor = t->spec.name, .object = key,
                      .part0 = p0, .part1 = p1,
                      .first_row = e->first, .rows = e->samples,
                      .epoch = l->st.epoch, .code = Dlk_slot_err(s)->code,
                      .why = Dlk_slot_err(s)->msg};
    if (p1) {
        uint32_t np = Dlk_span_nparts(lt, s->chunk);
        uint32_t a = Dlk_part_first(p0, e->samples, np);
        b.first_row = e->first + a;
        b.rows = Dlk_part_first(p1, e->samples, np) - a;
    }
    l->o.on_bad_read(l->o.on_bad_ud, &b);
}

/* Tell the caller about a slot's failed read, or each of its bad parts,
 * once a slot. */
static void tell(dlk_loader *l, Dlk_slot *s)
{
    s->bad_told = true;
    if (s->state == SLOT_FAILED) {
        tell_read(l, s, s->p0, s->p1);
        return;
    }
    for (uint32_t i = 0; i < 64 && s->p0 + i < s->p1; i++)
        if (s->bad_parts >> i & 1)
            tell_read(l, s, s->p0 + i, s->p0 + i + 1);
}

/* The failed slot of one of the batch's bad positions (its error). */
static const Dlk_slot *first_failed(const dlk_loader *l, uint32_t n)
{
    uint32_t b = l->cap;
    for (size_t t = 0; t < l->nt; t++)
        for (uint32_t i = 0; i < n; i++) {
            const Dlk_slot *s = &l->plan.slots[l->bslot[t * b + i]];
            if (l->bbad[i] && Dlk_bad_row(l, s, l->bidx[i]))
                return s;
        }
    return NULL;
}

/* No position of the batch readable: the first after it in the epoch
 * whose every tensor's read succeeds, waited for (its slots outlive the
 * batch: they are needed at that position).  Its sample in *sample and
 * slots in donor[]; DLK_ENOTFOUND when none is left. */
static dlk_status find_ahead(dlk_loader *l, uint64_t p1, uint64_t *sample,
                             uint32_t *donor, dlk_error *err)
{
    for (uint64_t q = p1; q < l->plan.order.n; q++) {
        uint8_t pad;
        Dlk_order_at(&l->plan.order, q, 1, sample, &pad);
        bool good = true;
        for (size_t t = 0; t < l->nt && good; t++) {
            dlk_status rc = Dlk_pos_slot(l, &l->plan, t, q, *sample,
                                         &donor[t], err);
            if (rc)
                return rc;
            Dlk_slot *s = &l->plan.slots[donor[t]];
            pthread_mutex_lock(&l->mu);
            if (l->want_pos < q + 1)
                l->want_pos = q + 1; /* admitted past the budget */
            pthread_cond_signal(&l->work);
            rc = Dlk_loader_wait_slot(l, s, err);
            int state = s->state;
            dlk_error serr = *Dlk_slot_err(s);
            pthread_mutex_unlock(&l->mu);
            if (rc)
                return rc;
            if (state == SLOT_FAILED && !Dlk_bad_skips(l, serr.code))
                return Dlk_fail(err, serr.code, "%s", serr.msg);
            good = state == SLOT_READY && !Dlk_bad_row(l, s, *sample);
        }
        if (good)
            return DLK_OK;
    }
    return DLK_ENOTFOUND;
}

dlk_status Dlk_bad_replace(dlk_loader *l, uint64_t p0, uint64_t p1,
                           dlk_error *err)
{
    uint32_t n = (uint32_t)(p1 - p0), b = l->cap;
    uint64_t nbad = 0;
    for (uint32_t i = 0; i < n; i++)
        nbad += l->bbad[i];
    for (size_t t = 0; t < l->nt; t++)
        for (uint32_t i = 0; i < n; i++) {
            Dlk_slot *s = &l->plan.slots[l->bslot[t * b + i]];
            if (l->bbad[i] && !s->bad_told && Dlk_bad_row(l, s, l->bidx[i]))
                tell(l, s);
        }
    const Dlk_slot *why = first_failed(l, n);
    if (!why)
        return Dlk_fail(err, DLK_EINTERNAL, "a bad position without a "
                        "failed read");
    uint64_t cap = epoch_cap(l);
    if (l->bad_epoch + nbad > cap)
        return Dlk_fail(err, Dlk_slot_err(why)->code, "%llu rows of epoch %llu "
                        "unreadable on this rank, more than max_bad %llu: "
                        "%s", (unsigned long long)(l->bad_epoch + nbad),
                        (unsigned long long)l->st.epoch,
                        (unsigned long long)cap, Dlk_slot_err(why)->msg);
    if (nbad == n) {
        uint32_t *donor = malloc(l->nt * sizeof *donor);
        uint64_t sample;
        if (!donor)
            return Dlk_oom(err);
        dlk_error why_err = *Dlk_slot_err(why);
        dlk_status rc = find_ahead(l, p1, &sample, donor, err);
        if (rc == DLK_ENOTFOUND)
            rc = Dlk_fail(err, why_err.code, "no readable row left in epoch "
                          "%llu to replace a batch of unreadable ones: %s",
                          (unsigned long long)l->st.epoch, why_err.msg);
        for (uint32_t i = 0; !rc && i < n; i++) {
            l->bidx[i] = sample;
            for (size_t t = 0; t < l->nt; t++)
                l->bslot[t * b + i] = donor[t];
        }
        free(donor);
        if (rc)
            return rc;
    } else {
        /* each bad position takes the nearest good one after it, the
         * batch read as a ring: one pass from its end, twice round */
        int64_t next = -1;
        for (int64_t k = 2 * (int64_t)n - 1; k >= 0; k--) {
            uint32_t i = (uint32_t)(k % n);
            if (!l->bbad[i]) {
                next = i;
                continue;
            }
            if (k >= n || next < 0)
                continue;
            l->bidx[i] = l->bidx[next];
            for (size_t t = 0; t < l->nt; t++)
                l->bslot[t * b + i] = l->bslot[t * b + (uint32_t)next];
        }
    }
    l->bad_epoch += nbad;
    l->stats.rows_replaced += nbad;
    return DLK_OK;
}
