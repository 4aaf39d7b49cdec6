/* s3_config.c - the S3 store's settings from the caller's
 * dlk_store_options: checked, defaulted and copied (the store outlives
 * the options it was opened with).  Nothing here reads the environment
 * or a file: the tool layer (cmd/store_env.c) resolves AWS_*, DLK_S3_*
 * and ~/.aws into the options. */
#include "s3_internal.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void wipe_free(char *s)
{
    if (s) {
        volatile char *v = s;
        while (*v)
            *v++ = '\0';
        free(s);
    }
}

void s3_config_free(s3_config *c)
{
    free(c->endpoint);
    free(c->region);
    free(c->access_key);
    wipe_free(c->secret_key);
    wipe_free(c->session_token);
    free(c->ca_bundle);
    memset(c, 0, sizeof *c);
}

/* A copy of s, or NULL for NULL or "" (*ok cleared when out of memory). */
static char *dup_set(const char *s, bool *ok)
{
    if (!s || !*s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

static dlk_status check_endpoint(s3_config *c, dlk_error *err)
{
    if (!c->endpoint)
        return DLK_OK;
    char *e = c->endpoint;
    if (strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0) {
        /* the AWS tools require a scheme; assume TLS, never plain http */
        size_t n = strlen(e) + 9;
        char *p = malloc(n);
        if (!p)
            return Dlk_oom(err);
        snprintf(p, n, "https://%s", e);
        free(e);
        c->endpoint = e = p;
    }
    size_t n = strlen(e);
    while (n > 8 && e[n - 1] == '/')
        e[--n] = '\0';
    for (const char *q = e; *q; q++)
        if ((unsigned char)*q <= ' ' || *q == '?' || *q == '#' || *q == '@')
            return Dlk_fail(err, DLK_EINVAL, "invalid s3 endpoint url "
                            "'%.200s'", e);
    return DLK_OK;
}

/* v (0: def) within [lo, hi], into *out; else an error naming the field. */
static dlk_status in_range(const char *field, long long v, long long lo,
                           long long hi, long long def, long long *out,
                           dlk_error *err)
{
    if (v == 0) {
        *out = def;
        return DLK_OK;
    }
    if (v < lo || v > hi)
        return Dlk_fail(err, DLK_EINVAL, "store option %s must be from %lld "
                        "to %lld (0: the default), not %lld", field, lo, hi,
                        v);
    *out = v;
    return DLK_OK;
}

static dlk_status limits(s3_config *c, const dlk_store_options *o,
                         dlk_error *err)
{
    long long v = 0;
    dlk_status rc;
    if ((rc = in_range("s3_max_inflight", o->s3_max_inflight, 1, 4096, 64,
                       &v, err)))
        return rc;
    c->max_inflight = (int)v;
    c->max_inflight_set = o->s3_max_inflight != 0;
    if ((rc = in_range("s3_max_attempts", o->s3_max_attempts, 1, 100, 8, &v,
                       err)))
        return rc;
    c->max_attempts = (int)v;
    if ((rc = in_range("s3_io_threads", o->s3_io_threads, 1, 16, 0, &v,
                       err)))
        return rc;
    c->io_threads = (int)v;
    if ((rc = in_range("s3_read_threads", o->s3_read_threads, 1, 16, 0, &v,
                       err)))
        return rc;
    c->read_threads = (int)v;
    /* S3 parts: at least 5 MiB (but the last), at most 5 GiB */
    if ((rc = in_range("s3_part_size", (long long)o->s3_part_size, 5LL << 20,
                       5LL << 30, 16LL << 20, &v, err)))
        return rc;
    c->part_size = (uint64_t)v;
    if ((rc = in_range("s3_multipart_threshold",
                       (long long)o->s3_multipart_threshold, 5LL << 20,
                       5LL << 30, 64LL << 20, &v, err)))
        return rc;
    c->multipart_threshold = (uint64_t)v;
    if ((rc = in_range("s3_read_part_size", (long long)o->s3_read_part_size,
                       16LL << 10, 1LL << 30, 8LL << 20, &v, err)))
        return rc;
    c->read_part_size = (uint64_t)v;
    if ((rc = in_range("s3_hedge_min_ms", o->s3_hedge_min_ms, 1, 3600000,
                       S3_HEDGE_MIN_MS_DEFAULT, &v, err)))
        return rc;
    c->hedge_min_ms = (int)v;
    c->hedge_off = o->s3_no_hedge != 0;
    if ((rc = in_range("s3_stall_rate", o->s3_stall_rate, 1, 1LL << 30,
                       S3_STALL_RATE_DEFAULT, &v, err)))
        return rc;
    c->stall_rate = (long)v;
    if ((rc = in_range("s3_stall_seconds", o->s3_stall_seconds, 1, 3600,
                       S3_STALL_SECONDS_DEFAULT, &v, err)))
        return rc;
    c->stall_seconds = (long)v;
    if ((rc = in_range("s3_request_timeout", o->s3_request_timeout, 1, 86400,
                       S3_REQUEST_TIMEOUT_DEFAULT, &v, err)))
        return rc;
    c->request_timeout = (long)v;
    c->list_max_keys = o->s3_list_max_keys ? o->s3_list_max_keys
                                           : S3_LIST_MAX_KEYS_DEFAULT;
    c->list_max_pages = o->s3_list_max_pages ? o->s3_list_max_pages
                                             : S3_LIST_MAX_PAGES_DEFAULT;
    c->cancel = o->cancel;
    c->cancel_ud = o->cancel_ud;
    return DLK_OK;
}

dlk_status s3_config_from(s3_config *c, const dlk_store_options *o,
                          dlk_error *err)
{
    static const dlk_store_options defaults;
    memset(c, 0, sizeof *c);
    if (!o)
        o = &defaults;
    if (o->s3_part_size > (5ull << 30) ||
        o->s3_multipart_threshold > (5ull << 30) ||
        o->s3_read_part_size > (1ull << 30))
        return Dlk_fail(err, DLK_EINVAL, "store option %s is over its "
                        "limit", o->s3_read_part_size > (1ull << 30)
                        ? "s3_read_part_size" : o->s3_part_size > (5ull << 30)
                        ? "s3_part_size" : "s3_multipart_threshold");
    dlk_status rc = limits(c, o, err);
    if (rc)
        return rc;
    if (o->s3_addressing != DLK_S3_ADDRESSING_AUTO &&
        o->s3_addressing != DLK_S3_ADDRESSING_PATH &&
        o->s3_addressing != DLK_S3_ADDRESSING_VIRTUAL)
        return Dlk_fail(err, DLK_EINVAL, "store option s3_addressing %d is "
                        "not path, virtual or auto", (int)o->s3_addressing);
    bool ok = true;
    c->region = dup_set(o->s3_region ? o->s3_region : "us-east-1", &ok);
    if (!c->region && ok)  /* "": the default too */
        c->region = dup_set("us-east-1", &ok);
    c->endpoint = dup_set(o->s3_endpoint, &ok);
    c->ca_bundle = dup_set(o->s3_ca_bundle, &ok);
    /* keys only in pairs; none at all for anonymous requests */
    if (!o->s3_no_sign && o->s3_access_key_id && *o->s3_access_key_id &&
        o->s3_secret_access_key && *o->s3_secret_access_key) {
        c->access_key = dup_set(o->s3_access_key_id, &ok);
        c->secret_key = dup_set(o->s3_secret_access_key, &ok);
        c->session_token = dup_set(o->s3_session_token, &ok);
    }
    if (!ok) {
        s3_config_free(c);
        return Dlk_oom(err);
    }
    if ((rc = check_endpoint(c, err))) {
        s3_config_free(c);
        return rc;
    }
    /* path-style for custom endpoints, virtual-hosted for AWS */
    c->path_style = o->s3_addressing == DLK_S3_ADDRESSING_PATH ||
                    (o->s3_addressing == DLK_S3_ADDRESSING_AUTO &&
                     c->endpoint != NULL);
    c->force_virtual = o->s3_addressing == DLK_S3_ADDRESSING_VIRTUAL;
    return DLK_OK;
}
