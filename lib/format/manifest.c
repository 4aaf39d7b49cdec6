/* manifest.c - the manifest JSON: tensors, their schemas and ordered chunk
 * lists (formats/dlk-v1.md, "Manifest").  Every field is type- and
 * range-checked; nothing is allocated from a claimed count, only from
 * elements that are really present in the document. */
#include "util/error.h"
#include "util/grow.h"
#include "util/bytes.h"
#include "util/hash.h"
#include "format/chunk.h"
#include "format/manifest.h"
#include "format/json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) Dlk_fail(err, DLK_ECORRUPT, __VA_ARGS__)

bool Dlk_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > DLK_NAME_MAX || s[0] == '.')
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' ||
              *s == '.'))
            return false;
    return true;
}

dlk_status Dlk_spec_check(const dlk_tensor_spec *s, dlk_error *err)
{
    if (!Dlk_name_valid(s->name))
        return Dlk_fail(err, DLK_EINVAL, "invalid tensor name '%.80s' (use "
                        "1-64 of A-Z a-z 0-9 _ - ., not starting with '.')",
                        s->name);
    if (!dlk_dtype_size(s->dtype))
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': unknown dtype",
                        s->name);
    if (!dlk_kind_name(s->kind))
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': unknown kind", s->name);
    if (!dlk_codec_name(s->codec))
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': unknown codec",
                        s->name);
    if (s->ndim < 0 || s->ndim > DLK_MAX_NDIM)
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': %d dimensions (at "
                        "most %d)", s->name, s->ndim, DLK_MAX_NDIM);
    for (int d = 0; d < s->ndim; d++)
        if (s->shape[d] != DLK_DIM_VARIABLE &&
            (s->shape[d] < 0 || s->shape[d] > UINT32_MAX))
            return Dlk_fail(err, DLK_EINVAL, "tensor '%s': dimension %d is "
                            "%lld", s->name, d, (long long)s->shape[d]);
    if (s->codec == DLK_CODEC_ZSTD && (s->level < 0 || s->level > 22))
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': zstd level %d (1-22)",
                        s->name, s->level);
    if (s->codec == DLK_CODEC_NONE && s->level != 0)
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': a level needs codec "
                        "zstd", s->name);
    if (s->part_bytes && (s->codec != DLK_CODEC_NONE ||
                          s->part_bytes < DLK_PART_BYTES_MIN ||
                          s->part_bytes > DLK_PART_BYTES_MAX))
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': part size %u (4096 "
                        "to 2^30 bytes, codec none only)", s->name,
                        s->part_bytes);
    if (s->chunk_bytes > DLK_CHUNK_MAX_RAW / 2)
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': chunk size %llu over "
                        "1 GiB", s->name, (unsigned long long)s->chunk_bytes);
    if (s->n_class_names > 1000000)
        return Dlk_fail(err, DLK_ELIMIT, "tensor '%s': too many class names",
                        s->name);
    return DLK_OK;
}

dlk_status Dlk_tensor_init(Dlk_tensor *t, const dlk_tensor_spec *s,
                           dlk_error *err)
{
    memset(t, 0, sizeof *t);
    t->spec = *s;
    if (!t->spec.chunk_bytes)
        t->spec.chunk_bytes = DLK_DEFAULT_CHUNK_BYTES;
    /* a new tensor; one read from a manifest gets its own member back */
    if (!t->spec.part_bytes && t->spec.codec == DLK_CODEC_NONE)
        t->spec.part_bytes = DLK_DEFAULT_PART_BYTES;
    t->spec.class_names = NULL;
    t->spec.n_class_names = 0;
    if (s->n_class_names) {
        t->class_names = calloc(s->n_class_names, sizeof *t->class_names);
        if (!t->class_names)
            return Dlk_oom(err);
        for (size_t i = 0; i < s->n_class_names; i++) {
            t->class_names[i] = strdup(s->class_names[i] ? s->class_names[i]
                                                         : "");
            if (!t->class_names[i]) {
                t->n_class_names = i;
                return Dlk_oom(err);
            }
        }
        t->n_class_names = s->n_class_names;
        t->spec.class_names = (const char *const *)t->class_names;
        t->spec.n_class_names = t->n_class_names;
    }
    return DLK_OK;
}

void Dlk_tensor_fini(Dlk_tensor *t)
{
    for (size_t i = 0; i < t->n_class_names; i++)
        free(t->class_names[i]);
    free(t->class_names);
    free(t->chunks);
    free(t->segs);
    memset(t, 0, sizeof *t);
}

dlk_status Dlk_tensor_add_chunk(Dlk_tensor *t, const Dlk_chunk_entry *e,
                                const int64_t *smin, const int64_t *smax,
                                dlk_error *err)
{
    if (!DLK_GROW(t->chunks, t->nchunks, t->capchunks, 16))
        return Dlk_oom(err);
    Dlk_chunk_entry *c = &t->chunks[t->nchunks++];
    *c = *e;
    c->first = t->samples;
    t->samples += e->samples;
    t->stored_bytes += e->stored_bytes;
    t->raw_bytes += e->raw_bytes;
    if (smin && smax) {
        for (int d = 0; d < t->spec.ndim; d++) {
            if (!t->have_minmax || smin[d] < t->shape_min[d])
                t->shape_min[d] = smin[d];
            if (!t->have_minmax || smax[d] > t->shape_max[d])
                t->shape_max[d] = smax[d];
        }
        t->have_minmax = true;
    }
    return DLK_OK;
}

void Dlk_tensor_truncate(Dlk_tensor *t, size_t n)
{
    if (n >= t->nchunks)
        return;
    /* a segment that loses an entry is no longer this list's: the
     * entries of it that stay go back to the tail, to be cut again */
    while (!t->segs_pending && t->nsegs && t->seg_chunks > n)
        t->seg_chunks -= t->segs[--t->nsegs].nchunks;
    t->nchunks = n;
    t->samples = t->stored_bytes = t->raw_bytes = 0;
    /* a pending list holds its tail only: the segments' totals first */
    for (size_t k = 0; t->segs_pending && k < t->nsegs; k++) {
        t->samples += t->segs[k].samples;
        t->stored_bytes += t->segs[k].stored_bytes;
        t->raw_bytes += t->segs[k].raw_bytes;
    }
    for (size_t i = 0; i < n; i++) {
        t->samples += t->chunks[i].samples;
        t->stored_bytes += t->chunks[i].stored_bytes;
        t->raw_bytes += t->chunks[i].raw_bytes;
    }
}

ssize_t Dlk_tensor_find_chunk(const Dlk_tensor *t, uint64_t i)
{
    size_t lo = 0, hi = t->nchunks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const Dlk_chunk_entry *c = &t->chunks[mid];
        if (i < c->first)
            hi = mid;
        else if (i >= c->first + c->samples)
            lo = mid + 1;
        else
            return (ssize_t)mid;
    }
    return -1;
}

/* ---- reading ------------------------------------------------------- */

static bool get_uint(json_t *o, const char *field, uint64_t max,
                     uint64_t *out)
{
    json_t *v = json_object_get(o, field);
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > max)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static const char *get_str(json_t *o, const char *field)
{
    return json_string_value(json_object_get(o, field));
}

static dlk_status parse_shape(json_t *arr, const char *name,
                              const char *tensor, const char *field,
                              int want_ndim, int64_t *shape, int *ndim,
                              bool allow_variable, dlk_error *err)
{
    if (!json_is_array(arr) || json_array_size(arr) > DLK_MAX_NDIM ||
        (want_ndim >= 0 && (int)json_array_size(arr) != want_ndim))
        return BAD("%s: tensor '%s': field '%s' is not a shape of %s "
                   "dimensions", name, tensor, field,
                   want_ndim >= 0 ? "its" : "at most 8");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *d = json_array_get(arr, i);
        json_int_t v = json_is_integer(d) ? json_integer_value(d) : -2;
        if (v > UINT32_MAX || v < -1 || (v == -1 && !allow_variable))
            return BAD("%s: tensor '%s': field '%s' has a bad dimension",
                       name, tensor, field);
        shape[i] = v;
    }
    *ndim = (int)json_array_size(arr);
    return DLK_OK;
}

/* A chunk entry ["<32 hex>", samples, stored_bytes, raw_bytes]
 * (formats/dlk-v1.md 4.3.3). */
static bool parse_entry(json_t *c, Dlk_chunk_entry *e)
{
    json_t *k = json_array_get(c, 0), *n = json_array_get(c, 1),
           *sb = json_array_get(c, 2), *rb = json_array_get(c, 3);
    memset(e, 0, sizeof *e);
    const char *key = json_string_value(k);
    if (!json_is_array(c) || json_array_size(c) != 4 || !key ||
        strlen(key) != 32 || strspn(key, "0123456789abcdef") != 32 ||
        !json_is_integer(n) || !json_is_integer(sb) ||
        !json_is_integer(rb) || json_integer_value(n) < 1 ||
        json_integer_value(n) > DLK_CHUNK_MAX_SAMPLES ||
        json_integer_value(sb) < DLK_CHUNK_HEADER_BYTES ||
        json_integer_value(rb) < 0 ||
        (uint64_t)json_integer_value(rb) > DLK_CHUNK_MAX_RAW)
        return false;
    memcpy(e->key, key, 33);
    e->samples = (uint32_t)json_integer_value(n);
    e->stored_bytes = (uint64_t)json_integer_value(sb);
    e->raw_bytes = (uint64_t)json_integer_value(rb);
    return true;
}

/* Sums that stay below 2^63 (samples below 2^62 before an entry). */
static bool sums_ok(const Dlk_tensor *t, uint64_t samples, uint64_t stored,
                    uint64_t raw)
{
    uint64_t a, b, c;
    return t->samples <= UINT64_MAX / 2 &&
           Dlk_add_u64(t->samples, samples, &a) && a <= INT64_MAX &&
           Dlk_add_u64(t->stored_bytes, stored, &b) && b <= INT64_MAX &&
           Dlk_add_u64(t->raw_bytes, raw, &c);
}

static dlk_status add_checked(Dlk_tensor *t, const Dlk_chunk_entry *e,
                              const char *name, const char *tname,
                              dlk_error *err)
{
    if (!sums_ok(t, e->samples, e->stored_bytes, e->raw_bytes))
        return BAD("%s: tensor '%s': chunk sizes or samples add up to more "
                   "than 2^63-1", name, tname);
    return Dlk_tensor_add_chunk(t, e, NULL, NULL, err);
}

/* "segments": [["<32 hex>", chunks, samples, stored_bytes, raw_bytes,
 * bytes], ...] (formats/dlk-v1.md 4.3.4): the tensor's totals start from
 * theirs, its entries (the tail) after them; the segments themselves are
 * read by lib/dataset/segments.c. */
static dlk_status parse_segments(json_t *segs, const char *name,
                                 const char *tname, Dlk_tensor *t,
                                 dlk_error *err)
{
    if (!json_is_array(segs))
        return BAD("%s: tensor '%s': 'segments' is not an array", name,
                   tname);
    size_t n = json_array_size(segs);
    if (n && !(t->segs = calloc(n, sizeof *t->segs)))
        return Dlk_oom(err);
    t->capsegs = n;
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(segs, i);
        const char *key = json_string_value(json_array_get(r, 0));
        json_int_t v[5];
        bool ok = json_is_array(r) && json_array_size(r) == 6 && key &&
                  strlen(key) == 32 && strspn(key, "0123456789abcdef") == 32;
        for (int k = 0; ok && k < 5; k++) {
            json_t *x = json_array_get(r, (size_t)k + 1);
            ok = json_is_integer(x) && (v[k] = json_integer_value(x)) >= 0;
        }
        /* every entry holds a sample and is a whole chunk (64 bytes at
         * least); the object is a JSON document of bounded size */
        ok = ok && v[0] >= 1 && v[0] <= DLK_SEG_ENTRIES_MAX &&
             (uint64_t)v[1] >= (uint64_t)v[0] &&
             (uint64_t)v[1] <= (uint64_t)v[0] * DLK_CHUNK_MAX_SAMPLES &&
             (uint64_t)v[2] >= (uint64_t)v[0] * DLK_CHUNK_HEADER_BYTES &&
             (uint64_t)v[3] <= (uint64_t)v[0] * DLK_CHUNK_MAX_RAW &&
             v[4] >= 1 && (uint64_t)v[4] <= DLK_SEG_BYTES_MAX;
        if (!ok)
            return BAD("%s: tensor '%s': segment %zu is malformed (want "
                       "[\"<32 hex>\", chunks, samples, stored_bytes, "
                       "raw_bytes, bytes])", name, tname, i);
        if (!sums_ok(t, (uint64_t)v[1], (uint64_t)v[2], (uint64_t)v[3]))
            return BAD("%s: tensor '%s': segment sizes or samples add up to "
                       "more than 2^63-1", name, tname);
        Dlk_seg_ref *g = &t->segs[t->nsegs++];
        memcpy(g->key, key, 33);
        g->nchunks = (uint64_t)v[0];
        g->samples = (uint64_t)v[1];
        g->stored_bytes = (uint64_t)v[2];
        g->raw_bytes = (uint64_t)v[3];
        g->bytes = (uint64_t)v[4];
        t->samples += g->samples;
        t->stored_bytes += g->stored_bytes;
        t->raw_bytes += g->raw_bytes;
    }
    t->segs_pending = t->nsegs > 0;
    return DLK_OK;
}

/* The tensor's spec (all but its class names) and its 'samples', each
 * field checked; *tname points into jt. */
static dlk_status parse_spec(json_t *jt, const char *name,
                             dlk_tensor_spec *s, const char **tname_out,
                             uint64_t *samples, dlk_error *err)
{
    memset(s, 0, sizeof *s);
    const char *tname = get_str(jt, "name");
    if (!tname || strlen(tname) > DLK_NAME_MAX)
        return BAD("%s: tensor without a valid 'name'", name);
    *tname_out = tname;
    strcpy(s->name, tname);
    if (dlk_dtype_parse(get_str(jt, "dtype"), &s->dtype))
        return BAD("%s: tensor '%s': missing or unknown 'dtype'", name, tname);
    if (dlk_kind_parse(get_str(jt, "kind"), &s->kind))
        return BAD("%s: tensor '%s': missing or unknown 'kind'", name, tname);
    if (dlk_codec_parse(get_str(jt, "codec"), &s->codec))
        return BAD("%s: tensor '%s': missing or unknown 'codec'", name, tname);
    uint64_t level = 0, chunk_bytes = 0;
    if (json_object_get(jt, "level") && !get_uint(jt, "level", 22, &level))
        return BAD("%s: tensor '%s': bad 'level'", name, tname);
    s->level = (int)level;
    if (!get_uint(jt, "chunk_bytes", DLK_CHUNK_MAX_RAW / 2, &chunk_bytes))
        return BAD("%s: tensor '%s': missing or bad 'chunk_bytes'", name,
                   tname);
    s->chunk_bytes = chunk_bytes;
    /* absent: the chunks may or may not have part tables (formats/
     * dlk-v1.md 4.3.2); present, every chunk must have one of this size */
    uint64_t part_bytes = 0;
    if (json_object_get(jt, "part_bytes") &&
        (!get_uint(jt, "part_bytes", DLK_PART_BYTES_MAX, &part_bytes) ||
         part_bytes < DLK_PART_BYTES_MIN))
        return BAD("%s: tensor '%s': bad 'part_bytes' (4096..1073741824)",
                   name, tname);
    s->part_bytes = (uint32_t)part_bytes;
    dlk_status rc = parse_shape(json_object_get(jt, "shape"), name, tname,
                                "shape", -1, s->shape, &s->ndim, true, err);
    if (rc)
        return rc;
    if (!get_uint(jt, "samples", UINT64_MAX >> 1, samples))
        return BAD("%s: tensor '%s': missing or bad 'samples'", name, tname);
    if (Dlk_spec_check(s, err)) {
        if (err) {
            Dlk_fail_wrap(err, "%s", name);
            err->code = DLK_ECORRUPT;
        }
        return DLK_ECORRUPT;
    }
    return DLK_OK;
}

/* 'class_names' (optional) into s: *cn, to free once the tensor holds
 * copies, points at the JSON's strings. */
static dlk_status parse_class_names(json_t *names, const char *name,
                                    const char *tname, dlk_tensor_spec *s,
                                    const char ***cn_out, dlk_error *err)
{
    if (!json_is_array(names))
        return BAD("%s: tensor '%s': 'class_names' is not an array",
                   name, tname);
    s->n_class_names = json_array_size(names);
    const char **cn = calloc(s->n_class_names ? s->n_class_names : 1,
                             sizeof *cn);
    if (!cn)
        return Dlk_oom(err);
    for (size_t i = 0; i < s->n_class_names; i++)
        if (!(cn[i] = json_string_value(json_array_get(names, i)))) {
            free(cn);
            return BAD("%s: tensor '%s': class name %zu is not a string",
                       name, tname, i);
        }
    s->class_names = cn;
    *cn_out = cn;
    return DLK_OK;
}

/* "chunks": the tensor's entries after its segments'. */
static dlk_status parse_chunks(json_t *chunks, const char *name,
                               const char *tname, Dlk_tensor *t,
                               dlk_error *err)
{
    if (!json_is_array(chunks))
        return BAD("%s: tensor '%s': 'chunks' is not an array", name, tname);
    for (size_t i = 0; i < json_array_size(chunks); i++) {
        Dlk_chunk_entry e;
        dlk_status rc;
        if (!parse_entry(json_array_get(chunks, i), &e))
            return BAD("%s: tensor '%s': chunk entry %zu is malformed "
                       "(want [\"<32 hex>\", samples, stored_bytes, "
                       "raw_bytes])", name, tname, i);
        if ((rc = add_checked(t, &e, name, tname, err)))
            return rc;
    }
    return DLK_OK;
}

static dlk_status parse_tensor(json_t *jt, const char *name, Dlk_tensor *t,
                               dlk_error *err)
{
    if (!json_is_object(jt))
        return BAD("%s: a tensor entry is not an object", name);
    dlk_tensor_spec s;
    const char *tname = NULL;
    uint64_t samples;
    dlk_status rc = parse_spec(jt, name, &s, &tname, &samples, err);
    if (rc)
        return rc;
    json_t *names = json_object_get(jt, "class_names");
    const char **cn = NULL;
    if (names && (rc = parse_class_names(names, name, tname, &s, &cn, err)))
        return rc;
    rc = Dlk_tensor_init(t, &s, err);
    free(cn);
    if (rc)
        return rc;
    t->spec.part_bytes = s.part_bytes; /* not the default of a new tensor */

    int64_t smin[DLK_MAX_NDIM], smax[DLK_MAX_NDIM];
    int nd;
    json_t *jmin = json_object_get(jt, "shape_min");
    json_t *jmax = json_object_get(jt, "shape_max");
    bool minmax = jmin && jmax;
    if (minmax &&
        ((rc = parse_shape(jmin, name, tname, "shape_min", s.ndim, smin, &nd,
                           false, err)) ||
         (rc = parse_shape(jmax, name, tname, "shape_max", s.ndim, smax, &nd,
                           false, err))))
        return rc;

    json_t *segs = json_object_get(jt, "segments");
    if (segs && (rc = parse_segments(segs, name, tname, t, err)))
        return rc;
    if ((rc = parse_chunks(json_object_get(jt, "chunks"), name, tname, t,
                           err)))
        return rc;
    if (t->samples != samples)
        return BAD("%s: tensor '%s': 'samples' is %llu but its %s hold "
                   "%llu", name, tname, (unsigned long long)samples,
                   t->nsegs ? "segments and chunks" : "chunks",
                   (unsigned long long)t->samples);
    if (minmax && t->samples) {
        memcpy(t->shape_min, smin, sizeof smin);
        memcpy(t->shape_max, smax, sizeof smax);
        t->have_minmax = true;
    }
    return DLK_OK;
}

/* A JSON document as the format's readers accept it: bounded size, an
 * object at the top, "format": "dlk" and a known "version". */
json_t *Dlk_json_load(const char *json, size_t len, const char *name,
                      const char *what, dlk_error *err)
{
    if (len > DLK_JSON_MAX_BYTES) {
        Dlk_fail(err, DLK_ELIMIT, "%s: %zu bytes, over the %zu-byte limit "
                 "for %s", name, len, DLK_JSON_MAX_BYTES, what);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        BAD("%s: malformed %s: %s (line %d)", name, what, je.text, je.line);
        return NULL;
    }
    const char *fmt = get_str(root, "format");
    json_t *ver = json_object_get(root, "version");
    if (!json_is_object(root) || !fmt || strcmp(fmt, "dlk") != 0) {
        BAD("%s: not a dlk %s (no \"format\": \"dlk\")", name, what);
    } else if (!json_is_integer(ver)) {
        BAD("%s: %s without an integer 'version'", name, what);
    } else if (json_integer_value(ver) != DLK_FORMAT_VERSION) {
        Dlk_fail(err, DLK_EUNSUPPORTED, "%s: %s of format version %lld, this "
                 "dlk reads version %d", name, what,
                 (long long)json_integer_value(ver), DLK_FORMAT_VERSION);
    } else {
        return root;
    }
    json_decref(root);
    return NULL;
}

/* "views": [{"name", "object", "rows", "dataset_rows", "query"}], names
 * unique and in byte order (formats/dlk-v1.md 6.10). */
static dlk_status parse_views(json_t *views, const char *name,
                              Dlk_manifest *m, dlk_error *err)
{
    if (!views)
        return DLK_OK;
    if (!json_is_array(views))
        return BAD("%s: 'views' is not an array", name);
    size_t n = json_array_size(views);
    if (n > DLK_VIEWS_MAX)
        return Dlk_fail(err, DLK_ELIMIT, "%s: %zu views (at most %d)", name,
                        n, DLK_VIEWS_MAX);
    if (n && !(m->views = calloc(n, sizeof *m->views)))
        return Dlk_oom(err);
    size_t pl = strlen(DLK_VIEW_PREFIX);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(views, i);
        const char *vn = get_str(v, "name"), *obj = get_str(v, "object"),
                   *q = get_str(v, "query");
        json_t *rows = json_object_get(v, "rows"),
               *drows = json_object_get(v, "dataset_rows");
        if (!json_is_object(v) || !vn || !obj || !q ||
            !json_is_integer(rows) || json_integer_value(rows) < 0 ||
            !json_is_integer(drows) || json_integer_value(drows) < 0 ||
            strlen(obj) != pl + 32 || strncmp(obj, DLK_VIEW_PREFIX, pl) != 0 ||
            strspn(obj + pl, "0123456789abcdef") != 32)
            return BAD("%s: view %zu is not {\"name\", \"object\": "
                       "\"%s<32 hex digits>\", \"rows\", \"dataset_rows\", "
                       "\"query\"}", name, i, DLK_VIEW_PREFIX);
        if (!Dlk_name_valid(vn))
            return BAD("%s: view name '%.80s' is not valid", name, vn);
        if (i && strcmp(m->views[i - 1].name, vn) >= 0)
            return BAD("%s: view '%s' is out of order or appears twice", name,
                       vn);
        if ((uint64_t)json_integer_value(rows) > DLK_VIEW_MAX_ROWS)
            return Dlk_fail(err, DLK_ELIMIT, "%s: view '%s' has over 2^34 "
                            "rows", name, vn);
        Dlk_view_ref *r = &m->views[i];
        snprintf(r->name, sizeof r->name, "%s", vn);
        memcpy(r->object, obj, pl + 33);
        r->rows = (uint64_t)json_integer_value(rows);
        r->dataset_rows = (uint64_t)json_integer_value(drows);
        m->nviews = i + 1;
        if (!(r->query = strdup(q)))
            return Dlk_oom(err);
    }
    return DLK_OK;
}

static dlk_status parse_writes(json_t *w, const char *name, Dlk_manifest *m,
                               dlk_error *err)
{
    if (!w)
        return DLK_OK;
    if (!json_is_array(w) || json_array_size(w) > DLK_WRITES_MAX)
        return BAD("%s: 'writes' is not an array of at most %d ids", name,
                   DLK_WRITES_MAX);
    for (size_t i = 0; i < json_array_size(w); i++) {
        const char *id = json_string_value(json_array_get(w, i));
        if (!id || strlen(id) != 32 || strspn(id, "0123456789abcdef") != 32)
            return BAD("%s: write %zu is not 32 lower-case hex digits", name,
                       i);
        memcpy(m->writes[i], id, 33);
        m->nwrites = i + 1;
    }
    return DLK_OK;
}

bool Dlk_manifest_wrote(const Dlk_manifest *m, const char *id)
{
    for (size_t i = 0; i < m->nwrites; i++)
        if (strcmp(m->writes[i], id) == 0)
            return true;
    return false;
}

void Dlk_manifest_add_write(Dlk_manifest *m, const char *id)
{
    if (strlen(id) != 32 ||
        (m->nwrites && strcmp(m->writes[m->nwrites - 1], id) == 0))
        return;
    if (m->nwrites == DLK_WRITES_MAX) {
        memmove(m->writes[0], m->writes[1],
                (DLK_WRITES_MAX - 1) * sizeof m->writes[0]);
        m->nwrites--;
    }
    memcpy(m->writes[m->nwrites++], id, 33);
}

dlk_status Dlk_manifest_parse(const char *json, size_t len, const char *name,
                              Dlk_manifest *m, dlk_error *err)
{
    memset(m, 0, sizeof *m);
    json_t *root = Dlk_json_load(json, len, name, "manifest", err);
    if (!root)
        return err ? err->code : DLK_ECORRUPT;
    dlk_status rc = Dlk_manifest_from_json(root, name, m, err);
    json_decref(root);
    return rc;
}

/* The key index's runs (formats/dlk-v1.md 4.3.1): 1 to DLK_KEY_RUNS_MAX
 * objects {"object": "index/keys/<32 hex>", "rows": n >= 1}, whose rows
 * sum to at most 2^63 - 1. */
static dlk_status parse_key_runs(json_t *kr, const char *name,
                                 Dlk_manifest *m, dlk_error *err)
{
    size_t n = json_is_array(kr) ? json_array_size(kr) : 0;
    size_t pl = strlen(DLK_KEY_INDEX_PREFIX);
    if (!n || n > DLK_KEY_RUNS_MAX)
        return BAD("%s: 'key_runs' is not an array of 1 to %d runs", name,
                   DLK_KEY_RUNS_MAX);
    if (!(m->key_runs = calloc(n, sizeof *m->key_runs)))
        return Dlk_oom(err);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(kr, i);
        const char *obj = json_string_value(json_object_get(r, "object"));
        json_t *rows = json_object_get(r, "rows");
        if (!json_is_object(r) || !obj || strlen(obj) != pl + 32 ||
            strncmp(obj, DLK_KEY_INDEX_PREFIX, pl) != 0 ||
            strspn(obj + pl, "0123456789abcdef") != 32 ||
            !json_is_integer(rows) || json_integer_value(rows) < 1 ||
            (uint64_t)json_integer_value(rows) > INT64_MAX - total)
            return BAD("%s: 'key_runs' entry %zu is not {\"object\": "
                       "\"%s<32 hex digits>\", \"rows\": N >= 1} (rows of "
                       "all runs at most 2^63 - 1)", name, i,
                       DLK_KEY_INDEX_PREFIX);
        memcpy(m->key_runs[i].object, obj, pl + 33);
        m->key_runs[i].rows = (uint64_t)json_integer_value(rows);
        total += m->key_runs[i].rows;
        m->nkey_runs = i + 1;
    }
    return DLK_OK;
}

dlk_status Dlk_manifest_from_json(struct json_t *root, const char *name,
                                  Dlk_manifest *m, dlk_error *err)
{
    memset(m, 0, sizeof *m);
    dlk_status rc = DLK_OK;
    json_t *parent = json_object_get(root, "parent");
    json_t *tensors = json_object_get(root, "tensors");
    if (parent && !json_is_null(parent) && !json_is_string(parent)) {
        rc = BAD("%s: 'parent' is not a string or null", name);
    } else if (!json_is_array(tensors)) {
        rc = BAD("%s: 'tensors' is not an array", name);
    } else if (json_array_size(tensors) > 4096) {
        rc = Dlk_fail(err, DLK_ELIMIT, "%s: %zu tensors (at most 4096)", name,
                      json_array_size(tensors));
    }
    if (!rc && json_is_string(parent) &&
        !(m->parent = strdup(json_string_value(parent))))
        rc = Dlk_oom(err);
    json_t *ki = json_object_get(root, "key_index");
    if (!rc && ki) {
        const char *obj = json_string_value(json_object_get(ki, "object"));
        json_t *rows = json_object_get(ki, "rows");
        size_t pl = strlen(DLK_KEY_INDEX_PREFIX);
        if (!json_is_object(ki) || !obj || strlen(obj) != pl + 32 ||
            strncmp(obj, DLK_KEY_INDEX_PREFIX, pl) != 0 ||
            strspn(obj + pl, "0123456789abcdef") != 32 ||
            !json_is_integer(rows) || json_integer_value(rows) < 0)
            rc = BAD("%s: 'key_index' is not {\"object\": \"%s<32 hex "
                     "digits>\", \"rows\": N}", name, DLK_KEY_INDEX_PREFIX);
        else {
            memcpy(m->key_index, obj, pl + 33);
            m->key_index_rows = (uint64_t)json_integer_value(rows);
        }
    }
    json_t *kr = json_object_get(root, "key_runs");
    if (!rc && kr)
        rc = parse_key_runs(kr, name, m, err);
    json_t *kb = json_object_get(root, "key_base");
    if (!rc && kb) {
        if (!json_is_string(kb) || !Dlk_key_base_valid(json_string_value(kb)))
            rc = BAD("%s: 'key_base' is not a source url ending in '/' "
                     "(s3://BUCKET/..., gs://BUCKET/... or an absolute path)",
                     name);
        else if (!(m->key_base = strdup(json_string_value(kb))))
            rc = Dlk_oom(err);
    }
    if (!rc)
        rc = parse_views(json_object_get(root, "views"), name, m, err);
    if (!rc)
        rc = parse_writes(json_object_get(root, "writes"), name, m, err);
    size_t n = rc ? 0 : json_array_size(tensors);
    if (n && !(m->tensors = calloc(n, sizeof *m->tensors)))
        rc = Dlk_oom(err);
    for (size_t i = 0; !rc && i < n; i++) {
        rc = parse_tensor(json_array_get(tensors, i), name, &m->tensors[i],
                          err);
        m->ntensors = i + 1;
        for (size_t j = 0; !rc && j < i; j++)
            if (strcmp(m->tensors[j].spec.name, m->tensors[i].spec.name) == 0)
                rc = BAD("%s: tensor '%s' appears twice", name,
                         m->tensors[i].spec.name);
    }
    if (rc)
        Dlk_manifest_free(m);
    return rc;
}

/* ---- writing ------------------------------------------------------- */

static json_t *shape_json(const int64_t *shape, int ndim)
{
    json_t *a = json_array();
    for (int d = 0; a && d < ndim; d++)
        json_array_append_new(a, json_integer(shape[d]));
    return a;
}

static json_t *entries_json(const Dlk_chunk_entry *e, size_t n)
{
    json_t *chunks = json_array();
    for (size_t i = 0; chunks && i < n; i++)
        json_array_append_new(chunks,
            json_pack("[s,I,I,I]", e[i].key, (json_int_t)e[i].samples,
                      (json_int_t)e[i].stored_bytes,
                      (json_int_t)e[i].raw_bytes));
    return chunks;
}

static json_t *tensor_json(const Dlk_tensor *t)
{
    const dlk_tensor_spec *s = &t->spec;
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "name", json_string(s->name));
    json_object_set_new(o, "dtype", json_string(dlk_dtype_name(s->dtype)));
    json_object_set_new(o, "kind", json_string(dlk_kind_name(s->kind)));
    json_object_set_new(o, "shape", shape_json(s->shape, s->ndim));
    json_object_set_new(o, "codec", json_string(dlk_codec_name(s->codec)));
    if (s->codec == DLK_CODEC_ZSTD)
        json_object_set_new(o, "level", json_integer(s->level ? s->level : 3));
    json_object_set_new(o, "chunk_bytes", json_integer((json_int_t)s->chunk_bytes));
    if (s->part_bytes)
        json_object_set_new(o, "part_bytes", json_integer(s->part_bytes));
    if (t->n_class_names) {
        json_t *names = json_array();
        for (size_t i = 0; i < t->n_class_names; i++)
            json_array_append_new(names, json_string(t->class_names[i]));
        json_object_set_new(o, "class_names", names);
    }
    json_object_set_new(o, "samples", json_integer((json_int_t)t->samples));
    if (t->have_minmax) {
        json_object_set_new(o, "shape_min", shape_json(t->shape_min, s->ndim));
        json_object_set_new(o, "shape_max", shape_json(t->shape_max, s->ndim));
    }
    if (t->nsegs) {
        json_t *segs = json_array();
        for (size_t i = 0; segs && i < t->nsegs; i++) {
            const Dlk_seg_ref *g = &t->segs[i];
            json_array_append_new(segs,
                json_pack("[s,I,I,I,I,I]", g->key, (json_int_t)g->nchunks,
                          (json_int_t)g->samples,
                          (json_int_t)g->stored_bytes,
                          (json_int_t)g->raw_bytes, (json_int_t)g->bytes));
        }
        json_object_set_new(o, "segments", segs);
    }
    size_t n;
    const Dlk_chunk_entry *tail = Dlk_tensor_tail(t, &n);
    json_object_set_new(o, "chunks", entries_json(tail, n));
    return o;
}

const Dlk_chunk_entry *Dlk_tensor_tail(const Dlk_tensor *t, size_t *n)
{
    size_t skip = t->segs_pending ? 0 : t->seg_chunks;
    if (skip > t->nchunks)
        skip = t->nchunks;
    *n = t->nchunks - skip;
    return skip ? t->chunks + skip : t->chunks; /* NULL + 0 is undefined */
}

size_t Dlk_tensor_base(const Dlk_tensor *t)
{
    size_t n = 0;
    for (size_t k = 0; t->segs_pending && k < t->nsegs; k++)
        n += t->segs[k].nchunks;
    return n;
}

void Dlk_seg_key(char out[DLK_SEG_KEY_MAX], const char *hash)
{
    snprintf(out, DLK_SEG_KEY_MAX, DLK_SEG_PREFIX "%s", hash);
}

dlk_status Dlk_segment_dump(const Dlk_chunk_entry *e, size_t n, char **out,
                            size_t *len, Dlk_seg_ref *ref, dlk_error *err)
{
    json_t *root = json_object();
    if (!root)
        return Dlk_oom(err);
    json_object_set_new(root, "format", json_string("dlk"));
    json_object_set_new(root, "version", json_integer(DLK_FORMAT_VERSION));
    json_object_set_new(root, "chunks", entries_json(e, n));
    *out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!*out)
        return Dlk_fail(err, DLK_ENOMEM, "out of memory serializing a "
                        "segment");
    *len = strlen(*out);
    memset(ref, 0, sizeof *ref);
    Dlk_hash128_hex(*out, *len, ref->key);
    ref->nchunks = n;
    ref->bytes = *len;
    for (size_t i = 0; i < n; i++) {
        ref->samples += e[i].samples;
        ref->stored_bytes += e[i].stored_bytes;
        ref->raw_bytes += e[i].raw_bytes;
    }
    return DLK_OK;
}

dlk_status Dlk_segment_parse(const char *bytes, size_t len,
                             const Dlk_seg_ref *ref, Dlk_chunk_entry **out,
                             dlk_error *err)
{
    char key[DLK_SEG_KEY_MAX], hash[33];
    Dlk_seg_key(key, ref->key);
    *out = NULL;
    if (len != ref->bytes)
        return BAD("%s: %zu bytes, but its reference says %llu", key, len,
                   (unsigned long long)ref->bytes);
    Dlk_hash128_hex(bytes, len, hash);
    if (strcmp(hash, ref->key) != 0)
        return BAD("%s: content does not match its name (XXH3-128 checksum "
                   "mismatch)", key);
    json_t *root = Dlk_json_load(bytes, len, key, "segment", err);
    if (!root)
        return err ? err->code : DLK_ECORRUPT;
    json_t *chunks = json_object_get(root, "chunks");
    dlk_status rc = DLK_OK;
    if (!json_is_array(chunks) || json_array_size(chunks) != ref->nchunks)
        rc = BAD("%s: 'chunks' is not an array of the %llu entries its "
                 "reference says", key, (unsigned long long)ref->nchunks);
    Dlk_chunk_entry *e = rc ? NULL : malloc(ref->nchunks * sizeof *e);
    if (!rc && !e)
        rc = Dlk_oom(err);
    uint64_t samples = 0, stored = 0, raw = 0;
    for (size_t i = 0; !rc && i < ref->nchunks; i++) {
        if (!parse_entry(json_array_get(chunks, i), &e[i]))
            rc = BAD("%s: chunk entry %zu is malformed (want [\"<32 hex>\", "
                     "samples, stored_bytes, raw_bytes])", key, i);
        samples += e[i].samples; /* bounded: 2^16 entries of < 2^41 */
        stored += e[i].stored_bytes;
        raw += e[i].raw_bytes;
        if (stored > INT64_MAX)
            rc = BAD("%s: chunk sizes add up to more than 2^63-1", key);
    }
    if (!rc && (samples != ref->samples || stored != ref->stored_bytes ||
                raw != ref->raw_bytes))
        rc = BAD("%s: its entries hold %llu samples, %llu stored and %llu "
                 "raw bytes, not the %llu, %llu and %llu of its reference",
                 key, (unsigned long long)samples,
                 (unsigned long long)stored, (unsigned long long)raw,
                 (unsigned long long)ref->samples,
                 (unsigned long long)ref->stored_bytes,
                 (unsigned long long)ref->raw_bytes);
    json_decref(root);
    if (rc) {
        free(e);
        return rc;
    }
    *out = e;
    return DLK_OK;
}

dlk_status Dlk_tensor_attach(Dlk_tensor *t, Dlk_chunk_entry *const *ents,
                             dlk_error *err)
{
    if (!t->segs_pending)
        return DLK_OK;
    size_t total = t->nchunks;
    for (size_t k = 0; k < t->nsegs; k++)
        total += t->segs[k].nchunks;
    Dlk_chunk_entry *all = malloc((total ? total : 1) * sizeof *all);
    if (!all)
        return Dlk_oom(err);
    size_t at = 0;
    uint64_t first = 0;
    for (size_t k = 0; k < t->nsegs; k++)
        for (size_t i = 0; i < t->segs[k].nchunks; i++) {
            all[at] = ents[k][i];
            all[at++].first = first;
            first += ents[k][i].samples;
        }
    t->seg_chunks = at;
    if (t->nchunks)
        memcpy(all + at, t->chunks, t->nchunks * sizeof *all);
    free(t->chunks);
    t->chunks = all;
    t->nchunks = t->capchunks = total;
    t->segs_pending = false;
    return DLK_OK;
}

bool Dlk_tensor_segs_fit(const Dlk_tensor *t)
{
    if (t->segs_pending)
        return true;
    size_t at = 0;
    for (size_t k = 0; k < t->nsegs; k++) {
        const Dlk_seg_ref *g = &t->segs[k];
        if (at + g->nchunks > t->nchunks)
            return false;
        const Dlk_chunk_entry *a = &t->chunks[at],
                              *b = &t->chunks[at + g->nchunks - 1];
        if (b->first + b->samples - a->first != g->samples)
            return false;
        at += g->nchunks;
    }
    return at == t->seg_chunks;
}

dlk_status Dlk_manifest_dump(const Dlk_manifest *m, char **out, size_t *len,
                             dlk_error *err)
{
    json_t *root = json_object();
    json_t *tensors = json_array();
    if (!root || !tensors) {
        json_decref(root);
        json_decref(tensors);
        return Dlk_oom(err);
    }
    json_object_set_new(root, "format", json_string("dlk"));
    json_object_set_new(root, "version", json_integer(DLK_FORMAT_VERSION));
    json_object_set_new(root, "parent",
                        m->parent ? json_string(m->parent) : json_null());
    for (size_t i = 0; i < m->ntensors; i++)
        json_array_append_new(tensors, tensor_json(&m->tensors[i]));
    json_object_set_new(root, "tensors", tensors);
    if (m->key_index[0])
        json_object_set_new(root, "key_index",
                            json_pack("{s:s,s:I}", "object", m->key_index,
                                      "rows", (json_int_t)m->key_index_rows));
    if (m->nkey_runs) {
        json_t *runs = json_array();
        for (size_t i = 0; runs && i < m->nkey_runs; i++)
            json_array_append_new(runs, json_pack("{s:s,s:I}", "object",
                m->key_runs[i].object, "rows",
                (json_int_t)m->key_runs[i].rows));
        json_object_set_new(root, "key_runs", runs);
    }
    if (m->key_base)
        json_object_set_new(root, "key_base", json_string(m->key_base));
    if (m->nviews) {
        json_t *views = json_array();
        for (size_t i = 0; views && i < m->nviews; i++) {
            const Dlk_view_ref *v = &m->views[i];
            json_array_append_new(views, json_pack("{s:s,s:s,s:I,s:I,s:s}",
                "name", v->name, "object", v->object, "rows",
                (json_int_t)v->rows, "dataset_rows",
                (json_int_t)v->dataset_rows, "query",
                v->query ? v->query : ""));
        }
        json_object_set_new(root, "views", views);
    }
    if (m->nwrites) {
        json_t *w = json_array();
        for (size_t i = 0; w && i < m->nwrites; i++)
            json_array_append_new(w, json_string(m->writes[i]));
        json_object_set_new(root, "writes", w);
    }
    *out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!*out)
        return Dlk_fail(err, DLK_ENOMEM, "out of memory serializing manifest");
    *len = strlen(*out);
    return DLK_OK;
}

bool Dlk_key_base_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > DLK_KEY_BASE_MAX || s[n - 1] != '/')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    if (strncmp(s, "s3://", 5) == 0 || strncmp(s, "gs://", 5) == 0)
        return n > 6 && s[5] != '/';
    return s[0] == '/';
}

void Dlk_manifest_free(Dlk_manifest *m)
{
    for (size_t i = 0; i < m->ntensors; i++)
        Dlk_tensor_fini(&m->tensors[i]);
    free(m->tensors);
    for (size_t i = 0; i < m->nviews; i++)
        free(m->views[i].query);
    free(m->views);
    free(m->parent);
    free(m->key_base);
    free(m->key_runs);
    memset(m, 0, sizeof *m);
}
