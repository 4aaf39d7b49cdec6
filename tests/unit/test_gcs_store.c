/* test_gcs_store.c - the GCS store (lib/store/gcs*.c).
 *
 * Without a server: the service-account flow (a JWT signed with an RSA
 * key made here, its header, claims and signature checked with OpenSSL;
 * the token exchange and the token's use against a small HTTP responder
 * in this process, which answers as GCS and its token endpoint do), and
 * GCS's answers that the emulator never gives, replayed as recorded from
 * GCS's documentation: 429 rateLimitExceeded and 503 backendError then
 * success (retried), 401 authError (DLK_EAUTH, no token in the message),
 * a refused JWT (invalid_grant).
 *
 * With DLK_TEST_GCS_URL=gs://bucket/prefix and GCS_ENDPOINT (set by
 * tests/t/t342-gcs-store.sh, fake-gcs-server): range reads, create-only
 * and replace by generation, a resumable upload in pieces; with
 * DLK_TEST_GCS_FAULTS=N the endpoint is tests/faultproxy.py and N objects
 * (some through resumable uploads) must read back byte for byte.
 * DLK_TEST_GCS_CUT=URL a faultproxy.py in front of GCS_ENDPOINT that cuts
 * every answer's body short: an object written directly fails every
 * kind of read through it as the network's fault.
 * DLK_TEST_GCS_NORANGE=URL one that drops Range: ranged reads through it
 * fail, saying the server does not serve ranges. */
#include "util/buf.h"
#include "store/store.h"
#include "store/gcs_internal.h"
#include "unit.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a one-connection-at-a-time HTTP responder ---------------------- */

typedef struct answer {
    int status;
    const char *headers;   /* extra header lines, each ending "\r\n" */
    const char *body;
} answer;

typedef struct responder {
    int fd, port;
    pthread_t th;
    EVP_PKEY *pub;        /* checks the JWT of a token request */
    /* scripted answers for requests to /storage and /upload, in order;
     * past the end: 500 */
    const answer *script;
    size_t nscript, next;
    int token_requests, storage_requests;
    bool token_ok;         /* the last JWT verified */
    bool bearer_ok;        /* every storage request carried tok-1 */
    bool refuse_token;     /* answer token requests 400 invalid_grant */
    bool short_token;      /* hand out tokens that expire in 100 s */
    char last_jwt[4096];
    pthread_mutex_t mu;
} responder;

static size_t b64url_dec(const char *s, size_t n, uint8_t *out)
{
    static const char al[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = strchr(al, s[i]);
        if (!p || !s[i])
            return (size_t)-1;
        acc = acc << 6 | (uint32_t)(p - al);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (uint8_t)(acc >> bits);
        }
    }
    return k;
}

/* header.claims.signature checked: alg RS256, the claims, the signature
 * over "header.claims" with pub */
static bool jwt_ok(const char *jwt, EVP_PKEY *pub, const char *email,
                   const char *aud, json_t **claims_out)
{
    const char *d1 = strchr(jwt, '.');
    const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d2)
        return false;
    uint8_t hb[512], cb[2048], sig[1024];
    size_t hn = b64url_dec(jwt, (size_t)(d1 - jwt), hb);
    size_t cn = b64url_dec(d1 + 1, (size_t)(d2 - d1 - 1), cb);
    size_t sn = b64url_dec(d2 + 1, strlen(d2 + 1), sig);
    if (hn == (size_t)-1 || cn == (size_t)-1 || sn == (size_t)-1)
        return false;
    json_error_t je;
    json_t *h = json_loadb((const char *)hb, hn, 0, &je);
    json_t *c = json_loadb((const char *)cb, cn, 0, &je);
    const char *alg = json_string_value(json_object_get(h, "alg"));
    const char *typ = json_string_value(json_object_get(h, "typ"));
    const char *iss = json_string_value(json_object_get(c, "iss"));
    const char *scope = json_string_value(json_object_get(c, "scope"));
    const char *a = json_string_value(json_object_get(c, "aud"));
    json_int_t iat = json_integer_value(json_object_get(c, "iat"));
    json_int_t exp = json_integer_value(json_object_get(c, "exp"));
    bool ok = alg && strcmp(alg, "RS256") == 0 && typ &&
              strcmp(typ, "JWT") == 0 && iss && strcmp(iss, email) == 0 &&
              scope && strcmp(scope, GCS_SCOPE) == 0 && a &&
              strcmp(a, aud) == 0 && exp - iat == 3600 &&
              labs((long)(iat - time(NULL))) < 60;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    ok = ok && ctx &&
         EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pub) == 1 &&
         EVP_DigestVerify(ctx, sig, sn, (const uint8_t *)jwt,
                          (size_t)(d2 - jwt)) == 1;
    EVP_MD_CTX_free(ctx);
    json_decref(h);
    if (claims_out)
        *claims_out = c;
    else
        json_decref(c);
    return ok;
}

static void reply(int c, int status, const char *headers, const char *body)
{
    char head[1024];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Length: "
                     "%zu\r\nContent-Type: application/json\r\n%s\r\n",
                     status, strlen(body), headers ? headers : "");
    if (write(c, head, (size_t)n) < 0 || write(c, body, strlen(body)) < 0)
        return;
}

static void *serve(void *arg)
{
    responder *R = arg;
    for (;;) {
        int c = accept(R->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        /* one request a connection: read headers and body, answer, close */
        char buf[1 << 16];
        size_t got = 0;
        char *end = NULL;
        ssize_t k;
        while (got < sizeof buf - 1 &&
               (k = read(c, buf + got, sizeof buf - 1 - got)) > 0) {
            got += (size_t)k;
            buf[got] = '\0';
            if ((end = strstr(buf, "\r\n\r\n"))) {
                const char *cl = strcasestr(buf, "content-length:");
                size_t want = cl ? strtoul(cl + 15, NULL, 10) : 0;
                while (got - (size_t)(end + 4 - buf) < want &&
                       got < sizeof buf - 1 &&
                       (k = read(c, buf + got, sizeof buf - 1 - got)) > 0)
                    got += (size_t)k;
                buf[got] = '\0';
                break;
            }
        }
        if (!end) {
            close(c);
            continue;
        }
        pthread_mutex_lock(&R->mu);
        if (strncmp(buf, "POST /token ", 12) == 0) {
            R->token_requests++;
            const char *a = strstr(end + 4, "&assertion=");
            bool grant = strstr(end + 4, "grant_type=urn%3Aietf%3Aparams%3A"
                                "oauth%3Agrant-type%3Ajwt-bearer") != NULL;
            snprintf(R->last_jwt, sizeof R->last_jwt, "%s", a ? a + 11 : "");
            char aud[64];
            snprintf(aud, sizeof aud, "http://127.0.0.1:%d/token", R->port);
            R->token_ok = grant && a &&
                          jwt_ok(R->last_jwt, R->pub, "t@p.iam.example", aud,
                                 NULL);
            if (R->refuse_token)
                reply(c, 400, NULL, "{\"error\":\"invalid_grant\","
                      "\"error_description\":\"Invalid JWT Signature.\"}");
            else if (R->short_token)
                reply(c, 200, NULL, "{\"access_token\":\"tok-1\","
                      "\"expires_in\":100,\"token_type\":\"Bearer\"}");
            else
                reply(c, 200, NULL, "{\"access_token\":\"tok-1\","
                      "\"expires_in\":3599,\"token_type\":\"Bearer\"}");
        } else {
            R->storage_requests++;
            if (!strstr(buf, "\r\nAuthorization: Bearer tok-1\r\n"))
                R->bearer_ok = false;
            const answer *an = R->next < R->nscript ? &R->script[R->next++]
                                                    : NULL;
            if (an)
                reply(c, an->status, an->headers, an->body);
            else
                reply(c, 500, NULL, "{}");
        }
        pthread_mutex_unlock(&R->mu);
        close(c);
    }
}

static bool responder_start(responder *R, EVP_PKEY *pub)
{
    memset(R, 0, sizeof *R);
    pthread_mutex_init(&R->mu, NULL);
    R->pub = pub;
    R->bearer_ok = true;
    R->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (R->fd < 0 || bind(R->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(R->fd, 16) != 0 ||
        getsockname(R->fd, (struct sockaddr *)&a, &al) != 0)
        return false;
    R->port = ntohs(a.sin_port);
    return pthread_create(&R->th, NULL, serve, R) == 0;
}

static void responder_stop(responder *R)
{
    shutdown(R->fd, SHUT_RDWR);
    close(R->fd);
    pthread_join(R->th, NULL);
    pthread_mutex_destroy(&R->mu);
}

static void responder_script(responder *R, const answer *s, size_t n)
{
    pthread_mutex_lock(&R->mu);
    R->script = s;
    R->nscript = n;
    R->next = 0;
    R->storage_requests = 0;
    pthread_mutex_unlock(&R->mu);
}

/* ---- without a server ------------------------------------------------ */

/* GCS's answers as its documentation records them */
#define OBJ_OK "{\"kind\":\"storage#object\",\"name\":\"p/k\",\"bucket\":" \
    "\"bkt\",\"generation\":\"1700000000000001\",\"size\":\"5\"," \
    "\"updated\":\"2026-01-02T03:04:05.678Z\"}"
#define RATE_429 "{\"error\":{\"code\":429,\"message\":\"The object " \
    "exceeded the rate limit for object mutation operations (create, " \
    "update, and delete). Please reduce your request rate.\",\"errors\":" \
    "[{\"message\":\"The object exceeded the rate limit for object " \
    "mutation operations.\",\"domain\":\"usageLimits\",\"reason\":" \
    "\"rateLimitExceeded\"}]}}"
#define BACKEND_503 "{\"error\":{\"code\":503,\"message\":\"Backend " \
    "Error\",\"errors\":[{\"message\":\"Backend Error\",\"domain\":" \
    "\"global\",\"reason\":\"backendError\"}]}}"
#define AUTH_401 "{\"error\":{\"code\":401,\"message\":\"Invalid " \
    "Credentials\",\"errors\":[{\"message\":\"Invalid Credentials\"," \
    "\"domain\":\"global\",\"reason\":\"authError\",\"locationType\":" \
    "\"header\",\"location\":\"Authorization\"}]}}"
#define PRECOND_412 "{\"error\":{\"code\":412,\"message\":\"At least one " \
    "of the pre-conditions you specified did not hold.\",\"errors\":[{" \
    "\"message\":\"At least one of the pre-conditions you specified did " \
    "not hold.\",\"domain\":\"global\",\"reason\":\"conditionNotMet\"," \
    "\"locationType\":\"header\",\"location\":\"If-Match\"}]}}"

static void test_b64url(void)
{
    Dlk_buf b;
    Dlk_buf_init(&b);
    bool ok = gcs_b64url(&b, "\xfb\xff\xbf", 3, NULL) == DLK_OK &&
              gcs_b64url(&b, "ab", 2, NULL) == DLK_OK &&
              gcs_b64url(&b, "a", 1, NULL) == DLK_OK;
    UNIT_CHECK("base64url: '-' and '_', no padding",
               ok && b.len == 4 + 3 + 2 && memcmp(b.data, "-_-_YWIYQ", 9) == 0);
    Dlk_buf_free(&b);
}

static char key_path[64];

/* an RSA key and a service-account key file naming the responder */
static EVP_PKEY *make_key_file(int port)
{
    EVP_PKEY *k = EVP_RSA_gen(2048);
    if (!k)
        return NULL;
    BIO *bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, k, NULL, NULL, 0, NULL, NULL);
    char *pem = NULL;
    long n = BIO_get_mem_data(bio, &pem);
    char *p = strndup(pem, (size_t)n);
    BIO_free(bio);
    char uri[64];
    snprintf(uri, sizeof uri, "http://127.0.0.1:%d/token", port);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "type",
                          "service_account", "project_id", "p",
                          "client_email", "t@p.iam.example", "private_key", p,
                          "token_uri", uri);
    snprintf(key_path, sizeof key_path, "/tmp/dlk-gcs-key-XXXXXX");
    int fd = mkstemp(key_path);
    if (fd >= 0) {
        close(fd);
        json_dump_file(j, key_path, 0);
    }
    json_decref(j);
    free(p);
    return k;
}

static Dlk_store *open_at(int port, const char *key_file, const char *token)
{
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", port);
    dlk_store_options o = {.size = sizeof o,
                           .gcs_endpoint = ep, .gcs_key_file = key_file,
                           .gcs_token = token};
    Dlk_store *s = NULL;
    dlk_error err = {0};
    if (Dlk_store_open_gcs("gs://bkt/p", &o, &s, &err) != DLK_OK)
        printf("# open: %s\n", err.msg);
    return s;
}

static void test_jwt(EVP_PKEY *k)
{
    char *jwt = NULL;
    int64_t now = (int64_t)time(NULL);
    dlk_status rc = gcs_jwt_make("t@p.iam.example", GCS_SCOPE,
                                 "https://oauth2.googleapis.com/token", now,
                                 k, &jwt, NULL);
    UNIT_CHECK("jwt: made", rc == DLK_OK && jwt);
    json_t *claims = NULL;
    UNIT_CHECK("jwt: RS256 header, iss/scope/aud/iat/exp claims, signature "
               "verifies with the public key",
               jwt && jwt_ok(jwt, k, "t@p.iam.example",
                             "https://oauth2.googleapis.com/token", &claims));
    UNIT_CHECK("jwt: iat is now",
               json_integer_value(json_object_get(claims, "iat")) == now);
    json_decref(claims);
    if (jwt) {   /* one byte of the claims changed: the signature fails */
        char *d = strchr(jwt, '.');
        d[3] = d[3] == 'A' ? 'B' : 'A';
        UNIT_CHECK("jwt: a changed claim fails the signature",
                   !jwt_ok(jwt, k, "t@p.iam.example",
                           "https://oauth2.googleapis.com/token", NULL));
    }
    free(jwt);
    char *tok = NULL;
    int64_t ttl = 0;
    const char good[] = "{\"access_token\":\"ya29.x\",\"expires_in\":3599}";
    UNIT_CHECK("token answer parsed",
               gcs_token_parse(good, strlen(good), &tok, &ttl, NULL) == 0 &&
               tok && strcmp(tok, "ya29.x") == 0 && ttl == 3599);
    free(tok);
    tok = NULL;
    const char bad[] = "{\"access_token\":\"a\\r\\nX-Injected: 1\"}";
    UNIT_CHECK("a token with a line break is refused",
               gcs_token_parse(bad, strlen(bad), &tok, &ttl, NULL) ==
                   DLK_EAUTH && !tok);
}

static void test_exchange(responder *R)
{
    Dlk_store *s = open_at(R->port, key_path, NULL);
    UNIT_CHECK("open with a service-account key", s != NULL);
    if (!s)
        return;
    static const answer get_ok[] = {
        {200, "x-goog-generation: 1700000000000001\r\n", "hello"},
        {200, "x-goog-generation: 1700000000000001\r\n", "hello"},
    };
    responder_script(R, get_ok, 2);
    Dlk_buf out;
    Dlk_buf_init(&out);
    Dlk_obj_info info;
    dlk_error err = {0};
    dlk_status rc = Dlk_store_get(s, "k", 1 << 20, &out, &info, &err);
    UNIT_CHECK("get with a token from the exchange",
               rc == DLK_OK && out.len == 5 && memcmp(out.data, "hello", 5) == 0);
    UNIT_CHECK("the token endpoint got a valid signed JWT",
               R->token_requests == 1 && R->token_ok);
    UNIT_CHECK("the request carried 'Authorization: Bearer tok-1'",
               R->bearer_ok && R->storage_requests == 1);
    UNIT_CHECK("the generation is the etag",
               strcmp(info.etag, "1700000000000001") == 0);
    out.len = 0;
    rc = Dlk_store_get(s, "k", 1 << 20, &out, NULL, &err);
    UNIT_CHECK("a second request reuses the token",
               rc == DLK_OK && R->token_requests == 1);

    /* 429 and 503, then success: retried with backoff */
    static const answer busy[] = {
        {429, NULL, RATE_429}, {503, NULL, BACKEND_503}, {200, NULL, OBJ_OK},
    };
    responder_script(R, busy, 3);
    Dlk_obj_info pi;
    rc = Dlk_store_put(s, "k", "hello", 5, DLK_PUT_IF_ABSENT, NULL, &pi, &err);
    UNIT_CHECK("429 rateLimitExceeded and 503 backendError are retried",
               rc == DLK_OK && R->storage_requests == 3);
    UNIT_CHECK("the new generation from the answer",
               strcmp(pi.etag, "1700000000000001") == 0 &&
               pi.mtime == 1767323045);

    static const answer cond[] = {{412, NULL, PRECOND_412},
                                  {412, NULL, PRECOND_412}};
    responder_script(R, cond, 2);
    rc = Dlk_store_put(s, "k", "x", 1, DLK_PUT_IF_ABSENT, NULL, NULL, &err);
    UNIT_CHECK("412 to a create-only write: DLK_EEXIST", rc == DLK_EEXIST);
    rc = Dlk_store_put(s, "k", "x", 1, DLK_PUT_IF_MATCH, "17", NULL, &err);
    UNIT_CHECK("412 to a replacement: DLK_ECONFLICT", rc == DLK_ECONFLICT);
    rc = Dlk_store_put(s, "k", "x", 1, DLK_PUT_IF_MATCH, "17&x=1", NULL, &err);
    UNIT_CHECK("a generation that is not a number is refused",
               rc == DLK_EINVAL);

    static const answer denied[] = {{401, NULL, AUTH_401}};
    responder_script(R, denied, 1);
    out.len = 0;
    rc = Dlk_store_get(s, "k", 1 << 20, &out, NULL, &err);
    UNIT_CHECK("401 authError: DLK_EAUTH naming the object",
               rc == DLK_EAUTH && strstr(err.msg, "gs://bkt/p/k") &&
               strstr(err.msg, "Invalid Credentials"));
    UNIT_CHECK("the message holds no token", !strstr(err.msg, "tok-1"));
    Dlk_store_free(s);

    /* the token endpoint refuses the JWT */
    R->refuse_token = true;
    s = open_at(R->port, key_path, NULL);
    out.len = 0;
    rc = s ? Dlk_store_get(s, "k", 1 << 20, &out, NULL, &err) : DLK_EINTERNAL;
    UNIT_CHECK("a refused JWT: DLK_EAUTH naming the account",
               rc == DLK_EAUTH && strstr(err.msg, "t@p.iam.example"));
    UNIT_CHECK("the message holds no JWT",
               R->last_jwt[0] && !strstr(err.msg, R->last_jwt) &&
               !strstr(err.msg, "eyJ"));
    R->refuse_token = false;
    Dlk_store_free(s);

    /* a token about to expire (100 s, under the 5 minutes kept in hand)
     * is exchanged again before the next request */
    R->short_token = true;
    s = open_at(R->port, key_path, NULL);
    responder_script(R, get_ok, 2);
    int t0 = R->token_requests;
    out.len = 0;
    rc = s ? Dlk_store_get(s, "k", 1 << 20, &out, NULL, &err) : DLK_EINTERNAL;
    out.len = 0;
    if (!rc)
        rc = Dlk_store_get(s, "k", 1 << 20, &out, NULL, &err);
    UNIT_CHECK("a token near its expiry is renewed before a request",
               rc == DLK_OK && R->token_requests == t0 + 2);
    R->short_token = false;
    Dlk_store_free(s);

    /* a token given as it is: no exchange */
    int before = R->token_requests;
    s = open_at(R->port, NULL, "tok-1");
    responder_script(R, get_ok, 1);
    R->bearer_ok = true;
    out.len = 0;
    rc = s ? Dlk_store_get(s, "k", 1 << 20, &out, NULL, &err) : DLK_EINTERNAL;
    UNIT_CHECK("a given access token is sent as it is",
               rc == DLK_OK && R->bearer_ok && R->token_requests == before);
    Dlk_store_free(s);

    dlk_store_options o = {.size = sizeof o, .gcs_token = "a\r\nX-Evil: 1"};
    s = NULL;
    UNIT_CHECK("a token with a line break is refused at open",
               Dlk_store_open_gcs("gs://bkt/p", &o, &s, &err) == DLK_EINVAL &&
               !strstr(err.msg, "Evil"));
    dlk_store_options bad = {.size = sizeof bad, .gcs_piece_size = 100 << 10};
    UNIT_CHECK("a piece size not a multiple of 256 KiB is refused",
               Dlk_store_open_gcs("gs://bkt/p", &bad, &s, &err) ==
                   DLK_EINVAL && strstr(err.msg, "gcs_piece_size"));
    dlk_store_options hp = {.size = sizeof hp, .gcs_endpoint = "127.0.0.1:1",
                            .s3_max_attempts = 1};
    s = NULL;
    rc = Dlk_store_open_gcs("gs://bkt/p", &hp, &s, &err);
    UNIT_CHECK("an endpoint of host:port is http",
               rc == DLK_OK && s &&
               Dlk_store_get(s, "k", 10, &out, NULL, &err) == DLK_ENET &&
               strstr(err.msg, "gs://bkt/p/k"));
    Dlk_store_free(s);
    dlk_store_options ftp = {.size = sizeof ftp, .gcs_endpoint = "ftp://x"};
    UNIT_CHECK("an endpoint of another scheme is refused",
               Dlk_store_open_gcs("gs://bkt/p", &ftp, &s, &err) ==
                   DLK_EINVAL);
    Dlk_buf_free(&out);
}

/* ---- against fake-gcs-server ----------------------------------------- */

static Dlk_store *open_env(const char *url, uint64_t threshold)
{
    dlk_store_options o = {.size = sizeof o,
                           .gcs_endpoint = getenv("GCS_ENDPOINT"),
                           .gcs_resumable_threshold = threshold,
                           .gcs_piece_size = 256 << 10};
    Dlk_store *s = NULL;
    dlk_error err = {0};
    if (Dlk_store_open_gcs(url, &o, &s, &err))
        printf("# open %s: %s\n", url, err.msg);
    return s;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (uint8_t)(seed >> 56);
    }
}

static void test_server(const char *url)
{
    Dlk_store *s = open_env(url, 1 << 20);
    UNIT_CHECK("open the emulator's store", s != NULL);
    if (!s)
        return;
    dlk_error err = {0};
    Dlk_obj_info a, b;
    uint8_t small[1000];
    fill(small, sizeof small, 1);
    dlk_status rc = Dlk_store_put(s, "t/one", small, sizeof small,
                                  DLK_PUT_IF_ABSENT, NULL, &a, &err);
    UNIT_CHECK("create-only write", rc == DLK_OK && a.etag[0]);
    rc = Dlk_store_put(s, "t/one", small, 10, DLK_PUT_IF_ABSENT, NULL, NULL,
                       &err);
    UNIT_CHECK("create-only again: DLK_EEXIST (ifGenerationMatch=0)",
               rc == DLK_EEXIST);
    rc = Dlk_store_put(s, "t/one", small, 20, DLK_PUT_IF_MATCH, a.etag, &b,
                       &err);
    UNIT_CHECK("replace at the generation read",
               rc == DLK_OK && strcmp(a.etag, b.etag) != 0);
    rc = Dlk_store_put(s, "t/one", small, 30, DLK_PUT_IF_MATCH, a.etag, NULL,
                       &err);
    UNIT_CHECK("replace at an old generation: DLK_ECONFLICT",
               rc == DLK_ECONFLICT);
    rc = Dlk_store_put(s, "t/none", small, 30, DLK_PUT_IF_MATCH, a.etag,
                       NULL, &err);
    UNIT_CHECK("replace of a missing object: DLK_ECONFLICT",
               rc == DLK_ECONFLICT);
    Dlk_obj_info h;
    rc = Dlk_store_head(s, "t/one", &h, &err);
    UNIT_CHECK("head: size and generation of the replacement",
               rc == DLK_OK && h.size == 20 && strcmp(h.etag, b.etag) == 0 &&
               h.mtime > 0);

    Dlk_buf out;
    Dlk_buf_init(&out);
    rc = Dlk_store_get_range(s, "t/one", 5, 10, &out, &err);
    UNIT_CHECK("range read", rc == DLK_OK && out.len == 10 &&
               memcmp(out.data, small + 5, 10) == 0);
    out.len = 0;
    rc = Dlk_store_get_range(s, "t/one", 15, 10, &out, &err);
    UNIT_CHECK("a range past the end: DLK_ECORRUPT, short",
               rc == DLK_ECORRUPT && strstr(err.msg, "short object"));
    out.len = 0;
    rc = Dlk_store_get_range(s, "t/one", 40, 10, &out, &err);
    UNIT_CHECK("a range wholly past the end: DLK_ECORRUPT",
               rc == DLK_ECORRUPT);
    out.len = 0;
    rc = Dlk_store_get(s, "t/one", 19, &out, NULL, &err);
    UNIT_CHECK("over max: DLK_ELIMIT", rc == DLK_ELIMIT);
    out.len = 0;
    rc = Dlk_store_get(s, "t/missing", 100, &out, NULL, &err);
    UNIT_CHECK("missing: DLK_ENOTFOUND", rc == DLK_ENOTFOUND);

    /* 3 MiB + 5 over the 1 MiB threshold: a resumable upload in 13 pieces */
    size_t big = (3u << 20) + 5;
    uint8_t *p = malloc(big);
    fill(p, big, 7);
    struct iovec v[3] = {{p, 100}, {p + 100, big / 2}, {p + 100 + big / 2,
                                                        big - 100 - big / 2}};
    Dlk_obj_info bi;
    rc = Dlk_store_putv(s, "t/big", v, 3, DLK_PUT_IF_ABSENT, NULL, &bi, &err);
    UNIT_CHECK("a resumable upload of 3 MiB in 256 KiB pieces",
               rc == DLK_OK && bi.size == big && bi.etag[0]);
    if (rc)
        printf("# %s\n", err.msg);
    out.len = 0;
    rc = Dlk_store_get(s, "t/big", big, &out, NULL, &err);
    UNIT_CHECK("reads back byte for byte",
               rc == DLK_OK && out.len == big && memcmp(out.data, p, big) == 0);
    free(p);
    rc = Dlk_store_del(s, "t/one", &err);
    UNIT_CHECK("delete", rc == DLK_OK);
    rc = Dlk_store_del(s, "t/one", &err);
    UNIT_CHECK("delete again: DLK_ENOTFOUND", rc == DLK_ENOTFOUND);
    Dlk_buf_free(&out);
    Dlk_store_free(s);
}

/* n objects through the fault proxy, every fourth a resumable upload */
static void test_faults(const char *url, int n)
{
    Dlk_store *s = open_env(url, 512 << 10);
    UNIT_CHECK("open through the proxy", s != NULL);
    if (!s)
        return;
    int bad = 0;
    Dlk_buf out;
    Dlk_buf_init(&out);
    for (int i = 0; i < n; i++) {
        size_t len = i % 4 == 3 ? (1u << 20) + 17 : 2000 + (size_t)i;
        uint8_t *p = malloc(len);
        fill(p, len, (uint64_t)i);
        char key[32];
        snprintf(key, sizeof key, "f/%04d", i);
        dlk_error err = {0};
        dlk_status rc = Dlk_store_put(s, key, p, len, DLK_PUT_ALWAYS, NULL,
                                      NULL, &err);
        out.len = 0;
        if (!rc)
            rc = Dlk_store_get(s, key, len, &out, NULL, &err);
        if (rc || out.len != len || memcmp(out.data, p, len) != 0) {
            if (bad++ < 5)
                printf("# %s: %s\n", key, rc ? err.msg : "bytes differ");
        }
        free(p);
    }
    UNIT_CHECK("every object (some resumable) reads back through faults",
               bad == 0);
    Dlk_buf_free(&out);
    Dlk_store_free(s);
}

/* An object written directly, then read through the proxy at `via`:
 * one that cuts every body short (cut) or drops Range (unit.h). */
static void test_via(const char *url, const char *via, bool cut)
{
    Dlk_store *s = open_env(url, 1 << 20);
    UNIT_CHECK("open the emulator's store", s != NULL);
    size_t len = 300000;
    uint8_t *p = malloc(len);
    dlk_error err = {0};
    const char *key = cut ? "cut/obj" : "norange/obj";
    bool put = s && p;
    if (put) {
        fill(p, len, 7);
        put = Dlk_store_put(s, key, p, len, DLK_PUT_ALWAYS, NULL, NULL,
                            &err) == DLK_OK;
    }
    UNIT_CHECK("an object written directly", put);
    dlk_store_options o = {.size = sizeof o,
                           .gcs_endpoint = via, .s3_max_attempts = 2};
    Dlk_store *c = NULL;
    if (put && Dlk_store_open_gcs(url, &o, &c, &err))
        printf("# open %s through %s: %s\n", url, via, err.msg);
    if (c && cut)
        unit_cut_reads(c, key, len);
    else if (c)
        unit_range_ignored(c, key, p, len);
    else
        UNIT_CHECK("open through the proxy", false);
    Dlk_store_free(c);
    Dlk_store_free(s);
    free(p);
}

int main(void)
{
    const char *url = getenv("DLK_TEST_GCS_URL");
    if (url && *url) {
        const char *f = getenv("DLK_TEST_GCS_FAULTS");
        const char *cut = getenv("DLK_TEST_GCS_CUT");
        const char *norange = getenv("DLK_TEST_GCS_NORANGE");
        if (cut && *cut)
            test_via(url, cut, true);
        else if (norange && *norange)
            test_via(url, norange, false);
        else if (f && atoi(f) > 0)
            test_faults(url, atoi(f));
        else
            test_server(url);
        return unit_failed ? 1 : 0;
    }
    test_b64url();
    responder R;
    EVP_PKEY *k = NULL;
    bool up = responder_start(&R, NULL);
    UNIT_CHECK("a local responder", up);
    if (up) {
        k = make_key_file(R.port);
        R.pub = k;
        UNIT_CHECK("an RSA key and a key file", k && key_path[0]);
        if (k) {
            test_jwt(k);
            test_exchange(&R);
        }
        responder_stop(&R);
    }
    EVP_PKEY_free(k);
    if (key_path[0])
        unlink(key_path);
    UNIT_SKIP("gcs store against fake-gcs-server",
              "DLK_TEST_GCS_URL not set (tests/t/t342-gcs-store.sh sets it)");
    return unit_failed ? 1 : 0;
}
