/* stage.c - the staging documents of an ingest run and their merge into
 * the head.
 *
 *   staging/ingest/<run>/shard-<i>-of-<N>.json
 *       a manifest (formats/dlk-v1.md) holding only this shard's chunks,
 *       plus an "ingest" object: source, shard, options, rows, first and
 *       last stem, done_through (the last stem whose row is in the chunks
 *       listed or was skipped), done_also, counters, errors, complete.
 *       Rewritten at every checkpoint, after the chunks it lists are
 *       written: the chunk lists and the progress change in one atomic put.
 *   staging/ingest/<run>/merge.json
 *       {"before": [samples per tensor], "after": [...], "done": bool},
 *       written before the head is replaced by the merged one; the merged
 *       head names the run among its "writes", so that a crash or a lost
 *       race at any point is told apart by the run's identity.
 */
#include "pipeline.h"
#include "format/json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_PREFIX "staging/ingest/"

void ing_stage_key(char *out, size_t cap, const char *run, unsigned shard,
                   unsigned nshards)
{
    snprintf(out, cap, STAGE_PREFIX "%s/shard-%u-of-%u.json", run, shard,
             nshards);
}

static void merge_key(char *out, size_t cap, const char *run)
{
    snprintf(out, cap, STAGE_PREFIX "%s/merge.json", run);
}

void ing_progress_free(ing_progress *p)
{
    free(p->done_through);
    for (size_t i = 0; i < p->n_done_also; i++)
        free(p->done_also[i]);
    free(p->done_also);
    free(p->first);
    free(p->last);
    json_decref(p->errors);
    memset(p, 0, sizeof *p);
}

void ing_stage_reset(dlk_dataset *ds)
{
    for (size_t i = 0; i < ds->m.ntensors; i++) {
        Dlk_tensor *t = &ds->m.tensors[i];
        free(t->chunks);
        t->chunks = NULL;
        t->nchunks = t->capchunks = 0;
        t->samples = t->stored_bytes = t->raw_bytes = 0;
        t->have_minmax = false;
    }
    /* a shard's document lists its own chunks inline (formats/dlk-v1.md
     * 6.8.1), never the head's segments */
    Dlk_manifest_drop_segments(&ds->m);
}

static bool same_schema(const Dlk_manifest *a, const Dlk_manifest *b)
{
    if (a->ntensors != b->ntensors)
        return false;
    for (size_t i = 0; i < a->ntensors; i++) {
        const dlk_tensor_spec *x = &a->tensors[i].spec,
                              *y = &b->tensors[i].spec;
        if (strcmp(x->name, y->name) || x->dtype != y->dtype ||
            x->ndim != y->ndim ||
            memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim))
            return false;
    }
    return true;
}

static char *jstrdup(json_t *o, const char *f)
{
    const char *s = json_string_value(json_object_get(o, f));
    return s ? strdup(s) : NULL;
}

static uint64_t juint(json_t *o, const char *f)
{
    json_int_t v = json_integer_value(json_object_get(o, f));
    return v > 0 ? (uint64_t)v : 0;
}

/* Read a staging document: manifest into m, "ingest" into p. */
static dlk_status read_doc(Dlk_store *st, const char *key, Dlk_manifest *m,
                           ing_progress *p, bool *exists, dlk_error *err)
{
    Dlk_buf b;
    Dlk_buf_init(&b);
    *exists = false;
    memset(p, 0, sizeof *p);
    dlk_status rc = Dlk_store_get(st, key, DLK_JSON_MAX_BYTES, &b, NULL, err);
    if (rc == DLK_ENOTFOUND) {
        Dlk_error_clear(err);
        Dlk_buf_free(&b);
        return DLK_OK;
    }
    if (!rc)
        rc = Dlk_manifest_parse((const char *)b.data, b.len, key, m, err);
    if (!rc && Dlk_manifest_pending(m)) {
        Dlk_manifest_free(m);
        rc = Dlk_fail(err, DLK_ECORRUPT, "%s: a staging document lists its "
                      "chunks inline, without 'segments'", key);
    }
    json_t *root = rc ? NULL : Dlk_json_load((const char *)b.data, b.len,
                                             key, "staging manifest", err);
    Dlk_buf_free(&b);
    if (rc || !root)
        return rc ? rc : DLK_ECORRUPT;
    json_t *in = json_object_get(root, "ingest");
    if (!json_is_object(in)) {
        json_decref(root);
        Dlk_manifest_free(m);
        return Dlk_fail(err, DLK_ECORRUPT, "%s: no \"ingest\" object", key);
    }
    p->done_through = jstrdup(in, "done_through");
    p->first = jstrdup(in, "first");
    p->last = jstrdup(in, "last");
    p->rows = juint(in, "rows");
    p->ingested = juint(in, "ingested");
    p->skipped = juint(in, "skipped");
    p->bytes_in = juint(in, "bytes_in");
    p->bytes_out = juint(in, "bytes_out");
    p->complete = json_is_true(json_object_get(in, "complete"));
    json_t *also = json_object_get(in, "done_also");
    size_t n = json_array_size(also);
    if (n && (p->done_also = calloc(n, sizeof *p->done_also)))
        for (size_t i = 0; i < n; i++)
            if (json_is_string(json_array_get(also, i)))
                p->done_also[p->n_done_also++] =
                    strdup(json_string_value(json_array_get(also, i)));
    json_t *errs = json_object_get(in, "errors");
    p->errors = json_is_array(errs) ? json_incref(errs) : json_array();
    json_decref(root);
    *exists = true;
    return DLK_OK;
}

/* Move b's chunk lists into a's tensors. */
static void take_chunks(Dlk_manifest *a, Dlk_manifest *b)
{
    for (size_t i = 0; i < a->ntensors; i++) {
        Dlk_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        free(x->chunks);
        x->chunks = y->chunks;
        x->nchunks = y->nchunks;
        x->capchunks = y->capchunks;
        x->samples = y->samples;
        x->stored_bytes = y->stored_bytes;
        x->raw_bytes = y->raw_bytes;
        x->have_minmax = y->have_minmax;
        memcpy(x->shape_min, y->shape_min, sizeof x->shape_min);
        memcpy(x->shape_max, y->shape_max, sizeof x->shape_max);
        y->chunks = NULL;
        y->nchunks = y->capchunks = 0;
    }
    Dlk_manifest_drop_segments(a);
}

dlk_status ing_stage_load(dlk_dataset *ds, const char *key, ing_progress *p,
                          bool *exists, dlk_error *err)
{
    Dlk_manifest m;
    memset(&m, 0, sizeof m);
    dlk_status rc = read_doc(ds->store, key, &m, p, exists, err);
    if (rc || !*exists)
        return rc;
    if (!same_schema(&ds->m, &m)) {
        Dlk_manifest_free(&m);
        ing_progress_free(p);
        *exists = false;
        return Dlk_fail(err, DLK_ECONFLICT, "%s: the tensors differ from the "
                        "dataset's; remove it to start the run over", key);
    }
    take_chunks(&ds->m, &m);
    Dlk_manifest_free(&m);
    return DLK_OK;
}

dlk_status ing_stage_write(dlk_dataset *ds, const char *key,
                           const char *source, unsigned shard,
                           unsigned nshards, const char *options,
                           const ing_progress *p, dlk_error *err)
{
    char *text;
    size_t len;
    Dlk_manifest m = ds->m;
    m.nwrites = 0; /* the head's history, not the shard's */
    /* nor the head's key index: the document's key tensors are the
     * shard's rows, which no index covers (a merge that lost the race
     * for the head leaves one of its rows and the head's in ds->m) */
    m.key_index[0] = '\0';
    m.key_index_rows = 0;
    m.nkey_runs = 0;
    dlk_status rc = Dlk_manifest_dump(&m, &text, &len, err);
    if (rc)
        return rc;
    json_t *root = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *also = json_array();
    for (size_t i = 0; i < p->n_done_also; i++)
        json_array_append_new(also, json_string(p->done_also[i]));
    if (!p->errors)
        return Dlk_fail(err, DLK_EINTERNAL, "progress without errors array");
    json_t *in = json_pack("{s:s,s:[I,I],s:s,s:I,s:s?,s:s?,s:s?,s:o,s:I,s:I,"
                           "s:I,s:I,s:O,s:b}",
                           "source", source, "shard", (json_int_t)shard,
                           (json_int_t)nshards, "options", options,
                           "rows", (json_int_t)p->rows, "first", p->first,
                           "last", p->last, "done_through", p->done_through,
                           "done_also", also,
                           "ingested", (json_int_t)p->ingested,
                           "skipped", (json_int_t)p->skipped,
                           "bytes_in", (json_int_t)p->bytes_in,
                           "bytes_out", (json_int_t)p->bytes_out,
                           "errors", p->errors,
                           "complete", p->complete);
    if (!root || !in || json_object_set_new(root, "ingest", in)) {
        json_decref(root);
        return Dlk_oom(err);
    }
    text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        return Dlk_oom(err);
    rc = Dlk_store_put(ds->store, key, text, strlen(text), DLK_PUT_ALWAYS,
                       NULL, NULL, err);
    free(text);
    return rc;
}

/* ---- merge ---------------------------------------------------------- */

typedef struct merge_rec {
    bool exists, done;
    json_t *before, *after;
} merge_rec;

static dlk_status read_merge(Dlk_store *st, const char *run, merge_rec *r,
                             dlk_error *err)
{
    char key[256];
    merge_key(key, sizeof key, run);
    memset(r, 0, sizeof *r);
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = Dlk_store_get(st, key, 1u << 20, &b, NULL, err);
    if (rc == DLK_ENOTFOUND) {
        Dlk_error_clear(err);
        Dlk_buf_free(&b);
        return DLK_OK;
    }
    json_t *root = rc ? NULL : Dlk_json_load((const char *)b.data, b.len, key,
                                             "merge record", err);
    Dlk_buf_free(&b);
    if (!root)
        return rc ? rc : DLK_ECORRUPT;
    r->exists = true;
    r->done = json_is_true(json_object_get(root, "done"));
    r->before = json_incref(json_object_get(root, "before"));
    r->after = json_incref(json_object_get(root, "after"));
    json_decref(root);
    return DLK_OK;
}

static dlk_status write_merge(Dlk_store *st, const char *run, json_t *before,
                              json_t *after, bool done, dlk_error *err)
{
    char key[256];
    merge_key(key, sizeof key, run);
    json_t *o = json_pack("{s:s,s:i,s:s,s:O,s:O,s:b}", "format", "dlk",
                          "version", DLK_FORMAT_VERSION, "run", run,
                          "before", before, "after", after, "done", done);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!text)
        return Dlk_oom(err);
    dlk_status rc = Dlk_store_put(st, key, text, strlen(text), DLK_PUT_ALWAYS,
                                  NULL, NULL, err);
    free(text);
    return rc;
}

static json_t *samples_json(const Dlk_manifest *m)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < m->ntensors; i++)
        json_array_append_new(a, json_integer((json_int_t)m->tensors[i].samples));
    return a;
}

dlk_status ing_merge_done(Dlk_store *store, const char *run, bool *done,
                          dlk_error *err)
{
    merge_rec r;
    dlk_status rc = read_merge(store, run, &r, err);
    *done = !rc && r.exists && r.done;
    json_decref(r.before);
    json_decref(r.after);
    return rc;
}

static dlk_status finalize(Dlk_store *st, const char *run, unsigned nshards,
                           json_t *before, json_t *after, dlk_error *err)
{
    dlk_status rc = write_merge(st, run, before, after, true, err);
    for (unsigned i = 0; !rc && i < nshards; i++) {
        char key[256];
        ing_stage_key(key, sizeof key, run, i, nshards);
        rc = Dlk_store_del(st, key, err);
        if (rc == DLK_ENOTFOUND) {
            Dlk_error_clear(err);
            rc = DLK_OK;
        }
    }
    return rc;
}

/* Append every shard's chunks to ds->m in shard order; *ready 0 when a
 * shard is missing or unfinished. */
static dlk_status gather(dlk_dataset *ds, const char *run, unsigned nshards,
                         bool *ready, dlk_error *err)
{
    *ready = false;
    for (unsigned i = 0; i < nshards; i++) {
        char key[256];
        ing_stage_key(key, sizeof key, run, i, nshards);
        Dlk_manifest m;
        memset(&m, 0, sizeof m);
        ing_progress p;
        bool exists;
        dlk_status rc = read_doc(ds->store, key, &m, &p, &exists, err);
        if (rc)
            return rc;
        bool complete = exists && p.complete;
        ing_progress_free(&p);
        if (!complete) {
            if (exists)
                Dlk_manifest_free(&m);
            return DLK_OK;
        }
        if (!same_schema(&ds->m, &m)) {
            Dlk_manifest_free(&m);
            return Dlk_fail(err, DLK_ECONFLICT, "%s: the tensors differ from "
                            "the dataset's", key);
        }
        for (size_t t = 0; !rc && t < m.ntensors; t++) {
            Dlk_tensor *y = &m.tensors[t];
            for (size_t c = 0; !rc && c < y->nchunks; c++)
                rc = Dlk_tensor_add_chunk(&ds->m.tensors[t], &y->chunks[c],
                                          y->have_minmax ? y->shape_min : NULL,
                                          y->have_minmax ? y->shape_max : NULL,
                                          err);
        }
        Dlk_manifest_free(&m);
        if (rc)
            return rc;
    }
    *ready = true;
    return DLK_OK;
}

/* The merge record of run is dropped: a merge that was refused and whose
 * write is not in the head is not under way any more, so that running the
 * command again merges the staged shards onto the new head. */
static void drop_merge(Dlk_store *st, const char *run)
{
    char key[256];
    dlk_error e2;
    merge_key(key, sizeof key, run);
    Dlk_store_del(st, key, &e2);
}

/* The run's shards merged into the head ds holds (cur its sample
 * counts, *after theirs after the merge, the caller's to free), with the
 * record of the merge.  *retry where another writer's chunk or head came
 * first (*refused: this head write). */
static dlk_status merge_shards(dlk_dataset *ds, const char *run,
                               unsigned nshards, json_t *cur, json_t **after,
                               bool *retry, bool *refused, bool *merged,
                               dlk_error *err)
{
    bool ready = false;
    size_t *tail = calloc(ds->m.ntensors + 1, sizeof *tail);
    for (size_t t = 0; tail && t < ds->m.ntensors; t++)
        tail[t] = ds->m.tensors[t].nchunks;
    dlk_status rc = tail ? gather(ds, run, nshards, &ready, err)
                         : Dlk_oom(err);
    /* the shards' small chunks (each shard's last, a whole small
     * run) joined, with the head's small tail where the run is no
     * smaller than it */
    for (size_t t = 0; !rc && ready && t < ds->m.ntensors; t++)
        rc = Dlk_merge_tail(ds, t, tail[t], NULL, err);
    if (!rc && ready)
        rc = Dlk_seal_wait(ds, err);
    /* the key index of the head to be: in the same head write */
    if (!rc && ready)
        rc = ing_keyidx_update(ds, err);
    free(tail);
    if (rc == DLK_ECONFLICT) /* a chunk gone with a newer head */
        *retry = true;
    if (!rc && ready) {
        *after = samples_json(&ds->m);
        rc = write_merge(ds->store, run, cur, *after, false, err);
        ds->dirty = true;
        if (!rc && (rc = Dlk_write_head(ds, err)) == DLK_ECONFLICT)
            *retry = *refused = true;
        if (!rc)
            rc = finalize(ds->store, run, nshards, cur, *after, err);
        *merged = !rc;
    }
    return rc;
}

dlk_status ing_merge(const char *url, const dlk_store_options *so,
                     const char *run, unsigned nshards, bool *merged,
                     dlk_error *err)
{
    *merged = false;
    bool retry = true, refused = false;
    for (int attempt = 0; retry && attempt < 5; attempt++) {
        retry = false;
        dlk_dataset *ds;
        dlk_status rc = Dlk_dataset_open_writer(url, so, &ds, err);
        if (rc)
            return rc;
        /* the merged head names the run as its writer: that, not its
         * sample counts, tells this run's head from another's */
        snprintf(ds->write_id, sizeof ds->write_id, "%s", run);
        merge_rec r;
        json_t *cur = samples_json(&ds->m), *after = NULL;
        rc = read_merge(ds->store, run, &r, err);
        bool ours = Dlk_manifest_wrote(&ds->m, run);
        if (!rc && r.exists && r.done) {
            *merged = true;
        } else if (!rc && r.exists && ours) {
            /* the head is this run's merge (or built on it): record it */
            rc = finalize(ds->store, run, nshards, r.before, r.after, err);
            *merged = !rc;
        } else if (!rc && r.exists && refused && !json_equal(cur, r.before)) {
            /* this process's head write was refused and the head's history
             * does not name it: another writer added rows first */
            drop_merge(ds->store, run);
            rc = Dlk_fail(err, DLK_ECONFLICT, "another writer added rows to "
                          "'%s' while ingest run %s was merging; nothing of "
                          "this run was published (retry the command)", url,
                          run);
        } else if (!rc && r.exists && !json_equal(cur, r.before)) {
            /* rows were added since the record was written and the head's
             * history does not go back to it: whether this run's write is
             * among them cannot be told */
            rc = Dlk_fail(err, DLK_ECONFLICT, "the head of '%s' changed while "
                          "ingest run %s was merging its shards: check it "
                          "with dlk ls and remove staging/ingest/%s/ to "
                          "start over", url, run, run);
        } else if (!rc) {
            /* no record, or the head holds the rows it held when the
             * record was written (rows are never removed, so a head with
             * this run's rows would hold more): merge */
            rc = merge_shards(ds, run, nshards, cur, &after, &retry,
                              &refused, merged, err);
        }
        json_decref(cur);
        json_decref(after);
        json_decref(r.before);
        json_decref(r.after);
        dlk_dataset_free(ds);
        if (!retry)
            return rc;
        /* another shard merged (or wrote) first: look again */
        Dlk_error_clear(err);
    }
    return Dlk_fail(err, DLK_ECONFLICT, "cannot merge ingest run %s into "
                    "'%s': the head keeps changing", run, url);
}
