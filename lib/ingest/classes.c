/* classes.c - a later ingest's new class names appended to the class list
 * of the dataset's class_label tensor before its rows are built, so that
 * a batch with a new class folder grows the list instead of failing.
 * Existing ids never change: only appends, published by compare-and-swap
 * on the head, so that concurrent runs each adding a class end with one
 * list that holds both and that every staged id is valid in (a staging
 * document's class list is not part of its schema: the merge keeps the
 * head's). */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

/* formats/dlk-v1.md: at most this many class names a tensor */
#define CLASSES_MAX 1000000

typedef struct newnames {
    char **v;
    size_t n, cap;
} newnames;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_int(const char *s)
{
    char *end;
    (void)strtoll(s, &end, 10);
    return *s && !*end;
}

/* Add text unless the tensor has it, it is an id (an integer is read as
 * one, never as a name: label_val in row.c), or it is listed already. */
static int consider(const Dlk_tensor *t, newnames *nn, const char *text)
{
    if (!*text || is_int(text))
        return 0;
    for (size_t i = 0; i < t->n_class_names; i++)
        if (strcmp(t->class_names[i], text) == 0)
            return 0;
    for (size_t i = 0; i < nn->n; i++)
        if (strcmp(nn->v[i], text) == 0)
            return 0;
    if (!DLK_GROW(nn->v, nn->n, nn->cap, 16))
        return -1;
    return (nn->v[nn->n++] = strdup(text)) ? 0 : -1;
}

static void names_free(newnames *nn)
{
    for (size_t i = 0; i < nn->n; i++)
        free(nn->v[i]);
    free(nn->v);
    memset(nn, 0, sizeof *nn);
}

/* The class names the source's samples give that tensor t lacks, as
 * row.c would read them without fetching an object: from the label
 * manifest's (or metadata's) label column, else from the image's folder.  A row with a .cls object is
 * left out (its class is in the object, read only when the row is
 * built: an unknown name there stays a bad row). */
static int collect(const dlk_dataset *ds, const Dlk_tensor *t,
                   const ing_source *src, const ing_labels *labels,
                   newnames *nn)
{
    ing_feeds feeds = {0};
    int tk, tv;
    ing_key_tensors(&ds->m, &tk, &tv);
    for (size_t i = 0; i < ds->m.ntensors; i++)
        if ((int)i != tk && (int)i != tv)
            ing_feeds_add(&feeds, &ds->m.tensors[i].spec);
    uint64_t unused = 0;
    for (size_t r = 0; r < src->nrows; r++) {
        if (!ing_row_is_sample(src, r, &feeds, NULL, NULL, &unused))
            continue;
        const ing_row *rw = &src->rows[r];
        const ing_obj *lead = &src->objs[rw->first];
        bool cls = false;
        for (uint32_t i = 0; i < rw->n; i++) {
            const ing_obj *o = &src->objs[rw->first + i];
            cls |= o->role == ING_CLS;
            if (o->role == ING_IMAGE || o->role == ING_VIDEO)
                lead = o;
        }
        if (cls || (labels && labels->exact && ing_meta_row(labels, src, r) < 0))
            continue; /* a .cls object's, or a stray of the metadata */
        if (labels && labels->label_col >= 0) {
            ssize_t lr = labels->exact ? ing_meta_row(labels, src, r)
                         : ing_labels_find(labels, lead->key, lead->stem_len);
            if (lr >= 0 &&
                consider(t, nn, labels->cells[(size_t)lr * labels->ncols +
                                              (size_t)labels->label_col]))
                return -1;
            continue;
        }
        char folder[256];
        if (ing_parent_folder(lead->key, folder, sizeof folder) == 0 &&
            consider(t, nn, folder))
            return -1;
    }
    return 0;
}

/* Append names to t's class list (ids n_class_names onwards). */
static dlk_status append_names(Dlk_tensor *t, const newnames *nn,
                               dlk_error *err)
{
    size_t n = t->n_class_names;
    char **v = realloc(t->class_names, (n + nn->n) * sizeof *v);
    if (!v)
        return Dlk_oom(err);
    t->class_names = v;
    t->spec.class_names = (const char *const *)v;
    for (size_t i = 0; i < nn->n; i++) {
        if (!(v[n + i] = strdup(nn->v[i])))
            return Dlk_oom(err);
        t->n_class_names = t->spec.n_class_names = n + i + 1;
    }
    return DLK_OK;
}

dlk_status ing_classes_grow(const char *url, const dlk_ingest_opts *o,
                            const ing_source *src, const ing_labels *labels,
                            dlk_ingest_result *res, dlk_error *err)
{
    for (int attempt = 0;; attempt++) {
        dlk_dataset *ds;
        dlk_status rc = Dlk_dataset_open_writer(url, o->store, &ds, err);
        if (rc)
            return rc;
        int tl = -1;
        for (size_t i = 0; tl < 0 && i < ds->m.ntensors; i++)
            if (ds->m.tensors[i].spec.kind == DLK_KIND_CLASS_LABEL)
                tl = (int)i;
        Dlk_tensor *t = tl >= 0 ? &ds->m.tensors[tl] : NULL;
        /* ids without names (no list to grow), or a label per element */
        if (!t || t->spec.ndim != 0 || t->n_class_names == 0) {
            dlk_dataset_free(ds);
            return DLK_OK;
        }
        newnames nn = {0};
        if (collect(ds, t, src, labels, &nn)) {
            names_free(&nn);
            dlk_dataset_free(ds);
            return Dlk_oom(err);
        }
        /* the order of the listing must not decide the ids */
        if (nn.n)
            qsort(nn.v, nn.n, sizeof *nn.v, cmp_str);
        if (!nn.n || o->strict_classes) {
            /* strict: the rows of new classes are bad rows */
            names_free(&nn);
            dlk_dataset_free(ds);
            return DLK_OK;
        }
        if (t->n_class_names + nn.n > CLASSES_MAX) {
            rc = Dlk_fail(err, DLK_EINVAL, "tensor '%s': %zu class names "
                          "and %zu new ones are more than %d",
                          t->spec.name, t->n_class_names, nn.n, CLASSES_MAX);
        } else if (o->dry_run) {
            for (size_t i = 0; i < nn.n && o->on_new_class; i++)
                o->on_new_class(o->ud, t->spec.name, nn.v[i],
                                t->n_class_names + i);
            res->classes_added = nn.n;
        } else {
            size_t first = t->n_class_names;
            rc = append_names(t, &nn, err);
            ds->dirty = true;
            if (!rc)
                rc = Dlk_write_head(ds, err);
            if (!rc) {
                for (size_t i = 0; i < nn.n && o->on_new_class; i++)
                    o->on_new_class(o->ud, t->spec.name, nn.v[i], first + i);
                res->classes_added += nn.n;
            }
        }
        names_free(&nn);
        dlk_dataset_free(ds);
        /* another writer replaced the head first (perhaps with classes
         * of its own): read it again and append after its names */
        if (rc != DLK_ECONFLICT || attempt == 4)
            return rc;
        Dlk_error_clear(err);
    }
}
