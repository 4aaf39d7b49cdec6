/* test_chunk.c - chunk objects: round trips of every dtype, fixed and
 * variable shapes, codecs none and zstd; hand-made hostile objects, each
 * a clean DLK_ECORRUPT / DLK_EUNSUPPORTED / DLK_ELIMIT naming the chunk;
 * and a replay of every input under tests/corrupt/fuzz_chunk/. */
#include "util/buf.h"
#include "util/bytes.h"
#include "util/hash.h"
#include "format/chunk.h"
#include "unit.h"
#include "util/xxh3_blocks.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>
/* XXH3 as compiled here, for the baseline target: the reference that
 * the library's (maybe AVX2, lib/util/hash_avx2.c) XXH3 must equal */
#define XXH_INLINE_ALL
#include <xxhash.h>

#define NAME "chunks/t/bad"

/* header field offsets (formats/dlk-v1.md) */
enum {
    O_VERSION = 4, O_DTYPE = 6, O_CODEC = 7, O_NDIM = 8, O_FLAGS = 9,
    O_RESERVED = 10, O_SAMPLES = 12, O_INDEX = 16, O_STORED = 24,
    O_RAW = 32, O_RAW_HASH = 40, O_STORED_HASH = 48, O_HEADER_HASH = 56
};

/* An object under test: a malloc'd copy we may damage. */
typedef struct obj {
    uint8_t *p;
    size_t len;
} obj;

static obj encode(dlk_dtype dt, dlk_codec codec, int ndim,
                  const int64_t *shape, const uint32_t *shapes,
                  uint32_t samples, uint8_t **raw_out, size_t *raw_len)
{
    size_t es = dlk_dtype_size(dt), raw = 0;
    for (uint32_t s = 0; s < samples; s++) {
        size_t n = es;
        for (int d = 0; d < ndim; d++)
            n *= shapes ? shapes[(size_t)s * ndim + d] : (size_t)shape[d];
        raw += n;
    }
    uint8_t *data = malloc(raw ? raw : 1);
    for (size_t i = 0; i < raw; i++)
        data[i] = (uint8_t)(i * 31 + (i >> 3));
    Dlk_chunk_enc e = {
        .dtype = dt, .codec = codec, .ndim = ndim, .variable = shapes != NULL,
        .shape = shape, .shapes = shapes, .samples = samples, .raw = data,
        .raw_bytes = raw,
    };
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_error err = {0};
    obj o = {NULL, 0};
    if (Dlk_chunk_encode(&e, &b, &err) == DLK_OK) {
        o.p = malloc(b.len);
        memcpy(o.p, b.data, b.len);
        o.len = b.len;
    } else {
        printf("# encode failed: %s\n", err.msg);
    }
    Dlk_buf_free(&b);
    if (raw_out) {
        *raw_out = data;
        *raw_len = raw;
    } else {
        free(data);
    }
    return o;
}

/* A chunk holding an exact-size copy of p[0..len). */
static struct dlk_chunk *load(const uint8_t *p, size_t len)
{
    struct dlk_chunk *c = calloc(1, sizeof *c);
    c->object.data = malloc(len ? len : 1);
    if (len)
        memcpy(c->object.data, p, len);
    c->object.len = c->object.cap = len;
    return c;
}

static dlk_error last;

/* Decode and free; the status, the error in `last`. */
static dlk_status dec(const uint8_t *p, size_t len, unsigned mode)
{
    struct dlk_chunk *c = load(p, len);
    memset(&last, 0, sizeof last);
    dlk_status rc = Dlk_chunk_decode(c, NAME, mode, NULL, 0, &last);
    dlk_chunk_free(c);
    return rc;
}

/* The error is `code`, and its message names the chunk. */
static bool fails_with(const obj *o, size_t len, unsigned mode,
                       dlk_status code)
{
    dlk_status rc = dec(o->p, len, mode);
    if (rc != code || last.code != code || !strstr(last.msg, NAME)) {
        printf("# got status %d (%s), want %d\n", rc, last.msg, code);
        return false;
    }
    return true;
}
#define CORRUPT(o, mode) fails_with(&(o), (o).len, mode, DLK_ECORRUPT)

/* Recompute the header checksum after a change, so that the check under
 * test (not the checksum) is what must refuse the object. */
static void reseal(obj *o)
{
    uint64_t ib = Dlk_get_le64(o->p + O_INDEX);
    if (ib > o->len - DLK_CHUNK_HEADER_BYTES)
        return;
    Dlk_put_le64(o->p + O_HEADER_HASH,
                 Dlk_hash64_2(o->p, 56, o->p + DLK_CHUNK_HEADER_BYTES,
                              (size_t)ib));
}

static obj dup(const obj *o)
{
    obj c = {malloc(o->len), o->len};
    memcpy(c.p, o->p, o->len);
    return c;
}

/* Where the index of o holds the little-endian values v[0..n) of `width`
 * bytes each, so that tests need not hard-code the index layout; 0 when
 * absent. */
static size_t find_seq(const obj *o, int width, const uint64_t *v, size_t n)
{
    size_t end = DLK_CHUNK_HEADER_BYTES + (size_t)Dlk_get_le64(o->p + O_INDEX);
    for (size_t at = DLK_CHUNK_HEADER_BYTES; at + n * width <= end; at++) {
        size_t i = 0;
        for (; i < n; i++) {
            const uint8_t *q = o->p + at + i * width;
            uint64_t x = width == 4 ? Dlk_get_le32(q) : Dlk_get_le64(q);
            if (x != v[i])
                break;
        }
        if (i == n)
            return at;
    }
    return 0;
}

/* Status is one of two codes, and the message names the chunk. */
static bool fails_either(const obj *o, unsigned mode, dlk_status a,
                         dlk_status b)
{
    dlk_status rc = dec(o->p, o->len, mode);
    if ((rc != a && rc != b) || last.code != rc || !strstr(last.msg, NAME)) {
        printf("# got status %d (%s), want %d or %d\n", rc, last.msg, a, b);
        return false;
    }
    return true;
}

/* ---- round trips --------------------------------------------------- */

static void round_trip(dlk_dtype dt, dlk_codec codec, bool variable)
{
    char name[96];
    snprintf(name, sizeof name, "round trip %s %s %s", dlk_dtype_name(dt),
             variable ? "variable" : "fixed", dlk_codec_name(codec));
    int64_t shape[2] = {3, 5};
    uint32_t shapes[8] = {1, 5, 4, 5, 0, 5, 2, 5};   /* ?x5, 4 samples */
    uint8_t *raw;
    size_t raw_len;
    obj o = encode(dt, codec, 2, shape, variable ? shapes : NULL, 4, &raw,
                   &raw_len);
    bool ok = o.p != NULL;
    struct dlk_chunk *c = ok ? load(o.p, o.len) : NULL;
    dlk_error err = {0};
    ok = ok && Dlk_chunk_decode(c, NAME, DLK_DECODE_VERIFY, NULL, 0,
                                &err) == DLK_OK;
    if (!ok)
        printf("# %s\n", err.msg);
    size_t n = 0;
    ok = ok && dlk_chunk_samples(c) == 4 &&
         dlk_chunk_payload(c, &n) != NULL && n == raw_len &&
         memcmp(dlk_chunk_payload(c, NULL), raw, raw_len) == 0 &&
         c->h.dtype == dt && c->h.codec == codec;
    size_t off = 0, es = dlk_dtype_size(dt);
    for (uint32_t i = 0; ok && i < 4; i++) {
        int64_t sh[DLK_MAX_NDIM];
        size_t nb;
        const uint8_t *s = dlk_chunk_sample(c, i, &nb, sh);
        int64_t d0 = variable ? shapes[2 * i] : 3;
        ok = s == c->payload + off && sh[0] == d0 && sh[1] == 5 &&
             nb == (size_t)d0 * 5 * es;
        off += nb;
    }
    ok = ok && off == raw_len && dlk_chunk_sample(c, 4, NULL, NULL) == NULL;
    UNIT_CHECK(name, ok);
    dlk_chunk_free(c);
    free(o.p);
    free(raw);
}

static void round_trips(void)
{
    for (int dt = DLK_U8; dt <= DLK_BOOL; dt++)
        for (int v = 0; v < 2; v++) {
            round_trip((dlk_dtype)dt, DLK_CODEC_NONE, v);
            round_trip((dlk_dtype)dt, DLK_CODEC_ZSTD, v);
        }

    /* scalars, zero-sized samples, one sample */
    obj o = encode(DLK_I64, DLK_CODEC_ZSTD, 0, NULL, NULL, 7, NULL, NULL);
    UNIT_CHECK("round trip scalar i64 zstd",
               o.p && dec(o.p, o.len, DLK_DECODE_VERIFY) == DLK_OK);
    free(o.p);
    int64_t zero[2] = {0, 4};
    o = encode(DLK_F32, DLK_CODEC_NONE, 2, zero, NULL, 3, NULL, NULL);
    UNIT_CHECK("round trip zero-sized samples",
               o.p && dec(o.p, o.len, DLK_DECODE_VERIFY) == DLK_OK);
    free(o.p);
    uint32_t z[3] = {0, 0, 0};
    o = encode(DLK_U8, DLK_CODEC_ZSTD, 1, NULL, z, 3, NULL, NULL);
    UNIT_CHECK("round trip variable, all samples empty, zstd",
               o.p && dec(o.p, o.len, DLK_DECODE_VERIFY) == DLK_OK);
    free(o.p);

    /* decoding into a caller buffer: used when big enough, else owned */
    int64_t sh[1] = {1000};
    uint8_t *raw;
    size_t raw_len;
    o = encode(DLK_U16, DLK_CODEC_ZSTD, 1, sh, NULL, 8, &raw, &raw_len);
    uint8_t *dst = malloc(raw_len);
    struct dlk_chunk *c = load(o.p, o.len);
    dlk_status rc = Dlk_chunk_decode(c, NAME, DLK_DECODE_VERIFY, dst, raw_len,
                                     NULL);
    UNIT_CHECK("zstd decodes into a big enough caller buffer",
               rc == DLK_OK && c->payload == dst &&
               memcmp(dst, raw, raw_len) == 0);
    dlk_chunk_free(c);
    c = load(o.p, o.len);
    rc = Dlk_chunk_decode(c, NAME, DLK_DECODE_VERIFY, dst, raw_len - 1, NULL);
    UNIT_CHECK("zstd decodes into owned memory when the buffer is small",
               rc == DLK_OK && c->payload != dst &&
               memcmp(c->payload, raw, raw_len) == 0);
    dlk_chunk_free(c);
    free(dst);
    free(raw);
    free(o.p);
}

/* ---- hostile objects ----------------------------------------------- */

static void bad_headers(void)
{
    int64_t shape[2] = {4, 6};
    obj good = encode(DLK_I32, DLK_CODEC_NONE, 2, shape, NULL, 5, NULL, NULL);
    obj o;
    UNIT_CHECK("base chunk decodes", dec(good.p, good.len, 1) == DLK_OK);
    size_t index_end = DLK_CHUNK_HEADER_BYTES +
                       (size_t)Dlk_get_le64(good.p + O_INDEX);

    o = dup(&good);
    o.p[O_HEADER_HASH + 3] ^= 0x01;
    UNIT_CHECK("flipped header checksum byte: corrupt",
               CORRUPT(o, 0) && strstr(last.msg, "header checksum"));
    free(o.p);
    obj gz = encode(DLK_I32, DLK_CODEC_ZSTD, 2, shape, NULL, 5, NULL, NULL);
    o = dup(&gz);
    o.p[O_RAW_HASH] ^= 0x01;
    UNIT_CHECK("flipped header byte (raw hash, zstd): corrupt (checksum)",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY) &&
               strstr(last.msg, "header checksum"));
    free(o.p);
    o = dup(&gz);
    Dlk_put_le16(o.p + O_SAMPLES + 2, 0x0100);   /* samples += 2^24 */
    UNIT_CHECK("flipped sample count byte: corrupt", CORRUPT(o, 0));
    free(o.p);
    free(gz.p);
    o = dup(&good);
    o.p[O_STORED_HASH] ^= 0x01;
    reseal(&o);
    UNIT_CHECK("codec none with stored hash != raw hash: corrupt",
               CORRUPT(o, 0));
    free(o.p);
    /* index padding (if the layout has any) must be zero */
    if (index_end > DLK_CHUNK_HEADER_BYTES + 8) {
        o = dup(&good);
        o.p[index_end - 1] = 1;
        reseal(&o);
        UNIT_CHECK("non-zero index padding: corrupt", CORRUPT(o, 0));
        free(o.p);
    } else {
        UNIT_SKIP("non-zero index padding: corrupt", "index not padded");
    }

    o = dup(&good);
    o.p[DLK_CHUNK_HEADER_BYTES + 1] ^= 0x40;
    UNIT_CHECK("flipped index byte: corrupt (checksum)",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY) &&
               strstr(last.msg, "header checksum"));
    free(o.p);

    o = dup(&good);
    o.p[good.len - 3] ^= 0x80;
    UNIT_CHECK("flipped payload byte, verify: corrupt",
               CORRUPT(o, DLK_DECODE_VERIFY) &&
               strstr(last.msg, "payload checksum"));
    UNIT_CHECK("flipped payload byte, header only: ok",
               dec(o.p, o.len, DLK_DECODE_HEADER_ONLY) == DLK_OK);
    free(o.p);

    size_t cuts[] = {0, 1, 4, 10, 63, 64, 65, index_end - 1, index_end,
                     index_end + 1, good.len / 2, good.len - 1};
    bool all = true;
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        o = dup(&good);
        bool one = fails_with(&o, cuts[i], DLK_DECODE_VERIFY, DLK_ECORRUPT);
        if (!one)
            printf("# truncated at %zu\n", cuts[i]);
        all = all && one;
        free(o.p);
    }
    UNIT_CHECK("truncated at 12 points: corrupt", all);
    o = dup(&good);
    UNIT_CHECK("truncated header: message gives the size",
               fails_with(&o, 20, 0, DLK_ECORRUPT) &&
               strstr(last.msg, "20 bytes"));
    free(o.p);

    o = dup(&good);
    o.p = realloc(o.p, o.len + 1);
    o.p[o.len++] = 0;
    UNIT_CHECK("one byte appended: corrupt", CORRUPT(o, 0));
    free(o.p);

    o = dup(&good);
    memcpy(o.p, "DLKX", 4);
    UNIT_CHECK("bad magic: corrupt", CORRUPT(o, 0) &&
               strstr(last.msg, "magic"));
    free(o.p);

    o = dup(&good);
    Dlk_put_le16(o.p + O_VERSION, 2);
    reseal(&o);
    UNIT_CHECK("version 2: unsupported",
               fails_with(&o, o.len, 0, DLK_EUNSUPPORTED) &&
               strstr(last.msg, "version 2"));
    Dlk_put_le16(o.p + O_VERSION, 0);
    UNIT_CHECK("version 0: unsupported",
               fails_with(&o, o.len, 0, DLK_EUNSUPPORTED));
    free(o.p);

    /* an unknown code may be a newer writer's: unsupported or corrupt */
    static const uint8_t bad_dtypes[] = {0, DLK_BOOL + 1, 0x7f, 0xff};
    all = true;
    for (size_t i = 0; i < sizeof bad_dtypes; i++) {
        o = dup(&good);
        o.p[O_DTYPE] = bad_dtypes[i];
        reseal(&o);
        all = all && fails_either(&o, 0, DLK_ECORRUPT, DLK_EUNSUPPORTED) &&
              strstr(last.msg, "dtype");
        free(o.p);
    }
    UNIT_CHECK("unknown dtype codes 0, 14, 127, 255: refused", all);

    o = dup(&good);
    o.p[O_CODEC] = 2;
    reseal(&o);
    UNIT_CHECK("unknown codec 2: refused",
               fails_either(&o, 0, DLK_ECORRUPT, DLK_EUNSUPPORTED) &&
               strstr(last.msg, "codec"));
    o.p[O_CODEC] = 0xff;
    reseal(&o);
    UNIT_CHECK("unknown codec 255: refused",
               fails_either(&o, 0, DLK_ECORRUPT, DLK_EUNSUPPORTED));
    free(o.p);

    o = dup(&good);
    o.p[O_NDIM] = 9;
    reseal(&o);
    UNIT_CHECK("ndim 9: corrupt", CORRUPT(o, 0) && strstr(last.msg, "ndim"));
    o.p[O_NDIM] = 255;
    reseal(&o);
    UNIT_CHECK("ndim 255: corrupt", CORRUPT(o, 0));
    free(o.p);

    o = dup(&good);
    o.p[O_FLAGS] = 0x04;
    reseal(&o);
    UNIT_CHECK("reserved flag bit 0x04: corrupt",
               CORRUPT(o, 0) && strstr(last.msg, "flag"));
    o.p[O_FLAGS] = 0x81;
    reseal(&o);
    UNIT_CHECK("reserved flag bit 0x80: corrupt", CORRUPT(o, 0));
    free(o.p);

    o = dup(&good);
    Dlk_put_le16(o.p + O_RESERVED, 0x0100);
    reseal(&o);
    UNIT_CHECK("reserved field set: corrupt",
               CORRUPT(o, 0) && strstr(last.msg, "reserved"));
    free(o.p);

    static const uint32_t bad_counts[] = {0, DLK_CHUNK_MAX_SAMPLES + 1,
                                          0x80000000u, UINT32_MAX};
    all = true;
    for (size_t i = 0; i < 4; i++) {
        o = dup(&good);
        Dlk_put_le32(o.p + O_SAMPLES, bad_counts[i]);
        reseal(&o);
        all = all && CORRUPT(o, 0) && strstr(last.msg, "sample count");
        free(o.p);
    }
    UNIT_CHECK("sample count 0 and huge: corrupt", all);

    o = dup(&good);
    Dlk_put_le32(o.p + O_SAMPLES, 6);    /* index fine, payload short */
    reseal(&o);
    UNIT_CHECK("sample count not matching the payload: corrupt",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY));
    free(o.p);

    o = dup(&good);
    Dlk_put_le64(o.p + O_INDEX, good.len);
    UNIT_CHECK("index_bytes past the object: corrupt",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY) &&
               strstr(last.msg, "index"));
    Dlk_put_le64(o.p + O_INDEX, UINT64_MAX);
    UNIT_CHECK("index_bytes 2^64-1: corrupt", CORRUPT(o, 0));
    free(o.p);

    o = dup(&good);
    Dlk_put_le64(o.p + O_STORED, Dlk_get_le64(good.p + O_STORED) + 1);
    reseal(&o);
    UNIT_CHECK("stored_bytes one past the object: corrupt",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY) &&
               strstr(last.msg, "object has"));
    Dlk_put_le64(o.p + O_STORED, UINT64_MAX - 10);
    reseal(&o);
    UNIT_CHECK("stored_bytes overflowing the sum: corrupt", CORRUPT(o, 0));
    Dlk_put_le64(o.p + O_STORED, (uint64_t)1 << 40);
    reseal(&o);
    UNIT_CHECK("stored_bytes 1 TiB: corrupt", CORRUPT(o, 0));
    free(o.p);

    o = dup(&good);
    Dlk_put_le64(o.p + O_RAW, DLK_CHUNK_MAX_RAW + 1);
    reseal(&o);
    UNIT_CHECK("raw_bytes over DLK_CHUNK_MAX_RAW: limit",
               fails_with(&o, o.len, 0, DLK_ELIMIT));
    Dlk_put_le64(o.p + O_RAW, UINT64_MAX);
    reseal(&o);
    UNIT_CHECK("raw_bytes 2^64-1: limit",
               fails_with(&o, o.len, DLK_DECODE_HEADER_ONLY, DLK_ELIMIT));
    Dlk_put_le64(o.p + O_RAW, Dlk_get_le64(good.p + O_RAW) + 4);
    reseal(&o);
    UNIT_CHECK("codec none with raw != stored: corrupt", CORRUPT(o, 0));
    free(o.p);

    /* fixed shapes */
    o = dup(&good);
    Dlk_put_le32(o.p + DLK_CHUNK_HEADER_BYTES, 5);
    reseal(&o);
    UNIT_CHECK("fixed shape not matching raw_bytes: corrupt",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY) &&
               strstr(last.msg, "shape"));
    free(o.p);
    int64_t sh3[3] = {1, 1, 1};
    obj g3 = encode(DLK_F64, DLK_CODEC_NONE, 3, sh3, NULL, 2, NULL, NULL);
    o = dup(&g3);
    for (int d = 0; d < 3; d++)
        Dlk_put_le32(o.p + DLK_CHUNK_HEADER_BYTES + 4 * d, UINT32_MAX);
    reseal(&o);
    UNIT_CHECK("fixed shape whose product overflows: corrupt",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY));
    free(o.p);
    o = dup(&g3);
    Dlk_put_le32(o.p + DLK_CHUNK_HEADER_BYTES, 0x40000000u);
    Dlk_put_le32(o.p + DLK_CHUNK_HEADER_BYTES + 4, 4);
    reseal(&o);   /* 2^35 bytes a sample */
    UNIT_CHECK("fixed shape far larger than the payload: corrupt",
               CORRUPT(o, 0));
    free(o.p);
    free(g3.p);
    free(good.p);
}

static void bad_variable(void)
{
    uint32_t shapes[6] = {2, 3, 1, 3, 4, 3};   /* ?x3, 3 samples, i16 */
    obj good = encode(DLK_I16, DLK_CODEC_NONE, 2, NULL, shapes, 3, NULL,
                      NULL);
    static const uint64_t want_offs[4] = {0, 12, 18, 42};
    static const uint64_t want_dims[6] = {2, 3, 1, 3, 4, 3};
    const size_t offs = find_seq(&good, 8, want_offs, 4);
    const size_t dims = find_seq(&good, 4, want_dims, 6);
    obj o;
    UNIT_CHECK("variable base chunk decodes",
               dec(good.p, good.len, DLK_DECODE_VERIFY) == DLK_OK);
    UNIT_CHECK("variable index holds the offsets and the dims",
               offs && dims);
    if (!offs || !dims) {
        free(good.p);
        return;
    }

    o = dup(&good);   /* offsets 0 12 18 42: swap the middle two */
    Dlk_put_le64(o.p + offs + 8, 18);
    Dlk_put_le64(o.p + offs + 16, 12);
    reseal(&o);
    UNIT_CHECK("variable: offsets out of order: corrupt",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY) &&
               strstr(last.msg, "offset"));
    free(o.p);

    o = dup(&good);
    Dlk_put_le32(o.p + dims, 3);   /* sample 0: 3x3 */
    reseal(&o);
    UNIT_CHECK("variable: shape not matching its offsets: corrupt",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY));
    free(o.p);

    o = dup(&good);
    Dlk_put_le64(o.p + offs, 2);
    reseal(&o);
    UNIT_CHECK("variable: first offset not 0: corrupt",
               CORRUPT(o, 0) && strstr(last.msg, "first sample offset"));
    free(o.p);

    o = dup(&good);   /* shapes and offsets agree, but end past raw_bytes */
    Dlk_put_le32(o.p + dims + 16, 5);
    Dlk_put_le64(o.p + offs + 24, 48);
    reseal(&o);
    UNIT_CHECK("variable: offsets end past the payload: corrupt",
               CORRUPT(o, 0) && strstr(last.msg, "offsets end"));
    free(o.p);

    o = dup(&good);
    Dlk_put_le64(o.p + offs + 8, UINT64_MAX);
    Dlk_put_le64(o.p + offs + 16, 5);
    reseal(&o);
    UNIT_CHECK("variable: offset 2^64-1 then wrapping: corrupt",
               CORRUPT(o, 0));
    free(o.p);

    /* a product of dims that overflows u64: 3 dims of 2^32-1, 8 bytes */
    uint32_t s3[3] = {1, 1, 1};
    static const uint64_t ones[3] = {1, 1, 1};
    obj g3 = encode(DLK_F64, DLK_CODEC_NONE, 3, NULL, s3, 1, NULL, NULL);
    o = dup(&g3);
    size_t at = find_seq(&g3, 4, ones, 3);
    for (int d = 0; at && d < 3; d++)
        Dlk_put_le32(o.p + at + 4 * d, UINT32_MAX);
    reseal(&o);
    UNIT_CHECK("variable: shape whose product overflows u64: corrupt",
               CORRUPT(o, DLK_DECODE_HEADER_ONLY));
    free(o.p);
    free(g3.p);

    o = dup(&good);
    Dlk_put_le32(o.p + O_SAMPLES, 2);   /* index size no longer matches */
    reseal(&o);
    UNIT_CHECK("variable: sample count not matching the index: corrupt",
               CORRUPT(o, 0) && strstr(last.msg, "index"));
    free(o.p);

    o = dup(&good);
    o.p[O_FLAGS] = 0;                   /* the index read as a fixed one */
    reseal(&o);
    UNIT_CHECK("variable flag cleared: corrupt", CORRUPT(o, 0));
    free(o.p);
    free(good.p);

    obj sc = encode(DLK_U8, DLK_CODEC_NONE, 0, NULL, NULL, 4, NULL, NULL);
    o = dup(&sc);
    o.p[O_FLAGS] = DLK_CHUNK_FLAG_VARIABLE;   /* a scalar that varies */
    reseal(&o);
    UNIT_CHECK("variable flag on a scalar (ndim 0): corrupt",
               CORRUPT(o, 0));
    free(o.p);
    free(sc.p);
}

/* Put a new payload into a chunk: header fields and hashes updated. */
static obj with_payload(const obj *g, const void *pl, size_t n,
                        uint64_t raw_bytes)
{
    uint64_t ib = Dlk_get_le64(g->p + O_INDEX);
    size_t head = DLK_CHUNK_HEADER_BYTES + (size_t)ib;
    obj o = {malloc(head + n), head + n};
    memcpy(o.p, g->p, head);
    memcpy(o.p + head, pl, n);
    Dlk_put_le64(o.p + O_STORED, n);
    Dlk_put_le64(o.p + O_RAW, raw_bytes);
    Dlk_put_le64(o.p + O_STORED_HASH, Dlk_hash64(pl, n));
    reseal(&o);
    return o;
}

static void bad_zstd(void)
{
    int64_t shape[1] = {12};
    uint8_t *raw;
    size_t raw_len;
    obj good = encode(DLK_U32, DLK_CODEC_ZSTD, 1, shape, NULL, 4, &raw,
                      &raw_len);   /* 192 raw bytes */
    size_t head = DLK_CHUNK_HEADER_BYTES +
                  (size_t)Dlk_get_le64(good.p + O_INDEX);
    size_t stored = good.len - head;
    obj o;
    UNIT_CHECK("zstd base chunk decodes",
               dec(good.p, good.len, DLK_DECODE_VERIFY) == DLK_OK);

    o = dup(&good);
    o.p[head + stored / 2] ^= 0x10;
    UNIT_CHECK("zstd: flipped payload byte, verify: corrupt",
               CORRUPT(o, DLK_DECODE_VERIFY));
    dlk_status rc = dec(o.p, o.len, 0);
    UNIT_CHECK("zstd: flipped payload byte, no verify: no crash",
               rc == DLK_OK || (rc == DLK_ECORRUPT && strstr(last.msg, NAME)));
    free(o.p);

    /* a frame header claiming 2^40 bytes: single segment, 8-byte content
     * size, then one empty raw block */
    uint8_t bomb[16] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0};
    Dlk_put_le64(bomb + 5, (uint64_t)1 << 40);
    bomb[13] = 0x01;   /* last block, raw, size 0 */
    o = with_payload(&good, bomb, sizeof bomb, raw_len);
    UNIT_CHECK("zstd frame claiming 2^40 bytes: corrupt",
               CORRUPT(o, 0) && strstr(last.msg, "zstd frame holds"));
    free(o.p);
    /* the same frame with the header agreeing: the limit refuses it */
    o = with_payload(&good, bomb, sizeof bomb, (uint64_t)1 << 40);
    UNIT_CHECK("zstd frame and header claiming 2^40 bytes: limit",
               fails_with(&o, o.len, 0, DLK_ELIMIT));
    free(o.p);

    /* content size equal to the header's, but a frame that holds less */
    uint8_t liar[16 + 10] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0};
    Dlk_put_le64(liar + 5, raw_len);
    liar[13] = (uint8_t)(0x01 | (10 << 3));   /* last, raw, 10 bytes */
    o = with_payload(&good, liar, sizeof liar, raw_len);
    UNIT_CHECK("zstd frame holding less than its content size: corrupt",
               CORRUPT(o, 0));
    free(o.p);

    /* no content size in the frame header */
    uint8_t *plain = malloc(ZSTD_compressBound(raw_len));
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
    size_t n = ZSTD_compress2(cc, plain, ZSTD_compressBound(raw_len), raw,
                              raw_len);
    ZSTD_freeCCtx(cc);
    o = with_payload(&good, plain, n, raw_len);
    UNIT_CHECK("zstd frame without a content size: corrupt",
               !ZSTD_isError(n) && CORRUPT(o, 0));
    free(o.p);

    /* frames of the wrong length: trailing bytes, two frames, cut short */
    uint8_t *two = malloc(2 * stored + 8);
    memcpy(two, good.p + head, stored);
    memset(two + stored, 0xab, 8);
    o = with_payload(&good, two, stored + 8, raw_len);
    UNIT_CHECK("zstd frame with trailing bytes: corrupt",
               CORRUPT(o, 0) && strstr(last.msg, "one zstd frame"));
    free(o.p);
    memcpy(two + stored, good.p + head, stored);
    o = with_payload(&good, two, 2 * stored, raw_len);
    UNIT_CHECK("two zstd frames: corrupt", CORRUPT(o, 0));
    free(o.p);
    o = with_payload(&good, two, stored - 3, raw_len);
    UNIT_CHECK("zstd frame cut short: corrupt", CORRUPT(o, 0));
    free(o.p);
    o = with_payload(&good, "not zstd at all", 15, raw_len);
    UNIT_CHECK("zstd payload that is not a frame: corrupt", CORRUPT(o, 0));
    free(o.p);
    o = with_payload(&good, "", 0, raw_len);
    UNIT_CHECK("zstd payload of 0 bytes: corrupt", CORRUPT(o, 0));
    free(o.p);

    /* a valid frame of other data: raw checksum catches it */
    for (size_t i = 0; i < raw_len; i++)
        raw[i] ^= 0x5a;
    n = ZSTD_compress(plain, ZSTD_compressBound(raw_len), raw, raw_len, 1);
    o = with_payload(&good, plain, n, raw_len);
    UNIT_CHECK("zstd frame of other data, verify: corrupt",
               CORRUPT(o, DLK_DECODE_VERIFY) &&
               strstr(last.msg, "raw payload checksum"));
    UNIT_CHECK("zstd frame of other data, no verify: decodes",
               dec(o.p, o.len, 0) == DLK_OK);
    free(o.p);

    free(two);
    free(plain);
    free(raw);
    free(good.p);
}

static void encode_limits(void)
{
    Dlk_chunk_enc e = {.dtype = DLK_U8, .codec = DLK_CODEC_NONE, .ndim = 0,
                       .samples = 0, .raw = "", .raw_bytes = 0};
    Dlk_buf b;
    Dlk_buf_init(&b);
    UNIT_CHECK("encode refuses 0 samples",
               Dlk_chunk_encode(&e, &b, NULL) == DLK_EINVAL);
    e.samples = 1;
    e.ndim = DLK_MAX_NDIM + 1;
    UNIT_CHECK("encode refuses ndim 9",
               Dlk_chunk_encode(&e, &b, NULL) == DLK_EINVAL);
    e.ndim = 0;
    e.dtype = (dlk_dtype)0;
    UNIT_CHECK("encode refuses an unknown dtype",
               Dlk_chunk_encode(&e, &b, NULL) == DLK_EINVAL);
    e.dtype = DLK_U8;
    e.raw_bytes = DLK_CHUNK_MAX_RAW + 1;
    UNIT_CHECK("encode refuses raw_bytes over the limit",
               Dlk_chunk_encode(&e, &b, NULL) == DLK_EINVAL);
    uint32_t shp[2] = {2, 2};
    e.raw_bytes = 3;   /* shapes need 4 */
    e.raw = "abc";
    e.variable = true;
    e.ndim = 1;
    e.shapes = shp;
    e.samples = 2;
    UNIT_CHECK("encode refuses raw bytes not matching the shapes",
               Dlk_chunk_encode(&e, &b, NULL) != DLK_OK);
    Dlk_buf_free(&b);
}

/* The head-only encoding followed by the payload is the whole encoding
 * (so the writer, which stores them as two parts, names and writes the
 * same bytes); a compressed chunk comes whole either way; the two-part
 * 128-bit hash is the hash of the joined bytes. */
static void encode_head(void)
{
    uint32_t shp[6] = {3, 2, 1, 5, 4, 4};
    const int64_t fixed[2] = {4, 3};
    for (int k = 0; k < 3; k++) {
        dlk_codec codec = k == 2 ? DLK_CODEC_ZSTD : DLK_CODEC_NONE;
        uint8_t raw[64];
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (uint8_t)(i * 7 + 3);
        Dlk_chunk_enc e = {.dtype = DLK_U8, .codec = codec, .ndim = 2,
                           .variable = k == 1, .shape = fixed,
                           .shapes = k == 1 ? shp : NULL,
                           .samples = k == 1 ? 3 : 4, .raw = raw,
                           .raw_bytes = k == 1 ? 6 + 5 + 16 : 48};
        Dlk_buf whole, head;
        Dlk_buf_init(&whole);
        Dlk_buf_init(&head);
        bool follows = false;
        int ok = Dlk_chunk_encode(&e, &whole, NULL) == DLK_OK &&
                 Dlk_chunk_encode_head(&e, &head, &follows, NULL) == DLK_OK;
        size_t tail = follows ? e.raw_bytes : 0;
        ok = ok && follows == (codec == DLK_CODEC_NONE) &&
             head.len + tail == whole.len &&
             memcmp(head.data, whole.data, head.len) == 0 &&
             memcmp(whole.data + head.len, raw, tail) == 0;
        char h1[33] = "", h2[33] = "";
        if (ok) {
            Dlk_hash128_hex(whole.data, whole.len, h1);
            Dlk_hash128_hex_2(head.data, head.len, raw, tail, h2);
        }
        char name[96];
        snprintf(name, sizeof name, "%s chunk: header + index, then the "
                 "payload, is the whole object, and hashes the same",
                 k == 2 ? "zstd" : k == 1 ? "variable" : "fixed");
        UNIT_CHECK(name, ok && strcmp(h1, h2) == 0);
        Dlk_buf_free(&whole);
        Dlk_buf_free(&head);
    }
}

/* ---- hashes --------------------------------------------------------- */

/* The library's XXH3 (whichever vector code the CPU gets) against the
 * reference compiled in this file, over lengths around XXH3's internal
 * boundaries (16, 128, 240 bytes, stripes, 1 KiB blocks) up to a chunk,
 * whole, in two pieces and streamed in uneven pieces. */
static void hashes(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    printf("# this CPU %s AVX2\n",
           __builtin_cpu_supports("avx2") ? "has" : "has no");
#endif
    size_t lens[] = {0,    1,    3,    16,   17,     128,    129,
                     240,  241,  1023, 1024, 1025,   4096,   65536 + 13,
                     1u << 20, (16u << 20) + 5};
    size_t max = lens[sizeof lens / sizeof lens[0] - 1];
    uint8_t *p = malloc(max);
    if (!p) {
        UNIT_CHECK("hash buffer", false);
        return;
    }
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < max; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    bool h64 = true, h128 = true, two = true, stream = true;
    Dlk_hash64_stream *st = Dlk_hash64_stream_new();
    for (size_t j = 0; st && j < sizeof lens / sizeof lens[0]; j++) {
        size_t n = lens[j], cut = n / 3;
        uint64_t want = XXH3_64bits(p, n);
        XXH128_hash_t w128 = XXH3_128bits(p, n);
        char want128[33], got128[33], got128b[33];
        snprintf(want128, sizeof want128, "%016llx%016llx",
                 (unsigned long long)w128.high64,
                 (unsigned long long)w128.low64);
        Dlk_hash128_hex(p, n, got128);
        Dlk_hash128_hex_2(p, cut, p + cut, n - cut, got128b);
        h64 &= Dlk_hash64(p, n) == want;
        h128 &= strcmp(got128, want128) == 0 && strcmp(got128b, want128) == 0;
        two &= Dlk_hash64_2(p, cut, p + cut, n - cut) == want;
        Dlk_hash64_stream_reset(st);
        for (size_t at = 0, k = 1; at < n; k = k * 7 % 65537 + 1) {
            size_t m = n - at < k ? n - at : k;
            Dlk_hash64_stream_update(st, p + at, m);
            at += m;
        }
        stream &= Dlk_hash64_stream_digest(st) == want;
    }
    UNIT_CHECK("XXH3-64 equals the reference, 0 bytes to 16 MiB", st && h64);
    UNIT_CHECK("XXH3-128 (chunk names) equals the reference, whole and in "
               "two pieces", st && h128);
    UNIT_CHECK("XXH3-64 of two pieces equals the reference", st && two);
    UNIT_CHECK("XXH3-64 streamed in uneven pieces equals the reference",
               st && stream);
    /* XXH3's published value of no input, seed 0 */
    UNIT_CHECK("XXH3-64 of no bytes is 2d06800538d394c2",
               Dlk_hash64("", 0) == 0x2d06800538d394c2u);
    Dlk_hash64_stream_free(st);
    free(p);
}

/* The block-by-block XXH3 a GPU computes parts with (util/xxh3_blocks.h)
 * against the reference: every length over 240 up to three blocks and
 * then some (the full blocks, the last partial one and the last stripe
 * move at each step), large ones, and starts that are not aligned. */
static void hash_blocks(void)
{
    size_t max = (2u << 20) + 777;
    uint8_t *p = malloc(max + 8);
    if (!p) {
        UNIT_CHECK("hash buffer", false);
        return;
    }
    uint64_t x = 0x2545f4914f6cdd1du;
    for (size_t i = 0; i < max + 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    Dlk_xxh3_keys k;
    Dlk_xxh3_keys_init(&k);
    bool every = true, large = true, unaligned = true;
    for (size_t n = DLK_XXH3_MIN_LONG; n <= 3 * DLK_XXH3_BLOCK + 200; n++)
        every &= Dlk_hash64_blocks(p, n, &k) == XXH3_64bits(p, n);
    size_t big[] = {1u << 20, (1u << 20) + 1, 150528, 1u << 16, max};
    for (size_t j = 0; j < sizeof big / sizeof big[0]; j++)
        large &= Dlk_hash64_blocks(p, big[j], &k) == XXH3_64bits(p, big[j]);
    for (size_t off = 1; off < 8; off++)
        unaligned &= Dlk_hash64_blocks(p + off, 5000 + off, &k) ==
                     XXH3_64bits(p + off, 5000 + off);
    UNIT_CHECK("XXH3-64 block by block equals the reference, 241 to 3272 "
               "bytes", every);
    UNIT_CHECK("... 64 KiB to 2 MiB", large);
    UNIT_CHECK("... from unaligned starts", unaligned);
    free(p);
}

/* ---- replay of fuzzer finds ---------------------------------------- */

/* Every mode gives a clean verdict; with verification, an error (header-
 * only and unverified decodes may accept what the payload checks refuse). */
static bool replay_chunk(const uint8_t *p, size_t len)
{
    unsigned modes[3] = {DLK_DECODE_HEADER_ONLY, 0, DLK_DECODE_VERIFY};
    bool said = false, ok = true;
    for (int m = 0; ok && m < 3; m++) {
        dlk_status rc = dec(p ? p : (const uint8_t *)"", len, modes[m]);
        if (rc == DLK_OK && m < 2)
            continue;
        ok = (rc == DLK_ECORRUPT || rc == DLK_ELIMIT ||
              rc == DLK_EUNSUPPORTED) && last.code == rc &&
             strstr(last.msg, NAME) != NULL;
        if (!ok)
            printf("# mode %u: status %d: %s\n", modes[m], rc, last.msg);
        else if (!said)
            printf("# %s\n", last.msg);
        said = true;
    }
    return ok;
}

int main(void)
{
    round_trips();
    bad_headers();
    bad_variable();
    bad_zstd();
    encode_limits();
    encode_head();
    hashes();
    hash_blocks();
    unit_replay("chunk", replay_chunk, true);
    unit_replay("fuzz_chunk", replay_chunk, false);
    return unit_done();
}
