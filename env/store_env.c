/* store_env.c - dlk_store_options from the environment and the AWS
 * shared files (store_env.h).  The tool layer's: the library never reads
 * these. */
/* strdup: the Python package compiles this file as strict C11 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "store_env.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INI_LINE_MAX 4096

static dlk_status fail(dlk_error *err, dlk_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static dlk_status fail(dlk_error *err, dlk_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

static dlk_status oom(dlk_error *err)
{
    return fail(err, DLK_ENOMEM, "out of memory reading the aws "
                "configuration");
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
                 s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Section header "[name]" or "[profile name]" → the name compared. */
static bool section_is(char *line, const char *want)
{
    char *end = strchr(line, ']');
    if (!end)
        return false;
    *end = '\0';
    char *name = trim(line + 1);
    return strcmp(name, want) == 0;
}

int store_env_ini_get(const char *path, const char *section, const char *key,
                      char **out, bool *found_section)
{
    *out = NULL;
    if (found_section)
        *found_section = false;
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return 0;
    char line[INI_LINE_MAX];
    bool in = false, skipping = false;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        bool whole = n && line[n - 1] == '\n';
        if (skipping) {         /* the rest of an over-long line */
            skipping = !whole;
            continue;
        }
        if (!whole && !feof(f)) {   /* too long: ignore the whole line */
            skipping = true;
            continue;
        }
        if (line[0] == ' ' || line[0] == '\t')  /* nested sub-setting */
            continue;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            in = section_is(s, section);
            if (in && found_section)
                *found_section = true;
            continue;
        }
        if (!in)
            continue;
        char *eq = strchr(s, '=');
        if (!eq)
            continue;
        *eq = '\0';
        if (strcmp(trim(s), key) != 0)
            continue;
        char *v = strdup(trim(eq + 1));
        if (!v) {
            rc = -1;
            break;
        }
        free(*out);     /* the last one wins */
        *out = v;
        rc = 1;
    }
    fclose(f);
    return rc;
}

bool store_env_needed(const char *url)
{
    return url && strstr(url, "://") && strncmp(url, "file://", 7) != 0;
}

static const char *env_str(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A copy of the variable's value (NULL when unset); *ok cleared when out
 * of memory. */
static char *env_dup(const char *name, bool *ok)
{
    const char *v = env_str(name);
    if (!v)
        return NULL;
    char *d = strdup(v);
    if (!d)
        *ok = false;
    return d;
}

/* Path of a shared file: the variable, else ~/.aws/NAME (malloc'd). */
static char *aws_file(const char *var, const char *name, bool *ok)
{
    const char *v = env_str(var);
    if (v)
        return env_dup(var, ok);
    const char *home = env_str("HOME");
    if (!home)
        return NULL;
    size_t n = strlen(home) + strlen(name) + 8;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/.aws/%s", home, name);
    else
        *ok = false;
    return p;
}

/* An integer variable within [lo, hi]; *out untouched when unset. */
static dlk_status env_int(const char *name, long long lo, long long hi,
                          long long *out, bool *set, dlk_error *err)
{
    const char *v = env_str(name);
    if (set)
        *set = v != NULL;
    if (!v)
        return DLK_OK;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return fail(err, DLK_EINVAL, "%s must be an integer from %lld to "
                    "%lld, not '%.40s'", name, lo, hi, v);
    *out = x;
    return DLK_OK;
}

static void wipe_free(char *s)
{
    if (s) {
        volatile char *v = s;
        while (*v)
            *v++ = '\0';
        free(s);
    }
}

void store_env_free(store_env *e)
{
    free(e->s3_endpoint);
    free(e->s3_region);
    free(e->s3_access_key_id);
    wipe_free(e->s3_secret_access_key);
    wipe_free(e->s3_session_token);
    free(e->s3_ca_bundle);
    free(e->gcs_endpoint);
    wipe_free(e->gcs_token);
    free(e->gcs_key_file);
    memset(e, 0, sizeof *e);
}

typedef struct profile_src {
    char *cred_file, *conf_file;
    const char *name;
    char *conf_section;   /* "profile NAME", or "default" */
    bool seen;            /* the profile exists in either file */
} profile_src;

/* Look key up in the credentials file's [NAME] (when creds), then the
 * config file's [profile NAME] ([default] for default). */
static int profile_get(profile_src *p, const char *key, bool creds,
                       char **out)
{
    bool sec = false;
    int r = 0;
    if (creds) {
        r = store_env_ini_get(p->cred_file, p->name, key, out, &sec);
        p->seen |= sec;
        if (r)
            return r;
    }
    r = store_env_ini_get(p->conf_file, p->conf_section, key, out, &sec);
    p->seen |= sec;
    return r;
}

static dlk_status load_creds(store_env *e, profile_src *p, bool profile_set,
                             dlk_error *err)
{
    if (env_str("AWS_ACCESS_KEY_ID") && env_str("AWS_SECRET_ACCESS_KEY")) {
        bool ok = true;
        e->s3_access_key_id = env_dup("AWS_ACCESS_KEY_ID", &ok);
        e->s3_secret_access_key = env_dup("AWS_SECRET_ACCESS_KEY", &ok);
        e->s3_session_token = env_dup("AWS_SESSION_TOKEN", &ok);
        return ok ? DLK_OK : oom(err);
    }
    char *id = NULL, *secret = NULL, *token = NULL;
    if (profile_get(p, "aws_access_key_id", true, &id) < 0 ||
        profile_get(p, "aws_secret_access_key", true, &secret) < 0 ||
        profile_get(p, "aws_session_token", true, &token) < 0) {
        free(id);
        wipe_free(secret);
        wipe_free(token);
        return oom(err);
    }
    if (id && *id && secret && *secret) {
        e->s3_access_key_id = id;
        e->s3_secret_access_key = secret;
        e->s3_session_token = token;
        return DLK_OK;
    }
    free(id);
    wipe_free(secret);
    wipe_free(token);
    if (profile_set && !p->seen)
        return fail(err, DLK_EINVAL, "aws profile '%.100s' not found in "
                    "'%.150s' or '%.150s'", p->name,
                    p->cred_file ? p->cred_file : "(none)",
                    p->conf_file ? p->conf_file : "(none)");
    return DLK_OK;   /* no credentials anywhere: anonymous */
}

/* The DLK_S3_* and DLK_GCS_* settings into e->opts. */
static dlk_status load_tuning(store_env *e, dlk_error *err)
{
    dlk_store_options *o = &e->opts;
    const char *nosign = env_str("DLK_S3_NO_SIGN");
    if (nosign && strcmp(nosign, "0") != 0)
        o->s3_no_sign = 1;
    const char *addr = env_str("DLK_S3_ADDRESSING");
    if (addr && strcmp(addr, "path") == 0)
        o->s3_addressing = DLK_S3_ADDRESSING_PATH;
    else if (addr && strcmp(addr, "virtual") == 0)
        o->s3_addressing = DLK_S3_ADDRESSING_VIRTUAL;
    else if (addr && strcmp(addr, "auto") != 0)
        return fail(err, DLK_EINVAL, "DLK_S3_ADDRESSING must be path, "
                    "virtual or auto, not '%.40s'", addr);
    const char *hedge = env_str("DLK_S3_HEDGE");
    if (hedge && strcmp(hedge, "0") != 0 && strcmp(hedge, "1") != 0)
        return fail(err, DLK_EINVAL, "DLK_S3_HEDGE must be 0 or 1, not "
                    "'%.40s'", hedge);
    o->s3_no_hedge = hedge && *hedge == '0';
    /* 0 in the option means the default: the variables' own zeros (io
     * and read threads: by cores) are the defaults too */
    static const struct {
        const char *name;
        long long lo, hi;
        size_t off;
        bool u64;
    } ints[] = {
        {"DLK_S3_MAX_INFLIGHT", 1, 4096,
         offsetof(dlk_store_options, s3_max_inflight), false},
        {"DLK_S3_MAX_ATTEMPTS", 1, 100,
         offsetof(dlk_store_options, s3_max_attempts), false},
        {"DLK_S3_IO_THREADS", 0, 16,
         offsetof(dlk_store_options, s3_io_threads), false},
        {"DLK_S3_READ_THREADS", 0, 16,
         offsetof(dlk_store_options, s3_read_threads), false},
        /* S3 parts: at least 5 MiB (but the last), at most 5 GiB */
        {"DLK_S3_PART_SIZE", 5LL << 20, 5LL << 30,
         offsetof(dlk_store_options, s3_part_size), true},
        {"DLK_S3_MULTIPART_THRESHOLD", 5LL << 20, 5LL << 30,
         offsetof(dlk_store_options, s3_multipart_threshold), true},
        {"DLK_S3_READ_PART_SIZE", 16LL << 10, 1LL << 30,
         offsetof(dlk_store_options, s3_read_part_size), true},
        {"DLK_S3_HEDGE_MIN_MS", 1, 3600000,
         offsetof(dlk_store_options, s3_hedge_min_ms), false},
        /* the bounds of a request and a listing (s3:// and gs://) */
        {"DLK_S3_STALL_RATE", 1, 1LL << 30,
         offsetof(dlk_store_options, s3_stall_rate), false},
        {"DLK_S3_STALL_SECONDS", 1, 3600,
         offsetof(dlk_store_options, s3_stall_seconds), false},
        {"DLK_S3_REQUEST_TIMEOUT", 1, 86400,
         offsetof(dlk_store_options, s3_request_timeout), false},
        {"DLK_S3_LIST_MAX_KEYS", 1, 1LL << 40,
         offsetof(dlk_store_options, s3_list_max_keys), true},
        {"DLK_S3_LIST_MAX_PAGES", 1, 1LL << 40,
         offsetof(dlk_store_options, s3_list_max_pages), true},
        /* GCS: any size from one piece to GCS's 5 TiB; pieces of a
         * resumable upload are multiples of 256 KiB (the store checks) */
        {"DLK_GCS_RESUMABLE_THRESHOLD", 256LL << 10, 5LL << 40,
         offsetof(dlk_store_options, gcs_resumable_threshold), true},
        {"DLK_GCS_PIECE_SIZE", 256LL << 10, 1LL << 30,
         offsetof(dlk_store_options, gcs_piece_size), true},
    };
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        long long v = 0;
        bool set;
        dlk_status rc = env_int(ints[i].name, ints[i].lo, ints[i].hi, &v,
                                &set, err);
        if (rc)
            return rc;
        if (!set)
            continue;
        char *field = (char *)o + ints[i].off;
        if (ints[i].u64)
            *(uint64_t *)(void *)field = (uint64_t)v;
        else
            *(int *)(void *)field = (int)v;
    }
    return DLK_OK;
}

dlk_status store_env_load(store_env *e, bool no_sign, dlk_error *err)
{
    memset(e, 0, sizeof *e);
    dlk_store_options_init(&e->opts);
    dlk_status rc = load_tuning(e, err);
    if (rc)
        return rc;
    if (no_sign)
        e->opts.s3_no_sign = 1;
    bool ok = true;
    profile_src p = {0};
    const char *prof = env_str("AWS_PROFILE");
    bool profile_set = prof != NULL;
    if (!prof)
        prof = env_str("AWS_DEFAULT_PROFILE");
    if (!prof)
        prof = "default";
    p.name = prof;
    p.cred_file = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials",
                           &ok);
    p.conf_file = aws_file("AWS_CONFIG_FILE", "config", &ok);
    size_t sn = strlen(prof) + 10;
    if (ok && (p.conf_section = malloc(sn)))
        snprintf(p.conf_section, sn, strcmp(prof, "default") == 0
                 ? "%s" : "profile %s", prof);
    if (!ok || !p.conf_section) {
        rc = oom(err);
        goto out;
    }
    /* anonymous requests look no credentials up (a profile that is not
     * there is no error then) */
    if (!e->opts.s3_no_sign && (rc = load_creds(e, &p, profile_set, err)))
        goto out;

    e->s3_region = env_dup("AWS_REGION", &ok);
    if (ok && !e->s3_region)
        e->s3_region = env_dup("AWS_DEFAULT_REGION", &ok);
    if (ok && !e->s3_region &&
        profile_get(&p, "region", false, &e->s3_region) < 0)
        ok = false;
    e->s3_endpoint = env_dup("AWS_ENDPOINT_URL_S3", &ok);
    if (ok && !e->s3_endpoint)
        e->s3_endpoint = env_dup("AWS_ENDPOINT_URL", &ok);
    if (ok && !e->s3_endpoint &&
        profile_get(&p, "endpoint_url", false, &e->s3_endpoint) < 0)
        ok = false;
    e->s3_ca_bundle = env_dup("AWS_CA_BUNDLE", &ok);
    /* as Google's client libraries: an emulator (host:port or a URL), a
     * token as it is, or a service account's key file */
    e->gcs_endpoint = env_dup("STORAGE_EMULATOR_HOST", &ok);
    e->gcs_token = env_dup("GOOGLE_OAUTH_ACCESS_TOKEN", &ok);
    e->gcs_key_file = env_dup("GOOGLE_APPLICATION_CREDENTIALS", &ok);
    if (!ok) {
        rc = oom(err);
        goto out;
    }
    dlk_store_options *o = &e->opts;
    o->s3_endpoint = e->s3_endpoint;
    o->s3_region = e->s3_region;
    o->s3_access_key_id = e->s3_access_key_id;
    o->s3_secret_access_key = e->s3_secret_access_key;
    o->s3_session_token = e->s3_session_token;
    o->s3_ca_bundle = e->s3_ca_bundle;
    o->gcs_endpoint = e->gcs_endpoint;
    o->gcs_token = e->gcs_token;
    o->gcs_key_file = e->gcs_key_file;
out:
    if (rc)
        store_env_free(e);
    free(p.cred_file);
    free(p.conf_file);
    free(p.conf_section);
    return rc;
}
