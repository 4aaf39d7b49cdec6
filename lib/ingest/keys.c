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
 * holds is read from the key index, a sorted array of (XXH3-64 of the
 * key, XXH3-64 of the version) named by its hash and referenced from the
 * head with the number of rows it covers; rows past those (appended by a
 * writer that does not keep the index) are read from the key chunks
 * themselves. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDX_MAGIC "DLKI"
#define IDX_HEADER 24

void ing_keyset_free(ing_keyset *k)
{
    free(k->e);
    memset(k, 0, sizeof *k);
}

dlk_status ing_keyset_add(ing_keyset *k, uint64_t kh, uint64_t vh,
                          dlk_error *err)
{
    if (!DLK_GROW(k->e, k->n, k->cap, 1024))
        return dlk_fail(err, DLK_ENOMEM, "out of memory for the keys");
    k->e[k->n].key = kh;
    k->e[k->n++].version = vh;
    return DLK_OK;
}

static int cmp_entry(const void *pa, const void *pb)
{
    const ing_key_entry *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->version > b->version) - (a->version < b->version);
}

void ing_keyset_sort(ing_keyset *k)
{
    if (k->n > 1)
        qsort(k->e, k->n, sizeof *k->e, cmp_entry);
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

static bool is_key_tensor(const dlk_tensor *t, const char *name)
{
    const dlk_tensor_spec *s = &t->spec;
    return strcmp(s->name, name) == 0 && s->kind == DLK_KIND_TEXT &&
           s->dtype == DLK_U8 && s->ndim == 1 &&
           s->shape[0] == DLK_DIM_VARIABLE;
}

bool ing_key_tensors(const dlk_manifest *m, int *t_key, int *t_ver)
{
    *t_key = *t_ver = -1;
    for (size_t i = 0; i < m->ntensors; i++) {
        if (is_key_tensor(&m->tensors[i], ING_KEY_TENSOR))
            *t_key = (int)i;
        else if (is_key_tensor(&m->tensors[i], ING_KEY_VERSION_TENSOR))
            *t_ver = (int)i;
    }
    if (*t_key < 0 || *t_ver < 0) {
        *t_key = *t_ver = -1;
        return false;
    }
    return true;
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
    return dlk_hash64(key, len);
}

uint64_t ing_version_hash(const char *v, size_t len)
{
    /* 0 stands for "unknown"; a real version never hashes to it */
    uint64_t h = len ? dlk_hash64(v, len) : 0;
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

dlk_status ing_row_ident(const ing_source *s, size_t row, dlk_buf *out,
                         dlk_error *err)
{
    size_t len;
    const char *key = ing_row_key(s, row, &len);
    out->len = 0;
    dlk_status rc = s->base ? dlk_buf_append(out, s->base, strlen(s->base),
                                             err)
                            : DLK_OK;
    return rc ? rc : dlk_buf_append(out, key, len, err);
}

dlk_status ing_row_version(const ing_source *s, size_t row, dlk_buf *out,
                           dlk_error *err)
{
    const ing_row *r = &s->rows[row];
    out->len = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        const char *v = s->objs[r->first + i].version;
        v = v ? v : "";
        dlk_status rc = DLK_OK;
        if (i)
            rc = dlk_buf_append(out, " ", 1, err);
        if (!rc)
            rc = dlk_buf_append(out, v, strlen(v), err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

dlk_status ing_row_key_hashes(const ing_source *s, size_t row,
                              const char *key_base, dlk_buf *tmp,
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

/* The samples [from, to) of variable-shape u8 tensor ti, each given to fn
 * with its bytes. */
typedef dlk_status (*sample_fn)(void *ud, uint64_t i, const uint8_t *p,
                                size_t n, dlk_error *err);

static dlk_status each_sample(dlk_dataset *ds, size_t ti, uint64_t from,
                              uint64_t to, sample_fn fn, void *ud,
                              dlk_error *err)
{
    const dlk_tensor *t = &ds->m.tensors[ti];
    if (from >= to)
        return DLK_OK;
    ssize_t c0 = dlk_tensor_find_chunk(t, from);
    if (c0 < 0)
        return dlk_fail(err, DLK_ECORRUPT, "tensor '%s' has no sample %llu",
                        t->spec.name, (unsigned long long)from);
    dlk_status rc = DLK_OK;
    for (size_t c = (size_t)c0; !rc && c < t->nchunks; c++) {
        const dlk_chunk_entry *e = &t->chunks[c];
        if (e->first >= to)
            break;
        dlk_chunk *ch;
        rc = dlk_chunk_load(ds, t, e, DLK_DECODE_VERIFY, NULL, 0, &ch, err);
        if (rc)
            break;
        for (uint32_t s = 0; !rc && s < e->samples; s++) {
            uint64_t i = e->first + s;
            if (i < from || i >= to)
                continue;
            rc = fn(ud, i, ch->payload + ch->offsets[s],
                    (size_t)(ch->offsets[s + 1] - ch->offsets[s]), err);
        }
        dlk_chunk_free(ch);
    }
    return rc;
}

typedef struct tail_ud {
    ing_keyset *k;
    uint64_t from;
    uint64_t *keyh;      /* the key hashes of rows [from, to) */
} tail_ud;

static dlk_status on_key(void *ud, uint64_t i, const uint8_t *p, size_t n,
                         dlk_error *err)
{
    tail_ud *t = ud;
    DLK_UNUSED(err);
    t->keyh[i - t->from] = ing_key_hash((const char *)p, n);
    return DLK_OK;
}

static dlk_status on_version(void *ud, uint64_t i, const uint8_t *p,
                             size_t n, dlk_error *err)
{
    tail_ud *t = ud;
    bool known = false;
    for (size_t j = 0; j < n && !known; j++)
        known = p[j] != ' ';
    return ing_keyset_add(t->k, t->keyh[i - t->from],
                          known ? ing_version_hash((const char *)p, n) : 0,
                          err);
}

dlk_status ing_keyset_add_rows(dlk_dataset *ds, int t_key, int t_ver,
                               uint64_t from, ing_keyset *k, dlk_error *err)
{
    uint64_t to = ds->m.tensors[t_key].samples;
    if (ds->m.tensors[t_ver].samples < to)
        to = ds->m.tensors[t_ver].samples;
    if (from >= to)
        return DLK_OK;
    tail_ud t = {k, from, malloc((size_t)(to - from) * sizeof *t.keyh)};
    if (!t.keyh)
        return dlk_fail(err, DLK_ENOMEM, "out of memory for the keys");
    dlk_status rc = each_sample(ds, (size_t)t_key, from, to, on_key, &t, err);
    if (!rc)
        rc = each_sample(ds, (size_t)t_ver, from, to, on_version, &t, err);
    free(t.keyh);
    return rc;
}

/* ---- the index object ------------------------------------------------ */

static dlk_status load_index(dlk_dataset *ds, ing_keyset *k, dlk_error *err)
{
    const char *key = ds->m.key_index;
    uint64_t rows = ds->m.key_index_rows;
    uint64_t want;
    if (!dlk_mul_u64(rows, 16, &want) || want > ((uint64_t)1 << 36))
        return dlk_fail(err, DLK_ELIMIT, "key index '%s': %llu rows", key,
                        (unsigned long long)rows);
    want += IDX_HEADER;
    dlk_buf b;
    dlk_buf_init(&b);
    dlk_status rc = dlk_store_get(ds->store, key, want, &b, NULL, err);
    char hex[33];
    if (!rc) {
        dlk_hash128_hex(b.data, b.len, hex);
        if (b.len != want || memcmp(b.data, IDX_MAGIC, 4) ||
            dlk_get_le16(b.data + 4) != 1 || dlk_get_le16(b.data + 6) ||
            dlk_get_le64(b.data + 8) != rows ||
            strcmp(hex, key + strlen(DLK_KEY_INDEX_PREFIX)) ||
            dlk_hash64(b.data + IDX_HEADER, b.len - IDX_HEADER) !=
                dlk_get_le64(b.data + 16))
            rc = dlk_fail(err, DLK_ECORRUPT, "key index '%s': not the %llu "
                          "rows the head names, or corrupt", key,
                          (unsigned long long)rows);
    }
    if (!rc && rows) {
        ing_key_entry *e = malloc((size_t)rows * sizeof *e);
        if (!e)
            rc = dlk_fail(err, DLK_ENOMEM, "out of memory for the keys");
        for (uint64_t i = 0; e && i < rows; i++) {
            e[i].key = dlk_get_le64(b.data + IDX_HEADER + 16 * i);
            e[i].version = dlk_get_le64(b.data + IDX_HEADER + 16 * i + 8);
        }
        if (e) {
            free(k->e);
            k->e = e;
            k->n = k->cap = (size_t)rows;
        }
    }
    dlk_buf_free(&b);
    return rc;
}

dlk_status ing_keyset_load(dlk_dataset *ds, int t_key, int t_ver,
                           ing_keyset *k, dlk_error *err)
{
    memset(k, 0, sizeof *k);
    uint64_t samples = ds->m.tensors[t_key].samples;
    uint64_t from = 0;
    /* an index of more rows than the tensor has is not this head's */
    if (ds->m.key_index[0] && ds->m.key_index_rows <= samples) {
        dlk_status rc = load_index(ds, k, err);
        if (rc == DLK_ENOTFOUND || rc == DLK_ECORRUPT || rc == DLK_ELIMIT) {
            /* the index only repeats the key chunks: read those instead
             * (and the merge writes a good index again) */
            dlk_error_clear(err);
            ing_keyset_free(k);
        } else if (rc) {
            ing_keyset_free(k);
            return rc;
        } else {
            from = ds->m.key_index_rows;
        }
    }
    dlk_status rc = ing_keyset_add_rows(ds, t_key, t_ver, from, k, err);
    if (rc) {
        ing_keyset_free(k);
        return rc;
    }
    ing_keyset_sort(k);
    return DLK_OK;
}

dlk_status ing_keyidx_write(dlk_dataset *ds, const ing_keyset *k,
                            uint64_t rows, dlk_error *err)
{
    size_t len = IDX_HEADER + 16 * k->n;
    uint8_t *p = malloc(len);
    if (!p)
        return dlk_fail(err, DLK_ENOMEM, "out of memory for the key index");
    memcpy(p, IDX_MAGIC, 4);
    dlk_put_le16(p + 4, 1);
    dlk_put_le16(p + 6, 0);
    dlk_put_le64(p + 8, (uint64_t)k->n);
    for (size_t i = 0; i < k->n; i++) {
        dlk_put_le64(p + IDX_HEADER + 16 * i, k->e[i].key);
        dlk_put_le64(p + IDX_HEADER + 16 * i + 8, k->e[i].version);
    }
    dlk_put_le64(p + 16, dlk_hash64(p + IDX_HEADER, len - IDX_HEADER));
    char hex[33];
    struct iovec v = {p, len};
    dlk_status rc = dlk_store_putv_hashed(ds->store, DLK_KEY_INDEX_PREFIX,
                                          &v, 1, DLK_PUT_IF_ABSENT, hex, err);
    if (rc == DLK_EEXIST) { /* the same entries: the same bytes */
        dlk_error_clear(err);
        rc = DLK_OK;
    }
    free(p);
    if (rc)
        return dlk_fail_wrap(err, "cannot write the key index");
    snprintf(ds->m.key_index, sizeof ds->m.key_index, "%s%s",
             DLK_KEY_INDEX_PREFIX, hex);
    ds->m.key_index_rows = rows;
    return DLK_OK;
}

dlk_status ing_keyidx_update(dlk_dataset *ds, dlk_error *err)
{
    int tk, tv;
    if (!ing_key_tensors(&ds->m, &tk, &tv))
        return DLK_OK;
    uint64_t rows = ds->m.tensors[tk].samples;
    if (ds->m.tensors[tv].samples != rows)
        return DLK_OK; /* not rows of one ingest: leave it to the next */
    if (ds->m.key_index[0] && ds->m.key_index_rows == rows)
        return DLK_OK;
    ing_keyset k;
    dlk_status rc = ing_keyset_load(ds, tk, tv, &k, err);
    if (!rc)
        rc = ing_keyidx_write(ds, &k, rows, err);
    ing_keyset_free(&k);
    return rc;
}

dlk_status ing_keys_prepare(const char *url, const dlk_store_options *so,
                            dlk_error *err)
{
    dlk_dataset *ds;
    dlk_status rc = dlk_dataset_open_with(url, NULL, so, &ds, err);
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
    dlk_tensor *t = realloc(ds->m.tensors, (n + 2) * sizeof *t);
    dlk_builder *b = t ? realloc(ds->builders, (n + 2) * sizeof *b) : NULL;
    if (t)
        ds->m.tensors = t;
    if (b)
        ds->builders = b;
    dlk_chunk_cache *c = b ? realloc(ds->cache, (n + 2) * sizeof *c) : NULL;
    if (c)
        ds->cache = c;
    if (!c) {
        dlk_dataset_free(ds);
        return dlk_oom(err);
    }
    memset(ds->builders + n, 0, 2 * sizeof *ds->builders);
    memset(ds->cache + n, 0, 2 * sizeof *ds->cache);
    dlk_tensor_spec specs[2];
    ing_key_specs(specs);
    for (int i = 0; !rc && i < 2; i++) {
        memset(&ds->m.tensors[n + (size_t)i], 0, sizeof *t);
        rc = dlk_tensor_init(&ds->m.tensors[n + (size_t)i], &specs[i], err);
        if (!rc)
            ds->m.ntensors++;
    }
    ds->dirty = true;
    if (!rc)
        rc = dlk_write_head(ds, err);
    dlk_dataset_free(ds);
    if (rc == DLK_ECONFLICT) { /* another writer was first: go on with it */
        dlk_error_clear(err);
        rc = DLK_OK;
    }
    return rc;
}

dlk_status ing_keys_set_base(const char *url, const dlk_store_options *so,
                             const char *base, dlk_error *err)
{
    for (int attempt = 0;; attempt++) {
        dlk_dataset *ds;
        dlk_status rc = dlk_dataset_open_with(url, NULL, so, &ds, err);
        if (rc)
            return rc;
        if (ds->m.key_base && strcmp(ds->m.key_base, base) == 0) {
            dlk_dataset_free(ds);
            return DLK_OK;
        }
        char *b = strdup(base);
        if (!b) {
            dlk_dataset_free(ds);
            return dlk_oom(err);
        }
        free(ds->m.key_base);
        ds->m.key_base = b;
        ds->dirty = true;
        rc = dlk_write_head(ds, err);
        dlk_dataset_free(ds);
        /* another writer was first: record it in the head it wrote */
        if (rc != DLK_ECONFLICT || attempt == 4)
            return rc;
        dlk_error_clear(err);
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
        return dlk_oom(err);
    if (*n)
        memcpy(v, specs, *n * sizeof *v);
    ing_key_specs(v + *n);
    /* the chunk size chosen for the others (0: the default) */
    v[*n].chunk_bytes = v[*n + 1].chunk_bytes = *n ? specs[0].chunk_bytes : 0;
    *n += 2;
    *out = v;
    return DLK_OK;
}
