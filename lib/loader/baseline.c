/* baseline.c - the per-file baseline bench-stream compares with: what a
 * PyTorch DataLoader over a bucket of JPEGs does (one GET per sample, a
 * decode and resize per sample per step, batches pinned and copied to
 * the device, a training step on each), on the same threads, batch size,
 * device and step, so a user sees the difference on their own data:
 * samples per second and how busy the device was. */
#include "util/error.h"
#include "util/grow.h"
#include "util/buf.h"
#include "util/clock.h"
#include "store/store.h"
#include "dlk_bench.h"
#include "device.h"
#include "ingest/decode.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Host batches between the decoding threads and the consumer: one being
 * filled, the others ready or on their way to the device (a DataLoader's
 * prefetch) */
#define RING 4

typedef struct key_vec {
    char **v;
    size_t n, cap;
    uint64_t bytes;
} key_vec;

static int on_key(void *ud, const char *key, uint64_t size)
{
    key_vec *k = ud;
    if (size == 0)
        return 0;
    if (!DLK_GROW(k->v, k->n, k->cap, 1024))
        return 1;
    k->bytes += size;
    return (k->v[k->n] = strdup(key)) ? (k->n++, 0) : 1;
}

enum { B_FREE, B_FILLING, B_READY };

typedef struct host_batch {
    uint8_t *p;           /* pinned (dev->host_alloc) */
    size_t cap, len;
    Dlk_gather *g;        /* batch_size entries: offset and size */
    uint32_t n;
    int state;
    uint64_t seq;         /* order the batches filled in */
} host_batch;

typedef struct base_run {
    Dlk_store *store;
    Dlk_dev *dev;
    const dlk_baseline_opts *o;
    key_vec keys;
    pthread_mutex_t mu;
    pthread_cond_t ready, freed;
    size_t next;          /* next file to take */
    host_batch ring[RING];
    host_batch *filling;
    uint64_t filled;      /* batches filled so far */
    uint32_t running;     /* workers still decoding */
    dlk_status rc;        /* the first fatal error (out of memory) */
    dlk_error err;
    double t0, deadline;
    dlk_baseline_result *res;
} base_run;

/* The batch to add to (locked): the one filling, or a free one, waiting
 * for the consumer to free one. */
static host_batch *filling(base_run *r)
{
    while (!r->filling && !r->rc) {
        for (int i = 0; i < RING; i++)
            if (r->ring[i].state == B_FREE) {
                r->filling = &r->ring[i];
                r->filling->state = B_FILLING;
                r->filling->n = 0;
                r->filling->len = 0;
                break;
            }
        if (!r->filling)
            pthread_cond_wait(&r->freed, &r->mu);
    }
    return r->filling;
}

/* Append a decoded sample to the batch (locked). */
static dlk_status add_sample(base_run *r, host_batch *b, const Dlk_buf *d)
{
    if (b->len + d->len > b->cap) {
        size_t cap = (b->len + d->len) * 2;
        uint8_t *p = r->dev->ops->host_alloc(r->dev, cap);
        if (!p)
            return Dlk_fail(&r->err, DLK_ENOMEM, "out of memory for a "
                            "batch of %zu bytes", cap);
        if (b->len)
            memcpy(p, b->p, b->len);
        if (b->p)
            r->dev->ops->host_free(r->dev, b->p);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, d->data, d->len);
    b->g[b->n].dst_off = b->len;
    b->g[b->n].nbytes = d->len;
    b->n++;
    b->len += d->len;
    return DLK_OK;
}

static void *worker(void *arg)
{
    base_run *r = arg;
    Dlk_image_opts io = {0};
    io.width = r->o->width;
    io.height = r->o->height;
    io.channels = 3;
    Dlk_buf b;
    Dlk_buf_init(&b);
    for (;;) {
        pthread_mutex_lock(&r->mu);
        size_t i = r->next < r->keys.n && Dlk_now_s() < r->deadline &&
                           !r->rc
                       ? r->next++
                       : SIZE_MAX;
        pthread_mutex_unlock(&r->mu);
        if (i == SIZE_MAX)
            break;
        dlk_error err;
        b.len = 0;
        Dlk_obj_info info;
        Dlk_decoded d;
        memset(&d, 0, sizeof d);
        dlk_status rc = Dlk_store_get(r->store, r->keys.v[i], (uint64_t)256 << 20,
                                      &b, &info, &err);
        if (!rc)
            rc = Dlk_decode_image(b.data, b.len, r->keys.v[i], &io, &d, &err);
        pthread_mutex_lock(&r->mu);
        r->res->files++;
        r->res->bytes_read += b.len;
        if (rc) {
            r->res->errors++;
        } else {
            host_batch *hb = filling(r);
            if (hb && !r->rc) {
                if ((rc = add_sample(r, hb, &d.data)))
                    r->rc = rc;
                else {
                    r->res->samples++;
                    if (hb->n == r->o->batch_size) {
                        hb->state = B_READY;
                        hb->seq = r->filled++;
                        r->filling = NULL;
                        pthread_cond_signal(&r->ready);
                    }
                }
            }
        }
        pthread_mutex_unlock(&r->mu);
        Dlk_buf_free(&d.data);
    }
    Dlk_buf_free(&b);
    pthread_mutex_lock(&r->mu);
    r->running--;
    pthread_cond_broadcast(&r->ready);
    pthread_cond_broadcast(&r->freed);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* The consumer (the calling thread): each full batch to the device as a
 * training loop would: copied, gathered into a batch buffer, stepped. */
static dlk_status consume(base_run *r, dlk_error *err)
{
    Dlk_dev *dev = r->dev;
    void *batch = NULL;
    size_t batch_cap = 0;
    dlk_status rc = DLK_OK;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        host_batch *b = NULL;
        for (;;) {
            for (int i = 0; i < RING; i++)
                if (r->ring[i].state == B_READY &&
                    (!b || r->ring[i].seq < b->seq))
                    b = &r->ring[i];
            if (b || r->running == 0 || r->rc)
                break;
            pthread_cond_wait(&r->ready, &r->mu);
        }
        pthread_mutex_unlock(&r->mu);
        if (!b)
            break;
        void *dev_ptr = NULL, *handle = NULL;
        if (b->len > batch_cap) {
            if (batch)
                dev->ops->batch_free(dev, batch);
            batch_cap = b->len * 2;
            if (!(batch = dev->ops->batch_alloc(dev, batch_cap))) {
                rc = Dlk_fail(err, DLK_ENOMEM, "cannot allocate a batch of "
                              "%zu bytes on the device", batch_cap);
                batch_cap = 0;
            }
        }
        if (!rc)
            rc = dev->ops->upload(dev, b->p, b->len, &dev_ptr, &handle, err);
        if (!rc) {
            for (uint32_t i = 0; i < b->n; i++) {
                b->g[i].src = (const uint8_t *)dev_ptr + b->g[i].dst_off;
                b->g[i].handle = handle;
            }
            rc = dev->ops->gather(dev, b->g, b->n, batch, err);
            if (!rc)
                rc = dev->ops->step(dev, batch, b->g, b->n, r->o->step_ms,
                                    err);
            /* the host batch may be filled again once its copy is over */
            dev->ops->release(dev, handle, dev_ptr);
        }
        pthread_mutex_lock(&r->mu);
        b->state = B_FREE;
        if (!rc && r->res->batches++ == 0)
            r->res->first_batch_s = Dlk_now_s() - r->t0;
        if (rc && !r->rc) {
            r->rc = rc;
            r->err = *err;
        }
        pthread_cond_broadcast(&r->freed);
        pthread_mutex_unlock(&r->mu);
        if (rc)
            break;
    }
    if (batch)
        dev->ops->batch_free(dev, batch);
    return rc;
}

/* The keys shuffled, as a training loader reads them. */
static void shuffle_keys(key_vec *k, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = k->n; i > 1; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t j = (size_t)(x % i);
        char *t = k->v[i - 1];
        k->v[i - 1] = k->v[j];
        k->v[j] = t;
    }
}

/* The workers' run, its batches consumed on this thread, timed from
 * the device's mark m0 into r->res. */
static dlk_status run_workers(base_run *r, size_t m0, dlk_error *err)
{
    const dlk_baseline_opts *o = r->o;
    dlk_baseline_result *res = r->res;
    dlk_status rc = DLK_OK;
    size_t m1 = 0;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->ready, NULL);
    pthread_cond_init(&r->freed, NULL);
    pthread_t *th = calloc(o->workers, sizeof *th);
    r->t0 = Dlk_now_s();
    r->deadline = r->t0 + (o->seconds > 0 ? o->seconds : 60);
    uint32_t started = 0;
    pthread_mutex_lock(&r->mu);
    for (; th && started < o->workers; started++) {
        if (pthread_create(&th[started], NULL, worker, r) != 0)
            break;
        r->running++;
    }
    pthread_mutex_unlock(&r->mu);
    if (started)
        rc = consume(r, err);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (!rc && r->rc) {
        rc = r->rc;
        *err = r->err;
    }
    if (!rc)
        rc = r->dev->ops->mark(r->dev, &m1, err);
    double busy = 0, wall = 0;
    if (!rc)
        rc = r->dev->ops->span(r->dev, m0, m1, &wall, &busy, err);
    res->seconds = Dlk_now_s() - r->t0;
    res->busy_pct = wall > 0 ? 100.0 * busy / wall : 0;
    if (!rc && (!th || started == 0))
        rc = Dlk_fail(err, DLK_ENOMEM, "cannot start baseline threads");
    free(th);
    pthread_cond_destroy(&r->ready);
    pthread_cond_destroy(&r->freed);
    pthread_mutex_destroy(&r->mu);
    return rc;
}

dlk_status dlk_source_baseline(const dlk_baseline_opts *o,
                               dlk_baseline_result *res, dlk_error *err)
{
    memset(res, 0, sizeof *res);
    if (!o->batch_size || o->batch_size > (1u << 24) || !o->workers ||
        o->workers > 1024 || !(o->step_ms >= 0 && o->step_ms <= 60000))
        return Dlk_fail(err, DLK_EINVAL, "baseline needs a batch size, "
                        "1-1024 workers and a step of 0-60000 ms");
    base_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.res = res;
    dlk_status rc = Dlk_dev_open(o->device, NULL, &r.dev, err);
    if (!rc)
        rc = Dlk_store_open(o->source, false, o->store, &r.store, err);
    if (!rc)
        rc = Dlk_store_list(r.store, "", on_key, &r.keys, err);
    if (!rc && r.keys.n == 0)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "no objects under '%s'", o->source);
    res->files_listed = r.keys.n;
    res->bytes_listed = r.keys.bytes;
    for (int i = 0; !rc && i < RING; i++)
        if (!(r.ring[i].g = calloc(o->batch_size, sizeof *r.ring[i].g)))
            rc = Dlk_oom(err);
    size_t m0 = 0;
    if (!rc)
        rc = r.dev->ops->mark(r.dev, &m0, err);
    if (!rc) {
        shuffle_keys(&r.keys, o->seed);
        rc = run_workers(&r, m0, err);
    }
    for (int i = 0; i < RING; i++) {
        if (r.ring[i].p)
            r.dev->ops->host_free(r.dev, r.ring[i].p);
        free(r.ring[i].g);
    }
    for (size_t i = 0; i < r.keys.n; i++)
        free(r.keys.v[i]);
    free(r.keys.v);
    Dlk_store_free(r.store);
    if (r.dev)
        r.dev->ops->close(r.dev);
    return rc;
}
