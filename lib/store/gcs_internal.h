/*
 * gcs_internal.h - the Google Cloud Storage store (gs://BUCKET/PREFIX)
 * through the JSON API, set by the gcs_* fields of a dlk_store_options
 * (cmd/store_env.c fills them from the environment for the tool): OAuth
 * tokens (gcs_auth.c), the store's operations (gcs.c) and its listing
 * (gcs_list.c).  Requests run on the S3 store's engine (s3_http.c):
 * the same retries with backoff, in-flight limit and hedged reads.
 */
#ifndef DLK_GCS_INTERNAL_H
#define DLK_GCS_INTERNAL_H

#include "s3_store.h"

#include <openssl/evp.h>

/* Open gs://BUCKET/PREFIX with the gcs_* options of o (NULL: none), and
 * the engine's s3_max_inflight, s3_max_attempts, s3_no_hedge,
 * s3_hedge_min_ms, the bounds of requests and listings and cancel. */
dlk_status Dlk_store_open_gcs(const char *url, const dlk_store_options *o,
                              Dlk_store **out, dlk_error *err);

/* ---- tokens (gcs_auth.c) ---------------------------------------------- */

#define GCS_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"
#define GCS_TOKEN_URI "https://oauth2.googleapis.com/token"

typedef struct gcs_auth gcs_auth;
/* Credentials: a fixed token, else a service-account key file (read and
 * checked now; tokens fetched on first use through eng), else none. */
dlk_status gcs_auth_new(const char *token, const char *key_file,
                        s3_engine *eng, gcs_auth **out, dlk_error *err);
void gcs_auth_free(gcs_auth *a);
/* err's message with the token held (if any) redacted (Dlk_redact). */
void gcs_auth_redact(gcs_auth *a, dlk_error *err);
/* Whether requests carry a token at all. */
bool gcs_auth_signed(const gcs_auth *a);
/* Append "Authorization: Bearer TOKEN" to *h (nothing when anonymous),
 * exchanging a new JWT for a token when the one held expires within five
 * minutes.  Thread-safe. */
dlk_status gcs_auth_header(gcs_auth *a, struct curl_slist **h,
                           dlk_error *err);

/* A signed RS256 JWT asking token_uri for `scope` on behalf of email,
 * issued at `now` for an hour: header.claims.signature, base64url. */
dlk_status gcs_jwt_make(const char *email, const char *scope,
                        const char *token_uri, int64_t now, EVP_PKEY *key,
                        char **out, dlk_error *err);
/* A token endpoint's answer: {"access_token": ..., "expires_in": N}. */
dlk_status gcs_token_parse(const void *body, size_t len, char **token,
                           int64_t *expires_in, dlk_error *err);
/* base64url without padding of n bytes, appended to b. */
dlk_status gcs_b64url(Dlk_buf *b, const void *p, size_t n, dlk_error *err);

/* ---- shared by gcs.c, gcs_upload.c and gcs_list.c --------------------- */

#define GCS_META_MAX (1u << 20)  /* bytes of an object resource's answer */

typedef struct gcs_store {
    Dlk_store base;
    s3_engine *eng;
    gcs_auth *auth;
    char *endpoint;     /* no trailing '/' */
    char *bucket;
    char *prefix;       /* "" or "a/b" */
    uint64_t resumable_threshold;
    uint64_t piece_size;
    int max_attempts;   /* of a resumable upload, as of a request */
    uint64_t list_max_keys, list_max_pages;  /* a listing's bounds */
} gcs_store;

/* The object name of store key `key` ("PREFIX/key"), malloc'd. */
char *gcs_object_key(const gcs_store *s, const char *key);
/* endpoint part "/b/" BUCKET "/o" ["/" enc(okey)] ["?" query], part
 * "/storage/v1" or "/upload/storage/v1" */
dlk_status gcs_make_url(const gcs_store *s, const char *part,
                        const char *okey, const char *query, Dlk_buf *url,
                        dlk_error *err);
/* An object resource's size, generation and update time into info. */
dlk_status gcs_parse_object(const gcs_store *s, const char *okey,
                            const Dlk_buf *body, Dlk_obj_info *info,
                            dlk_error *err);
/* base "/storage/v1/b/BUCKET/o" [ "/" enc(okey) ] [ "?" query ] */
dlk_status gcs_object_url(const gcs_store *s, const char *okey,
                          const char *query, Dlk_buf *url, dlk_error *err);
/* Run r (method, url set) with the token's header added to its own. */
dlk_status gcs_run(gcs_store *s, s3_req *r, dlk_error *err);
/* The failure of r doing verb on okey: status, GCS's message, attempts;
 * mode turns a 412 into EEXIST or ECONFLICT. */
dlk_status gcs_fail(const gcs_store *s, const s3_req *r, const char *verb,
                    const char *okey, Dlk_put_mode mode, dlk_error *err);

/* The store's put and putv (gcs_upload.c). */
dlk_status gcs_put(Dlk_store *st, const char *key, const void *data,
                   size_t len, Dlk_put_mode mode, const char *etag,
                   Dlk_obj_info *info, dlk_error *err);
dlk_status gcs_putv(Dlk_store *st, const char *key, const struct iovec *v,
                    int n, Dlk_put_mode mode, const char *etag,
                    Dlk_obj_info *info, dlk_error *err);

dlk_status gcs_list(Dlk_store *st, const char *prefix, Dlk_list_fn fn,
                    void *ud, dlk_error *err);
dlk_status gcs_list_versions(Dlk_store *st, const char *prefix,
                             Dlk_list_version_fn fn, void *ud,
                             dlk_error *err);

#endif /* DLK_GCS_INTERNAL_H */
