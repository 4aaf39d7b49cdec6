/* store_env.h - the settings of dlk's stores taken from the environment
 * and the AWS shared files, as the AWS tools take them (and, for gs://,
 * as Google's client libraries take theirs).  The library
 * reads neither (it takes a dlk_store_options); the dlk binary and the
 * Python package (which compiles this file in) call this, so that both
 * read the same variables the same way.  Uses only dlk.h and libc. */
#ifndef DLK_STORE_ENV_H
#define DLK_STORE_ENV_H

#include "dlk.h"

#include <stdbool.h>

typedef struct store_env {
    dlk_store_options opts;  /* what to pass; its strings are the ones
                                below, owned by this struct */
    char *s3_endpoint, *s3_region, *s3_access_key_id,
         *s3_secret_access_key, *s3_session_token, *s3_ca_bundle;
    char *gcs_endpoint, *gcs_token, *gcs_key_file;
} store_env;

/* Fill e from (dlk(1) ENVIRONMENT):
 *  - credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+
 *    AWS_SESSION_TOKEN); else the profile's (AWS_PROFILE,
 *    AWS_DEFAULT_PROFILE or "default") in AWS_SHARED_CREDENTIALS_FILE
 *    (~/.aws/credentials), then in AWS_CONFIG_FILE (~/.aws/config); else
 *    none (anonymous).  A profile named by AWS_PROFILE that neither file
 *    has is an error;
 *  - region: AWS_REGION, AWS_DEFAULT_REGION, the profile's region;
 *  - endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 *    endpoint_url; AWS_CA_BUNDLE;
 *  - DLK_S3_NO_SIGN, DLK_S3_ADDRESSING, DLK_S3_MAX_INFLIGHT,
 *    DLK_S3_MAX_ATTEMPTS, DLK_S3_IO_THREADS, DLK_S3_READ_THREADS,
 *    DLK_S3_PART_SIZE, DLK_S3_MULTIPART_THRESHOLD, DLK_S3_READ_PART_SIZE,
 *    DLK_S3_HEDGE, DLK_S3_HEDGE_MIN_MS, DLK_S3_STALL_RATE,
 *    DLK_S3_STALL_SECONDS, DLK_S3_REQUEST_TIMEOUT, DLK_S3_LIST_MAX_KEYS,
 *    DLK_S3_LIST_MAX_PAGES;
 *  - gs://: STORAGE_EMULATOR_HOST, GOOGLE_OAUTH_ACCESS_TOKEN,
 *    GOOGLE_APPLICATION_CREDENTIALS, DLK_GCS_RESUMABLE_THRESHOLD,
 *    DLK_GCS_PIECE_SIZE.
 * An empty variable counts as unset.  no_sign: anonymous requests
 * whatever the environment says (--no-sign-request); no credentials are
 * looked up.
 * @return DLK_OK; DLK_EINVAL naming the variable (never its value when
 *         it is a secret) for a bad value or a missing profile, and
 *         DLK_ENOMEM, with e holding nothing to free. */
dlk_status store_env_load(store_env *e, bool no_sign, dlk_error *err);
/* Whether opening `url` may need what store_env_load reads: any scheme
 * but file:// (a local path needs no settings, so a bad S3 variable does
 * not stop it). */
bool store_env_needed(const char *url);
/* Wipe the secrets and free what e holds; a zeroed e is allowed. */
void store_env_free(store_env *e);

/* Value of `key` in section `section` of an INI file (AWS style: '#' and
 * ';' comments, indented lines are sub-settings and skipped).  Returns 1
 * and a malloc'd *out when found, 0 when not (found_section tells whether
 * the section exists), -1 when out of memory.  A missing or unreadable
 * file is "not found".  Lines longer than a bound are ignored. */
int store_env_ini_get(const char *path, const char *section, const char *key,
                      char **out, bool *found_section);

#endif
