/* gc.c - removing chunks, segments and key indexes that no state of the dataset
 * references, and what interrupted writes left behind. */
#include "dataset.h"
#include "util/abi.h"

#include <string.h>
#include <time.h>

struct gc_walk {
    dlk_dataset *ds;
    const dlk_gc_opts *o;
    dlk_gc_result *res;
    const Dlk_ref_set *s;
    time_t now;
    dlk_status rc;
    dlk_error *err;
    int listing;     /* 0: chunks/, 1: index/keys/, 2: index/segments/ */
};

/* Whether the head, a commit or a staging document names key index key
 * (its single object or one of its runs). */
static bool index_referenced(const struct gc_walk *w, const char *key)
{
    if (Dlk_keyidx_names(&w->ds->m, key))
        return true;
    for (size_t i = 0; i < w->s->nextra; i++)
        if (Dlk_keyidx_names(&w->s->extra[i], key))
            return true;
    return false;
}

static int on_chunk(void *ud, const char *key, uint64_t size)
{
    struct gc_walk *w = ud;
    if (w->listing == 1   ? index_referenced(w, key)
        : w->listing == 2 ? Dlk_refs_has_segment(w->s, key)
                          : Dlk_refs_has(w->s, key)) {
        w->res->referenced++;
        return 0;
    }
    Dlk_obj_info info;
    dlk_status rc = Dlk_store_head(w->ds->store, key, &info, w->err);
    if (rc == DLK_ENOTFOUND) {
        Dlk_error_clear(w->err);
        return 0; /* removed meanwhile */
    }
    if (rc) {
        w->rc = rc;
        return 1;
    }
    /* unknown age counts as young: never remove what may be in use */
    if (info.mtime == 0 || w->now - info.mtime < w->o->grace_seconds) {
        w->res->young++;
        return 0;
    }
    if (!w->o->dry_run && (rc = Dlk_store_del(w->ds->store, key, w->err)) &&
        rc != DLK_ENOTFOUND) {
        w->rc = rc;
        return 1;
    }
    w->res->removed++;
    w->res->removed_bytes += size;
    if (w->o->on_remove)
        w->o->on_remove(w->o->ud, key, size);
    return 0;
}

static dlk_status gc_run(dlk_dataset *ds, const dlk_gc_opts *opts,
                         dlk_gc_result *res, dlk_error *err)
{
    if (ds->read_only)
        return Dlk_fail(err, DLK_EINVAL, "gc needs the head, not a commit");
    if (opts->grace_seconds < 0)
        return Dlk_fail(err, DLK_EINVAL, "negative grace period");
    Dlk_ref_set s;
    memset(&s, 0, sizeof s);
    /* every commit must be readable: a broken history could otherwise make
     * gc take referenced chunks for garbage */
    dlk_status rc = Dlk_refs_add_manifest(&s, &ds->m, err);
    if (!rc)
        rc = Dlk_refs_add_history(ds, &s, NULL, NULL, NULL, err);
    if (!rc)
        rc = Dlk_refs_add_staging(ds, &s, err);
    /* a staging document gone means its merge is in a head newer than
     * the one opened: count that head, not the absence */
    if (!rc)
        rc = Dlk_refs_add_head_now(ds, &s, err);
    if (rc && rc != DLK_ENOMEM && err)
        Dlk_fail_wrap(err, "removed nothing, since a state that references "
                      "chunks cannot be read");
    Dlk_refs_sort(&s);
    if (!rc) {
        struct gc_walk w = {ds, opts, res, &s, time(NULL), DLK_OK, err};
        rc = Dlk_store_list(ds->store, DLK_KEY_CHUNKS, on_chunk, &w, err);
        if (!rc)
            rc = w.rc;
        w.listing = 1;
        if (!rc)
            rc = Dlk_store_list(ds->store, DLK_KEY_INDEX_PREFIX, on_chunk, &w,
                                err);
        if (!rc)
            rc = w.rc;
        /* a segment that a state names is kept whatever its age: its
         * chunks are in the set only because it was read */
        w.listing = 2;
        if (!rc)
            rc = Dlk_store_list(ds->store, DLK_SEG_PREFIX, on_chunk, &w, err);
        if (!rc)
            rc = w.rc;
    }
    Dlk_refs_free(&s);
    /* files of writes that crashed before their rename, as old as an
     * unreferenced chunk must be: a younger one may be a live write */
    if (!rc)
        rc = Dlk_store_sweep(ds->store,
                             (int64_t)time(NULL) - opts->grace_seconds,
                             opts->dry_run, &res->temp_files,
                             &res->temp_bytes, err);
    return rc;
}

ABI_RUN_WRAPPER(dlk_gc, gc_run, dlk_dataset *, dlk_gc_opts, dlk_gc_result)
