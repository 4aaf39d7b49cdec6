/* schema.c - the schema `dlk create DATASET from-s3 URL` infers from a
 * source, and create-then-ingest in one call. */
#include "ingest.h"
#include "pipeline.h"
#include "util/abi.h"
#include "util/clock.h"
#include "util/grow.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct names {
    char **v;
    size_t n, cap;
    bool all_int;
} names;

static int names_add(names *s, const char *text)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], text) == 0)
            return 0;
    if (!DLK_GROW(s->v, s->n, s->cap, 64))
        return -1;
    char *end;
    (void)strtoll(text, &end, 10);
    if (!*text || *end)
        s->all_int = false;
    return (s->v[s->n++] = strdup(text)) ? 0 : -1;
}

static void names_free(names *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct spec_list {
    dlk_tensor_spec *v;
    size_t n, cap;
} spec_list;

static dlk_tensor_spec *add_spec(spec_list *l, const char *name,
                                 dlk_dtype dt, dlk_kind kind, int ndim,
                                 const int64_t *shape)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return NULL;
    if (!DLK_GROW(l->v, l->n, l->cap, 8))
        return NULL;
    dlk_tensor_spec *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->dtype = dt;
    s->kind = kind;
    s->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        s->shape[d] = shape[d];
    return s;
}

/* Class names from a set of label texts: none when all are integers. */
static dlk_status set_classes(dlk_tensor_spec *s, names *nm, dlk_error *err)
{
    if (nm->all_int || !nm->n)
        return DLK_OK;
    qsort(nm->v, nm->n, sizeof *nm->v, cmp_str);
    char **copy = calloc(nm->n, sizeof *copy);
    if (!copy)
        return Dlk_oom(err);
    for (size_t i = 0; i < nm->n; i++)
        copy[i] = strdup(nm->v[i]);
    s->class_names = (const char *const *)copy;
    s->n_class_names = nm->n;
    return DLK_OK;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > DLK_NAME_MAX || *s == '.')
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_-.") == n;
}

static void image_shape(const dlk_ingest_opts *o, int64_t *out)
{
    int64_t c = o->channels ? o->channels : 3;
    int64_t h = o->height > 0 ? o->height : DLK_DIM_VARIABLE;
    int64_t w = o->width > 0 ? o->width : DLK_DIM_VARIABLE;
    if (o->layout == DLK_LAYOUT_CHW) {
        out[0] = c; out[1] = h; out[2] = w;
    } else {
        out[0] = h; out[1] = w; out[2] = c;
    }
}

/* Numeric fields of a JSON sidecar as tensors. */
static void json_tensors(spec_list *l, const Dlk_buf *b)
{
    json_t *root = json_loadb((const char *)b->data, b->len, 0, NULL);
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (!valid_name(k) || json_is_string(v) || json_is_object(v) ||
            json_is_null(v))
            continue;
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        double nums[64];
        size_t n, inner;
        if (text && ing_parse_numbers(text, nums, 64, &n, &inner) == 0) {
            int64_t sh[2] = {DLK_DIM_VARIABLE, (int64_t)inner};
            int nd = json_is_array(v) ? (inner ? 2 : 1) : 0;
            dlk_tensor_spec *s = add_spec(l, k, json_is_boolean(v) ? DLK_BOOL
                                          : DLK_F32, inner == 4
                                          ? DLK_KIND_BBOX : DLK_KIND_GENERIC,
                                          nd, sh);
            DLK_UNUSED(s);
        }
        free(text);
    }
    json_decref(root);
}

/* a manifest cell's numbers that inference reads (an embedding of 4096
 * floats is one list) */
#define NUMS_MAX 65536

/* The tensors of a COCO file's columns (coco.c): boxes f32 [?,4] of kind
 * bbox, their category ids i64 [?] (the categories' names as its class
 * names, by id) and the image id. */
static dlk_status coco_specs(spec_list *l, char **cat, size_t n,
                             dlk_error *err)
{
    int64_t sh[2] = {DLK_DIM_VARIABLE, 4};
    if (!add_spec(l, ING_COCO_BOXES, DLK_F32, DLK_KIND_BBOX, 2, sh))
        return Dlk_oom(err);
    dlk_tensor_spec *c = add_spec(l, ING_COCO_CATEGORIES, DLK_I64,
                                  DLK_KIND_GENERIC, 1, sh);
    if (!c || !add_spec(l, ING_COCO_IMAGE_ID, DLK_I64, DLK_KIND_GENERIC, 0,
                        sh))
        return Dlk_oom(err);
    /* re-find: add_spec may have moved the list */
    c = &l->v[l->n - 2];
    if (!n)
        return DLK_OK;
    char **copy = calloc(n, sizeof *copy);
    if (!copy)
        return Dlk_oom(err);
    for (size_t i = 0; i < n; i++)
        if (!(copy[i] = strdup(cat[i]))) {
            for (size_t j = 0; j < i; j++)
                free(copy[j]);
            free(copy);
            return Dlk_oom(err);
        }
    c->class_names = (const char *const *)copy;
    c->n_class_names = n;
    return DLK_OK;
}

/* Whether a row holds an object of role r. */
static bool row_has(const ing_source *src, size_t row, ing_role r)
{
    const ing_row *rw = &src->rows[row];
    for (uint32_t i = 0; i < rw->n; i++)
        if (src->objs[rw->first + i].role == r)
            return true;
    return false;
}

/* Whether object i's row is a sample (has media, when any row has). */
static bool in_sample(const ing_source *src, size_t i, bool media)
{
    if (!media)
        return true;
    const char *stem = src->objs[i].key;
    uint32_t len = src->objs[i].stem_len;
    /* the row's objects are next to it, sharing its stem */
    for (size_t j = i; j-- > 0 && src->objs[j].stem_len == len &&
                       memcmp(src->objs[j].key, stem, len) == 0;)
        if (src->objs[j].role == ING_IMAGE || src->objs[j].role == ING_VIDEO)
            return true;
    for (size_t j = i + 1; j < src->nobjs && src->objs[j].stem_len == len &&
                           memcmp(src->objs[j].key, stem, len) == 0; j++)
        if (src->objs[j].role == ING_IMAGE || src->objs[j].role == ING_VIDEO)
            return true;
    return false;
}

/* The .npy sidecars ("0001.emb.npy" beside "0001.jpg"): a tensor per
 * name that more than half of the samples have, its dtype and shape from
 * the headers of its first NPY_PROBE files (a dimension they disagree on
 * is variable); a header is the first bytes of its object, so the data
 * is not fetched.  A name that another source of the row already gives a
 * tensor (images, labels, a .json field, ...) is an error: which one
 * would fill it? */
#define NPY_PROBE 8
/* what is read of a .npy file to infer its tensor: its header, which
 * format 1.0's two-byte length keeps within this */
#define NPY_HEAD_MAX 65548
#define NPY_NAMES 64
static dlk_status npy_tensors(spec_list *l, const ing_source *src, bool media,
                              size_t samples, dlk_error *err)
{
    struct { const char *name; size_t rows, probed; Dlk_npy_info h; } t[NPY_NAMES];
    size_t nt = 0;
    dlk_status rc = DLK_OK;
    Dlk_buf b;
    Dlk_buf_init(&b);
    for (size_t i = 0; !rc && i < src->nobjs; i++) {
        const ing_obj *ob = &src->objs[i];
        if (ob->role != ING_NPY || !ob->tensor[0] || !in_sample(src, i, media))
            continue;
        size_t k = 0;
        while (k < nt && strcmp(t[k].name, ob->tensor) != 0)
            k++;
        if (k == nt) {
            if (nt == NPY_NAMES) {
                rc = Dlk_fail(err, DLK_ELIMIT, "more than %d tensors named by "
                              ".npy files ('%s'): give them with --tensor",
                              NPY_NAMES, ob->key);
                break;
            }
            t[nt].name = ob->tensor;
            t[nt].rows = t[nt].probed = 0;
            nt++;
        }
        t[k].rows++;
        if (t[k].probed == NPY_PROBE)
            continue;
        b.len = 0;
        Dlk_npy_info h;
        rc = ing_obj_head(src, ob, NPY_HEAD_MAX, &b, err);
        if (!rc)
            rc = Dlk_npy_parse_head(b.data, b.len, ob->size, ob->key, &h, err);
        if (rc)
            break;
        if (h.ndim > DLK_MAX_NDIM) {
            rc = Dlk_fail(err, DLK_EDECODE, "'%s': %d dimensions, more than "
                          "%d", ob->key, h.ndim, DLK_MAX_NDIM);
            break;
        }
        if (t[k].probed && t[k].h.dtype != h.dtype) {
            rc = Dlk_fail(err, DLK_EDECODE, "'%s' holds %s, another '%s' "
                          "file %s: give tensor '%s' with --tensor", ob->key,
                          dlk_dtype_name(h.dtype), ob->tensor,
                          dlk_dtype_name(t[k].h.dtype), ob->tensor);
            break;
        }
        if (t[k].probed && t[k].h.ndim != h.ndim) {
            rc = Dlk_fail(err, DLK_EDECODE, "'%s' has %d dimensions, another "
                          "'%s' file %d: give tensor '%s' with --tensor",
                          ob->key, h.ndim, ob->tensor, t[k].h.ndim, ob->tensor);
            break;
        }
        if (t[k].probed)
            for (int d = 0; d < h.ndim; d++)
                if (t[k].h.shape[d] != h.shape[d])
                    t[k].h.shape[d] = DLK_DIM_VARIABLE;
        if (!t[k].probed++)
            t[k].h = h;
    }
    for (size_t k = 0; !rc && k < nt; k++) {
        if (t[k].rows * 2 <= samples)
            continue;
        for (size_t j = 0; j < l->n; j++)
            if (strcmp(l->v[j].name, t[k].name) == 0)
                rc = Dlk_fail(err, DLK_EINVAL, ".npy files name tensor '%s', "
                              "which the source fills otherwise too: give the "
                              "tensors with --tensor", t[k].name);
        if (!rc && !add_spec(l, t[k].name, t[k].h.dtype, DLK_KIND_GENERIC,
                             t[k].h.ndim, t[k].h.shape))
            rc = Dlk_oom(err);
    }
    Dlk_buf_free(&b);
    return rc;
}

/* What a listing holds for inference.  The samples are the rows with an
 * image or a clip (all rows when none has one: labels or text alone); a
 * sidecar (.cls, .txt, .json) becomes a tensor only when more than half
 * of the samples have one, so that a stray notes.txt never makes every
 * image a bad row for want of text. */
typedef struct survey {
    bool image, video, media;
    bool folders;         /* every image and clip is in a folder */
    size_t samples;
    bool cls, txt;        /* sidecars of more than half of the samples */
    const ing_obj *json;  /* the first sample's .json, when they have */
} survey;

static void survey_source(const ing_source *src, survey *sv)
{
    memset(sv, 0, sizeof *sv);
    sv->folders = true;
    for (size_t i = 0; i < src->nobjs; i++) {
        const ing_obj *ob = &src->objs[i];
        sv->image |= ob->role == ING_IMAGE;
        sv->video |= ob->role == ING_VIDEO;
        char f[256];
        if ((ob->role == ING_IMAGE || ob->role == ING_VIDEO) &&
            (ob->shard ? ing_obj_folder(src, ob, f, sizeof f) != 0
                       : !strchr(ob->key, '/')))
            sv->folders = false;
    }
    sv->media = sv->image || sv->video;
    size_t n_cls = 0, n_txt = 0, n_json = 0;
    for (size_t r = 0; r < src->nrows; r++) {
        if (sv->media && !row_has(src, r, ING_IMAGE) &&
            !row_has(src, r, ING_VIDEO))
            continue;
        sv->samples++;
        n_cls += row_has(src, r, ING_CLS);
        n_txt += row_has(src, r, ING_TXT);
        if (row_has(src, r, ING_JSON)) {
            n_json++;
            const ing_row *rw = &src->rows[r];
            for (uint32_t i = 0; !sv->json && i < rw->n; i++)
                if (src->objs[rw->first + i].role == ING_JSON)
                    sv->json = &src->objs[rw->first + i];
        }
    }
    sv->cls = n_cls * 2 > sv->samples;
    sv->txt = n_txt * 2 > sv->samples;
    if (n_json * 2 <= sv->samples)
        sv->json = NULL;
}

/* The images and video tensors, of the options' size and layout. */
static dlk_status media_specs(spec_list *l, const survey *sv,
                              const dlk_ingest_opts *o, dlk_error *err)
{
    int64_t sh[DLK_MAX_NDIM];
    if (sv->image) {
        image_shape(o, sh);
        if (!add_spec(l, "images", DLK_U8, DLK_KIND_IMAGE, 3, sh))
            return Dlk_oom(err);
    }
    if (sv->video) {
        sh[0] = o->frames > 0 ? o->frames : DLK_DIM_VARIABLE;
        image_shape(o, sh + 1);
        if (!add_spec(l, "video", DLK_U8, DLK_KIND_VIDEO, 4, sh))
            return Dlk_oom(err);
    }
    return DLK_OK;
}

/* The labels of a COCO file given without a label manifest (*cat its
 * categories' names), else those of the manifest or the listing. */
static dlk_status load_labels(const dlk_ingest_opts *o, ing_source *sp,
                              ing_labels *lab, bool *have_lab, char ***cat,
                              size_t *n_cat, dlk_error *err)
{
    if (o->coco && !o->labels) {
        dlk_status rc = ing_coco_load(o->coco, o->store, lab, cat, n_cat,
                                      err);
        *have_lab = !rc;
        return rc;
    }
    return ing_labels_for(o, sp, lab, have_lab, err);
}

/* The class names of a label manifest's label column. */
static dlk_status manifest_names(const ing_labels *lab, names *nm,
                                 dlk_error *err)
{
    for (size_t r = 0; r < lab->nrows; r++)
        if (names_add(nm, lab->cells[r * lab->ncols +
                                     (size_t)lab->label_col]))
            return Dlk_oom(err);
    return DLK_OK;
}

/* The class names of the samples' .cls sidecars; one that is gone or
 * larger than the listing said is left out. */
static dlk_status cls_names(const ing_source *src, bool media, names *nm,
                            dlk_error *err)
{
    dlk_status rc = DLK_OK;
    Dlk_buf b;
    Dlk_buf_init(&b);
    for (size_t i = 0; !rc && i < src->nobjs; i++) {
        if (src->objs[i].role != ING_CLS || !in_sample(src, i, media))
            continue;
        b.len = 0;
        /* no more than the listing said it holds */
        uint64_t max = src->objs[i].size < 4096 ? src->objs[i].size : 4096;
        rc = ing_obj_get(src, &src->objs[i], max, &b, err);
        if (rc == DLK_ELIMIT || rc == DLK_ENOTFOUND) {
            Dlk_error_clear(err);
            rc = DLK_OK;
            continue;
        }
        if (rc)
            break; /* the network's fault: b holds nothing */
        char text[4097];
        size_t n = b.len;
        memcpy(text, b.data, n);
        text[n] = '\0';
        while (n && strchr(" \t\r\n", text[n - 1]))
            text[--n] = '\0';
        if (!rc && names_add(nm, text + strspn(text, " \t\r\n")))
            rc = Dlk_oom(err);
    }
    Dlk_buf_free(&b);
    return rc;
}

/* The class names of the folders the images and clips are in. */
static dlk_status folder_names(const ing_source *src, names *nm,
                               dlk_error *err)
{
    dlk_status rc = DLK_OK;
    char f[256];
    for (size_t i = 0; !rc && i < src->nobjs; i++)
        if ((src->objs[i].role == ING_IMAGE ||
             src->objs[i].role == ING_VIDEO) &&
            ing_obj_folder(src, &src->objs[i], f, sizeof f) == 0 &&
            names_add(nm, f))
            rc = Dlk_oom(err);
    nm->all_int = false; /* folder names are names, even "0" */
    return rc;
}

/* The class label tensor, when the source gives labels: the label
 * manifest's column (lab, NULL for none), else the samples' .cls
 * sidecars, else the media's folders. */
static dlk_status label_spec(spec_list *l, const survey *sv,
                             const ing_source *src, const ing_labels *lab,
                             dlk_error *err)
{
    names nm = {.all_int = true};
    dlk_status rc;
    /* metadata without a label column: no class tensor, as Hugging Face's
     * ImageFolder drops the folders' labels beside metadata */
    if (lab && lab->exact && lab->label_col < 0)
        return DLK_OK;
    if (lab)
        rc = manifest_names(lab, &nm, err);
    else if (sv->cls)
        rc = cls_names(src, sv->media, &nm, err);
    else if (sv->media && sv->folders)
        rc = folder_names(src, &nm, err);
    else
        return DLK_OK;
    if (!rc) {
        dlk_tensor_spec *s = add_spec(l, "labels", DLK_I32,
                                      DLK_KIND_CLASS_LABEL, 0, NULL);
        rc = s ? set_classes(s, &nm, err)
               : Dlk_oom(err);
    }
    names_free(&nm);
    return rc;
}

/* The manifest's other columns: numbers, else text */
static dlk_status column_specs(spec_list *l, const ing_labels *lab,
                               dlk_error *err)
{
    double *v = malloc(NUMS_MAX * sizeof *v);
    if (!v)
        return Dlk_oom(err);
    int64_t sh[1] = {DLK_DIM_VARIABLE};
    for (size_t c = 1; c < lab->ncols; c++) {
        if ((int)c == lab->label_col || !valid_name(lab->cols[c]))
            continue;
        /* the source key tensors' names are theirs: a column "key" would
         * leave the dataset without them */
        if (lab->exact && (strcmp(lab->cols[c], ING_KEY_TENSOR) == 0 ||
                           strcmp(lab->cols[c], ING_KEY_VERSION_TENSOR) == 0))
            continue;
        bool numeric = true, scalar = true, ints = lab->exact;
        size_t n, inner;
        for (size_t r = 0; numeric && r < lab->nrows; r++) {
            const char *cell = lab->cells[r * lab->ncols + c];
            numeric = ing_parse_numbers(cell, v, NUMS_MAX, &n, &inner) == 0;
            scalar &= n == 1 && !strchr(cell, '[');
            char *end;
            (void)strtoll(cell, &end, 10);
            ints &= *cell && !*end;
        }
        /* metadata: integers as Hugging Face's int64, other numbers f32 */
        add_spec(l, lab->cols[c], !numeric ? DLK_U8
                 : ints && scalar ? DLK_I64 : DLK_F32,
                 numeric ? DLK_KIND_GENERIC : DLK_KIND_TEXT,
                 numeric && scalar ? 0 : 1, sh);
    }
    free(v);
    return DLK_OK;
}

/* The tensors of the numeric fields of a sample's .json sidecar (its
 * first MiB). */
static dlk_status json_sidecar_specs(spec_list *l, const ing_source *src,
                                     const ing_obj *json, dlk_error *err)
{
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = ing_obj_get(src, json,
                                json->size < (1u << 20) ? json->size
                                                        : 1u << 20,
                                &b, err);
    if (!rc)
        json_tensors(l, &b);
    Dlk_buf_free(&b);
    return rc;
}

/* Kept for the run over this listing (ing_labels_for), which would read
 * and parse the same file again. */
static void keep_labels(ing_source *sp, ing_labels *lab)
{
    struct ing_labels *keep = !sp->manifest ? malloc(sizeof *keep) : NULL;
    if (keep) {
        *keep = *lab;
        sp->manifest = keep;
    } else {
        ing_labels_free(lab);
    }
}

/* The tensors of a listed source (the listing is the caller's; see
 * survey for which of its objects make a tensor). */
static dlk_status infer(const dlk_ingest_opts *o, ing_source *sp,
                        dlk_tensor_spec **out, size_t *nout, dlk_error *err)
{
    const ing_source src = *sp;
    survey sv;
    survey_source(&src, &sv);
    spec_list l = {0};
    dlk_status rc = ing_source_listed_any(sp, o->source, err);
    if (!rc && !src.nrows)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "nothing to ingest in '%s' (no "
                      "images, video or labels)", o->source);
    else if (!rc && src.npy && src.npy == src.nobjs)
        rc = Dlk_fail(err, DLK_EINVAL, "cannot infer tensors from .npy files "
                      "in '%s': give them with --tensor", o->source);
    if (!rc)
        rc = media_specs(&l, &sv, o, err);
    ing_labels lab;
    bool have_lab = false;
    char **cat_names = NULL;
    size_t n_cat_names = 0;
    if (!rc)
        rc = load_labels(o, sp, &lab, &have_lab, &cat_names, &n_cat_names,
                         err);
    if (!rc)
        rc = label_spec(&l, &sv, &src, have_lab ? &lab : NULL, err);
    if (!rc && sv.txt) {
        int64_t sh[1] = {DLK_DIM_VARIABLE};
        if (!add_spec(&l, "text", DLK_U8, DLK_KIND_TEXT, 1, sh))
            rc = Dlk_oom(err);
    }
    if (!rc && have_lab)
        rc = lab.coco ? coco_specs(&l, cat_names, n_cat_names, err)
                      : column_specs(&l, &lab, err);
    for (size_t i = 0; i < n_cat_names; i++)
        free(cat_names[i]);
    free(cat_names);
    if (!rc && sv.json)
        rc = json_sidecar_specs(&l, &src, sv.json, err);
    if (!rc && src.npy)
        rc = npy_tensors(&l, &src, sv.media, sv.samples, err);
    if (!rc && l.n == 0)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "nothing to ingest in '%s'",
                      o->source);
    if (have_lab && !rc)
        keep_labels(sp, &lab);
    else if (have_lab)
        ing_labels_free(&lab);
    if (rc) {
        dlk_ingest_specs_free(l.v, l.n);
        return rc;
    }
    *out = l.v;
    *nout = l.n;
    return DLK_OK;
}

dlk_status dlk_ingest_infer(const dlk_ingest_opts *o, dlk_tensor_spec **out,
                            size_t *nout, dlk_error *err)
{
    *out = NULL;
    *nout = 0;
    dlk_ingest_opts own;
    dlk_status orc = ing_opts_own(&o, &own, err);
    if (orc)
        return orc;
    if (!o || !o->source)
        return Dlk_fail(err, DLK_EINVAL, "no source to ingest from");
    ing_source src;
    /* the caller's objects, if any, and no progress nor stop: a listing
     * only */
    dlk_ingest_opts given = DLK_INGEST_OPTS_INIT;
    given.objects = o->objects;
    given.n_objects = o->n_objects;
    given.read_object = o->read_object;
    given.read_object_ud = o->read_object_ud;
    dlk_status rc = ing_source_open(o->source, o->labels, o->store, &given,
                                    &src, err);
    if (rc)
        return rc;
    rc = infer(o, &src, out, nout, err);
    ing_source_free(&src);
    return rc;
}

void dlk_ingest_specs_free(dlk_tensor_spec *specs, size_t n)
{
    for (size_t i = 0; specs && i < n; i++) {
        for (size_t j = 0; j < specs[i].n_class_names; j++)
            free((char *)specs[i].class_names[j]);
        free((void *)specs[i].class_names);
    }
    free(specs);
}

/* classes: the class names must be the same as well (ingesting into an
 * existing dataset maps class names to its own ids instead, and reports
 * rows of a class it lacks). */
static bool same_specs(const dlk_dataset *ds, const dlk_tensor_spec *s,
                       size_t n, bool classes)
{
    if (ds->m.ntensors != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        const dlk_tensor_spec *x = &ds->m.tensors[i].spec;
        if (strcmp(x->name, s[i].name) || x->dtype != s[i].dtype ||
            x->ndim != s[i].ndim || x->kind != s[i].kind ||
            memcmp(x->shape, s[i].shape, sizeof(int64_t) * (size_t)x->ndim))
            return false;
        if (!classes)
            continue;
        if (ds->m.tensors[i].n_class_names != s[i].n_class_names)
            return false;
        for (size_t j = 0; j < s[i].n_class_names; j++)
            if (strcmp(ds->m.tensors[i].class_names[j], s[i].class_names[j]))
                return false;
    }
    return true;
}

static int any_object(void *ud, const char *key, uint64_t size)
{
    DLK_UNUSED(key);
    DLK_UNUSED(size);
    *(bool *)ud = true;
    return 1;
}

/* A shard document of a run not yet merged (merge removes them). */
static int staged_shard(void *ud, const char *key, uint64_t size)
{
    DLK_UNUSED(size);
    const char *base = strrchr(key, '/');
    if (strncmp(base ? base + 1 : key, "shard-", 6) != 0)
        return 0;
    *(bool *)ud = true;
    return 1;
}

/* Append ", name" (or "name" first) to out (len bytes used so far). */
static size_t add_name(char *out, size_t cap, size_t len, const char *name)
{
    if (len >= cap)
        return len;
    return len + (size_t)snprintf(out + len, cap - len, "%s%s",
                                  len ? ", " : "", name);
}

/* The dataset exists: go on only when it has the tensors this command
 * creates and it is empty (a create that stopped before its first row),
 * or an unfinished run is staged there (a rerun after a crash or an
 * interruption), or exist_ok.  The shards of one sharded create start at
 * once: they also go on while it holds a run's record. */
static dlk_status reuse(const char *url, const dlk_tensor_spec *s, size_t n,
                        const dlk_ingest_opts *o, dlk_error *err)
{
    dlk_dataset *ds = NULL;
    dlk_status rc = DLK_OK;
    /* a concurrent shard may be between dlk.json and the head */
    for (int i = 0; i < 50; i++) {
        rc = Dlk_dataset_open_writer(url, ing_store(o), &ds, err);
        if (rc != DLK_ECORRUPT && rc != DLK_ENOTFOUND)
            break;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (rc)
        return rc;
    bool ok = same_specs(ds, s, n, !(o && o->exist_ok)), empty = true,
         record = false;
    bool staged = false, sharded = o && o->nshards > 1;
    for (size_t i = 0; i < ds->m.ntensors; i++)
        empty &= ds->m.tensors[i].samples == 0;
    if (ok)
        rc = Dlk_store_list(ds->store, "staging/ingest/", staged_shard,
                            &staged, err);
    if (!rc && ok && sharded && !empty && !staged)
        rc = Dlk_store_list(ds->store, "staging/ingest/", any_object, &record,
                            err);
    char have[256] = "", want[256] = "";
    for (size_t i = 0, len = 0; !ok && i < ds->m.ntensors; i++)
        len = add_name(have, sizeof have, len, ds->m.tensors[i].spec.name);
    for (size_t i = 0, len = 0; !ok && i < n; i++)
        len = add_name(want, sizeof want, len, s[i].name);
    dlk_dataset_free(ds);
    if (rc)
        return rc;
    if (!ok && strcmp(have, want) == 0)
        return Dlk_fail(err, DLK_EEXIST, "a dataset already exists at '%s' "
                        "with other tensors (the same names, %s, of another "
                        "dtype, shape, kind or classes: see dlk ls '%s'%s)",
                        url, have, url,
                        o && o->exist_ok ? "" : "; --exist-ok ingests into "
                        "it when only the classes differ");
    if (!ok)
        return Dlk_fail(err, DLK_EEXIST, "a dataset already exists at '%s' "
                        "with other tensors (%s; this command's: %s): remove "
                        "it or choose another url", url, have, want);
    if (empty || staged || (o && o->exist_ok) || (sharded && record))
        return DLK_OK;
    return Dlk_fail(err, DLK_EEXIST, "a dataset already exists at '%s' and "
                    "holds samples (--exist-ok ingests into it)", url);
}

typedef struct key_vec {
    char **k;
    size_t n, cap;
} key_vec;

static int collect_key(void *ud, const char *key, uint64_t size)
{
    DLK_UNUSED(size);
    key_vec *v = ud;
    if (!DLK_GROW(v->k, v->n, v->cap, 64))
        return 1;
    return !(v->k[v->n] = strdup(key)) || (v->n++, 0);
}

/* A create whose ingest was rejected leaves no dataset: every object
 * under the url was written by this call. */
static void remove_created(const char *url, const dlk_store_options *so)
{
    Dlk_store *st;
    dlk_error e;
    if (Dlk_store_open(url, false, so, &st, &e))
        return;
    key_vec keys = {0};
    Dlk_store_list(st, "", collect_key, &keys, &e);
    /* dlk.json last: until then the url still reads as a dataset */
    for (size_t i = keys.n; i-- > 0;) {
        if (strcmp(keys.k[i], DLK_KEY_DATASET))
            Dlk_store_del(st, keys.k[i], &e);
    }
    Dlk_store_del(st, DLK_KEY_DATASET, &e);
    for (size_t i = 0; i < keys.n; i++)
        free(keys.k[i]);
    free(keys.k);
    Dlk_store_free(st);
}

/* --dry-run of a create: what the source's rows would give the schema
 * s[0..n), reported as the run would; nothing is written. */
static dlk_status dry_create(const dlk_ingest_opts *o, ing_source *src,
                             const dlk_tensor_spec *s, size_t n,
                             dlk_ingest_result *res, dlk_error *err)
{
    ing_labels lab;
    bool have_lab = false;
    dlk_status rc = ing_labels_for(o, src, &lab, &have_lab, err);
    if (!rc && have_lab && lab.exact)
        rc = ing_meta_missing(src, &lab, err);
    if (rc) {
        if (have_lab)
            ing_labels_free(&lab);
        return rc;
    }
    ing_feeds f = {0};
    for (size_t i = 0; i < n; i++)
        ing_feeds_add(&f, &s[i]);
    unsigned nshards = o->nshards > 1 ? o->nshards : 1;
    unsigned shard = o->nshards > 1 ? o->shard : 0;
    if (shard == 0) {
        for (size_t i = 0; i < src->nunsafe; i++) {
            char why[160];
            ing_unsafe_reason(&src->unsafe[i], why, sizeof why);
            if (o->on_bad)
                o->on_bad(o->ud, src->unsafe[i].key, why);
            res->skipped++;
        }
        for (size_t i = 0; o->on_unused && i < src->nunused; i++)
            o->on_unused(o->ud, src->unused[i].key, src->unused[i].why);
        res->unused += src->unused_total;
    }
    /* the shard's rows in the order the run would append them */
    ing_order order = ing_order_of(o);
    size_t *rows = NULL;
    rc = ing_order_rows(src, &order, &rows, err);
    ing_order_free(&order);
    if (rc) {
        if (have_lab)
            ing_labels_free(&lab);
        return rc;
    }
    size_t a = (size_t)((unsigned __int128)src->nrows * shard / nshards);
    size_t b = (size_t)((unsigned __int128)src->nrows * (shard + 1) /
                        nshards);
    for (size_t k = a; k < b; k++)
        if (!ing_meta_stray(have_lab ? &lab : NULL, src, rows[k], o,
                            shard == 0, &res->unused))
            res->planned += ing_row_is_sample(src, rows[k], &f,
                                              o->on_unused, o->ud,
                                              &res->unused);
    free(rows);
    if (have_lab)
        ing_labels_free(&lab);
    res->ignored = src->ignored;
    res->order = order.shuffled ? DLK_ORDER_SHUFFLED : DLK_ORDER_SORTED;
    res->order_seed = order.seed;
    return DLK_OK;
}

/* The source create ingests, listed once: for inference, or for a dry
 * run of a given schema. */
static dlk_status list_source(const dlk_ingest_opts *opts, ing_source *src,
                              dlk_error *err)
{
    if (!opts || !opts->source)
        return Dlk_fail(err, DLK_EINVAL, "no source to ingest from");
    return ing_source_open(opts->source, opts->labels, opts->store, opts, src,
                           err);
}

static dlk_status ingest_create(const char *url, const dlk_tensor_spec *specs,
                                size_t n_specs, uint64_t chunk_bytes,
                                const dlk_ingest_opts *opts,
                                dlk_ingest_result *result, dlk_error *err);

dlk_status dlk_ingest_create(const char *url, const dlk_tensor_spec *specs,
                             size_t n_specs, uint64_t chunk_bytes,
                             const dlk_ingest_opts *opts,
                             dlk_ingest_result *result, dlk_error *err)
{
    /* failures before the ingest leave it all zero */
    dlk_ingest_result own;
    dlk_status rc = abi_result_in(&own, sizeof own, result,
                                  "dlk_ingest_result", err);
    if (!rc)
        rc = ingest_create(url, specs, n_specs, chunk_bytes, opts, &own,
                           err);
    abi_copy_out(result, &own, sizeof own);
    return rc;
}

/* The source listed into *src (*list_s its seconds from t0) and its
 * schema inferred, with the caller's chunk and part sizes.  *stopped: the
 * listing was interrupted, and nothing is inferred; *src is listed all
 * the same.  On an error nothing is left to free. */
static dlk_status list_and_infer(const dlk_ingest_opts *opts,
                                 uint64_t chunk_bytes, double t0,
                                 ing_source *src, double *list_s,
                                 bool *stopped, dlk_tensor_spec **specs,
                                 size_t *n, dlk_error *err)
{
    dlk_status rc = list_source(opts, src, err);
    if (rc)
        return rc;
    *list_s = Dlk_now_s() - t0;
    if ((*stopped = src->stopped))
        return DLK_OK;
    rc = infer(opts, src, specs, n, err);
    if (rc) {
        ing_source_free(src);
        return rc;
    }
    for (size_t i = 0; i < *n; i++) {
        (*specs)[i].chunk_bytes = chunk_bytes;
        (*specs)[i].part_bytes = opts->part_bytes;
    }
    return DLK_OK;
}

/* --dry-run of a create of specs[0..n): the schema told and the source's
 * rows counted (dry_create); the source is listed now unless it was for
 * inference, and freed. */
static dlk_status dry_run(const dlk_ingest_opts *opts, ing_source *src,
                          bool listed, double t0, double list_s,
                          const dlk_tensor_spec *specs, size_t n,
                          dlk_ingest_result *result, dlk_error *err)
{
    dlk_status rc;
    if (!listed) {
        if ((rc = list_source(opts, src, err)))
            return rc;
        list_s = Dlk_now_s() - t0;
    }
    if (opts->on_schema)
        opts->on_schema(opts->ud, specs, n);
    rc = dry_create(opts, src, specs, n, result, err);
    result->list_seconds = list_s;
    result->seconds = Dlk_now_s() - t0;
    ing_source_free(src);
    return rc;
}

/* The dataset at url created with specs[0..n) (*created), or the one
 * already there when reuse goes on with it. */
static dlk_status create_or_reuse(const char *url,
                                  const dlk_tensor_spec *specs, size_t n,
                                  const dlk_ingest_opts *opts, bool *created,
                                  dlk_error *err)
{
    dlk_dataset *ds = NULL;
    dlk_status rc = dlk_dataset_create_with(url, specs, n, ing_store(opts),
                                            &ds, err);
    *created = !rc;
    if (rc == DLK_EEXIST) {
        dlk_error not_empty = {0};
        if (err)
            not_empty = *err;
        Dlk_error_clear(err);
        rc = reuse(url, specs, n, opts, err);
        /* objects but no dataset: the refusal says what is there */
        if (rc == DLK_ENOTFOUND) {
            rc = DLK_EEXIST;
            if (err)
                *err = not_empty;
        }
    } else if (!rc) {
        rc = dlk_dataset_close(ds, err);
    }
    return rc;
}

/* result: the library's own, never NULL */
static dlk_status ingest_create(const char *url, const dlk_tensor_spec *specs,
                                size_t n_specs, uint64_t chunk_bytes,
                                const dlk_ingest_opts *opts,
                                dlk_ingest_result *result, dlk_error *err)
{
    dlk_tensor_spec *inferred = NULL;
    size_t n = n_specs, n_inferred = 0;
    dlk_status rc = DLK_OK;
    dlk_ingest_opts own;
    if ((rc = ing_opts_own(&opts, &own, err)))
        return rc;
    /* the schema is inferred from the listing that the ingest then uses:
     * the source is listed once (a million keys of S3: a thousand pages) */
    double t0 = Dlk_now_s(), list_s = 0;
    ing_source src;
    bool listed = false;
    if (!n_specs) {
        bool stopped;
        if ((rc = list_and_infer(opts, chunk_bytes, t0, &src, &list_s,
                                 &stopped, &inferred, &n, err)))
            return rc;
        listed = true;
        if (stopped) {
            ing_source_free(&src);
            result->interrupted = 1;
            result->list_seconds = result->seconds = list_s;
            return DLK_OK;
        }
        specs = inferred;
        n_inferred = n;
    }
    dlk_tensor_spec *keyed = NULL;
    if (!opts || !opts->no_key) {
        if ((rc = ing_key_specs_add(specs, &n, &keyed, err))) {
            dlk_ingest_specs_free(inferred, n_inferred);
            if (listed)
                ing_source_free(&src);
            return rc;
        }
        if (keyed)
            specs = keyed;
    }
    if (opts && opts->dry_run) {
        rc = dry_run(opts, &src, listed, t0, list_s, specs, n, result, err);
        free(keyed);
        dlk_ingest_specs_free(inferred, n_inferred);
        return rc;
    }
    bool created;
    rc = create_or_reuse(url, specs, n, opts, &created, err);
    free(keyed); /* a shallow copy: the names belong to specs */
    dlk_ingest_specs_free(inferred, n_inferred);
    if (rc) {
        if (listed)
            ing_source_free(&src);
        return rc;
    }
    rc = listed ? ing_ingest_listed(url, opts, &src, t0, list_s, result, err)
                : ing_ingest_listed(url, opts, NULL, Dlk_now_s(), 0, result,
                                    err);
    if (rc && result->rejected && created && !(opts && opts->nshards > 1))
        remove_created(url, ing_store(opts));
    return rc;
}
