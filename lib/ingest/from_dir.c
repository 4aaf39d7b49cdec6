/* from_dir.c - appending a directory tree of .npy files. */
#include "dataset/dataset.h"
#include "ingest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct path_list {
    char **v;
    size_t n, cap;
} path_list;

static dlk_status collect(const char *dir, int depth, path_list *l,
                          dlk_error *err)
{
    if (depth > 32)
        return dlk_fail(err, DLK_ELIMIT, "'%s': directories nested too deep",
                        dir);
    DIR *d = opendir(dir);
    if (!d)
        return dlk_fail(err, errno == ENOENT ? DLK_ENOTFOUND : DLK_EIO,
                        "cannot read directory '%s': %s", dir,
                        strerror(errno));
    dlk_status rc = DLK_OK;
    struct dirent *de;
    while (!rc && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *path;
        if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
            rc = dlk_oom(err);
            break;
        }
        struct stat st;
        if (stat(path, &st) != 0) {
            free(path);
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            rc = collect(path, depth + 1, l, err);
            free(path);
            continue;
        }
        size_t n = strlen(path);
        if (!S_ISREG(st.st_mode) || n < 4 || strcmp(path + n - 4, ".npy")) {
            free(path);
            continue;
        }
        if (!DLK_GROW(l->v, l->n, l->cap, 256)) {
            free(path);
            rc = dlk_oom(err);
            break;
        }
        l->v[l->n++] = path;
    }
    closedir(d);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

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

static dlk_status ingest_file(dlk_dataset *ds, size_t ti, const char *path,
                              ing_npy_stats *stats, uint64_t *samples,
                              dlk_error *err)
{
    const dlk_tensor *t = &ds->m.tensors[ti];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dlk_fail(err, DLK_EIO, "cannot open '%s': %s", path,
                        strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
        close(fd);
        return dlk_fail(err, DLK_EDECODE, "'%s': empty or unreadable file",
                        path);
    }
    size_t len = (size_t)st.st_size;
    uint8_t *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return dlk_fail(err, DLK_EIO, "cannot map '%s': %s", path,
                        strerror(errno));
    dlk_npy_info h;
    dlk_status rc = dlk_npy_parse(map, len, path, &h, err);
    if (!rc && h.dtype != t->spec.dtype)
        rc = dlk_fail(err, DLK_EINVAL, "'%s': dtype %s, tensor '%s' is %s",
                      path, dlk_dtype_name(h.dtype), t->spec.name,
                      dlk_dtype_name(t->spec.dtype));
    int nd = t->spec.ndim;
    bool batch = !rc && h.ndim == nd + 1;
    if (!rc && h.ndim != nd && !batch)
        rc = dlk_fail(err, DLK_EINVAL, "'%s': %d dimensions; tensor '%s' "
                      "wants %d (one sample) or %d (a batch)", path, h.ndim,
                      t->spec.name, nd, nd + 1);
    if (!rc) {
        uint8_t *data = map + h.data_off;
        if (h.swap)
            swap_bytes(data, h.data_bytes, dlk_dtype_size(h.dtype));
        uint64_t n = batch ? (uint64_t)h.shape[0] : 1;
        const int64_t *shape = batch ? h.shape + 1 : h.shape;
        size_t each = n ? h.data_bytes / n : 0;
        for (uint64_t i = 0; !rc && i < n; i++)
            rc = dlk_append(ds, ti, data + i * each, each, shape, nd, err);
        if (rc) {
            dlk_fail_wrap(err, "'%s'", path);
        } else {
            stats->ingested += n;
            stats->bytes_out += n * each;
            *samples += n;
        }
    }
    munmap(map, len);
    stats->bytes_in += len;
    return rc;
}

dlk_status ing_npy_dir(dlk_dataset *ds, const char *dir,
                       ing_npy_stats *stats, bool flush, dlk_error *err)
{
    ing_npy_stats local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    path_list l = {0};
    /* samples appended to each tensor: a row is a sample of every one */
    uint64_t *per = calloc(ds->m.ntensors + 1, sizeof *per);
    if (!per)
        return dlk_oom(err);
    dlk_status rc = collect(dir, 0, &l, err);
    if (!rc && l.n)
        qsort(l.v, l.n, sizeof *l.v, cmp_str);
    for (size_t i = 0; !rc && i < l.n; i++) {
        int ti = match_tensor(ds, dir, l.v[i]);
        if (ti < 0) {
            stats->skipped++;
            continue;
        }
        rc = ingest_file(ds, (size_t)ti, l.v[i], stats, &per[ti], err);
    }
    for (size_t t = 0; t < ds->m.ntensors; t++)
        if (per[t] > stats->rows)
            stats->rows = per[t];
    free(per);
    for (size_t i = 0; i < l.n; i++)
        free(l.v[i]);
    free(l.v);
    if (!rc && flush)
        rc = dlk_dataset_flush(ds, err);
    return rc;
}
