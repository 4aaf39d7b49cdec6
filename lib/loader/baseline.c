/* baseline.c - the per-file baseline bench-stream compares with: what a
 * PyTorch DataLoader over a bucket of JPEGs does (one GET per sample, a
 * decode and resize per sample per step), on the same threads and batch
 * size, so a user sees the difference on their own data. */
#include "internal.h"
#include "ingest/decode.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 1024;
        char **v = realloc(k->v, cap * sizeof *v);
        if (!v)
            return 1;
        k->v = v;
        k->cap = cap;
    }
    k->bytes += size;
    return (k->v[k->n] = strdup(key)) ? (k->n++, 0) : 1;
}

typedef struct base_run {
    dlk_store *store;
    const dlk_baseline_opts *o;
    key_vec keys;
    pthread_mutex_t mu;
    size_t next;          /* next file to take */
    uint32_t in_batch;    /* samples in the batch being filled */
    double t0, deadline;
    dlk_baseline_result *res;
} base_run;

static void *worker(void *arg)
{
    base_run *r = arg;
    dlk_image_opts io = {0};
    io.width = r->o->width;
    io.height = r->o->height;
    io.channels = 3;
    dlk_buf b;
    dlk_buf_init(&b);
    for (;;) {
        pthread_mutex_lock(&r->mu);
        size_t i = r->next < r->keys.n && dlk_now_s() < r->deadline
                       ? r->next++
                       : SIZE_MAX;
        pthread_mutex_unlock(&r->mu);
        if (i == SIZE_MAX)
            break;
        dlk_error err;
        b.len = 0;
        dlk_obj_info info;
        dlk_decoded d;
        memset(&d, 0, sizeof d);
        dlk_status rc = dlk_store_get(r->store, r->keys.v[i], (uint64_t)256 << 20,
                                      &b, &info, &err);
        if (!rc)
            rc = dlk_decode_image(b.data, b.len, r->keys.v[i], &io, &d, &err);
        dlk_buf_free(&d.data);
        pthread_mutex_lock(&r->mu);
        r->res->files++;
        r->res->bytes_read += b.len;
        if (rc) {
            r->res->errors++;
        } else {
            r->res->samples++;
            if (++r->in_batch == r->o->batch_size) {
                r->in_batch = 0;
                if (r->res->batches++ == 0)
                    r->res->first_batch_s = dlk_now_s() - r->t0;
            }
        }
        pthread_mutex_unlock(&r->mu);
    }
    dlk_buf_free(&b);
    return NULL;
}

dlk_status dlk_source_baseline(const dlk_baseline_opts *o,
                               dlk_baseline_result *res, dlk_error *err)
{
    memset(res, 0, sizeof *res);
    if (!o->batch_size || !o->workers || o->workers > 1024)
        return dlk_fail(err, DLK_EINVAL, "baseline needs a batch size and "
                        "1-1024 workers");
    base_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.res = res;
    dlk_status rc = dlk_store_open(o->source, false, &r.store, err);
    if (!rc)
        rc = dlk_store_list(r.store, "", on_key, &r.keys, err);
    if (!rc && r.keys.n == 0)
        rc = dlk_fail(err, DLK_ENOTFOUND, "no objects under '%s'", o->source);
    res->files_listed = r.keys.n;
    res->bytes_listed = r.keys.bytes;
    if (!rc) {
        /* shuffled, as a training loader reads them */
        uint64_t x = o->seed * 0x9e3779b97f4a7c15ull + 1;
        for (size_t i = r.keys.n; i > 1; i--) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            size_t j = (size_t)(x % i);
            char *t = r.keys.v[i - 1];
            r.keys.v[i - 1] = r.keys.v[j];
            r.keys.v[j] = t;
        }
        pthread_mutex_init(&r.mu, NULL);
        pthread_t *th = calloc(o->workers, sizeof *th);
        r.t0 = dlk_now_s();
        r.deadline = r.t0 + (o->seconds > 0 ? o->seconds : 60);
        uint32_t started = 0;
        for (; th && started < o->workers; started++)
            if (pthread_create(&th[started], NULL, worker, &r) != 0)
                break;
        for (uint32_t i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        res->seconds = dlk_now_s() - r.t0;
        if (!th || started == 0)
            rc = dlk_fail(err, DLK_ENOMEM, "cannot start baseline threads");
        free(th);
        pthread_mutex_destroy(&r.mu);
    }
    for (size_t i = 0; i < r.keys.n; i++)
        free(r.keys.v[i]);
    free(r.keys.v);
    dlk_store_free(r.store);
    return rc;
}
