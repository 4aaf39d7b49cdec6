/* loader_io.c - the I/O threads: each takes the next slot in load order
 * when the budget allows, reads its chunk from storage, decodes it into
 * device-ready host memory and hands it to the device. */
#include "loader_int.h"
#include "pins.h"
#include "util/check.h"
#include "util/clock.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static int cmp_first(const void *a, const void *b, void *slots)
{
    const Dlk_slot *s = slots;
    uint64_t x = s[*(const uint32_t *)a].first_pos;
    uint64_t y = s[*(const uint32_t *)b].first_pos;
    return x < y ? -1 : x > y;
}

void Dlk_sort_slots_by_first(uint32_t *idx, size_t n, const Dlk_slot *slots)
{
    qsort_r(idx, n, sizeof *idx, cmp_first, (void *)slots);
}

/* Bytes a slot holds while resident: a span's, or its whole chunk's. */
static uint64_t slot_cost(const dlk_loader *l, const Dlk_slot *s)
{
    if (s->p1)
        return Dlk_span_cost(l, s);
    const Dlk_tensor *t = l->t[s->tensor].tensor;
    /* in check mode, with the samples' folds (see Dlk_span_cost) */
    return Dlk_chunk_cost(t, s->chunk) +
           (l->o.check ? (uint64_t)t->chunks[s->chunk].samples *
                             sizeof(uint64_t) : 0);
}

/* pl's next slot to load, if the budget admits it (called locked); a
 * slot the consumer waits for is always admitted, but never one of the
 * plan read ahead. */
static Dlk_slot *take_from(dlk_loader *l, Dlk_plan *pl, bool ahead)
{
    while (pl->next_sched < pl->nslots &&
           pl->slots[pl->sched[pl->next_sched]].state != SLOT_WAITING)
        pl->next_sched++;
    if (pl->next_sched >= pl->nslots)
        return NULL;
    Dlk_slot *s = &pl->slots[pl->sched[pl->next_sched]];
    uint64_t cost = slot_cost(l, s);
    bool needed_now = !ahead && s->first_pos < l->want_pos;
    if (!needed_now && pl->upto && s->first_pos >= pl->upto)
        return NULL; /* the slots are in order of their first position */
    /* the folds kept for check mode are within the budget too */
    uint64_t kept = __atomic_load_n(&l->folds_kept, __ATOMIC_RELAXED);
    if (!needed_now &&
        (l->resident + kept + cost > l->limit || l->reading >= l->ramp))
        return NULL;
    pl->next_sched++;
    s->state = SLOT_LOADING;
    s->bytes = cost;
    l->resident += cost;
    if (l->resident > l->peak_resident)
        l->peak_resident = l->resident;
    return s;
}

bool Dlk_loader_more_to_take(const dlk_loader *l)
{
    return l->plan.next_sched < l->plan.nslots ||
           (l->have_ahead && l->ahead.next_sched < l->ahead.nslots);
}

/* The next slot to load: the epoch's, then the next epoch's. */
static Dlk_slot *take(dlk_loader *l)
{
    Dlk_slot *s = take_from(l, &l->plan, false);
    if (!s && l->have_ahead && l->plan.next_sched >= l->plan.nslots)
        s = take_from(l, &l->ahead, true);
    return s;
}

/* Another loader's pinned chunk, taken without this loader's budget (it
 * costs no memory more); mu held on entry and on return. */
static void take_shared(dlk_loader *l, struct Dlk_map *m, const char *key)
{
    m->mapping = true;
    pthread_mutex_unlock(&l->mu);
    const void *p;
    size_t n;
    bool got = Dlk_pins_take(l->ds->store, key, &p, &n);
    pthread_mutex_lock(&l->mu);
    if (got) {
        m->p = p;
        m->n = n;
        l->stats.chunks_shared++;
    }
    m->mapping = false;
    pthread_cond_broadcast(&l->mapped);
}

/* The chunk's object mapped (and registered) once; NULL p when the budget
 * for mappings is spent (and no other loader of the process pinned it)
 * or the store cannot map. */
dlk_status Dlk_loader_get_map(dlk_loader *l, Dlk_slot *s, const char *key,
                              struct Dlk_map *out, dlk_error *err)
{
    out->p = NULL;
    pthread_mutex_lock(&l->mu);
    struct Dlk_map *m = &l->maps[s->tensor][s->chunk];
    /* the spans of a chunk load at once: one maps and registers it, the
     * others wait for it rather than each registering it again */
    while (m->mapping)
        pthread_cond_wait(&l->mapped, &l->mu);
    const Dlk_chunk_entry *e = &l->t[s->tensor].tensor->chunks[s->chunk];
    bool room = l->mapped_bytes + e->stored_bytes <= l->map_limit;
    if (!m->p && !room)
        take_shared(l, m, key);
    *out = *m;
    if (!m->p && room) {
        l->mapped_bytes += e->stored_bytes; /* reserve */
        m->mapping = true;
    }
    pthread_mutex_unlock(&l->mu);
    if (out->p || !room)
        return DLK_OK;
    const void *p = NULL;
    size_t n = 0;
    bool made;
    /* timed with the map: a registration holds the process's mapping
     * lock while it pins, so other threads' mmap waits on it */
    double t0 = Dlk_now_s();
    dlk_status rc = Dlk_pins_get(l->ds->store, key, l->dev, &p, &n, &made,
                                 err);
    double pinned = Dlk_now_s() - t0;
    pthread_mutex_lock(&l->mu);
    l->stats.pin_s += pinned;
    l->stats.chunks_pinned += made;
    l->stats.chunks_shared += !rc && !made;
    /* the budget counts what this loader pinned: one another loader
     * pinned first is shared, and costs no memory more */
    if (rc || !made)
        l->mapped_bytes -= e->stored_bytes;
    if (!rc) {
        m->p = p;
        m->n = n;
    }
    m->mapping = false;
    pthread_cond_broadcast(&l->mapped);
    *out = *m;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

static struct Dlk_map *kept(dlk_loader *l, const Dlk_slot *s)
{
    return &l->maps[s->tensor][s->chunk];
}

/* Whether this load checks the stored checksum: at a chunk's first load
 * by this loader, unless asked not to (header and index are always
 * checked). */
static bool verify_now(dlk_loader *l, const Dlk_slot *s)
{
    return !l->o.no_verify &&
           !__atomic_load_n(&kept(l, s)->verified, __ATOMIC_ACQUIRE);
}

/* The samples' folds (check mode): the chunk's kept ones, or computed
 * and kept for the next loads while folds_max allows. */
static dlk_status fold_samples(dlk_loader *l, Dlk_slot *s, dlk_error *err)
{
    struct Dlk_map *k = kept(l, s);
    uint64_t *f = __atomic_load_n(&k->fold, __ATOMIC_ACQUIRE);
    if (f) {
        s->fold = f;
        s->fold_kept = true;
        return DLK_OK;
    }
    uint32_t n = dlk_chunk_samples(s->ch);
    if (!(f = malloc((n ? n : 1) * sizeof *f)))
        return Dlk_oom(err);
    for (uint32_t i = 0; i < n; i++) {
        size_t nb;
        const void *p = dlk_chunk_sample(s->ch, i, &nb, NULL);
        f[i] = Dlk_fold64(p, nb);
    }
    s->fold = f;
    uint64_t bytes = (uint64_t)n * sizeof *f;
    if (__atomic_add_fetch(&l->folds_kept, bytes, __ATOMIC_RELAXED) >
        l->folds_max) {
        __atomic_sub_fetch(&l->folds_kept, bytes, __ATOMIC_RELAXED);
        return DLK_OK;
    }
    uint64_t *none = NULL;
    if (__atomic_compare_exchange_n(&k->fold, &none, f, false,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        s->fold_kept = true;  /* the loader frees it at close */
    else
        __atomic_sub_fetch(&l->folds_kept, bytes, __ATOMIC_RELAXED);
    return DLK_OK;
}

static dlk_status load_mapped(dlk_loader *l, Dlk_slot *s, bool verify,
                              bool *done, dlk_error *err)
{
    const Dlk_tensor *t = l->t[s->tensor].tensor;
    const Dlk_chunk_entry *e = &t->chunks[s->chunk];
    char key[DLK_CHUNK_KEY_MAX];
    Dlk_chunk_key(key, t->spec.name, e->key);
    struct Dlk_map m;
    *done = false;
    dlk_status rc;
    if (l->dev->ops->on_device) {
        /* registered for DMA: kept for the loader's life */
        rc = Dlk_loader_get_map(l, s, key, &m, err);
    } else {
        /* the page cache in place, for as long as the slot lives */
        rc = Dlk_store_map(l->ds->store, key, &m.p, &m.n, err);
        if (!rc) {
            s->map_p = m.p;
            s->map_n = m.n;
        }
    }
    if (rc || !m.p)
        return rc;
    dlk_chunk *c = calloc(1, sizeof *c);
    if (!c)
        return Dlk_oom(err);
    Dlk_buf_wrap(&c->object, (void *)m.p, m.n);
    c->object.len = m.n;
    rc = Dlk_chunk_open(c, t, e, key, verify ? DLK_DECODE_VERIFY : 0, NULL, 0,
                        err);
    if (rc) {
        dlk_chunk_free(c);
        return rc;
    }
    s->ch = c;
    *done = true;
    return DLK_OK;
}

static dlk_status load(dlk_loader *l, Dlk_slot *s, double *storage_s,
                       double *decompress_s, dlk_error *err)
{
    if (s->p1)
        return Dlk_span_load(l, s, storage_s, err);
    bool verify = verify_now(l, s);
    if (l->use_maps && l->t[s->tensor].tensor->spec.codec == DLK_CODEC_NONE) {
        bool done;
        double t0 = Dlk_now_s();
        dlk_status rc = load_mapped(l, s, verify, &done, err);
        if (rc)
            return rc;
        if (done) {
            *storage_s += Dlk_now_s() - t0;
            goto loaded;
        }
    }
    const Dlk_tensor *t = l->t[s->tensor].tensor;
    const Dlk_chunk_entry *e = &t->chunks[s->chunk];
    size_t cap = (size_t)(t->spec.codec == DLK_CODEC_NONE ? e->stored_bytes
                                                          : e->raw_bytes);
    s->host = l->dev->ops->host_alloc(l->dev, cap ? cap : 64);
    if (!s->host)
        return Dlk_fail(err, DLK_ENOMEM, "cannot allocate %zu bytes for a "
                        "chunk of '%s'", cap, t->spec.name);
    s->t_buffer = Dlk_now_s();
    {
    double t0 = Dlk_now_s();
    dlk_status rc = Dlk_chunk_load_from(l->ds, l->store, t, e,
                                        verify ? DLK_DECODE_VERIFY : 0,
                                        s->host, cap, &s->ch, err);
    double t1 = Dlk_now_s();
    if (rc)
        return rc;
    if (t->spec.codec == DLK_CODEC_NONE) {
        *storage_s += t1 - t0;
    } else {
        /* a rough split: the read and the decompression happen in one
         * call; attribute by the measured zstd rate later if needed */
        *storage_s += (t1 - t0) / 2;
        *decompress_s += (t1 - t0) / 2;
    }
    }
loaded:
    /* two slots of one chunk (an epoch's last and the next one's first,
     * read ahead) may both check it at once: it counts once */
    if (verify && !__atomic_exchange_n(&kept(l, s)->verified, true,
                                       __ATOMIC_ACQ_REL))
        __atomic_add_fetch(&l->chunks_verified, 1, __ATOMIC_RELAXED);
    if (l->o.check)
        return fold_samples(l, s, err);
    return DLK_OK;
}

static dlk_status upload(dlk_loader *l, Dlk_slot *s, dlk_error *err)
{
    size_t payload;
    const void *hp = s->p1 ? (payload = (size_t)s->span_len, s->span)
                           : dlk_chunk_payload(s->ch, &payload);
    dlk_status rc = l->dev->ops->upload(l->dev, hp, payload, &s->dev_ptr,
                                        &s->dev_handle, err);
    if (!rc && s->dev_check)
        rc = Dlk_span_check_upload(l, s, err);
    return rc;
}

/* Called locked when a slot's load ended (rc) and, on a GPU, its upload. */
static void finish(dlk_loader *l, Dlk_slot *s, dlk_status rc,
                   const dlk_error *err)
{
    DLK_ASSERT(l->busy > 0 && s->state == SLOT_LOADING);
    l->busy--;
    if (rc) {
        Dlk_slot_set_err(s, err);
        s->state = SLOT_FAILED;
    } else {
        s->state = SLOT_READY;
        l->stats.chunks_loaded++;
        l->stats.bytes_loaded += s->p1 ? s->span_len : s->ch->object.len;
    }
    pthread_cond_broadcast(&l->ready);
    if (l->paused && l->busy == 0)
        pthread_cond_broadcast(&l->idle);
}

/* How soon a loaded slot is needed: the epoch's by position, then the
 * next epoch's read ahead. */
static uint64_t need_order(const dlk_loader *l, const Dlk_slot *s)
{
    bool now = s >= l->plan.slots && s < l->plan.slots + l->plan.nslots;
    return now ? s->first_pos : (UINT64_MAX >> 1) + s->first_pos;
}

/* The queued copy needed soonest, taken off the queue (called locked).
 * Loads end out of order, and many end at once while a GPU starts: in
 * the order they ended, the first batch's copies waited behind the
 * read-ahead's. */
static Dlk_slot *next_upload(dlk_loader *l)
{
    Dlk_slot *best = l->up_head, *best_prev = NULL, *prev = l->up_head;
    for (Dlk_slot *s = l->up_head->up_next; s; prev = s, s = s->up_next)
        if (need_order(l, s) < need_order(l, best)) {
            best = s;
            best_prev = prev;
        }
    if (best_prev)
        best_prev->up_next = best->up_next;
    else
        l->up_head = best->up_next;
    if (l->up_tail == best)
        l->up_tail = best_prev;
    best->up_next = NULL;
    return best;
}

/* A span's pinned host buffer goes back to the pool once its copy is
 * over, not when the consumer has passed the slot: the loads then reuse
 * a few buffers that stay in the host's last-level cache, where the
 * kernel's copy out of the page cache writes them and the copy engine
 * reads them, instead of cycling through the whole budget's worth in
 * DRAM (H200 hosts: 16 threads reading 4 MiB pieces into a pool of 104
 * buffers and copying them to the GPU moved 51.9-52.1 GB/s taking the
 * buffer given back last, 38.5-43.4 GB/s taking the one given back
 * longest ago; tests/bench/host_path_probe.cu).  A whole chunk's buffer
 * holds its index, and is kept. */
static void copies_add(dlk_loader *l, Dlk_slot *s)
{
    s->copy_prev = l->copy_tail;
    s->copy_next = NULL;
    if (l->copy_tail)
        l->copy_tail->copy_next = s;
    else
        l->copy_head = s;
    l->copy_tail = s;
    s->in_copy = true;
}

void Dlk_loader_copy_forget(dlk_loader *l, Dlk_slot *s)
{
    if (!s->in_copy)
        return;
    if (s->copy_prev)
        s->copy_prev->copy_next = s->copy_next;
    else
        l->copy_head = s->copy_next;
    if (s->copy_next)
        s->copy_next->copy_prev = s->copy_prev;
    else
        l->copy_tail = s->copy_prev;
    s->copy_prev = s->copy_next = NULL;
    s->in_copy = false;
}

/* The buffers of the copies over, oldest first (one copy stream: they
 * end in the order queued).  Called locked. */
static void copies_over(dlk_loader *l)
{
    Dlk_slot *s;
    while ((s = l->copy_head) &&
           l->dev->ops->host_done(l->dev, s->dev_handle)) {
        Dlk_loader_copy_forget(l, s);
        l->dev->ops->host_free(l->dev, s->host);
        s->host = NULL;
        s->span = NULL;
    }
}

/* On a GPU one thread issues every copy: CUDA calls from many threads
 * contend in the driver and delay the consumer's kernel launches (seen on
 * an H200: 16 loading threads each uploading cost ~5 points of GPU busy). */
static void *uploader(void *arg)
{
    dlk_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stopping && !l->up_head)
            pthread_cond_wait(&l->upq, &l->mu);
        if (l->stopping)
            break;
        Dlk_slot *s = next_upload(l);
        pthread_mutex_unlock(&l->mu);
        dlk_error err;
        Dlk_error_clear(&err);
        dlk_status rc = upload(l, s, &err);
        pthread_mutex_lock(&l->mu);
        if (!rc && s->p1 && s->host)
            copies_add(l, s);
        copies_over(l);
        finish(l, s, rc, &err);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* A worker reads its CPU time around one load in CPU_SAMPLE (its first
 * included): a reading costs a few microseconds, and at line rate the
 * loads are thousands a second. */
#define CPU_SAMPLE 8

static void *worker(void *arg)
{
    dlk_loader *l = arg;
    unsigned loads = 0;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        Dlk_slot *s = NULL;
        while (!l->stopping && (l->paused || !(s = take(l))))
            pthread_cond_wait(&l->work, &l->mu);
        if (l->stopping)
            break;
        l->busy++;
        l->reading++;
        /* wake one more worker if there is more to take: a chain instead of
         * a herd of every worker on every batch */
        if (Dlk_loader_more_to_take(l))
            pthread_cond_signal(&l->work);
        pthread_mutex_unlock(&l->mu);
        dlk_error err;
        Dlk_error_clear(&err);
        bool sample = loads++ % CPU_SAMPLE == 0;
        double st = 0, dt = 0, t0 = Dlk_now_s();
        double c0 = sample ? Dlk_thread_cpu_s() : 0;
        dlk_status rc = load(l, s, &st, &dt, &err);
        bool queued = false;
        if (!rc && !l->dev->ops->on_device)
            rc = upload(l, s, &err); /* cpu: nothing to copy */
        double t1 = Dlk_now_s(), busy = t1 - t0;
        double cpu = sample ? Dlk_thread_cpu_s() - c0 : 0;
        if (l->dev->ops->trace_load)
            l->dev->ops->trace_load(l->dev, t0, s->t_buffer, t1);
        pthread_mutex_lock(&l->mu);
        l->reading--;
        if (!rc && l->ramp < l->nthreads)
            l->ramp++;
        pthread_cond_signal(&l->work); /* room under the ramp */
        l->stats.storage_s += st;
        l->stats.decompress_s += dt;
        l->stats.io_busy_s += busy;
        if (sample) {
            l->cpu_sampled_s += cpu > busy ? busy : cpu;
            l->busy_sampled_s += busy;
        }
        if (!rc && l->dev->ops->on_device) {
            /* still busy: the uploader finishes it */
            if (l->up_tail)
                l->up_tail->up_next = s;
            else
                l->up_head = s;
            l->up_tail = s;
            s->uploading = true; /* a consumer waiting now waits for it */
            pthread_cond_signal(&l->upq);
            queued = true;
        }
        if (!queued)
            finish(l, s, rc, &err);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

dlk_status Dlk_loader_start_workers(dlk_loader *l, dlk_error *err)
{
    l->threads = calloc(l->nthreads, sizeof *l->threads);
    if (!l->threads)
        return Dlk_oom(err);
    for (uint32_t i = 0; i < l->nthreads; i++)
        if (pthread_create(&l->threads[i], NULL, worker, l) != 0) {
            l->nthreads = i;
            return Dlk_fail(err, DLK_ENOMEM, "cannot start an I/O thread");
        } else {
            pthread_setname_np(l->threads[i], "dlk-load");
        }
    if (l->dev->ops->on_device) {
        if (pthread_create(&l->up_thread, NULL, uploader, l) != 0)
            return Dlk_fail(err, DLK_ENOMEM, "cannot start the upload thread");
        pthread_setname_np(l->up_thread, "dlk-upload");
        l->have_up_thread = true;
    }
    return DLK_OK;
}

void Dlk_loader_pause_workers(dlk_loader *l)
{
    pthread_mutex_lock(&l->mu);
    l->paused = true;
    while (l->busy)
        pthread_cond_wait(&l->idle, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

void Dlk_loader_resume_workers(dlk_loader *l)
{
    pthread_mutex_lock(&l->mu);
    l->paused = false;
    l->want_pos = 0;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
}

void Dlk_loader_stop_workers(dlk_loader *l)
{
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_broadcast(&l->work);
    pthread_cond_broadcast(&l->upq);
    pthread_mutex_unlock(&l->mu);
    for (uint32_t i = 0; i < l->nthreads; i++)
        pthread_join(l->threads[i], NULL);
    if (l->have_up_thread)
        pthread_join(l->up_thread, NULL);
    l->have_up_thread = false;
    free(l->threads);
    l->threads = NULL;
}
