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
    bool (*init)(Dlk_store *st, s3_req *r, Dlk_get_req *q, void **ctx);
    /* q->rc from r's answer when it was sent; frees ctx (NULL or init's;
     * init may have set it before failing). */
    void (*finish)(Dlk_store *st, s3_req *r, bool sent, Dlk_get_req *q,
                   void *ctx);
} http_get_ops;

/* The Dlk_store_ops get_each of a store on eng: every request in flight,
 * then each waited for in order and given to done.  A request whose rc is
 * set already is left alone.  Without memory for the batch, each is read
 * by the store's own get. */
void http_get_each(Dlk_store *st, const http_get_ops *ops, s3_engine *eng,
                   Dlk_get_req *reqs, size_t n,
                   void (*done)(void *ud, size_t i), void *ud);

/* The Dlk_store_ops get_start: each request's done is called on the
 * engine's thread as it finishes, in any order (or here, at once, when it
 * cannot be sent). */
void http_get_start(Dlk_store *st, const http_get_ops *ops, s3_engine *eng,
                    Dlk_get_req **reqs, size_t n,
                    void (*done)(void *ud, Dlk_get_req *q), void *ud);

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

/* ---- one GET of a range: what S3's and GCS's mean alike ---- */

/* The object a GET is for, and what its store says of its own. */
typedef struct http_get_who {
    const char *scheme, *bucket, *okey;
    void *store;
    /* The store's error for a non-2xx answer r, reading okey. */
    dlk_status (*fail)(void *store, const s3_req *r, const char *okey,
                       dlk_error *err);
    /* The object's size and version (a HEAD), for a read of no bytes. */
    dlk_status (*stat)(void *store, const char *okey, Dlk_obj_info *info,
                       dlk_error *err);
    /* The object's version is the header the store asked for (GCS's
     * generation in want_value), not the ETag. */
    bool tag_wanted;
} http_get_who;

/* Before a GET of bytes [off, off+len) (len UINT64_MAX: to the end) under
 * a limit of max: the Range header into range ("" for the whole object),
 * or an error: a range over max, or one past any object's end.  A range
 * of no bytes needs no GET: it is checked against the object's size
 * (info filled) and *done set. */
dlk_status http_get_range(const http_get_who *w, uint64_t off, uint64_t len,
                          uint64_t max, char *range, size_t cap,
                          Dlk_obj_info *info, bool *done, dlk_error *err);

/* What the answer r to that GET means (ranged: a Range header was sent):
 * the bytes appended to out from r->out_start, info filled (may be
 * NULL); or the error naming the object, out cut back to where it was.
 * A range answered with the whole object is cut out of it here when the
 * object fits under max, else the server is said not to serve ranges; a
 * body cut short after the engine's attempts is the network's fault. */
dlk_status http_get_answer(const http_get_who *w, const s3_req *r,
                           uint64_t off, uint64_t len, uint64_t max,
                           bool ranged, Dlk_buf *out, Dlk_obj_info *info,
                           dlk_error *err);

#endif /* DLK_HTTP_STORE_H */
