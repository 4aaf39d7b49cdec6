/* metadata.c - Hugging Face ImageFolder metadata files: a metadata.jsonl
 * or metadata.csv beside the files (in the source's root, or in any
 * folder, such as one per split), each row a file_name relative to the
 * file's folder plus columns that feed tensors.  They are read as one
 * label manifest whose keys are whole object keys: the files they name
 * are the rows, every other file a stray, and a file named that the
 * source lacks a skipped row. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* no more than a label manifest (labels.c) */
#define META_MAX ((uint64_t)1 << 30)

static const char *base_of(const char *key)
{
    const char *b = strrchr(key, '/');
    return b ? b + 1 : key;
}

bool ing_meta_name(const char *key)
{
    const char *b = base_of(key);
    return strcmp(b, "metadata.jsonl") == 0 || strcmp(b, "metadata.csv") == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Column c's index in l (added, its cells "" in the rows so far, when
 * new); -1 when out of memory. */
static ssize_t column(ing_labels *l, const char *name)
{
    for (size_t c = 0; c < l->ncols; c++)
        if (strcmp(l->cols[c], name) == 0)
            return (ssize_t)c;
    size_t n = l->ncols + 1;
    char **cols = realloc(l->cols, n * sizeof *cols);
    if (!cols)
        return -1;
    l->cols = cols;
    char **cells = calloc(l->nrows * n + 1, sizeof *cells);
    if (!cells || !(cols[l->ncols] = strdup(name))) {
        free(cells);
        return -1;
    }
    for (size_t r = 0; r < l->nrows; r++) {
        memcpy(cells + r * n, l->cells + r * l->ncols,
               l->ncols * sizeof *cells);
        if (!(cells[r * n + l->ncols] = strdup(""))) {
            /* the rows moved so far stay owned by l->cells */
            free(cells);
            free(cols[l->ncols]);
            return -1;
        }
    }
    free(l->cells);
    l->cells = cells;
    return (ssize_t)l->ncols++;
}

/* Append the rows of one file (f, parsed; its folder prefix dir) to all,
 * each file_name made a key of the source. */
static dlk_status add_file(ing_labels *all, ing_labels *f, const char *dir,
                           dlk_error *err)
{
    ssize_t *map = malloc(f->ncols * sizeof *map);
    if (!map)
        return Dlk_oom(err);
    for (size_t c = 0; c < f->ncols; c++)
        if ((map[c] = column(all, f->cols[c])) < 0) {
            free(map);
            return Dlk_oom(err);
        }
    size_t n = all->ncols;
    char **cells = realloc(all->cells, (all->nrows + f->nrows) * n *
                                           sizeof *cells + 1);
    if (!cells) {
        free(map);
        return Dlk_oom(err);
    }
    all->cells = cells;
    dlk_status rc = DLK_OK;
    for (size_t r = 0; r < f->nrows; r++) {
        char **row = cells + (all->nrows + r) * n;
        for (size_t c = 0; c < n; c++)
            row[c] = NULL;
        for (size_t c = 0; c < f->ncols; c++) {
            row[map[c]] = f->cells[r * f->ncols + c];
            f->cells[r * f->ncols + c] = NULL;
        }
        /* "./a.jpg" is "a.jpg", as the folder's file */
        const char *name = row[0];
        while (strncmp(name, "./", 2) == 0)
            name += 2;
        char *key = malloc(strlen(dir) + strlen(name) + 1);
        if (key) {
            strcpy(key, dir);
            strcat(key, name);
        }
        free(row[0]);
        row[0] = key;
        for (size_t c = 0; c < n; c++)
            if (!row[c] && !(row[c] = strdup("")))
                rc = DLK_ENOMEM;
        if (!key)
            rc = DLK_ENOMEM;
    }
    all->nrows += f->nrows;
    free(map);
    return rc ? Dlk_oom(err) : DLK_OK;
}

/* A folder's metadata.jsonl and metadata.csv both: which is meant? */
static dlk_status check_pairs(char **keys, size_t n, dlk_error *err)
{
    for (size_t i = 1; i < n; i++) {
        size_t a = (size_t)(base_of(keys[i - 1]) - keys[i - 1]);
        size_t b = (size_t)(base_of(keys[i]) - keys[i]);
        if (a == b && memcmp(keys[i - 1], keys[i], a) == 0)
            return Dlk_fail(err, DLK_EINVAL, "two metadata files in one "
                            "folder, '%s' and '%s': keep one", keys[i - 1],
                            keys[i]);
    }
    return DLK_OK;
}

/* The files named that no listed object is, as skipped rows of src. */
static dlk_status find_missing(ing_source *src, const ing_labels *l,
                               dlk_error *err)
{
    bool *seen = calloc(l->nrows + 1, sizeof *seen);
    if (!seen)
        return Dlk_oom(err);
    for (size_t i = 0; i < src->nobjs; i++) {
        ssize_t r = ing_labels_find(l, src->objs[i].key,
                                    src->objs[i].stem_len);
        if (r >= 0)
            seen[r] = true;
    }
    const char **miss = malloc((l->nrows + 1) * sizeof *miss);
    size_t n = 0;
    for (size_t r = 0; miss && r < l->nrows; r++)
        if (!seen[r])
            miss[n++] = l->cells[r * l->ncols];
    int bad = !miss || ing_source_missing(src, miss, n, l->coco
                                          ? "no such object: the COCO file "
                                            "names it, the source lacks it"
                                          : "no such object: a metadata file "
                                            "names it, the source lacks it");
    free(miss);
    free(seen);
    return bad ? Dlk_oom(err) : DLK_OK;
}

dlk_status ing_meta_missing(ing_source *src, const ing_labels *l,
                            dlk_error *err)
{
    return find_missing(src, l, err);
}

dlk_status ing_meta_load(const ing_source *src, ing_labels *all,
                         dlk_error *err)
{
    memset(all, 0, sizeof *all);
    /* in key order, so that the columns' order is the same from a
     * directory and from S3 */
    char **keys = malloc(src->nmeta * sizeof *keys);
    if (!keys)
        return Dlk_oom(err);
    memcpy(keys, src->meta, src->nmeta * sizeof *keys);
    qsort(keys, src->nmeta, sizeof *keys, cmp_str);
    dlk_status rc = check_pairs(keys, src->nmeta, err);
    if (rc) {
        free(keys);
        return rc;
    }
    /* named in messages: the first file, and how many more */
    char name[320];
    snprintf(name, sizeof name, "%.256s%s", keys[0],
             src->nmeta > 1 ? " (and the other metadata files)" : "");
    all->exact = true;
    all->label_col = -1;
    if (!(all->name = strdup(name)) ||
        !(all->cols = calloc(1, sizeof *all->cols)) ||
        !(all->cols[0] = strdup("file_name"))) {
        ing_labels_free(all);
        free(keys);
        return Dlk_oom(err);
    }
    all->ncols = 1;
    Dlk_buf b;
    Dlk_buf_init(&b);
    for (size_t i = 0; !rc && i < src->nmeta; i++) {
        const char *key = keys[i];
        b.len = 0;
        rc = Dlk_store_get(src->store, key, META_MAX, &b, NULL, err);
        if (rc) {
            rc = Dlk_fail_wrap(err, "metadata file '%s'", key);
            break;
        }
        ing_labels f;
        rc = ing_labels_parse(b.data, b.len, key, "file_name", true, &f, err);
        if (rc)
            break;
        char dir[1100]; /* a key is at most 1024 bytes */
        snprintf(dir, sizeof dir, "%.*s", (int)(base_of(key) - key), key);
        rc = add_file(all, &f, dir, err);
        ing_labels_free(&f);
    }
    Dlk_buf_free(&b);
    free(keys);
    for (size_t c = 1; !rc && c < all->ncols; c++)
        if (all->label_col < 0 && (strcmp(all->cols[c], "label") == 0 ||
                                   strcmp(all->cols[c], "labels") == 0 ||
                                   strcmp(all->cols[c], "class") == 0))
            all->label_col = (int)c;
    if (!rc)
        rc = ing_labels_index(all, err);
    if (rc)
        ing_labels_free(all);
    return rc;
}

dlk_status ing_labels_for(const dlk_ingest_opts *o, ing_source *src,
                          ing_labels *l, bool *have, dlk_error *err)
{
    *have = false;
    dlk_status rc = DLK_OK;
    if (src->manifest) {
        *l = *src->manifest;
        free(src->manifest);
        src->manifest = NULL;
        *have = true;
        return DLK_OK;
    }
    if (o->labels && o->coco)
        return Dlk_fail(err, DLK_EINVAL, "a label manifest and a COCO file "
                        "cannot be given together");
    if (o->coco)
        rc = ing_coco_load(o->coco, o->store, l, NULL, NULL, err);
    else if (o->labels)
        rc = ing_labels_load(o->labels, o->store, l, err);
    else if (!o->no_metadata && src->nmeta)
        rc = ing_meta_load(src, l, err);
    else
        return DLK_OK;
    *have = !rc;
    return rc;
}

ssize_t ing_meta_row(const ing_labels *l, const ing_source *s, size_t row)
{
    const ing_row *r = &s->rows[row];
    for (uint32_t i = 0; i < r->n; i++) {
        const ing_obj *o = &s->objs[r->first + i];
        ssize_t lr = ing_labels_find(l, o->key, o->stem_len);
        if (lr >= 0)
            return lr;
    }
    return -1;
}

bool ing_meta_stray(const ing_labels *meta, const ing_source *src,
                    size_t row, const dlk_ingest_opts *o, bool report,
                    uint64_t *unused)
{
    if (!meta || !meta->exact || ing_meta_row(meta, src, row) >= 0)
        return false;
    const ing_row *rw = &src->rows[row];
    for (uint32_t i = 0; i < rw->n; i++) {
        (*unused)++;
        if (report && o->on_unused)
            o->on_unused(o->ud, src->objs[rw->first + i].key, meta->coco
                         ? "not a sample: the COCO file names no such image"
                         : "not a sample: no metadata file names it");
    }
    return true;
}
