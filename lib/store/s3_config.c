/* s3_config.c - endpoint, region, credentials and tuning for the S3
 * store, taken the way the AWS tools take them: environment first, then
 * the profile's sections in ~/.aws/credentials and ~/.aws/config.
 *
 * Credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
 * AWS_SESSION_TOKEN); else the profile (AWS_PROFILE, AWS_DEFAULT_PROFILE
 * or "default") in the credentials file, then in the config file; else
 * anonymous.  DLK_S3_NO_SIGN=1 forces anonymous requests. */
#include "s3_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INI_LINE_MAX 4096

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

int s3_ini_get(const char *path, const char *section, const char *key,
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

static char *env_dup(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

static const char *env_str(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Path of a shared file: the variable, else ~/.aws/NAME (malloc'd). */
static char *aws_file(const char *var, const char *name)
{
    const char *v = env_str(var);
    if (v)
        return strdup(v);
    const char *home = env_str("HOME");
    if (!home)
        return NULL;
    size_t n = strlen(home) + strlen(name) + 8;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/.aws/%s", home, name);
    return p;
}

static dlk_status env_int(const char *name, long lo, long hi, long def,
                          long *out, dlk_error *err)
{
    const char *v = env_str(name);
    *out = def;
    if (!v)
        return DLK_OK;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return dlk_fail(err, DLK_EINVAL, "%s must be an integer from %ld "
                        "to %ld, not '%.40s'", name, lo, hi, v);
    *out = x;
    return DLK_OK;
}

typedef struct profile_src {
    char *cred_file, *conf_file;
    const char *name;
    char *conf_section;   /* "profile NAME", or "default" */
    bool seen;            /* the profile exists in either file */
} profile_src;

/* Look key up in the credentials file's [NAME], then the config file's
 * [profile NAME] ([default] for default).  creds_first=false: config
 * only (region, endpoint_url live there). */
static int profile_get(profile_src *p, const char *key, bool creds,
                       char **out)
{
    bool sec = false;
    int r = 0;
    if (creds) {
        r = s3_ini_get(p->cred_file, p->name, key, out, &sec);
        p->seen |= sec;
        if (r)
            return r;
    }
    r = s3_ini_get(p->conf_file, p->conf_section, key, out, &sec);
    p->seen |= sec;
    return r;
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

static dlk_status oom(s3_config *c, profile_src *p, dlk_error *err)
{
    s3_config_free(c);
    free(p->cred_file);
    free(p->conf_file);
    free(p->conf_section);
    return dlk_fail(err, DLK_ENOMEM, "out of memory reading the aws "
                    "configuration");
}

static dlk_status load_creds(s3_config *c, profile_src *p, bool profile_set,
                             dlk_error *err)
{
    const char *nosign = env_str("DLK_S3_NO_SIGN");
    if (nosign && strcmp(nosign, "0") != 0)
        return DLK_OK;
    if (env_str("AWS_ACCESS_KEY_ID") && env_str("AWS_SECRET_ACCESS_KEY")) {
        c->access_key = env_dup("AWS_ACCESS_KEY_ID");
        c->secret_key = env_dup("AWS_SECRET_ACCESS_KEY");
        c->session_token = env_dup("AWS_SESSION_TOKEN");
        if (!c->access_key || !c->secret_key ||
            (env_str("AWS_SESSION_TOKEN") && !c->session_token))
            return DLK_ENOMEM;
        return DLK_OK;
    }
    char *id = NULL, *secret = NULL, *token = NULL;
    if (profile_get(p, "aws_access_key_id", true, &id) < 0 ||
        profile_get(p, "aws_secret_access_key", true, &secret) < 0 ||
        profile_get(p, "aws_session_token", true, &token) < 0) {
        free(id);
        wipe_free(secret);
        wipe_free(token);
        return DLK_ENOMEM;
    }
    if (id && *id && secret && *secret) {
        c->access_key = id;
        c->secret_key = secret;
        c->session_token = token;
        return DLK_OK;
    }
    free(id);
    wipe_free(secret);
    wipe_free(token);
    if (profile_set && !p->seen)
        return dlk_fail(err, DLK_EINVAL, "aws profile '%.100s' not found in "
                        "'%.150s' or '%.150s'", p->name,
                        p->cred_file ? p->cred_file : "(none)",
                        p->conf_file ? p->conf_file : "(none)");
    return DLK_OK;   /* no credentials anywhere: anonymous */
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
            return DLK_ENOMEM;
        snprintf(p, n, "https://%s", e);
        free(e);
        c->endpoint = e = p;
    }
    size_t n = strlen(e);
    while (n > 8 && e[n - 1] == '/')
        e[--n] = '\0';
    for (const char *q = e; *q; q++)
        if ((unsigned char)*q <= ' ' || *q == '?' || *q == '#' || *q == '@')
            return dlk_fail(err, DLK_EINVAL, "invalid s3 endpoint url "
                            "'%.200s'", e);
    return DLK_OK;
}

dlk_status s3_config_load(s3_config *c, dlk_error *err)
{
    memset(c, 0, sizeof *c);
    profile_src p = {0};
    const char *prof = env_str("AWS_PROFILE");
    bool profile_set = prof != NULL;
    if (!prof)
        prof = env_str("AWS_DEFAULT_PROFILE");
    if (!prof)
        prof = "default";
    p.name = prof;
    p.cred_file = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    p.conf_file = aws_file("AWS_CONFIG_FILE", "config");
    size_t sn = strlen(prof) + 10;
    p.conf_section = malloc(sn);
    if (!p.conf_section)
        return oom(c, &p, err);
    if (strcmp(prof, "default") == 0)
        snprintf(p.conf_section, sn, "default");
    else
        snprintf(p.conf_section, sn, "profile %s", prof);

    dlk_status rc = load_creds(c, &p, profile_set, err);
    if (rc == DLK_ENOMEM)
        return oom(c, &p, err);
    if (rc) {
        s3_config_free(c);
        goto out;
    }

    c->region = env_dup("AWS_REGION");
    if (!c->region)
        c->region = env_dup("AWS_DEFAULT_REGION");
    if (!c->region && profile_get(&p, "region", false, &c->region) < 0)
        return oom(c, &p, err);
    if (!c->region && !(c->region = strdup("us-east-1")))
        return oom(c, &p, err);

    c->endpoint = env_dup("AWS_ENDPOINT_URL_S3");
    if (!c->endpoint)
        c->endpoint = env_dup("AWS_ENDPOINT_URL");
    if (!c->endpoint &&
        profile_get(&p, "endpoint_url", false, &c->endpoint) < 0)
        return oom(c, &p, err);
    if (c->endpoint && !*c->endpoint) {
        free(c->endpoint);
        c->endpoint = NULL;
    }
    rc = check_endpoint(c, err);
    if (rc == DLK_ENOMEM)
        return oom(c, &p, err);
    if (rc) {
        s3_config_free(c);
        goto out;
    }
    c->ca_bundle = env_dup("AWS_CA_BUNDLE");

    /* path-style for custom endpoints, virtual-hosted for AWS */
    c->path_style = c->endpoint != NULL;
    const char *addr = env_str("DLK_S3_ADDRESSING");
    if (addr && strcmp(addr, "path") == 0)
        c->path_style = true;
    else if (addr && strcmp(addr, "virtual") == 0) {
        c->path_style = false;
        c->force_virtual = true;
    } else if (addr && strcmp(addr, "auto") != 0) {
        s3_config_free(c);
        rc = dlk_fail(err, DLK_EINVAL, "DLK_S3_ADDRESSING must be path, "
                      "virtual or auto, not '%.40s'", addr);
        goto out;
    }

    long v;
    if ((rc = env_int("DLK_S3_MAX_INFLIGHT", 1, 4096, 64, &v, err)))
        goto bad;
    c->max_inflight = (int)v;
    const char *mi = getenv("DLK_S3_MAX_INFLIGHT");
    c->max_inflight_set = mi && *mi;
    if ((rc = env_int("DLK_S3_MAX_ATTEMPTS", 1, 100, 8, &v, err)))
        goto bad;
    c->max_attempts = (int)v;
    if ((rc = env_int("DLK_S3_IO_THREADS", 0, 16, 0, &v, err)))
        goto bad;
    c->io_threads = (int)v;
    /* S3 parts: at least 5 MiB (but the last), at most 5 GiB */
    if ((rc = env_int("DLK_S3_PART_SIZE", 5L << 20, 5L << 30, 16L << 20,
                      &v, err)))
        goto bad;
    c->part_size = (uint64_t)v;
    if ((rc = env_int("DLK_S3_MULTIPART_THRESHOLD", 5L << 20, 5L << 30,
                      64L << 20, &v, err)))
        goto bad;
    c->multipart_threshold = (uint64_t)v;
    if ((rc = env_int("DLK_S3_READ_PART_SIZE", 16L << 10, 1L << 30, 8L << 20,
                      &v, err)))
        goto bad;
    c->read_part_size = (uint64_t)v;
    if ((rc = env_int("DLK_S3_READ_THREADS", 0, 16, 0, &v, err)))
        goto bad;
    c->read_threads = (int)v;
    goto out;
bad:
    s3_config_free(c);
out:
    free(p.cred_file);
    free(p.conf_file);
    free(p.conf_section);
    return rc;
}
