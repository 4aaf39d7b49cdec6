/*
 * chunk.h - the chunk object format (format/chunk.c); not installed.
 */
#ifndef DLK_FORMAT_CHUNK_H
#define DLK_FORMAT_CHUNK_H

#include "dlk.h"
#include "util/buf.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define DLK_CHUNK_MAGIC "DLKC"
#define DLK_CHUNK_HEADER_BYTES 64
/* Hard limits a reader enforces before allocating anything. */
#define DLK_CHUNK_MAX_RAW ((uint64_t)2 << 30)   /* 2 GiB raw payload */
#define DLK_CHUNK_MAX_SAMPLES (1u << 26)
#define DLK_CHUNK_FLAG_VARIABLE 0x01u
#define DLK_CHUNK_FLAG_PARTS 0x02u      /* the index ends with a part table */
/* A part table's nominal part size (formats/dlk-v1.md 3.2). */
#define DLK_PART_BYTES_MIN 4096u
#define DLK_PART_BYTES_MAX (1u << 30)

typedef struct Dlk_chunk_header {
    uint16_t version;
    dlk_dtype dtype;
    dlk_codec codec;
    int ndim;
    unsigned flags;
    uint32_t samples;
    uint64_t index_bytes;
    uint64_t stored_bytes;   /* payload as stored */
    uint64_t raw_bytes;      /* payload uncompressed */
    uint64_t raw_hash;       /* XXH3-64 of raw payload */
    uint64_t stored_hash;    /* XXH3-64 of stored payload */
    uint64_t header_hash;    /* XXH3-64 of header[0..56) + index */
    uint32_t part_bytes;     /* PARTS: the table's nominal part size; 0 */
    uint32_t nparts;         /* PARTS: parts in the table; 0 */
    uint64_t part_table;     /* PARTS: offset of the part hashes in the
                                index (nparts LE u64 values) */
} Dlk_chunk_header;

/* Parts of a chunk of `samples` samples and raw_bytes raw bytes, cut at
 * part_bytes: min(samples, max(1, ceil(raw_bytes / part_bytes))); 0 when
 * part_bytes or samples is 0. */
uint32_t Dlk_parts_count(uint32_t samples, uint64_t raw_bytes,
                         uint32_t part_bytes);
/* The first sample of part p of nparts: floor(p * samples / nparts), so
 * p == nparts gives samples; 0 when nparts is 0. */
uint32_t Dlk_part_first(uint32_t p, uint32_t samples, uint32_t nparts);

/* Encode samples into a chunk object.  raw: the payload, samples back to
 * back; shapes: samples*ndim dims (NULL for a fixed shape, then `shape`
 * gives it); out receives the whole object. */
typedef struct Dlk_chunk_enc {
    dlk_dtype dtype;
    dlk_codec codec;
    int level;
    int ndim;
    bool variable;
    const int64_t *shape;    /* fixed shape (ndim dims) when !variable */
    const uint32_t *shapes;  /* samples*ndim dims when variable */
    uint32_t samples;
    const void *raw;         /* NULL: the payload is elsewhere (encode_head
                                with raw_hash given, uncompressed only) */
    size_t raw_bytes;
    bool have_raw_hash;      /* raw_hash is XXH3-64 of the raw payload, */
    uint64_t raw_hash;       /* computed as it was gathered */
    uint32_t part_bytes;     /* non-zero: a part table cut at this size
                                (codec none only) */
    const struct iovec *iov; /* with raw NULL: the payload in pieces, */
    size_t niov;             /* read for the part hashes only */
} Dlk_chunk_enc;

dlk_status Dlk_chunk_encode(const Dlk_chunk_enc *in, Dlk_buf *out,
                            dlk_error *err);
/* The same without copying an uncompressed payload: out receives the
 * header and index, and *payload_follows says that the object is those
 * followed by in->raw (false: out is the whole object, compressed). */
dlk_status Dlk_chunk_encode_head(const Dlk_chunk_enc *in, Dlk_buf *out,
                                 bool *payload_follows, dlk_error *err);

/* Parse and check the header and index of a chunk object of `len` bytes.
 * `name` is used in messages.  Does not touch the payload. */
dlk_status Dlk_chunk_parse_header(const uint8_t *obj, size_t len,
                                  const char *name, Dlk_chunk_header *h,
                                  dlk_error *err);
/* The same from the first `avail` bytes of an object of object_bytes
 * bytes: avail must hold at least the header and index. */
dlk_status Dlk_chunk_parse_head(const uint8_t *obj, size_t avail,
                                uint64_t object_bytes, const char *name,
                                Dlk_chunk_header *h, dlk_error *err);

/* Decoded chunk (the public dlk_chunk). */
struct dlk_chunk {
    Dlk_chunk_header h;
    int64_t shape[DLK_MAX_NDIM];   /* fixed shape when !variable */
    uint32_t *shapes;              /* samples*ndim when variable */
    uint64_t *offsets;             /* samples+1 byte offsets when variable */
    uint64_t sample_bytes;         /* fixed: bytes per sample */
    const uint8_t *payload;        /* raw payload */
    Dlk_buf owned;                 /* memory owned by the chunk */
    Dlk_buf object;                /* the object as read (or its head) */
    uint32_t part_bytes, nparts;   /* the part table (PARTS); 0 without */
    const uint8_t *part_hash;      /* nparts LE u64 part hashes inside
                                      object's index; NULL without */
};

/* Decode a chunk object (already in c->object) into c: header, index,
 * and the raw payload (decompressed into dst/cap when given and big
 * enough, else into owned memory).  verify_payload: check stored hash
 * (and raw hash after decompression). */
enum {
    DLK_DECODE_VERIFY = 1,      /* check the payload checksums */
    DLK_DECODE_HEADER_ONLY = 2, /* header and index only: no payload */
    DLK_DECODE_VERIFY_PARTS = 4 /* with VERIFY: each part hash too */
};
dlk_status Dlk_chunk_decode(struct dlk_chunk *c, const char *name,
                            unsigned mode, void *dst, size_t cap,
                            dlk_error *err);
/* Header and index of c->object, which holds the first bytes (at least
 * the header and index) of an object of object_bytes bytes: every check
 * of the header and index, the payload not touched. */
dlk_status Dlk_chunk_decode_head(struct dlk_chunk *c, const char *name,
                                 uint64_t object_bytes, dlk_error *err);

/* Parts of a decoded chunk (header only will do).  The raw offset of
 * sample s (s == samples: raw_bytes). */
uint64_t Dlk_chunk_sample_offset(const dlk_chunk *c, uint32_t s);
/* The raw payload bytes [*off, *off + *len) of parts [p0, p1);
 * DLK_EINVAL unless p0 <= p1 <= nparts and the chunk has parts. */
dlk_status Dlk_chunk_part_span(const dlk_chunk *c, uint32_t p0, uint32_t p1,
                               uint64_t *off, uint64_t *len);
/* Check the part hashes of parts [p0, p1) against bytes, exactly the raw
 * payload bytes of those parts (len their span, else DLK_EINVAL):
 * DLK_ECORRUPT naming key and the first part that does not match. */
dlk_status Dlk_chunk_verify_parts(const dlk_chunk *c, uint32_t p0,
                                  uint32_t p1, const void *bytes,
                                  uint64_t len, const char *key,
                                  dlk_error *err);
/* Check part p's hash against `hash`, the XXH3 of its bytes found by the
 * caller (e.g. hashed piece by piece as they were read): DLK_ECORRUPT
 * naming key and the part as Dlk_chunk_verify_parts does. */
dlk_status Dlk_chunk_part_check(const dlk_chunk *c, uint32_t p, uint64_t hash,
                                const char *key, dlk_error *err);

#endif /* DLK_FORMAT_CHUNK_H */
