/* file.c - the store on a local file system.
 *
 * Objects are files below the root directory.  A put writes a temporary
 * file in the target's directory, fsyncs it, and renames (or links, for a
 * create-only put) it into place, then fsyncs the directory, so a reader
 * or a crash sees the old object or the new one, never a part of one.
 * Conditional replacement holds flock() on the root directory while it
 * compares and renames; the kernel drops the lock if the process dies, so
 * no stale lock can outlive a crash.
 *
 * Below the root nothing is followed or waited on: every path is opened
 * one directory at a time with O_NOFOLLOW (a symbolic link inside a
 * dataset could send its chunks elsewhere, and one inside a source could
 * read what the tree does not hold), and files with O_NONBLOCK and a
 * check of their type (a FIFO would block the command forever).  Such
 * an entry is refused with an error naming it, and a listing reports it
 * as passed over (Dlk_store's `passed`), never drops it silently. */
#include "util/error.h"
#include "util/buf.h"
#include "util/hash.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#define TMP_PREFIX ".dlk-tmp-"

typedef struct file_store {
    Dlk_store base;
    char *root;
    int rootfd;
} file_store;

static dlk_status errno_status(int e)
{
    switch (e) {
    case ENOENT: case ENOTDIR: return DLK_ENOTFOUND;
    case EEXIST: return DLK_EEXIST;
    case EACCES: case EPERM: case EROFS: return DLK_EAUTH;
    case ENOMEM: return DLK_ENOMEM;
    default: return DLK_EIO;
    }
}

static dlk_status io_fail(dlk_error *err, file_store *fs, const char *what,
                          const char *key, int e)
{
    return Dlk_fail(err, errno_status(e), "cannot %s '%s/%s': %s", what,
                    fs->root, key, strerror(e));
}

/* What a directory entry is, where it is not a regular file or a
 * directory: how a listing and an error name it. */
static const char *odd_type(mode_t m)
{
    return S_ISLNK(m)    ? "a symbolic link"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device"
                         : "not a regular file";
}

/* The failure to open `part` (the first `plen` bytes of key) in dirfd:
 * named for what it is when it is a link or a special file. */
static dlk_status open_fail(dlk_error *err, file_store *fs, int dirfd,
                            const char *name, const char *key, size_t plen,
                            int e)
{
    struct stat st;
    if ((e == ELOOP || e == ENOTDIR || e == ENXIO) &&
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        return Dlk_fail(err, DLK_EIO, "cannot open '%s/%s': '%s/%.*s' is %s "
                        "(dlk follows no link and reads no special file "
                        "below '%s')", fs->root, key, fs->root, (int)plen,
                        key, odd_type(st.st_mode), fs->root);
    return io_fail(err, fs, "open", key, e);
}

/* The directory that holds key, opened one component at a time from the
 * root, none of them followed if it is a link (made where missing when
 * `create`), into *dfd (the caller closes it); *base is key's last
 * component. */
static dlk_status parent_dir(file_store *fs, const char *key, bool create,
                             int *dfd, const char **base, dlk_error *err)
{
    int fd = dup(fs->rootfd);
    if (fd < 0)
        return io_fail(err, fs, "open directory of", key, errno);
    const char *p = key;
    for (const char *slash; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
        char name[1100];
        size_t n = (size_t)(slash - p);
        dlk_status rc = DLK_OK;
        if (n >= sizeof name) {
            rc = Dlk_fail(err, DLK_EINVAL, "key too long '%.100s'", key);
        } else {
            memcpy(name, p, n);
            name[n] = '\0';
            if (create && mkdirat(fd, name, 0777) != 0 && errno != EEXIST)
                rc = io_fail(err, fs, "create directory of", key, errno);
        }
        int next = rc ? -1
                      : openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                             O_CLOEXEC);
        if (!rc && next < 0)
            rc = open_fail(err, fs, fd, name, key, (size_t)(slash - key),
                           errno);
        close(fd);
        if (rc)
            return rc;
        fd = next;
    }
    *dfd = fd;
    *base = p;
    return DLK_OK;
}

/* key's file opened in one call where the kernel has openat2 (Linux
 * 5.6): no component a link (RESOLVE_NO_SYMLINKS) and nothing outside the
 * root (RESOLVE_BENEATH), what parent_dir's walk checks, without its
 * open and close of every directory on the way (four system calls more
 * for each chunk read, a fifth of a first epoch's rate from the page
 * cache on a 16-core host); -1 when it cannot, errno as it failed. */
static int open_beneath(file_store *fs, const char *key)
{
#ifdef SYS_openat2
    static _Atomic int missing;
    if (!missing) {
        struct open_how how = {
            .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                       RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, fs->rootfd, key, &how, sizeof how);
        if (fd >= 0)
            return (int)fd;
        if (errno == ENOSYS || errno == EPERM || errno == E2BIG)
            missing = 1;   /* an older kernel, or a filter that refuses it */
        return -1;
    }
#else
    (void)fs;
    (void)key;
#endif
    errno = ENOSYS;
    return -1;
}

/* key's file, opened read-only into *out: no component of it a link,
 * the file not waited on (O_NONBLOCK: a FIFO opens at once and is
 * refused by its type) and a regular file, its stat in *st. */
static dlk_status open_file(file_store *fs, const char *key, struct stat *st,
                            int *out, dlk_error *err)
{
    dlk_status rc = DLK_OK;
    int fd = open_beneath(fs, key);
    if (fd < 0) {
        /* the walk a directory at a time: where openat2 is missing, and
         * on every failure, to name the component at fault */
        const char *base;
        int dfd;
        rc = parent_dir(fs, key, false, &dfd, &base, err);
        if (rc)
            return rc;
        fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            rc = open_fail(err, fs, dfd, base, key, strlen(key), errno);
        close(dfd);
        if (rc)
            return rc;
    }
    if (fstat(fd, st) != 0)
        rc = io_fail(err, fs, "stat", key, errno);
    else if (S_ISDIR(st->st_mode))
        rc = Dlk_fail(err, DLK_ENOTFOUND, "'%s/%s' is not a file", fs->root,
                      key);
    else if (!S_ISREG(st->st_mode))
        rc = Dlk_fail(err, DLK_EIO, "cannot open '%s/%s': it is %s (dlk "
                      "reads no special file below '%s')", fs->root, key,
                      odd_type(st->st_mode), fs->root);
    if (rc) {
        close(fd);
        return rc;
    }
    *out = fd;
    return DLK_OK;
}

/* The etag of a file: its inode, size and change time. A replacement is
 * always a new inode (rename of a fresh file), so the etag changes. */
static void file_etag(const struct stat *st, char *out)
{
    snprintf(out, DLK_ETAG_MAX, "%llx-%llx-%llx.%lx",
             (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
             (unsigned long long)st->st_mtim.tv_sec,
             (long)st->st_mtim.tv_nsec);
}

static dlk_status fs_get(Dlk_store *s, const char *key, uint64_t off,
                         uint64_t len, uint64_t max, Dlk_buf *out,
                         Dlk_obj_info *info, dlk_error *err)
{
    file_store *fs = (file_store *)s;
    struct stat st;
    int fd;
    dlk_status orc = open_file(fs, key, &st, &fd, err);
    if (orc)
        return orc;
    uint64_t size = (uint64_t)st.st_size;
    if (off > size || (len != UINT64_MAX && len > size - off)) {
        close(fd);
        return Dlk_fail(err, DLK_ECORRUPT, "short object '%s/%s': range "
                        "%llu+%llu past its %llu bytes", fs->root, key,
                        (unsigned long long)off, (unsigned long long)len,
                        (unsigned long long)size);
    }
    uint64_t n = len == UINT64_MAX ? size - off : len;
    if (n > max) {
        close(fd);
        return Dlk_fail(err, DLK_ELIMIT, "object '%s/%s' is %llu bytes, "
                        "over the limit of %llu", fs->root, key,
                        (unsigned long long)n, (unsigned long long)max);
    }
    dlk_status rc = Dlk_buf_reserve(out, (size_t)n, err);
    if (rc) {
        close(fd);
        return rc;
    }
    uint64_t done = 0;
    while (done < n) {
        size_t want = (size_t)(n - done);
        if (want > (1u << 30))
            want = 1u << 30;
        ssize_t r = pread(fd, out->data + out->len + done, want,
                          (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return io_fail(err, fs, "read", key, e);
        }
        if (r == 0) {
            close(fd);
            return Dlk_fail(err, DLK_ECORRUPT, "short read of '%s/%s'",
                            fs->root, key);
        }
        done += (uint64_t)r;
    }
    out->len += (size_t)n;
    if (info) {
        info->size = size;
        file_etag(&st, info->etag);
        info->mtime = (int64_t)st.st_mtim.tv_sec;
    }
    close(fd);
    return DLK_OK;
}

static dlk_status fs_head(Dlk_store *s, const char *key, Dlk_obj_info *info,
                          dlk_error *err)
{
    file_store *fs = (file_store *)s;
    struct stat st;
    const char *base;
    int dfd;
    dlk_status prc = parent_dir(fs, key, false, &dfd, &base, err);
    if (prc)
        return prc;
    if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        int e = errno;
        close(dfd);
        return io_fail(err, fs, "stat", key, e);
    }
    close(dfd);
    if (S_ISDIR(st.st_mode))
        return Dlk_fail(err, DLK_ENOTFOUND, "'%s/%s' is not a file",
                        fs->root, key);
    if (!S_ISREG(st.st_mode))
        return Dlk_fail(err, DLK_EIO, "cannot stat '%s/%s': it is %s (dlk "
                        "follows no link and reads no special file below "
                        "'%s')", fs->root, key, odd_type(st.st_mode),
                        fs->root);
    info->size = (uint64_t)st.st_size;
    file_etag(&st, info->etag);
    info->mtime = (int64_t)st.st_mtim.tv_sec;
    return DLK_OK;
}

/* Write the n parts in order (each in writes of at most 1 GiB). */
/* Write every part, as few writev calls as the parts allow (a chunk of
 * whole samples has a part per sample). */
static dlk_status write_all(int fd, const struct iovec *v, int n)
{
    struct iovec cur[64];
    int i = 0;
    size_t done = 0; /* bytes of v[i] already written */
    while (i < n) {
        int k = 0;
        size_t total = 0;
        for (int j = i; j < n && k < 64 && total < (1u << 30); j++) {
            size_t skip = j == i ? done : 0;
            if (v[j].iov_len == skip)
                continue;
            cur[k].iov_base = (uint8_t *)v[j].iov_base + skip;
            cur[k].iov_len = v[j].iov_len - skip;
            total += cur[k++].iov_len;
        }
        if (!k)
            break;
        ssize_t w = writev(fd, cur, k);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return DLK_EIO;
        /* advance past what was written */
        size_t left = (size_t)w;
        while (i < n && left >= v[i].iov_len - done) {
            left -= v[i].iov_len - done;
            done = 0;
            i++;
        }
        done += left;
    }
    return DLK_OK;
}

/* Bytes hashed and then written in one go by write_hashed: they are
 * still in the cache when the kernel copies them. */
#define HASH_RUN ((size_t)1 << 20)

/* write_all, each run of up to HASH_RUN bytes fed to h just before it is
 * written: one pass over memory for both, where hashing a whole chunk
 * first read it twice. */
static dlk_status write_hashed(int fd, const struct iovec *v, int n,
                               Dlk_hash64_stream *h)
{
    int i = 0;
    size_t off = 0; /* bytes of v[i] already taken */
    while (i < n) {
        struct iovec cur[64];
        int k = 0;
        size_t total = 0;
        while (i < n && k < 64 && total < HASH_RUN) {
            size_t take = v[i].iov_len - off;
            if (take > HASH_RUN - total)
                take = HASH_RUN - total;
            if (take) {
                cur[k].iov_base = (uint8_t *)v[i].iov_base + off;
                cur[k].iov_len = take;
                Dlk_hash64_stream_update(h, cur[k].iov_base, take);
                total += take;
                k++;
            }
            off += take;
            if (off == v[i].iov_len) {
                i++;
                off = 0;
            }
        }
        if (k && write_all(fd, cur, k) != DLK_OK)
            return DLK_EIO;
    }
    return DLK_OK;
}

/* A temporary file in key's directory (made if missing) holding the
 * parts, synced (and hashed into h where set): its name in tmp, its
 * directory open in *dirfd (the caller's to close), its stat in *st. */
static dlk_status fs_write_temp(file_store *fs, const char *key,
                                const struct iovec *v, int n,
                                Dlk_hash64_stream *h, int *dirfd,
                                char tmp[1200], struct stat *st,
                                dlk_error *err)
{
    const char *base;
    int dfd;
    dlk_status prc = parent_dir(fs, key, true, &dfd, &base, err);
    if (prc)
        return prc;

    static unsigned counter;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(tmp, 1200, TMP_PREFIX "%ld-%u-%lx-%.64s", (long)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED),
             (unsigned long)now.tv_nsec, base);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        close(dfd);
        return io_fail(err, fs, "create a temporary file for", key, e);
    }
    int e = 0;
    dlk_status wr = h ? write_hashed(fd, v, n, h) : write_all(fd, v, n);
    if (wr != DLK_OK || fsync(fd) != 0)
        e = errno ? errno : EIO;
    if (!e && fstat(fd, st) != 0)
        e = errno;
    if (close(fd) != 0 && !e)
        e = errno;
    if (e) {
        unlinkat(dfd, tmp, 0);
        close(dfd);
        return io_fail(err, fs, "write", key, e);
    }
    *dirfd = dfd;
    return DLK_OK;
}

/* The temporary file tmp (in dirfd, which this closes) becomes key, as
 * mode says. */
static dlk_status fs_place(file_store *fs, int dirfd, const char *tmp,
                           const char *key, Dlk_put_mode mode,
                           const char *etag, const struct stat *st,
                           Dlk_obj_info *out, dlk_error *err)
{
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    dlk_status rc = DLK_OK;
    int e;
    if (mode == DLK_PUT_IF_ABSENT) {
        if (linkat(dirfd, tmp, dirfd, base, 0) != 0) {
            e = errno;
            rc = e == EEXIST
                     ? Dlk_fail(err, DLK_EEXIST, "object '%s/%s' already "
                                "exists", fs->root, key)
                     : io_fail(err, fs, "link", key, e);
        }
        unlinkat(dirfd, tmp, 0);
    } else {
        bool locked = false;
        if (mode == DLK_PUT_IF_MATCH) {
            while (flock(fs->rootfd, LOCK_EX) != 0 && errno == EINTR)
                ;
            locked = true;
            struct stat cur;
            char cur_etag[DLK_ETAG_MAX];
            if (fstatat(dirfd, base, &cur, AT_SYMLINK_NOFOLLOW) != 0) {
                rc = Dlk_fail(err, DLK_ECONFLICT, "object '%s/%s' vanished "
                              "under a conditional update", fs->root, key);
            } else {
                file_etag(&cur, cur_etag);
                if (strcmp(cur_etag, etag) != 0)
                    rc = Dlk_fail(err, DLK_ECONFLICT, "object '%s/%s' was "
                                  "changed by another writer", fs->root, key);
            }
        }
        if (!rc && renameat(dirfd, tmp, dirfd, base) != 0)
            rc = io_fail(err, fs, "rename into", key, errno);
        if (rc)
            unlinkat(dirfd, tmp, 0);
        if (!rc && fsync(dirfd) != 0)
            rc = io_fail(err, fs, "sync directory of", key, errno);
        if (locked)
            flock(fs->rootfd, LOCK_UN);
    }
    if (!rc && mode == DLK_PUT_IF_ABSENT && fsync(dirfd) != 0)
        rc = io_fail(err, fs, "sync directory of", key, errno);
    if (!rc && out) {
        struct stat fin;
        if (fstatat(dirfd, base, &fin, AT_SYMLINK_NOFOLLOW) == 0) {
            out->size = (uint64_t)fin.st_size;
            file_etag(&fin, out->etag);
        } else {
            out->size = (uint64_t)st->st_size;
            file_etag(st, out->etag);
        }
    }
    close(dirfd);
    return rc;
}

static dlk_status fs_putv(Dlk_store *s, const char *key,
                          const struct iovec *v, int n, Dlk_put_mode mode,
                          const char *etag, Dlk_obj_info *out,
                          dlk_error *err)
{
    file_store *fs = (file_store *)s;
    int dirfd;
    char tmp[1200];
    struct stat st;
    dlk_status rc = fs_write_temp(fs, key, v, n, NULL, &dirfd, tmp, &st, err);
    return rc ? rc : fs_place(fs, dirfd, tmp, key, mode, etag, &st, out, err);
}

static dlk_status fs_putv_hashed(Dlk_store *s, const char *prefix,
                                 const struct iovec *v, int n,
                                 Dlk_put_mode mode, char hex[33],
                                 dlk_error *err)
{
    file_store *fs = (file_store *)s;
    Dlk_hash64_stream *h = Dlk_hash64_stream_new();
    if (!h)
        return Dlk_oom(err);
    int dirfd;
    char tmp[1200], key[1100];
    struct stat st;
    dlk_status rc = fs_write_temp(fs, prefix, v, n, h, &dirfd, tmp, &st, err);
    if (!rc) {
        Dlk_hash64_stream_hex128(h, hex);
        snprintf(key, sizeof key, "%s%s", prefix, hex);
        rc = fs_place(fs, dirfd, tmp, key, mode, NULL, &st, NULL, err);
    }
    Dlk_hash64_stream_free(h);
    return rc;
}

static dlk_status fs_put(Dlk_store *s, const char *key, const void *data,
                         size_t len, Dlk_put_mode mode, const char *etag,
                         Dlk_obj_info *out, dlk_error *err)
{
    struct iovec v = {(void *)data, len};
    return fs_putv(s, key, &v, 1, mode, etag, out, err);
}

static dlk_status fs_del(Dlk_store *s, const char *key, dlk_error *err)
{
    file_store *fs = (file_store *)s;
    const char *base;
    int dfd;
    dlk_status prc = parent_dir(fs, key, false, &dfd, &base, err);
    if (prc)
        return prc;
    /* unlinkat removes a link itself, never what it names */
    int e = unlinkat(dfd, base, 0) != 0 ? errno : 0;
    close(dfd);
    return e ? io_fail(err, fs, "delete", key, e) : DLK_OK;
}

typedef struct key_list {
    char **keys;
    uint64_t *sizes;
    char **versions;   /* with `want_versions`: size and mtime */
    bool want_versions;
    size_t n, cap;
    /* a sweep: collect the temporary files of interrupted writes last
     * modified before `before`, instead of the objects */
    bool temps;
    int64_t before;
    /* sizes not wanted: a file's type from its directory entry, where the
     * file system gives it, saves a stat per file (NFS: a round trip) */
    bool no_sizes;
    uint64_t *listed;    /* the store's count of keys found (progress) */
    Dlk_store *store;    /* its `passed`, told of what is not listed */
} key_list;

/* An entry the listing passes over, to the store's `passed` (a sweep
 * reports nothing: it looks for its own temporary files only). */
static void pass_over(key_list *l, const char *key, const char *why)
{
    if (!l->temps && l->store && l->store->passed)
        l->store->passed(l->store->passed_ud, key, why);
}

static int add_key(key_list *l, const char *key, uint64_t size,
                   const struct stat *st)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **k = realloc(l->keys, cap * sizeof *k);
        if (!k)
            return -1;
        l->keys = k;
        uint64_t *sz = realloc(l->sizes, cap * sizeof *sz);
        if (!sz)
            return -1;
        l->sizes = sz;
        char **v = l->want_versions
                       ? realloc(l->versions, cap * sizeof *v) : NULL;
        if (l->want_versions && !v)
            return -1;
        l->versions = v;
        l->cap = cap;
    }
    if (!(l->keys[l->n] = strdup(key)))
        return -1;
    if (l->want_versions) {
        /* what a directory tells of a file's version: size and mtime */
        char v[64];
        snprintf(v, sizeof v, "%llu-%lld.%09ld",
                 (unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec,
                 (long)st->st_mtim.tv_nsec);
        if (!(l->versions[l->n] = strdup(v))) {
            free(l->keys[l->n]);
            return -1;
        }
    }
    l->sizes[l->n++] = size;
    if (l->listed)
        __atomic_add_fetch(l->listed, 1, __ATOMIC_RELAXED);
    return 0;
}

/* Directories below the root a listing enters: each level holds a key
 * buffer on the stack. */
#define WALK_DEPTH 16

/* Walk directory `rel` (relative to the root), adding keys that start
 * with prefix.  Depth is bounded; symlinks are not followed, and neither
 * they, nor special files, nor directories past the depth, nor paths too
 * long for a key are listed: each is passed over (pass_over). */
static dlk_status walk(file_store *fs, const char *rel, const char *prefix,
                       key_list *l, int depth, dlk_error *err)
{
    if (depth > WALK_DEPTH) {
        pass_over(l, rel, "not read: a directory nested more than 16 "
                          "levels deep");
        return DLK_OK;
    }
    /* a new open of the directory, never dup(): a dup shares the read
     * position, so a second listing would start where the first ended */
    int fd = openat(fs->rootfd, *rel ? rel : ".",
                    O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR
                   ? DLK_OK : io_fail(err, fs, "list", rel, errno);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return io_fail(err, fs, "list", rel, errno);
    }
    dlk_status rc = DLK_OK;
    struct dirent *de;
    char key[1100];
    size_t plen = strlen(prefix);
    while (!rc && (de = readdir(d)) != NULL) {
        bool temp = strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0;
        if (de->d_name[0] == '.' &&
            (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]) ||
             (temp && !l->temps)))
            continue;
        int n = snprintf(key, sizeof key, "%s%s%s", rel, *rel ? "/" : "",
                         de->d_name);
        if (n < 0)
            continue;
        /* prune: the key or the prefix must extend the other */
        size_t klen = (size_t)n < sizeof key ? (size_t)n : sizeof key - 1;
        if (strncmp(key, prefix, klen < plen ? klen : plen) != 0)
            continue;
        if ((size_t)n >= sizeof key) {
            if (klen >= plen)
                pass_over(l, key, "not read: its path is longer than 1024 "
                                  "bytes");
            continue;
        }
        struct stat st;
        memset(&st, 0, sizeof st);
        uint64_t size = UINT64_MAX;
        if (l->no_sizes && (de->d_type == DT_DIR || de->d_type == DT_REG ||
                            de->d_type == DT_LNK)) {
            st.st_mode = de->d_type == DT_DIR   ? S_IFDIR
                         : de->d_type == DT_REG ? S_IFREG
                                                : S_IFLNK;
        } else if (fstatat(dirfd(d), de->d_name, &st,
                           AT_SYMLINK_NOFOLLOW) != 0) {
            if (klen >= plen && errno != ENOENT) /* ENOENT: just removed */
                pass_over(l, key, "not read: it cannot be examined");
            continue;
        } else {
            size = (uint64_t)st.st_size;
        }
        if (S_ISLNK(st.st_mode) && klen >= plen && !temp)
            pass_over(l, key, "not read: a symbolic link (dlk follows "
                              "none)");
        else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) &&
                 klen >= plen && !temp)
            pass_over(l, key, S_ISFIFO(st.st_mode)
                                  ? "not read: a FIFO, not a regular file"
                              : S_ISSOCK(st.st_mode)
                                  ? "not read: a socket, not a regular file"
                                  : "not read: a device, not a regular file");
        if (S_ISDIR(st.st_mode))
            rc = walk(fs, key, prefix, l, depth + 1, err);
        else if (S_ISREG(st.st_mode) && klen >= plen && temp == l->temps &&
                 (!temp || (int64_t)st.st_mtim.tv_sec < l->before) &&
                 add_key(l, key, size, &st) != 0)
            rc = Dlk_fail(err, DLK_ENOMEM, "out of memory listing '%s'",
                          fs->root);
    }
    closedir(d);
    return rc;
}

static int cmp_idx(const void *a, const void *b, void *keys)
{
    char **k = keys;
    return strcmp(k[*(const size_t *)a], k[*(const size_t *)b]);
}

static dlk_status list_keys(Dlk_store *s, const char *prefix, bool sizes,
                            Dlk_list_fn fn, Dlk_list_version_fn vfn,
                            void *ud, dlk_error *err)
{
    file_store *fs = (file_store *)s;
    key_list l = {0};
    l.no_sizes = !sizes && !vfn;
    l.want_versions = vfn != NULL;
    l.listed = &s->listed;
    l.store = s;
    dlk_status rc = walk(fs, "", prefix, &l, 0, err);
    size_t *order = NULL;
    if (!rc && l.n) {
        order = malloc(l.n * sizeof *order);
        if (!order)
            rc = Dlk_fail(err, DLK_ENOMEM, "out of memory listing '%s'",
                          fs->root);
        else {
            for (size_t i = 0; i < l.n; i++)
                order[i] = i;
            qsort_r(order, l.n, sizeof *order, cmp_idx, l.keys);
        }
    }
    for (size_t i = 0; !rc && i < l.n; i++) {
        size_t j = order[i];
        if (vfn ? vfn(ud, l.keys[j], l.sizes[j], l.versions[j])
                : fn(ud, l.keys[j], l.sizes[j]))
            break;
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.keys[i]);
        if (l.want_versions)
            free(l.versions[i]);
    }
    free(l.keys);
    free(l.sizes);
    free(l.versions);
    free(order);
    return rc;
}

/* Remove (or, dry, count) the temporary files that writes interrupted
 * before their rename left, last modified before `before`. */
static dlk_status fs_sweep(Dlk_store *s, int64_t before, bool dry,
                           uint64_t *files, uint64_t *bytes, dlk_error *err)
{
    file_store *fs = (file_store *)s;
    key_list l = {.temps = true, .before = before};
    dlk_status rc = walk(fs, "", "", &l, 0, err);
    for (size_t i = 0; !rc && i < l.n; i++) {
        if (!dry && (rc = fs_del(s, l.keys[i], err)) != DLK_OK) {
            if (rc == DLK_ENOTFOUND) {
                rc = DLK_OK; /* its writer finished or another sweep won */
                continue;
            }
            break;
        }
        (*files)++;
        *bytes += l.sizes[i];
    }
    for (size_t i = 0; i < l.n; i++)
        free(l.keys[i]);
    free(l.keys);
    free(l.sizes);
    return rc;
}

static void fs_free(Dlk_store *s)
{
    file_store *fs = (file_store *)s;
    if (fs->rootfd >= 0)
        close(fs->rootfd);
    free(fs->root);
    free(fs->base.url);
    free(fs);
}

static dlk_status fs_map(Dlk_store *s, const char *key, const void **ptr,
                         size_t *len, dlk_error *err)
{
    file_store *fs = (file_store *)s;
    struct stat st;
    int fd;
    dlk_status orc = open_file(fs, key, &st, &fd, err);
    if (orc)
        return orc;
    if (st.st_size == 0) {
        close(fd);
        return Dlk_fail(err, DLK_ECORRUPT, "'%s/%s' is empty or not a file",
                        fs->root, key);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return io_fail(err, fs, "map", key, e);
    *ptr = p;
    *len = (size_t)st.st_size;
    return DLK_OK;
}

static void fs_unmap(Dlk_store *s, const void *ptr, size_t len)
{
    (void)s;
    munmap((void *)ptr, len);
}

static dlk_status fs_list(Dlk_store *s, const char *prefix, Dlk_list_fn fn,
                          void *ud, dlk_error *err)
{
    return list_keys(s, prefix, true, fn, NULL, ud, err);
}

/* The whole listing without sizes (UINT64_MAX): no stat per file. */
static dlk_status fs_list_wide(Dlk_store *s, const char *prefix,
                               Dlk_list_fn fn, void *ud, dlk_error *err)
{
    return list_keys(s, prefix, false, fn, NULL, ud, err);
}

/* With versions: a stat per file (its size and mtime). */
static dlk_status fs_list_versions(Dlk_store *s, const char *prefix,
                                   Dlk_list_version_fn fn, void *ud,
                                   dlk_error *err)
{
    return list_keys(s, prefix, true, NULL, fn, ud, err);
}

static const Dlk_store_ops file_ops = {
    .scheme = "file", .get = fs_get, .head = fs_head, .put = fs_put,
    .del = fs_del, .list = fs_list, .free = fs_free, .map = fs_map,
    .unmap = fs_unmap, .sweep = fs_sweep, .putv = fs_putv,
    .putv_hashed = fs_putv_hashed,
    .list_wide = fs_list_wide,
    .list_versions = fs_list_versions,
};

dlk_status Dlk_store_open_file(const char *path, bool create,
                               Dlk_store **out, dlk_error *err)
{
    *out = NULL;
    if (!path || !*path)
        return Dlk_fail(err, DLK_EINVAL, "empty dataset path");
    file_store *fs = calloc(1, sizeof *fs);
    if (!fs)
        return Dlk_oom(err);
    fs->base.ops = &file_ops;
    fs->rootfd = -1;
    fs->root = strdup(path);
    fs->base.url = strdup(path);
    if (!fs->root || !fs->base.url) {
        fs_free(&fs->base);
        return Dlk_oom(err);
    }
    size_t n = strlen(fs->root);
    while (n > 1 && fs->root[n - 1] == '/')
        fs->root[--n] = '\0';
    /* Only a creator makes the root; a reader of a missing dataset must
     * not leave an empty directory behind. */
    for (char *p = fs->root + 1; create && (p = strchr(p, '/')); p++) {
        *p = '\0'; /* mkdir -p: parents first */
        mkdir(fs->root, 0777);
        *p = '/';
    }
    if (create && mkdir(fs->root, 0777) != 0 && errno != EEXIST) {
        int e = errno;
        dlk_status rc = Dlk_fail(err, errno_status(e),
                                 "cannot create directory '%s': %s",
                                 fs->root, strerror(e));
        fs_free(&fs->base);
        return rc;
    }
    fs->rootfd = open(fs->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->rootfd < 0) {
        int e = errno;
        dlk_status rc = Dlk_fail(err, errno_status(e),
                                 "cannot open directory '%s': %s", fs->root,
                                 strerror(e));
        fs_free(&fs->base);
        return rc;
    }
    *out = &fs->base;
    return DLK_OK;
}
