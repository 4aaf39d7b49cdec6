/* verify.c - checking every chunk that a state (or every state) of the
 * dataset references, each once, and finding chunks nothing references. */
#include "dataset.h"
#include "util/abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct verify_ctx {
    const dlk_verify_opts *o;
    dlk_verify_result *res;
    const Dlk_ref_set *s;
};

static void problem(void *ud, const char *object, const char *why)
{
    struct verify_ctx *v = ud;
    v->res->problems++;
    if (v->o && v->o->on_problem)
        v->o->on_problem(v->o->ud, object, why);
}

/* Whether a check that failed with `code` found damage (a problem to
 * report: the object is missing, malformed, or cannot be read from its
 * local file - a special file in its place, a failing disk) rather than
 * failing itself (out of memory, the network failing after its retries,
 * denied access): a chunk that could not be checked is not called bad. */
static bool found_damage(dlk_status code)
{
    return code == DLK_ECORRUPT || code == DLK_ENOTFOUND ||
           code == DLK_EUNSUPPORTED || code == DLK_EDECODE ||
           code == DLK_ELIMIT || code == DLK_EINVAL || code == DLK_EIO;
}

static dlk_status check_chunk(dlk_dataset *ds, const Dlk_ref_chunk *r,
                              bool deep, struct verify_ctx *v,
                              dlk_error *err)
{
    dlk_error cerr;
    Dlk_error_clear(&cerr);
    dlk_chunk *c = NULL;
    /* checks header and index against the manifest and, when deep, every
     * part's checksum and both payload checksums after decompressing */
    dlk_status rc = Dlk_chunk_load(ds, r->t, r->e,
                                   deep ? DLK_DECODE_VERIFY |
                                              DLK_DECODE_VERIFY_PARTS
                                        : DLK_DECODE_HEADER_ONLY,
                                   NULL, 0, &c, &cerr);
    if (rc && !found_damage(rc))
        return Dlk_fail(err, rc, "cannot check chunk '%s': %s", r->key,
                        cerr.msg);
    v->res->chunks_checked++;
    if (rc) {
        problem(v, r->key, cerr.msg);
        return DLK_OK;
    }
    v->res->bytes_checked += c->object.len;
    /* the name is the hash of every byte of the object */
    char hash[33];
    Dlk_hash128_hex(c->object.data, c->object.len, hash);
    if (strcmp(hash, r->e->key) != 0)
        problem(v, r->key, "content does not match its name (XXH3-128 "
                "checksum mismatch)");
    dlk_chunk_free(c);
    return DLK_OK;
}

static int on_stored_chunk(void *ud, const char *key, uint64_t size)
{
    struct verify_ctx *v = ud;
    if (Dlk_refs_has(v->s, key))
        return 0;
    v->res->unreferenced++;
    v->res->unreferenced_bytes += size;
    if (v->o && v->o->on_unreferenced)
        v->o->on_unreferenced(v->o->ud, key, size);
    return 0;
}

/* Whether a view row (rows ascending) falls in chunk entry e. */
static bool holds_row(const Dlk_chunk_entry *e, const uint64_t *rows,
                      uint64_t n)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (rows[mid] < e->first)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && rows[lo] < e->first + e->samples;
}

/* The views' objects of the opened state (or the one named): each read
 * and checked in full; *rows receives the named view's rows. */
static dlk_status check_views(dlk_dataset *ds, const char *only,
                              uint64_t **rows, uint64_t *n,
                              struct verify_ctx *v, dlk_error *err)
{
    bool found = false;
    for (size_t i = 0; i < ds->m.nviews; i++) {
        const Dlk_view_ref *w = &ds->m.views[i];
        if (only && strcmp(only, w->name) != 0)
            continue;
        found = true;
        uint64_t *r, k;
        dlk_error verr;
        Dlk_error_clear(&verr);
        dlk_status vrc = dlk_view_rows(ds, w->name, &r, &k, &verr);
        if (vrc && !found_damage(vrc))
            return Dlk_fail(err, vrc, "cannot check view '%s': %s", w->name,
                            verr.msg);
        if (vrc) {
            problem(v, w->object, verr.msg);
            continue;
        }
        if (only) {
            *rows = r;
            *n = k;
            return DLK_OK;
        }
        free(r);
    }
    /* absent: an error; there but unusable: a problem found (above), and
     * no chunk to check for it */
    if (only && !found)
        return dlk_view_rows(ds, only, rows, n, err);
    return DLK_OK;
}

/* Check the key index objects m names that neither the head nor the
 * states before[0..nbefore) name (checked already). */
static dlk_status check_key_index(dlk_dataset *ds, const Dlk_manifest *m,
                                  const Dlk_manifest *before, size_t nbefore,
                                  struct verify_ctx *v, dlk_error *err)
{
    dlk_status rc = DLK_OK;
    size_t n = m->nkey_runs + (m->key_index[0] != 0);
    for (size_t i = 0; !rc && i < n; i++) {
        const char *key = i < m->nkey_runs ? m->key_runs[i].object
                                           : m->key_index;
        bool seen = m != &ds->m && Dlk_keyidx_names(&ds->m, key);
        for (size_t j = 0; !seen && j < nbefore; j++)
            seen = Dlk_keyidx_names(&before[j], key);
        if (!seen)
            rc = Dlk_keyidx_check(ds, m, key, problem, v, err);
    }
    return rc;
}

static dlk_status verify_run(dlk_dataset *ds, const dlk_verify_opts *opts,
                             dlk_verify_result *res, dlk_error *err)
{
    bool deep = opts->deep, all = opts->all;
    const char *view = opts->view;
    if (view && all)
        return Dlk_fail(err, DLK_EINVAL, "a check of a view is of one state, "
                        "not of every one");
    Dlk_ref_set s;
    memset(&s, 0, sizeof s);
    struct verify_ctx v = {opts, res, &s};
    uint64_t *vrows = NULL, nv = 0;
    dlk_status rc = check_views(ds, view, &vrows, &nv, &v, err);
    if (rc)
        return rc;
    rc = Dlk_refs_add_manifest(&s, &ds->m, err);
    uint64_t before = res->problems;
    if (!rc && all)
        rc = Dlk_refs_add_history(ds, &s, problem, &v, &res->commits_checked,
                                  err);
    /* past a commit that cannot be read, which chunks the history holds
     * is unknown: none is called unreferenced (which says gc removes it) */
    bool history_read = res->problems == before;
    if (!rc && all)
        rc = Dlk_refs_add_staging(ds, &s, err);
    Dlk_refs_sort(&s);
    for (size_t i = 0; !rc && i < s.n; i++) {
        if (i && strcmp(s.v[i].key, s.v[i - 1].key) == 0)
            continue; /* shared by several states: checked once */
        if (view && !holds_row(s.v[i].e, vrows, nv))
            continue;
        rc = check_chunk(ds, &s.v[i], deep, &v, err);
    }
    free(vrows);
    /* the key index objects of the states checked, each once */
    if (!rc && !view)
        rc = check_key_index(ds, &ds->m, NULL, 0, &v, err);
    for (size_t i = 0; !rc && !view && i < s.nextra; i++)
        rc = check_key_index(ds, &s.extra[i], s.extra, i, &v, err);
    if (!rc && all && history_read)
        rc = Dlk_store_list(ds->store, DLK_KEY_CHUNKS, on_stored_chunk, &v,
                            err);
    Dlk_refs_free(&s);
    return rc;
}

ABI_RUN_WRAPPER(dlk_verify, verify_run, dlk_dataset *, dlk_verify_opts,
                dlk_verify_result)
