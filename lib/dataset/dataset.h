/* dataset.h - the dataset handle, shared by the files of lib/dataset/. */
#ifndef DLK_DATASET_H
#define DLK_DATASET_H

#include "util/error.h"
#include "util/grow.h"
#include "util/buf.h"
#include "util/bytes.h"
#include "util/hash.h"
#include "store/store.h"
#include "format/chunk.h"
#include "format/manifest.h"

/* Object keys below the dataset root (formats/dlk-v1.md, "Layout"). */
#define DLK_KEY_DATASET "dlk.json"
#define DLK_KEY_HEAD "staging/manifest.json"
#define DLK_KEY_CHUNKS "chunks/"
#define DLK_KEY_MAIN "refs/heads/main"
#define DLK_KEY_COMMITS "commits/"

/* Samples appended to a tensor and not yet written as a chunk. */
typedef struct Dlk_builder {
    Dlk_buf raw;               /* samples copied in, while nsegs is 0 */
    Dlk_buf *segs;             /* or the payload in parts: samples taken
                                  whole (Dlk_append_take), small ones
                                  copied into the last part */
    size_t nsegs, segs_cap;
    size_t bytes;              /* the payload so far */
    Dlk_hash64_stream *hash;   /* its XXH3-64 so far (raw_hash) */
    uint32_t *shapes;          /* samples*ndim dims (variable shapes) */
    size_t shapes_cap;
    uint32_t samples;
    int64_t smin[DLK_MAX_NDIM], smax[DLK_MAX_NDIM];
    bool tail_seen;            /* new_from is set: samples were appended
                                  since the open or the last
                                  Dlk_dataset_seal */
    size_t new_from;           /* the tensor's chunk count at the first of
                                  them: the chunks from there on are new,
                                  and Dlk_dataset_seal joins the small
                                  ones with the tail (compact.c) */
} Dlk_builder;

/* The most recently read chunk of a tensor, kept for sequential reads. */
typedef struct Dlk_chunk_cache {
    dlk_chunk *chunk;
    size_t index;
} Dlk_chunk_cache;

struct dlk_dataset {
    char *url;
    Dlk_store *store;
    char id[64];
    char *head;                /* main's commit id (or the commit opened),
                                  NULL when there is none */
    Dlk_manifest m;
    char etag[DLK_ETAG_MAX];   /* of the head manifest as read */
    bool have_etag;
    /* this writer's id in the head's writes (formats/dlk-v1.md 4.3.1):
     * random, made at its first replace of the head; an ingest merge sets
     * its run's */
    char write_id[33];
    bool dirty;                /* manifest changed since read */
    bool read_only;            /* opened at a commit */
    Dlk_builder *builders;     /* one per tensor */
    Dlk_chunk_cache *cache;    /* one per tensor */
    struct Dlk_sealer *sealer; /* chunk writer threads, once started */
    uint64_t chunk_target;     /* raw size chunks are sealed at; 0: each
                                  tensor's chunk_bytes (dlk_compact sets
                                  another) */
};

/* The raw size at which tensor ti's chunks are sealed. */
uint64_t Dlk_chunk_target(const dlk_dataset *ds, size_t ti);

/* dlk_append, taking the sample's buffer instead of copying it when the
 * tensor is stored uncompressed and the sample is large: *data then holds
 * a recycled buffer (length 0, perhaps no memory) for the caller's next
 * sample.  Otherwise the sample is copied and *data left as it was. */
dlk_status Dlk_append_take(dlk_dataset *ds, size_t tensor, Dlk_buf *data,
                           const int64_t *shape, int ndim, dlk_error *err);
#define DLK_TAKE_MIN ((size_t)64 << 10) /* smaller samples are copied */
#define DLK_SEGS_MAX 512        /* parts a chunk's payload may have */

/* dlk_append without noting the first new chunk (compact.c feeds the
 * samples of the chunks it rewrites through it). */
dlk_status Dlk_append_sample(dlk_dataset *ds, size_t tensor, const void *data,
                             size_t nbytes, const int64_t *shape, int ndim,
                             dlk_error *err);

/* Joining small chunks and compaction (compact.c). */
/* Rewrite the runs of two or more consecutive small chunks (that could
 * take another sample of their mean size) among tensor ti's entries from
 * index `from` on into chunks of the target size, in place in ds->m; the
 * others are kept as they are.  The builder must be empty.  Adds to the
 * counts of res (may be NULL).  The new chunks are written when it
 * returns; on an error the list is as it was. */
dlk_status Dlk_compact_from(dlk_dataset *ds, size_t ti, size_t from,
                            dlk_compact_result *res, dlk_error *err);
/* Tensor ti's entries from index `from` on are new (this writer's, or an
 * ingest run's): join them, and the small chunks before them that are no
 * larger than all that follows, by Dlk_compact_from (formats/dlk-v1.md
 * 3.8). */
dlk_status Dlk_merge_tail(dlk_dataset *ds, size_t ti, size_t from,
                          dlk_compact_result *res, dlk_error *err);

/* Chunk writers (seal.c). */
#define DLK_SEAL_THREADS 4     /* chunks being encoded and written at once */
typedef struct Dlk_sealer Dlk_sealer;
/* Hand tensor ti's builder (not empty) to a writer: its entry is added to
 * ds->m now, its key filled in when written.  Waits while every writer is
 * busy.  Fails with the first error of an earlier write. */
dlk_status Dlk_seal_submit(dlk_dataset *ds, size_t ti, dlk_error *err);
/* Wait for every chunk handed over, fill in their entries; the first
 * write error, if any (then the manifest must not be published). */
dlk_status Dlk_seal_wait(dlk_dataset *ds, dlk_error *err);
void Dlk_sealer_free(Dlk_sealer *s);
/* A buffer the writers are done with (its length 0), or an empty one. */
Dlk_buf Dlk_seal_recycled(dlk_dataset *ds);
/* Seconds the appending thread has waited for a free chunk writer (all
 * busy: the writes are the bottleneck). */
double Dlk_seal_wait_seconds(const dlk_dataset *ds);

/* "chunks/<tensor>/<hash>" into out. */
#define DLK_CHUNK_KEY_MAX (sizeof DLK_KEY_CHUNKS + DLK_NAME_MAX + 40)
void Dlk_chunk_key(char out[DLK_CHUNK_KEY_MAX], const char *tensor,
                   const char *hash);

/* Decode c->object (already filled: read, or a mapping wrapped with
 * Dlk_buf_wrap) as the chunk of entry e of tensor t, checked against the
 * entry before its payload is touched. */
dlk_status Dlk_chunk_open(dlk_chunk *c, const Dlk_tensor *t,
                          const Dlk_chunk_entry *e, const char *key,
                          unsigned mode, void *buf, size_t cap,
                          dlk_error *err);

/* Read the chunk of entry e of tensor t, checked against the entry. */
dlk_status Dlk_chunk_load(dlk_dataset *ds, const Dlk_tensor *t,
                          const Dlk_chunk_entry *e, unsigned mode, void *buf,
                          size_t cap, dlk_chunk **out, dlk_error *err);
/* The same read through `store` (the dataset's, or a cache in front of
 * it). */
dlk_status Dlk_chunk_load_from(dlk_dataset *ds, Dlk_store *store,
                               const Dlk_tensor *t, const Dlk_chunk_entry *e,
                               unsigned mode, void *buf, size_t cap,
                               dlk_chunk **out, dlk_error *err);

/* Read refs/heads/main: *exists 0 when absent; id and etag otherwise. */
dlk_status Dlk_ref_read(dlk_dataset *ds, char id[DLK_ID_MAX], char *etag,
                        bool *exists, dlk_error *err);
/* The same in two steps, so that the GET can go with others: the request
 * (into b and info), then what its answer says. */
void Dlk_ref_get_req(Dlk_get_req *r, Dlk_buf *b, Dlk_obj_info *info);
dlk_status Dlk_ref_parse(const Dlk_get_req *r, char id[DLK_ID_MAX],
                         char *etag, bool *exists, dlk_error *err);
/* Read and check commits/<id>.json into m; time/message (may be NULL)
 * receive malloc'd copies. */
dlk_status Dlk_commit_load(dlk_dataset *ds, const char *id, Dlk_manifest *m,
                           char **time, char **message, uint64_t *bytes_added,
                           uint64_t *chunks_added, dlk_error *err);

/* Dlk_commit_load of commit id as reached through via: "main" when
 * refs/heads/main names it, a commit id when that commit's 'parent' does,
 * "" when it is named by id or prefix.  One that does not exist is
 * DLK_ENOTFOUND only in the last case: main and a parent only ever name a
 * complete commit (formats/dlk-v1.md 6.3), so otherwise it is a broken
 * history, DLK_ECORRUPT naming who names it.  On an error, fault (may be
 * NULL) receives the key of the object at fault: the commit, or the one
 * that names a missing one.  Every reader of commits (log, --at and
 * main~N, verify --all, gc, commit) goes through here or Dlk_resolve_via,
 * so that all of them read each commit by the same rules
 * (Dlk_commit_parse). */
#define DLK_COMMIT_KEY_MAX 64
dlk_status Dlk_commit_follow(dlk_dataset *ds, const char *via,
                             const char *id, Dlk_manifest *m, char **time,
                             char **message, uint64_t *bytes_added,
                             uint64_t *chunks_added,
                             char fault[DLK_COMMIT_KEY_MAX], dlk_error *err);
/* dlk_resolve; via receives how the commit is reached, for
 * Dlk_commit_follow. */
dlk_status Dlk_resolve_via(dlk_dataset *ds, const char *ref,
                           char id[DLK_ID_MAX], char via[DLK_ID_MAX],
                           dlk_error *err);

/* The chunks that states of a dataset reference (refs.c). */
typedef struct Dlk_ref_chunk {
    char key[DLK_CHUNK_KEY_MAX];
    const Dlk_tensor *t;
    const Dlk_chunk_entry *e;
} Dlk_ref_chunk;

typedef struct Dlk_ref_set {
    Dlk_ref_chunk *v;
    size_t n, cap;
    Dlk_manifest *extra;  /* commits loaded by add_history */
    size_t nextra, capextra;
    /* the segments the states name (an open-addressed set of their
     * hashes), each read once however many states share it, and the
     * entries read from them, which v points into */
    char (*segs)[33];
    size_t segs_cap, nsegs;
    Dlk_chunk_entry **segents;
    size_t nsegents, capsegents;
} Dlk_ref_set;


/* Called for an object that cannot be read: a commit (the walk stops
 * there) or a segment. */
typedef void (*Dlk_refs_bad_fn)(void *ud, const char *key, const char *why);

/* The chunks and segments of m, whose lists are whole (not pending). */
dlk_status Dlk_refs_add_manifest(Dlk_ref_set *s, const Dlk_manifest *m,
                                 dlk_error *err);
/* The same for a state read from doc whose segments may not be read yet:
 * each segment no state added before names is read (and checked) once.
 * One that cannot be read or fails a check is reported to bad with its
 * key (then the rest are added) or, without bad, an error. */
dlk_status Dlk_refs_add_state(dlk_dataset *ds, Dlk_ref_set *s,
                              const Dlk_manifest *m, const char *doc,
                              Dlk_refs_bad_fn bad, void *ud, dlk_error *err);
/* Whether a state added names segment key (index/segments/<hash>). */
bool Dlk_refs_has_segment(const Dlk_ref_set *s, const char *key);
/* Add every commit reachable from main, each read by Dlk_commit_follow.
 * A commit that is malformed, unsupported or missing, or a malformed
 * main, is reported to bad with the key at fault (then the walk ends)
 * or, without bad, an error; any other failure is an error. */
dlk_status Dlk_refs_add_history(dlk_dataset *ds, Dlk_ref_set *s,
                                Dlk_refs_bad_fn bad, void *ud,
                                uint64_t *commits, dlk_error *err);
/* The head as it is now, when it is not the one ds read: its chunks and
 * key index.  gc reads it after the staging documents, so that a merge
 * that finished meanwhile (its documents gone, its chunks in a head newer
 * than ds's) has its chunks counted. */
dlk_status Dlk_refs_add_head_now(dlk_dataset *ds, Dlk_ref_set *s,
                                 dlk_error *err);
void Dlk_refs_sort(Dlk_ref_set *s);
bool Dlk_refs_has(const Dlk_ref_set *s, const char *key);
void Dlk_refs_free(Dlk_ref_set *s);

/* Seal and write every partly filled chunk, without publishing the head
 * (ingest checkpoints publish their own staging document). */
dlk_status Dlk_dataset_seal(dlk_dataset *ds, dlk_error *err);

/* Chunks listed by unfinished ingest runs (staging/ingest/RUN/shard-*.json)
 * are in use too: add them, so that gc keeps them and verify --all does
 * not call them unreferenced. */
dlk_status Dlk_refs_add_staging(dlk_dataset *ds, Dlk_ref_set *s,
                                dlk_error *err);

/* ---- the key index (keyidx.c; formats/dlk-v1.md 6.9) ---------------- */

/* The key tensors' names; a dataset has them with exactly the dtype u8,
 * shape [-1] and kind text. */
#define DLK_KEY_TENSOR "key"
#define DLK_KEY_VERSION_TENSOR "key_version"

/* A row's entry: XXH3-64 of its key sample, of its version (0: unknown). */
typedef struct Dlk_key_ent {
    uint64_t key, version;
} Dlk_key_ent;
typedef struct Dlk_key_ents {
    Dlk_key_ent *e;            /* sorted where said (Dlk_key_ents_sort) */
    size_t n, cap;
} Dlk_key_ents;
/* What the index cost (for tests and benchmarks). */
typedef struct Dlk_keyidx_stats {
    uint64_t runs;             /* runs looked up or read */
    uint64_t runs_bad;         /* of them (or a legacy object) unusable */
    uint64_t runs_merged;      /* read to be merged into a new run */
    uint64_t blocks;           /* blocks read by ranged reads */
    uint64_t bytes;            /* bytes of index objects read */
    uint64_t written;          /* bytes of index objects written */
    uint64_t chunk_rows;       /* rows read from the key chunks instead */
} Dlk_keyidx_stats;

void Dlk_key_ents_free(Dlk_key_ents *k);
dlk_status Dlk_key_ents_add(Dlk_key_ents *k, uint64_t kh, uint64_t vh,
                            dlk_error *err);
void Dlk_key_ents_sort(Dlk_key_ents *k);
/* The indices of the tensors "key" and "key_version": true when the
 * schema has both. */
bool Dlk_key_tensors(const Dlk_manifest *m, int *t_key, int *t_ver);
/* The version hash of a key_version sample: 0 when it is empty or all
 * spaces (unknown), else its XXH3-64 (1 for 0). */
uint64_t Dlk_key_version_hash(const void *p, size_t n);
/* The entries of rows [from, to), from the key chunks, added to out
 * (unsorted); only those whose key hash is among q[0..nq) (sorted) when
 * q is not NULL.  st may be NULL. */
dlk_status Dlk_key_rows(dlk_dataset *ds, int t_key, int t_ver, uint64_t from,
                        uint64_t to, const uint64_t *q, size_t nq,
                        Dlk_key_ents *out, Dlk_keyidx_stats *st,
                        dlk_error *err);
/* Every entry of the head's rows whose key hash is among q[0..nq)
 * (sorted; NULL: every entry), into *out (sorted): from the runs of its
 * index by the blocks that may hold them (or its earlier single object,
 * read whole), the rows past the index and those of an unusable run from
 * the key chunks. */
dlk_status Dlk_keyidx_lookup(dlk_dataset *ds, int t_key, int t_ver,
                             const uint64_t *q, size_t nq, Dlk_key_ents *out,
                             Dlk_keyidx_stats *st, dlk_error *err);
/* Bring ds->m's key index up to its key tensors' rows (an ingest's
 * merge): a run of the rows past it, merged with the newest runs by the
 * size rule; an earlier writer's single object becomes the first run. */
dlk_status Dlk_keyidx_update(dlk_dataset *ds, Dlk_keyidx_stats *st,
                             dlk_error *err);
/* Fold ds->m's key index into one run of every row (compaction);
 * *before and *after: its objects before and after. */
dlk_status Dlk_keyidx_fold(dlk_dataset *ds, size_t *before, size_t *after,
                           Dlk_keyidx_stats *st, dlk_error *err);
/* Check every index object m names (key: only that one), each read
 * whole: one missing or failing a check is given to problem. */
typedef void (*Dlk_keyidx_problem_fn)(void *ud, const char *key,
                                      const char *why);
dlk_status Dlk_keyidx_check(dlk_dataset *ds, const Dlk_manifest *m,
                            const char *key, Dlk_keyidx_problem_fn problem,
                            void *ud, dlk_error *err);
/* Whether m names key as (part of) its key index. */
bool Dlk_keyidx_names(const Dlk_manifest *m, const char *key);

/* Segments (segments.c, formats/dlk-v1.md 4.3.4). */
/* Read the segments of m's pending tensors (m was read from doc, named in
 * messages), each checked, so that every list is whole: a missing or bad
 * segment is DLK_ECORRUPT naming it. */
dlk_status Dlk_segments_load(dlk_dataset *ds, Dlk_manifest *m,
                             const char *doc, dlk_error *err);
/* Before ds->m is written: every tensor's entries past its segments, while
 * more than DLK_SEG_ENTRIES, cut into segments written create-only. */
dlk_status Dlk_segments_cut(dlk_dataset *ds, dlk_error *err);
/* One segment's GET, to go with others (Dlk_store_get_each). */
typedef struct Dlk_segment_get {
    const Dlk_seg_ref *ref;
    char key[DLK_SEG_KEY_MAX];
    Dlk_buf buf;
    Dlk_get_req req;
} Dlk_segment_get;
void Dlk_segment_get_init(Dlk_segment_get *s, const Dlk_seg_ref *g);
/* Its answer checked and parsed into *out (ref->nchunks entries). */
dlk_status Dlk_segment_got(Dlk_segment_get *s, const char *doc,
                           Dlk_chunk_entry **out, dlk_error *err);
/* The same for one segment, read now. */
dlk_status Dlk_segment_read(dlk_dataset *ds, const Dlk_seg_ref *g,
                            const char *doc, Dlk_chunk_entry **out,
                            dlk_error *err);
/* Forget m's segments: its lists are written inline (staging documents). */
void Dlk_manifest_drop_segments(Dlk_manifest *m);
/* Whether a tensor of m has segments not read yet. */
bool Dlk_manifest_pending(const Dlk_manifest *m);

/* Read a pending tensor's segments, so that its list is whole (a
 * handle of Dlk_dataset_open_writer, where a change reaches past the
 * tail): waits for the chunk writers first; the builder's first new
 * chunk is renumbered.  DLK_ECORRUPT naming a missing or bad segment. */
dlk_status Dlk_tensor_load(dlk_dataset *ds, size_t ti, dlk_error *err);

/* The head opened to append (ingest): its chunk lists' segments are not
 * read, only their references, the tails and the totals, so that the
 * open reads what the head names inline, however many chunks the
 * dataset has.  For writers that change the tails only (append, seal,
 * an ingest's merge, the key index of the rows past it); what reaches
 * past a tail reads that tensor's segments (Dlk_tensor_load), and
 * Dlk_write_head writes the tails' new segments as for a whole list. */
dlk_status Dlk_dataset_open_writer(const char *url,
                                   const dlk_store_options *store,
                                   dlk_dataset **out, dlk_error *err);

/* Publish ds->m as the head manifest (conditional on the version read). */
dlk_status Dlk_write_head(dlk_dataset *ds, dlk_error *err);

#endif
