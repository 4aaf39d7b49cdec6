/*
 * manifest.h - a state's manifest: tensors, chunk entries, segments, views
 * (format/manifest.c); not installed.
 */
#ifndef DLK_FORMAT_MANIFEST_H
#define DLK_FORMAT_MANIFEST_H

#include "dlk.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Dlk_chunk_entry {
    char key[40];        /* content hash, 32 hex digits */
    uint32_t samples;
    uint64_t stored_bytes;
    uint64_t raw_bytes;
    uint64_t first;      /* derived: first sample index */
} Dlk_chunk_entry;

/* A segment of a tensor's chunk list (formats/dlk-v1.md 4.3.4): an
 * immutable object index/segments/<key> of nchunks consecutive entries,
 * with their totals, so that a state names a run of entries in one small
 * reference that other states share. */
typedef struct Dlk_seg_ref {
    char key[33];        /* XXH3-128 of the object's bytes, 32 hex digits */
    uint64_t nchunks, samples, stored_bytes, raw_bytes;
    uint64_t bytes;      /* the object's size */
} Dlk_seg_ref;

#define DLK_SEG_PREFIX "index/segments/"
#define DLK_SEG_KEY_MAX (sizeof DLK_SEG_PREFIX + 32)
#define DLK_SEG_ENTRIES 1024          /* a writer's segments, and its tail's
                                         longest */
#define DLK_SEG_ENTRIES_MAX 65536     /* what a reader accepts */
#define DLK_SEG_BYTES_MAX ((uint64_t)8 << 20)

typedef struct Dlk_tensor {
    dlk_tensor_spec spec;      /* class_names points into names below */
    char **class_names;
    size_t n_class_names;
    uint64_t samples;
    uint64_t stored_bytes;
    uint64_t raw_bytes;
    bool have_minmax;
    int64_t shape_min[DLK_MAX_NDIM];
    int64_t shape_max[DLK_MAX_NDIM];
    Dlk_chunk_entry *chunks;
    size_t nchunks, capchunks;
    /* The segments that hold the first entries of the list, in order.
     * While segs_pending (a state parsed and its segments not read yet:
     * Dlk_segments_load), chunks holds only the entries after them (the
     * tail), their `first` counted from the segments' samples, and
     * samples and the byte totals are the whole tensor's; otherwise
     * chunks is the whole list and the segments cover its first
     * seg_chunks entries. */
    Dlk_seg_ref *segs;
    size_t nsegs, capsegs;
    size_t seg_chunks;
    bool segs_pending;
} Dlk_tensor;

/* The entries before chunks[0]: while t is pending (a writer opened the
 * head without reading its segments), its segments' chunks, else 0.  A
 * pending tensor's entry i is entry Dlk_tensor_base(t) + i of the whole
 * list; its truncate and add_chunk keep the whole tensor's totals. */
size_t Dlk_tensor_base(const Dlk_tensor *t);
/* The entries after t's segments (the tail, written inline), n of them. */
const Dlk_chunk_entry *Dlk_tensor_tail(const Dlk_tensor *t, size_t *n);
/* A segment's key "index/segments/<hash>" into out. */
void Dlk_seg_key(char out[DLK_SEG_KEY_MAX], const char *hash);
/* Serialize entries e[0..n) as a segment object (*out malloc'd) and
 * describe it in ref (its hash, counts and size). */
dlk_status Dlk_segment_dump(const Dlk_chunk_entry *e, size_t n, char **out,
                            size_t *len, Dlk_seg_ref *ref, dlk_error *err);
/* Check and parse the bytes of the segment ref names (read from
 * index/segments/<ref->key>): its size and hash, then every entry as a
 * manifest's (4.3.3), their number and totals against ref.  *out is
 * malloc'd, ref->nchunks entries. */
dlk_status Dlk_segment_parse(const char *bytes, size_t len,
                             const Dlk_seg_ref *ref, Dlk_chunk_entry **out,
                             dlk_error *err);
/* A pending tensor's list made whole: the entries of its segments, in
 * order (ents[k] the ref->nchunks entries of segment k), then its tail. */
dlk_status Dlk_tensor_attach(Dlk_tensor *t, Dlk_chunk_entry *const *ents,
                             dlk_error *err);
/* Whether t's segments still describe its first seg_chunks entries (a
 * writer that changed the list without Dlk_tensor_truncate would have
 * broken that): checks each segment's first and last keys and its
 * samples by the entries' `first`. */
bool Dlk_tensor_segs_fit(const Dlk_tensor *t);

#define DLK_KEY_INDEX_PREFIX "index/keys/"
#define DLK_KEY_INDEX_MAX (sizeof DLK_KEY_INDEX_PREFIX + 32)
/* The most runs a key index may have (formats/dlk-v1.md 4.3.1). */
#define DLK_KEY_RUNS_MAX 1024

/* A run of the key index (formats/dlk-v1.md 6.9): the object holding the
 * keys of `rows` consecutive rows, after those of the runs before it. */
typedef struct Dlk_key_run {
    char object[DLK_KEY_INDEX_MAX];
    uint64_t rows;
} Dlk_key_run;

#define DLK_VIEW_PREFIX "index/views/"
#define DLK_VIEW_KEY_MAX (sizeof DLK_VIEW_PREFIX + 32)
#define DLK_VIEWS_MAX 4096
#define DLK_VIEW_QUERY_MAX 65536

/* A view named by the manifest (formats/dlk-v1.md 6.10). */
typedef struct Dlk_view_ref {
    char name[DLK_NAME_MAX + 1];
    char object[DLK_VIEW_KEY_MAX];
    uint64_t rows, dataset_rows;
    char *query;               /* never NULL once parsed or added */
} Dlk_view_ref;

#define DLK_WRITES_MAX 16

typedef struct Dlk_manifest {
    Dlk_tensor *tensors;
    size_t ntensors;
    Dlk_view_ref *views;       /* in name order */
    size_t nviews;
    char *parent;     /* commit id this head builds on, or NULL */
    /* the key index (formats/dlk-v1.md 6.9) of the first key_index_rows
     * rows of the key tensor; "" when there is none */
    char key_index[DLK_KEY_INDEX_MAX];
    uint64_t key_index_rows;
    /* the key index as runs (formats/dlk-v1.md 6.9), rows from 0 in run
     * order; nkey_runs 0 when absent */
    Dlk_key_run *key_runs;
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
} Dlk_manifest;

/* The longest key_base (formats/dlk-v1.md 4.3.1). */
#define DLK_KEY_BASE_MAX 4096
/* Whether s is a key_base: a source URL ending in '/' (s3://BUCKET/,
 * gs://BUCKET/ or an absolute path), at most DLK_KEY_BASE_MAX bytes of
 * printable UTF-8. */
bool Dlk_key_base_valid(const char *s);

/* Whether id is among m's writes. */
bool Dlk_manifest_wrote(const Dlk_manifest *m, const char *id);
/* Append id to m's writes (dropping the oldest past DLK_WRITES_MAX),
 * unless it is the newest already. */
void Dlk_manifest_add_write(Dlk_manifest *m, const char *id);

/* A tensor or view name: 1..64 bytes of [A-Za-z0-9_.-], not starting
 * with '.'. */
bool Dlk_name_valid(const char *s);

/* Rows of a state: the fewest samples of any tensor (0 without any). */
uint64_t Dlk_manifest_rows(const Dlk_manifest *m);

/* Parse a manifest JSON document (bounded: size, depth, counts). */
dlk_status Dlk_manifest_parse(const char *json, size_t len, const char *name,
                              Dlk_manifest *m, dlk_error *err);
/* The same from a document Dlk_json_load accepted (root stays the
 * caller's): the fields of a manifest, which a commit shares. */
struct json_t;
dlk_status Dlk_manifest_from_json(struct json_t *root, const char *name,
                                  Dlk_manifest *m, dlk_error *err);
/* Serialize; *out is malloc'd NUL-terminated JSON. */
dlk_status Dlk_manifest_dump(const Dlk_manifest *m, char **out, size_t *len,
                             dlk_error *err);
void Dlk_manifest_free(Dlk_manifest *m);
/* Validate a tensor spec (name, dtype, shape, codec, level). */
dlk_status Dlk_spec_check(const dlk_tensor_spec *s, dlk_error *err);
/* Deep-copy a spec into t (class names duplicated). */
dlk_status Dlk_tensor_init(Dlk_tensor *t, const dlk_tensor_spec *s,
                           dlk_error *err);
void Dlk_tensor_fini(Dlk_tensor *t);
dlk_status Dlk_tensor_add_chunk(Dlk_tensor *t, const Dlk_chunk_entry *e,
                                const int64_t *smin, const int64_t *smax,
                                dlk_error *err);
/* Keep the first n chunk entries (their totals recomputed).  shape_min
 * and shape_max are left as they are: the samples of the dropped entries
 * are appended again by the callers (a chunk replaced by its
 * compaction), so the bounds stay right. */
void Dlk_tensor_truncate(Dlk_tensor *t, size_t n);
/* Find the chunk holding sample i (binary search); -1 if out of range. */
ssize_t Dlk_tensor_find_chunk(const Dlk_tensor *t, uint64_t i);
/* The bytes 64 + index_bytes that the chunk of entry e of tensor t must
 * have by the manifest alone (its header and index: one ranged read),
 * or 0 when they cannot be known (a tensor without part_bytes whose
 * chunks may or may not carry a part table; an entry out of range). */
uint64_t Dlk_chunk_expected_head(const Dlk_tensor *t,
                                 const Dlk_chunk_entry *e);

#endif /* DLK_FORMAT_MANIFEST_H */
