/* row.c - one row's samples from its fetched objects: the decoded image or
 * clip, the class label (sidecar .cls, manifest, or parent folder), text
 * (.txt), numeric fields (.json sidecar, manifest columns) and .npy
 * arrays, each checked against the dataset's schema before anything of
 * the row is appended. */
#include "ingest.h"
#include "pipeline.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NUMBERS (1u << 20)

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff,
             m = x & 0x7fffff;
    if (e == 0xff)
        return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
    int ee = (int)e - 127 + 15;
    if (ee >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (ee <= 0) {
        if (ee < -10)
            return (uint16_t)sign;
        m |= 0x800000;
        uint32_t shift = (uint32_t)(14 - ee);
        uint32_t hm = m >> shift;
        if ((m >> (shift - 1)) & 1)
            hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t h = sign | ((uint32_t)ee << 10) | (m >> 13);
    if (m & 0x1000)
        h++; /* round half up; carries into the exponent correctly */
    return (uint16_t)h;
}

dlk_status ing_put_numbers(dlk_dtype dt, const double *v, size_t n,
                           Dlk_buf *out, dlk_error *err)
{
    size_t es = dlk_dtype_size(dt);
    dlk_status rc = Dlk_buf_reserve(out, n * es, err);
    if (rc)
        return rc;
    static const struct { double lo, hi; } range[] = {
        [DLK_U8] = {0, 255}, [DLK_I8] = {-128, 127}, [DLK_U16] = {0, 65535},
        [DLK_I16] = {-32768, 32767}, [DLK_U32] = {0, 4294967295.0},
        [DLK_I32] = {-2147483648.0, 2147483647.0},
        [DLK_U64] = {0, 18446744073709549568.0},
        [DLK_I64] = {-9223372036854775808.0, 9223372036854774784.0},
        [DLK_BOOL] = {0, 1},
    };
    uint8_t *p = out->data + out->len;
    for (size_t i = 0; i < n; i++, p += es) {
        double d = v[i];
        switch (dt) {
        case DLK_F32: { float f = (float)d; uint32_t u; memcpy(&u, &f, 4);
                        Dlk_put_le32(p, u); continue; }
        case DLK_F64: { uint64_t u; memcpy(&u, &d, 8); Dlk_put_le64(p, u);
                        continue; }
        case DLK_F16: Dlk_put_le16(p, f32_to_f16((float)d)); continue;
        case DLK_BF16: { float f = (float)d; uint32_t u; memcpy(&u, &f, 4);
                         Dlk_put_le16(p, (uint16_t)(u >> 16)); continue; }
        default: break;
        }
        if (d != floor(d) || d < range[dt].lo || d > range[dt].hi)
            return Dlk_fail(err, DLK_EDECODE, "value %g does not fit %s", d,
                            dlk_dtype_name(dt));
        uint64_t u = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
        switch (es) {
        case 1: p[0] = (uint8_t)u; break;
        case 2: Dlk_put_le16(p, (uint16_t)u); break;
        case 4: Dlk_put_le32(p, (uint32_t)u); break;
        default: Dlk_put_le64(p, u); break;
        }
    }
    out->len += n * es;
    return DLK_OK;
}

dlk_status ing_val_check(const Dlk_tensor *t, const ing_val *v,
                         dlk_error *err)
{
    const dlk_tensor_spec *s = &t->spec;
    if (v->ndim != s->ndim)
        return Dlk_fail(err, DLK_EDECODE, "a sample of %d dimensions for "
                        "tensor '%s' of %d", v->ndim, s->name, s->ndim);
    uint64_t want = dlk_dtype_size(s->dtype);
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] < 0 || v->shape[d] > UINT32_MAX ||
            (s->shape[d] != DLK_DIM_VARIABLE && v->shape[d] != s->shape[d]))
            return Dlk_fail(err, DLK_EDECODE, "tensor '%s': dimension %d is "
                            "%lld, the schema wants %lld", s->name, d,
                            (long long)v->shape[d], (long long)s->shape[d]);
        if (!Dlk_mul_u64(want, (uint64_t)v->shape[d], &want))
            return Dlk_fail(err, DLK_ELIMIT, "tensor '%s': sample too big",
                            s->name);
    }
    if (want != v->data.len)
        return Dlk_fail(err, DLK_EINTERNAL, "tensor '%s': %zu bytes for a "
                        "shape of %llu", s->name, v->data.len,
                        (unsigned long long)want);
    if (want > DLK_CHUNK_MAX_RAW / 2)
        return Dlk_fail(err, DLK_ELIMIT, "tensor '%s': a sample over 1 GiB",
                        s->name);
    return DLK_OK;
}

/* Numbers in text to a value of tensor t. */
static dlk_status numbers_val(const Dlk_tensor *t, const char *text,
                              ing_val *v, dlk_error *err)
{
    size_t n, inner;
    double *nums = malloc(MAX_NUMBERS * sizeof *nums);
    if (!nums)
        return Dlk_oom(err);
    if (ing_parse_numbers(text, nums, MAX_NUMBERS, &n, &inner)) {
        free(nums);
        return Dlk_fail(err, DLK_EDECODE, "tensor '%s': '%.40s' is not a "
                        "number or an array of numbers", t->spec.name, text);
    }
    v->ndim = t->spec.ndim;
    if (t->spec.ndim == 1) {
        v->shape[0] = (int64_t)n;
    } else if (t->spec.ndim == 2) {
        size_t w = inner ? inner : (t->spec.shape[1] > 0
                                    ? (size_t)t->spec.shape[1] : 1);
        if (n % w) {
            free(nums);
            return Dlk_fail(err, DLK_EDECODE, "tensor '%s': %zu numbers are "
                            "not rows of %zu", t->spec.name, n, w);
        }
        v->shape[0] = (int64_t)(n / w);
        v->shape[1] = (int64_t)w;
    } else if (t->spec.ndim > 2) {
        free(nums);
        return Dlk_fail(err, DLK_EDECODE, "tensor '%s': numbers for a "
                        "tensor of more than 2 dimensions", t->spec.name);
    } else if (n != 1) {
        free(nums);
        return Dlk_fail(err, DLK_EDECODE, "tensor '%s': %zu numbers for a "
                        "scalar", t->spec.name, n);
    }
    dlk_status rc = ing_put_numbers(t->spec.dtype, nums, n, &v->data, err);
    free(nums);
    if (rc)
        return Dlk_fail_wrap(err, "tensor '%s'", t->spec.name);
    v->set = true;
    return DLK_OK;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && strchr(" \t\r\n", s[n - 1]))
        s[--n] = '\0';
    size_t i = strspn(s, " \t\r\n\xef\xbb\xbf");
    memmove(s, s + i, n - i + 1);
}

/* A class given as a name or an integer to the label tensor's value. */
static dlk_status label_val(const Dlk_tensor *t, const char *text,
                            ing_val *v, dlk_error *err)
{
    if (t->spec.ndim != 0 || t->n_class_names == 0)
        return numbers_val(t, text, v, err);
    for (size_t i = 0; i < t->n_class_names; i++)
        if (strcmp(t->class_names[i], text) == 0) {
            double d = (double)i;
            v->ndim = 0;
            v->set = true;
            return ing_put_numbers(t->spec.dtype, &d, 1, &v->data, err);
        }
    char *end;
    long long id = strtoll(text, &end, 10);
    if (*text && !*end && id >= 0 && (uint64_t)id < t->n_class_names) {
        double d = (double)id;
        v->ndim = 0;
        v->set = true;
        return ing_put_numbers(t->spec.dtype, &d, 1, &v->data, err);
    }
    return Dlk_fail(err, DLK_EDECODE, "class '%.80s' is not one of the %zu "
                    "classes of tensor '%s'", text, t->n_class_names,
                    t->spec.name);
}

/* Text of n bytes at p as a value of a text tensor. */
static dlk_status text_val(ing_val *v, const void *p, size_t n,
                           dlk_error *err)
{
    v->ndim = 1;
    v->shape[0] = (int64_t)n;
    v->set = true;
    return Dlk_buf_append(&v->data, p, n, err);
}

static int find_tensor(const ing_ctx *c, const char *name)
{
    for (size_t i = 0; i < c->ntensors; i++)
        if (strcmp(c->tensors[i].spec.name, name) == 0)
            return (int)i;
    return -1;
}

static dlk_status json_fields(const ing_ctx *c, const ing_obj *o,
                              const Dlk_buf *b, ing_val *vals,
                              dlk_error *err)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)b->data, b->len, 0, &je);
    if (!json_is_object(root)) {
        json_decref(root);
        return Dlk_fail(err, DLK_EDECODE, "not a JSON object: %s (line %d)",
                        je.text, je.line);
    }
    dlk_status rc = DLK_OK;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        int ti = find_tensor(c, k);
        if (ti < 0 || vals[ti].set || ti == c->t_image || ti == c->t_video)
            continue;
        char *text = json_is_string(v) ? strdup(json_string_value(v))
                     : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text) {
            rc = Dlk_oom(err);
            break;
        }
        const Dlk_tensor *t = &c->tensors[ti];
        if (t->spec.kind == DLK_KIND_TEXT && json_is_string(v)) {
            rc = text_val(&vals[ti], text, strlen(text), err);
        } else if (ti == c->t_label && json_is_string(v)) {
            rc = label_val(t, text, &vals[ti], err);
        } else {
            rc = numbers_val(t, text, &vals[ti], err);
        }
        free(text);
        if (rc)
            break;
    }
    json_decref(root);
    DLK_UNUSED(o);
    return rc;
}

static dlk_status npy_val(const ing_ctx *c, const ing_obj *o,
                          const Dlk_buf *b, ing_val *vals, dlk_error *err)
{
    int ti = o->tensor[0] ? find_tensor(c, o->tensor)
                          : (c->ntensors == 1 ? 0 : -1);
    if (ti < 0)
        return Dlk_fail(err, DLK_EDECODE, "no tensor named '%s' for a .npy "
                        "file", o->tensor);
    Dlk_npy_info h;
    dlk_status rc = Dlk_npy_parse(b->data, b->len, o->key, &h, err);
    if (rc)
        return rc;
    const Dlk_tensor *t = &c->tensors[ti];
    if (h.dtype != t->spec.dtype)
        return Dlk_fail(err, DLK_EDECODE, "dtype %s, tensor '%s' is %s",
                        dlk_dtype_name(h.dtype), t->spec.name,
                        dlk_dtype_name(t->spec.dtype));
    if (h.ndim > DLK_MAX_NDIM)
        return Dlk_fail(err, DLK_EDECODE, "too many dimensions");
    ing_val *v = &vals[ti];
    v->ndim = h.ndim;
    memcpy(v->shape, h.shape, (size_t)h.ndim * sizeof *h.shape);
    rc = Dlk_buf_append(&v->data, b->data + h.data_off, h.data_bytes, err);
    if (!rc && h.swap) {
        size_t es = dlk_dtype_size(h.dtype);
        for (size_t i = 0; i + es <= v->data.len; i += es)
            for (size_t a = 0, z = es - 1; a < z; a++, z--) {
                uint8_t tmp = v->data.data[i + a];
                v->data.data[i + a] = v->data.data[i + z];
                v->data.data[i + z] = tmp;
            }
    }
    v->set = !rc;
    return rc;
}

/* The row's source key and version, for the key tensors. */
static dlk_status key_vals(const ing_ctx *c, size_t row, ing_val *vals,
                           dlk_error *err)
{
    ing_val *k = &vals[c->t_key], *v = &vals[c->t_key_version];
    dlk_status rc = ing_row_ident(c->src, row, &k->data, err);
    if (!rc)
        rc = ing_row_version(c->src, row, &v->data, err);
    if (rc)
        return rc;
    k->ndim = v->ndim = 1;
    k->shape[0] = (int64_t)k->data.len;
    v->shape[0] = (int64_t)v->data.len;
    k->set = v->set = true;
    return DLK_OK;
}

/* Image or clip o decoded for its tensor (none: left out); *media: the
 * row's image or clip before o, then o. */
static dlk_status media_val(const ing_ctx *c, const ing_obj *o,
                            const Dlk_buf *b, ing_val *vals,
                            const ing_obj **media, dlk_error *err)
{
    int ti = o->role == ING_IMAGE ? c->t_image : c->t_video;
    if (ti < 0)
        return DLK_OK;
    if (vals[ti].set)
        return Dlk_fail(err, DLK_EDECODE, "a second %s for one row (with "
                        "'%s')", o->role == ING_IMAGE ? "image" : "video",
                        *media ? (*media)->key : "?");
    *media = o;
    if (b->len == 0)
        return Dlk_fail(err, DLK_EDECODE, "empty object");
    Dlk_decoded d;
    memset(&d, 0, sizeof d);
    dlk_status rc;
    if (o->role == ING_IMAGE) {
        /* into the row's buffer, kept from the slot's last row */
        d.data = vals[ti].data;
        Dlk_buf_init(&vals[ti].data);
        rc = Dlk_decode_image_reuse(b->data, b->len, o->key, &c->img, &d,
                                    err);
    } else {
        rc = Dlk_decode_video(b->data, b->len, o->key, &c->vid, &d, err);
        Dlk_buf_free(&vals[ti].data);
    }
    vals[ti].data = d.data;
    if (rc)
        return rc;
    vals[ti].ndim = d.ndim;
    memcpy(vals[ti].shape, d.shape, sizeof d.shape);
    vals[ti].set = true;
    return DLK_OK;
}

/* What object o of the row (fetched into b) gives: a tensor's value, or
 * the class of a .cls sidecar into *cls (the caller's to free). */
static dlk_status object_val(const ing_ctx *c, const ing_obj *o,
                             const Dlk_buf *b, ing_val *vals,
                             const ing_obj **media, char **cls,
                             dlk_error *err)
{
    switch (o->role) {
    case ING_IMAGE:
    case ING_VIDEO:
        return media_val(c, o, b, vals, media, err);
    case ING_CLS:
        free(*cls);
        if (!(*cls = strndup((const char *)b->data, b->len)))
            return Dlk_oom(err);
        trim(*cls);
        return DLK_OK;
    case ING_TXT:
        if (c->t_text < 0 || vals[c->t_text].set)
            return DLK_OK;
        return text_val(&vals[c->t_text], b->data, b->len, err);
    case ING_JSON:
        return json_fields(c, o, b, vals, err);
    case ING_NPY:
        return npy_val(c, o, b, vals, err);
    case ING_NONE:
        break;
    }
    return DLK_OK;
}

/* The row's class label: its .cls sidecar's, else its label manifest's
 * (lrow its row there, -1 for none), else the folder of lead, its image,
 * clip or first object, when folders are the labels. */
static dlk_status label_of_row(const ing_ctx *c, const ing_obj *lead,
                               ssize_t lrow, const char *cls, ing_val *v,
                               dlk_error *err)
{
    const Dlk_tensor *t = &c->tensors[c->t_label];
    char folder[256];
    if (cls)
        return label_val(t, cls, v, err);
    if (c->labels && c->labels->label_col >= 0) {
        if (lrow < 0)
            return Dlk_fail(err, DLK_EDECODE, "no label for '%s' in label "
                            "manifest '%s'", lead->key, c->labels->name);
        return label_val(t, c->labels->cells[(size_t)lrow * c->labels->ncols +
                                             (size_t)c->labels->label_col],
                         v, err);
    }
    if (c->folder_labels &&
        ing_obj_folder(c->src, lead, folder, sizeof folder) == 0)
        return label_val(t, folder, v, err);
    return DLK_OK;
}

/* The manifest's other columns feed the tensors of the same name (lrow:
 * the row's row there). */
static dlk_status column_vals(const ing_ctx *c, size_t lrow, ing_val *vals,
                              dlk_error *err)
{
    dlk_status rc = DLK_OK;
    for (size_t col = 1; !rc && col < c->labels->ncols; col++) {
        int ti = find_tensor(c, c->labels->cols[col]);
        if (ti < 0 || vals[ti].set || (int)col == c->labels->label_col)
            continue;
        const char *cell = c->labels->cells[lrow * c->labels->ncols + col];
        if (c->tensors[ti].spec.kind == DLK_KIND_TEXT)
            rc = text_val(&vals[ti], cell, strlen(cell), err);
        else
            rc = numbers_val(&c->tensors[ti], cell, &vals[ti], err);
    }
    return rc;
}

/* Every tensor has a value for the row, that fits its schema. */
static dlk_status check_vals(const ing_ctx *c, const ing_val *vals,
                             dlk_error *err)
{
    dlk_status rc = DLK_OK;
    for (size_t i = 0; !rc && i < c->ntensors; i++) {
        if (!vals[i].set)
            rc = Dlk_fail(err, DLK_EDECODE, "no %s for tensor '%s'",
                          (int)i == c->t_label ? "label" : "value",
                          c->tensors[i].spec.name);
        else
            rc = ing_val_check(&c->tensors[i], &vals[i], err);
    }
    return rc;
}

dlk_status ing_row_build(const ing_ctx *c, size_t row, const Dlk_buf *bufs,
                         ing_val *vals, const char **bad_key,
                         dlk_error *err)
{
    const ing_row *r = &c->src->rows[row];
    const ing_obj *objs = &c->src->objs[r->first];
    const ing_obj *media = NULL;
    char *cls = NULL;
    dlk_status rc = DLK_OK;
    *bad_key = objs[0].key;
    /* first, so that no sidecar or manifest column takes its place */
    if (c->t_key >= 0 && (rc = key_vals(c, row, vals, err)))
        return rc;
    for (uint32_t i = 0; !rc && i < r->n; i++) {
        *bad_key = objs[i].key;
        rc = object_val(c, &objs[i], &bufs[i], vals, &media, &cls, err);
    }
    if (rc) {
        free(cls);
        return rc;
    }
    const ing_obj *lead = media ? media : &objs[0];
    *bad_key = lead->key;
    ssize_t lrow = !c->labels ? -1
                   : c->labels->exact ? ing_meta_row(c->labels, c->src, row)
                   : ing_labels_find(c->labels, lead->key, lead->stem_len);
    if (c->t_label >= 0 && !vals[c->t_label].set)
        rc = label_of_row(c, lead, lrow, cls, &vals[c->t_label], err);
    free(cls);
    if (!rc && lrow >= 0)
        rc = column_vals(c, (size_t)lrow, vals, err);
    if (!rc)
        rc = check_vals(c, vals, err);
    return rc;
}
