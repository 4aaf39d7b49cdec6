/*
 * s3_store.h - what the S3 store's operations (s3.c) share with its listing
 * engine (s3_list.c); the store's state stays in s3.c.
 */
#ifndef DLK_S3_STORE_H
#define DLK_S3_STORE_H

#include "s3_internal.h"

typedef struct s3_store s3_store;

/* ---- s3.c ----------------------------------------------------------- */

const char *s3_store_bucket(const s3_store *s);
/* "" or "a/b": no leading or trailing '/' */
const char *s3_store_prefix(const s3_store *s);
/* The engine of the store's own requests (not the bulk GETs'). */
s3_engine *s3_store_engine(const s3_store *s);
/* The failure of r, doing `verb` on okey, as a status and a message that
 * names the object, the HTTP status, the error code and the request id. */
dlk_status s3_store_fail(const s3_store *s, const s3_req *r, const char *verb,
                         const char *okey, dlk_error *err);
/* The URL of okey ("": the bucket's root) with a query, into a new url. */
dlk_status s3_make_url(const s3_store *s, const char *okey, const char *query,
                       dlk_buf *url, dlk_error *err);
/* Percent-encode s onto b: every byte but the unreserved ones, and '/'
 * too unless keep_slash. */
dlk_status s3_enc_append(dlk_buf *b, const char *s, bool keep_slash,
                         dlk_error *err);
dlk_status s3_str_append(dlk_buf *b, const char *s, dlk_error *err);
/* NUL-terminate b without counting the NUL. */
dlk_status s3_terminate(dlk_buf *b, dlk_error *err);

/* ---- s3_list.c ------------------------------------------------------ */

/* The store's list, list_wide and list_versions operations. */
dlk_status s3_list(dlk_store *st, const char *prefix, dlk_list_fn fn,
                   void *ud, dlk_error *err);
dlk_status s3_list_wide(dlk_store *st, const char *prefix, dlk_list_fn fn,
                        void *ud, dlk_error *err);
dlk_status s3_list_versions(dlk_store *st, const char *prefix,
                            dlk_list_version_fn fn, void *ud,
                            dlk_error *err);

#endif /* DLK_S3_STORE_H */
