/* gcs_auth.c - OAuth 2 access tokens for the GCS store: one given as it
 * is, or exchanged for a service account's JWT (RFC 7523, signed RS256
 * with the key of its key file) at the key's token_uri, and exchanged
 * again before it expires.  Tokens, keys and JWTs never reach a message. */
#include "gcs_internal.h"
#include "util/error.h"
#include "util/text.h"

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY_FILE_MAX (64u << 10)
#define TOKEN_MAX 4096
#define REFRESH_BEFORE_S 300   /* a token this close to expiry is renewed */

struct gcs_auth {
    pthread_mutex_t mu;
    s3_engine *eng;
    char *token;          /* secret; NULL: none yet (or anonymous) */
    int64_t expires;      /* unix s; INT64_MAX: a token given as it is */
    char *email;          /* the service account; NULL: no key */
    char *token_uri;
    EVP_PKEY *key;
};

static void wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void gcs_auth_free(gcs_auth *a)
{
    if (!a)
        return;
    wipe_free(a->token);
    free(a->email);
    free(a->token_uri);
    EVP_PKEY_free(a->key);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

void gcs_auth_redact(gcs_auth *a, dlk_error *err)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    const char *t = a->token;
    Dlk_error_redact(err, &t, 1);
    pthread_mutex_unlock(&a->mu);
}

bool gcs_auth_signed(const gcs_auth *a)
{
    return a->token || a->key;
}

dlk_status gcs_b64url(Dlk_buf *b, const void *p, size_t n, dlk_error *err)
{
    static const char al[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    dlk_status rc = Dlk_buf_reserve(b, n / 3 * 4 + 5, err);
    if (rc)
        return rc;
    const uint8_t *s = p;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        for (int k = 18; k >= 0; k -= 6)
            b->data[b->len++] = (uint8_t)al[(v >> k) & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        b->data[b->len++] = (uint8_t)al[(v >> 18) & 63];
        b->data[b->len++] = (uint8_t)al[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        b->data[b->len++] = (uint8_t)al[(v >> 18) & 63];
        b->data[b->len++] = (uint8_t)al[(v >> 12) & 63];
        b->data[b->len++] = (uint8_t)al[(v >> 6) & 63];
    }
    return DLK_OK;
}

static dlk_status json_part(Dlk_buf *b, json_t *j, dlk_error *err)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!s)
        return Dlk_oom(err);
    dlk_status rc = gcs_b64url(b, s, strlen(s), err);
    free(s);
    return rc;
}

dlk_status gcs_jwt_make(const char *email, const char *scope,
                        const char *token_uri, int64_t now, EVP_PKEY *key,
                        char **out, dlk_error *err)
{
    *out = NULL;
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = json_part(&b, json_pack("{s:s, s:s}", "alg", "RS256",
                                            "typ", "JWT"), err);
    if (!rc)
        rc = Dlk_buf_append(&b, ".", 1, err);
    if (!rc)
        rc = json_part(&b, json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss",
                                     email, "scope", scope, "aud", token_uri,
                                     "iat", (json_int_t)now, "exp",
                                     (json_int_t)(now + 3600)), err);
    uint8_t sig[1024];
    size_t siglen = sizeof sig;
    EVP_MD_CTX *ctx = rc ? NULL : EVP_MD_CTX_new();
    if (!rc && (!ctx ||
                EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
                EVP_DigestSign(ctx, sig, &siglen, b.data, b.len) != 1))
        rc = Dlk_fail(err, DLK_EAUTH, "cannot sign a token request with the "
                      "service account's key (an RSA key is needed)");
    EVP_MD_CTX_free(ctx);
    if (!rc)
        rc = Dlk_buf_append(&b, ".", 1, err);
    if (!rc)
        rc = gcs_b64url(&b, sig, siglen, err);
    if (!rc)
        rc = Dlk_buf_append(&b, "", 1, err);
    if (rc) {
        Dlk_buf_free(&b);
        return rc;
    }
    *out = (char *)b.data;
    return DLK_OK;
}

dlk_status gcs_token_parse(const void *body, size_t len, char **token,
                           int64_t *expires_in, dlk_error *err)
{
    *token = NULL;
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    json_t *t = json_object_get(j, "access_token");
    json_t *e = json_object_get(j, "expires_in");
    const char *ts = json_string_value(t);
    bool ok = ts && *ts && strlen(ts) < TOKEN_MAX && !strpbrk(ts, "\r\n") &&
              (!e || json_is_integer(e));
    if (ok) {
        *expires_in = e ? (int64_t)json_integer_value(e) : 3600;
        *token = strdup(ts);
    }
    json_decref(j);
    if (!ok)
        return Dlk_fail(err, DLK_EAUTH, "the token endpoint's answer holds "
                        "no access token");
    return *token ? DLK_OK : Dlk_oom(err);
}

/* Read and check the key file: a service account's client_email,
 * private_key and token_uri. */
static dlk_status load_key(gcs_auth *a, const char *path, dlk_error *err)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j)
        return Dlk_fail(err, DLK_EAUTH, "cannot read the service-account "
                        "key '%s': %s", path, je.text);
    dlk_status rc = DLK_OK;
    const char *type = json_string_value(json_object_get(j, "type"));
    const char *email = json_string_value(json_object_get(j, "client_email"));
    const char *pem = json_string_value(json_object_get(j, "private_key"));
    const char *uri = json_string_value(json_object_get(j, "token_uri"));
    if (type && strcmp(type, "service_account") != 0)
        rc = Dlk_fail(err, DLK_EUNSUPPORTED, "credentials '%s' are of type "
                      "'%.40s'; only a service-account key is read", path,
                      type);
    else if (!email || !pem)
        rc = Dlk_fail(err, DLK_EAUTH, "service-account key '%s' lacks "
                      "client_email or private_key", path);
    if (!rc) {
        BIO *bio = BIO_new_mem_buf(pem, -1);
        a->key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
        BIO_free(bio);
        if (!a->key)
            rc = Dlk_fail(err, DLK_EAUTH, "service-account key '%s': "
                          "private_key is not a PEM private key", path);
    }
    if (!rc) {
        a->email = strdup(email);
        a->token_uri = strdup(uri && *uri ? uri : GCS_TOKEN_URI);
        if (!a->email || !a->token_uri)
            rc = Dlk_oom(err);
    }
    json_decref(j);
    return rc;
}

dlk_status gcs_auth_new(const char *token, const char *key_file,
                        s3_engine *eng, gcs_auth **out, dlk_error *err)
{
    *out = NULL;
    gcs_auth *a = calloc(1, sizeof *a);
    if (!a)
        return Dlk_oom(err);
    pthread_mutex_init(&a->mu, NULL);
    a->eng = eng;
    dlk_status rc = DLK_OK;
    if (token && *token) {
        /* a header line would let a newline inject others */
        if (strlen(token) >= TOKEN_MAX || strpbrk(token, "\r\n"))
            rc = Dlk_fail(err, DLK_EINVAL, "the access token is malformed");
        else if (!(a->token = strdup(token)))
            rc = Dlk_oom(err);
        a->expires = INT64_MAX;
    } else if (key_file && *key_file) {
        rc = load_key(a, key_file, err);
    }
    if (rc) {
        gcs_auth_free(a);
        return rc;
    }
    *out = a;
    return DLK_OK;
}

/* A new token for the key's JWT (a->mu held). */
static dlk_status exchange(gcs_auth *a, dlk_error *err)
{
    int64_t now = (int64_t)time(NULL);
    char *jwt;
    dlk_status rc = gcs_jwt_make(a->email, GCS_SCOPE, a->token_uri, now,
                                 a->key, &jwt, err);
    if (rc)
        return rc;
    static const char pre[] =
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
        "&assertion=";
    Dlk_buf body, resp;
    Dlk_buf_init(&body);
    Dlk_buf_init(&resp);
    rc = Dlk_buf_append(&body, pre, sizeof pre - 1, err);
    if (!rc)    /* base64url and '.' need no percent-encoding */
        rc = Dlk_buf_append(&body, jwt, strlen(jwt), err);
    wipe_free(jwt);
    struct curl_slist *h = curl_slist_append(
        NULL, "Content-Type: application/x-www-form-urlencoded");
    if (!rc && !h)
        rc = Dlk_oom(err);
    s3_req r = {0};
    if (!rc) {
        r.method = "POST";
        r.url = a->token_uri;
        r.headers = h;
        r.body = body.data;
        r.body_len = body.len;
        r.out = &resp;
        r.max = 1u << 20;
        s3_perform(a->eng, &r);
        if (r.status == 0)
            rc = Dlk_fail(err, DLK_ENET, "cannot reach the token endpoint "
                          "'%s': %s", a->token_uri, r.curl_msg);
        else if (r.status < 200 || r.status >= 300)
            /* the answer's "error" is a fixed word; its text may quote
             * the request, so it is left out */
            rc = Dlk_fail(err, DLK_EAUTH, "the token endpoint '%s' refused "
                          "service account '%s': HTTP %ld", a->token_uri,
                          a->email, r.status);
    }
    int64_t ttl = 0;
    char *tok = NULL;
    if (!rc)
        rc = gcs_token_parse(resp.data, resp.len, &tok, &ttl, err);
    if (!rc) {
        wipe_free(a->token);
        a->token = tok;
        a->expires = now + ttl;
    }
    s3_req_fini(&r);
    curl_slist_free_all(h);
    if (body.data)
        OPENSSL_cleanse(body.data, body.len);
    Dlk_buf_free(&body);
    if (resp.data)
        OPENSSL_cleanse(resp.data, resp.len);
    Dlk_buf_free(&resp);
    return rc;
}

dlk_status gcs_auth_header(gcs_auth *a, struct curl_slist **h,
                           dlk_error *err)
{
    if (!gcs_auth_signed(a))
        return DLK_OK;
    dlk_status rc = DLK_OK;
    pthread_mutex_lock(&a->mu);
    if (a->key && (!a->token ||
                   a->expires - REFRESH_BEFORE_S <= (int64_t)time(NULL)))
        rc = exchange(a, err);
    char line[TOKEN_MAX + 32];
    if (!rc)
        snprintf(line, sizeof line, "Authorization: Bearer %s", a->token);
    pthread_mutex_unlock(&a->mu);
    if (rc)
        return rc;
    struct curl_slist *t = curl_slist_append(*h, line);
    OPENSSL_cleanse(line, sizeof line);
    if (!t)
        return Dlk_oom(err);
    *h = t;
    return DLK_OK;
}
