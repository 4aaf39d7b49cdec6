/* segments.c - the segment objects that hold runs of a tensor's chunk list
 * (formats/dlk-v1.md 4.3.4): read for a state as it is opened, cut from a
 * full tail before the head that names them is written. */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOAD_BATCH 32 /* segments read at once (each at most 8 MiB) */

static dlk_status load_tensor(dlk_dataset *ds, Dlk_tensor *t,
                              const char *doc, dlk_error *err);

dlk_status Dlk_segment_read(dlk_dataset *ds, const Dlk_seg_ref *g,
                            const char *doc, Dlk_chunk_entry **out,
                            dlk_error *err)
{
    Dlk_segment_get get;
    Dlk_segment_get_init(&get, g);
    Dlk_store_get_each(ds->store, &get.req, 1);
    dlk_status rc = Dlk_segment_got(&get, doc, out, err);
    Dlk_buf_free(&get.buf);
    return rc;
}

void Dlk_segment_get_init(Dlk_segment_get *s, const Dlk_seg_ref *g)
{
    memset(s, 0, sizeof *s);
    s->ref = g;
    Dlk_seg_key(s->key, g->key);
    Dlk_buf_init(&s->buf);
    s->req.key = s->key;
    s->req.max = g->bytes + 1; /* one more: a longer object is refused */
    s->req.out = &s->buf;
}

dlk_status Dlk_segment_got(Dlk_segment_get *s, const char *doc,
                           Dlk_chunk_entry **out, dlk_error *err)
{
    *out = NULL;
    if (s->req.rc == DLK_ENOTFOUND)
        return Dlk_fail(err, DLK_ECORRUPT, "%s names segment %s, which does "
                        "not exist", doc, s->key);
    if (s->req.rc == DLK_ELIMIT)
        return Dlk_fail(err, DLK_ECORRUPT, "%s: larger than the %llu bytes "
                        "its reference in %s says", s->key,
                        (unsigned long long)s->ref->bytes, doc);
    if (s->req.rc) {
        dlk_status rc = Dlk_get_req_status(&s->req, err);
        return Dlk_fail_wrap(err, "segment %s of %s", s->key, doc), rc;
    }
    return Dlk_segment_parse((const char *)s->buf.data, s->buf.len, s->ref,
                             out, err);
}

dlk_status Dlk_segments_load(dlk_dataset *ds, Dlk_manifest *m,
                             const char *doc, dlk_error *err)
{
    dlk_status rc = DLK_OK;
    for (size_t ti = 0; !rc && ti < m->ntensors; ti++)
        rc = load_tensor(ds, &m->tensors[ti], doc, err);
    return rc;
}

dlk_status Dlk_tensor_load(dlk_dataset *ds, size_t ti, dlk_error *err)
{
    Dlk_tensor *t = &ds->m.tensors[ti];
    if (!t->segs_pending)
        return DLK_OK;
    /* the writers' entries are indices of the list, which grows at the
     * front: none may be in flight */
    dlk_status rc = Dlk_seal_wait(ds, err);
    if (rc)
        return rc;
    size_t base = Dlk_tensor_base(t);
    rc = load_tensor(ds, t, DLK_KEY_HEAD, err);
    if (rc)
        return rc;
    Dlk_builder *b = &ds->builders[ti];
    if (b->tail_seen)
        b->new_from += base;
    dlk_chunk_free(ds->cache[ti].chunk);
    ds->cache[ti].chunk = NULL;
    return DLK_OK;
}

static dlk_status load_tensor(dlk_dataset *ds, Dlk_tensor *t,
                              const char *doc, dlk_error *err)
{
    dlk_status rc = DLK_OK;
    if (!t->segs_pending)
        return DLK_OK;
    Dlk_chunk_entry **ents = calloc(t->nsegs, sizeof *ents);
    Dlk_segment_get *gets = calloc(LOAD_BATCH, sizeof *gets);
    Dlk_get_req *reqs = calloc(LOAD_BATCH, sizeof *reqs);
    if (!ents || !gets || !reqs)
        rc = Dlk_oom(err);
    for (size_t k0 = 0; !rc && k0 < t->nsegs; k0 += LOAD_BATCH) {
        size_t n = t->nsegs - k0 < LOAD_BATCH ? t->nsegs - k0
                                              : LOAD_BATCH;
        for (size_t i = 0; i < n; i++) {
            Dlk_segment_get_init(&gets[i], &t->segs[k0 + i]);
            reqs[i] = gets[i].req;
        }
        Dlk_store_get_each(ds->store, reqs, n);
        for (size_t i = 0; i < n; i++) {
            gets[i].req = reqs[i];
            if (!rc)
                rc = Dlk_segment_got(&gets[i], doc, &ents[k0 + i], err);
            Dlk_buf_free(&gets[i].buf);
        }
    }
    if (!rc)
        rc = Dlk_tensor_attach(t, ents, err);
    for (size_t k = 0; ents && k < t->nsegs; k++)
        free(ents[k]);
    free(ents);
    free(gets);
    free(reqs);
    return rc;
}

/* Write a segment create-only; one already there has these bytes (its
 * name is their hash), but may be unreferenced and old enough for gc:
 * renewed as a reused chunk is (formats/dlk-v1.md 6.6). */
static dlk_status put_segment(dlk_dataset *ds, const char *key,
                              const char *text, size_t len, dlk_error *err)
{
    dlk_status rc = Dlk_store_put(ds->store, key, text, len,
                                  DLK_PUT_IF_ABSENT, NULL, NULL, err);
    if (rc != DLK_EEXIST)
        return rc;
    Dlk_error_clear(err);
    Dlk_obj_info info;
    rc = Dlk_store_head(ds->store, key, &info, err);
    if (!rc && (info.mtime == 0 || time(NULL) - info.mtime > 600))
        rc = Dlk_store_put(ds->store, key, text, len, DLK_PUT_ALWAYS, NULL,
                           NULL, err);
    return rc;
}

dlk_status Dlk_segments_cut(dlk_dataset *ds, dlk_error *err)
{
    for (size_t ti = 0; ti < ds->m.ntensors; ti++) {
        Dlk_tensor *t = &ds->m.tensors[ti];
        /* a list changed under its segments: cut it again from the start
         * rather than name a segment that is not this list's (a pending
         * list is changed in its tail only: its segments fit) */
        if (!Dlk_tensor_segs_fit(t))
            t->nsegs = t->seg_chunks = 0;
        /* pending: chunks holds the tail only, and what a new segment
         * takes leaves it */
        size_t *done = t->segs_pending ? &(size_t){0} : &t->seg_chunks;
        /* the tail keeps 1..DLK_SEG_ENTRIES entries, so that filling the
         * last chunk (which replaces the last entry) touches no segment */
        while (t->nchunks - *done > DLK_SEG_ENTRIES) {
            const Dlk_chunk_entry *e = t->chunks + *done;
            for (size_t i = 0; i < DLK_SEG_ENTRIES; i++)
                if (!e[i].key[0])
                    return Dlk_fail(err, DLK_EINTERNAL, "tensor '%s': a "
                                    "chunk not written yet", t->spec.name);
            Dlk_seg_ref g;
            char *text, key[DLK_SEG_KEY_MAX];
            size_t len;
            dlk_status rc = Dlk_segment_dump(e, DLK_SEG_ENTRIES, &text, &len,
                                             &g, err);
            if (rc)
                return rc;
            Dlk_seg_key(key, g.key);
            rc = put_segment(ds, key, text, len, err);
            free(text);
            if (rc)
                return rc;
            if (!DLK_GROW(t->segs, t->nsegs, t->capsegs, 16))
                return Dlk_oom(err);
            t->segs[t->nsegs++] = g;
            *done += DLK_SEG_ENTRIES;
        }
        for (size_t i = *done; t->segs_pending && *done && i < t->nchunks;
             i++)
            if (!t->chunks[i].key[0])
                return Dlk_fail(err, DLK_EINTERNAL, "tensor '%s': a chunk "
                                "not written yet", t->spec.name);
        if (t->segs_pending && *done) {
            memmove(t->chunks, t->chunks + *done,
                    (t->nchunks - *done) * sizeof *t->chunks);
            t->nchunks -= *done;
        }
    }
    return DLK_OK;
}

void Dlk_manifest_drop_segments(Dlk_manifest *m)
{
    for (size_t i = 0; i < m->ntensors; i++) {
        m->tensors[i].nsegs = 0;
        m->tensors[i].seg_chunks = 0;
        m->tensors[i].segs_pending = false;
    }
}

bool Dlk_manifest_pending(const Dlk_manifest *m)
{
    for (size_t i = 0; i < m->ntensors; i++)
        if (m->tensors[i].segs_pending)
            return true;
    return false;
}
