/* npy_tree.c - a local directory of .npy files only: ingested as rows
 * with keys, as media are, when every file is one sample of a tensor
 * its stem names ("0001.images.npy"); otherwise file by file
 * (ing_npy_dir: batches, folders named after tensors), without keys. */
#include "ingest.h"
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A local directory of .npy files only: ing_npy_dir over the files the
 * listing found, in path order; what the listing passed over or could
 * not use is reported as in any other ingest. */
dlk_status ing_npy_tree_ingest(const char *url, const dlk_ingest_opts *o,
                               const ing_source *src, dlk_ingest_result *res,
                               dlk_error *err)
{
    uint64_t files = src->nobjs; /* .npy files: the rest are not read */
    dlk_status rc = ing_report_unsafe(o, res, src, err);
    if (rc)
        return rc;
    ing_report_unused(o, res, src);
    uint64_t unsafe = res->skipped;
    const char **keys = malloc((src->nobjs ? src->nobjs : 1) * sizeof *keys);
    if (!keys)
        return Dlk_oom(err);
    for (size_t i = 0; i < src->nobjs; i++)
        keys[i] = src->objs[i].key;
    qsort(keys, src->nobjs, sizeof *keys, cmp_key);
    dlk_dataset *ds;
    rc = Dlk_dataset_open_writer(url, o->store, &ds, err);
    if (rc) {
        free(keys);
        return rc;
    }
    int tk, tv;
    if (ing_key_tensors(&ds->m, &tk, &tv)) {
        /* its rows would get no key: the key tensors would fall behind */
        dlk_dataset_free(ds);
        free(keys);
        return Dlk_fail(err, DLK_EINVAL, "'%s' has key tensors, so every "
                        "row needs a key: name the .npy files STEM.TENSOR.npy "
                        "(one sample of TENSOR each) for tensors of the "
                        "dataset", url);
    }
    ing_npy_stats st;
    rc = ing_npy_dir(ds, src->store, keys, src->nobjs, o, &st, false, err);
    free(keys);
    /* files of no tensor are its skips, as are unsafe keys; the head is
     * written only after */
    uint64_t skipped = st.skipped + unsafe;
    if (!rc)
        rc = ing_check_outcome(o, o->source, files - st.skipped, skipped,
                               files + unsafe > 0, NULL, res, err);
    if (!rc && st.ingested == 0)
        rc = ing_check_outcome(o, o->source, 0, skipped, files > 0, NULL,
                               res, err);
    if (!rc)
        rc = dlk_dataset_flush(ds, err);
    if (rc) {
        res->skipped = skipped;
        dlk_dataset_free(ds);
        return rc;
    }
    res->ingested = st.rows;
    res->skipped = skipped;
    res->bytes_in = st.bytes_in;
    res->bytes_out = st.bytes_out;
    res->complete = 1;
    return dlk_dataset_close(ds, err);
}

/* The number of dimensions of the .npy file key of the local store st
 * (read as every source file is: no link followed), or -1. */
static int npy_ndim(Dlk_store *st, const char *key)
{
    const void *map;
    size_t len;
    if (Dlk_store_map(st, key, &map, &len, NULL))
        return -1;
    Dlk_npy_info h;
    int nd = Dlk_npy_parse(map, len, key, &h, NULL) ? -1 : h.ndim;
    Dlk_store_unmap(st, map, len);
    return nd;
}

/* Whether a tree of .npy files is ingested as rows with keys, as media
 * are: every file names a tensor of the dataset by its stem's suffix
 * ("0001.images.npy") and holds one sample of it, and the dataset has key
 * tensors or, empty, will get them.  Otherwise file by file (batches,
 * folders named after tensors), without keys. */
dlk_status ing_npy_tree_as_rows(const char *url, const dlk_ingest_opts *o,
                                const ing_source *src, bool *out,
                                dlk_error *err)
{
    dlk_dataset *ds;
    *out = false;
    /* a dataset that cannot be opened fails the ingest here: which path
     * its files take is not known (a guess would report the other
     * path's complaint, not this failure) */
    dlk_status rc = Dlk_dataset_open_writer(url, o->store, &ds, err);
    if (rc)
        return rc;
    int tk, tv;
    bool keyed = ing_key_tensors(&ds->m, &tk, &tv), empty = true;
    for (size_t i = 0; i < ds->m.ntensors; i++)
        empty &= ds->m.tensors[i].samples == 0;
    bool ok = keyed || (empty && !o->no_key &&
                        dlk_dataset_find(ds, ING_KEY_TENSOR) < 0 &&
                        dlk_dataset_find(ds, ING_KEY_VERSION_TENSOR) < 0);
    for (size_t i = 0; ok && i < src->nobjs; i++) {
        int t = src->objs[i].tensor[0]
                    ? dlk_dataset_find(ds, src->objs[i].tensor) : -1;
        /* a batch (one dimension more) is read file by file; a file that
         * cannot be parsed becomes a bad row, reported with its key */
        int nd = t >= 0 ? npy_ndim(src->store, src->objs[i].key) : -1;
        ok = t >= 0 && t != tk && t != tv &&
             (nd < 0 || nd == ds->m.tensors[t].spec.ndim);
    }
    dlk_dataset_free(ds);
    *out = ok;
    return DLK_OK;
}
