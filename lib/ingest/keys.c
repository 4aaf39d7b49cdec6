/* keys.c - the source key of every ingested row and the key index that
 * makes a rerun over a grown prefix incremental (formats/dlk-v1.md 6.9).
 *
 * A row's key is the url of its main object (the image or the video; for
 * a row of none, such as .npy arrays or a text sidecar, the row's stem):
 * the source's url, then the object's key below it ("s3://raw/train/" +
 * "cat/0001.jpg"), so that two prefixes holding the same relative names
 * are two sets of objects.  It is held in the text tensor "key"; the text
 * tensor "key_version" holds the versions of the row's objects (ETags, or
 * size and mtime), space-separated in key order.  Rows written before
 * keys named whole objects hold the key relative to the source they came
 * from; ing_key_classify says how those compare.  Which keys a dataset
 * holds is looked up in its key index (lib/dataset/keyidx.c), for the
 * listed rows' hashes only. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ing_keyset_free(ing_keyset *k)
{
    Dlk_key_ents_free(k);
}

dlk_status ing_keyset_add(ing_keyset *k, uint64_t kh, uint64_t vh,
                          dlk_error *err)
{
    return Dlk_key_ents_add(k, kh, vh, err);
}

void ing_keyset_sort(ing_keyset *k)
{
    Dlk_key_ents_sort(k);
}

int ing_keyset_find(const ing_keyset *k, uint64_t kh, uint64_t vh)
{
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->e[mid].key < kh)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == k->n || k->e[lo].key != kh)
        return ING_KEY_NEW;
    /* a version of 0 is unknown (a store that lists none): it matches */
    for (size_t i = lo; i < k->n && k->e[i].key == kh; i++)
        if (k->e[i].version == vh || !vh || !k->e[i].version)
            return ING_KEY_PRESENT;
    return ING_KEY_CHANGED;
}

bool ing_key_tensors(const Dlk_manifest *m, int *t_key, int *t_ver)
{
    return Dlk_key_tensors(m, t_key, t_ver);
}

void ing_key_specs(dlk_tensor_spec out[2])
{
    memset(out, 0, 2 * sizeof *out);
    for (int i = 0; i < 2; i++) {
        snprintf(out[i].name, sizeof out[i].name, "%s",
                 i ? ING_KEY_VERSION_TENSOR : ING_KEY_TENSOR);
        out[i].dtype = DLK_U8;
        out[i].kind = DLK_KIND_TEXT;
        out[i].ndim = 1;
        out[i].shape[0] = DLK_DIM_VARIABLE;
        out[i].codec = DLK_CODEC_ZSTD;
        out[i].level = 3;
    }
}

uint64_t ing_key_hash(const char *key, size_t len)
{
    return Dlk_hash64(key, len);
}

uint64_t ing_version_hash(const char *v, size_t len)
{
    /* 0 stands for "unknown"; a real version never hashes to it */
    uint64_t h = len ? Dlk_hash64(v, len) : 0;
    return len && !h ? 1 : h;
}

const char *ing_row_key(const ing_source *s, size_t row, size_t *len)
{
    const ing_row *r = &s->rows[row];
    for (uint32_t i = 0; i < r->n; i++) {
        const ing_obj *o = &s->objs[r->first + i];
        if (o->role == ING_IMAGE || o->role == ING_VIDEO) {
            *len = strlen(o->key);
            return o->key;
        }
    }
    return ing_row_stem(s, row, len);
}

dlk_status ing_row_ident(const ing_source *s, size_t row, Dlk_buf *out,
                         dlk_error *err)
{
    size_t len;
    const char *key = ing_row_key(s, row, &len);
    out->len = 0;
    dlk_status rc = s->base ? Dlk_buf_append(out, s->base, strlen(s->base),
                                             err)
                            : DLK_OK;
    return rc ? rc : Dlk_buf_append(out, key, len, err);
}

dlk_status ing_row_version(const ing_source *s, size_t row, Dlk_buf *out,
                           dlk_error *err)
{
    const ing_row *r = &s->rows[row];
    out->len = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        const char *v = s->objs[r->first + i].version;
        v = v ? v : "";
        dlk_status rc = DLK_OK;
        if (i)
            rc = Dlk_buf_append(out, " ", 1, err);
        if (!rc)
            rc = Dlk_buf_append(out, v, strlen(v), err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

dlk_status ing_row_key_hashes(const ing_source *s, size_t row,
                              const char *key_base, Dlk_buf *tmp,
                              ing_row_hashes *h, dlk_error *err)
{
    memset(h, 0, sizeof *h);
    dlk_status rc = ing_row_ident(s, row, tmp, err);
    if (rc)
        return rc;
    h->key = ing_key_hash((const char *)tmp->data, tmp->len);
    size_t bl = key_base ? strlen(key_base) : 0;
    if (bl && tmp->len > bl && memcmp(tmp->data, key_base, bl) == 0) {
        h->has_based = true;
        h->based = ing_key_hash((const char *)tmp->data + bl, tmp->len - bl);
    }
    size_t len;
    const char *rel = ing_row_key(s, row, &len);
    h->rel = ing_key_hash(rel, len);
    if ((rc = ing_row_version(s, row, tmp, err)))
        return rc;
    /* all versions unknown (spaces only): unknown */
    bool known = false;
    for (size_t i = 0; i < tmp->len && !known; i++)
        known = tmp->data[i] != ' ';
    h->version = known ? ing_version_hash((const char *)tmp->data, tmp->len)
                       : 0;
    return DLK_OK;
}

int ing_key_classify(const ing_keyset *k, const ing_row_hashes *h,
                     bool have_base)
{
    /* a row of this very object */
    int f = ing_keyset_find(k, h->key, h->version);
    if (f != ING_KEY_NEW)
        return f;
    /* a relative key, of a source named by the head's key_base */
    if (h->has_based && (f = ing_keyset_find(k, h->based, h->version)))
        return f;
    /* a relative key of some source with this object's relative key and
     * version: this object, or one of the same bytes (an ETag is their
     * MD5), ingested before keys named whole objects */
    f = ing_keyset_find(k, h->rel, h->version);
    if (f == ING_KEY_PRESENT)
        return f;
    /* with another version: with key_base known, the row came from that
     * source (looked up above) or is another object of the same relative
     * name; without, the two cannot be told apart */
    return f == ING_KEY_CHANGED && !have_base ? ING_KEY_UNSURE : ING_KEY_NEW;
}

dlk_status ing_keyset_add_rows(dlk_dataset *ds, int t_key, int t_ver,
                               uint64_t from, ing_keyset *k, dlk_error *err)
{
    uint64_t to = ds->m.tensors[t_key].samples;
    if (ds->m.tensors[t_ver].samples < to)
        to = ds->m.tensors[t_ver].samples;
    return Dlk_key_rows(ds, t_key, t_ver, from, to, NULL, 0, k, NULL, err);
}

dlk_status ing_keyset_load(dlk_dataset *ds, int t_key, int t_ver,
                           ing_keyset *k, dlk_error *err)
{
    return Dlk_keyidx_lookup(ds, t_key, t_ver, NULL, 0, k, NULL, err);
}

dlk_status ing_keyset_lookup(dlk_dataset *ds, int t_key, int t_ver,
                             const uint64_t *q, size_t nq, ing_keyset *k,
                             dlk_error *err)
{
    return Dlk_keyidx_lookup(ds, t_key, t_ver, q, nq, k, NULL, err);
}

dlk_status ing_keyidx_update(dlk_dataset *ds, dlk_error *err)
{
    return Dlk_keyidx_update(ds, NULL, err);
}

dlk_status ing_keys_prepare(const char *url, const dlk_store_options *so,
                            dlk_error *err)
{
    dlk_dataset *ds;
    dlk_status rc = Dlk_dataset_open_writer(url, so, &ds, err);
    if (rc)
        return rc;
    int tk, tv;
    bool empty = true;
    for (size_t i = 0; i < ds->m.ntensors; i++)
        empty &= ds->m.tensors[i].samples == 0;
    bool have = ing_key_tensors(&ds->m, &tk, &tv);
    /* a tensor of either name that is not a key tensor: leave it alone */
    bool taken = dlk_dataset_find(ds, ING_KEY_TENSOR) >= 0 ||
                 dlk_dataset_find(ds, ING_KEY_VERSION_TENSOR) >= 0;
    if (have || !empty || taken || ds->m.ntensors + 2 > 4096) {
        dlk_dataset_free(ds);
        return DLK_OK;
    }
    size_t n = ds->m.ntensors;
    Dlk_tensor *t = realloc(ds->m.tensors, (n + 2) * sizeof *t);
    Dlk_builder *b = t ? realloc(ds->builders, (n + 2) * sizeof *b) : NULL;
    if (t)
        ds->m.tensors = t;
    if (b)
        ds->builders = b;
    Dlk_chunk_cache *c = b ? realloc(ds->cache, (n + 2) * sizeof *c) : NULL;
    if (c)
        ds->cache = c;
    if (!c) {
        dlk_dataset_free(ds);
        return Dlk_oom(err);
    }
    memset(ds->builders + n, 0, 2 * sizeof *ds->builders);
    memset(ds->cache + n, 0, 2 * sizeof *ds->cache);
    dlk_tensor_spec specs[2];
    ing_key_specs(specs);
    for (int i = 0; !rc && i < 2; i++) {
        memset(&ds->m.tensors[n + (size_t)i], 0, sizeof *t);
        rc = Dlk_tensor_init(&ds->m.tensors[n + (size_t)i], &specs[i], err);
        if (!rc)
            ds->m.ntensors++;
    }
    ds->dirty = true;
    if (!rc)
        rc = Dlk_write_head(ds, err);
    dlk_dataset_free(ds);
    if (rc == DLK_ECONFLICT) { /* another writer was first: go on with it */
        Dlk_error_clear(err);
        rc = DLK_OK;
    }
    return rc;
}

dlk_status ing_keys_set_base(const char *url, const dlk_store_options *so,
                             const char *base, dlk_error *err)
{
    for (int attempt = 0;; attempt++) {
        dlk_dataset *ds;
        dlk_status rc = Dlk_dataset_open_writer(url, so, &ds, err);
        if (rc)
            return rc;
        if (ds->m.key_base && strcmp(ds->m.key_base, base) == 0) {
            dlk_dataset_free(ds);
            return DLK_OK;
        }
        char *b = strdup(base);
        if (!b) {
            dlk_dataset_free(ds);
            return Dlk_oom(err);
        }
        free(ds->m.key_base);
        ds->m.key_base = b;
        ds->dirty = true;
        rc = Dlk_write_head(ds, err);
        dlk_dataset_free(ds);
        /* another writer was first: record it in the head it wrote */
        if (rc != DLK_ECONFLICT || attempt == 4)
            return rc;
        Dlk_error_clear(err);
    }
}

dlk_status ing_key_specs_add(const dlk_tensor_spec *specs, size_t *n,
                             dlk_tensor_spec **out, dlk_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(specs[i].name, ING_KEY_TENSOR) == 0 ||
            strcmp(specs[i].name, ING_KEY_VERSION_TENSOR) == 0)
            return DLK_OK;
    dlk_tensor_spec *v = malloc((*n + 2) * sizeof *v);
    if (!v)
        return Dlk_oom(err);
    if (*n)
        memcpy(v, specs, *n * sizeof *v);
    ing_key_specs(v + *n);
    /* the chunk size chosen for the others (0: the default) */
    v[*n].chunk_bytes = v[*n + 1].chunk_bytes = *n ? specs[0].chunk_bytes : 0;
    *n += 2;
    *out = v;
    return DLK_OK;
}
