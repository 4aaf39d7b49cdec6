/* refs.c - the set of chunks that states of a dataset reference: the head
 * and every commit reachable from main.  verify checks them; gc keeps
 * them. */
#include "dataset.h"
#include "format/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seg_slot(const char *hash)
{
    uint64_t h = 0;
    for (int i = 0; i < 16; i++)
        h = h << 4 | (uint64_t)(hash[i] <= '9' ? hash[i] - '0'
                                               : hash[i] - 'a' + 10);
    return h;
}

static bool seg_seen(const Dlk_ref_set *s, const char *hash)
{
    if (!s->segs_cap)
        return false;
    for (uint64_t i = seg_slot(hash) & (s->segs_cap - 1);; i = (i + 1) & (s->segs_cap - 1)) {
        if (!s->segs[i][0])
            return false;
        if (strcmp(s->segs[i], hash) == 0)
            return true;
    }
}

/* Add hash to the set; *added false when it was there. */
static dlk_status seg_mark(Dlk_ref_set *s, const char *hash, bool *added,
                           dlk_error *err)
{
    *added = false;
    if (seg_seen(s, hash))
        return DLK_OK;
    if ((s->nsegs + 1) * 2 > s->segs_cap) {
        size_t cap = s->segs_cap ? s->segs_cap * 2 : 64;
        char (*n)[33] = calloc(cap, sizeof *n);
        if (!n)
            return Dlk_oom(err);
        for (size_t i = 0; i < s->segs_cap; i++) {
            if (!s->segs[i][0])
                continue;
            uint64_t j = seg_slot(s->segs[i]) & (cap - 1);
            while (n[j][0])
                j = (j + 1) & (cap - 1);
            memcpy(n[j], s->segs[i], 33);
        }
        free(s->segs);
        s->segs = n;
        s->segs_cap = cap;
    }
    uint64_t j = seg_slot(hash) & (s->segs_cap - 1);
    while (s->segs[j][0])
        j = (j + 1) & (s->segs_cap - 1);
    memcpy(s->segs[j], hash, 33);
    s->nsegs++;
    *added = true;
    return DLK_OK;
}

bool Dlk_refs_has_segment(const Dlk_ref_set *s, const char *key)
{
    size_t pl = strlen(DLK_SEG_PREFIX);
    return strncmp(key, DLK_SEG_PREFIX, pl) == 0 && strlen(key) == pl + 32 &&
           seg_seen(s, key + pl);
}

static dlk_status add_entries(Dlk_ref_set *s, const Dlk_tensor *t,
                              const Dlk_chunk_entry *e, size_t n,
                              dlk_error *err)
{
    for (size_t c = 0; c < n; c++) {
        if (!DLK_GROW(s->v, s->n, s->cap, 256))
            return Dlk_oom(err);
        Dlk_ref_chunk *r = &s->v[s->n++];
        Dlk_chunk_key(r->key, t->spec.name, e[c].key);
        r->t = t;
        r->e = &e[c];
    }
    return DLK_OK;
}

dlk_status Dlk_refs_add_manifest(Dlk_ref_set *s, const Dlk_manifest *m,
                                 dlk_error *err)
{
    for (size_t i = 0; i < m->ntensors; i++) {
        const Dlk_tensor *t = &m->tensors[i];
        if (t->segs_pending)
            return Dlk_fail(err, DLK_EINTERNAL, "tensor '%s': segments not "
                            "read", t->spec.name);
        bool added;
        for (size_t k = 0; k < t->nsegs; k++) {
            dlk_status rc = seg_mark(s, t->segs[k].key, &added, err);
            if (rc)
                return rc;
        }
        dlk_status rc = add_entries(s, t, t->chunks, t->nchunks, err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

dlk_status Dlk_refs_add_state(dlk_dataset *ds, Dlk_ref_set *s,
                              const Dlk_manifest *m, const char *doc,
                              Dlk_refs_bad_fn bad, void *ud, dlk_error *err)
{
    bool pending = false;
    for (size_t i = 0; i < m->ntensors; i++)
        pending = pending || m->tensors[i].segs_pending;
    if (!pending)
        return Dlk_refs_add_manifest(s, m, err);
    for (size_t i = 0; i < m->ntensors; i++) {
        const Dlk_tensor *t = &m->tensors[i];
        for (size_t k = 0; k < t->nsegs; k++) {
            bool added;
            dlk_status rc = seg_mark(s, t->segs[k].key, &added, err);
            if (rc)
                return rc;
            if (!added)
                continue; /* shared with a state added before: its chunks
                             are in the set already */
            if (!DLK_GROW(s->segents, s->nsegents, s->capsegents, 16))
                return Dlk_oom(err);
            Dlk_chunk_entry *e;
            dlk_error serr;
            Dlk_error_clear(&serr);
            rc = Dlk_segment_read(ds, &t->segs[k], doc, &e, &serr);
            if (rc) {
                char key[DLK_SEG_KEY_MAX];
                Dlk_seg_key(key, t->segs[k].key);
                if (!bad || !(rc == DLK_ECORRUPT || rc == DLK_EUNSUPPORTED ||
                              rc == DLK_ELIMIT))
                    return Dlk_fail(err, rc, "%s", serr.msg);
                bad(ud, key, serr.msg);
                continue;
            }
            s->segents[s->nsegents++] = e;
            if ((rc = add_entries(s, t, e, t->segs[k].nchunks, err)))
                return rc;
        }
        size_t n;
        const Dlk_chunk_entry *tail = Dlk_tensor_tail(t, &n);
        dlk_status rc = add_entries(s, t, tail, n, err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

static int cmp_ref(const void *a, const void *b)
{
    return strcmp(((const Dlk_ref_chunk *)a)->key,
                  ((const Dlk_ref_chunk *)b)->key);
}

/* Room for one more loaded manifest in s->extra. */
static dlk_status grow_extra(Dlk_ref_set *s, dlk_error *err)
{
    return DLK_GROW(s->extra, s->nextra, s->capextra, 16) ? DLK_OK
                                                          : Dlk_oom(err);
}

dlk_status Dlk_refs_add_history(dlk_dataset *ds, Dlk_ref_set *s,
                                Dlk_refs_bad_fn bad, void *ud,
                                uint64_t *commits, dlk_error *err)
{
    char id[DLK_ID_MAX], via[DLK_ID_MAX] = "main";
    char fault[DLK_COMMIT_KEY_MAX] = DLK_KEY_MAIN;
    bool exists;
    dlk_error cerr;
    Dlk_error_clear(&cerr);
    dlk_status rc = Dlk_ref_read(ds, id, NULL, &exists, &cerr);
    while (!rc && exists) {
        if ((rc = grow_extra(s, &cerr)))
            break;
        Dlk_manifest *m = &s->extra[s->nextra];
        rc = Dlk_commit_follow(ds, via, id, m, NULL, NULL, NULL, NULL, fault,
                               &cerr);
        if (rc)
            break;
        s->nextra++;
        if (commits)
            (*commits)++;
        char key[128];
        snprintf(key, sizeof key, DLK_KEY_COMMITS "%s.json", id);
        if ((rc = Dlk_refs_add_state(ds, s, m, key, bad, ud, &cerr)))
            break;
        /* only null ends the history: Dlk_commit_parse refuses a parent
         * that is not a commit id, so no bad one passes for the first
         * commit (and gc for the end of what it must keep) */
        if ((exists = m->parent != NULL)) {
            strcpy(via, id);
            strcpy(id, m->parent);
        }
    }
    if (!rc)
        return DLK_OK;
    /* a finding is what is in the store; a read that failed (the
     * network, access) says nothing about the history: an error */
    if (!bad || !(rc == DLK_ECORRUPT || rc == DLK_EUNSUPPORTED ||
                  rc == DLK_ELIMIT))
        return Dlk_fail(err, rc, "%s", cerr.msg);
    bad(ud, fault, cerr.msg);
    return DLK_OK;
}

struct staging_walk {
    dlk_dataset *ds;
    Dlk_ref_set *s;
    dlk_status rc;
    dlk_error *err;
};

static int on_staging(void *ud, const char *key, uint64_t size)
{
    struct staging_walk *w = ud;
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    size_t n = strlen(base);
    if (strncmp(base, "shard-", 6) != 0 || n < 5 ||
        strcmp(base + n - 5, ".json") != 0 || size > DLK_JSON_MAX_BYTES)
        return 0;
    Dlk_ref_set *s = w->s;
    if ((w->rc = grow_extra(s, w->err)))
        return 1;
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = Dlk_store_get(w->ds->store, key, DLK_JSON_MAX_BYTES, &b,
                                  NULL, w->err);
    if (rc == DLK_ENOTFOUND) { /* finished and removed meanwhile */
        Dlk_error_clear(w->err);
        Dlk_buf_free(&b);
        return 0;
    }
    if (!rc)
        rc = Dlk_manifest_parse((const char *)b.data, b.len, key,
                                &s->extra[s->nextra], w->err);
    Dlk_buf_free(&b);
    if (!rc) {
        /* a key index a shard's document names (writers before this one
         * copied the head's) covers no rows of it: ignored (formats/
         * dlk-v1.md 6.8.1), neither checked nor kept for it */
        Dlk_manifest *m = &s->extra[s->nextra];
        free(m->key_runs);
        m->key_runs = NULL;
        m->nkey_runs = 0;
        m->key_index[0] = '\0';
        m->key_index_rows = 0;
        s->nextra++;
        rc = Dlk_refs_add_state(w->ds, s, &s->extra[s->nextra - 1], key,
                                NULL, NULL, w->err);
    }
    if (rc) {
        /* an unreadable staging document could hide chunks in use: stop */
        w->rc = rc;
        return 1;
    }
    return 0;
}

dlk_status Dlk_refs_add_staging(dlk_dataset *ds, Dlk_ref_set *s,
                                dlk_error *err)
{
    struct staging_walk w = {ds, s, DLK_OK, err};
    dlk_status rc = Dlk_store_list(ds->store, "staging/ingest/", on_staging,
                                   &w, err);
    return rc ? rc : w.rc;
}

dlk_status Dlk_refs_add_head_now(dlk_dataset *ds, Dlk_ref_set *s,
                                 dlk_error *err)
{
    Dlk_buf b;
    Dlk_buf_init(&b);
    Dlk_obj_info info;
    dlk_status rc = Dlk_store_get(ds->store, DLK_KEY_HEAD, DLK_JSON_MAX_BYTES,
                                  &b, &info, err);
    if (!rc && ds->have_etag && strcmp(info.etag, ds->etag) == 0) {
        Dlk_buf_free(&b);
        return DLK_OK; /* the head read at the open, already counted */
    }
    if (!rc)
        rc = grow_extra(s, err);
    if (!rc)
        rc = Dlk_manifest_parse((const char *)b.data, b.len, DLK_KEY_HEAD,
                                &s->extra[s->nextra], err);
    Dlk_buf_free(&b);
    if (!rc) {
        s->nextra++;
        rc = Dlk_refs_add_state(ds, s, &s->extra[s->nextra - 1],
                                DLK_KEY_HEAD, NULL, NULL, err);
    }
    return rc;
}

void Dlk_refs_sort(Dlk_ref_set *s)
{
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, cmp_ref);
}

bool Dlk_refs_has(const Dlk_ref_set *s, const char *key)
{
    Dlk_ref_chunk probe;
    if (!s->n || strlen(key) >= sizeof probe.key)
        return false;
    strcpy(probe.key, key);
    return bsearch(&probe, s->v, s->n, sizeof probe, cmp_ref) != NULL;
}

void Dlk_refs_free(Dlk_ref_set *s)
{
    for (size_t i = 0; i < s->nextra; i++)
        Dlk_manifest_free(&s->extra[i]);
    free(s->extra);
    for (size_t i = 0; i < s->nsegents; i++)
        free(s->segents[i]);
    free(s->segents);
    free(s->segs);
    free(s->v);
    memset(s, 0, sizeof *s);
}
