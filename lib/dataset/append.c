/* append.c - appending samples: per-tensor chunk builders that seal a
 * chunk when it reaches the tensor's target size and hand it to a writer
 * (seal.c), which stores it under its content hash for the (unpublished)
 * head manifest. */
#include "dataset.h"

#include <stdlib.h>
#include <string.h>

/* The builder's samples to a chunk writer (seal.c). */
static dlk_status seal(dlk_dataset *ds, size_t ti, dlk_error *err)
{
    if (ds->builders[ti].samples == 0)
        return DLK_OK;
    return dlk_seal_submit(ds, ti, err);
}

dlk_status dlk_append(dlk_dataset *ds, size_t tensor, const void *data,
                      size_t nbytes, const int64_t *shape, int ndim,
                      dlk_error *err)
{
    if (ds->read_only)
        return dlk_fail(err, DLK_EINVAL, "dataset opened at a commit is "
                        "read-only");
    if (tensor >= ds->m.ntensors)
        return dlk_fail(err, DLK_ENOTFOUND, "no tensor %zu", tensor);
    dlk_tensor *t = &ds->m.tensors[tensor];
    dlk_builder *b = &ds->builders[tensor];
    const dlk_tensor_spec *s = &t->spec;
    if (ndim != s->ndim)
        return dlk_fail(err, DLK_EINVAL, "tensor '%s': sample has %d "
                        "dimensions, the schema %d", s->name, ndim, s->ndim);
    uint64_t want = dlk_dtype_size(s->dtype);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || shape[d] > UINT32_MAX ||
            (s->shape[d] != DLK_DIM_VARIABLE && shape[d] != s->shape[d]))
            return dlk_fail(err, DLK_EINVAL, "tensor '%s': sample dimension "
                            "%d is %lld, the schema wants %lld", s->name, d,
                            (long long)shape[d], (long long)s->shape[d]);
        if (!dlk_mul_u64(want, (uint64_t)shape[d], &want))
            return dlk_fail(err, DLK_ELIMIT, "tensor '%s': sample size "
                            "overflows", s->name);
    }
    if (want != nbytes)
        return dlk_fail(err, DLK_EINVAL, "tensor '%s': sample of %zu bytes, "
                        "its shape needs %llu", s->name, nbytes,
                        (unsigned long long)want);
    if (nbytes > DLK_CHUNK_MAX_RAW / 2)
        return dlk_fail(err, DLK_ELIMIT, "tensor '%s': a sample of %zu bytes "
                        "is over the 1 GiB limit", s->name, nbytes);
    dlk_status rc;
    if (b->samples && (b->raw.len + nbytes > s->chunk_bytes ||
                       b->samples == DLK_CHUNK_MAX_SAMPLES))
        if ((rc = seal(ds, tensor, err)))
            return rc;
    if ((rc = dlk_buf_append(&b->raw, data, nbytes, err)))
        return rc;
    if (ndim) {
        size_t need = ((size_t)b->samples + 1) * (size_t)ndim;
        if (need > b->shapes_cap) {
            size_t cap = b->shapes_cap ? b->shapes_cap * 2 : 64 * (size_t)ndim;
            while (cap < need)
                cap *= 2;
            uint32_t *p = realloc(b->shapes, cap * sizeof *p);
            if (!p) {
                b->raw.len -= nbytes;
                return dlk_fail(err, DLK_ENOMEM, "out of memory");
            }
            b->shapes = p;
            b->shapes_cap = cap;
        }
        for (int d = 0; d < ndim; d++) {
            b->shapes[(size_t)b->samples * ndim + d] = (uint32_t)shape[d];
            if (!b->samples || shape[d] < b->smin[d])
                b->smin[d] = shape[d];
            if (!b->samples || shape[d] > b->smax[d])
                b->smax[d] = shape[d];
        }
    }
    b->samples++;
    if (b->raw.len >= s->chunk_bytes)
        return seal(ds, tensor, err);
    return DLK_OK;
}

/* Seal every partly filled chunk into ds->m without publishing the head:
 * ingest calls it at its checkpoints, where it writes the chunk lists to
 * its own staging manifest (lib/ingest/stage.c). */
dlk_status dlk_dataset_seal(dlk_dataset *ds, dlk_error *err)
{
    if (ds->read_only)
        return DLK_OK;
    for (size_t i = 0; i < ds->m.ntensors; i++) {
        dlk_status rc = seal(ds, i, err);
        if (rc)
            return rc;
    }
    return dlk_seal_wait(ds, err);
}

dlk_status dlk_dataset_flush(dlk_dataset *ds, dlk_error *err)
{
    if (ds->read_only)
        return DLK_OK;
    dlk_status rc = dlk_dataset_seal(ds, err);
    if (rc)
        return rc;
    return ds->dirty ? dlk_write_head(ds, err) : DLK_OK;
}
