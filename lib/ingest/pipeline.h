/* pipeline.h - the parts of raw-media ingest (lib/ingest/): the source
 * listing grouped into rows, labels, building a row's samples, staging
 * manifests and their merge, and the threaded pipeline that ties them. */
#ifndef DLK_INGEST_PIPELINE_H
#define DLK_INGEST_PIPELINE_H

#include "dataset/dataset.h"
#include "media/decode.h"
#include "util/abi.h"
#include "util/check.h"
#include "util/clock.h"

/* What an object is, from its key's extension. */
typedef enum ing_role {
    ING_NONE = 0, /* unknown: ignored */
    ING_IMAGE,    /* .jpg .jpeg .png */
    ING_VIDEO,    /* .mp4 .m4v .mov .mkv .webm .avi */
    ING_CLS,      /* class: an integer or a class name */
    ING_TXT,      /* text: u8 bytes */
    ING_JSON,     /* numeric fields -> tensors of the same name */
    ING_NPY       /* "stem.TENSOR.npy": one sample of TENSOR */
} ing_role;

typedef struct ing_obj {
    char *key;          /* relative to the source root */
    char *version;      /* S3 ETag, or a file's size and mtime */
    uint64_t size;
    uint32_t stem_len;  /* key[0..stem_len) is the row's stem */
    ing_role role;
    char tensor[DLK_NAME_MAX + 1]; /* ING_NPY: the tensor named */
    /* A member of a tar shard (tar.c): shard is 1 + its index in the
     * source's shards (0: an object of its own), key[member..] the
     * member's path in the shard, off where its bytes start there (in
     * a compressed shard: the member's number, counting every header). */
    uint32_t shard, member;
    uint64_t off;
    /* A compressed shard's small member (a label, a caption): its size
     * bytes, read while listing, so that neither the class names' pass
     * nor its row streams the shard for it (NULL: read from the store) */
    uint8_t *inl;
} ing_obj;

/* A tar shard of the source (tar.c): listed, its members made objects.
 * A compressed one (gz: ".tar.gz", ".tgz") places its members by their
 * number in the shard (ing_obj.off), read by streaming it (tgz.c). */
typedef struct ing_shard {
    char *key;
    char *version;
    uint64_t size;
    bool gz;
} ing_shard;

/* A row: objects [first, first + n) share one stem. */
typedef struct ing_row {
    size_t first;
    uint32_t n;
} ing_row;

typedef struct ing_source {
    Dlk_store *store;
    ing_obj *objs;      /* sorted by (stem, key) */
    size_t nobjs, cap;
    ing_row *rows;      /* sorted by stem */
    size_t nrows;
    uint64_t ignored;   /* objects of no known role */
    uint64_t npy;       /* .npy objects */
    ing_shard *shards;  /* the tar shards listed, in listing order */
    size_t nshards, shards_cap;
    struct ing_unsafe {
        char *key;      /* escaped (Dlk_key_escape) */
        const char *why;
        bool whole;     /* why is the whole reason (ing_unsafe_reason) */
    } *unsafe;          /* keys no store may read ("..", control bytes,
                           not UTF-8), and files a metadata file names
                           that the source lacks: skipped rows, sorted */
    size_t nunsafe, capunsafe;
    struct ing_unused {
        char *key;      /* escaped (Dlk_key_escape) */
        const char *why;
    } *unused;          /* objects that cannot be a sample (a README,
                           .DS_Store, _SUCCESS, the --labels manifest, a
                           file of no known kind): the first
                           ING_UNUSED_KEPT, in listing order */
    size_t nunused, capunused;
    uint64_t unused_total; /* all of them */
    char *labels_key;   /* the --labels manifest's key, when inside */
    bool labels_coco;   /* ... or the --coco file's */
    struct ing_labels *manifest; /* the run's manifest, read already for
                           this listing (schema.c), or NULL */
    char **meta;        /* keys of the metadata files (metadata.jsonl,
                           metadata.csv: metadata.c), in listing order */
    size_t nmeta, capmeta;
    char *base;         /* the source's url, objs[].key's prefix in a row's
                           identity (ing_source_base); NULL: none */
    bool oom;
    bool stopped;       /* o->stop asked to stop while listing */
    /* what the store's cancel asks (o->stop, and the caller's own
     * cancel): a run that stops wants no more of the source at once,
     * a listing or GET in flight included; held while the store is */
    struct ing_cancel *cancel;
    /* the stream readers of compressed shards (tgz.c), or NULL: written
     * by the fetches of a const source, under locks of their own */
    struct ing_tgz *tgz;
} ing_source;

#define ING_UNUSED_KEPT 1000

/* The url that, followed by an object's key, names the object anywhere
 * (formats/dlk-v1.md 6.9): "s3://BUCKET/PREFIX/", "gs://BUCKET/PREFIX/"
 * or the directory's absolute path with a final '/', into *out
 * (malloc'd). */
dlk_status ing_source_base(const char *url, char **out, dlk_error *err);

/* List `url` (s3://bucket/prefix, file://DIR or DIR) and group the keys
 * into rows (source.c); `labels` (or NULL), the --labels manifest, is no
 * sample when it lies below `url`.  With o (may be NULL): o->progress is
 * told the keys found so far while the listing runs, and o->stop is
 * polled; when it asks to stop, s->stopped is set once the listing ends.
 * The store is opened with so (NULL: defaults) and o->stop as a cancel
 * too: once it asks to stop, the source's requests end at once
 * (DLK_ECANCELED). */
dlk_status ing_source_open(const char *url, const char *labels,
                           const dlk_store_options *so,
                           const dlk_ingest_opts *o, ing_source *s,
                           dlk_error *err);
/* The caller's options (dlk.h, "Versioned structs") as the library's
 * own struct, in *own; *o then points at it (NULL stays NULL). */
static inline dlk_status ing_opts_own(const dlk_ingest_opts **o,
                                      dlk_ingest_opts *own, dlk_error *err)
{
    if (!*o)
        return DLK_OK;
    dlk_status rc = abi_copy_in(own, sizeof *own, *o, "dlk_ingest_opts",
                                err);
    *o = own;
    return rc;
}
/* The store options of an ingest's options (NULL for none). */
static inline const dlk_store_options *ing_store(const dlk_ingest_opts *o)
{
    return o ? o->store : NULL;
}
/* The reason an unsafe entry is skipped for, into out. */
void ing_unsafe_reason(const struct ing_unsafe *u, char *out, size_t cap);
/* Add keys[0..n) as skipped rows of reason why (a static string), and
 * keep the list sorted; -1 when out of memory. */
int ing_source_missing(ing_source *s, const char *const *keys, size_t n,
                       const char *why);
/* Keep (up to ING_UNUSED_KEPT) and count an object that is no sample. */
void ing_source_unused(ing_source *s, const char *key, const char *why);
/* What the listing of s's store passes over (a local tree's symbolic
 * links, special files, directories too deep: Dlk_store's `passed`)
 * kept and counted as ing_source_unused, so that every file of a tree
 * is either ingested or reported with its reason (unused.c). */
void ing_source_watch_passed(ing_source *s);

/* What the tensors of a schema take from a row (unused.c). */
typedef struct ing_feeds {
    bool media;   /* an image or video tensor: rows without one are no
                     samples */
    bool text;    /* a text tensor takes .txt objects */
    bool label;   /* a class_label tensor takes .cls objects */
} ing_feeds;
/* Add what tensor s takes to f. */
void ing_feeds_add(ing_feeds *f, const dlk_tensor_spec *s);
/* Whether a row is a sample of a schema that takes f.  For a row that is
 * not, each of its objects, and for one that is, each object that feeds
 * no tensor, is passed to report (may be NULL) with the reason and
 * counted in *unused. */
bool ing_row_is_sample(const ing_source *s, size_t row, const ing_feeds *f,
                       void (*report)(void *ud, const char *key,
                                      const char *why),
                       void *ud, uint64_t *unused);
void ing_source_free(ing_source *s);
/* Add an object of the source: a tar shard's member when shard
 * (1 + its index) is not 0, key[member..] its path, off where its bytes
 * start in the shard; else an object of its own (ing_source_add). */
int ing_source_add_obj(ing_source *s, const char *key, uint64_t size,
                       const char *version, uint32_t shard, uint32_t member,
                       uint64_t off);
/* Whether key names a tar shard (".tar"), and whether a compressed one
 * (".tar.gz", ".tgz"), whose members are read by streaming it (tar.c). */
bool ing_tar_key(const char *key);
bool ing_tgz_key(const char *key);
/* Whether any of s's shards is compressed. */
bool ing_has_tgz(const ing_source *s);
/* The stream readers of s's compressed shards (tgz.c): made once the
 * shards are listed, freed with the source. */
dlk_status ing_tgz_new(ing_source *s, dlk_error *err);
void ing_tgz_free(struct ing_tgz *t);
/* The bytes of member o of a compressed shard (appended to out), read on
 * from where the shard's reader is, from the shard's start when it has
 * passed o, or from the members it kept; the caller bounds o->size. */
dlk_status ing_tgz_get(const ing_source *s, const ing_obj *o,
                       Dlk_buf *out, dlk_error *err);
/* Before rows[0..n) of s are fetched: every reader closed, every member
 * kept dropped, and the members kept on the way from then on only those
 * of the rows' objects that are fetched (tgz.c). */
dlk_status ing_tgz_plan(const ing_source *s, const size_t *rows, size_t n,
                        dlk_error *err);
/* Readers of compressed shards opened since ing_tgz_plan: each one a
 * read of its shard from its start. */
uint64_t ing_tgz_reads(const struct ing_tgz *t);
/* The members of every shard listed in s, added as objects (tar.c):
 * each shard's headers read through s's store (mapped when local,
 * else in ranges, none of it kept); a shard that is not a readable tar
 * fails (DLK_EDECODE naming it).  o->stop (o may be NULL) is polled
 * between shards. */
dlk_status ing_tar_list(ing_source *s, const dlk_ingest_opts *o,
                        dlk_error *err);
/* The bytes of object o (appended to out, at most max): the object
 * itself, a tar member's range of its shard, or a compressed shard's
 * member (ing_tgz_get). */
dlk_status ing_obj_get(const ing_source *s, const ing_obj *o, uint64_t max,
                       Dlk_buf *out, dlk_error *err);
/* The first n bytes of object o, or all of it when smaller (appended to
 * out): a header read without fetching the rest (a compressed shard's
 * member is read whole). */
dlk_status ing_obj_head(const ing_source *s, const ing_obj *o, uint64_t n,
                        Dlk_buf *out, dlk_error *err);
/* The parent folder of object o (ing_parent_folder): for a tar member,
 * of its path in the shard, else of the shard's key, so that members
 * take the folder their shard lies in.  0, or -1 when none. */
int ing_obj_folder(const ing_source *s, const ing_obj *o, char *out,
                   size_t cap);
/* The two halves of ing_source_open after the store is open: add each
 * listed object (ud: the source; a Dlk_list_version_fn), then sort and
 * group them (url names the source in messages). */
int ing_source_add(void *ud, const char *key, uint64_t size,
                   const char *version);
dlk_status ing_source_finish(ing_source *s, const char *url, dlk_error *err);
/* The stem of a row (not NUL-terminated: *len bytes). */
const char *ing_row_stem(const ing_source *s, size_t row, size_t *len);
/* Compare row's stem with a NUL-terminated stem. */
int ing_row_cmp(const ing_source *s, size_t row, const char *stem);
/* Parent folder of an object key (relative to the root): into out, 0 on
 * success, -1 when the key has no folder. */
int ing_parent_folder(const char *key, char *out, size_t cap);

/* Source keys (keys.c; formats/dlk-v1.md 6.9): the tensors that hold
 * each row's key and version, and the set of (key, version) hashes a
 * dataset holds. */
#define ING_KEY_TENSOR DLK_KEY_TENSOR
#define ING_KEY_VERSION_TENSOR DLK_KEY_VERSION_TENSOR
/* (XXH3-64 of the key, of the version; version 0: unknown), sorted by
 * ing_keyset_sort */
typedef Dlk_key_ent ing_key_entry;
typedef Dlk_key_ents ing_keyset;
/* ING_KEY_UNSURE: a relative key (formats/dlk-v1.md 6.9) of another
 * version, and no key_base to tell whether it is this object's */
enum { ING_KEY_NEW = 0, ING_KEY_PRESENT = 1, ING_KEY_CHANGED = 2,
       ING_KEY_UNSURE = 3 };
void ing_keyset_free(ing_keyset *k);
dlk_status ing_keyset_add(ing_keyset *k, uint64_t kh, uint64_t vh,
                          dlk_error *err);
void ing_keyset_sort(ing_keyset *k);
/* ING_KEY_NEW, ING_KEY_PRESENT (with this version) or ING_KEY_CHANGED. */
int ing_keyset_find(const ing_keyset *k, uint64_t kh, uint64_t vh);
/* The indices of the tensors "key" and "key_version" (text, u8 [-1]):
 * true when the schema has both. */
bool ing_key_tensors(const Dlk_manifest *m, int *t_key, int *t_ver);
/* Their specs, for a new dataset. */
void ing_key_specs(dlk_tensor_spec out[2]);
/* specs[0..*n) and the key tensors' after them, in *out (malloc'd, a
 * shallow copy; *n grows by 2), or *out NULL when a tensor of specs has
 * either name already. */
dlk_status ing_key_specs_add(const dlk_tensor_spec *specs, size_t *n,
                             dlk_tensor_spec **out, dlk_error *err);
uint64_t ing_key_hash(const char *key, size_t len);
uint64_t ing_version_hash(const char *v, size_t len);
/* A row's key relative to the source (its display form): its image's or
 * video's key, else its stem (*len bytes). */
const char *ing_row_key(const ing_source *s, size_t row, size_t *len);
/* A row's identity, the sample of its "key": the source's base and the
 * row's key, into out (replaced). */
dlk_status ing_row_ident(const ing_source *s, size_t row, Dlk_buf *out,
                         dlk_error *err);
/* A row's version text: its objects' versions in key order, with a space
 * between two. */
dlk_status ing_row_version(const ing_source *s, size_t row, Dlk_buf *out,
                           dlk_error *err);
/* The hashes a row is looked up by: of its identity, of its key
 * relative to the source (rel), of its identity less key_base when it
 * starts with that (based; NULL key_base: none), and of its version. */
typedef struct ing_row_hashes {
    uint64_t key, rel, based, version;
    bool has_based;
} ing_row_hashes;
dlk_status ing_row_key_hashes(const ing_source *s, size_t row,
                              const char *key_base, Dlk_buf *tmp,
                              ing_row_hashes *h, dlk_error *err);
/* What the head's keys k say of a listed row: ING_KEY_NEW, _PRESENT,
 * _CHANGED, or _UNSURE (have_base: the head or the run names a
 * key_base). */
int ing_key_classify(const ing_keyset *k, const ing_row_hashes *h,
                     bool have_base);
/* Add the key tensor's rows [from, samples) of ds->m to k (unsorted). */
dlk_status ing_keyset_add_rows(dlk_dataset *ds, int t_key, int t_ver,
                               uint64_t from, ing_keyset *k, dlk_error *err);
/* Every key of ds->m: its key index, then the rows past it (sorted). */
dlk_status ing_keyset_load(dlk_dataset *ds, int t_key, int t_ver,
                           ing_keyset *k, dlk_error *err);
/* The keys of ds->m whose key hash is among q[0..nq) (sorted), sorted:
 * what ing_key_classify needs for rows of those hashes, read from the
 * index's blocks that may hold them (Dlk_keyidx_lookup). */
dlk_status ing_keyset_lookup(dlk_dataset *ds, int t_key, int t_ver,
                             const uint64_t *q, size_t nq, ing_keyset *k,
                             dlk_error *err);
/* Bring ds->m's key index up to its key tensor's rows (the merge). */
dlk_status ing_keyidx_update(dlk_dataset *ds, dlk_error *err);
/* Record base (valid, Dlk_key_base_valid) as the head's key_base. */
dlk_status ing_keys_set_base(const char *url, const dlk_store_options *so,
                             const char *base, dlk_error *err);
/* Give the dataset at url the key tensors when it has no samples and no
 * tensor of their names yet (an ingest into a dataset made without). */
dlk_status ing_keys_prepare(const char *url, const dlk_store_options *so,
                            dlk_error *err);

/* A CSV or JSONL label manifest (labels.c).  Column 0 is the key; the
 * other columns are values kept as text. */
typedef struct ing_labels {
    char *name;          /* path or URL, for messages */
    char **cols;         /* ncols names; cols[0] is the key column */
    size_t ncols;
    int label_col;       /* index of "label" (or column 1), -1: none */
    char **cells;        /* nrows * ncols, cells[r*ncols + c] */
    size_t nrows;
    size_t *slots;       /* open-addressing hash of keys: row + 1 */
    size_t nslots;
    bool exact;          /* metadata files: keys are whole object keys,
                            matched exactly; no label column but by name */
    bool coco;           /* exact, from a COCO file (coco.c) */
} ing_labels;

/* A COCO annotation file (--coco; coco.c) as an exact manifest: key
 * file_name, then ING_COCO_BOXES ("[[x,y,w,h],...]"), ING_COCO_CATEGORIES
 * ("[id,...]") and ING_COCO_IMAGE_ID; with names (may be NULL), the
 * categories' names by id ("" for ids none has), *nnames of them. */
#define ING_COCO_BOXES "boxes"
#define ING_COCO_CATEGORIES "category_ids"
#define ING_COCO_IMAGE_ID "image_id"
#define ING_COCO_MAX_CATEGORY 1000000 /* a tensor's class names, at most */
dlk_status ing_coco_load(const char *src, const dlk_store_options *so,
                         ing_labels *l, char ***names, size_t *nnames,
                         dlk_error *err);
/* Read a whole manifest named by a path (a local link resolved) or an
 * s3:// or gs:// URL, at most 1 GiB (labels.c). */
dlk_status ing_manifest_read(const char *src, const dlk_store_options *so,
                             Dlk_buf *b, dlk_error *err);

/* Parse a manifest (CSV with a header row, or JSON Lines) named name into
 * l, its column keycol first (exact: a metadata file, whose key column
 * must be there; else column 0 is the key); no index yet. */
dlk_status ing_labels_parse(const void *data, size_t len, const char *name,
                            const char *keycol, bool exact, ing_labels *l,
                            dlk_error *err);
/* The hash of l's keys (a key twice is an error). */
dlk_status ing_labels_index(ing_labels *l, dlk_error *err);
/* Whether key names a metadata file: its base name is metadata.jsonl or
 * metadata.csv (metadata.c). */
bool ing_meta_name(const char *key);
/* The metadata files of src (src->meta) as one manifest, each file_name
 * made a key of the source by the folder of its file (metadata.c). */
dlk_status ing_meta_load(const ing_source *src, ing_labels *l,
                         dlk_error *err);
/* The files l names that src lacks, added to src's skipped rows. */
dlk_status ing_meta_missing(ing_source *src, const ing_labels *l,
                            dlk_error *err);
/* The metadata row that names an object of source row `row`, or -1 (a
 * stray: no sample). */
ssize_t ing_meta_row(const ing_labels *l, const ing_source *s, size_t row);
/* Whether source row `row` is a stray of metadata meta (a manifest of
 * metadata files; NULL or another manifest: never): each of its objects
 * counted in *unused and, when report, told to o->on_unused. */
bool ing_meta_stray(const ing_labels *meta, const ing_source *src,
                    size_t row, const dlk_ingest_opts *o, bool report,
                    uint64_t *unused);
/* The manifest of a run: o->coco, o->labels, else, unless
 * o->no_metadata, the source's metadata files (src->manifest, taken, when
 * read already); *have false when none (metadata.c). */
dlk_status ing_labels_for(const dlk_ingest_opts *o, ing_source *src,
                          ing_labels *l, bool *have, dlk_error *err);

dlk_status ing_labels_load(const char *src, const dlk_store_options *so,
                           ing_labels *l, dlk_error *err);
void ing_labels_free(ing_labels *l);
/* The row for an object key: matched as the full relative key, its stem,
 * its base name or its base name's stem.  -1 when absent. */
ssize_t ing_labels_find(const ing_labels *l, const char *key,
                        size_t stem_len);
/* Append the class names that the samples of src give (from labels, or
 * NULL: from their folders) and the head's class_label tensor lacks to
 * its class list, in byte order after the names it has, and publish the
 * head; again on a newer head when another writer replaced it first
 * (classes.c).  Nothing with o->strict_classes; nothing written with
 * o->dry_run (the names are still told to o->on_new_class). */
dlk_status ing_classes_grow(const char *url, const dlk_ingest_opts *o,
                            const ing_source *src, const ing_labels *labels,
                            dlk_ingest_result *res, dlk_error *err);
/* Parse text as numbers: "3", "-1.5", "[1, 2, 3]", "[[1,2],[3,4]]".
 * Fills up to cap values; *n values, *inner the length of nested rows
 * (0 when flat).  Returns 0, or -1 when the text is not numeric. */
int ing_parse_numbers(const char *text, double *v, size_t cap, size_t *n,
                      size_t *inner);

/* One tensor's value in a row. */
typedef struct ing_val {
    Dlk_buf data;
    int ndim;
    int64_t shape[DLK_MAX_NDIM];
    bool set;
} ing_val;

/* What every row shares (read-only while the pipeline runs). */
typedef struct ing_ctx {
    const ing_source *src;
    const Dlk_tensor *tensors;   /* the dataset's schema */
    size_t ntensors;
    int t_image, t_video, t_label, t_text; /* tensor indices or -1 */
    int t_key, t_key_version;    /* the source key tensors, or -1 */
    Dlk_image_opts img;
    Dlk_video_opts vid;
    const ing_labels *labels;    /* NULL: none */
    bool folder_labels;          /* class from the parent folder */
} ing_ctx;

/* Build the row's values (row.c) from its fetched objects (bufs[i] holds
 * object first+i; NULL data for objects of no role).  On a bad row returns
 * an error whose message is the reason and sets *bad_key to the key at
 * fault.  vals has ctx->ntensors entries, reset by the caller. */
dlk_status ing_row_build(const ing_ctx *c, size_t row, const Dlk_buf *bufs,
                         ing_val *vals, const char **bad_key,
                         dlk_error *err);
/* Check a value against its tensor's schema as dlk_append would. */
dlk_status ing_val_check(const Dlk_tensor *t, const ing_val *v,
                         dlk_error *err);
/* Store n numbers as dtype elements into out (little-endian). */
dlk_status ing_put_numbers(dlk_dtype dt, const double *v, size_t n,
                           Dlk_buf *out, dlk_error *err);

/* Staging (stage.c): each shard of a run keeps its chunk lists and its
 * progress in staging/ingest/<run>/shard-<i>-of-<N>.json, rewritten at
 * every checkpoint; the merge appends all shards to the head. */
typedef struct ing_progress {
    char *done_through;   /* last stem done (appended or skipped), or NULL */
    char **done_also;     /* stems done past done_through (--unordered) */
    size_t n_done_also;
    uint64_t rows, ingested, skipped, bytes_in, bytes_out;
    char *first, *last;   /* the shard's first and last stem */
    struct json_t *errors;/* [{"key","reason"}] */
    bool complete;
} ing_progress;

#define ING_RUN_MAX 33
void ing_progress_free(ing_progress *p);
void ing_stage_key(char *out, size_t cap, const char *run, unsigned shard,
                   unsigned nshards);
/* Load a shard's staging document: its chunk lists replace those of
 * ds->m (whose schema it must match); *exists 0 when there is none. */
dlk_status ing_stage_load(dlk_dataset *ds, const char *key, ing_progress *p,
                          bool *exists, dlk_error *err);
/* Write ds->m's chunk lists and p as the shard's staging document. */
dlk_status ing_stage_write(dlk_dataset *ds, const char *key,
                           const char *source, unsigned shard,
                           unsigned nshards, const char *options,
                           const ing_progress *p, dlk_error *err);
/* Empty the chunk lists of ds->m (the schema stays). */
void ing_stage_reset(dlk_dataset *ds);
/* The merge: when all nshards documents of `run` are complete, append them
 * in shard order to the head.  *merged 1 when the head holds them (now or
 * from before); 0 when some shard is not finished. *already 1 when an
 * earlier run had merged. Idempotent and safe to race. */
dlk_status ing_merge(const char *url, const dlk_store_options *so,
                     const char *run, unsigned nshards, bool *merged,
                     dlk_error *err);
/* 1 when a merge of `run` is recorded as done, 0 if not. */
dlk_status ing_merge_done(Dlk_store *store, const char *run, bool *done,
                          dlk_error *err);

/* One run of dlk_ingest (ingest.c, pipeline.c). */
/* The order rows are appended in (row_order.c). */
typedef struct ing_order {
    bool shuffled;      /* by a keyed hash of the stem; else by stem */
    uint64_t seed;
    bool tables;        /* stems "T/N" are row N of table T (the caller's
                           objects_in_tables) */
    struct ing_lanes *lanes; /* shuffled or tables: the compressed shards'
                                and tables' groups, made by
                                ing_order_rows, freed by ing_order_free */
} ing_order;

/* The order o asks for (shuffled or sorted, its seed, tables). */
ing_order ing_order_of(const dlk_ingest_opts *o);
/* Source row indices in append order, into *out (malloc'd). */
dlk_status ing_order_rows(const ing_source *s, ing_order *o, size_t **out,
                          dlk_error *err);
/* <0, 0, >0 as row comes before, is, or comes after stem in that order
 * (after ing_order_rows of the same s). */
int ing_order_cmp(const ing_source *s, const ing_order *o, size_t row,
                  const char *stem);
void ing_order_free(ing_order *o);

typedef struct ing_run {
    const dlk_ingest_opts *o;
    dlk_ingest_result *res;
    dlk_dataset *ds;        /* the head's schema, this shard's chunks */
    ing_ctx ctx;
    ing_progress prog;
    char stage_key[256];
    const char *source;
    char options[1024];     /* canonical text of what shapes the output */
    char run[ING_RUN_MAX];  /* hash of source, options and shard count */
    unsigned shard, nshards;
    int fetchers, jobs;
    bool failed;            /* stopped by --on-error fail */
    ing_order order;
    size_t *rows;           /* source rows in append order */
    bool interrupted;       /* stopped by o->stop (checkpointed) */
    bool keyed;             /* the dataset has key tensors */
    ing_keyset staged;      /* keyed: keys of the rows this run staged */
    const char *key_base;   /* what the head's relative keys are relative
                               to (--keys-relative-to, else the head's), or
                               NULL */
} ing_run;

/* dlk_ingest with the source listed already (listed, taken and freed;
 * list_s the seconds its listing took) or, NULL, listed here; t0 is when
 * the command's clock started (run.c). */
dlk_status ing_ingest_listed(const char *url, const dlk_ingest_opts *o,
                             ing_source *listed, double t0, double list_s,
                             dlk_ingest_result *res, dlk_error *err);

/* Run rows todo[0..ntodo) (source row indices, in append order) through fetch,
 * decode and append, checkpointing to the staging document. */
dlk_status ing_pipeline_run(ing_run *run, const size_t *todo, size_t ntodo,
                            dlk_error *err);

/* DLK_ENOTFOUND, naming the source, when its listing held no object at
 * all (not even ones that are not samples) (run.c). */
dlk_status ing_source_listed_any(const ing_source *src, const char *source,
                                 dlk_error *err);

/* The rows tried: none ingested from a source that is not empty, or more
 * skipped than o->max_skip allows, fails (DLK_EDECODE, res->rejected),
 * naming the commonest reasons (run.c).  errors: [{"key","reason"}]. */
dlk_status ing_check_outcome(const dlk_ingest_opts *o, const char *source,
                             uint64_t ingested, uint64_t skipped,
                             bool nonempty, const struct json_t *errors,
                             dlk_ingest_result *res, dlk_error *err);

/* Keys of the listing that cannot be read safely: skipped and told to
 * o->on_bad, counted in res; with --on-error fail, DLK_EDECODE at the
 * first (run.c).  Objects that cannot be samples (a README, .DS_Store,
 * _SUCCESS): told to o->on_unused, counted in res (ing_report_unused). */
dlk_status ing_report_unsafe(const dlk_ingest_opts *o, dlk_ingest_result *res,
                             const ing_source *src, dlk_error *err);
void ing_report_unused(const dlk_ingest_opts *o, dlk_ingest_result *res,
                       const ing_source *src);

/* A local directory of .npy files only (npy_tree.c): *out whether its
 * files are rows with keys (each one sample of the tensor its stem names,
 * the dataset keyed or empty); else ing_npy_tree_ingest appends them file
 * by file (ing_npy_dir) and publishes the head. */
dlk_status ing_npy_tree_as_rows(const char *url, const dlk_ingest_opts *o,
                                const ing_source *src, bool *out,
                                dlk_error *err);
dlk_status ing_npy_tree_ingest(const char *url, const dlk_ingest_opts *o,
                               const ing_source *src, dlk_ingest_result *res,
                               dlk_error *err);

#endif
