/* s3.c - the store on S3 and S3-compatible object storage.
 *
 * The root is s3://BUCKET/PREFIX; a key K is the object PREFIX/K.  Each
 * operation builds one request (or, for large puts, a multipart upload)
 * and hands it to the store's engine (s3_http.c), which signs, sends,
 * retries and bounds concurrency.  This file turns answers into dlk
 * statuses and messages naming the object, the HTTP status, the S3 error
 * code and the request id. */
#include "s3_store.h"
#include "http_store.h"
#include "util/error.h"
#include "util/keys.h"
#include "util/text.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PART_WINDOW 16        /* parts of one upload in flight at most */
#define MAX_PARTS 10000       /* S3's limit */
#define SINGLE_PUT_MAX (5ull << 30) /* S3's limit on one PUT */

#define BULK_ENGINES_MAX 16
#define READ_ENGINES_MAX 16
/* A read engine receives in reads of this size: a chunk's bytes come in
 * a few large copies instead of many 64 KiB ones. */
#define READ_RECV_BUFFER (1L << 20)
/* The first READ_RAMP_PARTS x read_part_size bytes of a store's sized
 * reads (the first batch's chunks: 256 MiB at the default 8 MiB) go in
 * ranges of a READ_RAMP_DIV-th of read_part_size, at least
 * READ_RAMP_MIN: a range's transfer at one connection's rate (8 MiB at
 * ~100 MB/s: 84 ms) is on the first batch's path, and more, smaller
 * ranges in flight shorten it; past them the configured size keeps the
 * requests an epoch costs (through 25 ms each way and 100 MB/s a
 * connection, a 3-epoch run's GPU busy went from 91.4-93.9% to
 * 94.1-96.2% on two H200 hosts, docs/benchmarks.md). */
#define READ_RAMP_PARTS 32
#define READ_RAMP_DIV 8
#define READ_RAMP_MIN ((uint64_t)64 << 10)

typedef struct s3_store {
    Dlk_store base;
    s3_config cfg;
    s3_engine *eng;
    /* Bulk GETs (get_start: an ingest's source; a dataset's own few
     * reads stay on eng) spread over engines of their own, each with its
     * I/O thread, made at the first batch: one thread's loop costs ~66 us
     * a GET (16-core host), so alone it caps the rate near 15,000 GETs/s
     * and fewer where it shares a core with decoders.  nbulk 1: they go
     * to eng. */
    pthread_mutex_t bulk_mu;
    s3_engine *bulk[BULK_ENGINES_MAX];
    int nbulk;
    bool bulk_made;
    int want;           /* in flight asked for (want_inflight), 0: none */
    unsigned rr;        /* the next batch's engine */
    /* Sized reads (a dataset's chunks, in ranges) on engines of their
     * own, made at the first such read (under bulk_mu); nrd 0: on eng. */
    s3_engine *rd[READ_ENGINES_MAX];
    int nrd;
    bool rd_made;
    unsigned rd_rr;
    char *bucket;
    char *prefix;       /* "" or "a/b": no leading or trailing '/' */
    char *base_url;     /* objects are base_url "/" key */
    /* The server compares If-Match with the ETag as it stores it, without
     * the quotes it sends (Ceph RGW): learnt from the first quoted
     * If-Match refused whose unquoted retry was taken (see if_match_retry) */
    _Atomic bool if_match_bare;
    _Atomic uint64_t sized_bytes; /* asked for by sized reads so far */
} s3_store;

/* ---- names and urls ------------------------------------------------- */

/* Percent-encode s into b: every byte but the unreserved ones, and '/'
 * too unless keep_slash (object paths keep it; query values do not). */
static dlk_status enc_append(Dlk_buf *b, const char *s, bool keep_slash,
                             dlk_error *err)
{
    static const char hex[] = "0123456789ABCDEF";
    dlk_status rc = Dlk_buf_reserve(b, strlen(s) * 3 + 1, err);
    if (rc)
        return rc;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
            c == '~' || (keep_slash && c == '/')) {
            b->data[b->len++] = (uint8_t)c;
        } else {
            b->data[b->len++] = '%';
            b->data[b->len++] = (uint8_t)hex[c >> 4];
            b->data[b->len++] = (uint8_t)hex[c & 15];
        }
    }
    return DLK_OK;
}

static dlk_status str_append(Dlk_buf *b, const char *s, dlk_error *err)
{
    return Dlk_buf_append(b, s, strlen(s), err);
}

static dlk_status terminate(Dlk_buf *b, dlk_error *err)
{
    dlk_status rc = Dlk_buf_append(b, "", 1, err);
    if (!rc)
        b->len--;
    return rc;
}

/* The object key of store key `key` ("" for the root itself). */
static char *object_key(const s3_store *s, const char *key)
{
    size_t pn = strlen(s->prefix), kn = strlen(key);
    char *o = malloc(pn + kn + 2);
    if (!o)
        return NULL;
    if (pn && kn)
        snprintf(o, pn + kn + 2, "%s/%s", s->prefix, key);
    else
        snprintf(o, pn + kn + 2, "%s", pn ? s->prefix : key);
    return o;
}

/* base_url "/" enc(okey) ["?" query]; query already canonical (sorted,
 * encoded), because libcurl 7.88 signs it as written. */
static dlk_status make_url(const s3_store *s, const char *okey,
                           const char *query, Dlk_buf *url, dlk_error *err)
{
    Dlk_buf_init(url);
    dlk_status rc = str_append(url, s->base_url, err);
    if (!rc)
        rc = str_append(url, "/", err);
    if (!rc)
        rc = enc_append(url, okey, true, err);
    if (!rc && query && *query) {
        rc = str_append(url, "?", err);
        if (!rc)
            rc = str_append(url, query, err);
    }
    if (!rc)
        rc = terminate(url, err);
    if (rc)
        Dlk_buf_free(url);
    return rc;
}

/* ---- answers to statuses -------------------------------------------- */

static bool auth_code(const char *code)
{
    static const char *const codes[] = {
        "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
        "ExpiredToken", "InvalidToken", "TokenRefreshRequired",
        "AuthorizationHeaderMalformed", "AllAccessDisabled",
    };
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
        if (strcmp(code, codes[i]) == 0)
            return true;
    return false;
}

/* The failure of request r on object okey, doing `verb`: status, error
 * code, request id, curl's reason (see req_fail). */
static dlk_status req_fail_text(const s3_store *s, const s3_req *r,
                                const char *verb, const char *okey,
                                Dlk_put_mode mode, dlk_error *err)
{
    char tries[48] = "";
    if (r->attempts > 1)
        snprintf(tries, sizeof tries, ", after %d attempts", r->attempts);
    if (r->oom)
        return Dlk_fail(err, DLK_ENOMEM, "cannot %s 's3://%s/%s': out of "
                        "memory", verb, s->bucket, okey);
    if (r->canceled)
        return Dlk_fail(err, DLK_ECANCELED, "cannot %s 's3://%s/%s': "
                        "canceled", verb, s->bucket, okey);
    if (r->status == 0)
        return Dlk_fail(err, DLK_ENET, "cannot %s 's3://%s/%s': %s%s", verb,
                        s->bucket, okey, r->curl_msg, tries);
    s3_error_info ei;
    s3_xml_error(r->errbody.data, r->errbody.len, &ei);
    const char *rid = ei.request_id[0] ? ei.request_id : r->request_id;
    if (r->status == 412 && mode == DLK_PUT_IF_ABSENT)
        return Dlk_fail(err, DLK_EEXIST, "object 's3://%s/%s' already "
                        "exists", s->bucket, okey);
    if (r->status == 412 && mode == DLK_PUT_IF_MATCH)
        return Dlk_fail(err, DLK_ECONFLICT, "object 's3://%s/%s' was changed "
                        "by another writer (HTTP 412)", s->bucket, okey);
    if (r->status == 404 && mode == DLK_PUT_IF_MATCH)
        return Dlk_fail(err, DLK_ECONFLICT, "object 's3://%s/%s' vanished "
                        "under a conditional update", s->bucket, okey);
    dlk_status code = DLK_ENET;
    if (r->status == 401 || r->status == 403 || auth_code(ei.code))
        code = DLK_EAUTH;
    else if (r->status == 404)
        code = DLK_ENOTFOUND;
    else if (r->status == 416)
        code = DLK_ECORRUPT;
    if (strcmp(ei.code, "NoSuchBucket") == 0)
        return Dlk_fail(err, DLK_ENOTFOUND, "cannot %s 's3://%s/%s': the "
                        "bucket '%s' does not exist (HTTP %ld NoSuchBucket)",
                        verb, s->bucket, okey, s->bucket, r->status);
    const char *hint = "";
    if (code == DLK_EAUTH && !s->cfg.access_key)
        hint = " (no aws credentials found: request was not signed)";
    return Dlk_fail(err, code, "cannot %s 's3://%s/%s': HTTP %ld%s%s%s%s%s%s",
                    verb, s->bucket, okey, r->status, ei.code[0] ? " " : "",
                    ei.code, rid[0] ? " (request id " : "", rid,
                    rid[0] ? ")" : "", tries[0] ? tries : hint);
}

/* req_fail_text naming no credential: what the server sent back (its
 * code, its request id) is its text, which may quote the request, so the
 * store's key id, secret and session token are redacted from it. */
static dlk_status req_fail(const s3_store *s, const s3_req *r,
                           const char *verb, const char *okey,
                           Dlk_put_mode mode, dlk_error *err)
{
    dlk_status rc = req_fail_text(s, r, verb, okey, mode, err);
    const char *secrets[] = {s->cfg.secret_key, s->cfg.session_token,
                             s->cfg.access_key};
    Dlk_error_redact(err, secrets, 3);
    return rc;
}

/* Run one request on eng; returns its status class, the caller
 * inspects r. */
static dlk_status run_on(s3_store *s, s3_engine *eng, s3_req *r,
                         const char *method, const char *okey,
                         const char *query, dlk_error *err)
{
    Dlk_buf url;
    dlk_status rc = make_url(s, okey, query, &url, err);
    if (rc)
        return rc;
    r->method = method;
    r->url = (const char *)url.data;
    s3_perform(eng, r);
    r->url = NULL;
    Dlk_buf_free(&url);
    return DLK_OK;
}

static dlk_status run(s3_store *s, s3_req *r, const char *method,
                      const char *okey, const char *query, dlk_error *err)
{
    return run_on(s, s->eng, r, method, okey, query, err);
}

/* ---- for the listing (s3_list.c) ------------------------------------ */

const char *s3_store_bucket(const s3_store *s) { return s->bucket; }
const char *s3_store_prefix(const s3_store *s) { return s->prefix; }
s3_engine *s3_store_engine(const s3_store *s) { return s->eng; }
const s3_config *s3_store_config(const s3_store *s) { return &s->cfg; }

dlk_status s3_store_fail(const s3_store *s, const s3_req *r, const char *verb,
                         const char *okey, dlk_error *err)
{
    return req_fail(s, r, verb, okey, DLK_PUT_ALWAYS, err);
}

dlk_status s3_make_url(const s3_store *s, const char *okey, const char *query,
                       Dlk_buf *url, dlk_error *err)
{
    return make_url(s, okey, query, url, err);
}

dlk_status s3_enc_append(Dlk_buf *b, const char *s, bool keep_slash,
                         dlk_error *err)
{
    return enc_append(b, s, keep_slash, err);
}

dlk_status s3_str_append(Dlk_buf *b, const char *s, dlk_error *err)
{
    return str_append(b, s, err);
}

dlk_status s3_terminate(Dlk_buf *b, dlk_error *err)
{
    return terminate(b, err);
}

/* ---- head ----------------------------------------------------------- */

static dlk_status do_head(s3_store *s, const char *okey, Dlk_obj_info *info,
                          dlk_error *err)
{
    s3_req r = {0};
    dlk_status rc = run(s, &r, "HEAD", okey, NULL, err);
    if (!rc && !s3_ok2xx(&r))
        rc = req_fail(s, &r, "stat", okey, DLK_PUT_ALWAYS, err);
    if (!rc && r.content_length == UINT64_MAX)
        rc = Dlk_fail(err, DLK_ENET, "cannot stat 's3://%s/%s': no "
                      "content-length in the answer", s->bucket, okey);
    if (!rc && info) {
        info->size = r.content_length;
        info->mtime = s3_req_mtime(&r);
        snprintf(info->etag, sizeof info->etag, "%s", r.etag);
    }
    s3_req_fini(&r);
    return rc;
}

static dlk_status s3_head(Dlk_store *st, const char *key, Dlk_obj_info *info,
                          dlk_error *err)
{
    s3_store *s = (s3_store *)st;
    char *okey = object_key(s, key);
    if (!okey)
        return Dlk_oom(err);
    dlk_status rc = do_head(s, okey, info, err);
    free(okey);
    return rc;
}

/* ---- get ------------------------------------------------------------ */

static dlk_status who_fail(void *st, const s3_req *r, const char *okey,
                           dlk_error *err)
{
    return req_fail(st, r, "read", okey, DLK_PUT_ALWAYS, err);
}

static dlk_status who_stat(void *st, const char *okey, Dlk_obj_info *info,
                           dlk_error *err)
{
    return do_head(st, okey, info, err);
}

/* okey of s, for what S3 and GCS share of a GET (http_store.c) */
static http_get_who get_who(s3_store *s, const char *okey)
{
    return (http_get_who){.scheme = "s3", .bucket = s->bucket,
                          .okey = okey, .store = s, .fail = who_fail,
                          .stat = who_stat};
}

static dlk_status get_on(s3_store *s, s3_engine *eng, const char *key,
                         uint64_t off, uint64_t len, uint64_t max,
                         Dlk_buf *out, Dlk_obj_info *info, dlk_error *err)
{
    char *okey = object_key(s, key);
    if (!okey)
        return Dlk_oom(err);
    http_get_who w = get_who(s, okey);
    char range[64];
    bool done;
    dlk_status rc = http_get_range(&w, off, len, max, range, sizeof range,
                                   info, &done, err);
    if (rc || done)
        goto out;
    struct curl_slist *hdr = NULL;
    if (range[0] && !(hdr = curl_slist_append(NULL, range))) {
        rc = Dlk_oom(err);
        goto out;
    }
    s3_req r = {0};
    r.headers = hdr;
    r.out = out;
    r.max = max;
    rc = run_on(s, eng, &r, "GET", okey, NULL, err);
    curl_slist_free_all(hdr);
    if (!rc)
        rc = http_get_answer(&w, &r, off, len, max, range[0] != 0, out, info,
                             err);
    s3_req_fini(&r);
out:
    free(okey);
    return rc;
}

static dlk_status s3_get(Dlk_store *st, const char *key, uint64_t off,
                         uint64_t len, uint64_t max, Dlk_buf *out,
                         Dlk_obj_info *info, dlk_error *err)
{
    s3_store *s = (s3_store *)st;
    return get_on(s, s->eng, key, off, len, max, out, info, err);
}

/* Engines for bulk GETs: the s3_io_threads option, or one for every 8 cores,
 * 1 to 4.  Each starts with its share of the in-flight limit and may grow
 * to its share of what was asked (want_inflight). */
static int bulk_count(const s3_store *s)
{
    int n = s->cfg.io_threads;
    if (n <= 0) {
        n = dlk_cpu_count() / 8;
        n = n < 1 ? 1 : n > 4 ? 4 : n;
    }
    return n > BULK_ENGINES_MAX ? BULK_ENGINES_MAX : n;
}

static int s3_io_threads(Dlk_store *st)
{
    return bulk_count((s3_store *)st);
}

static int share(int total, int n)
{
    int v = (total + n - 1) / n;
    return v < 1 ? 1 : v;
}

/* The engine for a batch of GETs (bulk_mu taken only until the engines
 * are made; a failure to make them leaves the batches on eng). */
static s3_engine *bulk_engine(s3_store *s)
{
    if (!__atomic_load_n(&s->bulk_made, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&s->bulk_mu);
        if (!s->bulk_made) {
            int n = bulk_count(s);
            s3_config c = s->cfg; /* engines copy what they keep */
            c.max_inflight = share(s->cfg.max_inflight, n);
            int made = 0;
            for (int i = 0; n > 1 && i < n; i++) {
                dlk_error e;
                if (s3_engine_new(&c, &s->bulk[i], &e))
                    break;
                made++;
            }
            if (made < n) { /* all or none (n 1: none) */
                for (int i = 0; i < made; i++)
                    s3_engine_free(s->bulk[i]);
                made = 0;
            }
            for (int i = 0; i < made && s->want > 0; i++)
                s3_engine_raise_max(s->bulk[i], share(s->want, made));
            s->nbulk = made;
            __atomic_store_n(&s->bulk_made, true, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&s->bulk_mu);
    }
    if (s->nbulk <= 1)
        return s->eng;
    unsigned i = __atomic_fetch_add(&s->rr, 1, __ATOMIC_RELAXED);
    return s->bulk[i % (unsigned)s->nbulk];
}

/* Engines for sized reads: the s3_read_threads option, or half the cores, at
 * most READ_ENGINES_MAX.  Each engine's thread copies every byte it
 * receives out of the socket, about 2 GB/s a thread, so a store that
 * serves 10 GB/s or more needs several (docs/benchmarks.md#s3-throughput:
 * 2.5 GB/s on one engine, 14.5 on eight, 16-core host).  Each has the
 * configured in-flight limit, or its share of the user's. */
static s3_engine *read_engine(s3_store *s)
{
    if (!__atomic_load_n(&s->rd_made, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&s->bulk_mu);
        if (!s->rd_made) {
            int n = s->cfg.read_threads;
            if (n <= 0)
                n = dlk_cpu_count() / 2;
            n = n < 1 ? 1 : n > READ_ENGINES_MAX ? READ_ENGINES_MAX : n;
            s3_config c = s->cfg; /* engines copy what they keep */
            c.recv_buffer = READ_RECV_BUFFER;
            if (s->cfg.max_inflight_set)
                c.max_inflight = share(s->cfg.max_inflight, n);
            for (int i = 0; i < n; i++) {
                dlk_error e;
                if (s3_engine_new(&c, &s->rd[i], &e))
                    break;
                s->nrd++;
            }
            __atomic_store_n(&s->rd_made, true, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&s->bulk_mu);
    }
    if (s->nrd == 0)
        return s->eng;
    unsigned i = __atomic_fetch_add(&s->rd_rr, 1, __ATOMIC_RELAXED);
    return s->rd[i % (unsigned)s->nrd];
}


/* One range of a sized read: its request, the slice of the caller's
 * buffer it fills, and where that slice starts in the object. */
typedef struct read_part {
    s3_req r;
    s3_engine *eng;
    Dlk_buf slice;
    struct curl_slist *hdr;
    uint64_t off, len;
} read_part;

/* A slice of a ranged read: bytes [off, off+len) of the object into dst. */
typedef struct read_slice {
    uint64_t off, len;
    uint8_t *dst;
} read_slice;

/* The slices of an object known to be `size` bytes, all in flight at
 * once and spread over the read engines.  Each must come back as a 206
 * of the expected size with the same ETag; *whole is set where one does
 * not (a server that ignores Range, an object of another size, one
 * replaced while read), and the caller reads again in one GET. */
static dlk_status read_slices(s3_store *s, const char *key, uint64_t size,
                              const read_slice *sl, size_t n, bool *whole,
                              Dlk_obj_info *info, unsigned *requests,
                              dlk_error *err)
{
    *whole = false;
    char *okey = object_key(s, key);
    read_part *p = calloc(n ? n : 1, sizeof *p);
    Dlk_buf url;
    Dlk_buf_init(&url);
    dlk_status rc = DLK_OK;
    if (!okey || !p || (rc = make_url(s, okey, NULL, &url, err))) {
        free(okey);
        free(p);
        return rc ? rc : Dlk_oom(err);
    }
    size_t sent = 0;
    for (; sent < n; sent++) {
        read_part *q = &p[sent];
        q->off = sl[sent].off;
        q->len = sl[sent].len;
        char range[64];
        snprintf(range, sizeof range, "Range: bytes=%llu-%llu",
                 (unsigned long long)q->off,
                 (unsigned long long)(q->off + q->len - 1));
        if (!(q->hdr = curl_slist_append(NULL, range))) {
            rc = Dlk_oom(err);
            break;
        }
        Dlk_buf_wrap(&q->slice, sl[sent].dst, (size_t)q->len);
        q->r.method = "GET";
        q->r.url = (const char *)url.data;
        q->r.headers = q->hdr;
        q->r.out = &q->slice;
        q->r.max = q->len;
        q->eng = read_engine(s);
        s3_submit(q->eng, &q->r);
    }
    Dlk_obj_info pi = {0};
    http_get_who w = get_who(s, okey);
    for (size_t i = 0; i < sent; i++) {
        read_part *q = &p[i];
        s3_wait(q->eng, &q->r);
        if (!rc && !*whole) {
            dlk_error perr;
            dlk_status prc = http_get_answer(&w, &q->r, q->off, q->len,
                                             q->len, true, &q->slice, NULL,
                                             &perr);
            if (prc == DLK_ENOTFOUND || prc == DLK_EAUTH) {
                rc = prc;
                *err = perr;
            } else if (prc || q->r.status != 206 ||
                       q->r.total_size != size || q->slice.len != q->len ||
                       (i && strcmp(q->r.etag, pi.etag) != 0)) {
                *whole = true;
            } else if (i == 0) {
                pi.size = size;
                pi.mtime = s3_req_mtime(&q->r);
                snprintf(pi.etag, sizeof pi.etag, "%s", q->r.etag);
            }
        }
        s3_req_fini(&q->r);
        curl_slist_free_all(q->hdr);
    }
    *requests += (unsigned)sent;
    free(p);
    Dlk_buf_free(&url);
    free(okey);
    if (!rc && info)
        *info = pi;
    return rc;
}

/* Ranges of about read_part_size for [off, off+len): a span of a chunk a
 * little over it (parts end at samples) is one range, not a second of a
 * few KiB.  Returns how many slices it wrote to sl (at most max). */
static size_t cut_slices(s3_store *s, uint64_t off, uint64_t len,
                         uint8_t *dst, read_slice *sl, size_t max)
{
    uint64_t part = s->cfg.read_part_size;
    if (atomic_fetch_add(&s->sized_bytes, len) < READ_RAMP_PARTS * part &&
        part > READ_RAMP_MIN)
        part = part / READ_RAMP_DIV > READ_RAMP_MIN ? part / READ_RAMP_DIV
                                                     : READ_RAMP_MIN;
    uint64_t n = part ? (len + part / 2) / part : 1;
    if (n < 1)
        n = 1;
    if (n > max)
        n = max;
    part = (len + n - 1) / n;
    for (uint64_t i = 0; i < n; i++) {
        sl[i].off = off + i * part;
        sl[i].len = off + len - sl[i].off < part ? off + len - sl[i].off
                                                  : part;
        sl[i].dst = dst + i * part;
    }
    return (size_t)n;
}

#define READ_SLICES_MAX 64

/* Bytes [off, off+len) of an object known to be `size` bytes (the whole
 * object: 0, size), in ranges of read_part_size, all in flight at once
 * and spread over the read engines: a whole-object GET is one connection
 * and one receiving thread, while a store serves each connection a
 * fraction of what it serves many (AWS: ~100 MB/s a connection).  A
 * range that does not come back as asked falls back to one GET of the
 * whole object (or of the span), whose answer decides. */
static dlk_status s3_get_sized(Dlk_store *st, const char *key, uint64_t size,
                               uint64_t off, uint64_t len, Dlk_buf *out,
                               Dlk_obj_info *info, unsigned *requests,
                               dlk_error *err)
{
    s3_store *s = (s3_store *)st;
    bool all = off == 0 && len == size;
    *requests = 0;
    size_t start = out->len;
    dlk_status rc = len > SIZE_MAX ? Dlk_fail(err, DLK_ELIMIT, "too large")
                                   : Dlk_buf_reserve(out, (size_t)len, err);
    if (rc)
        return rc;
    read_slice sl[READ_SLICES_MAX];
    size_t n = cut_slices(s, off, len, out->data + start, sl,
                          READ_SLICES_MAX);
    bool whole = n < 2;
    if (!whole && (rc = read_slices(s, key, size, sl, n, &whole, info,
                                    requests, err)))
        return rc;
    if (whole) {
        (*requests)++;
        out->len = start;
        return all ? get_on(s, read_engine(s), key, 0, UINT64_MAX, size, out,
                            info, err)
                   : get_on(s, read_engine(s), key, off, len, len, out, info,
                            err);
    }
    out->len = start + (size_t)len;
    return DLK_OK;
}

/* Several spans of an object known to be `size` bytes, all in flight at
 * once (a chunk's header with a span of its parts: one round trip). */
static dlk_status s3_get_spans(Dlk_store *st, const char *key, uint64_t size,
                               size_t n, const uint64_t *off,
                               const uint64_t *len, Dlk_buf **outs,
                               unsigned *requests, dlk_error *err)
{
    s3_store *s = (s3_store *)st;
    read_slice sl[READ_SLICES_MAX];
    size_t ns = 0;
    size_t *start = calloc(n ? n : 1, sizeof *start);
    dlk_status rc = start ? DLK_OK : Dlk_oom(err);
    *requests = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        start[i] = outs[i]->len;
        if (len[i] > SIZE_MAX ||
            (rc = Dlk_buf_reserve(outs[i], (size_t)len[i], err)))
            break;
        size_t left = READ_SLICES_MAX - ns;
        size_t per = left / (n - i);
        if (!per || !len[i]) {
            rc = per ? DLK_OK : Dlk_fail(err, DLK_EINVAL, "too many spans");
            continue;
        }
        ns += cut_slices(s, off[i], len[i], outs[i]->data + start[i], sl + ns,
                         per);
    }
    bool whole = false;
    if (!rc)
        rc = read_slices(s, key, size, sl, ns, &whole, NULL, requests, err);
    for (size_t i = 0; !rc && i < n; i++) {
        if (whole) {
            (*requests)++;
            outs[i]->len = start[i];
            rc = get_on(s, read_engine(s), key, off[i], len[i], len[i],
                        outs[i], NULL, err);
        } else {
            outs[i]->len = start[i] + (size_t)len[i];
        }
    }
    free(start);
    return rc;
}

/* ---- many GETs at once (http_store.c) ---------------------------------- */

/* What one whole-object GET of get_each or get_start points at until it
 * finishes. */
typedef struct get_ctx {
    char *okey;
    Dlk_buf url;
} get_ctx;

static bool get_init(Dlk_store *st, s3_req *r, Dlk_get_req *q, void **ctx)
{
    s3_store *s = (s3_store *)st;
    get_ctx *c = calloc(1, sizeof *c);
    if (!(*ctx = c) || !(c->okey = object_key(s, q->key))) {
        q->rc = Dlk_oom(&q->err);
        return false;
    }
    if ((q->rc = make_url(s, c->okey, NULL, &c->url, &q->err)))
        return false;
    r->method = "GET";
    r->url = (const char *)c->url.data;
    r->out = q->out;
    r->max = q->max;
    return true;
}

/* No Range was sent, so a 416 is the server's fault (a ranged GET's 416
 * asks for a HEAD, which an engine's own thread, where get_start
 * finishes, cannot wait for). */
static void get_finish(Dlk_store *st, s3_req *r, bool sent, Dlk_get_req *q,
                       void *ctx)
{
    s3_store *s = (s3_store *)st;
    get_ctx *c = ctx;
    if (sent) {
        http_get_who w = get_who(s, c->okey);
        q->rc = http_get_answer(&w, r, 0, UINT64_MAX, q->max, false, q->out,
                                q->info, &q->err);
    }
    if (c) {
        Dlk_buf_free(&c->url);
        free(c->okey);
        free(c);
    }
}

static const http_get_ops whole_gets = {get_init, get_finish};

/* A dataset's manifest and documents: on the store's own engine. */
static void s3_get_each(Dlk_store *st, Dlk_get_req *reqs, size_t n,
                        void (*done)(void *ud, size_t i), void *ud)
{
    http_get_each(st, &whole_gets, ((s3_store *)st)->eng, reqs, n, done, ud);
}

/* An ingest's source objects: on the bulk engines, so that its decoders
 * take each row as its answers come, with no fetch thread between. */
static void s3_get_start(Dlk_store *st, Dlk_get_req **reqs, size_t n,
                         void (*done)(void *ud, Dlk_get_req *q), void *ud)
{
    http_get_start(st, &whole_gets, bulk_engine((s3_store *)st), reqs, n,
                   done, ud);
}

/* ---- put ------------------------------------------------------------ */

/* A quoted entity tag ("..." or W/"..."): the form S3 sends and HTTP
 * wants back in If-Match. */
static bool etag_quoted(const char *etag)
{
    size_t n = strlen(etag);
    return n >= 2 && etag[0] == '"' && etag[n - 1] == '"';
}

static struct curl_slist *cond_headers(Dlk_put_mode mode, const char *etag,
                                       bool bare, bool *oom)
{
    char h[DLK_ETAG_MAX + 16];
    *oom = false;
    if (mode == DLK_PUT_IF_ABSENT)
        snprintf(h, sizeof h, "If-None-Match: *");
    else if (mode == DLK_PUT_IF_MATCH && bare && etag_quoted(etag))
        snprintf(h, sizeof h, "If-Match: %.*s", (int)strlen(etag) - 2,
                 etag + 1);
    else if (mode == DLK_PUT_IF_MATCH)
        snprintf(h, sizeof h, "If-Match: %s", etag);
    else
        return NULL;
    struct curl_slist *l = curl_slist_append(NULL, h);
    *oom = !l;
    return l;
}

/* Whether a 412 to If-Match with the quoted ETag is to be asked again with
 * the bare one.  Ceph RGW compares If-Match with the ETag as stored, which
 * has no quotes, and refuses the quoted tag that S3 (and RGW itself) hands
 * out; the bare tag is still compared whole, so the retry is as atomic as
 * the first try, and on AWS it fails again on a real conflict.  Once a
 * bare retry has been taken, the store sends bare tags first. */
static bool if_match_retry(const s3_req *r,
                           Dlk_put_mode mode, const char *etag, bool bare)
{
    return r->status == 412 && mode == DLK_PUT_IF_MATCH && !bare &&
           etag_quoted(etag);
}

static dlk_status put_single(s3_store *s, const char *okey, const void *data,
                             size_t len, Dlk_put_mode mode, const char *etag,
                             Dlk_obj_info *info, dlk_error *err)
{
    bool bare = s->if_match_bare, oom;
    s3_req r = {0};
    dlk_status rc = DLK_OK;
    for (;;) {
        struct curl_slist *hdr = cond_headers(mode, etag, bare, &oom);
        if (oom)
            return Dlk_oom(err);
        r.headers = hdr;
        r.body = data;
        r.body_len = len;
        rc = run(s, &r, "PUT", okey, NULL, err);
        curl_slist_free_all(hdr);
        if (rc || !if_match_retry(&r, mode, etag, bare))
            break;
        s3_req_fini(&r);
        r = (s3_req){0};
        bare = true;
    }
    if (!rc && bare && s3_ok2xx(&r) && mode == DLK_PUT_IF_MATCH)
        s->if_match_bare = true;
    if (!rc && !s3_ok2xx(&r))
        rc = req_fail(s, &r, "write", okey, mode, err);
    if (!rc && info) {
        info->size = len;
        info->mtime = (int64_t)time(NULL);
        snprintf(info->etag, sizeof info->etag, "%s", r.etag);
    }
    s3_req_fini(&r);
    return rc;
}

static dlk_status s3_put_multipart(s3_store *s, const char *okey, const void *data,
                            size_t len, Dlk_put_mode mode, const char *etag,
                            Dlk_obj_info *info, dlk_error *err);

static dlk_status s3_put(Dlk_store *st, const char *key, const void *data,
                         size_t len, Dlk_put_mode mode, const char *etag,
                         Dlk_obj_info *info, dlk_error *err)
{
    s3_store *s = (s3_store *)st;
    if (mode == DLK_PUT_IF_MATCH &&
        (!etag || strlen(etag) >= DLK_ETAG_MAX || strpbrk(etag, "\r\n")))
        return Dlk_fail(err, DLK_EINVAL, "invalid etag for a conditional "
                        "put of '%s'", key);
    char *okey = object_key(s, key);
    if (!okey)
        return Dlk_oom(err);
    /* A replacement goes in one PUT while S3 allows it: Ceph RGW (16)
     * ignores If-Match on CompleteMultipartUpload, and a replacement that
     * overwrote another writer's would lose its data. */
    bool multi = len >= s->cfg.multipart_threshold &&
                 (mode != DLK_PUT_IF_MATCH || len > SINGLE_PUT_MAX);
    dlk_status rc = multi
        ? s3_put_multipart(s, okey, data, len, mode, etag, info, err)
        : put_single(s, okey, data, len, mode, etag, info, err);
    free(okey);
    return rc;
}

/* ---- multipart upload ----------------------------------------------- */

typedef struct part {
    s3_req r;
    Dlk_buf url;
    char etag[DLK_ETAG_MAX];
} part;

static dlk_status mp_abort(s3_store *s, const char *okey, const char *qid)
{
    Dlk_buf q;
    Dlk_buf_init(&q);
    dlk_status rc = str_append(&q, "uploadId=", NULL);
    if (!rc)
        rc = str_append(&q, qid, NULL);
    if (!rc)
        rc = terminate(&q, NULL);
    if (!rc) {
        s3_req r = {0};
        run(s, &r, "DELETE", okey, (const char *)q.data, NULL);
        s3_req_fini(&r);
    }
    Dlk_buf_free(&q);
    return rc;
}

static dlk_status mp_parts(s3_store *s, const char *okey, const char *qid,
                           const uint8_t *data, size_t len, uint64_t psize,
                           part *parts, size_t nparts, dlk_error *err)
{
    dlk_status rc = DLK_OK;
    size_t next = 0, waited = 0;
    while (waited < nparts) {
        while (!rc && next < nparts && next - waited < PART_WINDOW) {
            part *p = &parts[next];
            char q[64];
            snprintf(q, sizeof q, "partNumber=%zu&uploadId=", next + 1);
            Dlk_buf qb;
            Dlk_buf_init(&qb);
            rc = str_append(&qb, q, err);
            if (!rc)
                rc = str_append(&qb, qid, err);
            if (!rc)
                rc = terminate(&qb, err);
            if (!rc)
                rc = make_url(s, okey, (const char *)qb.data, &p->url, err);
            Dlk_buf_free(&qb);
            if (rc)
                break;
            uint64_t off = (uint64_t)next * psize;
            p->r.method = "PUT";
            p->r.url = (const char *)p->url.data;
            p->r.body = data + off;
            p->r.body_len = (size_t)(len - off < psize ? len - off : psize);
            s3_submit(s->eng, &p->r);
            next++;
        }
        if (waited == next)
            break;
        part *p = &parts[waited++];
        s3_wait(s->eng, &p->r);
        if (!rc && !s3_ok2xx(&p->r))
            rc = req_fail(s, &p->r, "write a part of", okey, DLK_PUT_ALWAYS,
                          err);
        else if (!rc && !p->r.etag[0])
            rc = Dlk_fail(err, DLK_ENET, "cannot write a part of "
                          "'s3://%s/%s': no etag in the answer", s->bucket,
                          okey);
        snprintf(p->etag, sizeof p->etag, "%s", p->r.etag);
        s3_req_fini(&p->r);
        Dlk_buf_free(&p->url);
    }
    return rc;
}

static dlk_status mp_complete(s3_store *s, const char *okey, const char *qid,
                              part *parts, size_t nparts, Dlk_put_mode mode,
                              const char *etag, Dlk_obj_info *info,
                              size_t len, dlk_error *err)
{
    Dlk_buf body, q, resp;
    Dlk_buf_init(&body);
    Dlk_buf_init(&q);
    Dlk_buf_init(&resp);
    dlk_status rc = str_append(&body, "<CompleteMultipartUpload>", err);
    for (size_t i = 0; !rc && i < nparts; i++) {
        char x[DLK_ETAG_MAX + 96];
        snprintf(x, sizeof x, "<Part><PartNumber>%zu</PartNumber><ETag>%s"
                 "</ETag></Part>", i + 1, parts[i].etag);
        rc = str_append(&body, x, err);
    }
    if (!rc)
        rc = str_append(&body, "</CompleteMultipartUpload>", err);
    if (!rc)
        rc = str_append(&q, "uploadId=", err);
    if (!rc)
        rc = str_append(&q, qid, err);
    if (!rc)
        rc = terminate(&q, err);
    bool oom = false, bare = s->if_match_bare;
    struct curl_slist *hdr = rc ? NULL : cond_headers(mode, etag, bare, &oom);
    if (!rc && oom)
        rc = Dlk_oom(err);
    /* S3 may answer 200 with an <Error> body: retry those too */
    for (int attempt = 0; !rc; attempt++) {
        s3_req r = {0};
        r.headers = hdr;
        r.body = body.data;
        r.body_len = body.len;
        r.out = &resp;
        r.max = 1 << 20;
        resp.len = 0;
        rc = run(s, &r, "POST", okey, (const char *)q.data, err);
        s3_error_info ei;
        if (!rc && if_match_retry(&r, mode, etag, bare)) {
            s3_req_fini(&r);
            curl_slist_free_all(hdr);
            bare = true;
            hdr = cond_headers(mode, etag, bare, &oom);
            if (oom)
                rc = Dlk_oom(err);
            continue;
        }
        if (!rc && !s3_ok2xx(&r)) {
            rc = req_fail(s, &r, "complete the upload of", okey, mode, err);
        } else if (!rc && s3_xml_error(resp.data, resp.len, &ei)) {
            bool again = (strcmp(ei.code, "InternalError") == 0 ||
                          strcmp(ei.code, "SlowDown") == 0) &&
                         attempt + 1 < s->cfg.max_attempts;
            if (!again)
                rc = Dlk_fail(err, DLK_ENET, "cannot complete the upload of "
                              "'s3://%s/%s': %s (request id %s)", s->bucket,
                              okey, ei.code, ei.request_id);
            s3_req_fini(&r);
            if (again)
                continue;
            break;
        } else if (!rc && info) {
            info->size = len;
            info->mtime = (int64_t)time(NULL);
            if (!s3_xml_find(resp.data, resp.len, "ETag", info->etag,
                             sizeof info->etag))
                snprintf(info->etag, sizeof info->etag, "%s", r.etag);
            /* Ceph RGW (16) answers with an empty ETag: ask for it */
            if (!info->etag[0])
                rc = do_head(s, okey, info, err);
        }
        s3_req_fini(&r);
        break;
    }
    if (!rc && bare && mode == DLK_PUT_IF_MATCH)
        s->if_match_bare = true;
    curl_slist_free_all(hdr);
    Dlk_buf_free(&body);
    Dlk_buf_free(&q);
    Dlk_buf_free(&resp);
    return rc;
}

static dlk_status s3_put_multipart(s3_store *s, const char *okey, const void *data,
                            size_t len, Dlk_put_mode mode, const char *etag,
                            Dlk_obj_info *info, dlk_error *err)
{
    uint64_t psize = s->cfg.part_size;
    if ((len + psize - 1) / psize > MAX_PARTS)
        psize = (len + MAX_PARTS - 1) / MAX_PARTS;
    size_t nparts = (size_t)((len + psize - 1) / psize);

    /* initiate */
    Dlk_buf resp;
    Dlk_buf_init(&resp);
    s3_req r = {0};
    r.out = &resp;
    r.max = 1 << 20;
    char id[1024];
    dlk_status rc = run(s, &r, "POST", okey, "uploads=", err);
    if (!rc && !s3_ok2xx(&r))
        rc = req_fail(s, &r, "start an upload of", okey, DLK_PUT_ALWAYS, err);
    if (!rc && !s3_xml_find(resp.data, resp.len, "UploadId", id, sizeof id))
        rc = Dlk_fail(err, DLK_ENET, "cannot start an upload of "
                      "'s3://%s/%s': no upload id in the answer", s->bucket,
                      okey);
    s3_req_fini(&r);
    Dlk_buf_free(&resp);
    if (rc)
        return rc;

    Dlk_buf qid;    /* the upload id, encoded for a query */
    Dlk_buf_init(&qid);
    rc = enc_append(&qid, id, false, err);
    if (!rc)
        rc = terminate(&qid, err);
    part *parts = rc ? NULL : calloc(nparts, sizeof *parts);
    if (!rc && !parts)
        rc = Dlk_oom(err);
    if (!rc)
        rc = mp_parts(s, okey, (const char *)qid.data, data, len, psize,
                      parts, nparts, err);
    if (!rc)
        rc = mp_complete(s, okey, (const char *)qid.data, parts, nparts,
                         mode, etag, info, len, err);
    if (rc && qid.data)
        mp_abort(s, okey, (const char *)qid.data);
    free(parts);
    Dlk_buf_free(&qid);
    return rc;
}

/* ---- delete --------------------------------------------------------- */

static dlk_status s3_del(Dlk_store *st, const char *key, dlk_error *err)
{
    s3_store *s = (s3_store *)st;
    char *okey = object_key(s, key);
    if (!okey)
        return Dlk_oom(err);
    s3_req r = {0};
    dlk_status rc = run(s, &r, "DELETE", okey, NULL, err);
    if (!rc && !s3_ok2xx(&r))
        rc = req_fail(s, &r, "delete", okey, DLK_PUT_ALWAYS, err);
    s3_req_fini(&r);
    free(okey);
    return rc;
}

/* ---- open and free -------------------------------------------------- */

static void s3_free(Dlk_store *st)
{
    s3_store *s = (s3_store *)st;
    s3_engine_free(s->eng);
    for (int i = 0; i < s->nbulk; i++)
        s3_engine_free(s->bulk[i]);
    for (int i = 0; i < s->nrd; i++)
        s3_engine_free(s->rd[i]);
    pthread_mutex_destroy(&s->bulk_mu);
    s3_config_free(&s->cfg);
    free(s->bucket);
    free(s->prefix);
    free(s->base_url);
    free(s->base.url);
    free(s);
}

/* The in-flight limit may grow to n where the store is slow (a user's
 * s3_max_inflight stays as set); returns the limit now, over the
 * bulk engines once they are made. */
static int s3_want_inflight(Dlk_store *st, int n)
{
    s3_store *s = (s3_store *)st;
    pthread_mutex_lock(&s->bulk_mu);
    if (n > 0 && !s->cfg.max_inflight_set && n <= 4096) { /* the user's wins */
        s->want = n > s->want ? n : s->want;
        s3_engine_raise_max(s->eng, n);
        for (int i = 0; i < s->nbulk; i++)
            s3_engine_raise_max(s->bulk[i], share(n, s->nbulk));
    }
    int m = s->nbulk > 1 ? 0 : s3_engine_max(s->eng);
    for (int i = 0; s->nbulk > 1 && i < s->nbulk; i++)
        m += s3_engine_max(s->bulk[i]);
    pthread_mutex_unlock(&s->bulk_mu);
    return m;
}

static const Dlk_store_ops s3_ops = {
    .scheme = "s3", .get = s3_get, .head = s3_head, .put = s3_put,
    .del = s3_del, .list = s3_list, .free = s3_free,
    .get_each = s3_get_each, .get_start = s3_get_start,
    .io_threads = s3_io_threads,
    .get_sized = s3_get_sized,
    .get_spans = s3_get_spans,
    .list_wide = s3_list_wide,
    .list_versions = s3_list_versions,
    .want_inflight = s3_want_inflight,
};

static bool bucket_valid(const char *b, size_t n)
{
    if (n < 3 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

static dlk_status make_base_url(s3_store *s, dlk_error *err)
{
    const s3_config *c = &s->cfg;
    bool path = c->path_style;
    /* dots break the TLS name of virtual hosts: AWS itself says path */
    if (!path && !c->force_virtual && strchr(s->bucket, '.'))
        path = true;
    size_t n = strlen(s->bucket) + strlen(c->region) +
               (c->endpoint ? strlen(c->endpoint) : 0) + 64;
    if (!(s->base_url = malloc(n)))
        return Dlk_oom(err);
    if (c->endpoint && path) {
        snprintf(s->base_url, n, "%s/%s", c->endpoint, s->bucket);
    } else if (c->endpoint) {
        const char *host = strstr(c->endpoint, "://") + 3;
        snprintf(s->base_url, n, "%.*s%s.%s", (int)(host - c->endpoint),
                 c->endpoint, s->bucket, host);
    } else if (path) {
        snprintf(s->base_url, n, "https://s3.%s.amazonaws.com/%s", c->region,
                 s->bucket);
    } else {
        snprintf(s->base_url, n, "https://%s.s3.%s.amazonaws.com", s->bucket,
                 c->region);
    }
    return DLK_OK;
}

dlk_status Dlk_store_open_s3(const char *url, const dlk_store_options *so,
                             Dlk_store **out, dlk_error *err)
{
    *out = NULL;
    if (strncmp(url, "s3://", 5) != 0)
        return Dlk_fail(err, DLK_EINVAL, "not an s3 url '%.200s'", url);
    const char *b = url + 5;
    const char *slash = strchr(b, '/');
    size_t bn = slash ? (size_t)(slash - b) : strlen(b);
    if (!bucket_valid(b, bn))
        return Dlk_fail(err, DLK_EINVAL, "invalid bucket name in "
                        "'%.200s'", url);
    s3_store *s = calloc(1, sizeof *s);
    if (!s)
        return Dlk_oom(err);
    pthread_mutex_init(&s->bulk_mu, NULL);
    s->base.ops = &s3_ops;
    s->bucket = strndup(b, bn);
    const char *p = slash ? slash + 1 : "";
    while (*p == '/')
        p++;
    s->prefix = strdup(p);
    s->base.url = strdup(url);
    if (!s->bucket || !s->prefix || !s->base.url) {
        s3_free(&s->base);
        return Dlk_oom(err);
    }
    size_t pn = strlen(s->prefix);
    while (pn && s->prefix[pn - 1] == '/')
        s->prefix[--pn] = '\0';
    if (pn && !Dlk_key_valid(s->prefix)) {
        s3_free(&s->base);
        return Dlk_fail(err, DLK_EINVAL, "invalid prefix in '%.200s'", url);
    }
    dlk_status rc = s3_config_from(&s->cfg, so, err);
    if (!rc)
        rc = make_base_url(s, err);
    if (!rc)
        rc = s3_engine_new(&s->cfg, &s->eng, err);
    if (rc) {
        s3_free(&s->base);
        return rc;
    }
    *out = &s->base;
    return DLK_OK;
}
