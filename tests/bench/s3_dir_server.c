/* s3_dir_server.c - a read-only S3 endpoint over a directory, for the
 * benchmarks: each folder under ROOT is a bucket, each file beneath it an
 * object (its path below the bucket is the key).  It answers GetObject
 * (with Range), HeadObject and ListObjectsV2 (prefix, delimiter,
 * start-after, max-keys, continuation tokens, encoding-type=url) through
 * GNU libmicrohttpd, sending files with sendfile; anything else gets 501.
 *
 * Why: moto, the S3 server the tests use, is one Python process that
 * serves about 300 small GETs a second, far below what ingest decodes, so
 * a benchmark against it measures moto.  This one serves tens of
 * thousands a second on one thread, which leaves the client's side (dlk's
 * signing, libcurl, GETs in flight, the pipeline) as what is measured.  It
 * does not check signatures (any credentials are accepted) and never
 * writes: moto stays the S3 of the tests, this is only a fast source.
 *
 *   s3_dir_server ROOT [THREADS]   listens on 127.0.0.1, a free port, and
 *                                  prints "port N" when ready; runs until
 *                                  SIGTERM or SIGINT
 * S3_DIR_SERVER_DELAY_MS=D holds every answer D ms, as S3's time to first
 * byte, and serves each connection on a thread of its own (THREADS is
 * then ignored: a pool thread holds every connection it accepted, and
 * their waits would add up): what a client gains by having requests in
 * flight together then shows.
 * S3_DIR_SERVER_LOG=FILE writes a line for each request as it comes in:
 * CLOCK_MONOTONIC in seconds, the method, the URL and the Range.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct object {
    char *key;
    uint64_t size;
    time_t mtime;
} object;

typedef struct bucket {
    char *name;
    object *objs; /* sorted by key, byte order as S3 sorts */
    size_t n, cap;
} bucket;

static const char *root;
static unsigned delay_ms;
/* S3_DIR_SERVER_LOG: one line a request (wall-clock seconds when it came
 * in on CLOCK_MONOTONIC, method, URL, Range), to line up a client's
 * requests with its own timeline (DLK_CUDA_TRACE's origin line) */
static FILE *req_log;
static pthread_mutex_t req_log_mu = PTHREAD_MUTEX_INITIALIZER;
static bucket *buckets;
static size_t nbuckets;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "s3_dir_server: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void add_object(bucket *b, const char *key, const struct stat *st)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 1024;
        if (!(b->objs = realloc(b->objs, b->cap * sizeof *b->objs)))
            die("out of memory");
    }
    object *o = &b->objs[b->n++];
    if (!(o->key = strdup(key)))
        die("out of memory");
    o->size = (uint64_t)st->st_size;
    o->mtime = st->st_mtime;
}

/* Every regular file under dir (path rel below the bucket), following
 * links; up lists the folders on the way down (a link to one of them
 * would never end, so it is skipped). */
typedef struct up {
    const struct up *parent;
    dev_t dev;
    ino_t ino;
} up;

static void walk(bucket *b, const char *dir, const char *rel, const up *u)
{
    DIR *d = opendir(dir);
    if (!d)
        die("cannot read %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[4096], key[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(key, sizeof key, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        struct stat st;
        if (stat(path, &st))
            continue;
        if (S_ISREG(st.st_mode)) {
            add_object(b, key, &st);
        } else if (S_ISDIR(st.st_mode)) {
            const up *a = u;
            while (a && (a->dev != st.st_dev || a->ino != st.st_ino))
                a = a->parent;
            if (!a) {
                up here = {u, st.st_dev, st.st_ino};
                walk(b, path, key, &here);
            }
        }
    }
    closedir(d);
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const object *)a)->key, ((const object *)b)->key);
}

static void load(void)
{
    DIR *d = opendir(root);
    if (!d)
        die("cannot read %s: %s", root, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) || !S_ISDIR(st.st_mode))
            continue;
        if (!(buckets = realloc(buckets, (nbuckets + 1) * sizeof *buckets)))
            die("out of memory");
        bucket *b = &buckets[nbuckets++];
        memset(b, 0, sizeof *b);
        if (!(b->name = strdup(e->d_name)))
            die("out of memory");
        up top = {NULL, st.st_dev, st.st_ino};
        walk(b, path, "", &top);
        qsort(b->objs, b->n, sizeof *b->objs, by_key);
    }
    closedir(d);
}

static bucket *find_bucket(const char *name, size_t len)
{
    for (size_t i = 0; i < nbuckets; i++)
        if (strlen(buckets[i].name) == len &&
            !memcmp(buckets[i].name, name, len))
            return &buckets[i];
    return NULL;
}

/* A growing text buffer for the XML answers. */
typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void put(text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        if (!(t->p = realloc(t->p, t->cap)))
            die("out of memory");
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void putf(text *t, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put(t, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* s as XML text, or URL-encoded (encoding-type=url: all but unreserved
 * characters and '/'), between <tag> and </tag>. */
static void put_elem(text *t, const char *tag, const char *s, size_t n,
                     bool url)
{
    putf(t, "<%s>", tag);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (url && !(c == '/' || c == '-' || c == '_' || c == '.' ||
                     c == '~' || (c >= '0' && c <= '9') ||
                     (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            snprintf(e, sizeof e, "%%%02X", c);
            put(t, e, 3);
        } else if (c == '<') {
            put(t, "&lt;", 4);
        } else if (c == '>') {
            put(t, "&gt;", 4);
        } else if (c == '&') {
            put(t, "&amp;", 5);
        } else {
            put(t, (const char *)&c, 1);
        }
    }
    putf(t, "</%s>", tag);
}

static enum MHD_Result answer_text(struct MHD_Connection *c, unsigned code,
                                   text *t)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        t->len, t->p, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/xml");
    enum MHD_Result ok = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result answer_error(struct MHD_Connection *c, unsigned code,
                                    const char *s3code, const char *msg,
                                    const char *resource)
{
    text t = {0};
    putf(&t, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s"
         "</Code><Message>%s</Message>", s3code, msg);
    put_elem(&t, "Resource", resource, strlen(resource), false);
    put(&t, "</Error>", 8);
    return answer_text(c, code, &t);
}

static const char *arg(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

static void iso_time(time_t t, char *out, size_t cap)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

/* The first object with key >= s (binary search). */
static size_t lower_bound(const bucket *b, const char *s)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(b->objs[mid].key, s) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static enum MHD_Result list_v2(struct MHD_Connection *c, const bucket *b,
                               const char *url)
{
    const char *prefix = arg(c, "prefix"), *delim = arg(c, "delimiter"),
               *token = arg(c, "continuation-token"),
               *after = arg(c, "start-after"), *mk = arg(c, "max-keys"),
               *enc = arg(c, "encoding-type");
    if (!prefix)
        prefix = "";
    if (delim && !*delim)
        delim = NULL;
    bool url_enc = enc && !strcmp(enc, "url");
    long max = mk ? strtol(mk, NULL, 10) : 1000;
    if (max < 0 || max > 1000)
        max = 1000;
    size_t plen = strlen(prefix), i = lower_bound(b, prefix);
    if (token) {
        /* the token is "k" and the index of the next key: the listing
         * never changes while the server runs */
        char *end;
        unsigned long long k = token[0] == 'k' ? strtoull(token + 1, &end, 10)
                                               : 0;
        if (token[0] != 'k' || *end || k > b->n)
            return answer_error(c, 400, "InvalidArgument",
                                "The continuation token is not valid", url);
        i = (size_t)k;
    } else if (after) {
        size_t j = lower_bound(b, after);
        if (j < b->n && !strcmp(b->objs[j].key, after))
            j++;
        if (j > i)
            i = j;
    }
    text t = {0}, body = {0};
    long count = 0;
    bool truncated = false;
    const char *last_cp = NULL;
    size_t last_cp_len = 0;
    for (; i < b->n && strncmp(b->objs[i].key, prefix, plen) == 0; i++) {
        const object *o = &b->objs[i];
        const char *rest = o->key + plen, *cut = delim ? strstr(rest, delim)
                                                       : NULL;
        if (cut) {
            /* one CommonPrefixes entry for every key under it */
            size_t n = (size_t)(cut - o->key) + strlen(delim);
            if (last_cp && n == last_cp_len && !memcmp(last_cp, o->key, n))
                continue;
            if (count == max) {
                truncated = true;
                break;
            }
            put(&body, "<CommonPrefixes>", 16);
            put_elem(&body, "Prefix", o->key, n, url_enc);
            put(&body, "</CommonPrefixes>", 17);
            last_cp = o->key;
            last_cp_len = n;
            count++;
            continue;
        }
        if (count == max) {
            truncated = true;
            break;
        }
        char when[32];
        iso_time(o->mtime, when, sizeof when);
        put(&body, "<Contents>", 10);
        put_elem(&body, "Key", o->key, strlen(o->key), url_enc);
        putf(&body, "<LastModified>%s</LastModified><ETag>&quot;%016llx"
             "%016llx&quot;</ETag><Size>%llu</Size><StorageClass>STANDARD"
             "</StorageClass></Contents>", when,
             (unsigned long long)o->size, (unsigned long long)o->mtime,
             (unsigned long long)o->size);
        count++;
    }
    putf(&t, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
         "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>%s</Name>",
         b->name);
    put_elem(&t, "Prefix", prefix, plen, url_enc);
    if (delim)
        put_elem(&t, "Delimiter", delim, strlen(delim), url_enc);
    if (after)
        put_elem(&t, "StartAfter", after, strlen(after), url_enc);
    if (token)
        put_elem(&t, "ContinuationToken", token, strlen(token), false);
    if (url_enc)
        putf(&t, "<EncodingType>url</EncodingType>");
    putf(&t, "<KeyCount>%ld</KeyCount><MaxKeys>%ld</MaxKeys><IsTruncated>%s"
         "</IsTruncated>", count, max, truncated ? "true" : "false");
    if (truncated)
        putf(&t, "<NextContinuationToken>k%zu</NextContinuationToken>", i);
    if (body.len)
        put(&t, body.p, body.len);
    free(body.p);
    put(&t, "</ListBucketResult>", 19);
    return answer_text(c, 200, &t);
}

/* Parse "bytes=A-B", "bytes=A-" or "bytes=-N" against size: 1 and
 * [*off, *off + *len) when satisfiable, 0 when absent, -1 when not. */
static int parse_range(const char *h, uint64_t size, uint64_t *off,
                       uint64_t *len)
{
    if (!h)
        return 0;
    if (strncmp(h, "bytes=", 6))
        return -1;
    const char *p = h + 6;
    char *end;
    if (*p == '-') {
        unsigned long long n = strtoull(p + 1, &end, 10);
        if (*end || n == 0 || size == 0)
            return -1;
        *len = n < size ? n : size;
        *off = size - *len;
        return 1;
    }
    unsigned long long a = strtoull(p, &end, 10), b = size ? size - 1 : 0;
    if (*end != '-' || a >= size)
        return -1;
    if (end[1]) {
        b = strtoull(end + 1, &end, 10);
        if (*end || b < a)
            return -1;
        if (b >= size)
            b = size - 1;
    }
    *off = a;
    *len = b - a + 1;
    return 1;
}

static enum MHD_Result get_object(struct MHD_Connection *c, const bucket *b,
                                  const char *key, const char *url)
{
    /* keys are files: no "." or ".." parts leave the bucket's folder */
    for (const char *p = key; *p;) {
        const char *q = strchr(p, '/');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') ||
            (n == 2 && p[0] == '.' && p[1] == '.'))
            return answer_error(c, 404, "NoSuchKey",
                                "The specified key does not exist.", url);
        p += n + (q != NULL);
    }
    char path[8192];
    snprintf(path, sizeof path, "%s/%s/%s", root, b->name, key);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return answer_error(c, 404, "NoSuchKey",
                            "The specified key does not exist.", url);
    }
    uint64_t size = (uint64_t)st.st_size, off = 0, len = size;
    int rg = parse_range(MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     "Range"),
                         size, &off, &len);
    if (rg < 0) {
        close(fd);
        return answer_error(c, 416, "InvalidRange",
                            "The requested range is not satisfiable", url);
    }
    /* the response owns fd from here */
    struct MHD_Response *r =
        MHD_create_response_from_fd_at_offset64(len, fd, off);
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    char etag[64], when[64], cr[96];
    snprintf(etag, sizeof etag, "\"%016llx%016llx\"",
             (unsigned long long)size, (unsigned long long)st.st_mtime);
    struct tm tm;
    gmtime_r(&st.st_mtime, &tm);
    strftime(when, sizeof when, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    MHD_add_response_header(r, "ETag", etag);
    MHD_add_response_header(r, "Last-Modified", when);
    MHD_add_response_header(r, "Accept-Ranges", "bytes");
    if (rg > 0) {
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu",
                 (unsigned long long)off, (unsigned long long)(off + len - 1),
                 (unsigned long long)size);
        MHD_add_response_header(r, "Content-Range", cr);
    }
    enum MHD_Result ok = MHD_queue_response(c, rg > 0 ? 206 : 200, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)cls;
    (void)version;
    (void)upload;
    /* answered on the second call: a response queued on the first, before
     * the request is known to have no body, makes libmicrohttpd close the
     * connection after it (each GET would then pay a new connection) */
    static int seen;
    if (!*state) {
        *state = &seen;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* a body, ignored: only GET and HEAD are served */
        return MHD_YES;
    }
    if (req_log) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        const char *rg =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
        pthread_mutex_lock(&req_log_mu);
        fprintf(req_log, "%.6f %s %s %s\n",
                (double)now.tv_sec + now.tv_nsec / 1e9, method, url,
                rg ? rg : "-");
        fflush(req_log);
        pthread_mutex_unlock(&req_log_mu);
    }
    if (delay_ms) {
        struct timespec ts = {delay_ms / 1000,
                              (long)(delay_ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) && errno == EINTR)
            ;
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return answer_error(c, 501, "NotImplemented",
                            "This server is read-only: GET and HEAD only",
                            url);
    /* path style: /BUCKET or /BUCKET/KEY (libmicrohttpd has decoded it) */
    const char *name = url + (*url == '/');
    const char *slash = strchr(name, '/');
    size_t nlen = slash ? (size_t)(slash - name) : strlen(name);
    const bucket *b = find_bucket(name, nlen);
    if (!b)
        return answer_error(c, 404, "NoSuchBucket",
                            "The specified bucket does not exist", url);
    if (!slash || !slash[1]) {
        const char *lt = arg(c, "list-type");
        if (lt && !strcmp(lt, "2"))
            return list_v2(c, b, url);
        return answer_error(c, 501, "NotImplemented",
                            "Only ListObjectsV2 (list-type=2) is served",
                            url);
    }
    return get_object(c, b, slash + 1, url);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: s3_dir_server ROOT [THREADS]\n");
        return 2;
    }
    root = argv[1];
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    if (threads < 1 || threads > 256)
        die("THREADS must be 1 to 256");
    const char *dl = getenv("S3_DIR_SERVER_DELAY_MS");
    delay_ms = dl ? (unsigned)atoi(dl) : 0;
    const char *lg = getenv("S3_DIR_SERVER_LOG");
    if (lg && *lg && !(req_log = fopen(lg, "w")))
        die("cannot write %s", lg);
    load();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGPIPE);
    /* blocked in every thread (they inherit the mask); main waits */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    unsigned flags = delay_ms ? MHD_USE_THREAD_PER_CONNECTION |
                                    MHD_USE_INTERNAL_POLLING_THREAD
                              : MHD_USE_EPOLL_INTERNAL_THREAD;
    if (delay_ms)
        threads = 1;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, NULL,
        MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)120, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
        /* a pool of one is no pool (libmicrohttpd warns): end the list */
        threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads,
        MHD_OPTION_END);
    if (!d)
        die("cannot start the HTTP daemon");
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    size_t nobj = 0;
    for (size_t i = 0; i < nbuckets; i++)
        nobj += buckets[i].n;
    printf("port %u\n", di ? di->port : 0);
    fflush(stdout);
    fprintf(stderr, "s3_dir_server: %zu buckets, %zu objects, %u threads\n",
            nbuckets, nobj, threads);
    int sig = 0;
    sigdelset(&set, SIGPIPE);
    sigwait(&set, &sig);
    MHD_stop_daemon(d);
    return 0;
}
