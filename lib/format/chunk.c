/* chunk.c - the chunk object: encode, and parse with every length, count
 * and offset checked against the object before it is used
 * (formats/dlk-v1.md, "Chunk objects"). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define OFF_VERSION 4
#define OFF_DTYPE 6
#define OFF_CODEC 7
#define OFF_NDIM 8
#define OFF_FLAGS 9
#define OFF_RESERVED 10
#define OFF_SAMPLES 12
#define OFF_INDEX_BYTES 16
#define OFF_STORED_BYTES 24
#define OFF_RAW_BYTES 32
#define OFF_RAW_HASH 40
#define OFF_STORED_HASH 48
#define OFF_HEADER_HASH 56
#define HASHED_HEADER_BYTES 56
#define DLK_ZSTD_DEFAULT_LEVEL 3

/* Index: for a fixed shape, ndim u32 dims; for variable shapes,
 * (samples+1) u64 offsets then samples*ndim u32 dims.  Zero padding
 * rounds it up to a multiple of 64 bytes, so that the payload starts
 * 64-byte aligned in the object (and in any buffer it is read into). */
#define INDEX_ALIGN 64u

static uint64_t pad_to_align(uint64_t n)
{
    return (n + INDEX_ALIGN - 1) / INDEX_ALIGN * INDEX_ALIGN;
}

/* The index's bytes before padding; false on overflow. */
static bool index_used(uint32_t samples, int ndim, bool variable,
                       uint64_t *out)
{
    if (!variable) {
        *out = 4u * (uint64_t)ndim;
        return true;
    }
    uint64_t dims, offs;
    return dlk_mul_u64((uint64_t)samples * (uint64_t)ndim, 4, &dims) &&
           dlk_mul_u64((uint64_t)samples + 1, 8, &offs) &&
           dlk_add_u64(dims, offs, out);
}

static bool index_size(uint32_t samples, int ndim, bool variable,
                       uint64_t *out)
{
    uint64_t used;
    if (!index_used(samples, ndim, variable, &used) ||
        used > UINT64_MAX - INDEX_ALIGN)
        return false;
    *out = pad_to_align(used);
    return true;
}

/* Bytes of one sample of the given dims, or false on overflow. */
static bool sample_size(dlk_dtype dt, int ndim, const uint32_t *dims,
                        uint64_t *out)
{
    uint64_t n = dlk_dtype_size(dt);
    for (int i = 0; i < ndim; i++)
        if (!dlk_mul_u64(n, dims[i], &n))
            return false;
    *out = n;
    return true;
}

/* Encode into out; with `head_only` an uncompressed payload is left
 * where it is (in->raw) and out gets the header and index alone. */
static dlk_status encode(const dlk_chunk_enc *in, bool head_only,
                         dlk_buf *out, dlk_error *err)
{
    if (in->samples == 0 || in->samples > DLK_CHUNK_MAX_SAMPLES ||
        in->ndim < 0 || in->ndim > DLK_MAX_NDIM ||
        in->raw_bytes > DLK_CHUNK_MAX_RAW || !dlk_dtype_size(in->dtype))
        return dlk_fail(err, DLK_EINVAL, "chunk to encode is out of bounds");
    uint64_t index_bytes;
    if (!index_size(in->samples, in->ndim, in->variable, &index_bytes))
        return dlk_fail(err, DLK_ELIMIT, "chunk index too large");

    bool zstd = in->codec == DLK_CODEC_ZSTD;
    head_only &= !zstd;
    if (!in->raw && in->raw_bytes && !(head_only && in->have_raw_hash))
        return dlk_fail(err, DLK_EINTERNAL, "chunk to encode has no payload");
    size_t bound = zstd ? ZSTD_compressBound(in->raw_bytes)
                        : head_only ? 0 : in->raw_bytes;
    out->len = 0;
    dlk_status rc = dlk_buf_reserve(out, DLK_CHUNK_HEADER_BYTES +
                                             (size_t)index_bytes + bound, err);
    if (rc)
        return rc;
    uint8_t *hdr = out->data;
    uint8_t *idx = hdr + DLK_CHUNK_HEADER_BYTES;
    uint8_t *payload = idx + index_bytes;
    memset(idx, 0, (size_t)index_bytes);

    /* index */
    if (!in->variable) {
        for (int d = 0; d < in->ndim; d++)
            dlk_put_le32(idx + 4 * d, (uint32_t)in->shape[d]);
    } else {
        uint8_t *p = idx + 8 * ((size_t)in->samples + 1);
        uint64_t n = (uint64_t)in->samples * (uint64_t)in->ndim;
        for (uint64_t i = 0; i < n; i++, p += 4)
            dlk_put_le32(p, in->shapes[i]);
        uint64_t off = 0;
        p = idx;
        dlk_put_le64(p, 0);
        p += 8;
        for (uint32_t s = 0; s < in->samples; s++, p += 8) {
            uint64_t sz;
            if (!sample_size(in->dtype, in->ndim,
                             in->shapes + (size_t)s * in->ndim, &sz) ||
                !dlk_add_u64(off, sz, &off))
                return dlk_fail(err, DLK_ELIMIT, "sample size overflows");
            dlk_put_le64(p, off);
        }
        if (off != in->raw_bytes)
            return dlk_fail(err, DLK_EINTERNAL, "chunk payload size %zu does "
                            "not match its shapes (%llu)", in->raw_bytes,
                            (unsigned long long)off);
    }

    /* payload */
    size_t stored;
    if (in->codec == DLK_CODEC_ZSTD) {
        int level = in->level ? in->level : DLK_ZSTD_DEFAULT_LEVEL;
        stored = ZSTD_compress(payload, bound, in->raw, in->raw_bytes, level);
        if (ZSTD_isError(stored))
            return dlk_fail(err, DLK_EINTERNAL, "zstd compression failed: %s",
                            ZSTD_getErrorName(stored));
    } else {
        if (in->raw_bytes && !head_only)
            memcpy(payload, in->raw, in->raw_bytes);
        stored = in->raw_bytes;
    }

    memcpy(hdr, DLK_CHUNK_MAGIC, 4);
    dlk_put_le16(hdr + OFF_VERSION, DLK_FORMAT_VERSION);
    hdr[OFF_DTYPE] = (uint8_t)in->dtype;
    hdr[OFF_CODEC] = (uint8_t)in->codec;
    hdr[OFF_NDIM] = (uint8_t)in->ndim;
    hdr[OFF_FLAGS] = in->variable ? DLK_CHUNK_FLAG_VARIABLE : 0;
    dlk_put_le16(hdr + OFF_RESERVED, 0);
    dlk_put_le32(hdr + OFF_SAMPLES, in->samples);
    dlk_put_le64(hdr + OFF_INDEX_BYTES, index_bytes);
    dlk_put_le64(hdr + OFF_STORED_BYTES, stored);
    dlk_put_le64(hdr + OFF_RAW_BYTES, in->raw_bytes);
    uint64_t raw_hash = in->have_raw_hash ? in->raw_hash
                                          : dlk_hash64(in->raw, in->raw_bytes);
    dlk_put_le64(hdr + OFF_RAW_HASH, raw_hash);
    /* uncompressed, the stored payload is the raw one: hash it once */
    dlk_put_le64(hdr + OFF_STORED_HASH, in->codec == DLK_CODEC_ZSTD
                                            ? dlk_hash64(payload, stored)
                                            : raw_hash);
    dlk_put_le64(hdr + OFF_HEADER_HASH,
                 dlk_hash64_2(hdr, HASHED_HEADER_BYTES, idx, index_bytes));
    out->len = DLK_CHUNK_HEADER_BYTES + (size_t)index_bytes +
               (head_only ? 0 : stored);
    return DLK_OK;
}

dlk_status dlk_chunk_encode(const dlk_chunk_enc *in, dlk_buf *out,
                            dlk_error *err)
{
    return encode(in, false, out, err);
}

dlk_status dlk_chunk_encode_head(const dlk_chunk_enc *in, dlk_buf *out,
                                 bool *payload_follows, dlk_error *err)
{
    *payload_follows = in->codec != DLK_CODEC_ZSTD;
    return encode(in, true, out, err);
}

#define BAD(...) dlk_fail(err, DLK_ECORRUPT, __VA_ARGS__)

dlk_status dlk_chunk_parse_header(const uint8_t *obj, size_t len,
                                  const char *name, dlk_chunk_header *h,
                                  dlk_error *err)
{
    if (len < DLK_CHUNK_HEADER_BYTES)
        return BAD("chunk '%s': %zu bytes, shorter than its 64-byte header",
                   name, len);
    if (memcmp(obj, DLK_CHUNK_MAGIC, 4) != 0)
        return BAD("chunk '%s': bad magic (not a dlk chunk)", name);
    h->version = dlk_get_le16(obj + OFF_VERSION);
    if (h->version != DLK_FORMAT_VERSION)
        return dlk_fail(err, DLK_EUNSUPPORTED, "chunk '%s': format version "
                        "%u, this dlk reads version %d", name, h->version,
                        DLK_FORMAT_VERSION);
    h->dtype = (dlk_dtype)obj[OFF_DTYPE];
    if (!dlk_dtype_name(h->dtype) || !dlk_dtype_size(h->dtype))
        return dlk_fail(err, DLK_EUNSUPPORTED, "chunk '%s': unknown dtype "
                        "code %u", name, obj[OFF_DTYPE]);
    h->codec = (dlk_codec)obj[OFF_CODEC];
    if (!dlk_codec_name(h->codec))
        return dlk_fail(err, DLK_EUNSUPPORTED, "chunk '%s': unknown codec "
                        "code %u", name, obj[OFF_CODEC]);
    h->ndim = obj[OFF_NDIM];
    if (h->ndim > DLK_MAX_NDIM)
        return BAD("chunk '%s': ndim %d over %d", name, h->ndim, DLK_MAX_NDIM);
    h->flags = obj[OFF_FLAGS];
    if (h->flags & ~DLK_CHUNK_FLAG_VARIABLE)
        return BAD("chunk '%s': reserved flag bits set (0x%02x)", name,
                   h->flags);
    if ((h->flags & DLK_CHUNK_FLAG_VARIABLE) && h->ndim == 0)
        return BAD("chunk '%s': a scalar tensor cannot vary in shape", name);
    if (dlk_get_le16(obj + OFF_RESERVED) != 0)
        return BAD("chunk '%s': reserved header field is not zero", name);
    h->samples = dlk_get_le32(obj + OFF_SAMPLES);
    if (h->samples == 0 || h->samples > DLK_CHUNK_MAX_SAMPLES)
        return BAD("chunk '%s': sample count %u out of range", name,
                   h->samples);
    h->index_bytes = dlk_get_le64(obj + OFF_INDEX_BYTES);
    h->stored_bytes = dlk_get_le64(obj + OFF_STORED_BYTES);
    h->raw_bytes = dlk_get_le64(obj + OFF_RAW_BYTES);
    h->raw_hash = dlk_get_le64(obj + OFF_RAW_HASH);
    h->stored_hash = dlk_get_le64(obj + OFF_STORED_HASH);
    h->header_hash = dlk_get_le64(obj + OFF_HEADER_HASH);

    bool variable = h->flags & DLK_CHUNK_FLAG_VARIABLE;
    uint64_t want_index, total;
    if (!index_size(h->samples, h->ndim, variable, &want_index) ||
        h->index_bytes != want_index)
        return BAD("chunk '%s': index of %llu bytes, expected %llu", name,
                   (unsigned long long)h->index_bytes,
                   (unsigned long long)want_index);
    if (!dlk_add_u64(DLK_CHUNK_HEADER_BYTES, h->index_bytes, &total) ||
        !dlk_add_u64(total, h->stored_bytes, &total) || total != len)
        return BAD("chunk '%s': header claims %llu index + %llu payload "
                   "bytes, object has %zu", name,
                   (unsigned long long)h->index_bytes,
                   (unsigned long long)h->stored_bytes, len);
    if (h->raw_bytes > DLK_CHUNK_MAX_RAW)
        return dlk_fail(err, DLK_ELIMIT, "chunk '%s': raw payload of %llu "
                        "bytes over the limit of %llu", name,
                        (unsigned long long)h->raw_bytes,
                        (unsigned long long)DLK_CHUNK_MAX_RAW);
    if (h->codec == DLK_CODEC_NONE && (h->raw_bytes != h->stored_bytes ||
                                       h->raw_hash != h->stored_hash))
        return BAD("chunk '%s': uncompressed, but its raw and stored sizes "
                   "or checksums differ", name);
    uint64_t hh = dlk_hash64_2(obj, HASHED_HEADER_BYTES,
                               obj + DLK_CHUNK_HEADER_BYTES,
                               (size_t)h->index_bytes);
    if (hh != h->header_hash)
        return BAD("chunk '%s': header checksum mismatch", name);
    uint64_t used = 0;
    index_used(h->samples, h->ndim, variable, &used);
    for (uint64_t i = used; i < h->index_bytes; i++)
        if (obj[DLK_CHUNK_HEADER_BYTES + i] != 0)
            return BAD("chunk '%s': index padding is not zero", name);
    return DLK_OK;
}

/* Parse the index into c (shape, or shapes and offsets). */
static dlk_status parse_index(struct dlk_chunk *c, const uint8_t *idx,
                              const char *name, dlk_error *err)
{
    const dlk_chunk_header *h = &c->h;
    if (!(h->flags & DLK_CHUNK_FLAG_VARIABLE)) {
        uint32_t dims[DLK_MAX_NDIM];
        for (int d = 0; d < h->ndim; d++) {
            dims[d] = dlk_get_le32(idx + 4 * d);
            c->shape[d] = dims[d];
        }
        uint64_t total;
        if (!sample_size(h->dtype, h->ndim, dims, &c->sample_bytes) ||
            !dlk_mul_u64(c->sample_bytes, h->samples, &total) ||
            total != h->raw_bytes)
            return BAD("chunk '%s': %u samples of its shape do not make its "
                       "%llu raw bytes", name, h->samples,
                       (unsigned long long)h->raw_bytes);
        return DLK_OK;
    }
    /* index_bytes was checked against the object length: these sizes are
     * bounded by bytes that really exist. */
    size_t ndims = (size_t)h->samples * (size_t)h->ndim;
    c->shapes = malloc((ndims ? ndims : 1) * sizeof *c->shapes);
    c->offsets = malloc(((size_t)h->samples + 1) * sizeof *c->offsets);
    if (!c->shapes || !c->offsets)
        return dlk_fail(err, DLK_ENOMEM, "chunk '%s': out of memory", name);
    for (size_t i = 0; i <= h->samples; i++)
        c->offsets[i] = dlk_get_le64(idx + 8 * i);
    const uint8_t *sp = idx + 8 * ((size_t)h->samples + 1);
    for (size_t i = 0; i < ndims; i++)
        c->shapes[i] = dlk_get_le32(sp + 4 * i);
    if (c->offsets[0] != 0)
        return BAD("chunk '%s': first sample offset is not 0", name);
    for (uint32_t s = 0; s < h->samples; s++) {
        uint64_t sz;
        if (!sample_size(h->dtype, h->ndim, c->shapes + (size_t)s * h->ndim,
                         &sz) || c->offsets[s + 1] < c->offsets[s] ||
            c->offsets[s + 1] - c->offsets[s] != sz)
            return BAD("chunk '%s': sample %u's offset does not match its "
                       "shape", name, s);
    }
    if (c->offsets[h->samples] != h->raw_bytes)
        return BAD("chunk '%s': sample offsets end at %llu, payload has %llu "
                   "bytes", name,
                   (unsigned long long)c->offsets[h->samples],
                   (unsigned long long)h->raw_bytes);
    return DLK_OK;
}

dlk_status dlk_chunk_decode(struct dlk_chunk *c, const char *name,
                            unsigned mode, void *dst, size_t cap,
                            dlk_error *err)
{
    bool verify_payload = mode & DLK_DECODE_VERIFY;
    const uint8_t *obj = c->object.data;
    dlk_status rc = dlk_chunk_parse_header(obj, c->object.len, name, &c->h,
                                           err);
    if (rc)
        return rc;
    rc = parse_index(c, obj + DLK_CHUNK_HEADER_BYTES, name, err);
    if (rc)
        return rc;
    const uint8_t *stored = obj + DLK_CHUNK_HEADER_BYTES + c->h.index_bytes;
    if (mode & DLK_DECODE_HEADER_ONLY)
        return DLK_OK;
    if (verify_payload &&
        dlk_hash64(stored, (size_t)c->h.stored_bytes) != c->h.stored_hash)
        return BAD("chunk '%s': payload checksum mismatch", name);
    if (c->h.codec == DLK_CODEC_NONE) {
        c->payload = stored;
        return DLK_OK;
    }
    /* zstd: one frame whose content size is the raw size */
    size_t frame = ZSTD_findFrameCompressedSize(stored, (size_t)c->h.stored_bytes);
    if (ZSTD_isError(frame) || frame != c->h.stored_bytes)
        return BAD("chunk '%s': payload is not one zstd frame of %llu bytes",
                   name, (unsigned long long)c->h.stored_bytes);
    unsigned long long content = ZSTD_getFrameContentSize(stored, frame);
    if (content != c->h.raw_bytes)
        return BAD("chunk '%s': zstd frame holds %llu bytes, header says "
                   "%llu", name, content, (unsigned long long)c->h.raw_bytes);
    uint8_t *out;
    size_t raw = (size_t)c->h.raw_bytes;
    if (dst && cap >= raw) {
        out = dst;
    } else {
        c->owned.len = 0;
        if ((rc = dlk_buf_reserve(&c->owned, raw ? raw : 1, err)))
            return rc;
        out = c->owned.data;
    }
    size_t got = ZSTD_decompress(out, raw, stored, frame);
    if (ZSTD_isError(got) || got != raw)
        return BAD("chunk '%s': zstd payload does not decompress: %s", name,
                   ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
    if (verify_payload && dlk_hash64(out, raw) != c->h.raw_hash)
        return BAD("chunk '%s': raw payload checksum mismatch", name);
    c->payload = out;
    return DLK_OK;
}

const void *dlk_chunk_payload(const dlk_chunk *c, size_t *nbytes)
{
    if (nbytes)
        *nbytes = (size_t)c->h.raw_bytes;
    return c->payload;
}

uint32_t dlk_chunk_samples(const dlk_chunk *c)
{
    return c->h.samples;
}

const void *dlk_chunk_sample(const dlk_chunk *c, uint32_t i, size_t *nbytes,
                             int64_t *shape)
{
    if (i >= c->h.samples)
        return NULL;
    uint64_t off, n;
    if (c->h.flags & DLK_CHUNK_FLAG_VARIABLE) {
        off = c->offsets[i];
        n = c->offsets[i + 1] - off;
        if (shape)
            for (int d = 0; d < c->h.ndim; d++)
                shape[d] = c->shapes[(size_t)i * c->h.ndim + d];
    } else {
        off = c->sample_bytes * i;
        n = c->sample_bytes;
        if (shape)
            memcpy(shape, c->shape, sizeof c->shape);
    }
    if (nbytes)
        *nbytes = (size_t)n;
    return c->payload + off;
}

void dlk_chunk_free(dlk_chunk *c)
{
    if (!c)
        return;
    free(c->shapes);
    free(c->offsets);
    dlk_buf_free(&c->owned);
    dlk_buf_free(&c->object);
    free(c);
}
