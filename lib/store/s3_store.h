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
/* The store's settings. */
const s3_config *s3_store_config(const s3_store *s);
/* The engine of the store's own requests (not the bulk GETs'). */
s3_engine *s3_store_engine(const s3_store *s);
/* The failure of r, doing `verb` on okey, as a status and a message that
 * names the object, the HTTP status, the error code and the request id. */
dlk_status s3_store_fail(const s3_store *s, const s3_req *r, const char *verb,
                         const char *okey, dlk_error *err);
/* The URL of okey ("": the bucket's root) with a query, into a new url. */
dlk_status s3_make_url(const s3_store *s, const char *okey, const char *query,
                       Dlk_buf *url, dlk_error *err);
/* Percent-encode s onto b: every byte but the unreserved ones, and '/'
 * too unless keep_slash. */
dlk_status s3_enc_append(Dlk_buf *b, const char *s, bool keep_slash,
                         dlk_error *err);
dlk_status s3_str_append(Dlk_buf *b, const char *s, dlk_error *err);
/* NUL-terminate b without counting the NUL. */
dlk_status s3_terminate(Dlk_buf *b, dlk_error *err);

/* ---- s3_list.c ------------------------------------------------------ */

/* The continuation tokens one listing has asked with, as hashes: a server
 * that sends one again would have the listing go round for ever. */
typedef struct list_tokens {
    uint64_t *h;         /* open addressing; 0: an empty place */
    size_t n, cap;
} list_tokens;
/* 1: token is new (now kept), 0: it was seen before, -1: out of memory. */
int list_tokens_add(list_tokens *t, const char *token);
void list_tokens_free(list_tokens *t);

/* The store's list, list_wide and list_versions operations. */
dlk_status s3_list(Dlk_store *st, const char *prefix, Dlk_list_fn fn,
                   void *ud, dlk_error *err);
dlk_status s3_list_wide(Dlk_store *st, const char *prefix, Dlk_list_fn fn,
                        void *ud, dlk_error *err);
dlk_status s3_list_versions(Dlk_store *st, const char *prefix,
                            Dlk_list_version_fn fn, void *ud,
                            dlk_error *err);

#endif /* DLK_S3_STORE_H */
