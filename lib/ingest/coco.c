/* coco.c - a COCO-style annotation file (--coco: "images", "annotations",
 * "categories") read as a manifest of whole keys, as metadata files are
 * (metadata.c): each image whose file_name the source holds is a row,
 * with its boxes [N,4] (x, y, width, height as COCO gives them), their
 * category ids [N] and its image id; N varies from image to image. */
#include "pipeline.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the columns of the manifest, after the key */
static const char *const cols[] = {"file_name", ING_COCO_BOXES,
                                   ING_COCO_CATEGORIES, ING_COCO_IMAGE_ID};
enum { NCOLS = 4 };

typedef struct coco_img {
    json_int_t id;
    size_t index;        /* in "images" */
    Dlk_buf boxes, cats; /* "[[x,y,w,h],..." and "[c,..." so far */
    size_t n;
} coco_img;

static int cmp_id(const void *a, const void *b)
{
    json_int_t x = ((const coco_img *)a)->id, y = ((const coco_img *)b)->id;
    return (x > y) - (x < y);
}

static coco_img *find_img(coco_img *v, size_t n, json_int_t id)
{
    coco_img key = {.id = id};
    return bsearch(&key, v, n, sizeof *v, cmp_id);
}

static bool num(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return isfinite(*out);
}

static dlk_status add_ann(coco_img *imgs, size_t nimgs, const json_t *a,
                          size_t i, const char *name, dlk_error *err)
{
    const json_t *iid = json_object_get(a, "image_id");
    const json_t *cid = json_object_get(a, "category_id");
    const json_t *bb = json_object_get(a, "bbox");
    if (!json_is_object(a) || !json_is_integer(iid) || !json_is_integer(cid))
        return Dlk_fail(err, DLK_EINVAL, "COCO file '%s': annotation %zu "
                        "has no integer image_id and category_id", name, i);
    double b[4];
    if (json_array_size(bb) != 4 || !num(json_array_get(bb, 0), &b[0]) ||
        !num(json_array_get(bb, 1), &b[1]) ||
        !num(json_array_get(bb, 2), &b[2]) ||
        !num(json_array_get(bb, 3), &b[3]))
        return Dlk_fail(err, DLK_EINVAL, "COCO file '%s': annotation %zu: "
                        "bbox is not 4 numbers [x, y, width, height]", name,
                        i);
    coco_img *im = find_img(imgs, nimgs, json_integer_value(iid));
    if (!im)
        return Dlk_fail(err, DLK_EINVAL, "COCO file '%s': annotation %zu "
                        "names image_id %lld, which \"images\" lacks", name, i,
                        (long long)json_integer_value(iid));
    char text[160];
    int len = snprintf(text, sizeof text, "%s[%.9g,%.9g,%.9g,%.9g]",
                       im->n ? "," : "", b[0], b[1], b[2], b[3]);
    dlk_status rc = Dlk_buf_append(&im->boxes, text, (size_t)len, err);
    len = snprintf(text, sizeof text, "%s%lld", im->n ? "," : "",
                   (long long)json_integer_value(cid));
    if (!rc)
        rc = Dlk_buf_append(&im->cats, text, (size_t)len, err);
    im->n++;
    return rc;
}

/* "[" text "]" as a string (malloc'd), NULL when out of memory. */
static char *bracket(const Dlk_buf *b)
{
    char *s = malloc(b->len + 3);
    if (!s)
        return NULL;
    s[0] = '[';
    if (b->len)
        memcpy(s + 1, b->data, b->len);
    s[b->len + 1] = ']';
    s[b->len + 2] = '\0';
    return s;
}

static dlk_status build(const json_t *root, const char *name,
                        ing_labels *l, dlk_error *err)
{
    const json_t *images = json_object_get(root, "images");
    const json_t *anns = json_object_get(root, "annotations");
    if (!json_is_array(images) || !json_is_array(anns))
        return Dlk_fail(err, DLK_EINVAL, "COCO file '%s' has no \"images\" "
                        "and \"annotations\" arrays", name);
    size_t n = json_array_size(images);
    coco_img *imgs = calloc(n + 1, sizeof *imgs);
    if (!imgs)
        return Dlk_oom(err);
    dlk_status rc = DLK_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        const json_t *im = json_array_get(images, i);
        const json_t *id = json_object_get(im, "id");
        if (!json_is_integer(id) ||
            !json_is_string(json_object_get(im, "file_name")))
            rc = Dlk_fail(err, DLK_EINVAL, "COCO file '%s': image %zu has no "
                          "integer id and string file_name", name, i);
        imgs[i].id = json_integer_value(id);
        imgs[i].index = i;
        Dlk_buf_init(&imgs[i].boxes);
        Dlk_buf_init(&imgs[i].cats);
    }
    if (!rc)
        qsort(imgs, n, sizeof *imgs, cmp_id);
    for (size_t i = 1; !rc && i < n; i++)
        if (imgs[i].id == imgs[i - 1].id)
            rc = Dlk_fail(err, DLK_EINVAL, "COCO file '%s': image id %lld "
                          "appears twice", name, (long long)imgs[i].id);
    for (size_t i = 0; !rc && i < json_array_size(anns); i++)
        rc = add_ann(imgs, n, json_array_get(anns, i), i, name, err);
    if (!rc && !(l->cells = calloc(n * NCOLS + 1, sizeof *l->cells)))
        rc = Dlk_oom(err);
    if (!rc)
        l->nrows = n; /* cells not filled yet are NULL: freed as well */
    for (size_t i = 0; !rc && i < n; i++) {
        /* rows in the file's order of images */
        const coco_img *im = &imgs[i];
        char **row = l->cells + im->index * NCOLS;
        const char *fn = json_string_value(json_object_get(
            json_array_get(images, im->index), "file_name"));
        while (strncmp(fn, "./", 2) == 0)
            fn += 2;
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)im->id);
        row[0] = strdup(fn);
        row[1] = bracket(&im->boxes);
        row[2] = bracket(&im->cats);
        row[3] = strdup(id);
        if (!row[0] || !row[1] || !row[2] || !row[3])
            rc = Dlk_oom(err);
    }
    for (size_t i = 0; i < n; i++) {
        Dlk_buf_free(&imgs[i].boxes);
        Dlk_buf_free(&imgs[i].cats);
    }
    free(imgs);
    return rc;
}

/* The names of the "categories", indexed by id ("" for an id none has),
 * into *names (malloc'd, *n of them), none when there are none. */
static dlk_status categories(const json_t *root, const char *name,
                             char ***names, size_t *n, dlk_error *err)
{
    *names = NULL;
    *n = 0;
    const json_t *cats = json_object_get(root, "categories");
    json_int_t max = -1;
    for (size_t i = 0; i < json_array_size(cats); i++) {
        const json_t *c = json_array_get(cats, i);
        const json_t *id = json_object_get(c, "id");
        if (!json_is_integer(id) ||
            !json_is_string(json_object_get(c, "name")) ||
            json_integer_value(id) < 0 ||
            json_integer_value(id) >= ING_COCO_MAX_CATEGORY)
            return Dlk_fail(err, DLK_EINVAL, "COCO file '%s': category %zu "
                            "has no id in 0..%d and string name", name, i,
                            ING_COCO_MAX_CATEGORY - 1);
        if (json_integer_value(id) > max)
            max = json_integer_value(id);
    }
    if (max < 0)
        return DLK_OK;
    char **v = calloc((size_t)max + 1, sizeof *v);
    if (!v)
        return Dlk_oom(err);
    for (size_t i = 0; i < json_array_size(cats); i++) {
        const json_t *c = json_array_get(cats, i);
        size_t id = (size_t)json_integer_value(json_object_get(c, "id"));
        free(v[id]);
        v[id] = strdup(json_string_value(json_object_get(c, "name")));
    }
    dlk_status rc = DLK_OK;
    for (size_t i = 0; i <= (size_t)max; i++)
        if (!v[i] && !(v[i] = strdup("")))
            rc = Dlk_oom(err);
    *names = v;
    *n = (size_t)max + 1;
    return rc;
}

dlk_status ing_coco_load(const char *src, const dlk_store_options *so,
                         ing_labels *l, char ***names, size_t *nnames,
                         dlk_error *err)
{
    memset(l, 0, sizeof *l);
    if (names) {
        *names = NULL;
        *nnames = 0;
    }
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = ing_manifest_read(src, so, &b, err);
    json_error_t je;
    json_t *root = rc ? NULL : json_loadb((const char *)b.data, b.len, 0, &je);
    Dlk_buf_free(&b);
    if (rc)
        return rc;
    if (!json_is_object(root)) {
        json_decref(root);
        return Dlk_fail(err, DLK_EINVAL, "COCO file '%s' is not a JSON "
                        "object: %s (line %d)", src, je.text, je.line);
    }
    l->exact = true;
    l->coco = true;
    l->label_col = -1;
    l->ncols = NCOLS;
    if (!(l->name = strdup(src)) ||
        !(l->cols = calloc(NCOLS, sizeof *l->cols)))
        rc = Dlk_oom(err);
    for (size_t c = 0; !rc && c < NCOLS; c++)
        if (!(l->cols[c] = strdup(cols[c])))
            rc = Dlk_oom(err);
    if (!rc)
        rc = build(root, src, l, err);
    if (!rc)
        rc = ing_labels_index(l, err);
    if (!rc && names)
        rc = categories(root, src, names, nnames, err);
    json_decref(root);
    if (rc) {
        ing_labels_free(l);
        if (names && *names) {
            for (size_t i = 0; i < *nnames; i++)
                free((*names)[i]);
            free(*names);
            *names = NULL;
            *nnames = 0;
        }
    }
    return rc;
}
