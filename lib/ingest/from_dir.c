/* from_dir.c - appending a directory tree of .npy files: the files a
 * listing of the local store found (which passed over links and special
 * files, and reported them), each read through that store. */
#include "dataset/dataset.h"
#include "ingest.h"
#include "util/text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Which tensor a file feeds: the stem's suffix after the last '.' or '_',
 * else the nearest folder on its path named like a tensor, else the only
 * tensor.  -1 when none fits. */
static int match_tensor(const dlk_dataset *ds, const char *root,
                        const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t stem = strlen(base) - 4;
    for (size_t i = stem; i > 0; i--) {
        if (base[i - 1] == '.' || base[i - 1] == '_') {
            char name[DLK_NAME_MAX + 1];
            size_t n = stem - i;
            if (n && n <= DLK_NAME_MAX) {
                memcpy(name, base + i, n);
                name[n] = '\0';
                int t = dlk_dataset_find(ds, name);
                if (t >= 0)
                    return t;
            }
            break;
        }
    }
    /* folders between root and the file, nearest first */
    const char *end = base - 1;
    const char *top = path + strlen(root);
    while (end > top) {
        const char *start = end - 1;
        while (start > top && *start != '/')
            start--;
        const char *seg = *start == '/' ? start + 1 : start;
        char name[DLK_NAME_MAX + 1];
        size_t n = (size_t)(end - seg);
        if (n && n <= DLK_NAME_MAX) {
            memcpy(name, seg, n);
            name[n] = '\0';
            int t = dlk_dataset_find(ds, name);
            if (t >= 0)
                return t;
        }
        end = start;
    }
    return dlk_dataset_ntensors(ds) == 1 ? 0 : -1;
}

static void swap_bytes(uint8_t *p, size_t n, size_t size)
{
    for (size_t i = 0; i + size <= n; i += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

static dlk_status ingest_file(dlk_dataset *ds, size_t ti, Dlk_store *src,
                              const char *key, ing_npy_stats *stats,
                              uint64_t *samples, dlk_error *err)
{
    const Dlk_tensor *t = &ds->m.tensors[ti];
    const void *map;
    size_t len;
    dlk_status rc = Dlk_store_map(src, key, &map, &len, err);
    if (rc)
        return rc;
    Dlk_npy_info h;
    rc = Dlk_npy_parse(map, len, key, &h, err);
    if (!rc && h.dtype != t->spec.dtype)
        rc = Dlk_fail(err, DLK_EINVAL, "'%s': dtype %s, tensor '%s' is %s",
                      key, dlk_dtype_name(h.dtype), t->spec.name,
                      dlk_dtype_name(t->spec.dtype));
    int nd = t->spec.ndim;
    bool batch = !rc && h.ndim == nd + 1;
    if (!rc && h.ndim != nd && !batch)
        rc = Dlk_fail(err, DLK_EINVAL, "'%s': %d dimensions; tensor '%s' "
                      "wants %d (one sample) or %d (a batch)", key, h.ndim,
                      t->spec.name, nd, nd + 1);
    /* the map is read-only: big-endian data is swapped in a copy */
    uint8_t *copy = NULL;
    if (!rc && h.swap) {
        copy = malloc(h.data_bytes ? h.data_bytes : 1);
        if (!copy)
            rc = Dlk_oom(err);
        else {
            memcpy(copy, (const uint8_t *)map + h.data_off, h.data_bytes);
            swap_bytes(copy, h.data_bytes, dlk_dtype_size(h.dtype));
        }
    }
    if (!rc) {
        const uint8_t *data = copy ? copy
                                   : (const uint8_t *)map + h.data_off;
        uint64_t n = batch ? (uint64_t)h.shape[0] : 1;
        const int64_t *shape = batch ? h.shape + 1 : h.shape;
        size_t each = n ? h.data_bytes / n : 0;
        for (uint64_t i = 0; !rc && i < n; i++)
            rc = dlk_append(ds, ti, data + i * each, each, shape, nd, err);
        if (rc) {
            Dlk_fail_wrap(err, "'%s'", key);
        } else {
            stats->ingested += n;
            stats->bytes_out += n * each;
            *samples += n;
        }
    }
    free(copy);
    Dlk_store_unmap(src, map, len);
    stats->bytes_in += len;
    return rc;
}

dlk_status ing_npy_dir(dlk_dataset *ds, Dlk_store *src,
                       const char *const *keys, size_t nkeys,
                       const dlk_ingest_opts *o, ing_npy_stats *stats,
                       bool flush, dlk_error *err)
{
    ing_npy_stats local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    /* samples appended to each tensor: a row is a sample of every one */
    uint64_t *per = calloc(ds->m.ntensors + 1, sizeof *per);
    if (!per)
        return Dlk_oom(err);
    dlk_status rc = DLK_OK;
    for (size_t i = 0; !rc && i < nkeys; i++) {
        int ti = match_tensor(ds, "", keys[i]);
        if (ti < 0) {
            stats->skipped++;
            if (o && o->on_bad) {
                char safe[512];
                o->on_bad(o->ud, Dlk_escape(keys[i], safe, sizeof safe),
                          "not read: no tensor of the dataset is named by "
                          "its name or a folder on its path");
            }
            continue;
        }
        rc = ingest_file(ds, (size_t)ti, src, keys[i], stats, &per[ti], err);
    }
    for (size_t t = 0; t < ds->m.ntensors; t++)
        if (per[t] > stats->rows)
            stats->rows = per[t];
    free(per);
    if (!rc && flush)
        rc = dlk_dataset_flush(ds, err);
    return rc;
}
