/* http_store.c - what the S3 and GCS stores share (http_store.h): many
 * whole-object GETs at once on one engine, and the errors of a GET. */
#include "http_store.h"

#include <stdlib.h>

/* One GET: its request first, so that on_finish's request is the
 * pending. */
typedef struct pending {
    s3_req r;
    dlk_store *st;
    const http_get_ops *ops;
    void *ctx;
    dlk_get_req *q;
    bool sent;
    void (*done)(void *ud, dlk_get_req *q); /* get_start's */
    void *ud;
} pending;

static bool pending_init(pending *pg, dlk_store *st, const http_get_ops *ops,
                         dlk_get_req *q)
{
    pg->st = st;
    pg->ops = ops;
    pg->q = q;
    if (q->rc)
        return false; /* refused before (a bad key) */
    pg->sent = ops->init(st, &pg->r, q, &pg->ctx);
    return pg->sent;
}

static void pending_finish(pending *pg)
{
    pg->ops->finish(pg->st, &pg->r, pg->sent, pg->q, pg->ctx);
    if (pg->sent)
        s3_req_fini(&pg->r);
}

void http_get_each(dlk_store *st, const http_get_ops *ops, s3_engine *eng,
                   dlk_get_req *reqs, size_t n,
                   void (*done)(void *ud, size_t i), void *ud)
{
    pending *pg = calloc(n ? n : 1, sizeof *pg);
    s3_req **batch = pg ? calloc(n ? n : 1, sizeof *batch) : NULL;
    if (!batch) {
        free(pg);
        for (size_t i = 0; i < n; i++) {
            if (!reqs[i].rc)
                reqs[i].rc = st->ops->get(st, reqs[i].key, 0, UINT64_MAX,
                                          reqs[i].max, reqs[i].out,
                                          reqs[i].info, &reqs[i].err);
            if (done)
                done(ud, i);
        }
        return;
    }
    size_t nb = 0;
    for (size_t i = 0; i < n; i++)
        if (pending_init(&pg[i], st, ops, &reqs[i]))
            batch[nb++] = &pg[i].r;
    s3_submit_all(eng, batch, nb); /* one wake-up for them all */
    free(batch);
    for (size_t i = 0; i < n; i++) {
        if (pg[i].sent)
            s3_wait(eng, &pg[i].r);
        pending_finish(&pg[i]);
        if (done)
            done(ud, i);
    }
    free(pg);
}

/* A get_start request has finished (on the engine's thread). */
static void pending_done(s3_req *r)
{
    pending *pg = (pending *)r;
    dlk_get_req *q = pg->q;
    void (*done)(void *ud, dlk_get_req *q) = pg->done;
    void *ud = pg->ud;
    pending_finish(pg);
    free(pg);
    if (!q->rc)
        dlk_io_count_read(q->out->len);
    done(ud, q);
}

void http_get_start(dlk_store *st, const http_get_ops *ops, s3_engine *eng,
                    dlk_get_req **reqs, size_t n,
                    void (*done)(void *ud, dlk_get_req *q), void *ud)
{
    s3_req *batch[64];
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        dlk_get_req *q = reqs[i];
        pending *pg = calloc(1, sizeof *pg);
        if (!pg) {
            if (!q->rc)
                q->rc = dlk_fail(&q->err, DLK_ENOMEM, "out of memory");
            done(ud, q);
            continue;
        }
        if (!pending_init(pg, st, ops, q)) {
            pending_finish(pg);
            free(pg);
            done(ud, q);
            continue;
        }
        pg->done = done;
        pg->ud = ud;
        pg->r.on_finish = pending_done;
        batch[nb++] = &pg->r;
        if (nb == sizeof batch / sizeof *batch) {
            s3_submit_all(eng, batch, nb); /* one wake-up for them */
            nb = 0;
        }
    }
    if (nb)
        s3_submit_all(eng, batch, nb);
}

dlk_status http_short_object(const char *scheme, const char *bucket,
                             const char *okey, uint64_t off, uint64_t len,
                             uint64_t size, dlk_error *err)
{
    if (size == UINT64_MAX)
        return dlk_fail(err, DLK_ECORRUPT, "short object '%s://%s/%s': "
                        "range %llu+%llu past its end", scheme, bucket, okey,
                        (unsigned long long)off, (unsigned long long)len);
    return dlk_fail(err, DLK_ECORRUPT, "short object '%s://%s/%s': range "
                    "%llu+%llu past its %llu bytes", scheme, bucket, okey,
                    (unsigned long long)off, (unsigned long long)len,
                    (unsigned long long)size);
}

dlk_status http_over_limit(const char *scheme, const char *bucket,
                           const char *okey, uint64_t n, uint64_t max,
                           dlk_error *err)
{
    if (n == UINT64_MAX)
        return dlk_fail(err, DLK_ELIMIT, "object '%s://%s/%s' is over the "
                        "limit of %llu bytes", scheme, bucket, okey,
                        (unsigned long long)max);
    return dlk_fail(err, DLK_ELIMIT, "object '%s://%s/%s' is %llu bytes, "
                    "over the limit of %llu", scheme, bucket, okey,
                    (unsigned long long)n, (unsigned long long)max);
}
