/* cache.c - a node-local cache of chunk objects in front of a remote
 * store, shared by the processes of a node (formats/dlk-v1.md, Appendix
 * B; docs/cache.md).  A chunk is kept whole under its name, the
 * XXH3-128 of its bytes: a copy is valid for every commit and view that
 * names the chunk, and never needs invalidating.  The cache is never
 * required: a folder that cannot be written (or a full disk) turns
 * writing off with one warning, and chunks are read from the store. */
#include "util/error.h"
#include "util/grow.h"
#include "util/buf.h"
#include "util/bytes.h"
#include "util/hash.h"
#include "util/text.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* The lock file's first 16 bytes: this magic, then the bytes the
 * objects/ folder holds (u64, little-endian), kept under its lock. */
#define CACHE_MAGIC "dlkcach1"
#define NAME_LEN 32

typedef struct cache {
    Dlk_store base;             /* first: the store the loader reads */
    Dlk_store *inner;
    char *dir;
    int obj_fd, tmp_fd, lock_fd; /* objects/, tmp/, the lock file */
    uint64_t limit;
    bool verify;
    bool writes_off;            /* atomic: set once, with the warning */
    /* the lock file's flock is one per open file, so the threads of a
     * process take turns on it here */
    pthread_mutex_t usage_mu;
    pthread_mutex_t mu;         /* the set and the warning */
    char warning[256];
    /* names this handle checked (or wrote): two u64 each, 0,0 free */
    uint64_t (*seen)[2];
    size_t nseen, seen_cap;
    uint64_t hits, fetched, evicted, dropped; /* atomic */
} cache;

static bool is_name(const char *h)
{
    if (strlen(h) != NAME_LEN)
        return false;
    for (int i = 0; i < NAME_LEN; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
            return false;
    return true;
}

/* The name of a chunk's key "chunks/<tensor>/<name>"; false for another
 * key. */
static bool chunk_name(const char *key, char name[NAME_LEN + 1])
{
    if (strncmp(key, "chunks/", 7) != 0)
        return false;
    const char *h = strrchr(key, '/') + 1;
    if (h - key <= 8 || !is_name(h))
        return false;
    memcpy(name, h, NAME_LEN + 1);
    return true;
}

static bool stopped(cache *c)
{
    return __atomic_load_n(&c->writes_off, __ATOMIC_ACQUIRE);
}

/* Writing off for good, with the one warning (the first failure's). */
static void turn_off(cache *c, const char *what, int e)
{
    pthread_mutex_lock(&c->mu);
    if (!c->writes_off) {
        char safe[160];
        snprintf(c->warning, sizeof c->warning, "chunk cache '%s' not "
                 "written: %s: %s; chunks are read from the store",
                 Dlk_escape(c->dir, safe, sizeof safe), what, strerror(e));
        __atomic_store_n(&c->writes_off, true, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->mu);
}

static void name_words(const char *name, uint64_t w[2])
{
    w[0] = w[1] = 0;
    for (int i = 0; i < NAME_LEN; i++) {
        unsigned d = name[i] <= '9' ? (unsigned)(name[i] - '0')
                                    : (unsigned)(name[i] - 'a' + 10);
        w[i / 16] = w[i / 16] << 4 | d;
    }
    w[1] |= 1; /* never 0,0 (a free entry); a name differing only in its
                  last bit shares an entry: it is checked on read anyway */
}

/* Whether this handle checked the name; remember: mark it checked. */
static bool seen(cache *c, const char *name, bool remember)
{
    uint64_t w[2];
    name_words(name, w);
    pthread_mutex_lock(&c->mu);
    bool found = false;
    if (remember && (c->nseen + 1) * 2 > c->seen_cap) {
        size_t cap = c->seen_cap ? c->seen_cap * 2 : 1024;
        uint64_t (*t)[2] = calloc(cap, sizeof *t);
        if (t) { /* out of memory: the name is checked again next time */
            for (size_t i = 0; i < c->seen_cap; i++)
                if (c->seen[i][1]) {
                    size_t j = c->seen[i][0] & (cap - 1);
                    while (t[j][1])
                        j = (j + 1) & (cap - 1);
                    t[j][0] = c->seen[i][0];
                    t[j][1] = c->seen[i][1];
                }
            free(c->seen);
            c->seen = t;
            c->seen_cap = cap;
        }
    }
    if (c->seen_cap) {
        size_t j = w[0] & (c->seen_cap - 1);
        while (c->seen[j][1] && !(c->seen[j][0] == w[0] &&
                                  c->seen[j][1] == w[1]))
            j = (j + 1) & (c->seen_cap - 1);
        found = c->seen[j][1] != 0;
        if (!found && remember && (c->nseen + 1) * 2 <= c->seen_cap) {
            c->seen[j][0] = w[0];
            c->seen[j][1] = w[1];
            c->nseen++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}

static bool same_file(int fd, int dir_fd, const char *name)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 &&
           fstatat(dir_fd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static bool hashes_to(const void *p, size_t n, const char *name)
{
    char hex[33];
    Dlk_hash128_hex(p, n, hex);
    return memcmp(hex, name, NAME_LEN) == 0;
}

/* A copy found bad (another size, bytes that do not hash to its name):
 * removed, unless another process has put a new one there meanwhile. */
static void drop(cache *c, const char *name, int fd)
{
    if (same_file(fd, c->obj_fd, name))
        unlinkat(c->obj_fd, name, 0);
    close(fd);
    __atomic_add_fetch(&c->dropped, 1, __ATOMIC_RELAXED);
}

/* The copy of `name`, open (-1: none, or a bad one, now removed): it
 * holds `size` bytes and, at its first use by this handle (verify), they
 * hash to its name.  Its time is set to now: the eviction order. */
static int open_copy(cache *c, const char *name, uint64_t size)
{
    if (c->obj_fd < 0)
        return -1;
    int fd = openat(c->obj_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != size || size == 0) {
        drop(c, name, fd);
        return -1;
    }
    if (c->verify && !seen(c, name, false)) {
        void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        bool good = p != MAP_FAILED && hashes_to(p, (size_t)size, name);
        if (p != MAP_FAILED)
            munmap(p, (size_t)size);
        if (!good) {
            drop(c, name, fd);
            return -1;
        }
        seen(c, name, true);
    }
    /* once a second at most: spans of one chunk read it many times */
    if (time(NULL) > st.st_mtime)
        futimens(fd, NULL);
    return fd;
}

/* The chunk's temp file, created if need be and locked: the process that
 * holds it fetches the chunk, the others wait on it.  The lock is on the
 * file the name holds once it is taken (checked after the lock: the
 * holder before may have renamed or removed it).  -1: writing is off. */
static int lock_temp(cache *c, const char *name)
{
    for (int tries = 0; tries < 64; tries++) {
        int fd = openat(c->tmp_fd, name, O_RDWR | O_CREAT | O_CLOEXEC |
                        O_NOFOLLOW, 0644);
        if (fd < 0) {
            turn_off(c, "cannot create a file in tmp/", errno);
            return -1;
        }
        int r;
        while ((r = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
            ;
        if (r != 0) {
            turn_off(c, "cannot lock a file in tmp/", errno);
            close(fd);
            return -1;
        }
        if (same_file(fd, c->tmp_fd, name))
            return fd;
        close(fd);
    }
    return -1;
}

typedef struct entry {
    int64_t t;                  /* last use, ns */
    uint64_t size;
    char name[NAME_LEN + 1];
} entry;

static int by_time(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* The bytes objects/ holds; with room > 0, the least recently used
 * copies removed first until that many more fit within 15/16 of the
 * limit (so that the next few chunks need no scan).  Under the lock. */
static uint64_t scan(cache *c, uint64_t room)
{
    int dfd = dup(c->obj_fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    rewinddir(d); /* the offset is shared with obj_fd's, left at the end */
    entry *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (!is_name(de->d_name) ||
            fstatat(c->obj_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        total += (uint64_t)st.st_size;
        if (!room)
            continue;
        if (!DLK_GROW(v, n, cap, 256))
            break;
        v[n].t = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        v[n].size = (uint64_t)st.st_size;
        memcpy(v[n].name, de->d_name, NAME_LEN + 1);
        n++;
    }
    closedir(d);
    uint64_t target = c->limit - c->limit / 16;
    if (room && total + room > c->limit) {
        qsort(v, n, sizeof *v, by_time);
        for (size_t i = 0; i < n && total + room > target; i++)
            if (unlinkat(c->obj_fd, v[i].name, 0) == 0) {
                total -= v[i].size;
                __atomic_add_fetch(&c->evicted, 1, __ATOMIC_RELAXED);
            }
    }
    free(v);
    return total;
}

static bool lock_usage(cache *c)
{
    pthread_mutex_lock(&c->usage_mu);
    int r;
    while ((r = flock(c->lock_fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    if (r != 0)
        pthread_mutex_unlock(&c->usage_mu);
    return r == 0;
}

static void unlock_usage(cache *c)
{
    flock(c->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&c->usage_mu);
}

static bool read_usage(cache *c, uint64_t *total)
{
    uint8_t b[16];
    if (pread(c->lock_fd, b, sizeof b, 0) != (ssize_t)sizeof b ||
        memcmp(b, CACHE_MAGIC, 8) != 0)
        return false;
    *total = Dlk_get_le64(b + 8);
    return true;
}

static void write_usage(cache *c, uint64_t total)
{
    uint8_t b[16];
    memcpy(b, CACHE_MAGIC, 8);
    Dlk_put_le64(b + 8, total);
    if (pwrite(c->lock_fd, b, sizeof b, 0) != (ssize_t)sizeof b)
        turn_off(c, "cannot write the file 'lock'", errno ? errno : EIO);
}

/* The temp file of `name`, `size` bytes, renamed into objects/ with
 * room made for it within the limit (eviction where need be) and
 * counted, under the lock: a scan never misses a copy counted but not
 * yet renamed.  False: the chunk alone exceeds the limit, or writing
 * failed (turned off). */
static bool put_copy(cache *c, const char *name, uint64_t size)
{
    if (size > c->limit || !lock_usage(c))
        return false;
    uint64_t total;
    if (!read_usage(c, &total) || total + size > c->limit)
        total = scan(c, size);
    bool moved = renameat(c->tmp_fd, name, c->obj_fd, name) == 0;
    if (!moved)
        turn_off(c, "cannot rename into objects/", errno);
    else
        write_usage(c, total + size);
    unlock_usage(c);
    return moved;
}

/* Write the fetched object b to the locked temp file t and rename it in
 * under its name, where it hashes to it (else the reader's own checks
 * name the damage).  Closes t, which lets those waiting on it go on. */
static void keep(cache *c, const char *name, int t, const Dlk_buf *b)
{
    bool kept = false;
    if (!hashes_to(b->data, b->len, name))
        goto out;
    if (ftruncate(t, 0) != 0) {
        turn_off(c, "cannot write in tmp/", errno);
        goto out;
    }
    for (size_t at = 0; at < b->len;) {
        ssize_t w = pwrite(t, b->data + at, b->len - at, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            turn_off(c, "cannot write in tmp/", w < 0 ? errno : ENOSPC);
            goto out;
        }
        at += (size_t)w;
    }
    if (!put_copy(c, name, b->len))
        goto out;
    kept = true;
    seen(c, name, true);
    __atomic_add_fetch(&c->fetched, 1, __ATOMIC_RELAXED);
out:
    if (!kept)
        unlinkat(c->tmp_fd, name, 0);
    close(t);
}

/* Bytes [off, off+len) of the copy fd appended to out: 0, or the error
 * (the caller reads the store instead). */
static int read_copy(int fd, uint64_t off, uint64_t len, Dlk_buf *out)
{
    if (Dlk_buf_reserve(out, (size_t)len, NULL))
        return ENOMEM;
    uint8_t *p = out->data + out->len;
    for (uint64_t at = 0; at < len;) {
        ssize_t r = pread(fd, p + at, (size_t)(len - at), (off_t)(off + at));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : EIO; /* EIO: shorter than it was */
        at += (uint64_t)r;
    }
    out->len += (size_t)len;
    return 0;
}

/* What the store itself reads, counted there (this store counts none). */
static dlk_status pass_sized(cache *c, const char *key, uint64_t size,
                             uint64_t off, uint64_t len, Dlk_buf *out,
                             Dlk_obj_info *info, dlk_error *err)
{
    if (off == 0 && len == size)
        return Dlk_store_get_sized(c->inner, key, size, out, info, err);
    return Dlk_store_get_span(c->inner, key, size, off, len, out, err);
}

/* One read of a chunk: from its copy; else fetched whole under its temp
 * file's lock (unless another process fetched it while this one
 * waited), kept, and the bytes asked for given from it; else, with
 * writing off, from the store as asked. */
static dlk_status get_chunk(cache *c, const char *key, const char *name,
                            uint64_t size, uint64_t off, uint64_t len,
                            Dlk_buf *out, Dlk_obj_info *info, dlk_error *err)
{
    int fd = open_copy(c, name, size);
    int t = -1;
    /* a chunk larger than the cache is never kept: read as asked, not
     * fetched whole for every span of it */
    if (fd < 0 && !stopped(c) && size <= c->limit &&
        (t = lock_temp(c, name)) >= 0 &&
        (fd = open_copy(c, name, size)) >= 0) {
        unlinkat(c->tmp_fd, name, 0); /* another process fetched it */
        close(t);
        t = -1;
    }
    if (fd >= 0) {
        size_t before = out->len;
        int e = read_copy(fd, off, len, out);
        close(fd);
        if (!e) {
            if (info)
                info->size = size;
            __atomic_add_fetch(&c->hits, 1, __ATOMIC_RELAXED);
            return DLK_OK;
        }
        out->len = before;
        turn_off(c, "cannot read a copy in objects/", e);
    }
    if (t < 0)
        return pass_sized(c, key, size, off, len, out, info, err);
    /* the whole chunk, straight into out when that is what is asked */
    bool whole = off == 0 && len == size;
    Dlk_buf mine;
    Dlk_buf_init(&mine);
    Dlk_buf *b = whole ? out : &mine;
    size_t before = b->len;
    Dlk_obj_info got;
    dlk_status rc = Dlk_store_get_sized(c->inner, key, size, b, &got, err);
    if (rc || got.size != size || b->len - before != size) {
        unlinkat(c->tmp_fd, name, 0);
        close(t);
        if (whole && info)
            *info = got;
        Dlk_buf_free(&mine);
        if (rc || whole)
            return rc;
        return pass_sized(c, key, size, off, len, out, info, err);
    }
    Dlk_buf view = {b->data + before, size, size, true};
    keep(c, name, t, &view);
    if (whole) {
        if (info)
            *info = got;
    } else {
        rc = Dlk_buf_append(out, mine.data + off, (size_t)len, err);
    }
    Dlk_buf_free(&mine);
    return rc;
}

static dlk_status cache_get_sized(Dlk_store *s, const char *key,
                                  uint64_t size, uint64_t off, uint64_t len,
                                  Dlk_buf *out, Dlk_obj_info *info,
                                  unsigned *requests, dlk_error *err)
{
    cache *c = (cache *)s;
    char name[NAME_LEN + 1];
    *requests = 0;
    if (!chunk_name(key, name))
        return pass_sized(c, key, size, off, len, out, info, err);
    return get_chunk(c, key, name, size, off, len, out, info, err);
}

static dlk_status cache_get_spans(Dlk_store *s, const char *key,
                                  uint64_t size, size_t n,
                                  const uint64_t *off, const uint64_t *len,
                                  Dlk_buf **outs, unsigned *requests,
                                  dlk_error *err)
{
    cache *c = (cache *)s;
    char name[NAME_LEN + 1];
    *requests = 0;
    bool chunk = chunk_name(key, name);
    if (chunk && stopped(c)) {
        int fd = open_copy(c, name, size);
        chunk = fd >= 0;
        if (fd >= 0)
            close(fd);
    }
    /* the store's own spans, in one round trip, where no copy is made */
    if (!chunk)
        return Dlk_store_get_spans(c->inner, key, size, n, off, len, outs,
                                   err);
    for (size_t i = 0; i < n; i++) {
        dlk_status rc = get_chunk(c, key, name, size, off[i], len[i],
                                  outs[i], NULL, err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

static dlk_status cache_get(Dlk_store *s, const char *key, uint64_t off,
                            uint64_t len, uint64_t max, Dlk_buf *out,
                            Dlk_obj_info *info, dlk_error *err)
{
    cache *c = (cache *)s;
    if (off == 0 && len == UINT64_MAX)
        return Dlk_store_get(c->inner, key, max, out, info, err);
    return Dlk_store_get_range(c->inner, key, off, len, out, err);
}

static dlk_status cache_head(Dlk_store *s, const char *key,
                             Dlk_obj_info *info, dlk_error *err)
{
    return Dlk_store_head(((cache *)s)->inner, key, info, err);
}

static dlk_status read_only(Dlk_store *s, const char *key, dlk_error *err)
{
    return Dlk_fail(err, DLK_EUNSUPPORTED, "'%s' through the chunk cache: "
                    "the cache is read-only", key ? key : s->url);
}

static dlk_status cache_put(Dlk_store *s, const char *key, const void *data,
                            size_t len, Dlk_put_mode mode, const char *etag,
                            Dlk_obj_info *o, dlk_error *err)
{
    (void)data, (void)len, (void)mode, (void)etag, (void)o;
    return read_only(s, key, err);
}

static dlk_status cache_del(Dlk_store *s, const char *key, dlk_error *err)
{
    return read_only(s, key, err);
}

static dlk_status cache_list(Dlk_store *s, const char *prefix,
                             Dlk_list_fn fn, void *ud, dlk_error *err)
{
    (void)prefix, (void)fn, (void)ud;
    return read_only(s, NULL, err);
}

static void cache_free(Dlk_store *s)
{
    cache *c = (cache *)s;
    if (c->obj_fd >= 0)
        close(c->obj_fd);
    if (c->tmp_fd >= 0)
        close(c->tmp_fd);
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->usage_mu);
    free(c->seen);
    free(c->dir);
    free(c->base.url);
    free(c);
}

static const Dlk_store_ops cache_ops = {
    .scheme = "cache",
    .get = cache_get,
    .head = cache_head,
    .get_sized = cache_get_sized,
    .get_spans = cache_get_spans,
    .put = cache_put,
    .del = cache_del,
    .list = cache_list,
    .free = cache_free,
};

/* dir and its parents made where missing. */
static int make_dirs(const char *dir)
{
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p)
        return ENAMETOOLONG;
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (p[i] == '/' || p[i] == '\0') {
            char ch = p[i];
            p[i] = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return errno;
            p[i] = ch;
        }
    return 0;
}

/* Temp files no process holds (left by one killed while fetching). */
static void clean_temps(cache *c)
{
    int dfd = dup(c->tmp_fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    rewinddir(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_name(de->d_name))
            continue;
        int fd = openat(c->tmp_fd, de->d_name, O_RDONLY | O_CLOEXEC |
                        O_NOFOLLOW);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            same_file(fd, c->tmp_fd, de->d_name))
            unlinkat(c->tmp_fd, de->d_name, 0);
        close(fd);
    }
    closedir(d);
}

static int open_dir(cache *c, const char *sub, int *fd)
{
    int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno;
    int e = mkdirat(dfd, sub, 0755) != 0 && errno != EEXIST ? errno : 0;
    *fd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (*fd < 0 && !e)
        e = errno;
    close(dfd);
    return *fd >= 0 ? 0 : e;
}

/* The folders and the lock file, made where missing; stale temps
 * removed; the usage counted again and brought within the limit (a
 * limit of 0: the file system's free space less an eighth, with what
 * the cache holds). */
static void setup(cache *c, uint64_t limit)
{
    int e;
    char what[64];
    if ((e = make_dirs(c->dir))) {
        turn_off(c, "cannot make the folder", e);
    } else if ((e = open_dir(c, "objects", &c->obj_fd)) ||
               (e = open_dir(c, "tmp", &c->tmp_fd))) {
        snprintf(what, sizeof what, "cannot make %s/",
                 c->obj_fd < 0 ? "objects" : "tmp");
        turn_off(c, what, e);
    } else {
        int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        c->lock_fd = dfd < 0 ? -1 : openat(dfd, "lock", O_RDWR | O_CREAT |
                                           O_CLOEXEC | O_NOFOLLOW, 0644);
        e = errno;
        if (dfd >= 0)
            close(dfd);
        if (c->lock_fd < 0)
            turn_off(c, "cannot open the file 'lock'", e);
    }
    if (stopped(c) || !lock_usage(c)) {
        c->limit = limit;
        turn_off(c, "cannot lock the file 'lock'", errno ? errno : EIO);
        return;
    }
    clean_temps(c);
    uint64_t total = scan(c, 0);
    struct statvfs vfs;
    if (!limit && fstatvfs(c->obj_fd, &vfs) == 0) {
        uint64_t free_b = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        limit = total + free_b - free_b / 8;
    }
    c->limit = limit;
    if (total > limit)
        total = scan(c, 1);
    write_usage(c, total);
    unlock_usage(c);
}

dlk_status Dlk_store_open_cache(Dlk_store *inner, const char *dir,
                                uint64_t limit, bool verify, Dlk_store **out,
                                dlk_error *err)
{
    *out = NULL;
    cache *c = calloc(1, sizeof *c);
    if (!c)
        return Dlk_oom(err);
    c->base.ops = &cache_ops;
    c->base.uncounted = true;
    c->inner = inner;
    c->verify = verify;
    c->obj_fd = c->tmp_fd = c->lock_fd = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->usage_mu, NULL);
    c->dir = strdup(dir);
    c->base.url = strdup(inner->url ? inner->url : "");
    if (!c->dir || !c->base.url) {
        cache_free(&c->base);
        return Dlk_oom(err);
    }
    setup(c, limit);
    *out = &c->base;
    return DLK_OK;
}

void Dlk_store_cache_stats(Dlk_store *s, Dlk_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!s || s->ops != &cache_ops)
        return;
    cache *c = (cache *)s;
    out->hits = __atomic_load_n(&c->hits, __ATOMIC_RELAXED);
    out->fetched = __atomic_load_n(&c->fetched, __ATOMIC_RELAXED);
    out->evicted = __atomic_load_n(&c->evicted, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&c->dropped, __ATOMIC_RELAXED);
    out->limit = c->limit;
    pthread_mutex_lock(&c->mu);
    memcpy(out->warning, c->warning, sizeof out->warning);
    pthread_mutex_unlock(&c->mu);
}
