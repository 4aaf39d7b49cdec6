/*
 * store.h - stores: a flat namespace of objects below one root (store/); not
 * installed.
 */
#ifndef DLK_STORE_STORE_H
#define DLK_STORE_STORE_H

#include "dlk.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* A store is a flat namespace of objects below one root (a directory or an
 * s3://bucket/prefix).  Keys are relative, '/'-separated, and checked by
 * Dlk_key_valid before any use.  Every operation is safe to call from
 * several threads at once on one store. */
typedef struct Dlk_store Dlk_store;

#define DLK_ETAG_MAX 128

typedef enum Dlk_put_mode {
    DLK_PUT_ALWAYS = 0,     /* create or replace */
    DLK_PUT_IF_ABSENT = 1,  /* create only: DLK_EEXIST if it exists */
    DLK_PUT_IF_MATCH = 2    /* replace only if its etag is `etag`:
                               DLK_ECONFLICT otherwise (or if absent) */
} Dlk_put_mode;

typedef struct Dlk_obj_info {
    uint64_t size;
    char etag[DLK_ETAG_MAX];
    int64_t mtime;   /* last modified, Unix seconds; 0 when unknown */
} Dlk_obj_info;

typedef struct Dlk_get_req Dlk_get_req;

/* Called by list for each object, in key order; non-zero stops. */
typedef int (*Dlk_list_fn)(void *ud, const char *key, uint64_t size);
/* The same with what identifies the object's version: an S3 object's
 * ETag (without quotes), a file's "<size>-<mtime s>.<ns>" ("" unknown). */
typedef int (*Dlk_list_version_fn)(void *ud, const char *key, uint64_t size,
                                   const char *version);

typedef struct Dlk_store_ops {
    const char *scheme;
    /* Read bytes [off, off+len) of key into out (appended).  len
     * UINT64_MAX means to the end.  `max` bounds how many bytes may be
     * read at all (DLK_ELIMIT beyond it).  DLK_ENOTFOUND if absent; a
     * range past the end is DLK_ECORRUPT "short read". */
    dlk_status (*get)(Dlk_store *s, const char *key, uint64_t off,
                      uint64_t len, uint64_t max, Dlk_buf *out,
                      Dlk_obj_info *info, dlk_error *err);
    dlk_status (*head)(Dlk_store *s, const char *key, Dlk_obj_info *info,
                       dlk_error *err);
    /* Optional: bytes [off, off+len) of an object known to be `size`
     * bytes (a chunk the manifest sizes; the whole of it: 0, size), read
     * as the store reads fastest: S3 asks for byte ranges of it in
     * parallel on its I/O threads.  *requests: how many were sent.  For
     * the whole object, one of another size fails as get with max = size
     * does, or succeeds with info->size telling the size found. */
    dlk_status (*get_sized)(Dlk_store *s, const char *key, uint64_t size,
                            uint64_t off, uint64_t len, Dlk_buf *out,
                            Dlk_obj_info *info, unsigned *requests,
                            dlk_error *err);
    /* Optional: n spans of an object known to be `size` bytes, all in
     * flight at once: [off[i], off[i]+len[i]) appended to outs[i]. */
    dlk_status (*get_spans)(Dlk_store *s, const char *key, uint64_t size,
                            size_t n, const uint64_t *off,
                            const uint64_t *len, Dlk_buf **outs,
                            unsigned *requests, dlk_error *err);
    /* Atomic: readers see the old object or the new one, never a part.
     * etag_out (may be NULL) receives the new object's etag. */
    dlk_status (*put)(Dlk_store *s, const char *key, const void *data,
                      size_t len, Dlk_put_mode mode, const char *etag,
                      Dlk_obj_info *out, dlk_error *err);
    dlk_status (*del)(Dlk_store *s, const char *key, dlk_error *err);
    /* List objects whose key starts with prefix (relative to the root). */
    dlk_status (*list)(Dlk_store *s, const char *prefix, Dlk_list_fn fn,
                       void *ud, dlk_error *err);
    void (*free)(Dlk_store *s);
    /* Optional (NULL where the store has no local file): map the whole
     * object read-only; unmap with `unmap`.  Lets a reader use the page
     * cache in place, with no copy. */
    dlk_status (*map)(Dlk_store *s, const char *key, const void **ptr,
                      size_t *len, dlk_error *err);
    void (*unmap)(Dlk_store *s, const void *ptr, size_t len);
    /* Optional: remove (dry: count) what writes interrupted before they
     * completed left behind, last modified before `before` (unix s). */
    dlk_status (*sweep)(Dlk_store *s, int64_t before, bool dry,
                        uint64_t *files, uint64_t *bytes, dlk_error *err);
    /* Optional: put the concatenation of n parts, as put does (without
     * it, Dlk_store_putv joins the parts in a buffer first). */
    dlk_status (*putv)(Dlk_store *s, const char *key, const struct iovec *v,
                       int n, Dlk_put_mode mode, const char *etag,
                       Dlk_obj_info *out, dlk_error *err);
    /* Optional: putv (IF_ABSENT or ALWAYS) under the key prefix + hex,
     * hex the XXH3-128 of the parts' bytes (content addressing), hashed
     * as each part is written while it is in cache, where the store
     * names an object after writing it (a local file system).  Without
     * it, Dlk_store_putv_hashed hashes all first, then puts. */
    dlk_status (*putv_hashed)(Dlk_store *s, const char *prefix,
                              const struct iovec *v, int n,
                              Dlk_put_mode mode, char hex[33],
                              dlk_error *err);
    /* Optional: the whole-object GETs of Dlk_store_get_each all in flight
     * at once without a thread each (keys checked, results in reqs);
     * done called in the caller's thread for request i once it and every
     * one before it have finished (Dlk_store_get_each counts the bytes
     * there). */
    void (*get_each)(Dlk_store *s, Dlk_get_req *reqs, size_t n,
                     void (*done)(void *ud, size_t i), void *ud);
    /* Optional: get_each without waiting (reqs checked as there): done
     * called once for each request as it finishes, in any order, on the
     * store's own threads (or in the caller's, before get_start returns,
     * for one that cannot be sent); a request and its buffer stay the
     * caller's to keep alive until then. */
    void (*get_start)(Dlk_store *s, Dlk_get_req **reqs, size_t n,
                      void (*done)(void *ud, Dlk_get_req *q), void *ud);
    /* Optional: threads of the store's own that send and receive
     * Dlk_store_get_start's GETs (0: none). */
    int (*io_threads)(Dlk_store *s);
    /* Optional: list as `list` does, the whole listing (fn's stop ends
     * only the calls), gathered by many requests at once where the keys
     * are spread over folders; a size may be UINT64_MAX (unknown) where
     * knowing it costs a request per object (a local file's stat). */
    dlk_status (*list_wide)(Dlk_store *s, const char *prefix,
                            Dlk_list_fn fn, void *ud, dlk_error *err);
    /* Optional: a caller would keep up to n requests in flight (0: only
     * asks); returns how many the store takes in flight now. */
    int (*want_inflight)(Dlk_store *s, int n);
    /* Optional: the whole listing as list_wide, with each object's size
     * and version (without it: list_wide, versions ""). */
    dlk_status (*list_versions)(Dlk_store *s, const char *prefix,
                                Dlk_list_version_fn fn, void *ud,
                                dlk_error *err);
} Dlk_store_ops;

struct Dlk_store {
    const Dlk_store_ops *ops;
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
dlk_status Dlk_store_open(const char *url, bool create,
                          const dlk_store_options *so, Dlk_store **out,
                          dlk_error *err);
void Dlk_store_free(Dlk_store *s);
dlk_status Dlk_store_open_file(const char *path, bool create,
                               Dlk_store **out, dlk_error *err);
dlk_status Dlk_store_open_s3(const char *url, const dlk_store_options *so,
                             Dlk_store **out, dlk_error *err);
/* Reads the bytes of objs[index] (dlk_ingest_opts.read_object). */
typedef int (*Dlk_mem_read)(void *ud, size_t index, void *dst, size_t len,
                            char *why, size_t why_size);
/* A read-only store of the caller's objects objs[0..n) (mem.c), named
 * url in messages; the objects (keys, versions, bytes) stay the caller's
 * and must outlive the store.  An object with len but no data is read by
 * read (NULL: none may lack it).  DLK_EINVAL for an object without a
 * key, or without its data and no read, or two of one key. */
dlk_status Dlk_store_open_mem(const char *url, const dlk_ingest_object *objs,
                              size_t n, Dlk_mem_read read, void *read_ud,
                              Dlk_store **out, dlk_error *err);

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
dlk_status Dlk_store_open_cache(Dlk_store *inner, const char *dir,
                                uint64_t limit, bool verify, Dlk_store **out,
                                dlk_error *err);
typedef struct Dlk_cache_stats {
    uint64_t hits;      /* reads served from a copy */
    uint64_t fetched;   /* chunks fetched and kept by this handle */
    uint64_t evicted;   /* copies it removed for room */
    uint64_t dropped;   /* copies it found bad (size, hash) and removed */
    uint64_t limit;     /* bytes, as given or derived */
    char warning[256];  /* why nothing is written, or "" */
} Dlk_cache_stats;
/* A cache store's counters (zeros for any other store). */
void Dlk_store_cache_stats(Dlk_store *s, Dlk_cache_stats *out);

/* Convenience wrappers that check the key and call the ops. */
dlk_status Dlk_store_get(Dlk_store *s, const char *key, uint64_t max,
                         Dlk_buf *out, Dlk_obj_info *info, dlk_error *err);
dlk_status Dlk_store_get_range(Dlk_store *s, const char *key, uint64_t off,
                               uint64_t len, Dlk_buf *out, dlk_error *err);
/* The whole object, which the caller knows to be `size` bytes (as
 * Dlk_store_get with max = size where the store has no faster way). */
dlk_status Dlk_store_get_sized(Dlk_store *s, const char *key, uint64_t size,
                               Dlk_buf *out, Dlk_obj_info *info,
                               dlk_error *err);
/* Bytes [off, off+len) of an object the caller knows to be `size` bytes,
 * appended to out (a part of a chunk, say): the store's fastest ranged
 * read, else one ranged get. */
dlk_status Dlk_store_get_span(Dlk_store *s, const char *key, uint64_t size,
                              uint64_t off, uint64_t len, Dlk_buf *out,
                              dlk_error *err);
/* n spans of one object at once where the store can (one round trip
 * for a chunk's header and a span of its parts), else one after the
 * other as Dlk_store_get_span reads them. */
dlk_status Dlk_store_get_spans(Dlk_store *s, const char *key, uint64_t size,
                               size_t n, const uint64_t *off,
                               const uint64_t *len, Dlk_buf **outs,
                               dlk_error *err);
/* Whether the store is remote (no object can be mapped from a local
 * file): its reads pay a round trip, so readers keep more in flight. */
bool Dlk_store_is_remote(const Dlk_store *s);
dlk_status Dlk_store_head(Dlk_store *s, const char *key, Dlk_obj_info *info,
                          dlk_error *err);
dlk_status Dlk_store_put(Dlk_store *s, const char *key, const void *data,
                         size_t len, Dlk_put_mode mode, const char *etag,
                         Dlk_obj_info *out, dlk_error *err);
dlk_status Dlk_store_putv(Dlk_store *s, const char *key,
                          const struct iovec *v, int n, Dlk_put_mode mode,
                          const char *etag, Dlk_obj_info *out,
                          dlk_error *err);
/* putv of content-addressed parts: the key is prefix + hex, hex (out)
 * the XXH3-128 of their bytes (Dlk_hash128_hex_v's); mode IF_ABSENT or
 * ALWAYS. */
dlk_status Dlk_store_putv_hashed(Dlk_store *s, const char *prefix,
                                 const struct iovec *v, int n,
                                 Dlk_put_mode mode, char hex[33],
                                 dlk_error *err);
dlk_status Dlk_store_del(Dlk_store *s, const char *key, dlk_error *err);
dlk_status Dlk_store_list(Dlk_store *s, const char *prefix, Dlk_list_fn fn,
                          void *ud, dlk_error *err);
/* The same listing, for a caller that wants all of it and not the sizes
 * (some may be UINT64_MAX): a remote store lists many folders at once
 * instead of page after page, a local one reads no file's inode. */
dlk_status Dlk_store_list_wide(Dlk_store *s, const char *prefix,
                               Dlk_list_fn fn, void *ud, dlk_error *err);
/* The whole listing with each object's version (Dlk_list_version_fn):
 * one request a page from S3, a stat per file from a directory. */
dlk_status Dlk_store_list_versions(Dlk_store *s, const char *prefix,
                                   Dlk_list_version_fn fn, void *ud,
                                   dlk_error *err);
/* The caller would keep up to n requests in flight (ingest's GETs; 0:
 * only asks): a remote store lets its in-flight limit grow to n where its
 * answers are slow, unless the user set one (DLK_S3_MAX_INFLIGHT).
 * Returns the store's in-flight limit now (INT_MAX: none). */
int Dlk_store_want_inflight(Dlk_store *s, int n);
/* DLK_EUNSUPPORTED when the store cannot map. */
dlk_status Dlk_store_map(Dlk_store *s, const char *key, const void **ptr,
                         size_t *len, dlk_error *err);
void Dlk_store_unmap(Dlk_store *s, const void *ptr, size_t len);
/* Several whole-object GETs at once (all in flight on the engine for S3,
 * on threads for another remote store, one after the other for a local
 * one): each request gets its own status and
 * error; out buffers are appended to, as by Dlk_store_get. */
struct Dlk_get_req {
    const char *key;
    uint64_t max;
    Dlk_buf *out;
    Dlk_obj_info *info;   /* may be NULL */
    dlk_status rc;
    dlk_error err;
};
void Dlk_store_get_each(Dlk_store *s, Dlk_get_req *reqs, size_t n);
/* The GETs of reqs started without waiting where the store can (false:
 * it cannot, nothing was done): done(ud, q) is called once for each, in
 * any order, from the store's threads or (a request that cannot be sent,
 * a bad key) from this one before it returns.  Each request and its out
 * buffer must stay alive until its done. */
bool Dlk_store_get_start(Dlk_store *s, Dlk_get_req **reqs, size_t n,
                         void (*done)(void *ud, Dlk_get_req *q), void *ud);
/* How many threads of its own the store has for Dlk_store_get_start's
 * GETs (0: none; an S3 store's DLK_S3_IO_THREADS). */
int Dlk_store_io_threads(Dlk_store *s);
/* For stores: count n bytes read (the I/O counters) where the read ends
 * on a thread of their own. */
void Dlk_io_count_read(uint64_t n);
/* A request's status, its error copied to err when it failed. */
dlk_status Dlk_get_req_status(const Dlk_get_req *r, dlk_error *err);
/* The store's sweep (nothing where it has none: an S3 PUT is atomic). */
dlk_status Dlk_store_sweep(Dlk_store *s, int64_t before, bool dry,
                           uint64_t *files, uint64_t *bytes, dlk_error *err);

#endif /* DLK_STORE_STORE_H */
