/* s3_http.c - the request engine of an S3 store: one thread drives a
 * libcurl multi handle; callers on any thread queue requests (mutex +
 * condition variable) and sleep until theirs is answered.  So the number
 * of requests in flight is one limit for the whole store, connections
 * are reused across callers, and retries happen here:
 *
 *  - retried: 500 502 503 504 429, connection failures, resets, timeouts,
 *    bodies shorter than their Content-Length; at most max_attempts, with
 *    exponential backoff and equal jitter (base 100 ms, cap 20 s): each
 *    wait is between half and all of its step, so that the tries span at
 *    least half the steps' sum (6.35 s for 8) and a second of throttling
 *    cannot use them all up, as full jitter's waits near 0 could;
 *  - 503 and 429 halve the in-flight limit (at most once per 200 ms);
 *    each `limit` successes raise it by one, back up to the configured
 *    maximum (AIMD).
 *  - hedged: a GET or HEAD still running well past the usual duration of
 *    its size class (a ring of recent durations per class: max of
 *    s3_hedge_min_ms (a store option) and 4x the median) gets a second identical
 *    request; the first to finish for good wins and the other is removed
 *    from the multi handle.  A hedge writes into its own buffer, copied to
 *    the caller's only when it wins.  Hedges take in-flight slots, go
 *    before queued requests, and are rationed (tokens: one hedge per ten
 *    finished transfers, a burst of ten at most; four in flight at most,
 *    as each holds a copy of its body).
 *
 * The loop waits in epoll for the sockets libcurl names (its socket
 * interface), an eventfd that callers write to, and the next due time,
 * and hands libcurl only the sockets that are ready: curl_multi_perform
 * and curl_multi_poll look at every transfer and socket at each wake-up,
 * which with 64 GETs of small images in flight cost the loop ~50 us a GET
 * (2.8 poll calls a GET on a 2-core x86-64 host).
 *
 * Requests are signed here each time they are sent (s3_sign.c, SigV4
 * with a signing key derived once a day).  The secret lives only in the
 * engine's signer; messages never carry it. */
#include "s3_internal.h"
#include "util/error.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 20000
#define DECREASE_GAP_MS 200
#define CONNECT_TIMEOUT_MS 10000L
/* A body's buffer is reserved whole from its Content-Length only up to
 * this, or when it is exactly what was asked for (a range, a listed
 * size); past it the buffer grows as the bytes arrive, so that a server
 * claiming a length it never sends costs nothing. */
#define RESERVE_CLAIMED_MAX ((uint64_t)8 << 20)
#define CANCEL_POLL_MS 100       /* the caller's cancel asked this often */

#define GROW_WINDOW_MS 100
#define GROW_MIN_LAT_MS 5

#define HEDGE_FACTOR 4           /* x the class median */
#define HEDGE_MIN_SAMPLES 4      /* a class hedges once it has these */
#define HEDGE_RING 32            /* durations kept per class */
#define HEDGE_CLASSES 8          /* <64K, <256K, <1M, ... , >=256M bytes */
#define HEDGE_COST 10            /* tokens a hedge takes ... */
#define HEDGE_EARN 1             /* ... a finished transfer gives ... */
#define HEDGE_TOKENS_MAX 100     /* ... up to this many */
#define HEDGE_TOKENS_START 20
#define HEDGE_MAX_INFLIGHT 4     /* each holds its own copy of a body */

/* Recent durations of successful transfers of one size class. */
typedef struct lat_class {
    int32_t ring[HEDGE_RING];
    unsigned n;               /* samples recorded (saturates) */
    unsigned pos;
    int32_t median;
} lat_class;

struct s3_engine {
    CURLM *multi;
    int epfd;                 /* the sockets libcurl waits on, and evfd */
    int evfd;                 /* callers' wake-ups */
    int64_t timer_at_ms;      /* libcurl's next timeout; -1: none */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    s3_req *head, *tail;      /* ready to start, FIFO */
    s3_req *delayed;          /* waiting for their retry time */
    int inflight;
    int limit, max;           /* current and configured in-flight limit */
    /* latency-driven growth of max up to cap (s3_engine_raise_max): each
     * window of GROW_WINDOW_MS in which requests queued for a slot and no
     * transfer took less than GROW_MIN_LAT_MS doubles it (loop thread) */
    int cap;
    int64_t win_start_ms;
    int64_t win_min_lat_ms;
    bool win_queued;
    int successes;
    int64_t last_decrease_ms;
    bool stop;
    int max_attempts;
    long recv_buffer;         /* CURLOPT_BUFFERSIZE */
    CURL **idle;              /* reusable easy handles */
    int nidle;
    uint64_t rng;
    /* hedging: loop thread only, but for the counters (atomic) */
    bool hedge_on;
    int hedge_min_ms;
    s3_req *active;           /* unhedged GET/HEAD primaries in flight */
    lat_class lat[HEDGE_CLASSES];
    int hedge_tokens;
    int hedges_inflight;
    uint64_t hedges, hedge_wins;
    /* bounds of an attempt (s3_config's) */
    long stall_rate, stall_seconds, request_timeout;
    /* the caller's cancel: asked every CANCEL_POLL_MS while requests are
     * queued, waiting or in flight (loop thread) */
    int (*cancel)(void *ud);
    void *cancel_ud;
    int64_t cancel_polled_ms;
    s3_req *fly;              /* every transfer in flight (loop thread) */
    /* signing */
    s3_signer *signer;        /* NULL: anonymous */
    char *ca_bundle;
};

static uint64_t hedges_total;  /* all engines (atomic) */

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

int64_t s3_req_mtime(const s3_req *r)
{
    time_t t = r->lastmod[0] ? curl_getdate(r->lastmod, NULL) : 0;
    return t > 0 ? (int64_t)t : 0;
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
        r->lastmod[0] = '\0';
        r->request_id[0] = '\0';
        r->want_value[0] = '\0';
    } else if (r->want_header && hdr_is(line, n, r->want_header, &v, &vn)) {
        copy_hdr(r->want_value, sizeof r->want_value, v, vn);
    } else if (hdr_is(line, n, "content-length", &v, &vn)) {
        uint64_t x = parse_u64(v, vn, &ok);
        r->content_length = ok ? x : UINT64_MAX;
    } else if (hdr_is(line, n, "last-modified", &v, &vn)) {
        copy_hdr(r->lastmod, sizeof r->lastmod, v, vn);
    } else if (hdr_is(line, n, "etag", &v, &vn)) {
        copy_hdr(r->etag, sizeof r->etag, v, vn);
    } else if (hdr_is(line, n, "x-amz-request-id", &v, &vn) ||
               (!r->request_id[0] &&
                (hdr_is(line, n, "x-amzn-requestid", &v, &vn) ||
                 hdr_is(line, n, "x-guploader-uploadid", &v, &vn)))) {
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
        if (k && Dlk_buf_append(&r->errbody, p, k, NULL) != DLK_OK)
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
        uint64_t claim = r->content_length;
        if (claim > RESERVE_CLAIMED_MAX && claim != r->size_hint)
            claim = RESERVE_CLAIMED_MAX;
        if (Dlk_buf_reserve(r->out, (size_t)claim, NULL)) {
            r->oom = true;
            return 0;
        }
    }
    if (r->received + n > r->max) {
        r->over_limit = true;
        return 0;
    }
    if (Dlk_buf_append(r->out, p, n, NULL) != DLK_OK) {
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
    r->over_limit = r->short_body = r->oom = r->canceled = false;
    r->in_status_ok = false;
    r->content_length = UINT64_MAX;
    r->total_size = UINT64_MAX;
    r->etag[0] = '\0';
    r->lastmod[0] = '\0';
    r->request_id[0] = '\0';
    r->want_value[0] = '\0';
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
    bool typed = false;
    for (const struct curl_slist *c = r->headers; c; c = c->next)
        typed |= strncasecmp(c->data, "content-type:", 13) == 0;
    if (strcmp(r->method, "POST") == 0 && !typed) {
        /* not libcurl's form type: servers would parse the body as one */
        if (!(t = curl_slist_append(h, "Content-Type: application/xml")))
            goto oom;
        h = t;
    }
    /* signed when (re)sent: the date is part of the signature */
    if (e->signer && s3_sign(e->signer, r->method, r->url, &h))
        goto oom;
    *out = h;
    return true;
oom:
    curl_slist_free_all(h);
    *out = NULL;
    return false;
}

/* ---- hedging (loop thread) ------------------------------------------ */

static bool hedgeable(const s3_req *r)
{
    /* no side effects: a duplicate is harmless */
    return strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
}

/* The body size to expect when a transfer starts: the range asked for,
 * else the most the caller accepts (a chunk's exact size). */
static uint64_t size_hint(const s3_req *r)
{
    if (strcmp(r->method, "HEAD") == 0)
        return 0;
    for (const struct curl_slist *c = r->headers; c; c = c->next) {
        unsigned long long a, b;
        if (strncasecmp(c->data, "range:", 6) == 0 &&
            sscanf(c->data + 6, " bytes=%llu-%llu", &a, &b) == 2 && b >= a)
            return (uint64_t)(b - a + 1);
    }
    return r->out ? r->max : 0;
}

/* The size that places a running transfer in a class: the announced
 * Content-Length once the headers are in. */
static uint64_t current_size(const s3_req *r)
{
    if (r->in_status_ok && r->content_length != UINT64_MAX)
        return r->content_length;
    return r->size_hint;
}

static int size_class(uint64_t n)
{
    int c = 0;
    for (n >>= 16; n && c < HEDGE_CLASSES - 1; n >>= 2)
        c++;
    return c;
}

static void lat_record(s3_engine *e, const s3_req *x, int64_t ms)
{
    uint64_t bytes = strcmp(x->method, "HEAD") == 0 ? 0 : x->received;
    lat_class *lc = &e->lat[size_class(bytes)];
    lc->ring[lc->pos] = ms < 0 ? 0 : ms > INT32_MAX ? INT32_MAX : (int32_t)ms;
    lc->pos = (lc->pos + 1) % HEDGE_RING;
    if (lc->n < HEDGE_RING)
        lc->n++;
    int32_t v[HEDGE_RING];
    unsigned n = lc->n;
    for (unsigned i = 0; i < n; i++) {   /* insertion sort, n <= 32 */
        int32_t x_ = lc->ring[i];
        unsigned j = i;
        for (; j > 0 && v[j - 1] > x_; j--)
            v[j] = v[j - 1];
        v[j] = x_;
    }
    lc->median = v[n / 2];
}

static void act_add(s3_engine *e, s3_req *r)
{
    r->act_prev = NULL;
    r->act_next = e->active;
    if (e->active)
        e->active->act_prev = r;
    e->active = r;
}

static void act_remove(s3_engine *e, s3_req *r)
{
    if (r->act_prev)
        r->act_prev->act_next = r->act_next;
    else if (e->active == r)
        e->active = r->act_next;
    else
        return;             /* not in the list */
    if (r->act_next)
        r->act_next->act_prev = r->act_prev;
    r->act_prev = r->act_next = NULL;
}

static void fly_add(s3_engine *e, s3_req *r)
{
    r->fly_prev = NULL;
    r->fly_next = e->fly;
    if (e->fly)
        e->fly->fly_prev = r;
    e->fly = r;
}

static void fly_remove(s3_engine *e, s3_req *r)
{
    if (r->fly_prev)
        r->fly_prev->fly_next = r->fly_next;
    else if (e->fly == r)
        e->fly = r->fly_next;
    else
        return;             /* not in the list */
    if (r->fly_next)
        r->fly_next->fly_prev = r->fly_prev;
    r->fly_prev = r->fly_next = NULL;
}

static bool start(s3_engine *e, s3_req *r);
static void recycle(s3_engine *e, CURL *h);

/* End a transfer that is still running (it lost, or its request is
 * over): its connection is closed, its handle kept for reuse. */
static void drop_transfer(s3_engine *e, s3_req *x)
{
    fly_remove(e, x);
    if (x->easy) {
        recycle(e, x->easy);
        x->easy = NULL;
    }
    curl_slist_free_all(x->all_headers);
    x->all_headers = NULL;
}

static void free_hedge(s3_engine *e, s3_req *x)
{
    e->hedges_inflight--;
    drop_transfer(e, x);
    Dlk_buf_free(&x->hbody);
    Dlk_buf_free(&x->errbody);
    free(x);
}

/* Start a hedge of primary r (in flight, lock held: it takes a slot). */
static void start_hedge(s3_engine *e, s3_req *r)
{
    act_remove(e, r);
    r->hedged = true;            /* once per attempt, even if it fails */
    s3_req *x = calloc(1, sizeof *x);
    if (!x)
        return;
    x->method = r->method;
    x->url = r->url;
    x->headers = r->headers;     /* the caller's, alive until r is done */
    x->want_header = r->want_header;
    x->max = r->max;
    x->size_hint = r->size_hint;
    x->out = r->out ? &x->hbody : NULL;
    x->hedge_of = r;
    e->inflight++;
    if (!start(e, x)) {
        e->inflight--;
        Dlk_buf_free(&x->errbody);
        free(x);
        return;
    }
    r->hedge = x;
    e->hedges_inflight++;
    e->hedge_tokens -= HEDGE_COST;
    __atomic_add_fetch(&e->hedges, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&hedges_total, 1, __ATOMIC_RELAXED);
}

/* Hedge the transfers that are overdue, while slots and tokens allow
 * (go), or only look (!go: 0 when one could start now).  Returns the
 * milliseconds until the next one comes due (at most 1000).  Called
 * with the lock held, on the loop thread. */
static int64_t hedge_scan(s3_engine *e, bool go)
{
    int64_t wait = 1000;
    if (!e->active)
        return wait;
    int64_t now = now_ms();
    for (s3_req *r = e->active, *next; r; r = next) {
        next = r->act_next;
        const lat_class *lc = &e->lat[size_class(current_size(r))];
        if (lc->n < HEDGE_MIN_SAMPLES)
            continue;            /* no idea yet what slow means here */
        int64_t due = (int64_t)lc->median * HEDGE_FACTOR;
        if (due < e->hedge_min_ms)
            due = e->hedge_min_ms;
        int64_t left = r->started_ms + due - now;
        if (left > 0) {
            if (left < wait)
                wait = left;
            continue;
        }
        if (e->inflight >= e->limit || e->hedge_tokens < HEDGE_COST ||
            e->hedges_inflight >= HEDGE_MAX_INFLIGHT)
            continue;            /* a finished transfer wakes us */
        if (!go)
            return 0;
        start_hedge(e, r);
    }
    return wait;
}

/* Primary p takes the results of its hedge x (which answered). */
static void adopt(s3_req *p, s3_req *x)
{
    p->status = x->status;
    p->curl_code = x->curl_code;
    memcpy(p->curl_msg, x->curl_msg, sizeof p->curl_msg);
    p->over_limit = x->over_limit;
    p->short_body = x->short_body;
    p->oom = x->oom;
    p->in_status_ok = x->in_status_ok;
    p->content_length = x->content_length;
    p->total_size = x->total_size;
    memcpy(p->etag, x->etag, sizeof p->etag);
    memcpy(p->lastmod, x->lastmod, sizeof p->lastmod);
    memcpy(p->request_id, x->request_id, sizeof p->request_id);
    memcpy(p->want_value, x->want_value, sizeof p->want_value);
    p->received = x->received;
    Dlk_buf_free(&p->errbody);
    p->errbody = x->errbody;
    Dlk_buf_init(&x->errbody);
    if (p->out) {
        p->out->len = p->out_start;
        if (x->hbody.len &&
            Dlk_buf_append(p->out, x->hbody.data, x->hbody.len, NULL))
            p->oom = true;
    }
}

/* An attempt's deadline: the store's request timeout and a second for
 * each S3_TIMEOUT_BYTES_PER_S bytes it expects to move (the body sent, or
 * the size it asked for), at most a week. */
static long deadline_ms(const s3_engine *e, const s3_req *r)
{
    uint64_t bytes = strcmp(r->method, "PUT") == 0 ||
                     strcmp(r->method, "POST") == 0 ? r->body_len
                                                    : r->size_hint;
    uint64_t s = (uint64_t)e->request_timeout + bytes / S3_TIMEOUT_BYTES_PER_S;
    return (long)(s < 7 * 86400 ? s : 7 * 86400) * 1000L;
}

static bool start(s3_engine *e, s3_req *r)
{
    CURL *h = e->nidle ? e->idle[--e->nidle] : curl_easy_init();
    if (!h)
        return false;
    reset_result(r);
    r->attempts++;
    if (!r->hedge_of)
        r->size_hint = size_hint(r);
    if (!build_headers(e, r, &r->all_headers)) {
        curl_easy_cleanup(h);
        return false;
    }
    curl_easy_setopt(h, CURLOPT_URL, r->url);
    curl_easy_setopt(h, CURLOPT_PRIVATE, r);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    /* a stalled or trickling answer (or upload) is cut and retried, and
     * no attempt outlives its deadline however its bytes come */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, e->stall_rate);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, e->stall_seconds);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, deadline_ms(e, r));
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    /* receive in 64 KiB reads, not 16: an image of tens of KiB arrives in
     * one or two (each read is a pass of the loop; 4,000 GETs of 41 KB:
     * 3.1 reads a GET at 16 KiB).  Under glibc's mmap threshold, so a
     * handle's buffer is not mapped anew per transfer. */
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, e->recv_buffer);
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
    r->easy = h;
    fly_add(e, r);
    r->started_ms = now_ms();
    if (!r->hedge_of) {
        r->hedged = false;
        if (e->hedge_on && hedgeable(r))
            act_add(e, r);
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
    if (r->on_finish) {
        r->done = true;
        r->on_finish(r); /* may free r */
        return;
    }
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

/* AIMD on one transfer's answer; lock held. */
static void adapt(s3_engine *e, bool slow, bool retry, int64_t now)
{
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
}

/* A finished transfer's answer into x (its status, a body cut short,
 * curl's message), and its handle given back to the engine. */
static void take_answer(s3_engine *e, CURL *h, s3_req *x, CURLcode code)
{
    x->curl_code = (int)code;
    if (code == CURLE_OK) {
        long st = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        x->status = st;
        if (x->in_status_ok && x->out && strcmp(x->method, "HEAD") != 0 &&
            x->content_length != UINT64_MAX &&
            x->received != x->content_length)
            x->short_body = true;
    } else {
        x->status = 0;   /* no complete answer */
        if (!x->curl_msg[0])
            snprintf(x->curl_msg, sizeof x->curl_msg, "%s",
                     curl_easy_strerror(code));
    }
    fly_remove(e, x);
    x->easy = NULL;
    recycle(e, h);
    curl_slist_free_all(x->all_headers);
    x->all_headers = NULL;
}

/* Whether x's answer is worth asking again: the server busy or failing,
 * a body cut short, a network error curl can retry (slow: the server
 * asked for less, 503 or 429). */
static bool answer_retryable(const s3_req *x, CURLcode code, bool slow)
{
    return slow || x->status == 408 || x->status == 500 ||
           x->status == 502 ||
           x->status == 504 || x->short_body ||
           (code != CURLE_OK && !x->over_limit && !x->oom &&
            retryable_curl(code));
}

/* Hedging's latencies and tokens learn from a transfer that ended for
 * good. */
static void hedge_learn(s3_engine *e, s3_req *x, bool retry, int64_t now)
{
    if (e->hedge_on && !retry && hedgeable(x)) {
        if (x->in_status_ok && !x->canceled)
            lat_record(e, x, now - x->started_ms);
        e->hedge_tokens += HEDGE_EARN;
        if (e->hedge_tokens > HEDGE_TOKENS_MAX)
            e->hedge_tokens = HEDGE_TOKENS_MAX;
    }
}

/* The request r ends with transfer x's answer (x: r or r's hedge): the
 * other of a hedged pair (other, NULL without one) lost. */
static void settle_pair(s3_engine *e, s3_req *r, s3_req *x, s3_req *other,
                        bool retry)
{
    if (x != r) {
        if (other)
            drop_transfer(e, r);     /* the primary lost */
        adopt(r, x);
        if (!retry)
            __atomic_add_fetch(&e->hedge_wins, 1, __ATOMIC_RELAXED);
        r->hedge = NULL;
        free_hedge(e, x);
    } else if (r->hedge) {
        free_hedge(e, r->hedge);     /* the hedge lost */
        r->hedge = NULL;
    }
}

/* r queued for another attempt after a backoff, unless it has had all
 * its attempts (false).  Lock held. */
static bool retry_later(s3_engine *e, s3_req *r, int64_t now)
{
    if (r->attempts >= (r->attempts_max ? r->attempts_max : e->max_attempts))
        return false;
    unsigned shift = (unsigned)(r->attempts - 1);
    uint64_t cap = (uint64_t)BACKOFF_BASE_MS << (shift > 20 ? 20 : shift);
    if (cap > BACKOFF_CAP_MS)
        cap = BACKOFF_CAP_MS;
    r->not_before_ms = now + (int64_t)(cap / 2 +
                                       rng_next(e) % (cap / 2 + 1));
    r->next = e->delayed;
    e->delayed = r;
    return true;
}

/* The loop thread's handling of a finished transfer.  Called unlocked. */
static void on_done(s3_engine *e, CURL *h, CURLcode code)
{
    s3_req *x = NULL;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&x);
    take_answer(e, h, x, code);

    bool slow = x->status == 503 || x->status == 429;
    bool retry = answer_retryable(x, code, slow);
    int64_t now = now_ms();
    if (code == CURLE_OK && now - x->started_ms < e->win_min_lat_ms)
        e->win_min_lat_ms = now - x->started_ms;

    /* r is the caller's request; x this transfer: r or r's hedge */
    s3_req *r = x->hedge_of ? x->hedge_of : x;
    bool is_hedge = x != r;
    if (!is_hedge)
        act_remove(e, r);
    hedge_learn(e, x, retry, now);
    /* a hedged pair: the first to finish for good wins */
    s3_req *other = is_hedge ? (r->easy ? r : NULL) : r->hedge;
    if (other && (retry || (is_hedge && x->oom))) {
        /* this one failed: the other carries on */
        if (is_hedge) {
            r->hedge = NULL;
            free_hedge(e, x);
        }
        pthread_mutex_lock(&e->mu);
        e->inflight--;
        adapt(e, slow, true, now);
        pthread_mutex_unlock(&e->mu);
        return;
    }
    int ended = other ? 2 : 1;
    settle_pair(e, r, x, other, retry);

    pthread_mutex_lock(&e->mu);
    e->inflight -= ended;
    adapt(e, slow, retry, now);
    bool again = retry && retry_later(e, r, now);
    pthread_mutex_unlock(&e->mu);
    if (!again)
        finish_one(e, r);
}

/* The caller's cancel said stop: every transfer in flight ends now as
 * failed for good, and every request queued or waiting for its retry with
 * it; each is marked canceled.  Loop thread, unlocked. */
static void cancel_all(s3_engine *e)
{
    while (e->fly) {
        s3_req *x = e->fly;
        s3_req *r = x->hedge_of ? x->hedge_of : x;
        x->canceled = r->canceled = true;
        snprintf(x->curl_msg, sizeof x->curl_msg, "canceled");
        on_done(e, x->easy, CURLE_ABORTED_BY_CALLBACK);
    }
    pthread_mutex_lock(&e->mu);
    s3_req *list = e->head;
    if (e->tail)
        e->tail->next = e->delayed;
    else
        list = e->delayed;
    e->head = e->tail = e->delayed = NULL;
    pthread_mutex_unlock(&e->mu);
    while (list) {
        s3_req *r = list;
        list = r->next;
        r->next = NULL;
        reset_result(r);
        r->canceled = true;
        r->curl_code = CURLE_ABORTED_BY_CALLBACK;
        snprintf(r->curl_msg, sizeof r->curl_msg, "canceled");
        finish_one(e, r);
    }
}

/* Whether the caller's cancel is to be asked now (lock held). */
static bool cancel_due(s3_engine *e, int64_t now)
{
    return e->cancel && (e->head || e->delayed || e->fly) &&
           now - e->cancel_polled_ms >= CANCEL_POLL_MS;
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

/* Start what the limit allows (under e->mu).  A request that cannot be
 * set up is finished: a waiting caller is woken here, one with an
 * on_finish callback goes onto *failed, to be called without the lock. */
static void start_queued(s3_engine *e, s3_req **failed)
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
            if (r->on_finish) {
                r->next = *failed;
                *failed = r;
                continue;
            }
            r->done = true;
            pthread_cond_signal(&r->cond);
        }
    }
}

/* libcurl's socket interface: which sockets to wait on, for what. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp,
                     void *socketp)
{
    s3_engine *e = userp;
    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        /* it may be closed already: the error does not matter */
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, fd, NULL);
        return 0;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    ev.data.fd = fd;
    int op = socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(e->epfd, op, fd, &ev) != 0)
        epoll_ctl(e->epfd, op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD
                                               : EPOLL_CTL_ADD, fd, &ev);
    if (!socketp)
        curl_multi_assign(e->multi, fd, e); /* marks it added */
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    s3_engine *e = userp;
    (void)multi;
    e->timer_at_ms = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    return 0;
}

static void finished_transfers(s3_engine *e)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(e->multi, &left)) != NULL)
        if (m->msg == CURLMSG_DONE)
            on_done(e, m->easy_handle, m->data.result);
}

/* Through a high latency the in-flight limit, not the store, bounds the
 * rate (GETs in flight = rate x time to first byte): when requests wait
 * for a slot and even the quickest transfer of the last window took
 * GROW_MIN_LAT_MS or more, double the maximum, up to the cap a caller
 * asked for.  A store that answers at once keeps the configured one (on
 * a 16-core host, 256 in flight to a local server: 13% slower than 64).
 * Loop thread (the multi handle and the idle handles are its own); lock
 * held. */
static void grow(s3_engine *e, int64_t now)
{
    if (e->head && e->inflight >= e->limit)
        e->win_queued = true;
    if (now - e->win_start_ms < GROW_WINDOW_MS)
        return;
    bool slow = e->win_queued && e->win_min_lat_ms >= GROW_MIN_LAT_MS &&
                e->win_min_lat_ms != INT64_MAX;
    e->win_start_ms = now;
    e->win_min_lat_ms = INT64_MAX;
    e->win_queued = false;
    if (!slow || e->max >= e->cap || e->limit < e->max)
        return; /* fast enough, at the cap, or backing off (503) */
    int n = e->max * 2 < e->cap ? e->max * 2 : e->cap;
    CURL **idle = realloc(e->idle, (size_t)n * sizeof *idle);
    if (!idle)
        return;
    e->idle = idle;
    e->max = e->limit = n;
    curl_multi_setopt(e->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)n);
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)n);
}

static void *loop(void *arg)
{
    s3_engine *e = arg;
    struct epoll_event ev[64];
    int running = 0;
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        if (cancel_due(e, now_ms())) {
            e->cancel_polled_ms = now_ms();
            pthread_mutex_unlock(&e->mu);
            if (e->cancel(e->cancel_ud))
                cancel_all(e);
            pthread_mutex_lock(&e->mu);
        }
        if (e->cap > e->max)
            grow(e, now_ms());
        promote_due(e);
        hedge_scan(e, true);     /* before new requests take the slots */
        s3_req *failed = NULL;
        start_queued(e, &failed);
        pthread_mutex_unlock(&e->mu);
        while (failed) {
            s3_req *r = failed;
            failed = r->next;
            r->next = NULL;
            finish_one(e, r);
        }

        if (e->timer_at_ms >= 0 && e->timer_at_ms <= now_ms()) {
            e->timer_at_ms = -1;
            curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0,
                                     &running);
            finished_transfers(e);
        }

        /* sleep until a socket is ready, a caller submits (evfd), libcurl
         * has a timeout or the next retry or hedge is due */
        pthread_mutex_lock(&e->mu);
        int64_t wait = e->stop ? 0 : promote_due(e);
        if (!e->stop) {
            int64_t hw = hedge_scan(e, false);
            if (hw < wait)
                wait = hw;
        }
        bool ready = e->head && e->inflight < e->limit;
        if (e->cancel && (e->head || e->delayed || e->fly) &&
            wait > CANCEL_POLL_MS)
            wait = CANCEL_POLL_MS;
        pthread_mutex_unlock(&e->mu);
        if (e->timer_at_ms >= 0) {
            int64_t t = e->timer_at_ms - now_ms();
            if (t < wait)
                wait = t < 0 ? 0 : t;
        }
        int n = epoll_wait(e->epfd, ev, 64, ready || wait <= 0 ? 0
                                                               : (int)wait);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == e->evfd) {
                uint64_t x; /* reset the counter; EAGAIN: read already */
                ssize_t r = read(e->evfd, &x, sizeof x);
                (void)r;
                continue;
            }
            int flags = (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                        (ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (ev[i].events & (EPOLLERR | EPOLLHUP)
                             ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(e->multi, ev[i].data.fd, flags,
                                     &running);
        }
        if (n > 0)
            finished_transfers(e);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static void wake(s3_engine *e)
{
    uint64_t one = 1;
    /* can fail only with a full counter, which wakes the loop as well */
    ssize_t w = write(e->evfd, &one, sizeof one);
    (void)w;
}

/* ---- the callers' side ---------------------------------------------- */

/* A request made ready to queue (not yet queued). */
static void prepare(s3_req *r)
{
    pthread_cond_init(&r->cond, NULL);
    r->cond_ready = true;
    r->done = false;
    r->attempts = 0;
    r->next = NULL;
    r->all_headers = NULL;
    r->easy = NULL;
    r->hedge = r->hedge_of = NULL;
    r->hedged = false;
    r->act_prev = r->act_next = NULL;
    Dlk_buf_init(&r->hbody);
    r->out_start = r->out ? r->out->len : 0;
    reset_result(r);
}

void s3_submit_all(s3_engine *e, s3_req **rs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        prepare(rs[i]);
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < n; i++) {
        if (e->tail)
            e->tail->next = rs[i];
        else
            e->head = rs[i];
        e->tail = rs[i];
    }
    pthread_mutex_unlock(&e->mu);
    /* one wake-up for the lot */
    if (n)
        wake(e);
}

void s3_submit(s3_engine *e, s3_req *r)
{
    s3_submit_all(e, &r, 1);
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
    Dlk_buf_free(&r->errbody);
    if (r->cond_ready)
        pthread_cond_destroy(&r->cond);
    r->cond_ready = false;
}

void s3_engine_raise_max(s3_engine *e, int n)
{
    pthread_mutex_lock(&e->mu);
    if (n > e->cap)
        e->cap = n;
    pthread_mutex_unlock(&e->mu);
}

int s3_engine_max(s3_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int m = e->max;
    pthread_mutex_unlock(&e->mu);
    return m;
}

int s3_engine_limit(s3_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int l = e->limit;
    pthread_mutex_unlock(&e->mu);
    return l;
}

void s3_engine_hedges(s3_engine *e, s3_hedge_stats *out)
{
    out->started = __atomic_load_n(&e->hedges, __ATOMIC_RELAXED);
    out->won = __atomic_load_n(&e->hedge_wins, __ATOMIC_RELAXED);
}

uint64_t s3_hedges_total(void)
{
    return __atomic_load_n(&hedges_total, __ATOMIC_RELAXED);
}

void s3_engine_free(s3_engine *e)
{
    if (!e)
        return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stop = true;
        pthread_mutex_unlock(&e->mu);
        wake(e);
        pthread_join(e->thread, NULL);
    }
    for (int i = 0; i < e->nidle; i++)
        curl_easy_cleanup(e->idle[i]);
    free(e->idle);
    if (e->multi)
        curl_multi_cleanup(e->multi); /* may still name sockets to drop */
    if (e->epfd >= 0)
        close(e->epfd);
    if (e->evfd >= 0)
        close(e->evfd);
    pthread_mutex_destroy(&e->mu);
    s3_signer_free(e->signer);
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
        return Dlk_fail(err, DLK_ENET, "cannot initialise libcurl: %s",
                        curl_easy_strerror(curl_init_rc));
    s3_engine *e = calloc(1, sizeof *e);
    if (!e)
        return Dlk_oom(err);
    pthread_mutex_init(&e->mu, NULL);
    e->epfd = e->evfd = -1;
    e->timer_at_ms = -1;
    e->max = e->limit = e->cap = cfg->max_inflight;
    e->win_min_lat_ms = INT64_MAX;
    e->max_attempts = cfg->max_attempts;
    e->recv_buffer = cfg->recv_buffer ? cfg->recv_buffer : 64L << 10;
    /* a config not made by s3_config_from (a test's) gets the defaults */
    e->stall_rate = cfg->stall_rate > 0 ? cfg->stall_rate
                                        : S3_STALL_RATE_DEFAULT;
    e->stall_seconds = cfg->stall_seconds > 0 ? cfg->stall_seconds
                                              : S3_STALL_SECONDS_DEFAULT;
    e->request_timeout = cfg->request_timeout > 0
                             ? cfg->request_timeout
                             : S3_REQUEST_TIMEOUT_DEFAULT;
    e->cancel = cfg->cancel;
    e->cancel_ud = cfg->cancel_ud;
    e->hedge_on = !cfg->hedge_off;
    e->hedge_min_ms = cfg->hedge_min_ms > 0 ? cfg->hedge_min_ms
                                            : S3_HEDGE_MIN_MS_DEFAULT;
    e->hedge_tokens = HEDGE_TOKENS_START;
    e->rng = (uint64_t)now_ms() * 0x9E3779B97F4A7C15ull ^ (uintptr_t)e;
    if (!e->rng)
        e->rng = 1;
    bool ok = true;
    e->ca_bundle = dup_or(cfg->ca_bundle, &ok);
    if (cfg->access_key && cfg->secret_key) {
        e->signer = s3_signer_new(cfg->access_key, cfg->secret_key,
                                  cfg->region, cfg->session_token);
        ok = ok && e->signer != NULL;
    }
    e->idle = calloc((size_t)e->max, sizeof *e->idle);
    e->multi = curl_multi_init();
    if (!ok || !e->idle || !e->multi) {
        s3_engine_free(e);
        return Dlk_oom(err);
    }
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wev;
    memset(&wev, 0, sizeof wev);
    wev.events = EPOLLIN;
    wev.data.fd = e->evfd;
    if (e->epfd < 0 || e->evfd < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &wev) != 0) {
        int errnum = errno;
        s3_engine_free(e);
        return Dlk_fail(err, DLK_EIO, "cannot set up the s3 i/o thread's "
                        "event loop: %s", strerror(errnum));
    }
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
    curl_multi_setopt(e->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      (long)e->max);
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)e->max);
    if (pthread_create(&e->thread, NULL, loop, e) != 0) {
        s3_engine_free(e);
        return Dlk_fail(err, DLK_ENOMEM, "cannot start the s3 i/o thread");
    }
    pthread_setname_np(e->thread, "dlk-s3");
    e->thread_started = true;
    *out = e;
    return DLK_OK;
}
