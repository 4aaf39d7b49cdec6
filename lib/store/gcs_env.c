/* gcs_env.c - the GCS store's settings from the environment, the one
 * place the GCS code reads it, so that a caller that takes settings
 * another way fills gcs_options itself. */
#include "gcs_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static dlk_status size_var(const char *name, uint64_t *out, dlk_error *err)
{
    const char *v = env(name);
    *out = 0;
    if (v && (!dlk_parse_size(v, out) || *out == 0))
        return dlk_fail(err, DLK_EINVAL, "%s must be a size such as 8M, "
                        "not '%.40s'", name, v);
    return DLK_OK;
}

dlk_status gcs_options_from_env(gcs_options *o, char *buf, size_t cap,
                                dlk_error *err)
{
    memset(o, 0, sizeof *o);
    /* as Google's client libraries: "host:port", or a URL */
    const char *h = env("STORAGE_EMULATOR_HOST");
    if (h) {
        int n = strstr(h, "://") ? snprintf(buf, cap, "%s", h)
                                 : snprintf(buf, cap, "http://%s", h);
        if (n < 0 || (size_t)n >= cap)
            return dlk_fail(err, DLK_EINVAL, "STORAGE_EMULATOR_HOST is too "
                            "long");
        o->endpoint = buf;
    }
    o->token = env("GOOGLE_OAUTH_ACCESS_TOKEN");
    o->key_file = env("GOOGLE_APPLICATION_CREDENTIALS");
    dlk_status rc = size_var("DLK_GCS_RESUMABLE_THRESHOLD",
                             &o->resumable_threshold, err);
    if (!rc)
        rc = size_var("DLK_GCS_PIECE_SIZE", &o->piece_size, err);
    return rc;
}
