/* compact.c - keeping chunks near their target size when samples arrive
 * a few at a time: a writer joins its new chunks with the small ones
 * before them that are no larger than all that follows (Dlk_merge_tail,
 * formats/dlk-v1.md 3.8), and compaction rewrites runs of small chunks
 * (left by ingest shards, or by datasets written before joining) into
 * chunks of the target size, and folds the key index's runs into one.  Chunks are
 * immutable: a replaced chunk stays in the store for the commits that
 * name it, and gc removes it once nothing does. */
#include "dataset.h"
#include "util/abi.h"

#include <stdlib.h>
#include <string.h>

/* Drop the builder's samples (a fill that failed half-way). */
static void builder_clear(Dlk_builder *b)
{
    b->raw.len = 0;
    for (size_t i = 0; i < b->nsegs; i++)
        Dlk_buf_free(&b->segs[i]);
    b->nsegs = 0;
    b->bytes = 0;
    b->samples = 0;
    if (b->hash)
        Dlk_hash64_stream_reset(b->hash);
}

/* The chunk of a tensor that ds->cache may hold is replaced. */
static void forget_cached(dlk_dataset *ds, size_t ti)
{
    dlk_chunk_free(ds->cache[ti].chunk);
    ds->cache[ti].chunk = NULL;
}

/* A chunk this handle's head names could not be read: when the head was
 * replaced since it was read, another writer may have replaced that
 * chunk too and gc removed it; that is a conflict (retry), not damage. */
static dlk_status lost_race(dlk_dataset *ds, dlk_status rc, dlk_error *err)
{
    Dlk_obj_info info;
    dlk_error e2;
    if (rc != DLK_ENOTFOUND || !ds->have_etag ||
        Dlk_store_head(ds->store, DLK_KEY_HEAD, &info, &e2) ||
        strcmp(info.etag, ds->etag) == 0)
        return rc;
    return Dlk_fail(err, DLK_ECONFLICT, "the head of '%s' was changed by "
                    "another writer since it was opened; nothing of this run "
                    "was published (retry the command)", ds->url);
}

/* Read the chunk of entry e (a copy: the list may grow meanwhile) and
 * append its samples to tensor ti's builder, in order. */
static dlk_status feed(dlk_dataset *ds, size_t ti, const Dlk_chunk_entry *e,
                       dlk_error *err)
{
    const Dlk_tensor *t = &ds->m.tensors[ti];
    dlk_chunk *c;
    dlk_status rc = Dlk_chunk_load(ds, t, e, DLK_DECODE_VERIFY, NULL, 0, &c,
                                   err);
    for (uint32_t i = 0; !rc && i < e->samples; i++) {
        size_t n;
        int64_t shape[DLK_MAX_NDIM];
        const void *p = dlk_chunk_sample(c, i, &n, shape);
        rc = Dlk_append_sample(ds, ti, p, n, shape, t->spec.ndim, err);
    }
    dlk_chunk_free(c);
    return rc ? lost_race(ds, rc, err) : DLK_OK;
}

/* Below the target size by at least the chunk's mean sample: a chunk that
 * sealing at the target would have given another sample (one sealed
 * because the next did not fit is not small, for a fixed shape exactly). */
static bool small(const Dlk_chunk_entry *e, uint64_t target)
{
    return e->samples && e->samples < DLK_CHUNK_MAX_SAMPLES &&
           e->raw_bytes + e->raw_bytes / e->samples <= target;
}

dlk_status Dlk_compact_from(dlk_dataset *ds, size_t ti, size_t from,
                            dlk_compact_result *res, dlk_error *err)
{
    Dlk_tensor *t = &ds->m.tensors[ti];
    Dlk_builder *b = &ds->builders[ti];
    if (b->samples)
        return Dlk_fail(err, DLK_EINTERNAL, "tensor '%s': compaction with "
                        "samples pending", t->spec.name);
    dlk_status rc = Dlk_seal_wait(ds, err);
    if (rc)
        return rc;
    uint64_t target = Dlk_chunk_target(ds, ti);
    size_t n = t->nchunks, start = from;
    while (start + 1 < n && !(small(&t->chunks[start], target) &&
                              small(&t->chunks[start + 1], target)))
        start++;
    if (start + 1 >= n)
        return DLK_OK; /* no run of two: nothing to rewrite */
    size_t nold = n - start;
    Dlk_chunk_entry *old = malloc(nold * sizeof *old);
    if (!old)
        return Dlk_oom(err);
    memcpy(old, t->chunks + start, nold * sizeof *old);
    Dlk_tensor_truncate(t, start);
    forget_cached(ds, ti);
    bool changed = false;
    for (size_t i = 0; !rc && i < nold;) {
        size_t j = i;
        while (j < nold && small(&old[j], target))
            j++;
        if (j - i < 2) { /* a full chunk, or a small one alone: kept */
            j = j > i ? j : i + 1;
            for (; !rc && i < j; i++)
                rc = Dlk_tensor_add_chunk(t, &old[i], NULL, NULL, err);
            continue;
        }
        size_t before = t->nchunks, i0 = i;
        for (; !rc && i < j; i++) {
            rc = feed(ds, ti, &old[i], err);
            if (!rc && res) {
                res->chunks_read++;
                res->bytes_read += old[i].stored_bytes;
            }
        }
        if (!rc && b->samples)
            rc = Dlk_seal_submit(ds, ti, err);
        if (!rc)
            rc = Dlk_seal_wait(ds, err);
        /* a run that packs into the chunks it had (variable shapes:
         * "small" is judged by the mean sample) changes nothing */
        bool same = !rc && t->nchunks - before == j - i0;
        for (size_t k = 0; same && k < j - i0; k++)
            same = strcmp(t->chunks[before + k].key, old[i0 + k].key) == 0;
        if (!rc && !same) {
            changed = true;
            if (res)
                res->chunks_written += t->nchunks - before;
        }
    }
    if (rc) {
        /* back to the list as it was, so that a flush after the error
         * publishes nothing half-compacted */
        dlk_error e2;
        Dlk_seal_wait(ds, &e2);
        builder_clear(b);
        Dlk_tensor_truncate(t, start);
        for (size_t i = 0; i < nold; i++)
            Dlk_tensor_add_chunk(t, &old[i], NULL, NULL, &e2);
        changed = false;
    }
    free(old);
    if (changed)
        ds->dirty = true;
    return rc;
}

dlk_status Dlk_merge_tail(dlk_dataset *ds, size_t ti, size_t from,
                         dlk_compact_result *res, dlk_error *err)
{
    dlk_status rc = Dlk_seal_wait(ds, err);
    const Dlk_tensor *t = &ds->m.tensors[ti];
    if (rc || from >= t->nchunks)
        return rc;
    uint64_t target = Dlk_chunk_target(ds, ti), added = 0;
    for (size_t i = from; i < t->nchunks; i++)
        added += t->chunks[i].raw_bytes;
    /* A small chunk before the new ones joins them only when it is no
     * larger than all that follows it: so a chunk's bytes are rewritten
     * once each time the bytes after it double, and k new bytes cost
     * O(k log) writes however large the tail, where joining the last
     * chunk whatever its size rewrote up to a chunk per append (and
     * every commit kept each copy). */
    size_t start = from;
    uint64_t tail_added = added;
    while (start > 0 && small(&t->chunks[start - 1], target) &&
           t->chunks[start - 1].raw_bytes <= added) {
        added += t->chunks[start - 1].raw_bytes;
        start--;
    }
    /* the walk reached the first entry of a tail whose segments are not
     * read (Dlk_dataset_open_writer): the chunk before may join too, so
     * the segments are read and the walk is made on the whole list */
    if (start == 0 && t->segs_pending && t->nsegs) {
        size_t base = Dlk_tensor_base(t);
        if ((rc = Dlk_tensor_load(ds, ti, err)))
            return rc;
        from += base;
        added = tail_added;
        for (start = from; start > 0 && small(&t->chunks[start - 1], target) &&
                           t->chunks[start - 1].raw_bytes <= added;
             start--)
            added += t->chunks[start - 1].raw_bytes;
    }
    return Dlk_compact_from(ds, ti, start, res, err);
}

static dlk_status compact_run(dlk_dataset *ds, const dlk_compact_opts *opts,
                              dlk_compact_result *res, dlk_error *err)
{
    if (ds->read_only)
        return Dlk_fail(err, DLK_EINVAL, "dataset opened at a commit is "
                        "read-only");
    uint64_t target = opts->target_bytes;
    if (target > DLK_CHUNK_MAX_RAW / 2)
        return Dlk_fail(err, DLK_ELIMIT, "target size of %llu bytes is over "
                        "the 1 GiB limit", (unsigned long long)target);
    /* samples appended through this handle first, as chunks */
    dlk_status rc = Dlk_dataset_seal(ds, err);
    ds->chunk_target = target;
    for (size_t i = 0; !rc && i < ds->m.ntensors; i++)
        rc = Dlk_tensor_load(ds, i, err); /* every list, whole */
    for (size_t i = 0; !rc && i < ds->m.ntensors; i++) {
        res->chunks_before += ds->m.tensors[i].nchunks;
        rc = Dlk_compact_from(ds, i, 0, res, err);
    }
    if (!rc)
        rc = Dlk_seal_wait(ds, err);
    ds->chunk_target = 0;
    for (size_t i = 0; !rc && i < ds->m.ntensors; i++)
        res->chunks_after += ds->m.tensors[i].nchunks;
    /* the key index's runs, folded into one (formats/dlk-v1.md 6.9) */
    size_t kb = 0, ka = 0;
    if (!rc)
        rc = Dlk_keyidx_fold(ds, &kb, &ka, NULL, err);
    res->key_runs_before = kb;
    res->key_runs_after = ka;
    if (!rc && ds->dirty)
        rc = Dlk_write_head(ds, err);
    return rc;
}

ABI_RUN_WRAPPER(dlk_compact, compact_run, dlk_dataset *, dlk_compact_opts,
                dlk_compact_result)
