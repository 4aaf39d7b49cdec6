/* gcs.c - the store on Google Cloud Storage, through its JSON API.
 *
 * The root is gs://BUCKET/PREFIX; a key K is the object PREFIX/K.  An
 * object's version, the store's etag, is its generation: a create-only
 * write sends ifGenerationMatch=0, a replacement ifGenerationMatch=N.
 * Writes go up as multipart uploads (metadata and bytes in one request),
 * which GCS and its emulator (fake-gcs-server) both check against the
 * precondition; the emulator ignores it on media and resumable uploads,
 * on compose and on delete.  Large objects that replace nothing go up in
 * a resumable upload, piece by piece.  Requests run on the S3 store's
 * engine (s3_http.c), which retries 408, 429 and 5xx with backoff. */
#include "gcs_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_ENDPOINT "https://storage.googleapis.com"
#define RESUMABLE_DEFAULT (32ull << 20)
#define PIECE_DEFAULT (8ull << 20)
#define PIECE_QUANTUM (256u << 10)  /* GCS: pieces are multiples of this */
#define PIECE_MAX (1ull << 30)
#define META_MAX (1u << 20)

struct gcs_store {
    dlk_store base;
    s3_engine *eng;
    gcs_auth *auth;
    char *endpoint;     /* no trailing '/' */
    char *bucket;
    char *prefix;       /* "" or "a/b" */
    uint64_t resumable_threshold;
    uint64_t piece_size;
    int max_attempts;
};

/* ---- names and urls --------------------------------------------------- */

const char *gcs_store_prefix(const gcs_store *s) { return s->prefix; }

static char *object_key(const gcs_store *s, const char *key)
{
    size_t pn = strlen(s->prefix), kn = strlen(key);
    char *o = malloc(pn + kn + 2);
    if (o)
        snprintf(o, pn + kn + 2, "%s%s%s", s->prefix, pn && kn ? "/" : "",
                 key);
    return o;
}

/* endpoint part "/b/" BUCKET "/o" ["/" enc(okey)] ["?" query] */
static dlk_status make_url(const gcs_store *s, const char *part,
                           const char *okey, const char *query, dlk_buf *url,
                           dlk_error *err)
{
    dlk_buf_init(url);
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
        dlk_buf_free(url);
    return rc;
}

dlk_status gcs_object_url(const gcs_store *s, const char *okey,
                          const char *query, dlk_buf *url, dlk_error *err)
{
    return make_url(s, "/storage/v1", okey, query, url, err);
}

/* ---- requests and their failures -------------------------------------- */

dlk_status gcs_run(gcs_store *s, s3_req *r, dlk_error *err)
{
    struct curl_slist *own = r->headers, *h = NULL, *t;
    for (const struct curl_slist *c = own; c; c = c->next) {
        if (!(t = curl_slist_append(h, c->data))) {
            curl_slist_free_all(h);
            return dlk_fail(err, DLK_ENOMEM, "out of memory");
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
                    const char *okey, dlk_put_mode mode, dlk_error *err)
{
    char tries[48] = "";
    if (r->attempts > 1)
        snprintf(tries, sizeof tries, ", after %d attempts", r->attempts);
    if (r->oom)
        return dlk_fail(err, DLK_ENOMEM, "cannot %s 'gs://%s/%s': out of "
                        "memory", verb, s->bucket, okey);
    if (r->status == 0)
        return dlk_fail(err, DLK_ENET, "cannot %s 'gs://%s/%s': %s%s", verb,
                        s->bucket, okey, r->curl_msg, tries);
    if (r->status == 412 && mode == DLK_PUT_IF_ABSENT)
        return dlk_fail(err, DLK_EEXIST, "object 'gs://%s/%s' already "
                        "exists", s->bucket, okey);
    if (r->status == 412 && mode == DLK_PUT_IF_MATCH)
        return dlk_fail(err, DLK_ECONFLICT, "object 'gs://%s/%s' was changed "
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
    return dlk_fail(err, code, "cannot %s 'gs://%s/%s': HTTP %ld%s%s%s%s%s",
                    verb, s->bucket, okey, r->status, msg[0] ? " (" : "", msg,
                    msg[0] ? ")" : "", tries, hint);
}

static bool ok2xx(const s3_req *r)
{
    return r->status >= 200 && r->status < 300;
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

/* An object resource's size, generation and update time into info. */
static dlk_status parse_object(const gcs_store *s, const char *okey,
                               const dlk_buf *body, dlk_obj_info *info,
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
        return dlk_fail(err, DLK_ENET, "cannot read the metadata of "
                        "'gs://%s/%s': the answer is not an object resource",
                        s->bucket, okey);
    return DLK_OK;
}

/* ---- head and get ----------------------------------------------------- */

static dlk_status do_head(gcs_store *s, const char *okey, dlk_obj_info *info,
                          dlk_error *err)
{
    dlk_buf url, body;
    dlk_buf_init(&body);
    dlk_status rc = gcs_object_url(s, okey, NULL, &url, err);
    if (rc)
        return rc;
    s3_req r = {0};
    r.method = "GET";
    r.url = (const char *)url.data;
    r.out = &body;
    r.max = META_MAX;
    rc = gcs_run(s, &r, err);
    if (!rc && !ok2xx(&r))
        rc = gcs_fail(s, &r, "stat", okey, DLK_PUT_ALWAYS, err);
    if (!rc)
        rc = parse_object(s, okey, &body, info, err);
    s3_req_fini(&r);
    dlk_buf_free(&url);
    dlk_buf_free(&body);
    return rc;
}

static dlk_status gcs_head(dlk_store *st, const char *key, dlk_obj_info *info,
                           dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    char *okey = object_key(s, key);
    if (!okey)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    dlk_status rc = do_head(s, okey, info, err);
    free(okey);
    return rc;
}

static dlk_status short_object(const gcs_store *s, const char *okey,
                               uint64_t off, uint64_t len, uint64_t size,
                               dlk_error *err)
{
    if (size == UINT64_MAX)
        return dlk_fail(err, DLK_ECORRUPT, "short object 'gs://%s/%s': "
                        "range %llu+%llu past its end", s->bucket, okey,
                        (unsigned long long)off, (unsigned long long)len);
    return dlk_fail(err, DLK_ECORRUPT, "short object 'gs://%s/%s': range "
                    "%llu+%llu past its %llu bytes", s->bucket, okey,
                    (unsigned long long)off, (unsigned long long)len,
                    (unsigned long long)size);
}

/* What a GET of bytes [off, off+len) of okey answered, into a status and
 * info; out is cut back to `before` when it failed. */
static dlk_status get_answer(const gcs_store *s, const char *okey,
                             const s3_req *r, uint64_t off, uint64_t len,
                             uint64_t max, size_t before, dlk_buf *out,
                             dlk_obj_info *info, dlk_error *err)
{
    bool ranged = off > 0 || len != UINT64_MAX;
    dlk_status rc = DLK_OK;
    if (r->over_limit)
        rc = r->content_length != UINT64_MAX
            ? dlk_fail(err, DLK_ELIMIT, "object 'gs://%s/%s' is %llu bytes, "
                       "over the limit of %llu", s->bucket, okey,
                       (unsigned long long)r->content_length,
                       (unsigned long long)max)
            : dlk_fail(err, DLK_ELIMIT, "object 'gs://%s/%s' is over the "
                       "limit of %llu bytes", s->bucket, okey,
                       (unsigned long long)max);
    else if (r->status == 416)
        rc = short_object(s, okey, off, len, r->total_size, err);
    else if (!ok2xx(r))
        rc = gcs_fail(s, r, "read", okey, DLK_PUT_ALWAYS, err);
    else if (ranged && r->status != 206)
        rc = dlk_fail(err, DLK_ENET, "cannot read 'gs://%s/%s': the server "
                      "answered a range request with HTTP %ld", s->bucket,
                      okey, r->status);
    else if (len != UINT64_MAX && out->len - before != len)
        rc = short_object(s, okey, off, len, r->total_size, err);
    if (!rc && info) {
        info->size = ranged ? r->total_size : out->len - before;
        info->mtime = s3_req_mtime(r);
        snprintf(info->etag, sizeof info->etag, "%.*s", DLK_ETAG_MAX - 1,
                 r->want_value);
    }
    if (rc)
        out->len = before;
    return rc;
}

static dlk_status do_get(gcs_store *s, const char *okey, uint64_t off,
                         uint64_t len, uint64_t max, dlk_buf *out,
                         dlk_obj_info *info, dlk_error *err)
{
    if (len == 0) {   /* no bytes: only the range against the size */
        dlk_obj_info oi;
        dlk_status rc = do_head(s, okey, &oi, err);
        if (!rc && off > oi.size)
            rc = short_object(s, okey, off, len, oi.size, err);
        if (!rc && info)
            *info = oi;
        return rc;
    }
    bool ranged = off > 0 || len != UINT64_MAX;
    char range[80];
    if (len == UINT64_MAX)
        snprintf(range, sizeof range, "Range: bytes=%llu-",
                 (unsigned long long)off);
    else
        snprintf(range, sizeof range, "Range: bytes=%llu-%llu",
                 (unsigned long long)off, (unsigned long long)(off + len - 1));
    struct curl_slist *h = NULL;
    if (ranged && !(h = curl_slist_append(NULL, range)))
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    dlk_buf url;
    dlk_status rc = gcs_object_url(s, okey, "alt=media", &url, err);
    if (rc) {
        curl_slist_free_all(h);
        return rc;
    }
    size_t before = out->len;
    s3_req r = {0};
    r.method = "GET";
    r.url = (const char *)url.data;
    r.headers = h;
    r.out = out;
    r.max = max;
    r.want_header = "x-goog-generation";
    rc = gcs_run(s, &r, err);
    if (!rc)
        rc = get_answer(s, okey, &r, off, len, max, before, out, info, err);
    s3_req_fini(&r);
    curl_slist_free_all(h);
    dlk_buf_free(&url);
    return rc;
}

static dlk_status gcs_get(dlk_store *st, const char *key, uint64_t off,
                          uint64_t len, uint64_t max, dlk_buf *out,
                          dlk_obj_info *info, dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    char *okey = object_key(s, key);
    if (!okey)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    dlk_status rc = do_get(s, okey, off, len, max, out, info, err);
    free(okey);
    return rc;
}

/* ---- many GETs at once ------------------------------------------------ */

/* One whole-object GET of get_each or get_start: its request (first, so
 * that on_finish's request is the pending), and what the request points
 * at until it finishes. */
typedef struct pending {
    s3_req r;
    gcs_store *s;
    char *okey;
    dlk_buf url;
    struct curl_slist *headers;
    size_t before;
    dlk_get_req *q;
    bool sent;
    void (*done)(void *ud, dlk_get_req *q);  /* get_start's */
    void *ud;
} pending;

/* Set up pg's request for q (pg zeroed); false, q->rc set, when it
 * cannot be sent.  The token is taken here, in the caller's thread: an
 * exchange cannot run on the engine's. */
static bool pending_init(gcs_store *s, pending *pg, dlk_get_req *q)
{
    pg->s = s;
    pg->q = q;
    dlk_buf_init(&pg->url);
    if (q->rc)
        return false; /* refused before (a bad key) */
    if (!(pg->okey = object_key(s, q->key))) {
        q->rc = dlk_fail(&q->err, DLK_ENOMEM, "out of memory");
        return false;
    }
    if ((q->rc = gcs_object_url(s, pg->okey, "alt=media", &pg->url,
                                &q->err)) ||
        (q->rc = gcs_auth_header(s->auth, &pg->headers, &q->err)))
        return false;
    pg->before = q->out->len;
    pg->r.method = "GET";
    pg->r.url = (const char *)pg->url.data;
    pg->r.headers = pg->headers;
    pg->r.out = q->out;
    pg->r.max = q->max;
    pg->r.want_header = "x-goog-generation";
    pg->sent = true;
    return true;
}

static void pending_finish(pending *pg)
{
    dlk_get_req *q = pg->q;
    if (pg->sent) {
        q->rc = get_answer(pg->s, pg->okey, &pg->r, 0, UINT64_MAX, q->max,
                           pg->before, q->out, q->info, &q->err);
        s3_req_fini(&pg->r);
    }
    curl_slist_free_all(pg->headers);
    dlk_buf_free(&pg->url);
    free(pg->okey);
}

/* Whole-object GETs all in flight at once on the engine, with no thread
 * each.  A request whose rc is set already is left alone. */
static void gcs_get_each(dlk_store *st, dlk_get_req *reqs, size_t n,
                         void (*done)(void *ud, size_t i), void *ud)
{
    gcs_store *s = (gcs_store *)st;
    pending *pg = calloc(n ? n : 1, sizeof *pg);
    for (size_t i = 0; !pg && i < n; i++) {
        if (!reqs[i].rc)
            reqs[i].rc = gcs_get(st, reqs[i].key, 0, UINT64_MAX, reqs[i].max,
                                 reqs[i].out, reqs[i].info, &reqs[i].err);
        if (done)
            done(ud, i);
    }
    if (!pg)
        return;
    for (size_t i = 0; i < n; i++)
        if (pending_init(s, &pg[i], &reqs[i]))
            s3_submit(s->eng, &pg[i].r);
    for (size_t i = 0; i < n; i++) {
        if (pg[i].sent)
            s3_wait(s->eng, &pg[i].r);
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

/* get_each without waiting: each request's done is called on the
 * engine's thread as it finishes (or here, when it cannot be sent), so
 * that an ingest from gs:// needs no fetch thread a GET. */
static void gcs_get_start(dlk_store *st, dlk_get_req **reqs, size_t n,
                          void (*done)(void *ud, dlk_get_req *q), void *ud)
{
    gcs_store *s = (gcs_store *)st;
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
        if (!pending_init(s, pg, q)) {
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
            s3_submit_all(s->eng, batch, nb); /* one wake-up for them */
            nb = 0;
        }
    }
    if (nb)
        s3_submit_all(s->eng, batch, nb);
}

static int gcs_want_inflight(dlk_store *st, int n)
{
    gcs_store *s = (gcs_store *)st;
    if (n > 0 && n <= 4096)
        s3_engine_raise_max(s->eng, n);
    return s3_engine_max(s->eng);
}

/* ---- put -------------------------------------------------------------- */

/* "ifGenerationMatch=0" (create only), "=N" (replace generation N) or "" */
static void precondition(dlk_put_mode mode, const char *etag, char *q,
                         size_t cap)
{
    if (mode == DLK_PUT_IF_ABSENT)
        snprintf(q, cap, "ifGenerationMatch=0");
    else if (mode == DLK_PUT_IF_MATCH)
        snprintf(q, cap, "ifGenerationMatch=%s", etag ? etag : "");
    else
        q[0] = '\0';
}

/* {"name": okey, "contentType": ...} */
static char *metadata(const char *okey)
{
    json_t *j = json_pack("{s:s, s:s}", "name", okey, "contentType",
                          "application/octet-stream");
    char *m = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return m;
}

/* The answer's generation and size into info (when asked for). */
static dlk_status put_answer(gcs_store *s, const char *okey,
                             const dlk_buf *resp, size_t len,
                             dlk_obj_info *info, dlk_error *err)
{
    dlk_obj_info oi = {0};
    dlk_status rc = parse_object(s, okey, resp, &oi, err);
    if (!rc && oi.size != len)
        rc = dlk_fail(err, DLK_ENET, "cannot write 'gs://%s/%s': %zu bytes "
                      "sent, %llu stored", s->bucket, okey, len,
                      (unsigned long long)oi.size);
    if (!rc && info) {
        *info = oi;
        if (!info->mtime)
            info->mtime = (int64_t)time(NULL);
    }
    return rc;
}

/* One multipart/related upload: the metadata and the bytes together. */
static dlk_status put_multipart(gcs_store *s, const char *okey,
                                const struct iovec *v, int n, size_t len,
                                dlk_put_mode mode, const char *etag,
                                dlk_obj_info *info, dlk_error *err)
{
    char *meta = metadata(okey);
    if (!meta)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    /* a random boundary; one found in the bytes is drawn again */
    char bnd[40];
    dlk_buf body, resp, url;
    dlk_buf_init(&body);
    dlk_buf_init(&resp);
    dlk_buf_init(&url);
    dlk_status rc = DLK_OK;
    for (int tries = 0;; tries++) {
        uint8_t rnd[12] = {0};
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            memcpy(rnd, &len, sizeof len < sizeof rnd ? sizeof len
                                                      : sizeof rnd);
        snprintf(bnd, sizeof bnd, "dlk-%02x%02x%02x%02x%02x%02x%02x%02x%02x"
                 "%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
                 rnd[5], rnd[6], rnd[7], rnd[8], rnd[9], rnd[10], rnd[11]);
        bool found = false;
        for (int i = 0; i < n && !found; i++)
            found = v[i].iov_len &&
                    memmem(v[i].iov_base, v[i].iov_len, bnd, strlen(bnd));
        if (!found || tries > 8)
            break;
    }
    char head[512];
    int hn = snprintf(head, sizeof head, "--%s\r\nContent-Type: "
                      "application/json; charset=UTF-8\r\n\r\n", bnd);
    rc = dlk_buf_reserve(&body, len + strlen(meta) + 2 * (size_t)hn + 64,
                         err);
    if (!rc)
        rc = dlk_buf_append(&body, head, (size_t)hn, err);
    if (!rc)
        rc = s3_str_append(&body, meta, err);
    hn = snprintf(head, sizeof head, "\r\n--%s\r\nContent-Type: "
                  "application/octet-stream\r\n\r\n", bnd);
    if (!rc)
        rc = dlk_buf_append(&body, head, (size_t)hn, err);
    for (int i = 0; !rc && i < n; i++)
        if (v[i].iov_len)
            rc = dlk_buf_append(&body, v[i].iov_base, v[i].iov_len, err);
    hn = snprintf(head, sizeof head, "\r\n--%s--\r\n", bnd);
    if (!rc)
        rc = dlk_buf_append(&body, head, (size_t)hn, err);
    char q[80], query[160];
    precondition(mode, etag, q, sizeof q);
    snprintf(query, sizeof query, "uploadType=multipart%s%s", q[0] ? "&" : "",
             q);
    if (!rc)
        rc = make_url(s, "/upload/storage/v1", NULL, query, &url, err);
    char ct[96];
    snprintf(ct, sizeof ct, "Content-Type: multipart/related; boundary=%s",
             bnd);
    struct curl_slist *h = rc ? NULL : curl_slist_append(NULL, ct);
    if (!rc && !h)
        rc = dlk_fail(err, DLK_ENOMEM, "out of memory");
    s3_req r = {0};
    if (!rc) {
        r.method = "POST";
        r.url = (const char *)url.data;
        r.headers = h;
        r.body = body.data;
        r.body_len = body.len;
        r.out = &resp;
        r.max = META_MAX;
        rc = gcs_run(s, &r, err);
    }
    if (!rc && !ok2xx(&r))
        rc = gcs_fail(s, &r, "write", okey, mode, err);
    if (!rc)
        rc = put_answer(s, okey, &resp, len, info, err);
    s3_req_fini(&r);
    curl_slist_free_all(h);
    free(meta);
    dlk_buf_free(&body);
    dlk_buf_free(&resp);
    dlk_buf_free(&url);
    return rc;
}

/* The bytes [from, to) of the parts, gathered into b. */
static dlk_status gather(const struct iovec *v, int n, uint64_t from,
                         uint64_t to, dlk_buf *b, dlk_error *err)
{
    b->len = 0;
    uint64_t at = 0;
    for (int i = 0; i < n && at < to; i++) {
        uint64_t a = at, z = at + v[i].iov_len;
        at = z;
        if (z <= from)
            continue;
        uint64_t s = a < from ? from : a, e = z < to ? z : to;
        dlk_status rc = dlk_buf_append(b, (const uint8_t *)v[i].iov_base +
                                       (s - a), (size_t)(e - s), err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

/* Start a resumable upload: the URL its pieces go to into upload. */
static dlk_status upload_start(gcs_store *s, const char *okey, size_t len,
                               dlk_put_mode mode, char *upload, size_t cap,
                               dlk_error *err)
{
    char *meta = metadata(okey);
    if (!meta)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    char q[80], query[160], total[64];
    precondition(mode, NULL, q, sizeof q);
    snprintf(query, sizeof query, "uploadType=resumable%s%s", q[0] ? "&" : "",
             q);
    snprintf(total, sizeof total, "X-Upload-Content-Length: %zu", len);
    dlk_buf url;
    dlk_status rc = make_url(s, "/upload/storage/v1", NULL, query, &url, err);
    struct curl_slist *h = NULL, *t;
    if (!rc && (!(h = curl_slist_append(NULL, "Content-Type: application/"
                                        "json; charset=UTF-8")) ||
                !(t = curl_slist_append(h, total)) || !(h = t)))
        rc = dlk_fail(err, DLK_ENOMEM, "out of memory");
    s3_req r = {0};
    if (!rc) {
        r.method = "POST";
        r.url = (const char *)url.data;
        r.headers = h;
        r.body = (const uint8_t *)meta;
        r.body_len = strlen(meta);
        r.want_header = "location";
        rc = gcs_run(s, &r, err);
        dlk_buf_free(&url);
    }
    if (!rc && !ok2xx(&r))
        rc = gcs_fail(s, &r, "start the upload of", okey, mode, err);
    if (!rc && (!r.want_value[0] || strlen(r.want_value) >= cap))
        rc = dlk_fail(err, DLK_ENET, "cannot start the upload of "
                      "'gs://%s/%s': no upload URL in the answer", s->bucket,
                      okey);
    if (!rc)
        snprintf(upload, cap, "%s", r.want_value);
    s3_req_fini(&r);
    curl_slist_free_all(h);
    free(meta);
    return rc;
}

/* Send the pieces of one upload in order, each once (attempts_max 1):
 * *again when one failed in a way worth a new upload. */
static dlk_status send_pieces(gcs_store *s, const char *okey,
                              const char *upload, const struct iovec *v,
                              int n, size_t len, dlk_put_mode mode,
                              dlk_buf *piece, dlk_buf *resp, bool *again,
                              dlk_error *err)
{
    *again = false;
    uint64_t at = 0;
    for (;;) {
        uint64_t end = at + s->piece_size;
        if (end > len)
            end = len;
        dlk_status rc = gather(v, n, at, end, piece, err);
        if (rc)
            return rc;
        char cr[96];
        snprintf(cr, sizeof cr, "Content-Range: bytes %llu-%llu/%zu",
                 (unsigned long long)at, (unsigned long long)end - 1, len);
        struct curl_slist *ph = curl_slist_append(NULL, cr);
        if (!ph)
            return dlk_fail(err, DLK_ENOMEM, "out of memory");
        s3_req r = {0};
        r.method = "PUT";
        r.url = upload;
        r.headers = ph;
        r.body = piece->data;
        r.body_len = piece->len;
        r.out = resp;
        r.max = META_MAX;
        r.attempts_max = 1;
        r.want_header = "range";
        resp->len = 0;
        rc = gcs_run(s, &r, err);
        curl_slist_free_all(ph);
        unsigned long long a, b;
        bool range = r.want_value[0] &&
                     sscanf(r.want_value, "bytes=%llu-%llu", &a, &b) == 2;
        if (!rc && ok2xx(&r)) {
            s3_req_fini(&r);
            return DLK_OK;
        }
        if (!rc && r.status == 308 && range && b + 1 == end && end < len) {
            at = end;
        } else if (!rc) {
            *again = r.status == 0 || r.status == 308 || r.status == 404 ||
                     r.status == 408 || r.status == 410 || r.status == 429 ||
                     r.status >= 500 || r.short_body;
            rc = r.status == 308
                ? dlk_fail(err, DLK_ENET, "cannot write 'gs://%s/%s': the "
                           "server holds %s of %llu bytes sent", s->bucket,
                           okey, range ? r.want_value : "none",
                           (unsigned long long)end)
                : gcs_fail(s, &r, "write", okey, mode, err);
        }
        s3_req_fini(&r);
        if (rc)
            return rc;
    }
}

/* A resumable upload: its URL, then its pieces in order.  A piece that
 * fails starts the upload again under a new URL, rather than asking the
 * server what it holds (an empty PUT, a status query) and resending from
 * there as GCS allows: fake-gcs-server finalises the object at such a query with
 * what it has, and appends a piece sent twice twice. */
static dlk_status put_resumable(gcs_store *s, const char *okey,
                                const struct iovec *v, int n, size_t len,
                                dlk_put_mode mode, dlk_obj_info *info,
                                dlk_error *err)
{
    dlk_buf resp, piece;
    dlk_buf_init(&resp);
    dlk_buf_init(&piece);
    dlk_status rc;
    for (int attempt = 1;; attempt++) {
        char upload[1024];
        bool again = false;
        rc = upload_start(s, okey, len, mode, upload, sizeof upload, err);
        if (!rc)
            rc = send_pieces(s, okey, upload, v, n, len, mode, &piece,
                             &resp, &again, err);
        if (!rc || !again || attempt >= s->max_attempts)
            break;
        /* back off as the engine does, then a new upload */
        unsigned ms = 100u << (attempt < 6 ? attempt : 6);
        uint8_t j = 128;
        if (getrandom(&j, 1, 0) != 1)
            j = 128;
        usleep((useconds_t)(ms / 2 + ms * j / 512) * 1000u);
        dlk_error_clear(err);
    }
    if (!rc)
        rc = put_answer(s, okey, &resp, len, info, err);
    dlk_buf_free(&resp);
    dlk_buf_free(&piece);
    return rc;
}

static dlk_status gcs_putv(dlk_store *st, const char *key,
                           const struct iovec *v, int n, dlk_put_mode mode,
                           const char *etag, dlk_obj_info *info,
                           dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    /* a generation is a decimal number; anything else would reach the
     * query string */
    if (mode == DLK_PUT_IF_MATCH &&
        (!etag || !*etag || strlen(etag) > 20 ||
         strspn(etag, "0123456789") != strlen(etag)))
        return dlk_fail(err, DLK_EINVAL, "invalid generation for a "
                        "conditional put of '%s'", key);
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += v[i].iov_len;
    char *okey = object_key(s, key);
    if (!okey)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    /* A replacement is one multipart upload whatever its size: the
     * emulator ignores ifGenerationMatch on a resumable upload, and a
     * replacement that overwrote another writer's would lose its data. */
    bool resumable = len >= s->resumable_threshold &&
                     mode != DLK_PUT_IF_MATCH;
    dlk_status rc = resumable
        ? put_resumable(s, okey, v, n, len, mode, info, err)
        : put_multipart(s, okey, v, n, len, mode, etag, info, err);
    free(okey);
    return rc;
}

static dlk_status gcs_put(dlk_store *st, const char *key, const void *data,
                          size_t len, dlk_put_mode mode, const char *etag,
                          dlk_obj_info *info, dlk_error *err)
{
    struct iovec v = {(void *)data, len};
    return gcs_putv(st, key, &v, 1, mode, etag, info, err);
}

/* ---- delete, free, open ----------------------------------------------- */

static dlk_status gcs_del(dlk_store *st, const char *key, dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    char *okey = object_key(s, key);
    if (!okey)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    dlk_buf url;
    dlk_status rc = gcs_object_url(s, okey, NULL, &url, err);
    if (!rc) {
        s3_req r = {0};
        r.method = "DELETE";
        r.url = (const char *)url.data;
        rc = gcs_run(s, &r, err);
        /* a 404 after a retry is the first attempt's success */
        if (!rc && !ok2xx(&r) && !(r.status == 404 && r.attempts > 1))
            rc = gcs_fail(s, &r, "delete", okey, DLK_PUT_ALWAYS, err);
        s3_req_fini(&r);
        dlk_buf_free(&url);
    }
    free(okey);
    return rc;
}

static void gcs_free(dlk_store *st)
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

static const dlk_store_ops gcs_ops = {
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
        return dlk_fail(err, DLK_EINVAL, "bad gcs endpoint '%.200s' "
                        "(host:port, or an http:// or https:// url)", ep);
    size_t n = strlen(ep) + 8;
    char *e = malloc(n);
    if (!e)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
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
    s3_config cfg;
    dlk_status rc = s3_config_from(&cfg, &eo, err);
    if (rc)
        return rc;
    s->max_attempts = cfg.max_attempts;
    rc = s3_engine_new(&cfg, &s->eng, err);
    s3_config_free(&cfg);
    return rc;
}

dlk_status dlk_store_open_gcs(const char *url, const dlk_store_options *o,
                              dlk_store **out, dlk_error *err)
{
    static const dlk_store_options none;
    *out = NULL;
    if (!o)
        o = &none;
    if (strncmp(url, "gs://", 5) != 0)
        return dlk_fail(err, DLK_EINVAL, "not a gs url '%.200s'", url);
    const char *b = url + 5;
    const char *slash = strchr(b, '/');
    size_t bn = slash ? (size_t)(slash - b) : strlen(b);
    if (!bucket_valid(b, bn))
        return dlk_fail(err, DLK_EINVAL, "invalid bucket name in '%.200s'",
                        url);
    if (o->gcs_piece_size % PIECE_QUANTUM || o->gcs_piece_size > PIECE_MAX)
        return dlk_fail(err, DLK_EINVAL, "store option gcs_piece_size must "
                        "be a multiple of 256 KiB up to 1 GiB, not %llu",
                        (unsigned long long)o->gcs_piece_size);
    gcs_store *s = calloc(1, sizeof *s);
    if (!s)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    s->base.ops = &gcs_ops;
    s->bucket = strndup(b, bn);
    const char *p = slash ? slash + 1 : "";
    while (*p == '/')
        p++;
    s->prefix = strdup(p);
    s->base.url = strdup(url);
    if (!s->bucket || !s->prefix || !s->base.url) {
        gcs_free(&s->base);
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    }
    dlk_status rc = endpoint_of(o, &s->endpoint, err);
    if (rc) {
        gcs_free(&s->base);
        return rc;
    }
    size_t n = strlen(s->prefix);
    while (n && s->prefix[n - 1] == '/')
        s->prefix[--n] = '\0';
    if (n && !dlk_key_valid(s->prefix)) {
        gcs_free(&s->base);
        return dlk_fail(err, DLK_EINVAL, "invalid prefix in '%.200s'", url);
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
