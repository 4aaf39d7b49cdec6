/* refs.c - the set of chunks that states of a dataset reference: the head
 * and every commit reachable from main.  verify checks them; gc keeps
 * them. */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dlk_status dlk_refs_add_manifest(dlk_ref_set *s, const dlk_manifest *m,
                                 dlk_error *err)
{
    for (size_t i = 0; i < m->ntensors; i++) {
        const dlk_tensor *t = &m->tensors[i];
        for (size_t c = 0; c < t->nchunks; c++) {
            if (!DLK_GROW(s->v, s->n, s->cap, 256))
                return dlk_oom(err);
            dlk_ref_chunk *r = &s->v[s->n++];
            dlk_chunk_key(r->key, t->spec.name, t->chunks[c].key);
            r->t = t;
            r->e = &t->chunks[c];
        }
    }
    return DLK_OK;
}

static int cmp_ref(const void *a, const void *b)
{
    return strcmp(((const dlk_ref_chunk *)a)->key,
                  ((const dlk_ref_chunk *)b)->key);
}

/* Room for one more loaded manifest in s->extra. */
static dlk_status grow_extra(dlk_ref_set *s, dlk_error *err)
{
    return DLK_GROW(s->extra, s->nextra, s->capextra, 16) ? DLK_OK
                                                          : dlk_oom(err);
}

dlk_status dlk_refs_add_history(dlk_dataset *ds, dlk_ref_set *s,
                                dlk_refs_bad_fn bad, void *ud,
                                uint64_t *commits, dlk_error *err)
{
    char id[DLK_ID_MAX], via[DLK_ID_MAX] = "main";
    char fault[DLK_COMMIT_KEY_MAX] = DLK_KEY_MAIN;
    bool exists;
    dlk_error cerr;
    dlk_error_clear(&cerr);
    dlk_status rc = dlk_ref_read(ds, id, NULL, &exists, &cerr);
    while (!rc && exists) {
        if ((rc = grow_extra(s, &cerr)))
            break;
        dlk_manifest *m = &s->extra[s->nextra];
        rc = dlk_commit_follow(ds, via, id, m, NULL, NULL, NULL, NULL, fault,
                               &cerr);
        if (rc)
            break;
        s->nextra++;
        if (commits)
            (*commits)++;
        if ((rc = dlk_refs_add_manifest(s, m, &cerr)))
            break;
        /* only null ends the history: dlk_commit_parse refuses a parent
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
        return dlk_fail(err, rc, "%s", cerr.msg);
    bad(ud, fault, cerr.msg);
    return DLK_OK;
}

struct staging_walk {
    dlk_dataset *ds;
    dlk_ref_set *s;
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
    dlk_ref_set *s = w->s;
    if ((w->rc = grow_extra(s, w->err)))
        return 1;
    dlk_buf b;
    dlk_buf_init(&b);
    dlk_status rc = dlk_store_get(w->ds->store, key, DLK_JSON_MAX_BYTES, &b,
                                  NULL, w->err);
    if (rc == DLK_ENOTFOUND) { /* finished and removed meanwhile */
        dlk_error_clear(w->err);
        dlk_buf_free(&b);
        return 0;
    }
    if (!rc)
        rc = dlk_manifest_parse((const char *)b.data, b.len, key,
                                &s->extra[s->nextra], w->err);
    dlk_buf_free(&b);
    if (!rc) {
        s->nextra++;
        rc = dlk_refs_add_manifest(s, &s->extra[s->nextra - 1], w->err);
    }
    if (rc) {
        /* an unreadable staging document could hide chunks in use: stop */
        w->rc = rc;
        return 1;
    }
    return 0;
}

dlk_status dlk_refs_add_staging(dlk_dataset *ds, dlk_ref_set *s,
                                dlk_error *err)
{
    struct staging_walk w = {ds, s, DLK_OK, err};
    dlk_status rc = dlk_store_list(ds->store, "staging/ingest/", on_staging,
                                   &w, err);
    return rc ? rc : w.rc;
}

dlk_status dlk_refs_add_head_now(dlk_dataset *ds, dlk_ref_set *s,
                                 dlk_error *err)
{
    dlk_buf b;
    dlk_buf_init(&b);
    dlk_obj_info info;
    dlk_status rc = dlk_store_get(ds->store, DLK_KEY_HEAD, DLK_JSON_MAX_BYTES,
                                  &b, &info, err);
    if (!rc && ds->have_etag && strcmp(info.etag, ds->etag) == 0) {
        dlk_buf_free(&b);
        return DLK_OK; /* the head read at the open, already counted */
    }
    if (!rc)
        rc = grow_extra(s, err);
    if (!rc)
        rc = dlk_manifest_parse((const char *)b.data, b.len, DLK_KEY_HEAD,
                                &s->extra[s->nextra], err);
    dlk_buf_free(&b);
    if (!rc) {
        s->nextra++;
        rc = dlk_refs_add_manifest(s, &s->extra[s->nextra - 1], err);
    }
    return rc;
}

void dlk_refs_sort(dlk_ref_set *s)
{
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, cmp_ref);
}

bool dlk_refs_has(const dlk_ref_set *s, const char *key)
{
    dlk_ref_chunk probe;
    if (!s->n || strlen(key) >= sizeof probe.key)
        return false;
    strcpy(probe.key, key);
    return bsearch(&probe, s->v, s->n, sizeof probe, cmp_ref) != NULL;
}

void dlk_refs_free(dlk_ref_set *s)
{
    for (size_t i = 0; i < s->nextra; i++)
        dlk_manifest_free(&s->extra[i]);
    free(s->extra);
    free(s->v);
    memset(s, 0, sizeof *s);
}
