/*
 * dlk.h - the public interface of libdlk.
 *
 * dlk packs training data into large immutable chunks of tensors of their
 * final shape and dtype on object storage (a local directory or S3), and
 * streams them back.  This header is the stable API: what it declares
 * keeps its meaning within a major version.  Measuring and tracing hooks
 * (dlk bench-stream's) are in dlk_bench.h and may change.
 *
 * Conventions, for every function below unless it says otherwise:
 *  - @return: a dlk_status; DLK_OK (0) is success, any other value names
 *    the kind of failure (see dlk_status).
 *  - The last argument `err` may be NULL.  When it is not and the call
 *    fails, err->code is the returned status and err->msg a one-line
 *    message naming the object, key or field at fault.  On success err is
 *    left as it was: test the returned status, not err->code.  No message
 *    ever contains a credential.
 *  - Ownership: handles are opaque; every *_open / *_create has a
 *    *_close / *_free that accepts NULL.  Strings and arrays a function
 *    returns through a const pointer belong to the handle they came from
 *    and live as long as it (or as the comment says); memory the caller
 *    must free says so.  Input pointers are not kept after the call
 *    unless the comment says so.
 *  - Thread-safety: functions without a handle may be called from any
 *    thread at any time.  A handle may be used by one thread at a time;
 *    distinct handles, even of the same dataset, may be used
 *    concurrently.
 *  - The library never prints, never exits and reads no environment
 *    variable and no configuration file of its own accord: storage
 *    settings (endpoints, credentials, limits) come in a
 *    dlk_store_options, and the one function that reads the environment
 *    says so (dlk_launch_env).  The dlk tool and the Python package fill
 *    a dlk_store_options from AWS_*, DLK_S3_* and the AWS shared files
 *    (listed in dlk(1)); a library caller that wants the same does so
 *    itself.
 */
#ifndef DLK_H
#define DLK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DLK_API marks the functions libdlk.so exports; the library is built
 * with every other symbol hidden. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define DLK_API __attribute__((visibility("default")))
#else
#define DLK_API
#endif

#define DLK_VERSION_MAJOR 1
#define DLK_VERSION_MINOR 3
#define DLK_VERSION_PATCH 0
#define DLK_VERSION_NUMBER \
    (DLK_VERSION_MAJOR * 10000 + DLK_VERSION_MINOR * 100 + DLK_VERSION_PATCH)
#define DLK_VERSION_STRING "1.3.0"

/* The on-disk format version this library writes (formats/dlk-v1.md). */
#define DLK_FORMAT_VERSION 1

/* Run-time version, to check that header and library match.
 * @return DLK_VERSION_NUMBER / DLK_VERSION_STRING of the library (a
 *         static string). */
DLK_API int dlk_version_number(void);
DLK_API const char *dlk_version_string(void);

/* The CPUs this process may run on: its affinity mask, as taskset, a
 * cgroup cpuset or Slurm set it (not every online core).  The default
 * for ingest's --jobs and the loader's io_threads.
 * @return the count, at least 1. */
DLK_API int dlk_cpu_count(void);

/* Status codes.  Values never change meaning; new codes are appended. */
typedef enum dlk_status {
    DLK_OK = 0,
    DLK_EINVAL = 1,       /* bad argument or option */
    DLK_ENOTFOUND = 2,    /* dataset, tensor, object or sample missing */
    DLK_EEXIST = 3,       /* refuses to overwrite something that exists */
    DLK_ECORRUPT = 4,     /* stored data is malformed or fails a checksum */
    DLK_EIO = 5,          /* local I/O failed (errno in the message) */
    DLK_ENOMEM = 6,       /* out of memory */
    DLK_EUNSUPPORTED = 7, /* unknown format version, dtype, codec, scheme */
    DLK_ECONFLICT = 8,    /* a concurrent writer changed what we replace */
    DLK_EAUTH = 9,        /* access denied or bad credentials */
    DLK_ENET = 10,        /* network or server error after all retries */
    DLK_ELIMIT = 11,      /* a size or count over a configured limit */
    DLK_EDECODE = 12,     /* a source object cannot be decoded */
    DLK_EGPU = 13,        /* a CUDA call failed or no device */
    DLK_EINTERNAL = 14,   /* a bug in dlk */
    DLK_ECANCELED = 15    /* the caller's cancel callback asked to stop */
} dlk_status;

/* @return a short, constant, lower-case description of a status code
 *         ("unknown status" for a value not listed above); never NULL. */
DLK_API const char *dlk_strerror(dlk_status code);

#define DLK_ERRMSG_MAX 512
typedef struct dlk_error {
    dlk_status code;
    char msg[DLK_ERRMSG_MAX];
} dlk_error;

/* Versioned structs. dlk_store_options, dlk_loader_opts, dlk_loader_stats,
 * dlk_ingest_opts, dlk_ingest_result, dlk_gc_opts, dlk_gc_result,
 * dlk_compact_opts, dlk_compact_result, dlk_verify_opts, dlk_verify_result,
 * dlk_select_opts, dlk_select_result and dlk_index_opts begin with
 * `size_t size`, which the caller sets to sizeof the struct as its header
 * declares it (the _INIT macro or the _init function do, with every other
 * field 0, its default).  Fields are only ever appended, so a program
 * built against an older header passes a smaller size and the library
 * reads (options) or writes (stats, results) only that many bytes: the
 * fields it lacks take their defaults, and nothing past its struct is
 * touched.  Bytes past the library's own size (a newer header's fields)
 * are ignored.  A size of 0 (a struct zeroed without the initializer) is
 * refused with DLK_EINVAL naming the struct, since which layout it was
 * meant for cannot be known; stats with size 0 are left as they are. The _init functions are inline so that the size they set is
 * always the caller's header's, never the library's (the _INIT macros are
 * designated initializers: C, or C++20). docs/abi.md: what changes the
 * soname. */
static inline void dlk_init_sized_(void *p, size_t n)
{
    unsigned char *b = (unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        b[i] = 0;
    *(size_t *)p = n; /* the first member of every versioned struct */
}

/* ------------------------------------------------------------------ */
/* Element types, kinds and codecs                                     */

typedef enum dlk_dtype {
    DLK_U8 = 1, DLK_I8, DLK_U16, DLK_I16, DLK_U32, DLK_I32, DLK_U64,
    DLK_I64, DLK_F16, DLK_BF16, DLK_F32, DLK_F64, DLK_BOOL
} dlk_dtype;

typedef enum dlk_kind {
    DLK_KIND_GENERIC = 0, DLK_KIND_IMAGE, DLK_KIND_VIDEO,
    DLK_KIND_CLASS_LABEL, DLK_KIND_BBOX, DLK_KIND_TEXT
} dlk_kind;

typedef enum dlk_codec { DLK_CODEC_NONE = 0, DLK_CODEC_ZSTD = 1 } dlk_codec;

/* Names as they appear in the format and on the command line ("u8",
 * "class_label", "zstd").
 * @return *_name: a static string, or NULL for an unknown value;
 *         *_parse: 0 with *out set, or -1 for an unknown name (*out
 *         unchanged); dlk_dtype_size: bytes per element, 0 if unknown. */
DLK_API const char *dlk_dtype_name(dlk_dtype t);
DLK_API int dlk_dtype_parse(const char *name, dlk_dtype *out);
DLK_API size_t dlk_dtype_size(dlk_dtype t); /* bytes per element, 0 if unknown */
DLK_API const char *dlk_kind_name(dlk_kind k);
DLK_API int dlk_kind_parse(const char *name, dlk_kind *out);
DLK_API const char *dlk_codec_name(dlk_codec c);
DLK_API int dlk_codec_parse(const char *name, dlk_codec *out);

#define DLK_MAX_NDIM 8
#define DLK_NAME_MAX 64          /* tensor names: [A-Za-z0-9_.-], 1..64 */
#define DLK_DIM_VARIABLE (-1)    /* a dimension that varies by sample */
#define DLK_DEFAULT_CHUNK_BYTES (16u << 20)
#define DLK_DEFAULT_PART_BYTES (1u << 20) /* codec none: parts of 1 MiB */

/* A tensor's schema.  shape[i] == DLK_DIM_VARIABLE marks a dimension that
 * varies from sample to sample; ndim 0 is a scalar per sample. */
typedef struct dlk_tensor_spec {
    char name[DLK_NAME_MAX + 1];
    dlk_dtype dtype;
    dlk_kind kind;
    int ndim;
    int64_t shape[DLK_MAX_NDIM];
    dlk_codec codec;
    int level;                /* zstd level; 0 means the default (3) */
    uint64_t chunk_bytes;     /* target raw chunk size; 0 = default */
    /* Nominal size of the checksummed parts each chunk is cut into, so
     * that a reader can fetch and verify runs of samples instead of
     * whole chunks (4096..2^30).  0 = the default: 1 MiB
     * (DLK_DEFAULT_PART_BYTES) for codec none; for zstd 0 means none
     * (a compressed chunk has no parts). */
    uint32_t part_bytes;
    const char *const *class_names; /* class_label only; may be NULL */
    size_t n_class_names;
} dlk_tensor_spec;

/* Parse "NAME:DTYPE[:SHAPE[:CODEC]]" as on `dlk create --tensor`, e.g.
 * "images:u8:224x224x3:zstd", "labels:i32", "clip:u8:?x?x?x3",
 * "img:u8:?x?x3:zstd5".  SHAPE dims are separated by 'x'; '?' is a
 * variable dimension; "scalar" (or an omitted shape) is ndim 0.  The kind
 * is guessed from name and shape (image for HxWxC u8, class_label for
 * "label(s)"/"class" integer scalars) unless KIND= is set later.
 * @return DLK_OK with *out filled (class_names NULL); DLK_EINVAL naming
 *         the part of `text` at fault. */
DLK_API dlk_status dlk_tensor_spec_parse(const char *text, dlk_tensor_spec *out,
                                         dlk_error *err);

/* ------------------------------------------------------------------ */
/* Stores: where datasets and sources live, and how to reach them      */

/* How an s3:// bucket is named in its requests. */
typedef enum dlk_s3_addressing {
    DLK_S3_ADDRESSING_AUTO = 0,    /* path-style for a custom endpoint,
                                      virtual-hosted for AWS (path-style
                                      there too for a bucket with a '.') */
    DLK_S3_ADDRESSING_PATH = 1,    /* https://host/BUCKET/KEY */
    DLK_S3_ADDRESSING_VIRTUAL = 2  /* https://BUCKET.host/KEY */
} dlk_s3_addressing;

/* Settings of the stores a call opens (its dataset, an ingest's source
 * and labels).  Every field's zero (or NULL) is its default, so
 * DLK_STORE_OPTIONS_INIT, or a NULL pointer wherever one is taken,
 * means: no credentials (anonymous requests), AWS's own endpoint in
 * us-east-1, and the limits below.  The library never completes it from
 * the environment or from ~/.aws: the caller resolves those (the dlk tool
 * and the Python package do, as dlk(1) ENVIRONMENT describes).
 *
 * Ownership: the struct and its strings are read during the call that
 * takes them (for the whole call, when it runs long, as dlk_ingest
 * does); a store copies what it keeps when it opens, so the caller may
 * free or change them once the call returns.  The library wipes its
 * copies of the secrets when it frees them, and never puts a secret in a
 * message. */
typedef struct dlk_store_options {
    size_t size;      /* sizeof(dlk_store_options): DLK_STORE_OPTIONS_INIT or
                         dlk_store_options_init ("Versioned structs") */
    /* ---- s3:// ---- */
    const char *s3_endpoint;       /* "scheme://host[:port][/path]" of an
                                      S3-compatible server ("host:port"
                                      alone means https); NULL: AWS */
    const char *s3_region;         /* signing region and AWS host; NULL:
                                      "us-east-1" */
    const char *s3_access_key_id;  /* NULL (or without the secret):
                                      anonymous requests */
    const char *s3_secret_access_key; /* secret */
    const char *s3_session_token;  /* secret; temporary credentials only */
    const char *s3_ca_bundle;      /* a PEM file of CAs to trust; NULL:
                                      the system's */
    int s3_no_sign;                /* 1: anonymous requests even when keys
                                      are given (public buckets) */
    dlk_s3_addressing s3_addressing;
    int s3_max_inflight;           /* requests in flight per engine, 1 to
                                      4096; 0: 64, raised by a bulk reader
                                      that asks for more (non-zero: a cap
                                      that is shared among the engines) */
    int s3_max_attempts;           /* tries of a request that fails with a
                                      retryable error, 1 to 100; 0: 8 */
    int s3_io_threads;             /* I/O threads of bulk GETs (an
                                      ingest's source), 1 to 16; 0: one
                                      for every 8 cores, 1 to 4 */
    int s3_read_threads;           /* I/O threads of sized reads (a
                                      dataset's chunks), 1 to 16; 0: half
                                      the cores */
    uint64_t s3_part_size;         /* multipart upload parts, 5 MiB to
                                      5 GiB; 0: 16 MiB */
    uint64_t s3_multipart_threshold; /* objects of this size or more are
                                      uploaded in parts, 5 MiB to 5 GiB;
                                      0: 64 MiB */
    uint64_t s3_read_part_size;    /* the ranges one sized read is split
                                      into, 16 KiB to 1 GiB; 0: 8 MiB */
    int s3_no_hedge;               /* 1: never send a second GET for a
                                      slow one (hedging is on by default) */
    int s3_hedge_min_ms;           /* a GET is hedged after this many ms
                                      at least, 1 to 3600000; 0: 200 */
    /* ---- gs:// (Google Cloud Storage, its JSON API; the engine's
     * s3_max_inflight, s3_max_attempts, s3_no_hedge and s3_hedge_min_ms
     * apply to it too) ---- */
    const char *gcs_endpoint;      /* an emulator's or proxy's URL
                                      (STORAGE_EMULATOR_HOST; "host:port"
                                      alone means http); NULL: Google */
    const char *gcs_token;         /* secret: an OAuth2 access token, sent
                                      as it is (never renewed) */
    const char *gcs_key_file;      /* a service account's JSON key file:
                                      its signed JWT is exchanged for
                                      tokens (when gcs_token is NULL);
                                      neither: no token is sent */
    uint64_t gcs_resumable_threshold; /* objects of this size or more that
                                      replace nothing go up in a resumable
                                      upload; 0: 32 MiB */
    uint64_t gcs_piece_size;       /* a resumable upload's pieces, a
                                      multiple of 256 KiB up to 1 GiB;
                                      0: 8 MiB */
    /* ---- bounds of every s3:// and gs:// request and listing ---- */
    int s3_stall_rate;             /* bytes/s, 1 to 1 GiB: an attempt
                                      that moves fewer for
                                      s3_stall_seconds is stalled, and
                                      retried or failed; 0: 4096 */
    int s3_stall_seconds;          /* 1 to 3600; 0: 30 */
    int s3_request_timeout;        /* seconds one attempt may take at
                                      most, plus one for each 256 KiB of
                                      the body it expects (the range or
                                      size asked for, the body sent), 1 to
                                      86400; 0: 120 */
    uint64_t s3_list_max_keys;     /* a listing of more keys than this
                                      fails (DLK_ELIMIT); 0: 100 million */
    uint64_t s3_list_max_pages;    /* a listing of more pages than this
                                      fails (DLK_ELIMIT); 0: 1 million */
    /* Asked about every 100 ms on the store's I/O threads while requests
     * are queued or in flight (so it must be safe to call from any
     * thread): non-zero ends each of them at once, and each one sent
     * while it stays non-zero, with DLK_ECANCELED.  NULL: never asked.
     * The store keeps the pointer and cancel_ud while it is open. */
    int (*cancel)(void *ud);
    void *cancel_ud;
} dlk_store_options;

#define DLK_STORE_OPTIONS_INIT { .size = sizeof(dlk_store_options) }
static inline void dlk_store_options_init(dlk_store_options *o)
{
    dlk_init_sized_(o, sizeof *o);
}

/* ------------------------------------------------------------------ */
/* Datasets                                                            */

typedef struct dlk_dataset dlk_dataset;

/* Create a new, empty dataset at `url` (a local path, file://PATH,
 * s3://bucket/prefix or gs://bucket/prefix) with the given tensors, its
 * store opened with default settings (dlk_dataset_create_with takes
 * them).  `specs` is copied.
 * @return DLK_OK with *out an open handle on the new head (the caller
 *         closes it with dlk_dataset_close); DLK_EEXIST if a dataset (or
 *         any object) is already there; DLK_EINVAL for a bad spec; a
 *         store's status (DLK_EIO, DLK_EAUTH, DLK_ENET) when it cannot be
 *         written. */
DLK_API dlk_status dlk_dataset_create(const char *url, const dlk_tensor_spec *specs,
                                      size_t n_specs, dlk_dataset **out,
                                      dlk_error *err);
/* dlk_dataset_create with the settings of the dataset's store (NULL:
 * defaults, as for dlk_dataset_create).
 * @return as dlk_dataset_create; DLK_EINVAL naming the option for a
 *         setting out of its range. */
DLK_API dlk_status dlk_dataset_create_with(const char *url,
                                           const dlk_tensor_spec *specs,
                                           size_t n_specs,
                                           const dlk_store_options *store,
                                           dlk_dataset **out, dlk_error *err);

/* Open an existing dataset, its store opened with default settings
 * (dlk_dataset_open_with takes them).  `at` selects the state to read:
 * NULL or "" for the working head (readable and appendable), or a
 * reference as dlk_resolve takes it ("main", "main~2", an id or a unique
 * prefix), which opens that commit read-only.  Opening a commit costs a constant number
 * of small reads, however long the history, and the reads of the segments
 * of its chunk lists (formats/dlk-v1.md 4.3.4), which a state reads whole.
 * @return DLK_OK with *out a handle the caller frees (dlk_dataset_close
 *         or dlk_dataset_free); DLK_ENOTFOUND when there is no dataset
 *         or no such commit; DLK_ECORRUPT, DLK_EUNSUPPORTED for a dataset
 *         this library cannot read; a store's status. */
DLK_API dlk_status dlk_dataset_open(const char *url, const char *at,
                                    dlk_dataset **out, dlk_error *err);
/* dlk_dataset_open with the settings of the dataset's store (NULL:
 * defaults, as for dlk_dataset_open).  Everything the handle does later
 * (reads, writes, commits, a loader's reads) uses them.
 * @return as dlk_dataset_open; DLK_EINVAL naming the option for a
 *         setting out of its range. */
DLK_API dlk_status dlk_dataset_open_with(const char *url, const char *at,
                                         const dlk_store_options *store,
                                         dlk_dataset **out, dlk_error *err);

/* Write pending chunks and the head manifest, then free ds.
 * @return the status of the final flush (as dlk_dataset_flush); ds is
 *         freed in every case. */
DLK_API dlk_status dlk_dataset_close(dlk_dataset *ds, dlk_error *err);

/* Free ds without flushing: appended samples not yet flushed are dropped
 * (chunks already written stay for dlk_gc).  NULL is allowed. */
DLK_API void dlk_dataset_free(dlk_dataset *ds);

/* Identity and head.
 * @return the URL as opened and the dataset's id: strings that live as
 *         long as the handle. */
DLK_API const char *dlk_dataset_url(const dlk_dataset *ds);
DLK_API const char *dlk_dataset_id(const dlk_dataset *ds);
/* @return the id of the commit the handle was opened at, or of main for
 *         a head; NULL when nothing was committed yet.  Lives as long as
 *         the handle. */
DLK_API const char *dlk_dataset_head(const dlk_dataset *ds);

/* @return the number of tensors, in schema order. */
DLK_API size_t dlk_dataset_ntensors(const dlk_dataset *ds);
/* @return the index of a tensor by name, or -1 when there is none. */
DLK_API int dlk_dataset_find(const dlk_dataset *ds, const char *name);

/* What `dlk ls` shows of one tensor. Pointers live as long as ds. */
typedef struct dlk_tensor_info {
    const char *name;
    dlk_dtype dtype;
    dlk_kind kind;
    dlk_codec codec;
    int level;
    int ndim;
    const int64_t *shape;     /* schema shape, DLK_DIM_VARIABLE allowed */
    const int64_t *shape_min; /* over stored samples; NULL when empty */
    const int64_t *shape_max;
    uint64_t samples;
    uint64_t chunks;
    uint64_t stored_bytes;    /* bytes of chunk objects */
    uint64_t raw_bytes;       /* bytes of samples, uncompressed */
    uint64_t chunk_bytes;     /* target chunk size */
    uint32_t part_bytes;      /* every chunk's part size; 0: not every
                                 chunk has parts */
    size_t n_class_names;
    const char *const *class_names;
} dlk_tensor_info;

/* @return DLK_OK with *out filled (its pointers live as long as ds);
 *         DLK_ENOTFOUND when tensor is out of range. */
DLK_API dlk_status dlk_tensor_info_get(const dlk_dataset *ds, size_t tensor,
                                       dlk_tensor_info *out, dlk_error *err);

/* Append one sample to a tensor of a head opened for writing.  `data`
 * holds the sample's elements in C order, little-endian, `nbytes` =
 * product(shape) * dtype size; shape must match the schema's fixed
 * dimensions.  `data` is copied.  Chunks are written as they fill; the
 * head manifest only by dlk_dataset_flush / _close.
 * @return DLK_OK; DLK_EINVAL for a shape or size that does not match the
 *         schema, or a handle opened at a commit (nothing appended);
 *         DLK_ENOTFOUND for a tensor out of range; DLK_ELIMIT for a
 *         sample over 1 GiB; a store's status when a full chunk cannot be
 *         written. */
DLK_API dlk_status dlk_append(dlk_dataset *ds, size_t tensor, const void *data,
                              size_t nbytes, const int64_t *shape, int ndim,
                              dlk_error *err);

/* Seal partly filled chunks, write them, and publish the head manifest
 * atomically.
 * @return DLK_OK; DLK_ECONFLICT when a concurrent writer changed the head
 *         meanwhile (the publish is a conditional write: never a silent
 *         loss; the appended chunks stay for a retry or dlk_gc); a
 *         store's status. */
DLK_API dlk_status dlk_dataset_flush(dlk_dataset *ds, dlk_error *err);

/* One sample.  data is owned by the struct: free it with dlk_sample_free. */
typedef struct dlk_sample {
    dlk_dtype dtype;
    int ndim;
    int64_t shape[DLK_MAX_NDIM];
    void *data;
    size_t nbytes;
} dlk_sample;

/* Read sample `index` of a tensor (random access; the chunk holding it is
 * cached in the handle, so reading in order fetches each chunk once).
 * @return DLK_OK with *out filled (the caller frees it with
 *         dlk_sample_free); DLK_ENOTFOUND for a tensor out of range or an
 *         index past the samples;
 *         DLK_ECORRUPT for a chunk that fails its checks; a store's
 *         status. */
DLK_API dlk_status dlk_read_sample(dlk_dataset *ds, size_t tensor, uint64_t index,
                                   dlk_sample *out, dlk_error *err);
/* Free a sample's data and clear it; NULL and a cleared sample are
 * allowed. */
DLK_API void dlk_sample_free(dlk_sample *s);

/* ------------------------------------------------------------------ */
/* Whole chunks: what a loader reads                                   */

typedef struct dlk_chunk_ref {
    const char *key;          /* object key below the dataset root */
    uint64_t first_sample;    /* index of the chunk's first sample */
    uint32_t samples;
    uint64_t stored_bytes;
    uint64_t raw_bytes;
} dlk_chunk_ref;

/* @return dlk_tensor_nchunks: the chunks of a tensor (0 when out of
 *         range); dlk_tensor_chunk: 0 with *out filled (its key lives as
 *         long as ds), -1 if tensor or chunk is out of range. */
DLK_API size_t dlk_tensor_nchunks(const dlk_dataset *ds, size_t tensor);
DLK_API int dlk_tensor_chunk(const dlk_dataset *ds, size_t tensor, size_t chunk,
                             dlk_chunk_ref *out);

/* A decoded chunk: its payload (all samples back to back) and, for
 * variable shapes, each sample's shape and offset. */
typedef struct dlk_chunk dlk_chunk;

enum {
    DLK_READ_VERIFY = 1 /* check the stored-payload checksum on read */
};

/* Read and decode one chunk.  `buf`, when not NULL, is caller memory of
 * `cap` bytes (for instance pinned host memory) that receives the raw
 * payload when it fits; otherwise the chunk owns its memory.
 * @return DLK_OK with *out a chunk the caller frees with dlk_chunk_free
 *         (buf must outlive it); DLK_EINVAL when tensor or chunk is out
 *         of range; DLK_ECORRUPT for a chunk that fails its checks; a
 *         store's status. */
DLK_API dlk_status dlk_chunk_read(dlk_dataset *ds, size_t tensor, size_t chunk,
                                  unsigned flags, void *buf, size_t cap,
                                  dlk_chunk **out, dlk_error *err);
/* @return the payload (all samples back to back; it lives as long as c)
 *         and its size in *nbytes. */
DLK_API const void *dlk_chunk_payload(const dlk_chunk *c, size_t *nbytes);
DLK_API uint32_t dlk_chunk_samples(const dlk_chunk *c);
/* @return a pointer into the payload at sample i of the chunk, with its
 *         size in *nbytes and its shape in `shape` (DLK_MAX_NDIM
 *         entries); NULL when i is out of range. */
DLK_API const void *dlk_chunk_sample(const dlk_chunk *c, uint32_t i, size_t *nbytes,
                                     int64_t *shape);
/* Free a chunk (not the caller's buf it was read into); NULL is allowed. */
DLK_API void dlk_chunk_free(dlk_chunk *c);

/* ------------------------------------------------------------------ */
/* Versions: commits, the log, references                              */

#define DLK_ID_MAX 65 /* a commit id: 32 hex digits, NUL; room to grow */

enum {
    /* Commit on a store that cannot do conditional writes, trusting that
     * no other writer runs at the same time. */
    DLK_COMMIT_UNSAFE_SINGLE_WRITER = 1
};

/* Turn the head (everything appended and flushed) into an immutable
 * commit and move refs/heads/main to it.  The move is conditional: when a
 * concurrent commit moved main first, the head is committed again on top
 * of it (both land, one after the other); after a few such rounds the
 * call fails with DLK_ECONFLICT and nothing is lost.  id_out receives the
 * new commit's id.  When the head equals main's commit there is nothing
 * to commit: *committed is set to 0 and id_out holds main's id.
 * Stores that ignore conditional writes are detected and refused
 * (DLK_EUNSUPPORTED) unless DLK_COMMIT_UNSAFE_SINGLE_WRITER is given.
 * @return DLK_OK (*committed 1, or 0 when there was nothing to commit);
 *         DLK_ECONFLICT after repeated concurrent commits (nothing lost:
 *         run it again); DLK_EUNSUPPORTED as above; a store's status. */
DLK_API dlk_status dlk_commit(dlk_dataset *ds, const char *message, unsigned flags,
                              char id_out[DLK_ID_MAX], int *committed,
                              dlk_error *err);

/* Whether the head holds changes that main's commit does not.  Costs one
 * read of that commit.
 * @return 1 when it does, 0 when not, or minus a dlk_status on error. */
DLK_API int dlk_dataset_dirty(dlk_dataset *ds, dlk_error *err);

typedef struct dlk_log_entry {
    const char *id;
    const char *parent;       /* NULL for the first commit */
    const char *time;         /* UTC, "2026-11-26T01:02:03Z" */
    const char *message;
    uint64_t bytes_added;     /* stored bytes of chunks new in it */
    uint64_t chunks_added;
    size_t ntensors;
    const char *const *tensor_names;
    const uint64_t *samples;  /* per tensor, in the commit */
} dlk_log_entry;

/* Called per commit, newest first; non-zero stops the walk. The entry's
 * strings live until the callback returns. */
typedef int (*dlk_log_fn)(void *ud, const dlk_log_entry *e);

/* Walk the history from `at` (NULL: main) back to the first commit, or
 * at most `max` commits (0: all), calling fn on the calling thread.  One
 * small read per commit.
 * @return DLK_OK (also when fn stopped the walk, or nothing was
 *         committed); DLK_ENOTFOUND for an unknown `at`; DLK_ECORRUPT; a
 *         store's status. */
DLK_API dlk_status dlk_log(dlk_dataset *ds, const char *at, size_t max,
                           dlk_log_fn fn, void *ud, dlk_error *err);
/* dlk_log of the dataset at url without opening its head: dlk.json and
 * the commits are all it reads (not the head, nor the segments of any
 * chunk list), so that a log costs the commits it shows.  store: as for
 * dlk_dataset_open_with (NULL: defaults).
 * @return as dlk_log; DLK_ENOTFOUND when there is no dataset. */
DLK_API dlk_status dlk_log_url(const char *url, const dlk_store_options *store,
                               const char *at, size_t max, dlk_log_fn fn,
                               void *ud, dlk_error *err);

/* Resolve a reference to a commit id: a full id, a unique prefix of at
 * least 4 hex digits, "main", or "main~N" (N commits before main).
 * @return DLK_OK with the id in id_out; DLK_ENOTFOUND (no such commit,
 *         or fewer than N before main); DLK_EINVAL for an ambiguous
 *         prefix or a malformed reference. */
DLK_API dlk_status dlk_resolve(dlk_dataset *ds, const char *ref,
                               char id_out[DLK_ID_MAX], dlk_error *err);

/* Garbage collection: remove chunks that neither the head nor any commit
 * reachable from main references (left by a crash or an abandoned run),
 * once they are older than the grace period, so that a writer still
 * running (whose chunks are not referenced yet) is never disturbed. */
typedef struct dlk_gc_opts {
    size_t size;      /* sizeof(dlk_gc_opts): DLK_GC_OPTS_INIT or
                         dlk_gc_opts_init ("Versioned structs") */
    int64_t grace_seconds; /* keep unreferenced chunks younger than this */
    int dry_run;           /* report, remove nothing */
    void (*on_remove)(void *ud, const char *object, uint64_t size);
    void *ud;
} dlk_gc_opts;

#define DLK_GC_OPTS_INIT { .size = sizeof(dlk_gc_opts) }
static inline void dlk_gc_opts_init(dlk_gc_opts *o)
{
    dlk_init_sized_(o, sizeof *o);
}

typedef struct dlk_gc_result {
    size_t size;      /* sizeof(dlk_gc_result): DLK_GC_RESULT_INIT or
                         dlk_gc_result_init ("Versioned structs") */
    uint64_t removed, removed_bytes;  /* (or would be, with dry_run) */
    uint64_t young;                   /* unreferenced, within grace */
    uint64_t referenced;              /* chunks kept */
    uint64_t temp_files, temp_bytes;  /* left by writes interrupted before
                                         they completed, older than the
                                         grace (local datasets) */
} dlk_gc_result;

#define DLK_GC_RESULT_INIT { .size = sizeof(dlk_gc_result) }
static inline void dlk_gc_result_init(dlk_gc_result *o)
{
    dlk_init_sized_(o, sizeof *o);
}

/* Run the collection; on_remove is called on the calling thread.
 * @return DLK_OK with *res filled; a store's status (objects removed
 *         before it stay removed: each was unreferenced). */
DLK_API dlk_status dlk_gc(dlk_dataset *ds, const dlk_gc_opts *opts,
                          dlk_gc_result *res, dlk_error *err);

/* Compaction: rewrite each tensor's runs of two or more consecutive small
 * chunks (left by many small appends that predate filling, by ingest
 * shards, or by a smaller chunk size) into chunks of the target size, and
 * publish the head (conditionally, as dlk_dataset_flush).  Samples, their
 * order and values are unchanged; the old chunks stay for the commits
 * that name them and for gc's rules.  Appends already fill a tensor's
 * last small chunk (its samples and the new ones are sealed together
 * into a chunk that replaces it), so this is rarely needed.  In a dataset
 * with key tensors, the key index's runs (formats/dlk-v1.md 6.9) are
 * folded into one run of every row. */
typedef struct dlk_compact_opts {
    size_t size;      /* sizeof(dlk_compact_opts): DLK_COMPACT_OPTS_INIT or
                         dlk_compact_opts_init ("Versioned structs") */
    uint64_t target_bytes;   /* raw size of the new chunks; 0: each
                                tensor's chunk_bytes; at most 1 GiB */
} dlk_compact_opts;

#define DLK_COMPACT_OPTS_INIT { .size = sizeof(dlk_compact_opts) }
static inline void dlk_compact_opts_init(dlk_compact_opts *o)
{
    dlk_init_sized_(o, sizeof *o);
}

typedef struct dlk_compact_result {
    size_t size;      /* sizeof(dlk_compact_result):
                         DLK_COMPACT_RESULT_INIT or dlk_compact_result_init
                         ("Versioned structs") */
    uint64_t chunks_before, chunks_after;  /* entries over every tensor */
    uint64_t chunks_read, bytes_read;      /* small chunks read */
    uint64_t chunks_written;               /* new chunks replacing them (0
                                              when they packed as they were) */
    /* the key index's objects (its runs) before and after: a dataset with
     * key tensors has its index folded into one run of every row */
    uint64_t key_runs_before, key_runs_after;
} dlk_compact_result;

#define DLK_COMPACT_RESULT_INIT { .size = sizeof(dlk_compact_result) }
static inline void dlk_compact_result_init(dlk_compact_result *o)
{
    dlk_init_sized_(o, sizeof *o);
}

/* @return DLK_OK with *res filled; DLK_ELIMIT for a target over 1 GiB;
 *         DLK_EINVAL for a handle opened at a commit; DLK_ECONFLICT when a concurrent
 *         writer changed the head (nothing published); a store's status. */
DLK_API dlk_status dlk_compact(dlk_dataset *ds, const dlk_compact_opts *opts,
                               dlk_compact_result *res, dlk_error *err);

/* ------------------------------------------------------------------ */
/* Streaming loader: shuffled, sharded, prefetched batches              */

typedef struct dlk_loader dlk_loader;

#define DLK_LOADER_MAX_SEGMENTS 8

/* Where an epoch stands, to save with a checkpoint and restore.  An epoch
 * resumed with another world size or batch size continues as a new
 * segment: the samples not yet consumed are dealt again to the new ranks,
 * each exactly once.  Plain data: store it as it is (or as JSON with
 * dlk_loader_state_json). */
typedef struct dlk_loader_state {
    uint64_t seed;
    uint64_t epoch;
    uint32_t nseg;               /* segments of this epoch so far, >= 1 */
    struct {
        uint32_t world, batch;   /* layout of the segment */
        uint64_t steps;          /* batches each rank consumed in it */
    } seg[DLK_LOADER_MAX_SEGMENTS];
    uint64_t samples;            /* global samples consumed (informative) */
} dlk_loader_state;

struct dlk_bad_read;

typedef struct dlk_loader_opts {
    size_t size;                 /* sizeof(dlk_loader_opts), set by
                                    DLK_LOADER_OPTS_INIT or
                                    dlk_loader_opts_init ("Versioned
                                    structs" above) */
    const char *const *tensors;  /* names to load; NULL = all */
    size_t ntensors;
    uint32_t batch_size;         /* default 256 */
    int shuffle;                 /* 0: dataset order */
    uint64_t seed;
    uint32_t window_chunks;      /* shuffle window, in chunks (default 8;
                                    the first ones ramp up to it) */
    uint32_t rank, world_size;   /* default 0 of 1 */
    uint32_t local_world_size;   /* ranks on this host, which share its
                                    cores and memory (default 1):
                                    io_threads's default and the memory
                                    caps below are a rank's share */
    int drop_last;               /* else pad the last batch (flagged) */
    uint32_t prefetch_chunks;    /* chunks read ahead (default 2x window) */
    uint32_t io_threads;         /* default: dlk_cpu_count() / local ranks,
                                    at most 32; a quarter fewer on a GPU
                                    from local files (dlk-bench-stream(1)) */
    const char *device;          /* "cpu" (default), "cuda:N" or "auto" */
    uint64_t memory_limit;       /* bytes for chunk buffers (with the
                                  * checksums check mode keeps: at most a
                                  * sixteenth); 0: derived;
                                  * at most half of the machine's memory
                                  * or of the cgroup's limit if lower,
                                  * divided by local_world_size */
    int check;                   /* fold every batch into a checksum that
                                    is compared with the CPU's */
    int no_verify;               /* skip each chunk's stored-payload
                                    checksum on read (a CPU pass; on a
                                    GPU, parts are checked there) */
    uint64_t epochs;             /* epochs the consumer reads; 0: unknown.
                                    The next epoch's first chunks are read
                                    while one ends, except after the last */
    uint64_t pin_cache;          /* on a GPU, bytes of a local dataset's
                                    page cache that may stay mapped and
                                    pinned for DMA across epochs (no copy,
                                    but counted in RSS); 0: none, chunks
                                    are read into the pinned buffers;
                                    DLK_PIN_CACHE_AUTO: up to this
                                    rank's share of half the usable
                                    memory, less the budget */
    /* Asked about every 100 ms while dlk_loader_next waits for data, on
     * the calling thread: non-zero makes that call return DLK_ECANCELED
     * (the loader stays usable; the next call waits again).  An
     * interpreter checks for Ctrl-C here.  NULL: never asked. */
    int (*cancel)(void *ud);
    void *cancel_ud;
    /* Only these rows (ascending, each below the row count; copied at
     * open), e.g. a view's from dlk_view_rows; or the view named `view`,
     * read at open.  NULL: every row.  The rows are dealt in the same
     * blocks as every row, so in the same order.  A chunk or span
     * holding none of them is not read; of a span holding some, only
     * the parts holding them (adjacent ones in one read; the whole span
     * once three quarters of its parts hold rows); a chunk without
     * parts, or any with whole_chunks, whole. */
    const uint64_t *rows;
    uint64_t nrows;
    const char *view;
    uint32_t span_parts;         /* parts a span holds (default 4) */
    int whole_chunks;            /* read every chunk whole, even where its
                                    parts carry checksums (the default
                                    reads such chunks in spans of parts,
                                    so a window holds parts of many
                                    chunks: formats/dlk-v1.md, "Parts") */
    int no_map;                  /* never use a local dataset's chunk files
                                    in place (mapped): read them into
                                    buffers, as from a remote store */
    const char *cuda_trace;      /* on a GPU, a file to write the device
                                    timing of every copy, gather and step
                                    to (dlk(1), DLK_CUDA_TRACE); NULL: none */
    const struct dlk_loader_state *start; /* where to begin (a saved state,
                                    of any world or batch size, as
                                    dlk_loader_restore takes); NULL:
                                    epoch 0 */
    /* A read that fails after the store's retries (a chunk, or a span of
     * its parts, that cannot be read whole and verified: DLK_ECORRUPT,
     * DLK_ENOTFOUND, DLK_EIO or DLK_ENET): DLK_ON_BAD_FAIL (0, the
     * default) makes dlk_loader_next fail, as any error; DLK_ON_BAD_SKIP
     * replaces each batch position whose row that read holds with
     * another row of the same batch (the nearest readable position after
     * it, wrapping; a batch with none takes the next readable position
     * of the epoch), a row like any other (not flagged in pad): every
     * rank keeps its batches and their size.  Of a span read whole, only
     * a part whose checksum does not match is lost (its other parts are
     * used; a part past the span's 64th fails the span).  Each failed
     * read (or part) is passed to on_bad_read and counted in the stats.
     * On a GPU, with skip, the
     * loading threads check the parts rather than the device (whose
     * record of a mismatch covers every later check). */
    int on_bad;
    /* With skip: the most batch positions replaced in one epoch on this
     * rank; one more fails as DLK_ON_BAD_FAIL would.  0: 0.1% of the
     * rank's positions in the epoch, and at least the samples of the
     * largest chunk of the first tensor loaded (one bad chunk is always
     * survived). */
    uint64_t max_bad;
    /* Called on the consumer's thread, within dlk_loader_next, once for
     * each failed read whose rows a batch replaces (a read fails again in
     * every epoch that reads it); `b` and its strings last for the call.
     * NULL: the stats count them only. */
    void (*on_bad_read)(void *ud, const struct dlk_bad_read *b);
    void *on_bad_ud;
    /* A node-local chunk cache for a remote dataset (ignored for a local
     * one, read in place): a folder the ranks of a node share, where
     * each chunk is kept whole under its content-addressed name once
     * fetched (once per node: the ranks wait for one another's fetch),
     * checked at its first use by this loader (unless no_verify), reused
     * across epochs, runs, commits and views, and evicted least recently
     * used beyond cache_limit bytes (0: its file system's free space at
     * open less an eighth, with what the cache holds).  Never required:
     * a folder that cannot be written (or a full disk) turns writing
     * off, with one warning in the stats (cache_warning), and chunks
     * stream from the store as without it.  The layout:
     * formats/dlk-v1.md, Appendix B.  NULL: none.  Read at open only. */
    const char *cache_dir;
    uint64_t cache_limit;
    /* A mixing loader's epoch (dlk_loader_open_mix): the samples all
     * ranks draw in one, rounded up to whole batches of every rank
     * (down with drop_last).  0: the sources' rows summed (their views'
     * where they have one).  Ignored by a loader over one dataset. */
    uint64_t epoch_size;
    /* Per-sample augmentation of an image tensor (HxWxC u8, C 1 or 3,
     * fixed or variable H and W) or a video one (TxHxWxC: one crop for
     * every frame of a clip), done as its batch is gathered: a preset
     * ("imagenet-train": RandomResizedCrop 224, scale 0.08:1, ratio
     * 3/4:4/3, horizontal flip, ImageNet normalisation, bf16 NCHW;
     * "imagenet-eval": shorter side to 256, center crop 224, the same
     * normalisation) or fields, e.g. "crop=224,scale=0.08:1,ratio=0.75:
     * 1.3333,flip=h,jitter=B:C:S,normalize=imagenet|M0:M1:M2/S0:S1:S2,
     * dtype=u8|f16|bf16|f32,layout=nhwc|nchw" (size=HxW: a plain resize;
     * resize=N with crop: the eval recipe).  A sample's crop, flips and
     * jitter are a function of (seed, epoch, row): a re-run or resumed
     * epoch gets the same pixels, on the cpu and on a GPU.  The batch
     * tensor then has the output dtype and the fixed shape [C,OH,OW] or
     * [OH,OW,C] (a video [T,...]).  Resampling is antialiased bilinear
     * as torchvision's resize(antialias=True).  Not with check (the
     * bytes folded are the stored ones): DLK_EINVAL.  A bad spec:
     * DLK_EINVAL naming the field.  NULL: none.  Read at open only. */
    const char *augment;
    /* The tensor to augment; NULL: the first of kind image or video. */
    const char *augment_tensor;
} dlk_loader_opts;

#define DLK_LOADER_OPTS_INIT { .size = sizeof(dlk_loader_opts) }
static inline void dlk_loader_opts_init(dlk_loader_opts *o)
{
    dlk_init_sized_(o, sizeof *o);
}

enum { DLK_ON_BAD_FAIL = 0, DLK_ON_BAD_SKIP = 1 };

/* A read that failed, whose rows were replaced (opts.on_bad_read). */
typedef struct dlk_bad_read {
    const char *tensor;
    const char *object;          /* the chunk's key below the dataset root */
    uint32_t part0, part1;       /* the parts [part0, part1) lost: a span
                                    that could not be read, or one part
                                    whose checksum failed; 0 and 0: the
                                    whole chunk */
    uint64_t first_row, rows;    /* the dataset rows it holds */
    uint64_t epoch;
    dlk_status code;             /* the read's status */
    const char *why;             /* its message (a checksum's names the
                                    part) */
} dlk_bad_read;

#define DLK_PIN_CACHE_AUTO UINT64_MAX

/* One tensor of a batch.  Fixed shapes: data is [batch, *shape] dense.
 * Variable shapes: samples back to back; offsets[i] / shapes[i*ndim..]
 * give each (host memory, valid until the next call). */
typedef struct dlk_batch_tensor {
    const char *name;
    dlk_dtype dtype;
    int ndim;                    /* of one sample */
    int64_t shape[DLK_MAX_NDIM]; /* of one sample; -1 where it varies */
    void *data;                  /* host or device memory (see on_device) */
    size_t nbytes;
    const uint64_t *offsets;     /* variable shapes only: batch+1 offsets */
    const int64_t *shapes;       /* variable shapes only: batch*ndim dims */
} dlk_batch_tensor;

typedef struct dlk_batch {
    uint32_t size;               /* samples, padding included */
    uint64_t epoch, step;
    const uint64_t *indices;     /* global sample index of each */
    const uint8_t *pad;          /* 1 where a sample repeats as padding */
    int on_device;               /* data pointers are CUDA device memory */
    size_t ntensors;
    const dlk_batch_tensor *tensors;
    /* A mixing loader's: the source each sample came from (its index in
     * the sources given to dlk_loader_open_mix), indices[i] being its
     * row there.  NULL from a loader over one dataset. */
    const uint16_t *sources;
} dlk_batch;

/* Open a loader on ds (which must stay open while the loader is; a
 * commit pins the bytes).  The loader starts its own I/O threads (and,
 * on a GPU, an upload thread) and begins reading its first epoch (0, or
 * opts.start) at once, so that the time a program spends before its
 * first dlk_loader_next (building a model, joining its ranks) also
 * fills the window; `opts` is copied.  dlk_loader_restore moves it
 * elsewhere later.
 * @return DLK_OK with *out a loader the caller frees with
 *         dlk_loader_close; DLK_EINVAL for bad options (a tensor that does
 *         not exist, rank >= world_size, a batch size of 0) or a bad
 *         opts.start (as dlk_loader_restore); DLK_EGPU when the device
 *         cannot be used; DLK_ENOMEM. */
DLK_API dlk_status dlk_loader_open(dlk_dataset *ds, const dlk_loader_opts *opts,
                                   dlk_loader **out, dlk_error *err);

/* A loader over several datasets mixed by weight (MosaicML Streaming's
 * proportions, WebDataset's RandomMix): every batch of every rank holds
 * from source i weights[i] / (sum of weights) of its samples, rounded so
 * that each source's count over any run of batches stays within one
 * sample of its share (per batch, exact to rounding; not per epoch).
 * The samples of a batch are interleaved, in an order shuffled with the
 * seed when opts.shuffle.  Each source streams as a loader of its own
 * would (its view views[i] where not NULL; its shuffle windows, ranks'
 * shares and resume across world sizes), seeded from opts.seed and its
 * place in the list, and starts its next epoch where it runs out: a
 * source drawn faster than its rows is repeated, epoch after epoch,
 * each time in a new order, one drawn slower is not read whole in one
 * of the mix's epochs.  A source's epoch ends padded to equal shares as
 * a loader's last batch is (at most one row a rank, flagged in pad).
 * The mix's epoch is opts.epoch_size samples (every source's rows by
 * default).  The tensors loaded (opts.tensors, or those of the first
 * source) must exist in every source with the same dtype and shape, and
 * class-label tensors the same class names where both name them.
 * opts.rows is refused (views[i] chooses rows); opts.memory_limit and
 * io_threads, when given, are shared by weight, and from local files so
 * is prefetch_chunks (given or default: each source keeps its window and
 * reads ahead its share beyond it); with opts.epochs no source reads
 * ahead past what the last batch takes of it; everything else applies
 * to every source.  The sources' datasets must stay open while the
 * loader is.  Its state is saved and continued with dlk_loader_save and
 * dlk_loader_load (dlk_loader_state_get describes the mix's epoch only);
 * batch.sources names each sample's source.  At most 1024 sources.
 * @return as dlk_loader_open, naming the source at fault (its URL); a
 *         weight that is negative, not finite, or all of them 0:
 *         DLK_EINVAL. */
DLK_API dlk_status dlk_loader_open_mix(dlk_dataset *const *ds,
                                       const double *weights,
                                       const char *const *views, size_t n,
                                       const dlk_loader_opts *opts,
                                       dlk_loader **out, dlk_error *err);

/* The next batch of this rank, or *out = NULL at the end of the epoch
 * (the next call starts the following epoch).  The batch belongs to the
 * loader: it and its memory stay valid until the next call (the memory
 * longer with dlk_loader_keep).
 * @return DLK_OK; DLK_ECANCELED when opts.cancel asked to stop (the
 *         loader stays usable); a store's status, DLK_ECORRUPT or DLK_EGPU
 *         when a chunk cannot be read or copied (the loader cannot go
 *         on: close it). */
DLK_API dlk_status dlk_loader_next(dlk_loader *l, const dlk_batch **out,
                                   dlk_error *err);

/* @return the batches each rank gets in the current epoch (the same on
 *         every rank, padding included unless drop_last). */
DLK_API uint64_t dlk_loader_batches(const dlk_loader *l);

/* Where the loader stands: the state to save with a checkpoint. */
DLK_API void dlk_loader_state_get(const dlk_loader *l, dlk_loader_state *out);

/* Continue from a saved state (of any world size and batch size); the
 * next dlk_loader_next gives the first batch not consumed.
 * @return DLK_OK; DLK_EINVAL for a malformed state or one of another
 *         seed; DLK_ELIMIT when resuming would take more than
 *         DLK_LOADER_MAX_SEGMENTS segments in one epoch. */
DLK_API dlk_status dlk_loader_restore(dlk_loader *l, const dlk_loader_state *st,
                                      dlk_error *err);

/* The state as JSON and back.
 * @return dlk_loader_state_json: a string the caller frees with free(),
 *         or NULL when out of memory; dlk_loader_state_parse: DLK_OK with
 *         *out filled, or DLK_EINVAL naming the field at fault. */
DLK_API char *dlk_loader_state_json(const dlk_loader_state *st);
DLK_API dlk_status dlk_loader_state_parse(const char *json, dlk_loader_state *out,
                                          dlk_error *err);

/* The whole state, of a loader over one dataset (as
 * dlk_loader_state_json) or of a mix (its epoch, and every source's
 * state and count), as JSON to store with a checkpoint; and a loader
 * continued from one, as dlk_loader_restore (a mix's state only by a
 * mix of as many sources).
 * @return dlk_loader_save: a string the caller frees with free(), or
 *         NULL when out of memory; dlk_loader_load: DLK_OK, or DLK_EINVAL
 *         naming what does not fit. */
DLK_API char *dlk_loader_save(const dlk_loader *l);
DLK_API dlk_status dlk_loader_load(dlk_loader *l, const char *json,
                                   dlk_error *err);

/* Where time went (seconds, summed over the threads doing it). */
typedef struct dlk_loader_stats {
    size_t size;                 /* set by the caller (DLK_LOADER_STATS_INIT
                                    or dlk_loader_stats_init): the bytes
                                    dlk_loader_stats_get may write */
    double storage_s, decompress_s, h2d_s, gather_s, step_s, wait_s;
    double first_batch_s;        /* open (or epoch start) to first batch */
    uint64_t chunks_loaded, bytes_loaded, samples, batches;
    uint64_t peak_buffer_bytes;
    double gpu_busy_s;           /* device time in gather + step */
    uint32_t io_threads;         /* I/O threads it runs (opts' or default) */
    uint64_t chunks_verified;    /* loads that checked the stored checksum:
                                    each chunk once per loader */
    double io_busy_s;            /* I/O threads loading chunks (reading,
                                    decompressing, checking), summed */
    uint32_t window_chunks;      /* the window and read-ahead it runs */
    uint32_t prefetch_chunks;    /* with (opts' or default) */
    uint64_t span_bytes;         /* the largest tensor's spans, nominal
                                    (0: its chunks are read whole) */
    double io_cpu_s;             /* within io_busy_s, the I/O threads'
                                    time on a CPU or waiting for one,
                                    summed (from one load in eight, each
                                    thread's first included): near it,
                                    loading was CPU work
                                    (copies out of the page cache, checks,
                                    decompression); well under it, waiting
                                    on the store */
    double pin_s;                /* within io_busy_s, mapping and pinning
                                    chunks of the page cache for the device
                                    (--pin-cache: once a chunk), summed */
    uint64_t chunks_pinned;      /* chunks this loader mapped and pinned */
    uint64_t chunks_shared;      /* chunks it read where another loader of
                                    the process (through the same dataset
                                    handle) had pinned them: not counted
                                    in chunks_pinned, nor in its budget */
    uint64_t reads_bad;          /* failed reads (or parts) whose rows were
                                    replaced (opts.on_bad skip), every
                                    epoch's: on_bad_read's calls */
    uint64_t rows_replaced;      /* batch positions given another row for
                                    them, every epoch's */
    /* the chunk cache (opts' cache_dir), 0 without one */
    int cache_on;                /* reads go through one */
    uint64_t cache_hits;         /* reads (chunks, spans) from a copy */
    uint64_t cache_fetched;      /* chunks this loader fetched and kept */
    uint64_t cache_evicted;      /* copies it removed for room */
    uint64_t cache_dropped;      /* copies it found damaged (their size
                                    or hash), removed and fetched again */
    uint64_t cache_limit;        /* bytes, as given or derived */
    char cache_warning[256];     /* why the cache is not written (chunks
                                    then stream from the store), or "" */
} dlk_loader_stats;

#define DLK_LOADER_STATS_INIT { .size = sizeof(dlk_loader_stats) }
static inline void dlk_loader_stats_init(dlk_loader_stats *s)
{
    dlk_init_sized_(s, sizeof *s);
}

/* The loader's counters so far, into the first out->size bytes of *out
 * (out->size itself kept); nothing when out->size is 0. */
DLK_API void dlk_loader_stats_get(const dlk_loader *l, dlk_loader_stats *out);

/* Whether this build can use CUDA and a device is present.
 * @return the number of CUDA devices this process sees (at least 1) if
 *         so; 0 if not, with a one-line reason in why (cap bytes,
 *         NUL-terminated; why may be NULL). */
DLK_API int dlk_cuda_available(char *why, size_t cap);

/* Stop the loader's threads and free what it holds, batches still kept
 * (dlk_loader_keep) included.  NULL is allowed. */
DLK_API void dlk_loader_close(dlk_loader *l);

/* Keep the current batch's memory (its tensors' data) past the next
 * dlk_loader_next: later batches are gathered into other buffers, reused
 * from those given back, so a consumer may hold several batches at once.
 * The batch's host arrays (indices, pad, offsets, shapes) still last only
 * until the next call: copy what is needed.
 * @return DLK_OK with *out a handle given back with dlk_loader_release
 *         (or freed by dlk_loader_close); DLK_EINVAL when no batch is
 *         current or it is kept already; DLK_ENOMEM. */
typedef struct dlk_kept dlk_kept;
DLK_API dlk_status dlk_loader_keep(dlk_loader *l, dlk_kept **out,
                                   dlk_error *err);

/* Give a kept batch's memory back for reuse; k is freed.  On a CUDA
 * device, `cuda_stream` (a cudaStream_t; NULL for the legacy default
 * stream) is the stream that last read it: the loader's later writes into
 * the memory wait for the work queued on it so far, without blocking the
 * host.  Ignored on cpu.
 * Thread-safety: as the loader itself, one thread at a time (a binding
 * that frees tensors on other threads holds its own lock around it). */
DLK_API void dlk_loader_release(dlk_loader *l, dlk_kept *k, void *cuda_stream);

/* Make `cuda_stream` (a cudaStream_t; NULL for the legacy default stream)
 * wait for the loader's device work queued so far (the current batch's
 * included), without blocking the host: a consumer's kernels queued on
 * that stream afterwards see the batch's bytes.  Nothing to do on cpu
 * (batches are complete when dlk_loader_next returns).
 * @return DLK_OK; DLK_EGPU when the wait cannot be queued. */
DLK_API dlk_status dlk_loader_stream_wait(dlk_loader *l, void *cuda_stream,
                                          dlk_error *err);

/* Where a launcher placed this process, read from the environment (the
 * one function of the library that reads it: the launcher's variables
 * are how it says so): torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE), Lightning's DDP launcher (WORLD_SIZE, NODE_RANK,
 * LOCAL_RANK, no RANK), Open MPI (OMPI_COMM_WORLD_RANK, _SIZE,
 * _LOCAL_RANK, _LOCAL_SIZE) or Slurm (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID, SLURM_NTASKS_PER_NODE), each value from the first of
 * those variables that is set; rank 0 of 1 and local rank 0 of 1 without
 * a launcher.  Where WORLD_SIZE is set the rank is RANK, else NODE_RANK
 * (or torchrun's GROUP_RANK) x LOCAL_WORLD_SIZE + LOCAL_RANK, else
 * LOCAL_RANK on node 0 or on one node (LOCAL_WORLD_SIZE = WORLD_SIZE);
 * never another launcher's rank.
 * The loader reads none of these: its options take the values
 * explicitly. */
typedef struct dlk_launch {
    uint32_t rank, world_size, local_rank;
    uint32_t local_world_size;   /* processes on this host (at least 1) */
} dlk_launch;
#define DLK_LAUNCH_NO_RANK UINT32_MAX
/* @return DLK_OK with *out filled; DLK_EINVAL naming the variable for a
 *         value that is not a number in range (*out then holds the
 *         defaults), or saying why for a WORLD_SIZE above 1 whose rank
 *         cannot be known (every process would take rank 0): *out then
 *         holds the rest, its rank DLK_LAUNCH_NO_RANK, for a caller that
 *         is given the rank otherwise. */
DLK_API dlk_status dlk_launch_env(dlk_launch *out, dlk_error *err);

/* The GPU that a process placed by a launcher takes by default: its
 * local rank modulo the ngpus GPUs it sees (dlk_cuda_available).  Where
 * a launcher gives each process GPUs of its own through
 * CUDA_VISIBLE_DEVICES (Slurm's --gpus-per-task), every process takes
 * its first; with more processes on a host than GPUs, they take the
 * GPUs in turn.
 * @return the index, from 0; -1 when ngpus is below 1. */
DLK_API int dlk_launch_gpu(const dlk_launch *l, int ngpus);

/* ------------------------------------------------------------------ */
/* Verification                                                        */

typedef struct dlk_verify_opts {
    size_t size;      /* sizeof(dlk_verify_opts): DLK_VERIFY_OPTS_INIT or
                         dlk_verify_opts_init ("Versioned structs") */
    int deep; /* also decompress and re-hash every payload */
    int all;  /* every commit reachable from main and the head, each chunk
                 once; and report chunks that none of them references */
    /* Called for each problem found; `object` is a key below the dataset
     * root ("" for the dataset as a whole). May be NULL. */
    void (*on_problem)(void *ud, const char *object, const char *why);
    /* With `all`: called for each chunk nothing references (left by a
     * crash or an abandoned run; `dlk gc` removes them).  May be NULL. */
    void (*on_unreferenced)(void *ud, const char *object, uint64_t size);
    void *ud;
    /* Only the chunks that hold rows of this view (not with `all`), and
     * the view's object.  NULL: every chunk, and every view's object. */
    const char *view;
} dlk_verify_opts;

#define DLK_VERIFY_OPTS_INIT { .size = sizeof(dlk_verify_opts) }
static inline void dlk_verify_opts_init(dlk_verify_opts *o)
{
    dlk_init_sized_(o, sizeof *o);
}

typedef struct dlk_verify_result {
    size_t size;      /* sizeof(dlk_verify_result): DLK_VERIFY_RESULT_INIT or
                         dlk_verify_result_init ("Versioned structs") */
    uint64_t chunks_checked;
    uint64_t bytes_checked;
    uint64_t problems;
    uint64_t commits_checked;
    uint64_t unreferenced;       /* with `all` */
    uint64_t unreferenced_bytes;
} dlk_verify_result;

#define DLK_VERIFY_RESULT_INIT { .size = sizeof(dlk_verify_result) }
static inline void dlk_verify_result_init(dlk_verify_result *o)
{
    dlk_init_sized_(o, sizeof *o);
}

/* Check every chunk the opened state references (the head, or the commit
 * it was opened at), or with opts->all every state.  The callbacks are
 * called on the calling thread.
 * @return DLK_OK when the check ran (problems are counted in res and
 *         passed to on_problem, not returned); an error status only when
 *         the check itself could not run (a store's status, DLK_ENOMEM). */
DLK_API dlk_status dlk_verify(dlk_dataset *ds, const dlk_verify_opts *opts,
                              dlk_verify_result *res, dlk_error *err);

/* ------------------------------------------------------------------ */
/* Ingest of raw media: images, video and labels from S3 or a directory */

typedef enum dlk_on_error {
    DLK_ON_ERROR_SKIP = 0, /* skip a bad object, report it, go on */
    DLK_ON_ERROR_FAIL = 1  /* stop at the first; publish nothing */
} dlk_on_error;

/* An object already ingested whose version (ETag, or size and mtime)
 * differs now: the rows of a dataset are never replaced in place. */
typedef enum dlk_on_changed {
    DLK_ON_CHANGED_SKIP = 0, /* report it, ingest the new objects */
    DLK_ON_CHANGED_FAIL = 1  /* ingest nothing (DLK_EINVAL naming them) */
} dlk_on_changed;

/* Progress, passed to the callback at most every 100 ms and at the end:
 * first while the source is listed (listing 1, keys_listed growing), then
 * as rows are done. */
typedef struct dlk_ingest_progress {
    uint64_t rows_done;       /* rows of this run appended or skipped */
    uint64_t rows_total;      /* rows of this run (its shard, after resume) */
    uint64_t bytes_in;        /* source bytes fetched */
    uint64_t bytes_out;       /* raw sample bytes appended */
    double seconds;           /* since the rows began (listing: the listing) */
    int listing;              /* 1: the source is being listed */
    uint64_t keys_listed;     /* keys found so far (while listing) */
} dlk_ingest_progress;

/* The order ingest appends rows in.  Shuffled (the default): a seeded
 * permutation of the source's rows, each placed by a keyed hash of its
 * stem, so that chunks of a class-folder tree hold every class and a
 * loader's shuffle window is a sample of the whole source.  Sorted: by
 * stem, as listed (a class-folder tree becomes class-sorted). */
typedef enum dlk_ingest_order {
    DLK_ORDER_SHUFFLED = 0,
    DLK_ORDER_SORTED = 1
} dlk_ingest_order;

/* How an image is brought to the final size (--fit). */
typedef enum dlk_fit {
    DLK_FIT_STRETCH = 0, /* scale to WxH, ignoring the aspect ratio */
    DLK_FIT_CROP = 1,    /* scale to cover WxH, cut the centre */
    DLK_FIT_PAD = 2      /* scale to fit inside WxH, pad with zeros */
} dlk_fit;

/* The order of an image's dimensions in its tensor (--layout). */
typedef enum dlk_layout {
    DLK_LAYOUT_SCHEMA = 0, /* as the schema's fixed shape says, else HWC */
    DLK_LAYOUT_HWC = 1,    /* [H,W,C]: channels last */
    DLK_LAYOUT_CHW = 2     /* [C,H,W]: channels first */
} dlk_layout;

typedef struct dlk_ingest_opts {
    size_t size;            /* sizeof(dlk_ingest_opts): DLK_INGEST_OPTS_INIT
                               or dlk_ingest_opts_init */
    const char *source;     /* "s3://bucket/prefix", "gs://bucket/prefix",
                               "file://DIR" or DIR */
    /* Final shape.  width/height 0: each image keeps its own size, unless
     * the dataset's image tensor has a fixed H and W (then those). */
    int width, height;      /* --resize WxH */
    dlk_fit fit;            /* --fit; DLK_FIT_STRETCH by default */
    int channels;           /* 1, 3 or 4; 0: from the schema, else 3 */
    dlk_layout layout;      /* --layout; DLK_LAYOUT_SCHEMA by default */
    uint64_t max_pixels;    /* refuse larger sources; 0: 2^28 */
    int frames;             /* video: frames sampled uniformly, or */
    double fps;             /* ... this rate for */
    double clip_seconds;    /* ... this long (0: the whole clip) */
    const char *labels;     /* CSV or JSONL manifest: a path, s3:// or
                               gs:// URL */
    uint32_t part_bytes;    /* inferred tensors' part size (see
                               dlk_tensor_spec); 0: the default */
    dlk_on_error on_error;
    int unordered;          /* append rows as they are decoded */
    dlk_ingest_order order; /* the rows' order in the dataset */
    uint64_t order_seed;    /* DLK_ORDER_SHUFFLED: the permutation's seed */
    int jobs;               /* decode threads; 0: the online cores */
    int fetchers;           /* GETs in flight; 0: 64 from S3, from a
                               local directory 16, or none with jobs >=
                               the cores (the decode threads then read
                               their rows) */
    unsigned shard, nshards;/* this process takes share `shard` of
                               `nshards` (0 and 0 or 1: everything) */
    double checkpoint_seconds; /* publish progress this often; 0: 30 */
    int no_resume;          /* ignore (and keep) what an earlier run of the
                               same command left: ingest everything again */
    int dry_run;            /* list the source, infer or read the schema
                               and report what would be ingested and
                               what not (on_schema, on_unused, result:
                               planned, unused); write nothing */
    void (*progress)(void *ud, const dlk_ingest_progress *p);
    /* Called for each skipped row (on_error skip) or the failing one. */
    void (*on_bad)(void *ud, const char *key, const char *reason);
    /* Called once, before any row is read, with the schema the rows are
     * ingested into (inferred from the source, or the dataset's). */
    void (*on_schema)(void *ud, const dlk_tensor_spec *specs, size_t n);
    /* Called for each object of the source that is not a sample, or that
     * feeds no tensor (a README, .DS_Store, _SUCCESS, the --labels
     * manifest, a file of no known kind, a .txt beside an image when the
     * schema has no text tensor), with the reason; at most the first
     * 1000 objects of the listing of these kinds, and every object of the
     * rows that are no sample (no image or video where the schema has
     * one).  Not errors: the run goes on. */
    void (*on_unused)(void *ud, const char *key, const char *reason);
    void *ud;
    /* The share of the rows a run tries that may be skipped before it
     * fails: in (0, 1]; 0 means 0.1; negative, none.  A run over the
     * limit, or one that ingests no row from a source that is not empty,
     * returns DLK_EDECODE naming the commonest reasons, and merges
     * nothing into the head (its staged chunks are left for gc). */
    double max_skip;
    int exist_ok;           /* dlk_ingest_create: ingest into a dataset that
                               exists already with the same tensors */
    /* Polled a few times a second (from the calling thread, or while
     * listing from a thread of the run), NULL: never.  Non-zero stops the
     * run: what is appended is checkpointed (a later identical run
     * continues from there) and the call returns DLK_OK with
     * result->interrupted set. */
    int (*stop)(void *ud);
    /* Source keys (formats/dlk-v1.md 6.9): a new dataset (or an empty
     * one) gets the text tensors "key" and "key_version" unless no_key;
     * a dataset that has them gets every row's key, and only objects
     * whose keys it does not hold yet are ingested. */
    int no_key;
    dlk_on_changed on_changed;
    /* Called for each already-ingested object whose version changed,
     * with its url (the sample of "key"). */
    void (*on_changed_key)(void *ud, const char *key);
    /* The settings of every store the run opens: the dataset's, the
     * source's and the labels'.  NULL: defaults (see dlk_store_options);
     * read for the whole call. */
    const dlk_store_options *store;
    /* The source (a URL or directory) that the dataset's relative keys,
     * written before keys named whole objects, are relative to; recorded
     * in the head (its "key_base"; not with dry_run).  NULL: the one the
     * head records, if any. */
    const char *keys_relative_to;
    /* A class name of the source (a folder, a label manifest's label)
     * that the dataset's class_label tensor lacks is appended to its
     * class list, after the names it has (new names in byte order), and
     * the head is published with it before rows are read; existing ids
     * never change.  strict_classes: refused instead, each such row a
     * bad row ("class 'x' is not one of the N classes").  on_new_class
     * (NULL: none) is told each name appended (with dry_run: that would
     * be) and its id. */
    int strict_classes;
    /* Hugging Face ImageFolder metadata: a metadata.jsonl or metadata.csv
     * in a folder of the source names the files of its folder that are
     * rows (column file_name) and gives them the values of its other
     * columns; without labels, these are read unless no_metadata. */
    int no_metadata;
    /* A COCO-style annotation file (a path, s3:// or gs:// URL): each of
     * its "images" whose file_name (relative to the source) the source
     * holds is a row, fed to the tensors "boxes" (f32 [N,4]: x, y, width,
     * height), "category_ids" (i64 [N]) and "image_id" (i64) where the
     * schema has them; the other images of the source are not samples.
     * Not with labels. */
    const char *coco;
    void (*on_new_class)(void *ud, const char *tensor, const char *name,
                         uint64_t id);
    /* The source's objects given by the caller instead of listed from
     * source (n_objects of them; NULL: listed): the rows of a table
     * format that dlk does not read itself (the Python package's Parquet
     * reader) as objects, such as "train.parquet/17.jpg" with a
     * "train.parquet/metadata.jsonl" naming them, each read from the
     * caller's memory, which stays the caller's and unchanged until the
     * call returns.  They are grouped, decoded and keyed as listed
     * objects are; source stays the url their keys are relative to
     * (the rows' identity, resume and reruns by key). */
    const struct dlk_ingest_object *objects;
    size_t n_objects;
    /* Reads the bytes of objects[index] whose data is NULL and len is
     * not 0: exactly len bytes into dst, when a row needs them, from any
     * of ingest's threads, several at once.  0 when it did; else nonzero
     * with why (why_size bytes) saying what failed: the run stops naming
     * the object, as when a listed object cannot be read (a later run
     * resumes from its last checkpoint).  Lets a caller list a table's
     * rows without holding their bytes (NULL: every object has its
     * data). */
    int (*read_object)(void *ud, size_t index, void *dst, size_t len,
                       char *why, size_t why_size);
    void *read_object_ud;
    /* The caller's objects are rows of tables read as streams, front to
     * back (a Parquet file's row groups): a row whose stem is "T/N", N a
     * row number in decimal, is row N of table T.  A table's rows keep
     * row order, in the shuffled order in groups of tables whose rows
     * take turns as compressed tar shards' do, and in the sorted order
     * tables by name (formats/dlk-v1.md section 6.8). */
    int objects_in_tables;
} dlk_ingest_opts;

/* One object of dlk_ingest_opts.objects (a fixed layout: no size). */
typedef struct dlk_ingest_object {
    const char *key;     /* relative to the source, a valid object key
                            (unique; an invalid one is a skipped row) */
    const char *version; /* what changes when its bytes do ("" unknown) */
    const void *data;
    size_t len;
} dlk_ingest_object;

#define DLK_INGEST_OPTS_INIT { .size = sizeof(dlk_ingest_opts) }
static inline void dlk_ingest_opts_init(dlk_ingest_opts *o)
{
    dlk_init_sized_(o, sizeof *o);
}

typedef struct dlk_ingest_result {
    size_t size;      /* sizeof(dlk_ingest_result): DLK_INGEST_RESULT_INIT or
                         dlk_ingest_result_init ("Versioned structs") */
    uint64_t ingested;      /* rows appended (each a sample of every tensor) */
    uint64_t skipped;       /* rows skipped for an error */
    uint64_t ignored;       /* objects of no known kind (not in any row) */
    uint64_t unused;        /* objects not ingested that are not errors:
                               no sample, or feeding no tensor (these
                               and `ignored` included; see on_unused) */
    uint64_t planned;       /* rows of samples this run had to do (with
                               dry_run: would do), earlier runs' included */
    uint64_t bytes_in;      /* source bytes fetched by this process */
    uint64_t bytes_out;     /* raw sample bytes appended */
    uint64_t resumed_rows;  /* rows an earlier run had done already */
    int complete;           /* 1: every shard is in the head (merged) */
    int already;            /* 1: an earlier identical run had finished */
    int jobs;               /* decode threads the run used */
    dlk_ingest_order order; /* the order the rows were appended in */
    uint64_t order_seed;
    double seconds;
    double list_seconds;    /* of which: listing the source */
    double rows_seconds;    /* fetching, decoding and appending the rows */
    double append_seconds;  /* of rows_seconds: the one appending thread
                               busy (the serial part; near rows_seconds
                               means it is the bottleneck) */
    /* Of rows_seconds, summed over the threads doing it: */
    double fetch_seconds;   /* reading source objects */
    double decode_seconds;  /* building rows (decoding, resizing) */
    double decode_wait_seconds; /* decoders with no fetched row to take */
    double decode_lock_seconds; /* decoders waiting for the pipeline's lock */
    double write_wait_seconds;  /* of append_seconds: waiting for a chunk
                                   writer (the writes are the bottleneck) */
    int interrupted;        /* 1: stopped by opts->stop; not merged */
    uint64_t kept;          /* interrupted: rows checkpointed for the next
                               run (this shard, earlier runs included) */
    int rejected;           /* 1: failed on max_skip or no rows */
    int keyed;              /* 1: the dataset has key tensors; the counts
                               below are of the source's rows */
    uint64_t new_rows;      /* keys not in the dataset before this run */
    uint64_t present;       /* keys in it already, same version: skipped */
    uint64_t changed;       /* keys in it already, other version: skipped */
    uint64_t classes_added; /* class names appended (see strict_classes) */
    uint64_t shard_reads;   /* compressed tar shards (.tar.gz, .tgz) read
                               from their start for the rows' members (of
                               over 4 KiB; smaller ones are kept from the
                               listing): one a shard when none is read
                               again */
} dlk_ingest_result;

#define DLK_INGEST_RESULT_INIT { .size = sizeof(dlk_ingest_result) }
static inline void dlk_ingest_result_init(dlk_ingest_result *o)
{
    dlk_init_sized_(o, sizeof *o);
}

/* Ingest every row of opts->source into the dataset at `url`.  Objects
 * are grouped by key stem into rows ("x/0001.jpg" + "x/0001.cls" +
 * "x/0001.json"); rows are appended in the order opts->order says
 * (shuffled by default, each shard a share of the shuffled rows).  Resumable:
 * the same call after a crash continues after the last checkpoint, and
 * after a finished run does nothing (result->already).  With nshards > 1
 * each process stages its share; the last one to finish merges all shares
 * into the head in shard order.  Nothing reaches the head before that.
 * The callbacks of opts are called from the calling thread or, where
 * their comment says so, from a thread of the run, never two at once.
 * @return DLK_OK (also when opts->stop interrupted the run:
 *         result->interrupted); DLK_EDECODE for a run rejected by
 *         max_skip or one that ingested no row (result->rejected; nothing
 *         merged); DLK_EDECODE for the first bad row with DLK_ON_ERROR_FAIL;
 *         DLK_EINVAL for bad options or, with DLK_ON_CHANGED_FAIL, changed
 *         objects; DLK_ECONFLICT when another writer changed the head
 *         during the merge; a store's status. */
DLK_API dlk_status dlk_ingest(const char *url, const dlk_ingest_opts *opts,
                              dlk_ingest_result *result, dlk_error *err);

/* Create the dataset at `url` with `specs` or, when n_specs is 0, with a
 * schema inferred from the source, then ingest into it.  A dataset that
 * exists already is refused (DLK_EEXIST, naming it) unless it has the same
 * tensors and is empty, or an unfinished ingest run is staged there (a
 * rerun after a crash or an interruption resumes it), or opts->exist_ok
 * is set.  A
 * run rejected by max_skip (result->rejected) removes the dataset it
 * created, so that the corrected command can be run.  chunk_bytes applies
 * to inferred tensors (0: default).
 * @return as dlk_ingest; DLK_EEXIST for a dataset there already, as
 *         above. */
DLK_API dlk_status dlk_ingest_create(const char *url, const dlk_tensor_spec *specs,
                                     size_t n_specs, uint64_t chunk_bytes,
                                     const dlk_ingest_opts *opts,
                                     dlk_ingest_result *result, dlk_error *err);

/* The schema dlk_ingest_create would infer from opts->source (listing it
 * and reading a few objects).
 * @return DLK_OK with *specs an array of *n specs that the caller frees
 *         (with their class names) with dlk_ingest_specs_free;
 *         DLK_ENOTFOUND for a source with no samples; a store's status. */
DLK_API dlk_status dlk_ingest_infer(const dlk_ingest_opts *opts,
                                    dlk_tensor_spec **specs, size_t *n,
                                    dlk_error *err);
/* Free what dlk_ingest_infer returned; NULL is allowed. */
DLK_API void dlk_ingest_specs_free(dlk_tensor_spec *specs, size_t n);

/* ------------------------------------------------------------------ */
/* Queries and views: rows picked by value and by vector similarity     */

typedef enum dlk_metric {
    DLK_METRIC_COSINE = 0,       /* highest cosine similarity first */
    DLK_METRIC_L2 = 1,           /* smallest Euclidean distance first */
    DLK_METRIC_IP = 2            /* highest inner product first */
} dlk_metric;
/* @return the metric's name ("cosine", "l2", "ip"), static. */
DLK_API const char *dlk_metric_name(dlk_metric m);
/* @return 0 and *out set for a known name, -1 otherwise. */
DLK_API int dlk_metric_parse(const char *name, dlk_metric *out);

/* Where a vector search scores its rows.  Both give the same rows in the
 * same order with the same scores (dlk-query(1), "Vector search"). */
typedef enum dlk_query_device {
    DLK_QUERY_DEVICE_AUTO = 0,   /* the faster for the data: the CPU for
                                    chunks in host memory (the copy to a
                                    GPU costs more than the CPU's pass) */
    DLK_QUERY_DEVICE_CPU = 1,
    DLK_QUERY_DEVICE_CUDA = 2    /* GPU 0; DLK_EGPU when there is none */
} dlk_query_device;
/* @return "auto", "cpu" or "cuda", static; NULL for another value. */
DLK_API const char *dlk_query_device_name(dlk_query_device d);
/* @return 0 and *out set for a known name, -1 otherwise. */
DLK_API int dlk_query_device_parse(const char *name, dlk_query_device *out);

typedef struct dlk_select_opts {
    size_t size;                 /* sizeof(dlk_select_opts):
                                    DLK_SELECT_OPTS_INIT or
                                    dlk_select_opts_init */
    const char *where;           /* an expression (dlk-query(1)); NULL or
                                    "": every row */
    const char *view;            /* only this view's rows; NULL: all */
    /* Vector search, done after the filter: the k rows nearest to a
     * query vector in `near_tensor` (f32 or f64, fixed shape [D]), exact
     * (every candidate row is scored).  The vector is `near_vector` (D
     * floats), or the .npy file `near_npy` (D values, shape [D] or
     * [1,D]), or the tensor's sample of row R, given as
     * `near_row_plus1` = R + 1: so that options set to zero, as in
     * `dlk_select_opts o = {.size = sizeof o, .near_tensor = "emb",
     * .near_npy = "q.npy"}`,
     * name no row (row 0 is near_row_plus1 1). */
    const char *near_tensor;     /* NULL: no vector search */
    const float *near_vector;
    uint32_t near_dim;
    const char *near_npy;
    uint64_t near_row_plus1;     /* the row + 1; 0: not a row */
    uint32_t k;                  /* default 10 */
    dlk_metric metric;
    uint32_t threads;            /* default dlk_cpu_count() */
    int no_verify;               /* skip the chunks' payload checksums */
    int count_only;              /* count the rows, list none (res->rows
                                    NULL); not with a vector search */
    dlk_query_device device;     /* where the vector search runs (auto) */
} dlk_select_opts;

#define DLK_SELECT_OPTS_INIT { .size = sizeof(dlk_select_opts) }
static inline void dlk_select_opts_init(dlk_select_opts *o)
{
    dlk_init_sized_(o, sizeof *o);
}

/* Rows ascending for a filter alone; nearest first with a vector search
 * (scores: the metric's value for each row). */
typedef struct dlk_select_result {
    size_t size;                 /* set by the caller
                                    (DLK_SELECT_RESULT_INIT or
                                    dlk_select_result_init): the bytes
                                    dlk_select may write */
    uint64_t *rows;
    double *scores;              /* NULL without a vector search */
    uint64_t n;
    uint64_t candidates;         /* rows the filter or view let through
                                    (and that were scored) */
    uint64_t rows_total;         /* rows of the dataset */
    uint64_t bytes_read;         /* chunk bytes read */
    size_t error_column;         /* on an expression error: its 1-based
                                    byte column in `where`; else 0 */
    dlk_query_device device;     /* where the vector search ran (CPU or
                                    CUDA); AUTO without one */
} dlk_select_result;

#define DLK_SELECT_RESULT_INIT { .size = sizeof(dlk_select_result) }
static inline void dlk_select_result_init(dlk_select_result *r)
{
    dlk_init_sized_(r, sizeof *r);
}

/* Evaluate opts on ds (the head or a commit).  The expression is checked
 * against the schema first: an error names the column and what is wrong
 * there (DLK_EINVAL).  res is the caller's, freed with
 * dlk_select_result_free.  Not to be called on one ds from two threads.
 * @return DLK_OK; DLK_EINVAL; DLK_ENOTFOUND (a tensor or view);
 *         DLK_ECORRUPT (a chunk failed its checksum); DLK_EGPU (device
 *         CUDA without a usable GPU, or a CUDA call failed); I/O errors. */
DLK_API dlk_status dlk_select(dlk_dataset *ds, const dlk_select_opts *opts,
                      dlk_select_result *res, dlk_error *err);
/* Frees what res holds (res itself is the caller's, its size kept for
 * the next dlk_select); NULL-safe. */
DLK_API void dlk_select_result_free(dlk_select_result *res);

/* A resident vector index: the rows of an embedding tensor that a
 * filter and a view let through, read once (their chunks' checksums
 * checked) and kept in host memory or in GPU 0's, for many searches in
 * one process.  A search scores every resident row as dlk_select's
 * vector search does on the same device, so it gives the same rows in
 * the same order with the same scores, bit for bit; on a GPU it no
 * longer pays CUDA's start-up and the copy of the rows each time.  It
 * holds rows x D x 4 bytes (8 for f64) of the device's memory until
 * closed.  It does not refer to ds once open. */
typedef struct dlk_index dlk_index;

typedef struct dlk_index_opts {
    size_t size;                 /* sizeof(dlk_index_opts):
                                    DLK_INDEX_OPTS_INIT or
                                    dlk_index_opts_init */
    const char *tensor;          /* the embedding tensor (f32/f64 [D]) */
    const char *where;           /* only the rows this expression keeps
                                    (dlk-query(1)); NULL or "": all */
    const char *view;            /* only this view's rows; NULL: all */
    dlk_query_device device;     /* auto: CUDA when a GPU is there and
                                    the rows fit its free memory, else
                                    the CPU */
    uint32_t threads;            /* threads that read, and that search on
                                    the CPU (default dlk_cpu_count()) */
    int no_verify;               /* skip the chunks' payload checksums */
    size_t *error_column;        /* set on an expression error: its
                                    1-based byte column in where (may be
                                    NULL) */
} dlk_index_opts;

#define DLK_INDEX_OPTS_INIT { .size = sizeof(dlk_index_opts) }
static inline void dlk_index_opts_init(dlk_index_opts *o)
{
    dlk_init_sized_(o, sizeof *o);
}

/* Read the rows opts picks into a new index on the device it names.
 * @return DLK_OK with *out an index the caller frees with
 *         dlk_index_close; DLK_EINVAL (an expression error, a tensor that
 *         is not an embedding); DLK_ENOTFOUND (a tensor or view);
 *         DLK_ENOMEM, naming the tensor and the bytes, when the rows do
 *         not fit the device's free memory; DLK_EGPU (device CUDA
 *         without a usable GPU, or a CUDA call failed); DLK_ECORRUPT (a
 *         chunk failed its checksum); I/O errors. */
DLK_API dlk_status dlk_index_open(dlk_dataset *ds, const dlk_index_opts *opts,
                                  dlk_index **out, dlk_error *err);

/* The k resident rows nearest to each of nq query vectors (queries: nq
 * x D floats, query i at queries + i * D) by metric: query i's best
 * first in rows[i * k ...] and scores[i * k ...] (the caller's arrays of
 * nq * k), *n of them for each query (k, or fewer when the index has
 * fewer rows).  Not to be called on one index from two threads at once.
 * @return DLK_OK; DLK_EINVAL (nq or k 0, k over 1000000, an unknown
 *         metric); DLK_ENOMEM; DLK_EGPU (a CUDA call failed). */
DLK_API dlk_status dlk_index_search(dlk_index *ix, const float *queries,
                                    uint32_t nq, uint32_t k, dlk_metric metric,
                                    uint64_t *rows, double *scores,
                                    uint32_t *n, dlk_error *err);

/* The index's rows, their dimension D, the bytes they hold on the
 * device, and the device (CPU or CUDA). */
DLK_API uint64_t dlk_index_rows(const dlk_index *ix);
DLK_API uint32_t dlk_index_dim(const dlk_index *ix);
DLK_API uint64_t dlk_index_bytes(const dlk_index *ix);
DLK_API dlk_query_device dlk_index_device(const dlk_index *ix);
/* Free the index and its memory on the device; NULL is allowed. */
DLK_API void dlk_index_close(dlk_index *ix);

/* Views: a named, stored list of rows of a dataset (formats/dlk-v1.md
 * 6.10), part of the head and committed with it.  Row numbers never
 * change (rows are only appended), so a view keeps its rows as the
 * dataset grows. */
#define DLK_VIEW_MAX_ROWS ((uint64_t)1 << 34)
typedef struct dlk_view_info {
    const char *name;
    const char *object;          /* index/views/<hash> */
    uint64_t rows;               /* rows in the view */
    uint64_t dataset_rows;       /* rows the dataset had when it was saved */
    const char *query;           /* what made it ("" if not told) */
} dlk_view_info;
/* @return how many views ds has. */
DLK_API size_t dlk_dataset_nviews(const dlk_dataset *ds);
/* View i (in name order); pointers live until ds changes or closes.
 * @return 0, or -1 when i is out of range. */
DLK_API int dlk_view_get(const dlk_dataset *ds, size_t i, dlk_view_info *out);
/* Store `rows` (any order, duplicates dropped) as view `name` (a tensor
 * name's rules) of the head, replacing one of that name, and publish the
 * head (as dlk_dataset_flush).  `query` is recorded with it (may be
 * NULL).  Rows must be below the head's row count.
 * @return DLK_OK; DLK_EINVAL (a bad name, a row past the head);
 *         DLK_ECONFLICT when another writer moved the head; store errors. */
DLK_API dlk_status dlk_view_save(dlk_dataset *ds, const char *name,
                         const uint64_t *rows, uint64_t n, const char *query,
                         dlk_error *err);
/* Remove view `name` from the head and publish it.
 * @return DLK_OK; DLK_ENOTFOUND; DLK_ECONFLICT when another writer moved
 *         the head; store errors. */
DLK_API dlk_status dlk_view_drop(dlk_dataset *ds, const char *name,
                                 dlk_error *err);
/* The rows of view `name` (ascending, malloc'd: free()), read and
 * checked.
 * @return DLK_OK; DLK_ENOTFOUND naming the views there are when absent;
 *         DLK_ECORRUPT for a view object that fails its checksum. */
DLK_API dlk_status dlk_view_rows(dlk_dataset *ds, const char *name,
                                 uint64_t **rows, uint64_t *n,
                                 dlk_error *err);

/* ------------------------------------------------------------------ */
/* NumPy .npy files (format 1.0 to 3.0, C order)                        */

/* Write the header of a .npy file for an array of `dtype` and `shape`
 * into out (cap bytes; 128 is always enough for up to 9 dimensions); the
 * array's bytes follow it.  bf16 has no NumPy type and is written as
 * '<u2'.
 * @return DLK_OK with *len the header's length; DLK_EINVAL for an
 *         unknown dtype or a bad shape; DLK_ELIMIT when it does not fit
 *         cap bytes. */
DLK_API dlk_status dlk_npy_header(dlk_dtype dtype, int ndim, const int64_t *shape,
                                  char *out, size_t cap, size_t *len,
                                  dlk_error *err);

/* The float vectors of a .npy file of f16, f32 or f64 values: shape [D]
 * is one vector, [N, D] N of them (at most 64 MiB of file).
 * @return DLK_OK with *v (N x D floats, malloc'd: the caller frees it
 *         with free()), *n and *dim set; DLK_EINVAL naming the file for
 *         another dtype or shape; DLK_ELIMIT over 64 MiB; DLK_EIO. */
DLK_API dlk_status dlk_npy_vectors(const char *path, float **v, uint32_t *n,
                                   uint32_t *dim, dlk_error *err);

/* ------------------------------------------------------------------ */
/* Images out                                                           */

/* Encode an image sample as a PNG file: u8 of shape [H,W], [H,W,C] or
 * [C,H,W] with C 1, 3 or 4, or one frame of a clip [T,H,W,C] /
 * [T,C,H,W].  frame: the frame of a clip (required there, -1 or 0
 * otherwise).  chw: 1 channels first, 0 channels last, -1 detect (last
 * unless the last dimension cannot be channels and the first can).
 * Without media support (make MEDIA=0) it fails with DLK_EUNSUPPORTED.
 * @return DLK_OK with *png (malloc'd: the caller frees it with free())
 *         and *len set; DLK_EINVAL, naming why, for a sample that is not
 *         an image, with *png NULL; DLK_ENOMEM. */
DLK_API dlk_status dlk_png_from_sample(const dlk_sample *s, int frame, int chw,
                                       void **png, size_t *len, dlk_error *err);

#ifdef __cplusplus
}
#endif
#endif /* DLK_H */
