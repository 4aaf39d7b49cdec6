/* gcs.c - the store on Google Cloud Storage, through its JSON API.
 *
 * The root is gs://BUCKET/PREFIX; a key K is the object PREFIX/K.  An
 * object's version, the store's etag, is its generation: a create-only
 * write sends ifGenerationMatch=0, a replacement ifGenerationMatch=N.
 * Writes are in gcs_upload.c.  Requests run on the S3 store's engine
 * (s3_http.c), which retries 408, 429 and 5xx with backoff and hedges
 * slow reads. */
#include "gcs_internal.h"
#include "http_store.h"
#include "util/error.h"
#include "util/keys.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_ENDPOINT "https://storage.googleapis.com"
#define RESUMABLE_DEFAULT (32ull << 20)
#define PIECE_DEFAULT (8ull << 20)
#define PIECE_QUANTUM (256u << 10)  /* GCS: pieces are multiples of this */
#define PIECE_MAX (1ull << 30)

/* ---- names and urls --------------------------------------------------- */

char *gcs_object_key(const gcs_store *s, const char *key)
{
    size_t pn = strlen(s->prefix), kn = strlen(key);
    char *o = malloc(pn + kn + 2);
    if (o)
        snprintf(o, pn + kn + 2, "%s%s%s", s->prefix, pn && kn ? "/" : "",
                 key);
    return o;
}

dlk_status gcs_make_url(const gcs_store *s, const char *part,
                           const char *okey, const char *query, Dlk_buf *url,
                           dlk_error *err)
{
    Dlk_buf_init(url);
    dlk_status rc = s3_str_append(url, s->endpoint, err);
    if (!rc)
        rc = s3_str_append(url, part, err);
    if (!rc)
        rc = s3_str_append(url, "/b/", err);
    if (!rc)
        rc = s3_enc_append(url, s->bucket, false, err);
    if (!rc)
        rc = s3_str_append(url, "/o", err);
    if (!rc && okey) {
        rc = s3_str_append(url, "/", err);
        if (!rc)   /* an object name is one path segment: '/' encoded */
            rc = s3_enc_append(url, okey, false, err);
    }
    if (!rc && query && *query) {
        rc = s3_str_append(url, "?", err);
        if (!rc)
            rc = s3_str_append(url, query, err);
    }
    if (!rc)
        rc = s3_terminate(url, err);
    if (rc)
        Dlk_buf_free(url);
    return rc;
}

dlk_status gcs_object_url(const gcs_store *s, const char *okey,
                          const char *query, Dlk_buf *url, dlk_error *err)
{
    return gcs_make_url(s, "/storage/v1", okey, query, url, err);
}

/* ---- requests and their failures -------------------------------------- */

dlk_status gcs_run(gcs_store *s, s3_req *r, dlk_error *err)
{
    struct curl_slist *own = r->headers, *h = NULL, *t;
    for (const struct curl_slist *c = own; c; c = c->next) {
        if (!(t = curl_slist_append(h, c->data))) {
            curl_slist_free_all(h);
            return Dlk_oom(err);
        }
        h = t;
    }
    dlk_status rc = gcs_auth_header(s->auth, &h, err);
    if (!rc) {
        r->headers = h;
        s3_perform(s->eng, r);
        r->headers = own;
    }
    curl_slist_free_all(h);
    return rc;
}

/* GCS's error message from a JSON error body ("" when none), printable
 * and bounded. */
static void error_message(const s3_req *r, char *out, size_t cap)
{
    out[0] = '\0';
    json_error_t je;
    json_t *j = json_loadb((const char *)r->errbody.data, r->errbody.len, 0,
                           &je);
    const char *m = json_string_value(
        json_object_get(json_object_get(j, "error"), "message"));
    if (m) {
        size_t i = 0;
        for (; m[i] && i + 1 < cap; i++)
            out[i] = (unsigned char)m[i] < 32 ? ' ' : m[i];
        out[i] = '\0';
    }
    json_decref(j);
}

dlk_status gcs_fail(const gcs_store *s, const s3_req *r, const char *verb,
                    const char *okey, Dlk_put_mode mode, dlk_error *err)
{
    char tries[48] = "";
    if (r->attempts > 1)
        snprintf(tries, sizeof tries, ", after %d attempts", r->attempts);
    if (r->oom)
        return Dlk_fail(err, DLK_ENOMEM, "cannot %s 'gs://%s/%s': out of "
                        "memory", verb, s->bucket, okey);
    if (r->canceled)
        return Dlk_fail(err, DLK_ECANCELED, "cannot %s 'gs://%s/%s': "
                        "canceled", verb, s->bucket, okey);
    if (r->status == 0)
        return Dlk_fail(err, DLK_ENET, "cannot %s 'gs://%s/%s': %s%s", verb,
                        s->bucket, okey, r->curl_msg, tries);
    if (r->status == 412 && mode == DLK_PUT_IF_ABSENT)
        return Dlk_fail(err, DLK_EEXIST, "object 'gs://%s/%s' already "
                        "exists", s->bucket, okey);
    if (r->status == 412 && mode == DLK_PUT_IF_MATCH)
        return Dlk_fail(err, DLK_ECONFLICT, "object 'gs://%s/%s' was changed "
                        "by another writer (HTTP 412)", s->bucket, okey);
    char msg[160];
    error_message(r, msg, sizeof msg);
    dlk_status code = DLK_ENET;
    if (r->status == 401 || r->status == 403)
        code = DLK_EAUTH;
    else if (r->status == 404)
        code = DLK_ENOTFOUND;
    else if (r->status == 416)
        code = DLK_ECORRUPT;
    const char *hint = "";
    if (code == DLK_EAUTH && !gcs_auth_signed(s->auth))
        hint = " (no google credentials found: the request carried no "
               "token)";
    dlk_status rc = Dlk_fail(err, code, "cannot %s 'gs://%s/%s': HTTP "
                             "%ld%s%s%s%s%s", verb, s->bucket, okey,
                             r->status, msg[0] ? " (" : "", msg,
                             msg[0] ? ")" : "", tries, hint);
    /* the server's message may quote the request: never its token */
    gcs_auth_redact(s->auth, err);
    return rc;
}

/* RFC 3339 ("2026-01-02T03:04:05.678Z") to Unix seconds; 0 when not. */
static int64_t rfc3339(const char *t)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!t || sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon,
                     &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

dlk_status gcs_parse_object(const gcs_store *s, const char *okey,
                               const Dlk_buf *body, Dlk_obj_info *info,
                               dlk_error *err)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)body->data, body->len, 0, &je);
    const char *size = json_string_value(json_object_get(j, "size"));
    const char *gen = json_string_value(json_object_get(j, "generation"));
    char *end = NULL;
    unsigned long long n = size ? strtoull(size, &end, 10) : 0;
    bool ok = size && *size && end && !*end && gen && *gen &&
              strlen(gen) < DLK_ETAG_MAX &&
              strspn(gen, "0123456789") == strlen(gen);
    if (ok && info) {
        info->size = n;
        snprintf(info->etag, sizeof info->etag, "%s", gen);
        info->mtime = rfc3339(json_string_value(json_object_get(j,
                                                                "updated")));
    }
    json_decref(j);
    if (!ok)
        return Dlk_fail(err, DLK_ENET, "cannot read the metadata of "
                        "'gs://%s/%s': the answer is not an object resource",
                        s->bucket, okey);
    return DLK_OK;
}

/* ---- head and get ----------------------------------------------------- */

static dlk_status do_head(gcs_store *s, const char *okey, Dlk_obj_info *info,
                          dlk_error *err)
{
    Dlk_buf url, body;
    Dlk_buf_init(&body);
    dlk_status rc = gcs_object_url(s, okey, NULL, &url, err);
    if (rc)
        return rc;
    s3_req r = {0};
    r.method = "GET";
    r.url = (const char *)url.data;
    r.out = &body;
    r.max = GCS_META_MAX;
    rc = gcs_run(s, &r, err);
    if (!rc && !s3_ok2xx(&r))
        rc = gcs_fail(s, &r, "stat", okey, DLK_PUT_ALWAYS, err);
    if (!rc)
        rc = gcs_parse_object(s, okey, &body, info, err);
    s3_req_fini(&r);
    Dlk_buf_free(&url);
    Dlk_buf_free(&body);
    return rc;
}

static dlk_status gcs_head(Dlk_store *st, const char *key, Dlk_obj_info *info,
                           dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    char *okey = gcs_object_key(s, key);
    if (!okey)
        return Dlk_oom(err);
    dlk_status rc = do_head(s, okey, info, err);
    free(okey);
    return rc;
}

static dlk_status who_fail(void *st, const s3_req *r, const char *okey,
                           dlk_error *err)
{
    return gcs_fail(st, r, "read", okey, DLK_PUT_ALWAYS, err);
}

static dlk_status who_stat(void *st, const char *okey, Dlk_obj_info *info,
                           dlk_error *err)
{
    return do_head(st, okey, info, err);
}

/* okey of s, for what GCS and S3 share of a GET (http_store.c); its
 * version is the generation each GET asks for */
static http_get_who get_who(gcs_store *s, const char *okey)
{
    return (http_get_who){.scheme = "gs", .bucket = s->bucket,
                          .okey = okey, .store = s, .fail = who_fail,
                          .stat = who_stat, .tag_wanted = true};
}

static dlk_status do_get(gcs_store *s, const char *okey, uint64_t off,
                         uint64_t len, uint64_t max, Dlk_buf *out,
                         Dlk_obj_info *info, dlk_error *err)
{
    http_get_who w = get_who(s, okey);
    char range[64];
    bool done;
    dlk_status rc = http_get_range(&w, off, len, max, range, sizeof range,
                                   info, &done, err);
    if (rc || done)
        return rc;
    struct curl_slist *h = NULL;
    if (range[0] && !(h = curl_slist_append(NULL, range)))
        return Dlk_oom(err);
    Dlk_buf url;
    rc = gcs_object_url(s, okey, "alt=media", &url, err);
    if (rc) {
        curl_slist_free_all(h);
        return rc;
    }
    s3_req r = {0};
    r.method = "GET";
    r.url = (const char *)url.data;
    r.headers = h;
    r.out = out;
    r.max = max;
    r.want_header = "x-goog-generation";
    rc = gcs_run(s, &r, err);
    if (!rc)
        rc = http_get_answer(&w, &r, off, len, max, range[0] != 0, out, info,
                             err);
    s3_req_fini(&r);
    curl_slist_free_all(h);
    Dlk_buf_free(&url);
    return rc;
}

static dlk_status gcs_get(Dlk_store *st, const char *key, uint64_t off,
                          uint64_t len, uint64_t max, Dlk_buf *out,
                          Dlk_obj_info *info, dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    char *okey = gcs_object_key(s, key);
    if (!okey)
        return Dlk_oom(err);
    dlk_status rc = do_get(s, okey, off, len, max, out, info, err);
    free(okey);
    return rc;
}

/* ---- many GETs at once (http_store.c) ---------------------------------- */

/* What one whole-object GET of get_each or get_start points at until it
 * finishes. */
typedef struct get_ctx {
    char *okey;
    Dlk_buf url;
    struct curl_slist *headers;
} get_ctx;

/* The token is taken here, in the caller's thread: an exchange cannot
 * run on the engine's. */
static bool get_init(Dlk_store *st, s3_req *r, Dlk_get_req *q, void **ctx)
{
    gcs_store *s = (gcs_store *)st;
    get_ctx *c = calloc(1, sizeof *c);
    if (!(*ctx = c) || !(c->okey = gcs_object_key(s, q->key))) {
        q->rc = Dlk_oom(&q->err);
        return false;
    }
    if ((q->rc = gcs_object_url(s, c->okey, "alt=media", &c->url,
                                &q->err)) ||
        (q->rc = gcs_auth_header(s->auth, &c->headers, &q->err)))
        return false;
    r->method = "GET";
    r->url = (const char *)c->url.data;
    r->headers = c->headers;
    r->out = q->out;
    r->max = q->max;
    r->want_header = "x-goog-generation";
    return true;
}

static void get_finish(Dlk_store *st, s3_req *r, bool sent, Dlk_get_req *q,
                       void *ctx)
{
    get_ctx *c = ctx;
    if (sent) {
        http_get_who w = get_who((gcs_store *)st, c->okey);
        q->rc = http_get_answer(&w, r, 0, UINT64_MAX, q->max, false, q->out,
                                q->info, &q->err);
    }
    if (c) {
        curl_slist_free_all(c->headers);
        Dlk_buf_free(&c->url);
        free(c->okey);
        free(c);
    }
}

static const http_get_ops whole_gets = {get_init, get_finish};

static void gcs_get_each(Dlk_store *st, Dlk_get_req *reqs, size_t n,
                         void (*done)(void *ud, size_t i), void *ud)
{
    http_get_each(st, &whole_gets, ((gcs_store *)st)->eng, reqs, n, done,
                  ud);
}

/* Without waiting, so that an ingest from gs:// needs no fetch thread a
 * GET. */
static void gcs_get_start(Dlk_store *st, Dlk_get_req **reqs, size_t n,
                          void (*done)(void *ud, Dlk_get_req *q), void *ud)
{
    http_get_start(st, &whole_gets, ((gcs_store *)st)->eng, reqs, n, done,
                   ud);
}

static int gcs_want_inflight(Dlk_store *st, int n)
{
    gcs_store *s = (gcs_store *)st;
    if (n > 0 && n <= 4096)
        s3_engine_raise_max(s->eng, n);
    return s3_engine_max(s->eng);
}

/* ---- delete, free, open ----------------------------------------------- */

static dlk_status gcs_del(Dlk_store *st, const char *key, dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    char *okey = gcs_object_key(s, key);
    if (!okey)
        return Dlk_oom(err);
    Dlk_buf url;
    dlk_status rc = gcs_object_url(s, okey, NULL, &url, err);
    if (!rc) {
        s3_req r = {0};
        r.method = "DELETE";
        r.url = (const char *)url.data;
        rc = gcs_run(s, &r, err);
        /* a 404 after a retry is the first attempt's success */
        if (!rc && !s3_ok2xx(&r) && !(r.status == 404 && r.attempts > 1))
            rc = gcs_fail(s, &r, "delete", okey, DLK_PUT_ALWAYS, err);
        s3_req_fini(&r);
        Dlk_buf_free(&url);
    }
    free(okey);
    return rc;
}

static void gcs_free(Dlk_store *st)
{
    gcs_store *s = (gcs_store *)st;
    s3_engine_free(s->eng);
    gcs_auth_free(s->auth);
    free(s->endpoint);
    free(s->bucket);
    free(s->prefix);
    free(s->base.url);
    free(s);
}

static const Dlk_store_ops gcs_ops = {
    .scheme = "gs",
    .get = gcs_get,
    .head = gcs_head,
    .put = gcs_put,
    .putv = gcs_putv,
    .del = gcs_del,
    .list = gcs_list,
    .free = gcs_free,
    .list_versions = gcs_list_versions,
    .get_each = gcs_get_each,
    .get_start = gcs_get_start,
    .want_inflight = gcs_want_inflight,
};

/* GCS bucket names: 3 to 63 characters (222 with dots) of lower-case
 * letters, digits, '-', '_' and '.'. */
static bool bucket_valid(const char *b, size_t n)
{
    if (n < 3 || n > 222)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* The endpoint URL of o->gcs_endpoint ("host:port" alone: http, as
 * STORAGE_EMULATOR_HOST is given), or Google's, into *out. */
static dlk_status endpoint_of(const dlk_store_options *o, char **out,
                              dlk_error *err)
{
    const char *ep = o->gcs_endpoint && *o->gcs_endpoint ? o->gcs_endpoint
                                                         : DEFAULT_ENDPOINT;
    bool scheme = strstr(ep, "://") != NULL;
    if (scheme && strncmp(ep, "http://", 7) != 0 &&
        strncmp(ep, "https://", 8) != 0)
        return Dlk_fail(err, DLK_EINVAL, "bad gcs endpoint '%.200s' "
                        "(host:port, or an http:// or https:// url)", ep);
    size_t n = strlen(ep) + 8;
    char *e = malloc(n);
    if (!e)
        return Dlk_oom(err);
    snprintf(e, n, "%s%s", scheme ? "" : "http://", ep);
    size_t k = strlen(e);
    while (k && e[k - 1] == '/')
        e[--k] = '\0';
    *out = e;
    return DLK_OK;
}

/* The engine's settings: the S3 store's defaults and the options they
 * share (in flight, attempts, hedging), checked as for S3; no keys, so no
 * SigV4 signer. */
static dlk_status engine_of(gcs_store *s, const dlk_store_options *o,
                            dlk_error *err)
{
    dlk_store_options eo = {0};
    eo.s3_max_inflight = o->s3_max_inflight;
    eo.s3_max_attempts = o->s3_max_attempts;
    eo.s3_no_hedge = o->s3_no_hedge;
    eo.s3_hedge_min_ms = o->s3_hedge_min_ms;
    eo.s3_stall_rate = o->s3_stall_rate;
    eo.s3_stall_seconds = o->s3_stall_seconds;
    eo.s3_request_timeout = o->s3_request_timeout;
    eo.s3_list_max_keys = o->s3_list_max_keys;
    eo.s3_list_max_pages = o->s3_list_max_pages;
    eo.cancel = o->cancel;
    eo.cancel_ud = o->cancel_ud;
    s3_config cfg;
    dlk_status rc = s3_config_from(&cfg, &eo, err);
    if (rc)
        return rc;
    s->max_attempts = cfg.max_attempts;
    s->list_max_keys = cfg.list_max_keys;
    s->list_max_pages = cfg.list_max_pages;
    rc = s3_engine_new(&cfg, &s->eng, err);
    s3_config_free(&cfg);
    return rc;
}

dlk_status Dlk_store_open_gcs(const char *url, const dlk_store_options *o,
                              Dlk_store **out, dlk_error *err)
{
    static const dlk_store_options none;
    *out = NULL;
    if (!o)
        o = &none;
    if (strncmp(url, "gs://", 5) != 0)
        return Dlk_fail(err, DLK_EINVAL, "not a gs url '%.200s'", url);
    const char *b = url + 5;
    const char *slash = strchr(b, '/');
    size_t bn = slash ? (size_t)(slash - b) : strlen(b);
    if (!bucket_valid(b, bn))
        return Dlk_fail(err, DLK_EINVAL, "invalid bucket name in '%.200s'",
                        url);
    if (o->gcs_piece_size % PIECE_QUANTUM || o->gcs_piece_size > PIECE_MAX)
        return Dlk_fail(err, DLK_EINVAL, "store option gcs_piece_size must "
                        "be a multiple of 256 KiB up to 1 GiB, not %llu",
                        (unsigned long long)o->gcs_piece_size);
    gcs_store *s = calloc(1, sizeof *s);
    if (!s)
        return Dlk_oom(err);
    s->base.ops = &gcs_ops;
    s->bucket = strndup(b, bn);
    const char *p = slash ? slash + 1 : "";
    while (*p == '/')
        p++;
    s->prefix = strdup(p);
    s->base.url = strdup(url);
    if (!s->bucket || !s->prefix || !s->base.url) {
        gcs_free(&s->base);
        return Dlk_oom(err);
    }
    dlk_status rc = endpoint_of(o, &s->endpoint, err);
    if (rc) {
        gcs_free(&s->base);
        return rc;
    }
    size_t n = strlen(s->prefix);
    while (n && s->prefix[n - 1] == '/')
        s->prefix[--n] = '\0';
    if (n && !Dlk_key_valid(s->prefix)) {
        gcs_free(&s->base);
        return Dlk_fail(err, DLK_EINVAL, "invalid prefix in '%.200s'", url);
    }
    s->resumable_threshold = o->gcs_resumable_threshold
                                 ? o->gcs_resumable_threshold
                                 : RESUMABLE_DEFAULT;
    s->piece_size = o->gcs_piece_size ? o->gcs_piece_size : PIECE_DEFAULT;
    rc = engine_of(s, o, err);
    if (!rc)
        rc = gcs_auth_new(o->gcs_token, o->gcs_key_file, s->eng, &s->auth,
                          err);
    if (rc) {
        gcs_free(&s->base);
        return rc;
    }
    *out = &s->base;
    return DLK_OK;
}
