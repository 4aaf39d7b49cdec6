/* read.c - reading chunks and single samples. */
#include "dataset.h"

#include <stdlib.h>
#include <string.h>

size_t dlk_tensor_nchunks(const dlk_dataset *ds, size_t tensor)
{
    if (tensor >= ds->m.ntensors)
        return 0;
    const Dlk_tensor *t = &ds->m.tensors[tensor];
    return Dlk_tensor_base(t) + t->nchunks;
}

/* Tensor ti's list made whole where a writer's open left it pending
 * (Dlk_dataset_open_writer): a reader of its entries by index reads the
 * segments first. */
static dlk_status whole(dlk_dataset *ds, size_t ti, dlk_error *err)
{
    return ds->m.tensors[ti].segs_pending ? Dlk_tensor_load(ds, ti, err)
                                          : DLK_OK;
}

int dlk_tensor_chunk(const dlk_dataset *ds, size_t tensor, size_t chunk,
                     dlk_chunk_ref *out)
{
    /* the handle is const to its reader; a pending list is its cache of
     * the segments, filled here */
    if (tensor >= ds->m.ntensors ||
        whole((dlk_dataset *)ds, tensor, NULL) ||
        chunk >= ds->m.tensors[tensor].nchunks)
        return -1;
    const Dlk_chunk_entry *e = &ds->m.tensors[tensor].chunks[chunk];
    out->key = e->key;
    out->first_sample = e->first;
    out->samples = e->samples;
    out->stored_bytes = e->stored_bytes;
    out->raw_bytes = e->raw_bytes;
    return 0;
}

/* Check that a chunk (header and index parsed) is what the manifest says
 * it is: before its payload is decompressed, so that a hostile chunk
 * cannot make the reader allocate what the manifest does not allow. */
static dlk_status check_against_entry(const dlk_chunk *c,
                                      const Dlk_tensor *t,
                                      const Dlk_chunk_entry *e,
                                      const char *key, dlk_error *err)
{
    const Dlk_chunk_header *h = &c->h;
    bool variable = false;
    for (int d = 0; d < t->spec.ndim; d++)
        variable |= t->spec.shape[d] == DLK_DIM_VARIABLE;
    if (variable != !!(h->flags & DLK_CHUNK_FLAG_VARIABLE))
        return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': %s shape, tensor "
                        "'%s' has a %s one", key,
                        variable ? "a fixed" : "a variable", t->spec.name,
                        variable ? "variable" : "fixed");
    if (h->samples != e->samples || h->raw_bytes != e->raw_bytes)
        return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': holds %u samples of "
                        "%llu bytes, the manifest says %u of %llu", key,
                        h->samples, (unsigned long long)h->raw_bytes,
                        e->samples, (unsigned long long)e->raw_bytes);
    if (h->dtype != t->spec.dtype || h->ndim != t->spec.ndim ||
        h->codec != t->spec.codec)
        return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': dtype, rank or codec "
                        "differ from tensor '%s'", key, t->spec.name);
    /* the tensor's part_bytes promises a part table in every chunk */
    if (t->spec.part_bytes && c->part_bytes != t->spec.part_bytes)
        return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': %s, tensor '%s' has "
                        "parts of %u bytes", key,
                        c->part_bytes ? "parts of another size" : "no parts",
                        t->spec.name, t->spec.part_bytes);
    for (uint32_t s = 0; s < (variable ? h->samples : 1); s++)
        for (int d = 0; d < h->ndim; d++) {
            int64_t dim = variable ? c->shapes[(size_t)s * h->ndim + d]
                                   : c->shape[d];
            if (t->spec.shape[d] != DLK_DIM_VARIABLE &&
                t->spec.shape[d] != dim)
                return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': sample %u's "
                                "shape differs from tensor '%s'", key, s,
                                t->spec.name);
        }
    return DLK_OK;
}

dlk_status Dlk_chunk_load(dlk_dataset *ds, const Dlk_tensor *t,
                          const Dlk_chunk_entry *e, unsigned mode, void *buf,
                          size_t cap, dlk_chunk **out, dlk_error *err)
{
    return Dlk_chunk_load_from(ds, ds->store, t, e, mode, buf, cap, out, err);
}

dlk_status Dlk_chunk_load_from(dlk_dataset *ds, Dlk_store *store,
                               const Dlk_tensor *t, const Dlk_chunk_entry *e,
                               unsigned mode, void *buf, size_t cap,
                               dlk_chunk **out, dlk_error *err)
{
    *out = NULL;
    if (ds->sealer) { /* a chunk appended by this handle may be in flight */
        dlk_status rc = Dlk_seal_wait(ds, err);
        if (rc)
            return rc;
    }
    char key[DLK_CHUNK_KEY_MAX];
    Dlk_chunk_key(key, t->spec.name, e->key);
    dlk_chunk *c = calloc(1, sizeof *c);
    if (!c)
        return Dlk_oom(err);
    /* Uncompressed chunks are read straight into caller memory. */
    if (buf && t->spec.codec == DLK_CODEC_NONE && cap >= e->stored_bytes)
        Dlk_buf_wrap(&c->object, buf, cap);
    Dlk_obj_info info;
    dlk_status rc = Dlk_store_get_sized(store, key, e->stored_bytes,
                                        &c->object, &info, err);
    if (rc == DLK_ELIMIT) {
        /* the read stopped at the manifest's size: ask for the real one */
        dlk_error herr = {0};
        if (Dlk_store_head(ds->store, key, &info, &herr) ||
            info.size <= e->stored_bytes)
            rc = Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': object has more "
                          "than the %llu bytes the manifest says", key,
                          (unsigned long long)e->stored_bytes);
        else
            rc = Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': object has %llu "
                          "bytes, the manifest says %llu", key,
                          (unsigned long long)info.size,
                          (unsigned long long)e->stored_bytes);
    } else if (!rc && info.size != e->stored_bytes) {
        rc = Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': object has %llu bytes, "
                      "the manifest says %llu", key,
                      (unsigned long long)info.size,
                      (unsigned long long)e->stored_bytes);
    }
    if (!rc)
        rc = Dlk_chunk_open(c, t, e, key, mode, buf, cap, err);
    if (rc) {
        dlk_chunk_free(c);
        return rc;
    }
    *out = c;
    return DLK_OK;
}

dlk_status Dlk_chunk_open(dlk_chunk *c, const Dlk_tensor *t,
                          const Dlk_chunk_entry *e, const char *key,
                          unsigned mode, void *buf, size_t cap,
                          dlk_error *err)
{
    /* header only: c->object may hold just the object's first bytes, at
     * least 64 + index_bytes (Dlk_chunk_expected_head) */
    bool head = mode & DLK_DECODE_HEADER_ONLY;
    if (head ? c->object.len > e->stored_bytes
             : c->object.len != e->stored_bytes)
        return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': object has %zu "
                        "bytes, the manifest says %llu", key, c->object.len,
                        (unsigned long long)e->stored_bytes);
    /* header and index first, checked against the manifest; only then
     * the payload */
    dlk_status rc = Dlk_chunk_decode_head(c, key, e->stored_bytes, err);
    if (!rc)
        rc = check_against_entry(c, t, e, key, err);
    if (!rc && !(mode & DLK_DECODE_HEADER_ONLY)) {
        free(c->shapes);
        free(c->offsets);
        c->shapes = NULL;
        c->offsets = NULL;
        rc = Dlk_chunk_decode(c, key, mode, buf, cap, err);
    }
    return rc;
}

dlk_status dlk_chunk_read(dlk_dataset *ds, size_t tensor, size_t chunk,
                          unsigned flags, void *buf, size_t cap,
                          dlk_chunk **out, dlk_error *err)
{
    *out = NULL;
    dlk_status rc = tensor < ds->m.ntensors ? whole(ds, tensor, err)
                                            : DLK_OK;
    if (rc)
        return rc;
    if (tensor >= ds->m.ntensors || chunk >= ds->m.tensors[tensor].nchunks)
        return Dlk_fail(err, DLK_ENOTFOUND, "no chunk %zu of tensor %zu",
                        chunk, tensor);
    const Dlk_tensor *t = &ds->m.tensors[tensor];
    return Dlk_chunk_load(ds, t, &t->chunks[chunk],
                          flags & DLK_READ_VERIFY ? DLK_DECODE_VERIFY : 0,
                          buf, cap, out, err);
}

dlk_status dlk_read_sample(dlk_dataset *ds, size_t tensor, uint64_t index,
                           dlk_sample *out, dlk_error *err)
{
    memset(out, 0, sizeof *out);
    if (tensor >= ds->m.ntensors)
        return Dlk_fail(err, DLK_ENOTFOUND, "no tensor %zu", tensor);
    Dlk_tensor *t = &ds->m.tensors[tensor];
    ssize_t ci = Dlk_tensor_find_chunk(t, index);
    if (ci < 0 && t->segs_pending) {
        dlk_status rc = whole(ds, tensor, err);
        if (rc)
            return rc;
        ci = Dlk_tensor_find_chunk(t, index);
    }
    if (ci < 0)
        return Dlk_fail(err, DLK_ENOTFOUND, "tensor '%s' has %llu samples, "
                        "no sample %llu", t->spec.name,
                        (unsigned long long)t->samples,
                        (unsigned long long)index);
    Dlk_chunk_cache *cc = &ds->cache[tensor];
    if (!cc->chunk || cc->index != (size_t)ci) {
        dlk_chunk_free(cc->chunk);
        cc->chunk = NULL;
        dlk_status rc = Dlk_chunk_load(ds, t, &t->chunks[ci], DLK_DECODE_VERIFY,
                                       NULL, 0,
                                       &cc->chunk, err);
        if (rc)
            return rc;
        cc->index = (size_t)ci;
    }
    size_t n;
    const void *p = dlk_chunk_sample(cc->chunk,
                                     (uint32_t)(index - t->chunks[ci].first),
                                     &n, out->shape);
    out->data = malloc(n ? n : 1);
    if (!out->data)
        return Dlk_oom(err);
    memcpy(out->data, p, n);
    out->nbytes = n;
    out->dtype = t->spec.dtype;
    out->ndim = t->spec.ndim;
    return DLK_OK;
}

void dlk_sample_free(dlk_sample *s)
{
    if (s) {
        free(s->data);
        s->data = NULL;
    }
}
