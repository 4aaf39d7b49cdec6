/*
 * http_store.h - what the stores on the HTTP engine (s3_http.c) share,
 * S3's (s3.c) and GCS's (gcs.c): many whole-object GETs in flight at once
 * with no thread each (a dataset's documents at open, get_each; an
 * ingest's source objects as they come, get_start), where the store says
 * how a request is made and what its answer means; and the errors of a
 * GET, naming the object as SCHEME://BUCKET/KEY.
 */
#ifndef DLK_HTTP_STORE_H
#define DLK_HTTP_STORE_H

#include "s3_internal.h"

typedef struct http_get_ops {
    /* Set up r (zeroed) to GET q's object whole; false, q->rc set, when it
     * cannot be sent.  *ctx: what r points at until it finishes. */
    bool (*init)(dlk_store *st, s3_req *r, dlk_get_req *q, void **ctx);
    /* q->rc from r's answer when it was sent; frees ctx (NULL or init's;
     * init may have set it before failing). */
    void (*finish)(dlk_store *st, s3_req *r, bool sent, dlk_get_req *q,
                   void *ctx);
} http_get_ops;

/* The dlk_store_ops get_each of a store on eng: every request in flight,
 * then each waited for in order and given to done.  A request whose rc is
 * set already is left alone.  Without memory for the batch, each is read
 * by the store's own get. */
void http_get_each(dlk_store *st, const http_get_ops *ops, s3_engine *eng,
                   dlk_get_req *reqs, size_t n,
                   void (*done)(void *ud, size_t i), void *ud);

/* The dlk_store_ops get_start: each request's done is called on the
 * engine's thread as it finishes, in any order (or here, at once, when it
 * cannot be sent). */
void http_get_start(dlk_store *st, const http_get_ops *ops, s3_engine *eng,
                    dlk_get_req **reqs, size_t n,
                    void (*done)(void *ud, dlk_get_req *q), void *ud);

/* A range [off, off+len) past the end of an object of `size` bytes
 * (UINT64_MAX: not known): DLK_ECORRUPT "short object". */
dlk_status http_short_object(const char *scheme, const char *bucket,
                             const char *okey, uint64_t off, uint64_t len,
                             uint64_t size, dlk_error *err);

/* An object of n bytes (UINT64_MAX: not known) over a read's limit of
 * max: DLK_ELIMIT. */
dlk_status http_over_limit(const char *scheme, const char *bucket,
                           const char *okey, uint64_t n, uint64_t max,
                           dlk_error *err);

#endif /* DLK_HTTP_STORE_H */
