/* append.c - appending samples: per-tensor chunk builders that seal a
 * chunk when it reaches the tensor's target size and hand it to a writer
 * (seal.c), which stores it under its content hash for the (unpublished)
 * head manifest.
 *
 * A builder gathers the payload either copied into one buffer or, for
 * large samples of an uncompressed tensor, as the samples' own buffers
 * (Dlk_append_take): the writer then writes them where they are, and the
 * appending thread, which ingest runs in sorted order, copies nothing.
 * Either way the payload's XXH3-64 (the chunk's raw_hash) is computed as
 * samples arrive, while they are still in the cache, not by a later pass
 * over the whole chunk. */
#include "dataset.h"

#include <stdlib.h>
#include <string.h>

/* The builder's samples to a chunk writer (seal.c). */
static dlk_status seal(dlk_dataset *ds, size_t ti, dlk_error *err)
{
    if (ds->builders[ti].samples == 0)
        return DLK_OK;
    return Dlk_seal_submit(ds, ti, err);
}

/* Check a sample against tensor's schema; its size in *bytes. */
static dlk_status check_sample(dlk_dataset *ds, size_t tensor, size_t nbytes,
                               const int64_t *shape, int ndim, dlk_error *err)
{
    if (ds->read_only)
        return Dlk_fail(err, DLK_EINVAL, "dataset opened at a commit is "
                        "read-only");
    if (tensor >= ds->m.ntensors)
        return Dlk_fail(err, DLK_ENOTFOUND, "no tensor %zu", tensor);
    const dlk_tensor_spec *s = &ds->m.tensors[tensor].spec;
    if (ndim != s->ndim)
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': sample has %d "
                        "dimensions, the schema %d", s->name, ndim, s->ndim);
    uint64_t want = dlk_dtype_size(s->dtype);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || shape[d] > UINT32_MAX ||
            (s->shape[d] != DLK_DIM_VARIABLE && shape[d] != s->shape[d]))
            return Dlk_fail(err, DLK_EINVAL, "tensor '%s': sample dimension "
                            "%d is %lld, the schema wants %lld", s->name, d,
                            (long long)shape[d], (long long)s->shape[d]);
        if (!Dlk_mul_u64(want, (uint64_t)shape[d], &want))
            return Dlk_fail(err, DLK_ELIMIT, "tensor '%s': sample size "
                            "overflows", s->name);
    }
    if (want != nbytes)
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': sample of %zu bytes, "
                        "its shape needs %llu", s->name, nbytes,
                        (unsigned long long)want);
    if (nbytes > DLK_CHUNK_MAX_RAW / 2)
        return Dlk_fail(err, DLK_ELIMIT, "tensor '%s': a sample of %zu bytes "
                        "is over the 1 GiB limit", s->name, nbytes);
    return DLK_OK;
}

/* Seal the builder first when the sample would take it past the chunk's
 * size, its sample limit, or (*parts more) its part limit; then make room
 * for the sample's shape and one more part, so that nothing after this
 * can fail half-way. */
static dlk_status make_room(dlk_dataset *ds, size_t tensor, size_t nbytes,
                            int ndim, size_t parts, dlk_error *err)
{
    Dlk_builder *b = &ds->builders[tensor];
    dlk_status rc;
    uint64_t target = Dlk_chunk_target(ds, tensor);
    if (b->samples && (b->bytes + nbytes > target ||
                       b->samples == DLK_CHUNK_MAX_SAMPLES ||
                       b->nsegs + parts > DLK_SEGS_MAX))
        if ((rc = seal(ds, tensor, err)))
            return rc;
    if (!b->hash && !(b->hash = Dlk_hash64_stream_new()))
        return Dlk_oom(err);
    if (ndim) {
        size_t need = ((size_t)b->samples + 1) * (size_t)ndim;
        if (need > b->shapes_cap &&
            !DLK_GROW(b->shapes, need - 1, b->shapes_cap, 64 * (size_t)ndim))
            return Dlk_oom(err);
    }
    if (parts && b->nsegs + parts > b->segs_cap &&
        !DLK_GROW(b->segs, b->nsegs + parts - 1, b->segs_cap, 64))
        return Dlk_oom(err);
    return DLK_OK;
}

/* The sample is in: its shape, count and hash; seal when full. */
static dlk_status added(dlk_dataset *ds, size_t tensor, const void *data,
                        size_t nbytes, const int64_t *shape, int ndim,
                        dlk_error *err)
{
    Dlk_builder *b = &ds->builders[tensor];
    for (int d = 0; d < ndim; d++) {
        b->shapes[(size_t)b->samples * ndim + d] = (uint32_t)shape[d];
        if (!b->samples || shape[d] < b->smin[d])
            b->smin[d] = shape[d];
        if (!b->samples || shape[d] > b->smax[d])
            b->smax[d] = shape[d];
    }
    Dlk_hash64_stream_update(b->hash, data, nbytes);
    b->bytes += nbytes;
    b->samples++;
    if (b->bytes >= Dlk_chunk_target(ds, tensor))
        return seal(ds, tensor, err);
    return DLK_OK;
}

/* Small parts are joined up to this size. */
#define PART_JOIN ((size_t)1 << 20)

static dlk_status append_checked(dlk_dataset *ds, size_t tensor,
                                 const void *data, size_t nbytes,
                                 const int64_t *shape, int ndim,
                                 dlk_error *err);

/* The first sample since the open or the last Dlk_dataset_seal: the
 * chunks from the tensor's present count on will be new. */
static void note_new(dlk_dataset *ds, size_t ti)
{
    Dlk_builder *b = &ds->builders[ti];
    if (!b->tail_seen) {
        b->tail_seen = true;
        b->new_from = ds->m.tensors[ti].nchunks;
    }
}

uint64_t Dlk_chunk_target(const dlk_dataset *ds, size_t ti)
{
    return ds->chunk_target ? ds->chunk_target
                            : ds->m.tensors[ti].spec.chunk_bytes;
}

dlk_status dlk_append(dlk_dataset *ds, size_t tensor, const void *data,
                      size_t nbytes, const int64_t *shape, int ndim,
                      dlk_error *err)
{
    dlk_status rc = check_sample(ds, tensor, nbytes, shape, ndim, err);
    if (rc)
        return rc;
    note_new(ds, tensor);
    return append_checked(ds, tensor, data, nbytes, shape, ndim, err);
}

dlk_status Dlk_append_sample(dlk_dataset *ds, size_t tensor, const void *data,
                             size_t nbytes, const int64_t *shape, int ndim,
                             dlk_error *err)
{
    dlk_status rc = check_sample(ds, tensor, nbytes, shape, ndim, err);
    if (rc)
        return rc;
    return append_checked(ds, tensor, data, nbytes, shape, ndim, err);
}

/* bool elements are stored as 0 or 1 (formats/dlk-v1.md 3.3), whatever
 * non-zero byte the caller holds for true, so that every reader (a query
 * comparing bytes among them) reads one value for true. */
static void bool_normalise(const dlk_dataset *ds, size_t tensor, uint8_t *p,
                           size_t n)
{
    if (ds->m.tensors[tensor].spec.dtype != DLK_BOOL)
        return;
    for (size_t i = 0; i < n; i++)
        p[i] = p[i] != 0;
}

/* A sample that check_sample accepted into the builder. */
static dlk_status append_checked(dlk_dataset *ds, size_t tensor,
                                 const void *data, size_t nbytes,
                                 const int64_t *shape, int ndim,
                                 dlk_error *err)
{
    dlk_status rc;
    Dlk_builder *b = &ds->builders[tensor];
    /* in parts: into the last one while it is small, else a new one */
    bool join = b->nsegs && b->segs[b->nsegs - 1].len + nbytes <= PART_JOIN;
    size_t parts = b->nsegs && !join ? 1 : 0;
    if ((rc = make_room(ds, tensor, nbytes, ndim, parts, err)))
        return rc;
    Dlk_buf *into = &b->raw;
    if (b->nsegs) { /* not sealed: join still holds */
        if (!join) {
            b->segs[b->nsegs] = Dlk_seal_recycled(ds);
            b->segs[b->nsegs++].len = 0;
        }
        into = &b->segs[b->nsegs - 1];
    } /* else after make_room: sealing empties the parts */
    if ((rc = Dlk_buf_append(into, data, nbytes, err)))
        return rc;
    if (!nbytes) /* a sample with a zero dimension: nothing was copied */
        return added(ds, tensor, data, 0, shape, ndim, err);
    uint8_t *stored = into->data + into->len - nbytes;
    bool_normalise(ds, tensor, stored, nbytes);
    return added(ds, tensor, stored, nbytes, shape, ndim, err);
}

dlk_status Dlk_append_take(dlk_dataset *ds, size_t tensor, Dlk_buf *data,
                           const int64_t *shape, int ndim, dlk_error *err)
{
    if (tensor >= ds->m.ntensors || data->fixed || data->len < DLK_TAKE_MIN ||
        ds->m.tensors[tensor].spec.codec != DLK_CODEC_NONE ||
        ds->builders[tensor].raw.len)
        return dlk_append(ds, tensor, data->data, data->len, shape, ndim,
                          err);
    dlk_status rc = check_sample(ds, tensor, data->len, shape, ndim, err);
    if (!rc)
        rc = make_room(ds, tensor, data->len, ndim, 1, err);
    if (rc)
        return rc;
    note_new(ds, tensor);
    Dlk_builder *b = &ds->builders[tensor];
    Dlk_buf taken = *data;
    *data = Dlk_seal_recycled(ds);
    bool_normalise(ds, tensor, taken.data, taken.len);
    b->segs[b->nsegs++] = taken;
    return added(ds, tensor, taken.data, taken.len, shape, ndim, err);
}

/* Seal every partly filled chunk into ds->m without publishing the head:
 * ingest calls it at its checkpoints, where it writes the chunk lists to
 * its own staging manifest (lib/ingest/stage.c). */
dlk_status Dlk_dataset_seal(dlk_dataset *ds, dlk_error *err)
{
    if (ds->read_only)
        return DLK_OK;
    for (size_t i = 0; i < ds->m.ntensors; i++) {
        dlk_status rc = seal(ds, i, err);
        if (rc)
            return rc;
    }
    dlk_status rc = Dlk_seal_wait(ds, err);
    /* the new chunks' small ones joined with the tail (an ingest
     * checkpoint, or each of many small appends, would otherwise leave
     * one behind each time) */
    for (size_t i = 0; i < ds->m.ntensors; i++) {
        Dlk_builder *b = &ds->builders[i];
        if (!rc && b->tail_seen)
            rc = Dlk_merge_tail(ds, i, b->new_from, NULL, err);
        b->tail_seen = false;
    }
    return rc;
}

dlk_status dlk_dataset_flush(dlk_dataset *ds, dlk_error *err)
{
    if (ds->read_only)
        return DLK_OK;
    dlk_status rc = Dlk_dataset_seal(ds, err);
    if (rc)
        return rc;
    return ds->dirty ? Dlk_write_head(ds, err) : DLK_OK;
}
