/* http_store.c - what the S3 and GCS stores share (http_store.h): many
 * whole-object GETs at once on one engine, and what a GET's answer
 * means. */
#include "http_store.h"
#include "util/error.h"
#include "util/bytes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One GET: its request first, so that on_finish's request is the
 * pending. */
typedef struct pending {
    s3_req r;
    Dlk_store *st;
    const http_get_ops *ops;
    void *ctx;
    Dlk_get_req *q;
    bool sent;
    void (*done)(void *ud, Dlk_get_req *q); /* get_start's */
    void *ud;
} pending;

static bool pending_init(pending *pg, Dlk_store *st, const http_get_ops *ops,
                         Dlk_get_req *q)
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

void http_get_each(Dlk_store *st, const http_get_ops *ops, s3_engine *eng,
                   Dlk_get_req *reqs, size_t n,
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
    Dlk_get_req *q = pg->q;
    void (*done)(void *ud, Dlk_get_req *q) = pg->done;
    void *ud = pg->ud;
    pending_finish(pg);
    free(pg);
    if (!q->rc)
        Dlk_io_count_read(q->out->len);
    done(ud, q);
}

void http_get_start(Dlk_store *st, const http_get_ops *ops, s3_engine *eng,
                    Dlk_get_req **reqs, size_t n,
                    void (*done)(void *ud, Dlk_get_req *q), void *ud)
{
    s3_req *batch[64];
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        Dlk_get_req *q = reqs[i];
        pending *pg = calloc(1, sizeof *pg);
        if (!pg) {
            if (!q->rc)
                q->rc = Dlk_oom(&q->err);
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
        return Dlk_fail(err, DLK_ECORRUPT, "short object '%s://%s/%s': "
                        "range %llu+%llu past its end", scheme, bucket, okey,
                        (unsigned long long)off, (unsigned long long)len);
    return Dlk_fail(err, DLK_ECORRUPT, "short object '%s://%s/%s': range "
                    "%llu+%llu past its %llu bytes", scheme, bucket, okey,
                    (unsigned long long)off, (unsigned long long)len,
                    (unsigned long long)size);
}

dlk_status http_over_limit(const char *scheme, const char *bucket,
                           const char *okey, uint64_t n, uint64_t max,
                           dlk_error *err)
{
    if (n == UINT64_MAX)
        return Dlk_fail(err, DLK_ELIMIT, "object '%s://%s/%s' is over the "
                        "limit of %llu bytes", scheme, bucket, okey,
                        (unsigned long long)max);
    return Dlk_fail(err, DLK_ELIMIT, "object '%s://%s/%s' is %llu bytes, "
                    "over the limit of %llu", scheme, bucket, okey,
                    (unsigned long long)n, (unsigned long long)max);
}

/* A read of no bytes at off: off against the object's size. */
static dlk_status get_empty(const http_get_who *w, uint64_t off, uint64_t len,
                            Dlk_obj_info *info, dlk_error *err)
{
    Dlk_obj_info oi;
    dlk_status rc = w->stat(w->store, w->okey, &oi, err);
    if (rc)
        return rc;
    if (off > oi.size)
        return http_short_object(w->scheme, w->bucket, w->okey, off, len,
                                 oi.size, err);
    if (info)
        *info = oi;
    return DLK_OK;
}

dlk_status http_get_range(const http_get_who *w, uint64_t off, uint64_t len,
                          uint64_t max, char *range, size_t cap,
                          Dlk_obj_info *info, bool *done, dlk_error *err)
{
    range[0] = '\0';
    *done = false;
    if (len != UINT64_MAX && len > max)
        return http_over_limit(w->scheme, w->bucket, w->okey, len, max, err);
    if (len == 0) {
        *done = true;
        return get_empty(w, off, len, info, err);
    }
    uint64_t end;
    if (len != UINT64_MAX) {
        if (!Dlk_add_u64(off, len - 1, &end))
            return http_short_object(w->scheme, w->bucket, w->okey, off, len,
                                     UINT64_MAX, err);
        snprintf(range, cap, "Range: bytes=%llu-%llu",
                 (unsigned long long)off, (unsigned long long)end);
    } else if (off) {
        snprintf(range, cap, "Range: bytes=%llu-", (unsigned long long)off);
    }
    return DLK_OK;
}

dlk_status http_get_answer(const http_get_who *w, const s3_req *r,
                           uint64_t off, uint64_t len, uint64_t max,
                           bool ranged, Dlk_buf *out, Dlk_obj_info *info,
                           dlk_error *err)
{
    dlk_status rc = DLK_OK;
    size_t start = r->out_start;
    if (r->over_limit && ranged && r->total_size == UINT64_MAX) {
        /* no Content-Range: the whole object came for a range (a range
         * small enough for the whole object to fit is cut out below) */
        rc = Dlk_fail(err, DLK_ENET, "cannot read '%s://%s/%s': the server "
                      "answered a request for bytes %llu+%llu with the whole "
                      "object: it does not serve ranges", w->scheme,
                      w->bucket, w->okey, (unsigned long long)off,
                      (unsigned long long)len);
    } else if (r->over_limit) {
        rc = http_over_limit(w->scheme, w->bucket, w->okey, r->content_length,
                             max, err);
    } else if (r->status == 416 && ranged && len == UINT64_MAX) {
        rc = get_empty(w, off, len, info, err);   /* off == size? */
    } else if (r->status == 416 && ranged) {
        rc = http_short_object(w->scheme, w->bucket, w->okey, off, len,
                               r->total_size, err);
    } else if (!s3_ok2xx(r)) {
        rc = w->fail(w->store, r, w->okey, err);
    } else if (r->short_body) {
        rc = Dlk_fail(err, DLK_ENET, "cannot read '%s://%s/%s': %llu of "
                      "%llu bytes received, after %d attempts", w->scheme,
                      w->bucket, w->okey, (unsigned long long)r->received,
                      (unsigned long long)r->content_length, r->attempts);
    } else {
        uint64_t size = r->status == 206 ? r->total_size : r->received;
        if (ranged && r->status == 200) {
            /* the server ignored Range: cut the answer ourselves */
            size = r->received;
            uint64_t want = len == UINT64_MAX ? size - (off < size ? off : size)
                                              : len;
            if (off > size || want > size - off) {
                rc = http_short_object(w->scheme, w->bucket, w->okey, off,
                                       len, size, err);
            } else {
                memmove(out->data + start, out->data + start + off,
                        (size_t)want);
                out->len = start + (size_t)want;
            }
        } else if (len != UINT64_MAX && r->received < len) {
            rc = http_short_object(w->scheme, w->bucket, w->okey, off, len,
                                   size, err);
        }
        if (!rc && info) {
            info->size = size;
            info->mtime = s3_req_mtime(r);
            snprintf(info->etag, sizeof info->etag, "%.*s", DLK_ETAG_MAX - 1,
                     w->tag_wanted ? r->want_value : r->etag);
        }
    }
    if (rc && out->len > start)
        out->len = start;
    return rc;
}
