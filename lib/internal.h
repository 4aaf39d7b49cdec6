/*
 * internal.h - declarations shared inside libdlk; not installed.
 */
#ifndef DLK_INTERNAL_H
#define DLK_INTERNAL_H

#include "dlk.h"
#include "dlk_bench.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define DLK_UNUSED(x) ((void)(x))

#if defined(__GNUC__)
#define DLK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DLK_PRINTF(a, b)
#endif

/* ---- errors (util/error.c) ---------------------------------------- */

/* Set err (if not NULL) and return code.  The message follows the style
 * "cannot read chunk 'KEY': why" (lower-case, no full stop). */
dlk_status dlk_fail(dlk_error *err, dlk_status code, const char *fmt, ...)
    DLK_PRINTF(3, 4);
/* Prefix an existing message: "CONTEXT: old message". */
dlk_status dlk_fail_wrap(dlk_error *err, const char *fmt, ...)
    DLK_PRINTF(2, 3);
void dlk_error_clear(dlk_error *err);
/* A caller's versioned struct (dlk.h, "Versioned structs") into the
 * library's own `own` (own_size bytes: the fields the caller lacks 0);
 * DLK_EINVAL naming `what` for a size of 0, or for NULL.  abi_opts_in:
 * the same, but NULL gives the defaults.  abi_result_in: `own` zeroed
 * (its size its own) for a result the caller gives, whose size is
 * checked as above (NULL, a result not wanted, allowed).  abi_copy_out:
 * `own` into the caller's, up to the size it set (NULL: nothing). */
dlk_status abi_copy_in(void *own, size_t own_size, const void *caller,
                       const char *what, dlk_error *err);
dlk_status abi_opts_in(void *own, size_t own_size, const void *caller,
                       const char *what, dlk_error *err);
dlk_status abi_result_in(void *own, size_t own_size, const void *caller,
                         const char *what, dlk_error *err);
void abi_copy_out(void *caller, const void *own, size_t own_size);
/* The public NAME(ds, opts, out, err) of a function that opens a handle
 * HT with options OT: the caller's options copied into the library's own
 * layout, then RUN(ds, &own, out, err), which sees only that. */
#define ABI_OPEN_WRAPPER(NAME, RUN, OT, HT)                                  \
    dlk_status NAME(dlk_dataset *ds, const OT *opts, HT **out,              \
                    dlk_error *err)                                         \
    {                                                                       \
        *out = NULL;                                                        \
        OT own;                                                             \
        dlk_status rc = abi_copy_in(&own, sizeof own, opts, #OT, err);      \
        return rc ? rc : RUN(ds, &own, out, err);                           \
    }
/* The public NAME(a0, opts, res, err) of a function with options OT
 * (NULL: the defaults) and a result RT (NULL: not wanted): RUN(a0, &own
 * options, &own result, err) sees only the library's layouts, and the
 * result, zeroed first, goes back up to the caller's size whatever RUN
 * returns. */
#define ABI_RUN_WRAPPER(NAME, RUN, T0, OT, RT)                               \
    dlk_status NAME(T0 a0, const OT *opts, RT *res, dlk_error *err)         \
    {                                                                       \
        OT o;                                                               \
        RT r;                                                               \
        dlk_status rc = abi_result_in(&r, sizeof r, res, #RT, err);         \
        if (!rc)                                                            \
            rc = abi_opts_in(&o, sizeof o, opts, #OT, err);                 \
        if (!rc)                                                            \
            rc = RUN(a0, &o, &r, err);                                      \
        abi_copy_out(res, &r, sizeof r);                                    \
        return rc;                                                          \
    }
/* dlk_oom(err): the one message for an
 * allocation that failed where nothing more useful can be said. */
dlk_status dlk_oom(dlk_error *err);

/* ---- internal invariants ------------------------------------------ */

/* DLK_ASSERT(cond): a condition the code relies on and that no input can
 * break.  Checked in test and sanitizer builds (DLK_CHECKS: make SAN=...
 * or CHECKS=1), where a broken one aborts naming the place; compiled out
 * of release builds (the condition is still type-checked, not run). */
#ifdef DLK_CHECKS
void dlk_assert_fail(const char *cond, const char *file, int line)
    __attribute__((noreturn));
#define DLK_ASSERT(cond) \
    ((cond) ? (void)0 : dlk_assert_fail(#cond, __FILE__, __LINE__))
#else
#define DLK_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

/* ---- growable arrays ---------------------------------------------- */

/* Room for element n of an array of *cap elements of elem bytes: p itself
 * when n < *cap, else p reallocated to twice the capacity (first when
 * empty) with *cap updated; NULL when out of memory or the size
 * overflows, p and *cap then unchanged (the caller still owns p). */
void *dlk_grow(void *p, size_t *cap, size_t n, size_t elem, size_t first);
/* DLK_GROW(arr, n, cap, first): the same on an array variable, which is
 * replaced by the grown array; false when out of memory. */
#define DLK_GROW(arr, n, cap, first)                                      \
    __extension__({                                                       \
        void *dlk_grown_ = dlk_grow((arr), &(cap), (n), sizeof *(arr),    \
                                    (first));                             \
        if (dlk_grown_)                                                   \
            (arr) = dlk_grown_;                                           \
        dlk_grown_ != NULL;                                               \
    })

/* ---- sizes (util/size.c) ------------------------------------------ */

/* "16M", "16MiB", "64KB", "1G", "4096" -> bytes: K, M, G and T are powers
 * of 1024, optionally followed by "i" and "B".  false when malformed,
 * negative, zero or over 1 TiB. */
bool dlk_parse_size(const char *s, uint64_t *out);
/* The same syntax without its range: 0 and *out set (any size of 64
 * bits, 0 included); 1 for a size past 2^64 - 1; -1 when malformed
 * (a sign, a space, an unknown suffix). */
int dlk_scan_size(const char *s, uint64_t *out);

/* ---- growable byte buffer (util/buf.c) ---------------------------- */

typedef struct dlk_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    bool fixed; /* wraps caller memory of `cap` bytes: never reallocated */
} dlk_buf;

void dlk_buf_init(dlk_buf *b);
/* Wrap caller-owned memory; writes past cap fail with DLK_ELIMIT. */
void dlk_buf_wrap(dlk_buf *b, void *mem, size_t cap);
dlk_status dlk_buf_reserve(dlk_buf *b, size_t extra, dlk_error *err);
dlk_status dlk_buf_append(dlk_buf *b, const void *p, size_t n, dlk_error *err);
void dlk_buf_free(dlk_buf *b);

/* Overflow-checked arithmetic: return false on overflow. */
static inline bool dlk_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool dlk_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* Little-endian loads and stores (the format's byte order). */
static inline void dlk_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
}
static inline void dlk_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void dlk_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t dlk_get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t dlk_get_le32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t dlk_get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Seconds on the monotonic clock (util/clock.c). */
double dlk_now_s(void);
/* the calling thread's time on a CPU or runnable waiting for one,
 * seconds (its CPU time where the wait is not kept; 0 if neither is) */
double dlk_thread_cpu_s(void);
/* pthread_cond_timedwait for at most ms milliseconds from now (callers
 * that poll a stop or cancel callback a few times a second while they
 * wait); returns its result (ETIMEDOUT when the time ran out). */
int dlk_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms);

/* ---- hashing (util/hash.c): XXH3, seed 0 -------------------------- */

uint64_t dlk_hash64(const void *p, size_t n);
/* A deterministic 64-bit mix (splitmix64's finalizer). */
uint64_t dlk_mix64(uint64_t x);
/* XXH3-64 of a followed by b, as one stream. */
uint64_t dlk_hash64_2(const void *a, size_t na, const void *b, size_t nb);
/* XXH3-128 of p as 32 lower-case hex digits plus NUL. */
void dlk_hash128_hex(const void *p, size_t n, char out[33]);
/* The same of a followed by b. */
void dlk_hash128_hex_2(const void *a, size_t na, const void *b, size_t nb,
                       char out[33]);
/* The same of n parts, as one stream. */
void dlk_hash128_hex_v(const struct iovec *v, size_t n, char out[33]);
/* XXH3-64 fed in pieces: the same value as dlk_hash64 of them joined. */
typedef struct dlk_hash64_stream dlk_hash64_stream;
dlk_hash64_stream *dlk_hash64_stream_new(void); /* NULL: out of memory */
void dlk_hash64_stream_reset(dlk_hash64_stream *h);
void dlk_hash64_stream_update(dlk_hash64_stream *h, const void *p, size_t n);
uint64_t dlk_hash64_stream_digest(const dlk_hash64_stream *h);
/* The XXH3-128 of the same bytes, as dlk_hash128_hex gives it (XXH3's two
 * widths share their state and its updates; only the digest differs). */
void dlk_hash64_stream_hex128(const dlk_hash64_stream *h, char out[33]);
void dlk_hash64_stream_free(dlk_hash64_stream *h);
/* XXH3-64 of n >= 241 bytes computed block by block as a GPU does it
 * (util/xxh3_blocks.h): the same value as dlk_hash64; keys from
 * dlk_xxh3_keys_init.  The host's reference for the device's check. */
struct dlk_xxh3_keys;
void dlk_xxh3_keys_init(struct dlk_xxh3_keys *k);
uint64_t dlk_hash64_blocks(const void *p, size_t n,
                           const struct dlk_xxh3_keys *k);

/* ---- storage (store/) --------------------------------------------- */

/* A store is a flat namespace of objects below one root (a directory or an
 * s3://bucket/prefix).  Keys are relative, '/'-separated, and checked by
 * dlk_key_valid before any use.  Every operation is safe to call from
 * several threads at once on one store. */
typedef struct dlk_store dlk_store;

#define DLK_ETAG_MAX 128

typedef enum dlk_put_mode {
    DLK_PUT_ALWAYS = 0,     /* create or replace */
    DLK_PUT_IF_ABSENT = 1,  /* create only: DLK_EEXIST if it exists */
    DLK_PUT_IF_MATCH = 2    /* replace only if its etag is `etag`:
                               DLK_ECONFLICT otherwise (or if absent) */
} dlk_put_mode;

typedef struct dlk_obj_info {
    uint64_t size;
    char etag[DLK_ETAG_MAX];
    int64_t mtime;   /* last modified, Unix seconds; 0 when unknown */
} dlk_obj_info;

typedef struct dlk_get_req dlk_get_req;

/* Called by list for each object, in key order; non-zero stops. */
typedef int (*dlk_list_fn)(void *ud, const char *key, uint64_t size);
/* The same with what identifies the object's version: an S3 object's
 * ETag (without quotes), a file's "<size>-<mtime s>.<ns>" ("" unknown). */
typedef int (*dlk_list_version_fn)(void *ud, const char *key, uint64_t size,
                                   const char *version);

typedef struct dlk_store_ops {
    const char *scheme;
    /* Read bytes [off, off+len) of key into out (appended).  len
     * UINT64_MAX means to the end.  `max` bounds how many bytes may be
     * read at all (DLK_ELIMIT beyond it).  DLK_ENOTFOUND if absent; a
     * range past the end is DLK_ECORRUPT "short read". */
    dlk_status (*get)(dlk_store *s, const char *key, uint64_t off,
                      uint64_t len, uint64_t max, dlk_buf *out,
                      dlk_obj_info *info, dlk_error *err);
    dlk_status (*head)(dlk_store *s, const char *key, dlk_obj_info *info,
                       dlk_error *err);
    /* Optional: bytes [off, off+len) of an object known to be `size`
     * bytes (a chunk the manifest sizes; the whole of it: 0, size), read
     * as the store reads fastest: S3 asks for byte ranges of it in
     * parallel on its I/O threads.  *requests: how many were sent.  For
     * the whole object, one of another size fails as get with max = size
     * does, or succeeds with info->size telling the size found. */
    dlk_status (*get_sized)(dlk_store *s, const char *key, uint64_t size,
                            uint64_t off, uint64_t len, dlk_buf *out,
                            dlk_obj_info *info, unsigned *requests,
                            dlk_error *err);
    /* Optional: n spans of an object known to be `size` bytes, all in
     * flight at once: [off[i], off[i]+len[i]) appended to outs[i]. */
    dlk_status (*get_spans)(dlk_store *s, const char *key, uint64_t size,
                            size_t n, const uint64_t *off,
                            const uint64_t *len, dlk_buf **outs,
                            unsigned *requests, dlk_error *err);
    /* Atomic: readers see the old object or the new one, never a part.
     * etag_out (may be NULL) receives the new object's etag. */
    dlk_status (*put)(dlk_store *s, const char *key, const void *data,
                      size_t len, dlk_put_mode mode, const char *etag,
                      dlk_obj_info *out, dlk_error *err);
    dlk_status (*del)(dlk_store *s, const char *key, dlk_error *err);
    /* List objects whose key starts with prefix (relative to the root). */
    dlk_status (*list)(dlk_store *s, const char *prefix, dlk_list_fn fn,
                       void *ud, dlk_error *err);
    void (*free)(dlk_store *s);
    /* Optional (NULL where the store has no local file): map the whole
     * object read-only; unmap with `unmap`.  Lets a reader use the page
     * cache in place, with no copy. */
    dlk_status (*map)(dlk_store *s, const char *key, const void **ptr,
                      size_t *len, dlk_error *err);
    void (*unmap)(dlk_store *s, const void *ptr, size_t len);
    /* Optional: remove (dry: count) what writes interrupted before they
     * completed left behind, last modified before `before` (unix s). */
    dlk_status (*sweep)(dlk_store *s, int64_t before, bool dry,
                        uint64_t *files, uint64_t *bytes, dlk_error *err);
    /* Optional: put the concatenation of n parts, as put does (without
     * it, dlk_store_putv joins the parts in a buffer first). */
    dlk_status (*putv)(dlk_store *s, const char *key, const struct iovec *v,
                       int n, dlk_put_mode mode, const char *etag,
                       dlk_obj_info *out, dlk_error *err);
    /* Optional: putv (IF_ABSENT or ALWAYS) under the key prefix + hex,
     * hex the XXH3-128 of the parts' bytes (content addressing), hashed
     * as each part is written while it is in cache, where the store
     * names an object after writing it (a local file system).  Without
     * it, dlk_store_putv_hashed hashes all first, then puts. */
    dlk_status (*putv_hashed)(dlk_store *s, const char *prefix,
                              const struct iovec *v, int n,
                              dlk_put_mode mode, char hex[33],
                              dlk_error *err);
    /* Optional: the whole-object GETs of dlk_store_get_each all in flight
     * at once without a thread each (keys checked, results in reqs);
     * done called in the caller's thread for request i once it and every
     * one before it have finished (dlk_store_get_each counts the bytes
     * there). */
    void (*get_each)(dlk_store *s, dlk_get_req *reqs, size_t n,
                     void (*done)(void *ud, size_t i), void *ud);
    /* Optional: get_each without waiting (reqs checked as there): done
     * called once for each request as it finishes, in any order, on the
     * store's own threads (or in the caller's, before get_start returns,
     * for one that cannot be sent); a request and its buffer stay the
     * caller's to keep alive until then. */
    void (*get_start)(dlk_store *s, dlk_get_req **reqs, size_t n,
                      void (*done)(void *ud, dlk_get_req *q), void *ud);
    /* Optional: threads of the store's own that send and receive
     * dlk_store_get_start's GETs (0: none). */
    int (*io_threads)(dlk_store *s);
    /* Optional: list as `list` does, the whole listing (fn's stop ends
     * only the calls), gathered by many requests at once where the keys
     * are spread over folders; a size may be UINT64_MAX (unknown) where
     * knowing it costs a request per object (a local file's stat). */
    dlk_status (*list_wide)(dlk_store *s, const char *prefix,
                            dlk_list_fn fn, void *ud, dlk_error *err);
    /* Optional: a caller would keep up to n requests in flight (0: only
     * asks); returns how many the store takes in flight now. */
    int (*want_inflight)(dlk_store *s, int n);
    /* Optional: the whole listing as list_wide, with each object's size
     * and version (without it: list_wide, versions ""). */
    dlk_status (*list_versions)(dlk_store *s, const char *prefix,
                                dlk_list_version_fn fn, void *ud,
                                dlk_error *err);
} dlk_store_ops;

struct dlk_store {
    const dlk_store_ops *ops;
    char *url;   /* the root as given, without credentials */
    uint64_t listed; /* keys a listing under way has found (atomic): read
                        by another thread to show its progress */
    /* Where set (by the caller, before it lists), told of every entry a
     * listing passes over instead of listing: a local tree's symbolic
     * links and special files, directories nested too deep, paths too
     * long.  key is the path below the root, as it is; why says what it
     * is ("not read: a symbolic link ..."). */
    void (*passed)(void *ud, const char *key, const char *why);
    void *passed_ud;
    /* Its reads go to another store, which counts them (the chunk
     * cache): the checked wrappers count none of their own. */
    bool uncounted;
};

/* Open the store for a URL: "PATH", "file://PATH" or "s3://BUCKET/PREFIX",
 * with the caller's settings (NULL: defaults; read during the call only).
 * `create`: a local root directory is made if missing (a reader passes
 * false, so that opening a missing dataset leaves nothing behind). */
dlk_status dlk_store_open(const char *url, bool create,
                          const dlk_store_options *so, dlk_store **out,
                          dlk_error *err);
void dlk_store_free(dlk_store *s);
dlk_status dlk_store_open_file(const char *path, bool create,
                               dlk_store **out, dlk_error *err);
dlk_status dlk_store_open_s3(const char *url, const dlk_store_options *so,
                             dlk_store **out, dlk_error *err);
/* A read-only store of the caller's objects objs[0..n) (mem.c), named
 * url in messages; the objects (keys, versions, bytes) stay the caller's
 * and must outlive the store.  DLK_EINVAL for an object without a key,
 * or two of one key. */
dlk_status dlk_store_open_mem(const char *url, const dlk_ingest_object *objs,
                              size_t n, dlk_store **out, dlk_error *err);

/* A node-local cache of chunk objects in front of a remote store
 * (cache.c; formats/dlk-v1.md, Appendix B): reads of chunks
 * ("chunks/<tensor>/<name>") are served from DIR/objects/<name>, each
 * fetched whole once per node (the processes sharing DIR wait for one
 * another's fetch), checked against its name at its first use by this
 * handle where `verify`, and evicted least recently used beyond `limit`
 * bytes (0: the file system's free space less an eighth, with what the
 * cache holds).  Other reads go to the store.  It never fails for the
 * folder: one that cannot be used turns writing off, with a warning in
 * the stats, and chunks are read from the store.  Freeing it leaves the
 * store open.
 * @return DLK_OK with *out; DLK_ENOMEM. */
dlk_status dlk_store_open_cache(dlk_store *inner, const char *dir,
                                uint64_t limit, bool verify, dlk_store **out,
                                dlk_error *err);
typedef struct dlk_cache_stats {
    uint64_t hits;      /* reads served from a copy */
    uint64_t fetched;   /* chunks fetched and kept by this handle */
    uint64_t evicted;   /* copies it removed for room */
    uint64_t dropped;   /* copies it found bad (size, hash) and removed */
    uint64_t limit;     /* bytes, as given or derived */
    char warning[256];  /* why nothing is written, or "" */
} dlk_cache_stats;
/* A cache store's counters (zeros for any other store). */
void dlk_store_cache_stats(dlk_store *s, dlk_cache_stats *out);

/* Keys: relative, no empty, "." or ".." segment, no leading '/', no NUL,
 * no control characters or backslash, valid UTF-8, at most 1024 bytes. */
bool dlk_key_valid(const char *key);
/* Why key is not a valid object key ("a control character", "a '.' or
 * '..' path segment", ...), or NULL when it is. */
const char *dlk_key_problem(const char *key);
/* key made safe to print and to put in JSON: dlk_escape. */
void dlk_key_escape(const char *key, char *out, size_t cap);

/* Text from outside dlk (text.c): a dataset's names, ids, messages and
 * queries, a source's keys, a server's answers, the command line. */
/* The length of the UTF-8 sequence at p (1..4, within `left` bytes), or
 * 0 when it is not valid UTF-8 (overlong, surrogate, past U+10FFFF, cut
 * short). */
int dlk_utf8_len(const unsigned char *p, size_t left);
enum {
    DLK_ESC_BACKSLASH = 1, /* '\\' as \x5c too, so that an escape cannot
                              be told from the text it stands for */
    DLK_ESC_QUOTED = 2     /* '"' and '\\' as \" and \\ (a quoted string) */
};
/* len bytes of text made safe to print, to put in a message and in JSON:
 * control characters (C0, DEL, C1) and bytes that are not UTF-8 as \xNN
 * (a terminal never sees an escape sequence), backslashes as flags say;
 * cut with "..." to fit cap bytes (with the NUL).  Returns out. */
char *dlk_escape_n(const void *text, size_t len, char *out, size_t cap,
                   unsigned flags);
/* dlk_escape_n of a string, backslashes escaped. */
char *dlk_escape(const char *s, char *out, size_t cap);
/* The whole of s escaped so, in a new string (the caller frees it);
 * NULL when out of memory. */
char *dlk_escape_dup(const char *s);
/* msg (a string in cap bytes) with credentials replaced by "***": every
 * one of the n secrets the caller knows (as it is and percent-encoded),
 * the user information of URLs (the "KEY:SECRET" of
 * "s3://KEY:SECRET@host") and the values of pre-signed URLs' and headers'
 * credentials (X-Amz-Signature=, X-Amz-Credential=,
 * X-Amz-Security-Token=, X-Goog-Signature=, Credential=, Signature=,
 * token=, "Bearer ...").  dlk_fail applies it without secrets to every
 * message; the stores add theirs where a server's text is quoted. */
void dlk_redact(char *msg, size_t cap, const char *const *secrets,
                size_t nsecrets);
/* url, redacted as dlk_redact does, into out (cut to cap).  Returns out. */
char *dlk_redact_url(const char *url, char *out, size_t cap);
/* dlk_redact of err's message. */
void dlk_error_redact(dlk_error *err, const char *const *secrets,
                      size_t nsecrets);

/* Convenience wrappers that check the key and call the ops. */
dlk_status dlk_store_get(dlk_store *s, const char *key, uint64_t max,
                         dlk_buf *out, dlk_obj_info *info, dlk_error *err);
dlk_status dlk_store_get_range(dlk_store *s, const char *key, uint64_t off,
                               uint64_t len, dlk_buf *out, dlk_error *err);
/* The whole object, which the caller knows to be `size` bytes (as
 * dlk_store_get with max = size where the store has no faster way). */
dlk_status dlk_store_get_sized(dlk_store *s, const char *key, uint64_t size,
                               dlk_buf *out, dlk_obj_info *info,
                               dlk_error *err);
/* Bytes [off, off+len) of an object the caller knows to be `size` bytes,
 * appended to out (a part of a chunk, say): the store's fastest ranged
 * read, else one ranged get. */
dlk_status dlk_store_get_span(dlk_store *s, const char *key, uint64_t size,
                              uint64_t off, uint64_t len, dlk_buf *out,
                              dlk_error *err);
/* n spans of one object at once where the store can (one round trip
 * for a chunk's header and a span of its parts), else one after the
 * other as dlk_store_get_span reads them. */
dlk_status dlk_store_get_spans(dlk_store *s, const char *key, uint64_t size,
                               size_t n, const uint64_t *off,
                               const uint64_t *len, dlk_buf **outs,
                               dlk_error *err);
/* Whether the store is remote (no object can be mapped from a local
 * file): its reads pay a round trip, so readers keep more in flight. */
bool dlk_store_is_remote(const dlk_store *s);
dlk_status dlk_store_head(dlk_store *s, const char *key, dlk_obj_info *info,
                          dlk_error *err);
dlk_status dlk_store_put(dlk_store *s, const char *key, const void *data,
                         size_t len, dlk_put_mode mode, const char *etag,
                         dlk_obj_info *out, dlk_error *err);
dlk_status dlk_store_putv(dlk_store *s, const char *key,
                          const struct iovec *v, int n, dlk_put_mode mode,
                          const char *etag, dlk_obj_info *out,
                          dlk_error *err);
/* putv of content-addressed parts: the key is prefix + hex, hex (out)
 * the XXH3-128 of their bytes (dlk_hash128_hex_v's); mode IF_ABSENT or
 * ALWAYS. */
dlk_status dlk_store_putv_hashed(dlk_store *s, const char *prefix,
                                 const struct iovec *v, int n,
                                 dlk_put_mode mode, char hex[33],
                                 dlk_error *err);
dlk_status dlk_store_del(dlk_store *s, const char *key, dlk_error *err);
dlk_status dlk_store_list(dlk_store *s, const char *prefix, dlk_list_fn fn,
                          void *ud, dlk_error *err);
/* The same listing, for a caller that wants all of it and not the sizes
 * (some may be UINT64_MAX): a remote store lists many folders at once
 * instead of page after page, a local one reads no file's inode. */
dlk_status dlk_store_list_wide(dlk_store *s, const char *prefix,
                               dlk_list_fn fn, void *ud, dlk_error *err);
/* The whole listing with each object's version (dlk_list_version_fn):
 * one request a page from S3, a stat per file from a directory. */
dlk_status dlk_store_list_versions(dlk_store *s, const char *prefix,
                                   dlk_list_version_fn fn, void *ud,
                                   dlk_error *err);
/* The caller would keep up to n requests in flight (ingest's GETs; 0:
 * only asks): a remote store lets its in-flight limit grow to n where its
 * answers are slow, unless the user set one (DLK_S3_MAX_INFLIGHT).
 * Returns the store's in-flight limit now (INT_MAX: none). */
int dlk_store_want_inflight(dlk_store *s, int n);
/* DLK_EUNSUPPORTED when the store cannot map. */
dlk_status dlk_store_map(dlk_store *s, const char *key, const void **ptr,
                         size_t *len, dlk_error *err);
void dlk_store_unmap(dlk_store *s, const void *ptr, size_t len);
/* Several whole-object GETs at once (all in flight on the engine for S3,
 * on threads for another remote store, one after the other for a local
 * one): each request gets its own status and
 * error; out buffers are appended to, as by dlk_store_get. */
struct dlk_get_req {
    const char *key;
    uint64_t max;
    dlk_buf *out;
    dlk_obj_info *info;   /* may be NULL */
    dlk_status rc;
    dlk_error err;
};
void dlk_store_get_each(dlk_store *s, dlk_get_req *reqs, size_t n);
/* The GETs of reqs started without waiting where the store can (false:
 * it cannot, nothing was done): done(ud, q) is called once for each, in
 * any order, from the store's threads or (a request that cannot be sent,
 * a bad key) from this one before it returns.  Each request and its out
 * buffer must stay alive until its done. */
bool dlk_store_get_start(dlk_store *s, dlk_get_req **reqs, size_t n,
                         void (*done)(void *ud, dlk_get_req *q), void *ud);
/* How many threads of its own the store has for dlk_store_get_start's
 * GETs (0: none; an S3 store's DLK_S3_IO_THREADS). */
int dlk_store_io_threads(dlk_store *s);
/* For stores: count n bytes read (the I/O counters) where the read ends
 * on a thread of their own. */
void dlk_io_count_read(uint64_t n);
/* A request's status, its error copied to err when it failed. */
dlk_status dlk_get_req_status(const dlk_get_req *r, dlk_error *err);
/* The store's sweep (nothing where it has none: an S3 PUT is atomic). */
dlk_status dlk_store_sweep(dlk_store *s, int64_t before, bool dry,
                           uint64_t *files, uint64_t *bytes, dlk_error *err);

/* ---- chunk format (format/chunk.c) --------------------------------- */

#define DLK_CHUNK_MAGIC "DLKC"
#define DLK_CHUNK_HEADER_BYTES 64
/* Hard limits a reader enforces before allocating anything. */
#define DLK_CHUNK_MAX_RAW ((uint64_t)2 << 30)   /* 2 GiB raw payload */
#define DLK_CHUNK_MAX_SAMPLES (1u << 26)
#define DLK_CHUNK_FLAG_VARIABLE 0x01u
#define DLK_CHUNK_FLAG_PARTS 0x02u      /* the index ends with a part table */
/* A part table's nominal part size (formats/dlk-v1.md 3.2). */
#define DLK_PART_BYTES_MIN 4096u
#define DLK_PART_BYTES_MAX (1u << 30)

typedef struct dlk_chunk_header {
    uint16_t version;
    dlk_dtype dtype;
    dlk_codec codec;
    int ndim;
    unsigned flags;
    uint32_t samples;
    uint64_t index_bytes;
    uint64_t stored_bytes;   /* payload as stored */
    uint64_t raw_bytes;      /* payload uncompressed */
    uint64_t raw_hash;       /* XXH3-64 of raw payload */
    uint64_t stored_hash;    /* XXH3-64 of stored payload */
    uint64_t header_hash;    /* XXH3-64 of header[0..56) + index */
    uint32_t part_bytes;     /* PARTS: the table's nominal part size; 0 */
    uint32_t nparts;         /* PARTS: parts in the table; 0 */
    uint64_t part_table;     /* PARTS: offset of the part hashes in the
                                index (nparts LE u64 values) */
} dlk_chunk_header;

/* Parts of a chunk of `samples` samples and raw_bytes raw bytes, cut at
 * part_bytes: min(samples, max(1, ceil(raw_bytes / part_bytes))); 0 when
 * part_bytes or samples is 0. */
uint32_t dlk_parts_count(uint32_t samples, uint64_t raw_bytes,
                         uint32_t part_bytes);
/* The first sample of part p of nparts: floor(p * samples / nparts), so
 * p == nparts gives samples; 0 when nparts is 0. */
uint32_t dlk_part_first(uint32_t p, uint32_t samples, uint32_t nparts);

/* Encode samples into a chunk object.  raw: the payload, samples back to
 * back; shapes: samples*ndim dims (NULL for a fixed shape, then `shape`
 * gives it); out receives the whole object. */
typedef struct dlk_chunk_enc {
    dlk_dtype dtype;
    dlk_codec codec;
    int level;
    int ndim;
    bool variable;
    const int64_t *shape;    /* fixed shape (ndim dims) when !variable */
    const uint32_t *shapes;  /* samples*ndim dims when variable */
    uint32_t samples;
    const void *raw;         /* NULL: the payload is elsewhere (encode_head
                                with raw_hash given, uncompressed only) */
    size_t raw_bytes;
    bool have_raw_hash;      /* raw_hash is XXH3-64 of the raw payload, */
    uint64_t raw_hash;       /* computed as it was gathered */
    uint32_t part_bytes;     /* non-zero: a part table cut at this size
                                (codec none only) */
    const struct iovec *iov; /* with raw NULL: the payload in pieces, */
    size_t niov;             /* read for the part hashes only */
} dlk_chunk_enc;

dlk_status dlk_chunk_encode(const dlk_chunk_enc *in, dlk_buf *out,
                            dlk_error *err);
/* The same without copying an uncompressed payload: out receives the
 * header and index, and *payload_follows says that the object is those
 * followed by in->raw (false: out is the whole object, compressed). */
dlk_status dlk_chunk_encode_head(const dlk_chunk_enc *in, dlk_buf *out,
                                 bool *payload_follows, dlk_error *err);

/* Parse and check the header and index of a chunk object of `len` bytes.
 * `name` is used in messages.  Does not touch the payload. */
dlk_status dlk_chunk_parse_header(const uint8_t *obj, size_t len,
                                  const char *name, dlk_chunk_header *h,
                                  dlk_error *err);
/* The same from the first `avail` bytes of an object of object_bytes
 * bytes: avail must hold at least the header and index. */
dlk_status dlk_chunk_parse_head(const uint8_t *obj, size_t avail,
                                uint64_t object_bytes, const char *name,
                                dlk_chunk_header *h, dlk_error *err);

/* Decoded chunk (the public dlk_chunk). */
struct dlk_chunk {
    dlk_chunk_header h;
    int64_t shape[DLK_MAX_NDIM];   /* fixed shape when !variable */
    uint32_t *shapes;              /* samples*ndim when variable */
    uint64_t *offsets;             /* samples+1 byte offsets when variable */
    uint64_t sample_bytes;         /* fixed: bytes per sample */
    const uint8_t *payload;        /* raw payload */
    dlk_buf owned;                 /* memory owned by the chunk */
    dlk_buf object;                /* the object as read (or its head) */
    uint32_t part_bytes, nparts;   /* the part table (PARTS); 0 without */
    const uint8_t *part_hash;      /* nparts LE u64 part hashes inside
                                      object's index; NULL without */
};

/* Decode a chunk object (already in c->object) into c: header, index,
 * and the raw payload (decompressed into dst/cap when given and big
 * enough, else into owned memory).  verify_payload: check stored hash
 * (and raw hash after decompression). */
enum {
    DLK_DECODE_VERIFY = 1,      /* check the payload checksums */
    DLK_DECODE_HEADER_ONLY = 2, /* header and index only: no payload */
    DLK_DECODE_VERIFY_PARTS = 4 /* with VERIFY: each part hash too */
};
dlk_status dlk_chunk_decode(struct dlk_chunk *c, const char *name,
                            unsigned mode, void *dst, size_t cap,
                            dlk_error *err);
/* Header and index of c->object, which holds the first bytes (at least
 * the header and index) of an object of object_bytes bytes: every check
 * of the header and index, the payload not touched. */
dlk_status dlk_chunk_decode_head(struct dlk_chunk *c, const char *name,
                                 uint64_t object_bytes, dlk_error *err);

/* Parts of a decoded chunk (header only will do).  The raw offset of
 * sample s (s == samples: raw_bytes). */
uint64_t dlk_chunk_sample_offset(const dlk_chunk *c, uint32_t s);
/* The raw payload bytes [*off, *off + *len) of parts [p0, p1);
 * DLK_EINVAL unless p0 <= p1 <= nparts and the chunk has parts. */
dlk_status dlk_chunk_part_span(const dlk_chunk *c, uint32_t p0, uint32_t p1,
                               uint64_t *off, uint64_t *len);
/* Check the part hashes of parts [p0, p1) against bytes, exactly the raw
 * payload bytes of those parts (len their span, else DLK_EINVAL):
 * DLK_ECORRUPT naming key and the first part that does not match. */
dlk_status dlk_chunk_verify_parts(const dlk_chunk *c, uint32_t p0,
                                  uint32_t p1, const void *bytes,
                                  uint64_t len, const char *key,
                                  dlk_error *err);
/* Check part p's hash against `hash`, the XXH3 of its bytes found by the
 * caller (e.g. hashed piece by piece as they were read): DLK_ECORRUPT
 * naming key and the part as dlk_chunk_verify_parts does. */
dlk_status dlk_chunk_part_check(const dlk_chunk *c, uint32_t p, uint64_t hash,
                                const char *key, dlk_error *err);

/* ---- manifest (format/manifest.c) ---------------------------------- */

typedef struct dlk_chunk_entry {
    char key[40];        /* content hash, 32 hex digits */
    uint32_t samples;
    uint64_t stored_bytes;
    uint64_t raw_bytes;
    uint64_t first;      /* derived: first sample index */
} dlk_chunk_entry;

/* A segment of a tensor's chunk list (formats/dlk-v1.md 4.3.4): an
 * immutable object index/segments/<key> of nchunks consecutive entries,
 * with their totals, so that a state names a run of entries in one small
 * reference that other states share. */
typedef struct dlk_seg_ref {
    char key[33];        /* XXH3-128 of the object's bytes, 32 hex digits */
    uint64_t nchunks, samples, stored_bytes, raw_bytes;
    uint64_t bytes;      /* the object's size */
} dlk_seg_ref;

#define DLK_SEG_PREFIX "index/segments/"
#define DLK_SEG_KEY_MAX (sizeof DLK_SEG_PREFIX + 32)
#define DLK_SEG_ENTRIES 1024          /* a writer's segments, and its tail's
                                         longest */
#define DLK_SEG_ENTRIES_MAX 65536     /* what a reader accepts */
#define DLK_SEG_BYTES_MAX ((uint64_t)8 << 20)

typedef struct dlk_tensor {
    dlk_tensor_spec spec;      /* class_names points into names below */
    char **class_names;
    size_t n_class_names;
    uint64_t samples;
    uint64_t stored_bytes;
    uint64_t raw_bytes;
    bool have_minmax;
    int64_t shape_min[DLK_MAX_NDIM];
    int64_t shape_max[DLK_MAX_NDIM];
    dlk_chunk_entry *chunks;
    size_t nchunks, capchunks;
    /* The segments that hold the first entries of the list, in order.
     * While segs_pending (a state parsed and its segments not read yet:
     * dlk_segments_load), chunks holds only the entries after them (the
     * tail), their `first` counted from the segments' samples, and
     * samples and the byte totals are the whole tensor's; otherwise
     * chunks is the whole list and the segments cover its first
     * seg_chunks entries. */
    dlk_seg_ref *segs;
    size_t nsegs, capsegs;
    size_t seg_chunks;
    bool segs_pending;
} dlk_tensor;

/* The entries before chunks[0]: while t is pending (a writer opened the
 * head without reading its segments), its segments' chunks, else 0.  A
 * pending tensor's entry i is entry dlk_tensor_base(t) + i of the whole
 * list; its truncate and add_chunk keep the whole tensor's totals. */
size_t dlk_tensor_base(const dlk_tensor *t);
/* The entries after t's segments (the tail, written inline), n of them. */
const dlk_chunk_entry *dlk_tensor_tail(const dlk_tensor *t, size_t *n);
/* A segment's key "index/segments/<hash>" into out. */
void dlk_seg_key(char out[DLK_SEG_KEY_MAX], const char *hash);
/* Serialize entries e[0..n) as a segment object (*out malloc'd) and
 * describe it in ref (its hash, counts and size). */
dlk_status dlk_segment_dump(const dlk_chunk_entry *e, size_t n, char **out,
                            size_t *len, dlk_seg_ref *ref, dlk_error *err);
/* Check and parse the bytes of the segment ref names (read from
 * index/segments/<ref->key>): its size and hash, then every entry as a
 * manifest's (4.3.3), their number and totals against ref.  *out is
 * malloc'd, ref->nchunks entries. */
dlk_status dlk_segment_parse(const char *bytes, size_t len,
                             const dlk_seg_ref *ref, dlk_chunk_entry **out,
                             dlk_error *err);
/* A pending tensor's list made whole: the entries of its segments, in
 * order (ents[k] the ref->nchunks entries of segment k), then its tail. */
dlk_status dlk_tensor_attach(dlk_tensor *t, dlk_chunk_entry *const *ents,
                             dlk_error *err);
/* Whether t's segments still describe its first seg_chunks entries (a
 * writer that changed the list without dlk_tensor_truncate would have
 * broken that): checks each segment's first and last keys and its
 * samples by the entries' `first`. */
bool dlk_tensor_segs_fit(const dlk_tensor *t);

#define DLK_KEY_INDEX_PREFIX "index/keys/"
#define DLK_KEY_INDEX_MAX (sizeof DLK_KEY_INDEX_PREFIX + 32)
/* The most runs a key index may have (formats/dlk-v1.md 4.3.1). */
#define DLK_KEY_RUNS_MAX 1024

/* A run of the key index (formats/dlk-v1.md 6.9): the object holding the
 * keys of `rows` consecutive rows, after those of the runs before it. */
typedef struct dlk_key_run {
    char object[DLK_KEY_INDEX_MAX];
    uint64_t rows;
} dlk_key_run;

#define DLK_VIEW_PREFIX "index/views/"
#define DLK_VIEW_KEY_MAX (sizeof DLK_VIEW_PREFIX + 32)
#define DLK_VIEWS_MAX 4096
#define DLK_VIEW_QUERY_MAX 65536

/* A view named by the manifest (formats/dlk-v1.md 6.10). */
typedef struct dlk_view_ref {
    char name[DLK_NAME_MAX + 1];
    char object[DLK_VIEW_KEY_MAX];
    uint64_t rows, dataset_rows;
    char *query;               /* never NULL once parsed or added */
} dlk_view_ref;

#define DLK_WRITES_MAX 16

typedef struct dlk_manifest {
    dlk_tensor *tensors;
    size_t ntensors;
    dlk_view_ref *views;       /* in name order */
    size_t nviews;
    char *parent;     /* commit id this head builds on, or NULL */
    /* the key index (formats/dlk-v1.md 6.9) of the first key_index_rows
     * rows of the key tensor; "" when there is none */
    char key_index[DLK_KEY_INDEX_MAX];
    uint64_t key_index_rows;
    /* the key index as runs (formats/dlk-v1.md 6.9), rows from 0 in run
     * order; nkey_runs 0 when absent */
    dlk_key_run *key_runs;
    size_t nkey_runs;
    /* the source that relative keys (written before keys named whole
     * objects, formats/dlk-v1.md 6.9) are relative to: "s3://b/p/",
     * "gs://b/p/" or "/dir/"; NULL when not recorded */
    char *key_base;
    /* the head's "writes" (formats/dlk-v1.md 4.3.1): the ids of the last
     * publishes, oldest first, so that a writer whose conditional replace
     * was refused or whose answer was lost can tell whether its own write
     * is in the head's history; nwrites 0 when absent */
    char writes[DLK_WRITES_MAX][33];
    size_t nwrites;
} dlk_manifest;

/* The longest key_base (formats/dlk-v1.md 4.3.1). */
#define DLK_KEY_BASE_MAX 4096
/* Whether s is a key_base: a source URL ending in '/' (s3://BUCKET/,
 * gs://BUCKET/ or an absolute path), at most DLK_KEY_BASE_MAX bytes of
 * printable UTF-8. */
bool dlk_key_base_valid(const char *s);

/* Whether id is among m's writes. */
bool dlk_manifest_wrote(const dlk_manifest *m, const char *id);
/* Append id to m's writes (dropping the oldest past DLK_WRITES_MAX),
 * unless it is the newest already. */
void dlk_manifest_add_write(dlk_manifest *m, const char *id);

/* A tensor or view name: 1..64 bytes of [A-Za-z0-9_.-], not starting
 * with '.'. */
bool dlk_name_valid(const char *s);

/* Rows of a state: the fewest samples of any tensor (0 without any). */
uint64_t dlk_manifest_rows(const dlk_manifest *m);

/* Parse a manifest JSON document (bounded: size, depth, counts). */
dlk_status dlk_manifest_parse(const char *json, size_t len, const char *name,
                              dlk_manifest *m, dlk_error *err);
/* The same from a document dlk_json_load accepted (root stays the
 * caller's): the fields of a manifest, which a commit shares. */
struct json_t;
dlk_status dlk_manifest_from_json(struct json_t *root, const char *name,
                                  dlk_manifest *m, dlk_error *err);
/* Serialize; *out is malloc'd NUL-terminated JSON. */
dlk_status dlk_manifest_dump(const dlk_manifest *m, char **out, size_t *len,
                             dlk_error *err);
void dlk_manifest_free(dlk_manifest *m);
/* Validate a tensor spec (name, dtype, shape, codec, level). */
dlk_status dlk_spec_check(const dlk_tensor_spec *s, dlk_error *err);
/* Deep-copy a spec into t (class names duplicated). */
dlk_status dlk_tensor_init(dlk_tensor *t, const dlk_tensor_spec *s,
                           dlk_error *err);
void dlk_tensor_fini(dlk_tensor *t);
dlk_status dlk_tensor_add_chunk(dlk_tensor *t, const dlk_chunk_entry *e,
                                const int64_t *smin, const int64_t *smax,
                                dlk_error *err);
/* Keep the first n chunk entries (their totals recomputed).  shape_min
 * and shape_max are left as they are: the samples of the dropped entries
 * are appended again by the callers (a chunk replaced by its
 * compaction), so the bounds stay right. */
void dlk_tensor_truncate(dlk_tensor *t, size_t n);
/* Find the chunk holding sample i (binary search); -1 if out of range. */
ssize_t dlk_tensor_find_chunk(const dlk_tensor *t, uint64_t i);
/* The bytes 64 + index_bytes that the chunk of entry e of tensor t must
 * have by the manifest alone (its header and index: one ranged read),
 * or 0 when they cannot be known (a tensor without part_bytes whose
 * chunks may or may not carry a part table; an entry out of range). */
uint64_t dlk_chunk_expected_head(const dlk_tensor *t,
                                 const dlk_chunk_entry *e);

/* dlk.json: the dataset's id into id (cap bytes), checked. */
dlk_status dlk_dataset_doc_parse(const char *json, size_t len,
                                 const char *name, char *id, size_t cap,
                                 dlk_error *err);
/* A commit document: its manifest, and (meta not NULL) what else it
 * records; everything freed again on an error. */
typedef struct dlk_commit_meta {
    char *time, *message;
    uint64_t bytes_added, chunks_added;
} dlk_commit_meta;
dlk_status dlk_commit_parse(const char *json, size_t len, const char *name,
                            dlk_manifest *m, dlk_commit_meta *meta,
                            dlk_error *err);
void dlk_commit_meta_free(dlk_commit_meta *meta);

/* Parse a JSON document of the format: at most DLK_JSON_MAX_BYTES, an
 * object with "format": "dlk" and "version": 1; `what` names it in
 * messages ("manifest").  Returns a new reference or NULL with err set. */
struct json_t;
struct json_t *dlk_json_load(const char *json, size_t len, const char *name,
                             const char *what, dlk_error *err);

/* Maximum size of a JSON document a reader accepts.  Nesting is bounded
 * by jansson's parser (2048 levels), far below what would exhaust the
 * stack; the format itself nests at most 5 levels. */
#define DLK_JSON_MAX_BYTES ((size_t)256 << 20)

#endif /* DLK_INTERNAL_H */
