/* store.c - choosing a store by URL, key checks, and the checked wrappers
 * that every caller goes through. */
#include "util/error.h"
#include "util/abi.h"
#include "util/buf.h"
#include "util/hash.h"
#include "util/keys.h"
#include "store/store.h"
#include "dlk_bench.h"
#include "gcs_internal.h"

#include <limits.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

dlk_status Dlk_store_open(const char *url, bool create,
                          const dlk_store_options *so, Dlk_store **out,
                          dlk_error *err)
{
    *out = NULL;
    if (!url || !*url)
        return Dlk_fail(err, DLK_EINVAL, "empty dataset url");
    /* every store opens here: the caller's layout read once, and only
     * the library's own seen below (NULL stays the defaults) */
    dlk_store_options own;
    if (so) {
        dlk_status rc = abi_copy_in(&own, sizeof own, so,
                                    "dlk_store_options", err);
        if (rc)
            return rc;
        so = &own;
    }
    if (strncmp(url, "s3://", 5) == 0)
        return Dlk_store_open_s3(url, so, out, err);
    /* "s3:/x" is a typo, not a local directory named "s3:" */
    if (strncasecmp(url, "s3:", 3) == 0)
        return Dlk_fail(err, DLK_EINVAL, "bad url '%s': an S3 url is "
                        "s3://BUCKET/PREFIX", url);
    if (strncmp(url, "gs://", 5) == 0)
        return Dlk_store_open_gcs(url, so, out, err);
    if (strncasecmp(url, "gs:", 3) == 0)
        return Dlk_fail(err, DLK_EINVAL, "bad url '%s': a GCS url is "
                        "gs://BUCKET/PREFIX", url);
    if (strncmp(url, "file://", 7) == 0)
        return Dlk_store_open_file(url + 7, create, out, err);
    const char *colon = strstr(url, "://");
    if (colon) {
        return Dlk_fail(err, DLK_EUNSUPPORTED,
                        "unsupported url scheme in '%.*s' (use a path, "
                        "file://, s3:// or gs://)", (int)(colon - url + 3), url);
    }
    return Dlk_store_open_file(url, create, out, err);
}

static dlk_io_counters counters;

#define COUNT(field, n) __atomic_add_fetch(&counters.field, (n), __ATOMIC_RELAXED)
/* a store whose reads another store counts (Dlk_store.uncounted) */
#define COUNT_S(s, field, n) \
    do { if (!(s)->uncounted) COUNT(field, n); } while (0)

void dlk_io_counters_get(dlk_io_counters *out)
{
    out->gets = __atomic_load_n(&counters.gets, __ATOMIC_RELAXED);
    out->heads = __atomic_load_n(&counters.heads, __ATOMIC_RELAXED);
    out->puts = __atomic_load_n(&counters.puts, __ATOMIC_RELAXED);
    out->lists = __atomic_load_n(&counters.lists, __ATOMIC_RELAXED);
    out->deletes = __atomic_load_n(&counters.deletes, __ATOMIC_RELAXED);
    out->bytes_read = __atomic_load_n(&counters.bytes_read, __ATOMIC_RELAXED);
    out->bytes_written = __atomic_load_n(&counters.bytes_written,
                                         __ATOMIC_RELAXED);
    out->hedges = s3_hedges_total();
}

void Dlk_store_free(Dlk_store *s)
{
    if (s)
        s->ops->free(s);
}

static dlk_status bad_key(const char *key, dlk_error *err)
{
    char safe[256];
    Dlk_key_escape(key, safe, sizeof safe);
    const char *why = Dlk_key_problem(key);
    return Dlk_fail(err, DLK_EINVAL, "invalid object key '%s'%s%s", safe,
                    why ? ": " : "", why ? why : "");
}

dlk_status Dlk_store_get(Dlk_store *s, const char *key, uint64_t max,
                         Dlk_buf *out, Dlk_obj_info *info, dlk_error *err)
{
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    size_t before = out->len;
    COUNT_S(s, gets, 1);
    if (info)
        memset(info, 0, sizeof *info); /* a store may not know every field */
    dlk_status rc = s->ops->get(s, key, 0, UINT64_MAX, max, out, info, err);
    if (!rc)
        COUNT_S(s, bytes_read, out->len - before);
    return rc;
}

dlk_status Dlk_store_get_range(Dlk_store *s, const char *key, uint64_t off,
                               uint64_t len, Dlk_buf *out, dlk_error *err)
{
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    size_t before = out->len;
    COUNT_S(s, gets, 1);
    dlk_status rc = s->ops->get(s, key, off, len, len, out, NULL, err);
    if (!rc)
        COUNT_S(s, bytes_read, out->len - before);
    return rc;
}

dlk_status Dlk_store_get_sized(Dlk_store *s, const char *key, uint64_t size,
                               Dlk_buf *out, Dlk_obj_info *info,
                               dlk_error *err)
{
    if (!s->ops->get_sized)
        return Dlk_store_get(s, key, size, out, info, err);
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    size_t before = out->len;
    if (info)
        memset(info, 0, sizeof *info);
    unsigned n = 0;
    dlk_status rc = s->ops->get_sized(s, key, size, 0, size, out, info, &n,
                                      err);
    COUNT_S(s, gets, n);
    if (!rc)
        COUNT_S(s, bytes_read, out->len - before);
    return rc;
}

dlk_status Dlk_store_get_span(Dlk_store *s, const char *key, uint64_t size,
                              uint64_t off, uint64_t len, Dlk_buf *out,
                              dlk_error *err)
{
    if (off > size || len > size - off)
        return Dlk_fail(err, DLK_EINVAL, "bytes %llu+%llu of '%s' are past "
                        "its %llu bytes", (unsigned long long)off,
                        (unsigned long long)len, key,
                        (unsigned long long)size);
    if (!s->ops->get_sized)
        return Dlk_store_get_range(s, key, off, len, out, err);
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    size_t before = out->len;
    unsigned n = 0;
    dlk_status rc = s->ops->get_sized(s, key, size, off, len, out, NULL, &n,
                                      err);
    COUNT_S(s, gets, n);
    if (!rc)
        COUNT_S(s, bytes_read, out->len - before);
    return rc;
}

dlk_status Dlk_store_get_spans(Dlk_store *s, const char *key, uint64_t size,
                               size_t n, const uint64_t *off,
                               const uint64_t *len, Dlk_buf **outs,
                               dlk_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (off[i] > size || len[i] > size - off[i])
            return Dlk_fail(err, DLK_EINVAL, "bytes %llu+%llu of '%s' are "
                            "past its %llu bytes", (unsigned long long)off[i],
                            (unsigned long long)len[i], key,
                            (unsigned long long)size);
    if (!s->ops->get_spans) {
        for (size_t i = 0; i < n; i++) {
            dlk_status rc = Dlk_store_get_span(s, key, size, off[i], len[i],
                                               outs[i], err);
            if (rc)
                return rc;
        }
        return DLK_OK;
    }
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    size_t before = 0;
    for (size_t i = 0; i < n; i++)
        before += outs[i]->len;
    unsigned k = 0;
    dlk_status rc = s->ops->get_spans(s, key, size, n, off, len, outs, &k,
                                      err);
    COUNT_S(s, gets, k);
    if (!rc) {
        size_t after = 0;
        for (size_t i = 0; i < n; i++)
            after += outs[i]->len;
        COUNT_S(s, bytes_read, after - before);
    }
    return rc;
}

bool Dlk_store_is_remote(const Dlk_store *s)
{
    return s->ops->map == NULL;
}

dlk_status Dlk_store_head(Dlk_store *s, const char *key, Dlk_obj_info *info,
                          dlk_error *err)
{
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    COUNT_S(s, heads, 1);
    memset(info, 0, sizeof *info);
    return s->ops->head(s, key, info, err);
}

/* What every put checks and counts first. */
static dlk_status put_begin(const char *key, size_t len, Dlk_put_mode mode,
                            const char *etag, Dlk_obj_info *out,
                            dlk_error *err)
{
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    if (mode == DLK_PUT_IF_MATCH && (!etag || !*etag))
        return Dlk_fail(err, DLK_EINVAL, "conditional put of '%s' without "
                        "an etag", key);
    COUNT(puts, 1);
    COUNT(bytes_written, len);
    if (out)
        memset(out, 0, sizeof *out);
    return DLK_OK;
}

dlk_status Dlk_store_put(Dlk_store *s, const char *key, const void *data,
                         size_t len, Dlk_put_mode mode, const char *etag,
                         Dlk_obj_info *out, dlk_error *err)
{
    dlk_status rc = put_begin(key, len, mode, etag, out, err);
    return rc ? rc : s->ops->put(s, key, data, len, mode, etag, out, err);
}

/* The parts to the store's putv, or joined in one buffer for its put. */
static dlk_status putv_parts(Dlk_store *s, const char *key,
                             const struct iovec *v, int n, size_t len,
                             Dlk_put_mode mode, const char *etag,
                             Dlk_obj_info *out, dlk_error *err)
{
    if (s->ops->putv)
        return s->ops->putv(s, key, v, n, mode, etag, out, err);
    uint8_t *joined = malloc(len ? len : 1);
    if (!joined)
        return Dlk_fail(err, DLK_ENOMEM, "cannot allocate %zu bytes for "
                        "object '%s'", len, key);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (v[i].iov_len)
            memcpy(joined + at, v[i].iov_base, v[i].iov_len);
        at += v[i].iov_len;
    }
    dlk_status rc = s->ops->put(s, key, joined, len, mode, etag, out, err);
    free(joined);
    return rc;
}

static dlk_status parts_len(const struct iovec *v, int n, const char *name,
                            size_t *len, dlk_error *err)
{
    *len = 0;
    for (int i = 0; i < n; i++)
        if (__builtin_add_overflow(*len, v[i].iov_len, len))
            return Dlk_fail(err, DLK_ELIMIT, "object '%s' is too large",
                            name);
    return DLK_OK;
}

dlk_status Dlk_store_putv(Dlk_store *s, const char *key,
                          const struct iovec *v, int n, Dlk_put_mode mode,
                          const char *etag, Dlk_obj_info *out,
                          dlk_error *err)
{
    size_t len;
    dlk_status rc = parts_len(v, n, key, &len, err);
    if (!rc)
        rc = put_begin(key, len, mode, etag, out, err);
    return rc ? rc : putv_parts(s, key, v, n, len, mode, etag, out, err);
}

dlk_status Dlk_store_putv_hashed(Dlk_store *s, const char *prefix,
                                 const struct iovec *v, int n,
                                 Dlk_put_mode mode, char hex[33],
                                 dlk_error *err)
{
    char key[1100];
    size_t len;
    dlk_status rc = parts_len(v, n, prefix, &len, err);
    if (rc)
        return rc;
    if (mode == DLK_PUT_IF_MATCH)
        return Dlk_fail(err, DLK_EINVAL, "conditional put under '%s' of "
                        "content-addressed parts", prefix);
    /* the key's shape with any hash, checked before anything is written */
    int kn = snprintf(key, sizeof key, "%s%032x", prefix, 0);
    if (kn < 0 || (size_t)kn >= sizeof key)
        return Dlk_fail(err, DLK_EINVAL, "key prefix too long '%.100s'",
                        prefix);
    if ((rc = put_begin(key, len, mode, NULL, NULL, err)))
        return rc;
    if (s->ops->putv_hashed)
        return s->ops->putv_hashed(s, prefix, v, n, mode, hex, err);
    Dlk_hash128_hex_v(v, (size_t)n, hex);
    snprintf(key, sizeof key, "%s%s", prefix, hex);
    return putv_parts(s, key, v, n, len, mode, NULL, NULL, err);
}

dlk_status Dlk_store_del(Dlk_store *s, const char *key, dlk_error *err)
{
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    COUNT(deletes, 1);
    return s->ops->del(s, key, err);
}

dlk_status Dlk_store_map(Dlk_store *s, const char *key, const void **ptr,
                         size_t *len, dlk_error *err)
{
    if (!s->ops->map)
        return Dlk_fail(err, DLK_EUNSUPPORTED, "the %s store cannot map "
                        "objects", s->ops->scheme);
    if (!Dlk_key_valid(key))
        return bad_key(key, err);
    COUNT(gets, 1);
    dlk_status rc = s->ops->map(s, key, ptr, len, err);
    if (!rc)
        COUNT(bytes_read, *len);
    return rc;
}

typedef struct get_job {
    Dlk_store *s;
    Dlk_get_req *r;
} get_job;

static void *get_one(void *arg)
{
    get_job *j = arg;
    Dlk_error_clear(&j->r->err);
    j->r->rc = Dlk_store_get(j->s, j->r->key, j->r->max, j->r->out,
                             j->r->info, &j->r->err);
    return NULL;
}

/* A request's checks before the store sees it (get_each, get_start). */
static void req_check(Dlk_get_req *r)
{
    Dlk_error_clear(&r->err);
    r->rc = Dlk_key_valid(r->key) ? DLK_OK : bad_key(r->key, &r->err);
    if (r->info)
        memset(r->info, 0, sizeof *r->info);
}

/* Counts each answer's bytes as the op hands it on. */
typedef struct each_ctx {
    Dlk_get_req *reqs;
    uint64_t bytes;
} each_ctx;

static void each_done(void *arg, size_t i)
{
    each_ctx *c = arg;
    c->bytes += c->reqs[i].out->len;
}

void Dlk_store_get_each(Dlk_store *s, Dlk_get_req *reqs, size_t n)
{
    if (s->ops->get_each) {
        /* the op skips requests already failed here (a bad key); each
         * request has its own out buffer, a failed one is left as it was */
        uint64_t before = 0;
        for (size_t i = 0; i < n; i++) {
            req_check(&reqs[i]);
            before += reqs[i].out->len;
        }
        COUNT(gets, n);
        each_ctx c = {reqs, 0};
        s->ops->get_each(s, reqs, n, each_done, &c);
        COUNT(bytes_read, c.bytes - before);
        return;
    }
    /* a local read takes microseconds: threads would cost more; a remote
     * one a round trip each, which the threads overlap */
    bool remote = !s->ops->map;
    get_job jobs[8];
    pthread_t th[8];
    bool started[8] = {false};
    for (size_t i = 1; remote && i < n && i < 8; i++) {
        jobs[i] = (get_job){s, &reqs[i]};
        started[i] = pthread_create(&th[i], NULL, get_one, &jobs[i]) == 0;
    }
    for (size_t i = 0; i < n; i++)
        if (i >= 8 || !started[i]) {
            get_job j = {s, &reqs[i]};
            get_one(&j);
        }
    for (size_t i = 1; i < n && i < 8; i++)
        if (started[i])
            pthread_join(th[i], NULL);
}

bool Dlk_store_get_start(Dlk_store *s, Dlk_get_req **reqs, size_t n,
                         void (*done)(void *ud, Dlk_get_req *q), void *ud)
{
    if (!s->ops->get_start)
        return false;
    for (size_t i = 0; i < n; i++)
        req_check(reqs[i]);
    COUNT(gets, n);
    s->ops->get_start(s, reqs, n, done, ud);
    return true;
}

int Dlk_store_io_threads(Dlk_store *s)
{
    return s->ops->io_threads ? s->ops->io_threads(s) : 0;
}

void Dlk_io_count_read(uint64_t n) { COUNT(bytes_read, n); }

dlk_status Dlk_get_req_status(const Dlk_get_req *r, dlk_error *err)
{
    if (r->rc && err)
        *err = r->err;
    return r->rc;
}

dlk_status Dlk_store_sweep(Dlk_store *s, int64_t before, bool dry,
                           uint64_t *files, uint64_t *bytes, dlk_error *err)
{
    *files = *bytes = 0;
    return s->ops->sweep ? s->ops->sweep(s, before, dry, files, bytes, err)
                         : DLK_OK;
}

void Dlk_store_unmap(Dlk_store *s, const void *ptr, size_t len)
{
    if (s->ops->unmap && ptr)
        s->ops->unmap(s, ptr, len);
}

dlk_status Dlk_store_list(Dlk_store *s, const char *prefix, Dlk_list_fn fn,
                          void *ud, dlk_error *err)
{
    if (!prefix)
        prefix = "";
    if (strstr(prefix, ".."))
        return bad_key(prefix, err);
    COUNT(lists, 1);
    return s->ops->list(s, prefix, fn, ud, err);
}

int Dlk_store_want_inflight(Dlk_store *s, int n)
{
    return s->ops->want_inflight ? s->ops->want_inflight(s, n) : INT_MAX;
}

dlk_status Dlk_store_list_wide(Dlk_store *s, const char *prefix,
                               Dlk_list_fn fn, void *ud, dlk_error *err)
{
    if (!prefix)
        prefix = "";
    if (strstr(prefix, ".."))
        return bad_key(prefix, err);
    COUNT(lists, 1);
    return (s->ops->list_wide ? s->ops->list_wide : s->ops->list)(
        s, prefix, fn, ud, err);
}

typedef struct unversioned {
    Dlk_list_version_fn fn;
    void *ud;
} unversioned;

static int no_version(void *ud, const char *key, uint64_t size)
{
    unversioned *u = ud;
    return u->fn(u->ud, key, size, "");
}

dlk_status Dlk_store_list_versions(Dlk_store *s, const char *prefix,
                                   Dlk_list_version_fn fn, void *ud,
                                   dlk_error *err)
{
    if (!prefix)
        prefix = "";
    if (strstr(prefix, ".."))
        return bad_key(prefix, err);
    COUNT(lists, 1);
    if (s->ops->list_versions)
        return s->ops->list_versions(s, prefix, fn, ud, err);
    unversioned u = {fn, ud};
    return (s->ops->list_wide ? s->ops->list_wide : s->ops->list)(
        s, prefix, no_version, &u, err);
}
