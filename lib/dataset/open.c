/* open.c - creating, opening and closing datasets; dataset identity. */
#include "dataset.h"
#include "format/docs.h"
#include "format/json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define DATASET_JSON_MAX (64u << 10)

static dlk_status alloc_per_tensor(dlk_dataset *ds, dlk_error *err)
{
    size_t n = ds->m.ntensors ? ds->m.ntensors : 1;
    ds->builders = calloc(n, sizeof *ds->builders);
    ds->cache = calloc(n, sizeof *ds->cache);
    if (!ds->builders || !ds->cache)
        return Dlk_oom(err);
    return DLK_OK;
}

static dlk_dataset *new_handle(const char *url, dlk_error *err)
{
    dlk_dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->url = strdup(url))) {
        free(ds);
        Dlk_oom(err);
        return NULL;
    }
    return ds;
}

/* The first two objects of a listing: how many, and whether the first
 * is dlk.json. */
typedef struct first_objects {
    size_t n;
    bool only_dataset_json;
} first_objects;

static int first_two(void *ud, const char *key, uint64_t size)
{
    (void)size;
    first_objects *f = ud;
    if (f->n++ == 0)
        f->only_dataset_json = strcmp(key, DLK_KEY_DATASET) == 0;
    return f->n >= 2;
}

static dlk_status new_id(char out[33], dlk_error *err)
{
    uint8_t rnd[16];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t r = getrandom(rnd + got, sizeof rnd - got, 0);
        if (r <= 0)
            return Dlk_fail(err, DLK_EIO, "cannot read random bytes");
        got += (size_t)r;
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    return DLK_OK;
}

/* After a conditional write was refused: is the object there exactly what
 * we wrote?  Then the refusal was of our own retry (the first attempt
 * landed and its answer was lost), not of another writer.  info (may be
 * NULL) receives the object's etag. */
static bool landed_anyway(dlk_dataset *ds, const char *key, const char *text,
                          size_t len, Dlk_obj_info *info)
{
    Dlk_buf b;
    Dlk_buf_init(&b);
    Dlk_obj_info tmp;
    bool same = Dlk_store_get(ds->store, key, len + 1, &b, info ? info : &tmp,
                              NULL) == DLK_OK &&
                b.len == len && memcmp(b.data, text, len) == 0;
    Dlk_buf_free(&b);
    return same;
}

static dlk_status write_dataset_json(dlk_dataset *ds, dlk_error *err)
{
    char created[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *o = json_pack("{s:s,s:i,s:s,s:s}", "format", "dlk", "version",
                          DLK_FORMAT_VERSION, "id", ds->id, "created",
                          created);
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!text)
        return Dlk_oom(err);
    dlk_status rc = Dlk_store_put(ds->store, DLK_KEY_DATASET, text,
                                  strlen(text), DLK_PUT_IF_ABSENT, NULL, NULL,
                                  err);
    if (rc == DLK_EEXIST &&
        landed_anyway(ds, DLK_KEY_DATASET, text, strlen(text), NULL)) {
        Dlk_error_clear(err);
        rc = DLK_OK;
    }
    free(text);
    if (rc == DLK_EEXIST)
        return Dlk_fail(err, DLK_EEXIST, "a dataset already exists at '%s'",
                        ds->url);
    return rc;
}

/* dlk.json, as answered to request r. */
static dlk_status parse_dataset_json(dlk_dataset *ds, const Dlk_get_req *r,
                                     dlk_error *err)
{
    if (r->rc == DLK_ENOTFOUND && strstr(r->err.msg, "NoSuchBucket"))
        return Dlk_fail(err, DLK_ENOTFOUND, "no dataset at '%s': %s",
                        ds->url, r->err.msg);
    if (r->rc == DLK_ENOTFOUND)
        return Dlk_fail(err, DLK_ENOTFOUND, "no dataset at '%s' (no %s)",
                        ds->url, DLK_KEY_DATASET);
    if (r->rc)
        return Dlk_get_req_status(r, err);
    return Dlk_dataset_doc_parse((const char *)r->out->data, r->out->len,
                                 DLK_KEY_DATASET, ds->id, sizeof ds->id, err);
}

static dlk_status read_dataset_json(dlk_dataset *ds, dlk_error *err)
{
    Dlk_buf b;
    Dlk_buf_init(&b);
    Dlk_get_req r = {DLK_KEY_DATASET, DATASET_JSON_MAX, &b, NULL, 0, {0}};
    Dlk_store_get_each(ds->store, &r, 1);
    dlk_status rc = parse_dataset_json(ds, &r, err);
    Dlk_buf_free(&b);
    return rc;
}

/* Write the head manifest: create-only the first time, then replace only
 * the version we read, so a concurrent writer is never overwritten. */
dlk_status Dlk_write_head(dlk_dataset *ds, dlk_error *err)
{
    char *text;
    size_t len;
    /* a replace names its writer, so that the head's bytes are this
     * writer's alone (landed_anyway below) and a writer that retries can
     * find its own write in the head's history; a create names none, so
     * that two creates of the same tensors write the same bytes */
    dlk_status rc = ds->have_etag && !ds->write_id[0]
                        ? new_id(ds->write_id, err)
                        : DLK_OK;
    if (!rc && ds->have_etag)
        Dlk_manifest_add_write(&ds->m, ds->write_id);
    /* full tails become segments, written before the head names them */
    if (!rc)
        rc = Dlk_segments_cut(ds, err);
    if (!rc)
        rc = Dlk_manifest_dump(&ds->m, &text, &len, err);
    if (rc)
        return rc;
    Dlk_obj_info info;
    rc = Dlk_store_put(ds->store, DLK_KEY_HEAD, text, len,
                       ds->have_etag ? DLK_PUT_IF_MATCH : DLK_PUT_IF_ABSENT,
                       ds->have_etag ? ds->etag : NULL, &info, err);
    if ((rc == DLK_ECONFLICT || rc == DLK_EEXIST) &&
        landed_anyway(ds, DLK_KEY_HEAD, text, len, &info)) {
        Dlk_error_clear(err);
        rc = DLK_OK;
    }
    free(text);
    if (rc == DLK_ECONFLICT || (rc == DLK_EEXIST && !ds->have_etag))
        return Dlk_fail(err, DLK_ECONFLICT, "the head of '%s' was changed by "
                        "another writer since it was opened; nothing of this "
                        "run was published (retry the command)", ds->url);
    if (rc)
        return rc;
    memcpy(ds->etag, info.etag, sizeof ds->etag);
    ds->have_etag = true;
    ds->dirty = false;
    return DLK_OK;
}

dlk_status dlk_dataset_create(const char *url, const dlk_tensor_spec *specs,
                              size_t n_specs, dlk_dataset **out,
                              dlk_error *err)
{
    return dlk_dataset_create_with(url, specs, n_specs, NULL, out, err);
}

dlk_status dlk_dataset_create_with(const char *url,
                                   const dlk_tensor_spec *specs,
                                   size_t n_specs,
                                   const dlk_store_options *store,
                                   dlk_dataset **out, dlk_error *err)
{
    *out = NULL;
    if (n_specs == 0)
        return Dlk_fail(err, DLK_EINVAL, "a dataset needs at least one "
                        "tensor");
    for (size_t i = 0; i < n_specs; i++) {
        dlk_status rc = Dlk_spec_check(&specs[i], err);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(specs[i].name, specs[j].name) == 0)
                return Dlk_fail(err, DLK_EINVAL, "tensor '%s' is given twice",
                                specs[i].name);
    }
    dlk_dataset *ds = new_handle(url, err);
    if (!ds)
        return DLK_ENOMEM;
    dlk_status rc = Dlk_store_open(url, true, store, &ds->store, err);
    first_objects seen = {0};
    if (!rc)
        rc = Dlk_store_list(ds->store, "", first_two, &seen, err);
    /* dlk.json alone: a create stopped (killed) between its two writes, or
     * one writing its head right now: go on with its id; the head is
     * create-only, and the same tensors give the same head */
    bool half = !rc && seen.n == 1 && seen.only_dataset_json;
    if (!rc && seen.n && !half)
        rc = Dlk_fail(err, DLK_EEXIST, "'%s' is not empty: refusing to "
                      "create a dataset over existing objects", url);
    if (!rc && !(ds->m.tensors = calloc(n_specs, sizeof *ds->m.tensors)))
        rc = Dlk_oom(err);
    for (size_t i = 0; !rc && i < n_specs; i++) {
        rc = Dlk_tensor_init(&ds->m.tensors[i], &specs[i], err);
        ds->m.ntensors = i + 1;
    }
    if (!rc)
        rc = alloc_per_tensor(ds, err);
    if (!rc && half)
        rc = read_dataset_json(ds, err);
    else if (!rc)
        rc = new_id(ds->id, err);
    if (!rc && !half)
        rc = write_dataset_json(ds, err);
    if (!rc)
        rc = Dlk_write_head(ds, err);
    if (rc) {
        dlk_dataset_free(ds);
        return rc;
    }
    *out = ds;
    return DLK_OK;
}

/* The head: dlk.json, the ref and the head manifest, three independent
 * objects read at once (on S3 one round trip instead of three; each read
 * is atomic, and a writer changing the head meanwhile is caught by the
 * head's etag when this handle writes). */
static dlk_status open_head(dlk_dataset *ds, bool lazy, dlk_dataset **out,
                            dlk_error *err)
{
    Dlk_buf b[3];
    for (int i = 0; i < 3; i++)
        Dlk_buf_init(&b[i]);
    Dlk_obj_info ref_info, info;
    Dlk_get_req r[3] = {
        {DLK_KEY_DATASET, DATASET_JSON_MAX, &b[0], NULL, 0, {0}},
        {0},
        {DLK_KEY_HEAD, DLK_JSON_MAX_BYTES, &b[2], &info, 0, {0}},
    };
    Dlk_ref_get_req(&r[1], &b[1], &ref_info);
    Dlk_store_get_each(ds->store, r, 3);
    dlk_status rc = parse_dataset_json(ds, &r[0], err);
    char id[DLK_ID_MAX];
    bool exists = false;
    if (!rc)
        rc = Dlk_ref_parse(&r[1], id, NULL, &exists, err);
    if (!rc && exists && !(ds->head = strdup(id)))
        rc = Dlk_oom(err);
    if (!rc && r[2].rc == DLK_ENOTFOUND)
        rc = Dlk_fail(err, DLK_ECORRUPT, "dataset '%s' has no head "
                      "manifest (%s)", ds->url, DLK_KEY_HEAD);
    else if (!rc)
        rc = Dlk_get_req_status(&r[2], err);
    if (!rc)
        rc = Dlk_manifest_parse((const char *)b[2].data, b[2].len,
                                DLK_KEY_HEAD, &ds->m, err);
    /* a writer's lists stay pending: it changes their tails only, and
     * reads a segment when it must (Dlk_tensor_load) */
    if (!rc && !lazy)
        rc = Dlk_segments_load(ds, &ds->m, DLK_KEY_HEAD, err);
    for (int i = 0; i < 3; i++)
        Dlk_buf_free(&b[i]);
    if (!rc) {
        memcpy(ds->etag, info.etag, sizeof ds->etag);
        ds->have_etag = true;
        rc = alloc_per_tensor(ds, err);
    }
    if (rc) {
        dlk_dataset_free(ds);
        return rc;
    }
    *out = ds;
    return DLK_OK;
}

dlk_status dlk_dataset_open(const char *url, const char *at,
                            dlk_dataset **out, dlk_error *err)
{
    return dlk_dataset_open_with(url, at, NULL, out, err);
}

dlk_status dlk_dataset_open_with(const char *url, const char *at,
                                 const dlk_store_options *store,
                                 dlk_dataset **out, dlk_error *err)
{
    *out = NULL;
    dlk_dataset *ds = new_handle(url, err);
    if (!ds)
        return DLK_ENOMEM;
    dlk_status rc = Dlk_store_open(url, false, store, &ds->store, err);
    if (rc == DLK_ENOTFOUND)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "no dataset at '%s'", url);
    if (!rc && !(at && *at))
        return open_head(ds, false, out, err);
    /* a commit: dlk.json, the commit (and for main, its ref) */
    if (!rc)
        rc = read_dataset_json(ds, err);
    char id[DLK_ID_MAX], via[DLK_ID_MAX];
    if (!rc)
        rc = Dlk_resolve_via(ds, at, id, via, err);
    if (!rc)
        rc = Dlk_commit_follow(ds, via, id, &ds->m, NULL, NULL, NULL, NULL,
                               NULL, err);
    char key[128];
    snprintf(key, sizeof key, DLK_KEY_COMMITS "%s.json", id);
    if (!rc)
        rc = Dlk_segments_load(ds, &ds->m, key, err);
    if (!rc && !(ds->head = strdup(id)))
        rc = Dlk_oom(err);
    ds->read_only = true;
    if (!rc)
        rc = alloc_per_tensor(ds, err);
    if (rc) {
        dlk_dataset_free(ds);
        return rc;
    }
    *out = ds;
    return DLK_OK;
}

dlk_status Dlk_dataset_open_writer(const char *url,
                                   const dlk_store_options *store,
                                   dlk_dataset **out, dlk_error *err)
{
    *out = NULL;
    dlk_dataset *ds = new_handle(url, err);
    if (!ds)
        return DLK_ENOMEM;
    dlk_status rc = Dlk_store_open(url, false, store, &ds->store, err);
    if (rc == DLK_ENOTFOUND)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "no dataset at '%s'", url);
    if (!rc)
        return open_head(ds, true, out, err);
    dlk_dataset_free(ds);
    return rc;
}

dlk_status dlk_log_url(const char *url, const dlk_store_options *store,
                       const char *at, size_t max, dlk_log_fn fn, void *ud,
                       dlk_error *err)
{
    dlk_dataset *ds = new_handle(url, err);
    if (!ds)
        return DLK_ENOMEM;
    ds->read_only = true;
    dlk_status rc = Dlk_store_open(url, false, store, &ds->store, err);
    if (rc == DLK_ENOTFOUND)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "no dataset at '%s'", url);
    if (!rc)
        rc = read_dataset_json(ds, err);
    if (!rc)
        rc = dlk_log(ds, at, max, fn, ud, err);
    dlk_dataset_free(ds);
    return rc;
}

void dlk_dataset_free(dlk_dataset *ds)
{
    if (!ds)
        return;
    Dlk_sealer_free(ds->sealer); /* joins writers still storing chunks */
    for (size_t i = 0; ds->builders && i < ds->m.ntensors; i++) {
        Dlk_builder *b = &ds->builders[i];
        Dlk_buf_free(&b->raw);
        for (size_t j = 0; j < b->nsegs; j++)
            Dlk_buf_free(&b->segs[j]);
        free(b->segs);
        if (b->hash)
            Dlk_hash64_stream_free(b->hash);
        free(b->shapes);
    }
    for (size_t i = 0; ds->cache && i < ds->m.ntensors; i++)
        dlk_chunk_free(ds->cache[i].chunk);
    free(ds->builders);
    free(ds->cache);
    Dlk_manifest_free(&ds->m);
    Dlk_store_free(ds->store);
    free(ds->head);
    free(ds->url);
    free(ds);
}

dlk_status dlk_dataset_close(dlk_dataset *ds, dlk_error *err)
{
    if (!ds)
        return DLK_OK;
    dlk_status rc = ds->read_only ? DLK_OK : dlk_dataset_flush(ds, err);
    dlk_dataset_free(ds);
    return rc;
}

const char *dlk_dataset_url(const dlk_dataset *ds) { return ds->url; }
const char *dlk_dataset_id(const dlk_dataset *ds) { return ds->id; }
const char *dlk_dataset_head(const dlk_dataset *ds) { return ds->head; }
size_t dlk_dataset_ntensors(const dlk_dataset *ds) { return ds->m.ntensors; }

int dlk_dataset_find(const dlk_dataset *ds, const char *name)
{
    for (size_t i = 0; i < ds->m.ntensors; i++)
        if (strcmp(ds->m.tensors[i].spec.name, name) == 0)
            return (int)i;
    return -1;
}

dlk_status dlk_tensor_info_get(const dlk_dataset *ds, size_t tensor,
                               dlk_tensor_info *out, dlk_error *err)
{
    if (tensor >= ds->m.ntensors)
        return Dlk_fail(err, DLK_ENOTFOUND, "no tensor %zu", tensor);
    const Dlk_tensor *t = &ds->m.tensors[tensor];
    memset(out, 0, sizeof *out);
    out->name = t->spec.name;
    out->dtype = t->spec.dtype;
    out->kind = t->spec.kind;
    out->codec = t->spec.codec;
    out->level = t->spec.codec == DLK_CODEC_ZSTD
                     ? (t->spec.level ? t->spec.level : 3) : 0;
    out->ndim = t->spec.ndim;
    out->shape = t->spec.shape;
    out->shape_min = t->have_minmax ? t->shape_min : NULL;
    out->shape_max = t->have_minmax ? t->shape_max : NULL;
    out->samples = t->samples;
    out->chunks = Dlk_tensor_base(t) + t->nchunks;
    out->stored_bytes = t->stored_bytes;
    out->raw_bytes = t->raw_bytes;
    out->chunk_bytes = t->spec.chunk_bytes;
    out->part_bytes = t->spec.part_bytes;
    out->n_class_names = t->n_class_names;
    out->class_names = (const char *const *)t->class_names;
    return DLK_OK;
}

void Dlk_chunk_key(char out[DLK_CHUNK_KEY_MAX], const char *tensor,
                   const char *hash)
{
    snprintf(out, DLK_CHUNK_KEY_MAX, DLK_KEY_CHUNKS "%s/%s", tensor, hash);
}
