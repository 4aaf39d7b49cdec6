/* chunk.c - the chunk object: encode, and parse with every length, count
 * and offset checked against the object before it is used
 * (formats/dlk-v1.md, "Chunk objects"). */
#include "util/error.h"
#include "util/buf.h"
#include "util/bytes.h"
#include "util/hash.h"
#include "format/chunk.h"
#include "format/manifest.h"

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
 * (samples+1) u64 offsets then samples*ndim u32 dims; with PARTS, from
 * the next multiple of 8 on, the part table (part_bytes u32, nparts u32,
 * nparts u64 hashes).  Zero padding rounds it up to a multiple of 64
 * bytes, so that the payload starts 64-byte aligned in the object (and
 * in any buffer it is read into). */
#define INDEX_ALIGN 64u
#define PART_TABLE_HEAD 8u

static uint64_t pad_to_align(uint64_t n)
{
    return (n + INDEX_ALIGN - 1) / INDEX_ALIGN * INDEX_ALIGN;
}

static uint64_t pad8(uint64_t n)
{
    return (n + 7) / 8 * 8;
}

/* The layout's bytes (shape, or offsets and shapes); false on overflow. */
static bool layout_used(uint32_t samples, int ndim, bool variable,
                        uint64_t *out)
{
    if (!variable) {
        *out = 4u * (uint64_t)ndim;
        return true;
    }
    uint64_t dims, offs;
    return Dlk_mul_u64((uint64_t)samples * (uint64_t)ndim, 4, &dims) &&
           Dlk_mul_u64((uint64_t)samples + 1, 8, &offs) &&
           Dlk_add_u64(dims, offs, out);
}

/* The index's bytes before padding: the layout, then (parts) the table
 * of nparts hashes at pad8(layout).  False on overflow. */
static bool index_used(uint32_t samples, int ndim, bool variable,
                       bool parts, uint32_t nparts, uint64_t *out)
{
    if (!layout_used(samples, ndim, variable, out))
        return false;
    if (parts)
        *out = pad8(*out) + PART_TABLE_HEAD + 8 * (uint64_t)nparts;
    return *out <= UINT64_MAX - INDEX_ALIGN;
}

static bool index_size(uint32_t samples, int ndim, bool variable,
                       bool parts, uint32_t nparts, uint64_t *out)
{
    uint64_t used;
    if (!index_used(samples, ndim, variable, parts, nparts, &used))
        return false;
    *out = pad_to_align(used);
    return true;
}

uint32_t Dlk_parts_count(uint32_t samples, uint64_t raw_bytes,
                         uint32_t part_bytes)
{
    if (!part_bytes || !samples)
        return 0;
    uint64_t n = raw_bytes / part_bytes + (raw_bytes % part_bytes != 0);
    if (n < 1)
        n = 1;
    return n < samples ? (uint32_t)n : samples;
}

uint32_t Dlk_part_first(uint32_t p, uint32_t samples, uint32_t nparts)
{
    if (!nparts)
        return 0;
    return (uint32_t)((uint64_t)p * samples / nparts);
}

/* Bytes of one sample of the given dims, or false on overflow. */
static bool sample_size(dlk_dtype dt, int ndim, const uint32_t *dims,
                        uint64_t *out)
{
    uint64_t n = dlk_dtype_size(dt);
    for (int i = 0; i < ndim; i++)
        if (!Dlk_mul_u64(n, dims[i], &n))
            return false;
    *out = n;
    return true;
}

/* The raw offset of sample s of the chunk being encoded: from the
 * offsets already written to idx (variable), else s * sample_bytes. */
static uint64_t enc_offset(const Dlk_chunk_enc *in, const uint8_t *idx,
                           uint64_t sample_bytes, uint32_t s)
{
    return in->variable ? Dlk_get_le64(idx + 8 * (size_t)s)
                        : sample_bytes * s;
}

/* Write the part hashes of the payload (in->raw, or in->iov's pieces,
 * read once front to back) to tab, nparts LE u64 values. */
static dlk_status hash_parts(const Dlk_chunk_enc *in, const uint8_t *idx,
                             uint64_t sample_bytes, uint32_t nparts,
                             uint8_t *tab, dlk_error *err)
{
    if (in->raw) {
        const uint8_t *raw = in->raw;
        for (uint32_t p = 0; p < nparts; p++) {
            uint64_t a = enc_offset(in, idx, sample_bytes,
                                    Dlk_part_first(p, in->samples, nparts));
            uint64_t b = enc_offset(in, idx, sample_bytes,
                                    Dlk_part_first(p + 1, in->samples,
                                                   nparts));
            Dlk_put_le64(tab + 8 * (size_t)p,
                         Dlk_hash64(raw + a, (size_t)(b - a)));
        }
        return DLK_OK;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < in->niov; i++)
        total += in->iov[i].iov_len;
    if (total != in->raw_bytes)
        return Dlk_fail(err, DLK_EINTERNAL, "chunk to encode has %llu "
                        "payload bytes in pieces, not %zu",
                        (unsigned long long)total, in->raw_bytes);
    Dlk_hash64_stream *h = Dlk_hash64_stream_new();
    if (!h)
        return Dlk_oom(err);
    size_t seg = 0, pos = 0;
    for (uint32_t p = 0; p < nparts; p++) {
        uint64_t a = enc_offset(in, idx, sample_bytes,
                                Dlk_part_first(p, in->samples, nparts));
        uint64_t n = enc_offset(in, idx, sample_bytes,
                                Dlk_part_first(p + 1, in->samples, nparts)) -
                     a;
        Dlk_hash64_stream_reset(h);
        while (n) {
            while (pos == in->iov[seg].iov_len) {
                seg++;
                pos = 0;
            }
            size_t take = in->iov[seg].iov_len - pos;
            if (take > n)
                take = (size_t)n;
            Dlk_hash64_stream_update(h, (const uint8_t *)in->iov[seg].iov_base +
                                            pos, take);
            pos += take;
            n -= take;
        }
        Dlk_put_le64(tab + 8 * (size_t)p, Dlk_hash64_stream_digest(h));
    }
    Dlk_hash64_stream_free(h);
    return DLK_OK;
}

/* in's fields within the format's bounds and its payload there to
 * encode; the part count and the index's layout and padded bytes. */
static dlk_status check_enc(const Dlk_chunk_enc *in, bool head_only,
                            uint32_t *nparts, uint64_t *layout,
                            uint64_t *index_bytes, dlk_error *err)
{
    if (in->samples == 0 || in->samples > DLK_CHUNK_MAX_SAMPLES ||
        in->ndim < 0 || in->ndim > DLK_MAX_NDIM ||
        in->raw_bytes > DLK_CHUNK_MAX_RAW || !dlk_dtype_size(in->dtype))
        return Dlk_fail(err, DLK_EINVAL, "chunk to encode is out of bounds");
    bool zstd = in->codec == DLK_CODEC_ZSTD;
    bool parts = in->part_bytes != 0;
    if (parts && (zstd || in->part_bytes < DLK_PART_BYTES_MIN ||
                  in->part_bytes > DLK_PART_BYTES_MAX))
        return Dlk_fail(err, DLK_EINVAL, "chunk to encode: parts of %u bytes "
                        "(4096..2^30, codec none only)", in->part_bytes);
    *nparts = Dlk_parts_count(in->samples, in->raw_bytes, in->part_bytes);
    if (!layout_used(in->samples, in->ndim, in->variable, layout) ||
        !index_size(in->samples, in->ndim, in->variable, parts, *nparts,
                    index_bytes))
        return Dlk_fail(err, DLK_ELIMIT, "chunk index too large");
    if (!in->raw && in->raw_bytes && !(head_only && in->have_raw_hash))
        return Dlk_fail(err, DLK_EINTERNAL, "chunk to encode has no payload");
    if (!in->raw && in->raw_bytes && parts && !in->iov)
        return Dlk_fail(err, DLK_EINTERNAL, "chunk to encode has no payload "
                        "to cut into parts");
    return DLK_OK;
}

/* The index of a fixed shape: ndim u32 dims; with parts, the bytes of a
 * sample (the part hashes read the payload at its multiples). */
static dlk_status write_shape(const Dlk_chunk_enc *in, bool parts,
                              uint8_t *idx, uint64_t *sample_bytes,
                              dlk_error *err)
{
    uint32_t dims[DLK_MAX_NDIM];
    for (int d = 0; d < in->ndim; d++) {
        dims[d] = (uint32_t)in->shape[d];
        Dlk_put_le32(idx + 4 * d, dims[d]);
    }
    uint64_t total;
    if (parts && (!sample_size(in->dtype, in->ndim, dims, sample_bytes) ||
                  !Dlk_mul_u64(*sample_bytes, in->samples, &total) ||
                  total != in->raw_bytes))
        return Dlk_fail(err, DLK_EINTERNAL, "chunk payload size %zu does "
                        "not match its shape", in->raw_bytes);
    return DLK_OK;
}

/* The index of variable shapes: (samples+1) u64 offsets, then
 * samples*ndim u32 dims; the offsets must end at the payload's size. */
static dlk_status write_offsets(const Dlk_chunk_enc *in, uint8_t *idx,
                                dlk_error *err)
{
    uint8_t *p = idx + 8 * ((size_t)in->samples + 1);
    uint64_t n = (uint64_t)in->samples * (uint64_t)in->ndim;
    for (uint64_t i = 0; i < n; i++, p += 4)
        Dlk_put_le32(p, in->shapes[i]);
    uint64_t off = 0;
    p = idx;
    Dlk_put_le64(p, 0);
    p += 8;
    for (uint32_t s = 0; s < in->samples; s++, p += 8) {
        uint64_t sz;
        if (!sample_size(in->dtype, in->ndim,
                         in->shapes + (size_t)s * in->ndim, &sz) ||
            !Dlk_add_u64(off, sz, &off))
            return Dlk_fail(err, DLK_ELIMIT, "sample size overflows");
        Dlk_put_le64(p, off);
    }
    if (off != in->raw_bytes)
        return Dlk_fail(err, DLK_EINTERNAL, "chunk payload size %zu does "
                        "not match its shapes (%llu)", in->raw_bytes,
                        (unsigned long long)off);
    return DLK_OK;
}

/* The payload at `payload` (bound bytes of room): compressed, or the raw
 * bytes copied unless they stay where they are (head_only); its stored
 * size in *stored. */
static dlk_status write_payload(const Dlk_chunk_enc *in, bool head_only,
                                uint8_t *payload, size_t bound,
                                size_t *stored, dlk_error *err)
{
    if (in->codec == DLK_CODEC_ZSTD) {
        int level = in->level ? in->level : DLK_ZSTD_DEFAULT_LEVEL;
        *stored = ZSTD_compress(payload, bound, in->raw, in->raw_bytes, level);
        if (ZSTD_isError(*stored))
            return Dlk_fail(err, DLK_EINTERNAL, "zstd compression failed: %s",
                            ZSTD_getErrorName(*stored));
        return DLK_OK;
    }
    if (in->raw_bytes && !head_only)
        memcpy(payload, in->raw, in->raw_bytes);
    *stored = in->raw_bytes;
    return DLK_OK;
}

/* The 64-byte header, last: its hash covers the index written before. */
static void write_header(const Dlk_chunk_enc *in, bool parts, uint8_t *hdr,
                         uint64_t index_bytes, const uint8_t *payload,
                         size_t stored)
{
    const uint8_t *idx = hdr + DLK_CHUNK_HEADER_BYTES;
    memcpy(hdr, DLK_CHUNK_MAGIC, 4);
    Dlk_put_le16(hdr + OFF_VERSION, DLK_FORMAT_VERSION);
    hdr[OFF_DTYPE] = (uint8_t)in->dtype;
    hdr[OFF_CODEC] = (uint8_t)in->codec;
    hdr[OFF_NDIM] = (uint8_t)in->ndim;
    hdr[OFF_FLAGS] = (uint8_t)((in->variable ? DLK_CHUNK_FLAG_VARIABLE : 0) |
                               (parts ? DLK_CHUNK_FLAG_PARTS : 0));
    Dlk_put_le16(hdr + OFF_RESERVED, 0);
    Dlk_put_le32(hdr + OFF_SAMPLES, in->samples);
    Dlk_put_le64(hdr + OFF_INDEX_BYTES, index_bytes);
    Dlk_put_le64(hdr + OFF_STORED_BYTES, stored);
    Dlk_put_le64(hdr + OFF_RAW_BYTES, in->raw_bytes);
    uint64_t raw_hash = in->have_raw_hash ? in->raw_hash
                                          : Dlk_hash64(in->raw, in->raw_bytes);
    Dlk_put_le64(hdr + OFF_RAW_HASH, raw_hash);
    /* uncompressed, the stored payload is the raw one: hash it once */
    Dlk_put_le64(hdr + OFF_STORED_HASH, in->codec == DLK_CODEC_ZSTD
                                            ? Dlk_hash64(payload, stored)
                                            : raw_hash);
    Dlk_put_le64(hdr + OFF_HEADER_HASH,
                 Dlk_hash64_2(hdr, HASHED_HEADER_BYTES, idx, index_bytes));
}

/* Encode into out; with `head_only` an uncompressed payload is left
 * where it is (in->raw) and out gets the header and index alone. */
static dlk_status encode(const Dlk_chunk_enc *in, bool head_only,
                         Dlk_buf *out, dlk_error *err)
{
    bool zstd = in->codec == DLK_CODEC_ZSTD;
    bool parts = in->part_bytes != 0;
    uint32_t nparts = 0;
    uint64_t layout = 0, index_bytes = 0;
    head_only &= !zstd;
    dlk_status rc = check_enc(in, head_only, &nparts, &layout, &index_bytes,
                              err);
    if (rc)
        return rc;
    size_t bound = zstd ? ZSTD_compressBound(in->raw_bytes)
                        : head_only ? 0 : in->raw_bytes;
    out->len = 0;
    rc = Dlk_buf_reserve(out, DLK_CHUNK_HEADER_BYTES + (size_t)index_bytes +
                                  bound, err);
    if (rc)
        return rc;
    uint8_t *hdr = out->data;
    uint8_t *idx = hdr + DLK_CHUNK_HEADER_BYTES;
    uint8_t *payload = idx + index_bytes;
    memset(idx, 0, (size_t)index_bytes);

    uint64_t sample_bytes = 0;
    rc = in->variable ? write_offsets(in, idx, err)
                      : write_shape(in, parts, idx, &sample_bytes, err);
    if (rc)
        return rc;
    if (parts) {
        uint8_t *tab = idx + pad8(layout);
        Dlk_put_le32(tab, in->part_bytes);
        Dlk_put_le32(tab + 4, nparts);
        rc = hash_parts(in, idx, sample_bytes, nparts, tab + PART_TABLE_HEAD,
                        err);
        if (rc)
            return rc;
    }
    size_t stored;
    if ((rc = write_payload(in, head_only, payload, bound, &stored, err)))
        return rc;
    write_header(in, parts, hdr, index_bytes, payload, stored);
    out->len = DLK_CHUNK_HEADER_BYTES + (size_t)index_bytes +
               (head_only ? 0 : stored);
    return DLK_OK;
}

dlk_status Dlk_chunk_encode(const Dlk_chunk_enc *in, Dlk_buf *out,
                            dlk_error *err)
{
    return encode(in, false, out, err);
}

dlk_status Dlk_chunk_encode_head(const Dlk_chunk_enc *in, Dlk_buf *out,
                                 bool *payload_follows, dlk_error *err)
{
    *payload_follows = in->codec != DLK_CODEC_ZSTD;
    return encode(in, true, out, err);
}

#define BAD(...) Dlk_fail(err, DLK_ECORRUPT, __VA_ARGS__)

/* The header's fields into h, each checked on its own as it is read
 * (obj holds the 64 bytes). */
static dlk_status parse_fields(const uint8_t *obj, const char *name,
                               Dlk_chunk_header *h, dlk_error *err)
{
    if (memcmp(obj, DLK_CHUNK_MAGIC, 4) != 0)
        return BAD("chunk '%s': bad magic (not a dlk chunk)", name);
    h->version = Dlk_get_le16(obj + OFF_VERSION);
    if (h->version != DLK_FORMAT_VERSION)
        return Dlk_fail(err, DLK_EUNSUPPORTED, "chunk '%s': format version "
                        "%u, this dlk reads version %d", name, h->version,
                        DLK_FORMAT_VERSION);
    h->dtype = (dlk_dtype)obj[OFF_DTYPE];
    if (!dlk_dtype_name(h->dtype) || !dlk_dtype_size(h->dtype))
        return Dlk_fail(err, DLK_EUNSUPPORTED, "chunk '%s': unknown dtype "
                        "code %u", name, obj[OFF_DTYPE]);
    h->codec = (dlk_codec)obj[OFF_CODEC];
    if (!dlk_codec_name(h->codec))
        return Dlk_fail(err, DLK_EUNSUPPORTED, "chunk '%s': unknown codec "
                        "code %u", name, obj[OFF_CODEC]);
    h->ndim = obj[OFF_NDIM];
    if (h->ndim > DLK_MAX_NDIM)
        return BAD("chunk '%s': ndim %d over %d", name, h->ndim, DLK_MAX_NDIM);
    h->flags = obj[OFF_FLAGS];
    if (h->flags & ~(DLK_CHUNK_FLAG_VARIABLE | DLK_CHUNK_FLAG_PARTS))
        return BAD("chunk '%s': reserved flag bits set (0x%02x)", name,
                   h->flags);
    if ((h->flags & DLK_CHUNK_FLAG_VARIABLE) && h->ndim == 0)
        return BAD("chunk '%s': a scalar tensor cannot vary in shape", name);
    if ((h->flags & DLK_CHUNK_FLAG_PARTS) && h->codec != DLK_CODEC_NONE)
        return BAD("chunk '%s': a part table with codec %s (parts need codec "
                   "none)", name, dlk_codec_name(h->codec));
    if (Dlk_get_le16(obj + OFF_RESERVED) != 0)
        return BAD("chunk '%s': reserved header field is not zero", name);
    h->samples = Dlk_get_le32(obj + OFF_SAMPLES);
    if (h->samples == 0 || h->samples > DLK_CHUNK_MAX_SAMPLES)
        return BAD("chunk '%s': sample count %u out of range", name,
                   h->samples);
    h->index_bytes = Dlk_get_le64(obj + OFF_INDEX_BYTES);
    h->stored_bytes = Dlk_get_le64(obj + OFF_STORED_BYTES);
    h->raw_bytes = Dlk_get_le64(obj + OFF_RAW_BYTES);
    h->raw_hash = Dlk_get_le64(obj + OFF_RAW_HASH);
    h->stored_hash = Dlk_get_le64(obj + OFF_STORED_HASH);
    h->header_hash = Dlk_get_le64(obj + OFF_HEADER_HASH);
    return DLK_OK;
}

/* The sizes h claims against each other, the object (object_bytes) and
 * what was read of it (avail); the index's layout bytes in *layout. */
static dlk_status check_sizes(const Dlk_chunk_header *h, size_t avail,
                              uint64_t object_bytes, const char *name,
                              uint64_t *layout, dlk_error *err)
{
    bool variable = h->flags & DLK_CHUNK_FLAG_VARIABLE;
    bool parts = h->flags & DLK_CHUNK_FLAG_PARTS;
    uint64_t want_index, total;
    /* with PARTS the table's length is known only once its count has been
     * read, after header_hash: here, room for the table's head at least */
    bool index_ok = layout_used(h->samples, h->ndim, variable, layout) &&
                    index_size(h->samples, h->ndim, variable, parts, 0,
                               &want_index);
    if (!index_ok || (parts ? h->index_bytes < want_index
                            : h->index_bytes != want_index))
        return BAD("chunk '%s': index of %llu bytes, expected %s%llu", name,
                   (unsigned long long)h->index_bytes,
                   parts ? "at least " : "",
                   (unsigned long long)want_index);
    if (!Dlk_add_u64(DLK_CHUNK_HEADER_BYTES, h->index_bytes, &total) ||
        !Dlk_add_u64(total, h->stored_bytes, &total) || total != object_bytes)
        return BAD("chunk '%s': header claims %llu index + %llu payload "
                   "bytes, object has %llu", name,
                   (unsigned long long)h->index_bytes,
                   (unsigned long long)h->stored_bytes,
                   (unsigned long long)object_bytes);
    if (DLK_CHUNK_HEADER_BYTES + h->index_bytes > avail)
        return BAD("chunk '%s': %zu bytes read, its header and index take "
                   "%llu", name, avail,
                   (unsigned long long)(DLK_CHUNK_HEADER_BYTES +
                                        h->index_bytes));
    if (h->raw_bytes > DLK_CHUNK_MAX_RAW)
        return Dlk_fail(err, DLK_ELIMIT, "chunk '%s': raw payload of %llu "
                        "bytes over the limit of %llu", name,
                        (unsigned long long)h->raw_bytes,
                        (unsigned long long)DLK_CHUNK_MAX_RAW);
    if (h->codec == DLK_CODEC_NONE && (h->raw_bytes != h->stored_bytes ||
                                       h->raw_hash != h->stored_hash))
        return BAD("chunk '%s': uncompressed, but its raw and stored sizes "
                   "or checksums differ", name);
    return DLK_OK;
}

/* The part table at pad8(layout) of idx into h, its size and count
 * checked against the payload and the index; where the table ends in
 * *used. */
static dlk_status parse_part_table(Dlk_chunk_header *h, const uint8_t *idx,
                                   uint64_t layout, const char *name,
                                   uint64_t *used, dlk_error *err)
{
    bool variable = h->flags & DLK_CHUNK_FLAG_VARIABLE;
    uint64_t at = pad8(layout), want_index;
    for (uint64_t i = layout; i < at; i++)
        if (idx[i] != 0)
            return BAD("chunk '%s': bytes before the part table are not "
                       "zero", name);
    h->part_bytes = Dlk_get_le32(idx + at);
    h->nparts = Dlk_get_le32(idx + at + 4);
    h->part_table = at + PART_TABLE_HEAD;
    if (h->part_bytes < DLK_PART_BYTES_MIN ||
        h->part_bytes > DLK_PART_BYTES_MAX)
        return BAD("chunk '%s': part size %u out of range (4096..2^30)",
                   name, h->part_bytes);
    uint32_t want = Dlk_parts_count(h->samples, h->raw_bytes, h->part_bytes);
    if (h->nparts != want)
        return BAD("chunk '%s': %u parts, %u samples of %llu bytes in "
                   "parts of %u make %u", name, h->nparts, h->samples,
                   (unsigned long long)h->raw_bytes, h->part_bytes, want);
    index_size(h->samples, h->ndim, variable, true, h->nparts, &want_index);
    if (h->index_bytes != want_index)
        return BAD("chunk '%s': index of %llu bytes, its part table "
                   "makes %llu", name,
                   (unsigned long long)h->index_bytes,
                   (unsigned long long)want_index);
    *used = h->part_table + 8 * (uint64_t)h->nparts;
    return DLK_OK;
}

dlk_status Dlk_chunk_parse_head(const uint8_t *obj, size_t avail,
                                uint64_t object_bytes, const char *name,
                                Dlk_chunk_header *h, dlk_error *err)
{
    memset(h, 0, sizeof *h);
    if (avail < DLK_CHUNK_HEADER_BYTES || object_bytes < DLK_CHUNK_HEADER_BYTES)
        return BAD("chunk '%s': %llu bytes, shorter than its 64-byte header",
                   name, (unsigned long long)(avail < object_bytes
                                                  ? avail : object_bytes));
    uint64_t layout = 0;
    dlk_status rc = parse_fields(obj, name, h, err);
    if (!rc)
        rc = check_sizes(h, avail, object_bytes, name, &layout, err);
    if (rc)
        return rc;
    const uint8_t *idx = obj + DLK_CHUNK_HEADER_BYTES;
    uint64_t hh = Dlk_hash64_2(obj, HASHED_HEADER_BYTES, idx,
                               (size_t)h->index_bytes);
    if (hh != h->header_hash)
        return BAD("chunk '%s': header checksum mismatch", name);
    uint64_t used = layout;
    if ((h->flags & DLK_CHUNK_FLAG_PARTS) &&
        (rc = parse_part_table(h, idx, layout, name, &used, err)))
        return rc;
    for (uint64_t i = used; i < h->index_bytes; i++)
        if (idx[i] != 0)
            return BAD("chunk '%s': index padding is not zero", name);
    return DLK_OK;
}

dlk_status Dlk_chunk_parse_header(const uint8_t *obj, size_t len,
                                  const char *name, Dlk_chunk_header *h,
                                  dlk_error *err)
{
    return Dlk_chunk_parse_head(obj, len, len, name, h, err);
}

/* Parse the index into c (shape, or shapes and offsets). */
static dlk_status parse_index(struct dlk_chunk *c, const uint8_t *idx,
                              const char *name, dlk_error *err)
{
    const Dlk_chunk_header *h = &c->h;
    if (!(h->flags & DLK_CHUNK_FLAG_VARIABLE)) {
        uint32_t dims[DLK_MAX_NDIM];
        for (int d = 0; d < h->ndim; d++) {
            dims[d] = Dlk_get_le32(idx + 4 * d);
            c->shape[d] = dims[d];
        }
        uint64_t total;
        if (!sample_size(h->dtype, h->ndim, dims, &c->sample_bytes) ||
            !Dlk_mul_u64(c->sample_bytes, h->samples, &total) ||
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
        return Dlk_fail(err, DLK_ENOMEM, "chunk '%s': out of memory", name);
    for (size_t i = 0; i <= h->samples; i++)
        c->offsets[i] = Dlk_get_le64(idx + 8 * i);
    const uint8_t *sp = idx + 8 * ((size_t)h->samples + 1);
    for (size_t i = 0; i < ndims; i++)
        c->shapes[i] = Dlk_get_le32(sp + 4 * i);
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

uint64_t Dlk_chunk_sample_offset(const dlk_chunk *c, uint32_t s)
{
    if (s >= c->h.samples)
        return c->h.raw_bytes;
    return c->h.flags & DLK_CHUNK_FLAG_VARIABLE ? c->offsets[s]
                                                : c->sample_bytes * s;
}

static dlk_status part_mismatch(const struct dlk_chunk *c, uint32_t p,
                                const char *name, dlk_error *err)
{
    uint64_t a = Dlk_chunk_sample_offset(c, Dlk_part_first(p, c->h.samples,
                                                           c->nparts));
    uint64_t b = Dlk_chunk_sample_offset(c, Dlk_part_first(p + 1,
                                                           c->h.samples,
                                                           c->nparts));
    return BAD("chunk '%s': part %u of %u (payload bytes %llu..%llu) "
               "checksum mismatch", name, p, c->nparts,
               (unsigned long long)a, (unsigned long long)b);
}

dlk_status Dlk_chunk_part_span(const dlk_chunk *c, uint32_t p0, uint32_t p1,
                               uint64_t *off, uint64_t *len)
{
    if (!c->nparts || p0 > p1 || p1 > c->nparts)
        return DLK_EINVAL;
    uint64_t a = Dlk_chunk_sample_offset(c, Dlk_part_first(p0, c->h.samples,
                                                           c->nparts));
    uint64_t b = Dlk_chunk_sample_offset(c, Dlk_part_first(p1, c->h.samples,
                                                           c->nparts));
    *off = a;
    *len = b - a;
    return DLK_OK;
}

dlk_status Dlk_chunk_verify_parts(const dlk_chunk *c, uint32_t p0,
                                  uint32_t p1, const void *bytes,
                                  uint64_t len, const char *key,
                                  dlk_error *err)
{
    uint64_t off, span;
    if (Dlk_chunk_part_span(c, p0, p1, &off, &span))
        return Dlk_fail(err, DLK_EINVAL, "chunk '%s': no parts %u..%u (it "
                        "has %u)", key, p0, p1, c->nparts);
    if (len != span)
        return Dlk_fail(err, DLK_EINVAL, "chunk '%s': parts %u..%u take "
                        "%llu bytes, %llu given", key, p0, p1,
                        (unsigned long long)span, (unsigned long long)len);
    const uint8_t *base = bytes;
    for (uint32_t p = p0; p < p1; p++) {
        uint64_t a = Dlk_chunk_sample_offset(c, Dlk_part_first(
                         p, c->h.samples, c->nparts));
        uint64_t b = Dlk_chunk_sample_offset(c, Dlk_part_first(
                         p + 1, c->h.samples, c->nparts));
        if (Dlk_hash64(base + (a - off), (size_t)(b - a)) !=
            Dlk_get_le64(c->part_hash + 8 * (size_t)p))
            return part_mismatch(c, p, key, err);
    }
    return DLK_OK;
}

dlk_status Dlk_chunk_part_check(const dlk_chunk *c, uint32_t p, uint64_t hash,
                                const char *key, dlk_error *err)
{
    if (p >= c->nparts)
        return Dlk_fail(err, DLK_EINVAL, "chunk '%s': no part %u (it has %u)",
                        key, p, c->nparts);
    if (hash != Dlk_get_le64(c->part_hash + 8 * (size_t)p))
        return part_mismatch(c, p, key, err);
    return DLK_OK;
}

dlk_status Dlk_chunk_decode_head(struct dlk_chunk *c, const char *name,
                                 uint64_t object_bytes, dlk_error *err)
{
    const uint8_t *obj = c->object.data;
    c->part_bytes = c->nparts = 0;
    c->part_hash = NULL;
    dlk_status rc = Dlk_chunk_parse_head(obj, c->object.len, object_bytes,
                                         name, &c->h, err);
    if (rc)
        return rc;
    rc = parse_index(c, obj + DLK_CHUNK_HEADER_BYTES, name, err);
    if (rc)
        return rc;
    if (c->h.flags & DLK_CHUNK_FLAG_PARTS) {
        c->part_bytes = c->h.part_bytes;
        c->nparts = c->h.nparts;
        c->part_hash = obj + DLK_CHUNK_HEADER_BYTES + c->h.part_table;
    }
    return DLK_OK;
}

/* The first part of c whose hash does not match payload, or nparts. */
static uint32_t first_bad_part(const struct dlk_chunk *c,
                               const uint8_t *payload)
{
    for (uint32_t p = 0; p < c->nparts; p++) {
        uint64_t a = Dlk_chunk_sample_offset(c, Dlk_part_first(
                         p, c->h.samples, c->nparts));
        uint64_t b = Dlk_chunk_sample_offset(c, Dlk_part_first(
                         p + 1, c->h.samples, c->nparts));
        if (Dlk_hash64(payload + a, (size_t)(b - a)) !=
            Dlk_get_le64(c->part_hash + 8 * (size_t)p))
            return p;
    }
    return c->nparts;
}

dlk_status Dlk_chunk_decode(struct dlk_chunk *c, const char *name,
                            unsigned mode, void *dst, size_t cap,
                            dlk_error *err)
{
    bool verify_payload = mode & DLK_DECODE_VERIFY;
    const uint8_t *obj = c->object.data;
    dlk_status rc = Dlk_chunk_decode_head(c, name, c->object.len, err);
    if (rc)
        return rc;
    const uint8_t *stored = obj + DLK_CHUNK_HEADER_BYTES + c->h.index_bytes;
    if (mode & DLK_DECODE_HEADER_ONLY)
        return DLK_OK;
    /* parts (codec none: stored = raw) first, and a damaged payload is
     * reported by its part where the chunk has parts */
    if (verify_payload) {
        bool parts_done = mode & DLK_DECODE_VERIFY_PARTS;
        uint32_t bad = parts_done ? first_bad_part(c, stored) : c->nparts;
        if (bad == c->nparts &&
            Dlk_hash64(stored, (size_t)c->h.stored_bytes) != c->h.stored_hash) {
            if (!parts_done)
                bad = first_bad_part(c, stored);
            if (bad == c->nparts)
                return BAD("chunk '%s': payload checksum mismatch", name);
        }
        if (bad < c->nparts)
            return part_mismatch(c, bad, name, err);
    }
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
    if (content == ZSTD_CONTENTSIZE_UNKNOWN || content == ZSTD_CONTENTSIZE_ERROR)
        return BAD("chunk '%s': zstd frame has no content size (the header "
                   "says %llu bytes)", name, (unsigned long long)c->h.raw_bytes);
    if (content != c->h.raw_bytes)
        return BAD("chunk '%s': zstd frame holds %llu bytes, header says "
                   "%llu", name, content, (unsigned long long)c->h.raw_bytes);
    uint8_t *out;
    size_t raw = (size_t)c->h.raw_bytes;
    if (dst && cap >= raw) {
        out = dst;
    } else {
        c->owned.len = 0;
        if ((rc = Dlk_buf_reserve(&c->owned, raw ? raw : 1, err)))
            return rc;
        out = c->owned.data;
    }
    size_t got = ZSTD_decompress(out, raw, stored, frame);
    if (ZSTD_isError(got) || got != raw)
        return BAD("chunk '%s': zstd payload does not decompress: %s", name,
                   ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
    if (verify_payload && Dlk_hash64(out, raw) != c->h.raw_hash)
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
    Dlk_buf_free(&c->owned);
    Dlk_buf_free(&c->object);
    free(c);
}

uint64_t Dlk_chunk_expected_head(const Dlk_tensor *t, const Dlk_chunk_entry *e)
{
    if (e->samples == 0 || e->samples > DLK_CHUNK_MAX_SAMPLES ||
        e->raw_bytes > DLK_CHUNK_MAX_RAW)
        return 0;
    /* without the member, a chunk of codec none may or may not have parts */
    if (t->spec.codec == DLK_CODEC_NONE && !t->spec.part_bytes)
        return 0;
    bool variable = false;
    for (int d = 0; d < t->spec.ndim; d++)
        variable |= t->spec.shape[d] == DLK_DIM_VARIABLE;
    bool parts = t->spec.part_bytes != 0;
    uint64_t index_bytes;
    if (!index_size(e->samples, t->spec.ndim, variable, parts,
                    Dlk_parts_count(e->samples, e->raw_bytes,
                                    t->spec.part_bytes),
                    &index_bytes))
        return 0;
    return DLK_CHUNK_HEADER_BYTES + index_bytes;
}
