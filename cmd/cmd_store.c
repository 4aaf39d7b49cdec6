/* cmd_store.c - the store settings of a run: the environment and the AWS
 * files (store_env.c), read at the first URL of a remote store (a local
 * dataset never needs them, so a bad S3 variable does not stop it), with
 * the command line's --no-sign-request and --s3-addressing over them. */
#include "cmd.h"
#include "../env/store_env.h"

#include <string.h>

bool cmd_no_sign;
int cmd_s3_addressing = -1;

static store_env env;
static bool loaded;
static dlk_error load_err;
static const dlk_store_options local_opts = DLK_STORE_OPTIONS_INIT;
static int (*cancel_fn)(void *ud);
static void *cancel_ud;

void cmd_store_cancel(int (*fn)(void *ud), void *ud)
{
    cancel_fn = fn;
    cancel_ud = ud;
    env.opts.cancel = fn; /* where loaded already; else at the load */
    env.opts.cancel_ud = ud;
}

dlk_status cmd_store(const char *url, const dlk_store_options **out,
                     dlk_error *err)
{
    if (!loaded && !store_env_needed(url)) {
        *out = &local_opts;
        return DLK_OK;
    }
    if (!loaded) {
        loaded = true;
        if (!store_env_load(&env, cmd_no_sign, &load_err) &&
            cmd_s3_addressing >= 0)
            env.opts.s3_addressing = (dlk_s3_addressing)cmd_s3_addressing;
        env.opts.cancel = cancel_fn;
        env.opts.cancel_ud = cancel_ud;
    }
    if (load_err.code) {
        *out = NULL;
        if (err)
            *err = load_err;
        return load_err.code;
    }
    *out = &env.opts;
    return DLK_OK;
}

dlk_status cmd_dataset_open(const char *url, const char *at,
                            dlk_dataset **out, dlk_error *err)
{
    const dlk_store_options *so;
    dlk_status rc = cmd_store(url, &so, err);
    *out = NULL;
    return rc ? rc : dlk_dataset_open_with(url, at, so, out, err);
}
