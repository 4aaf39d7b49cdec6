/* s3_http.c - the request engine of an S3 store: one thread drives a
 * libcurl multi handle; callers on any thread queue requests (mutex +
 * condition variable) and sleep until theirs is answered.  So the number
 * of requests in flight is one limit for the whole store, connections
 * are reused across callers, and retries happen here:
 *
 *  - retried: 500 502 503 504 429, connection failures, resets, timeouts,
 *    bodies shorter than their Content-Length; at most max_attempts, with
 *    exponential backoff and full jitter (base 100 ms, cap 20 s);
 *  - 503 and 429 halve the in-flight limit (at most once per 200 ms);
 *    each `limit` successes raise it by one, back up to the configured
 *    maximum (AIMD).
 *
 * Requests are signed by libcurl (CURLOPT_AWS_SIGV4).  Secrets live only
 * in the curl handles and the engine; messages never carry them. */
#include "s3_internal.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 20000
#define DECREASE_GAP_MS 200
#define CONNECT_TIMEOUT_MS 10000L
#define LOW_SPEED_BYTES 1L       /* abort below this many bytes/s ... */
#define LOW_SPEED_SECONDS 30L    /* ... for this long */

struct s3_engine {
    CURLM *multi;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    s3_req *head, *tail;      /* ready to start, FIFO */
    s3_req *delayed;          /* waiting for their retry time */
    int inflight;
    int limit, max;           /* current and configured in-flight limit */
    int successes;
    int64_t last_decrease_ms;
    bool stop;
    int max_attempts;
    CURL **idle;              /* reusable easy handles */
    int nidle;
    uint64_t rng;
    /* signing */
    char *user, *secret, *sigv4, *token_hdr, *ca_bundle;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_ALL); }

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rng_next(s3_engine *e)
{
    /* xorshift64*, only ever used on the loop thread */
    e->rng ^= e->rng >> 12;
    e->rng ^= e->rng << 25;
    e->rng ^= e->rng >> 27;
    return e->rng * 0x2545F4914F6CDD1Dull;
}

/* ---- callbacks (loop thread) ---------------------------------------- */

static bool hdr_is(const char *line, size_t n, const char *name,
                   const char **val, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    const char *v = line + k + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    *val = v;
    *vlen = (size_t)(end - v);
    return true;
}

static void copy_hdr(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++)   /* printable ASCII only */
        dst[i] = (v[i] >= 0x20 && v[i] < 0x7f) ? v[i] : '?';
    dst[n] = '\0';
}

static uint64_t parse_u64(const char *v, size_t n, bool *ok)
{
    uint64_t x = 0;
    *ok = n > 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - 9) / 10) {
            *ok = false;
            return 0;
        }
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    return x;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ud)
{
    s3_req *r = ud;
    size_t n = size * nitems;
    const char *v;
    size_t vn;
    bool ok;
    if (n > 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* a new response (after 100 Continue, or a retry): reset */
        const char *sp = memchr(line, ' ', n);
        r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        r->in_status_ok = r->status >= 200 && r->status < 300;
        r->content_length = UINT64_MAX;
        r->total_size = UINT64_MAX;
        r->etag[0] = '\0';
        r->mtime = 0;
        r->request_id[0] = '\0';
    } else if (hdr_is(line, n, "content-length", &v, &vn)) {
        uint64_t x = parse_u64(v, vn, &ok);
        r->content_length = ok ? x : UINT64_MAX;
    } else if (hdr_is(line, n, "last-modified", &v, &vn)) {
        char date[64];
        copy_hdr(date, sizeof date, v, vn);
        time_t t = curl_getdate(date, NULL);
        r->mtime = t > 0 ? (int64_t)t : 0;
    } else if (hdr_is(line, n, "etag", &v, &vn)) {
        copy_hdr(r->etag, sizeof r->etag, v, vn);
    } else if (hdr_is(line, n, "x-amz-request-id", &v, &vn) ||
               (!r->request_id[0] &&
                hdr_is(line, n, "x-amzn-requestid", &v, &vn))) {
        copy_hdr(r->request_id, sizeof r->request_id, v, vn);
    } else if (hdr_is(line, n, "content-range", &v, &vn)) {
        /* "bytes A-B/TOTAL" */
        const char *slash = memchr(v, '/', vn);
        if (slash) {
            size_t tn = vn - (size_t)(slash + 1 - v);
            uint64_t x = parse_u64(slash + 1, tn, &ok);
            r->total_size = ok ? x : UINT64_MAX;
        }
    }
    return n;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    s3_req *r = ud;
    size_t n = size * nmemb;
    if (!r->in_status_ok) {
        size_t room = S3_ERRBODY_MAX - r->errbody.len;
        size_t k = n < room ? n : room;
        if (k && dlk_buf_append(&r->errbody, p, k, NULL) != DLK_OK)
            return n;  /* an error body is best effort */
        return n;
    }
    if (!r->out) {
        r->received += n;
        return n;
    }
    if (r->received == 0 && r->content_length != UINT64_MAX) {
        /* check the announced size before allocating anything */
        if (r->content_length > r->max) {
            r->over_limit = true;
            return 0;
        }
        if (dlk_buf_reserve(r->out, (size_t)r->content_length, NULL)) {
            r->oom = true;
            return 0;
        }
    }
    if (r->received + n > r->max) {
        r->over_limit = true;
        return 0;
    }
    if (dlk_buf_append(r->out, p, n, NULL) != DLK_OK) {
        r->oom = true;
        return 0;
    }
    r->received += n;
    return n;
}

static size_t on_read(char *p, size_t size, size_t nitems, void *ud)
{
    s3_req *r = ud;
    size_t room = size * nitems;
    size_t left = r->body_len - r->body_off;
    size_t k = left < room ? left : room;
    if (k)
        memcpy(p, r->body + r->body_off, k);
    r->body_off += k;
    return k;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
    s3_req *r = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > r->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    r->body_off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

/* ---- starting and finishing (loop thread) --------------------------- */

static void reset_result(s3_req *r)
{
    if (r->out)
        r->out->len = r->out_start;
    r->errbody.len = 0;
    r->received = 0;
    r->body_off = 0;
    r->status = 0;
    r->curl_code = 0;
    r->curl_msg[0] = '\0';
    r->over_limit = r->short_body = r->oom = false;
    r->in_status_ok = false;
    r->content_length = UINT64_MAX;
    r->total_size = UINT64_MAX;
    r->etag[0] = '\0';
    r->mtime = 0;
    r->request_id[0] = '\0';
}

/* The request's headers plus the engine's; false when out of memory. */
static bool build_headers(s3_engine *e, const s3_req *r,
                          struct curl_slist **out)
{
    struct curl_slist *h = NULL, *t;
    for (const struct curl_slist *c = r->headers; c; c = c->next) {
        if (!(t = curl_slist_append(h, c->data)))
            goto oom;
        h = t;
    }
    if (strcmp(r->method, "POST") == 0) {
        /* not libcurl's form type: servers would parse the body as one */
        if (!(t = curl_slist_append(h, "Content-Type: application/xml")))
            goto oom;
        h = t;
    }
    if (e->sigv4) {
        /* libcurl 7.88 does not add it for s3; S3 requires it */
        if (!(t = curl_slist_append(h, "x-amz-content-sha256: "
                                       "UNSIGNED-PAYLOAD")))
            goto oom;
        h = t;
        if (e->token_hdr) {
            if (!(t = curl_slist_append(h, e->token_hdr)))
                goto oom;
            h = t;
        }
    }
    *out = h;
    return true;
oom:
    curl_slist_free_all(h);
    *out = NULL;
    return false;
}

static bool start(s3_engine *e, s3_req *r)
{
    CURL *h = e->nidle ? e->idle[--e->nidle] : curl_easy_init();
    if (!h)
        return false;
    reset_result(r);
    r->attempts++;
    if (!build_headers(e, r, &r->all_headers)) {
        curl_easy_cleanup(h);
        return false;
    }
    curl_easy_setopt(h, CURLOPT_URL, r->url);
    curl_easy_setopt(h, CURLOPT_PRIVATE, r);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, LOW_SPEED_SECONDS);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->curl_msg);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, r->all_headers);
    if (e->ca_bundle)
        curl_easy_setopt(h, CURLOPT_CAINFO, e->ca_bundle);
    if (e->sigv4) {
        curl_easy_setopt(h, CURLOPT_USERNAME, e->user);
        curl_easy_setopt(h, CURLOPT_PASSWORD, e->secret);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, e->sigv4);
    }
    if (strcmp(r->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(r->method, "PUT") == 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, r);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, r);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
                         (curl_off_t)r->body_len);
    } else if (strcmp(r->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)r->body_len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS,
                         r->body ? (const char *)r->body : "");
    } else if (strcmp(r->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
    }
    if (curl_multi_add_handle(e->multi, h) != CURLM_OK) {
        curl_slist_free_all(r->all_headers);
        r->all_headers = NULL;
        curl_easy_cleanup(h);
        return false;
    }
    return true;
}

static bool retryable_curl(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

static void finish_one(s3_engine *e, s3_req *r)
{
    curl_slist_free_all(r->all_headers);
    r->all_headers = NULL;
    pthread_mutex_lock(&e->mu);
    r->done = true;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&e->mu);
}

static void recycle(s3_engine *e, CURL *h)
{
    curl_multi_remove_handle(e->multi, h);
    if (e->nidle < e->max) {
        curl_easy_reset(h);
        e->idle[e->nidle++] = h;
    } else {
        curl_easy_cleanup(h);
    }
}

/* The loop thread's handling of a finished transfer.  Called unlocked. */
static void on_done(s3_engine *e, CURL *h, CURLcode code)
{
    s3_req *r = NULL;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&r);
    r->curl_code = (int)code;
    if (code == CURLE_OK) {
        long st = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        r->status = st;
        if (r->in_status_ok && r->out && strcmp(r->method, "HEAD") != 0 &&
            r->content_length != UINT64_MAX &&
            r->received != r->content_length)
            r->short_body = true;
    } else {
        r->status = 0;   /* no complete answer */
        if (!r->curl_msg[0])
            snprintf(r->curl_msg, sizeof r->curl_msg, "%s",
                     curl_easy_strerror(code));
    }
    recycle(e, h);
    curl_slist_free_all(r->all_headers);
    r->all_headers = NULL;

    bool slow = r->status == 503 || r->status == 429;
    bool retry = slow || r->status == 500 || r->status == 502 ||
                 r->status == 504 || r->short_body ||
                 (code != CURLE_OK && !r->over_limit && !r->oom &&
                  retryable_curl(code));
    int64_t now = now_ms();
    pthread_mutex_lock(&e->mu);
    e->inflight--;
    if (slow) {
        if (now - e->last_decrease_ms >= DECREASE_GAP_MS) {
            e->limit = e->limit > 1 ? e->limit / 2 : 1;
            e->last_decrease_ms = now;
        }
        e->successes = 0;
    } else if (!retry && e->limit < e->max && ++e->successes >= e->limit) {
        e->limit++;
        e->successes = 0;
    }
    if (retry && r->attempts < e->max_attempts) {
        unsigned shift = (unsigned)(r->attempts - 1);
        uint64_t cap = (uint64_t)BACKOFF_BASE_MS << (shift > 20 ? 20 : shift);
        if (cap > BACKOFF_CAP_MS)
            cap = BACKOFF_CAP_MS;
        r->not_before_ms = now + (int64_t)(rng_next(e) % (cap + 1));
        r->next = e->delayed;
        e->delayed = r;
        pthread_mutex_unlock(&e->mu);
        return;
    }
    pthread_mutex_unlock(&e->mu);
    finish_one(e, r);
}

/* Move due retries to the front of the queue (they have waited already);
 * returns the milliseconds until the next one is due (at most 1000). */
static int64_t promote_due(s3_engine *e)
{
    int64_t now = now_ms(), wait = 1000;
    for (s3_req **pp = &e->delayed; *pp;) {
        s3_req *r = *pp;
        if (r->not_before_ms <= now) {
            *pp = r->next;
            r->next = e->head;
            e->head = r;
            if (!e->tail)
                e->tail = r;
        } else {
            if (r->not_before_ms - now < wait)
                wait = r->not_before_ms - now;
            pp = &r->next;
        }
    }
    return wait;
}

static void start_queued(s3_engine *e)
{
    while (e->head && e->inflight < e->limit) {
        s3_req *r = e->head;
        e->head = r->next;
        if (!e->head)
            e->tail = NULL;
        r->next = NULL;
        e->inflight++;
        if (!start(e, r)) {
            e->inflight--;
            r->oom = true;
            snprintf(r->curl_msg, sizeof r->curl_msg,
                     "cannot set up the request");
            r->curl_code = CURLE_OUT_OF_MEMORY;
            r->done = true;
            pthread_cond_signal(&r->cond);
        }
    }
}

static void *loop(void *arg)
{
    s3_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        promote_due(e);
        start_queued(e);
        pthread_mutex_unlock(&e->mu);

        int running = 0;
        curl_multi_perform(e->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(e->multi, &left)) != NULL)
            if (m->msg == CURLMSG_DONE)
                on_done(e, m->easy_handle, m->data.result);

        /* sleep until a socket is ready, a caller submits (wakeup), or
         * the next retry is due */
        pthread_mutex_lock(&e->mu);
        int64_t wait = e->stop ? 0 : promote_due(e);
        bool ready = e->head && e->inflight < e->limit;
        pthread_mutex_unlock(&e->mu);
        if (!ready && wait > 0)
            curl_multi_poll(e->multi, NULL, 0, (int)wait, NULL);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- the callers' side ---------------------------------------------- */

void s3_submit(s3_engine *e, s3_req *r)
{
    pthread_cond_init(&r->cond, NULL);
    r->cond_ready = true;
    r->done = false;
    r->attempts = 0;
    r->next = NULL;
    r->all_headers = NULL;
    r->out_start = r->out ? r->out->len : 0;
    reset_result(r);
    pthread_mutex_lock(&e->mu);
    if (e->tail)
        e->tail->next = r;
    else
        e->head = r;
    e->tail = r;
    pthread_mutex_unlock(&e->mu);
    curl_multi_wakeup(e->multi);
}

void s3_wait(s3_engine *e, s3_req *r)
{
    pthread_mutex_lock(&e->mu);
    while (!r->done)
        pthread_cond_wait(&r->cond, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

void s3_perform(s3_engine *e, s3_req *r)
{
    s3_submit(e, r);
    s3_wait(e, r);
}

void s3_req_fini(s3_req *r)
{
    dlk_buf_free(&r->errbody);
    if (r->cond_ready)
        pthread_cond_destroy(&r->cond);
    r->cond_ready = false;
}

int s3_engine_limit(s3_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int l = e->limit;
    pthread_mutex_unlock(&e->mu);
    return l;
}

static void wipe(char *s)
{
    if (s) {
        volatile char *v = s;
        while (*v)
            *v++ = '\0';
    }
}

void s3_engine_free(s3_engine *e)
{
    if (!e)
        return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stop = true;
        pthread_mutex_unlock(&e->mu);
        curl_multi_wakeup(e->multi);
        pthread_join(e->thread, NULL);
    }
    for (int i = 0; i < e->nidle; i++)
        curl_easy_cleanup(e->idle[i]);
    free(e->idle);
    if (e->multi)
        curl_multi_cleanup(e->multi);
    pthread_mutex_destroy(&e->mu);
    wipe(e->secret);
    wipe(e->token_hdr);
    free(e->user);
    free(e->secret);
    free(e->sigv4);
    free(e->token_hdr);
    free(e->ca_bundle);
    free(e);
}

static char *dup_or(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

dlk_status s3_engine_new(const s3_config *cfg, s3_engine **out,
                         dlk_error *err)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return dlk_fail(err, DLK_ENET, "cannot initialise libcurl: %s",
                        curl_easy_strerror(curl_init_rc));
    s3_engine *e = calloc(1, sizeof *e);
    if (!e)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    pthread_mutex_init(&e->mu, NULL);
    e->max = e->limit = cfg->max_inflight;
    e->max_attempts = cfg->max_attempts;
    e->rng = (uint64_t)now_ms() * 0x9E3779B97F4A7C15ull ^ (uintptr_t)e;
    if (!e->rng)
        e->rng = 1;
    bool ok = true;
    e->ca_bundle = dup_or(cfg->ca_bundle, &ok);
    if (cfg->access_key && cfg->secret_key) {
        e->user = dup_or(cfg->access_key, &ok);
        e->secret = dup_or(cfg->secret_key, &ok);
        size_t n = strlen(cfg->region) + 16;
        if ((e->sigv4 = malloc(n)) != NULL)
            snprintf(e->sigv4, n, "aws:amz:%s:s3", cfg->region);
        else
            ok = false;
        if (cfg->session_token) {
            n = strlen(cfg->session_token) + 32;
            if ((e->token_hdr = malloc(n)) != NULL)
                snprintf(e->token_hdr, n, "x-amz-security-token: %s",
                         cfg->session_token);
            else
                ok = false;
        }
    }
    e->idle = calloc((size_t)e->max, sizeof *e->idle);
    e->multi = curl_multi_init();
    if (!ok || !e->idle || !e->multi) {
        s3_engine_free(e);
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    }
    curl_multi_setopt(e->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      (long)e->max);
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)e->max);
    if (pthread_create(&e->thread, NULL, loop, e) != 0) {
        s3_engine_free(e);
        return dlk_fail(err, DLK_ENOMEM, "cannot start the s3 i/o thread");
    }
    e->thread_started = true;
    *out = e;
    return DLK_OK;
}
