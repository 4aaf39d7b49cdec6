/* fuzz_chunk.c - libFuzzer target: the input is a whole chunk object.
 *
 * Each input is decoded in every mode (header only, payload without and
 * with checksums, into a caller buffer too small and big enough); a decode
 * that succeeds must describe samples that lie inside its payload, and
 * re-encoding the samples must decode to the same bytes. */
#include "util/buf.h"
#include "util/bytes.h"
#include "util/hash.h"
#include "format/chunk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Above this raw size only the header and index are decoded: a small zstd
 * frame may legally expand to DLK_CHUNK_MAX_RAW (2 GiB), which would only
 * measure the allocator and trip libFuzzer's malloc limit. */
#define FUZZ_MAX_DECODE ((uint64_t)64 << 20)

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (%s:%d)\n", \
                                         #c, __FILE__, __LINE__); abort(); } } while (0)

static struct dlk_chunk *load(const uint8_t *data, size_t size)
{
    struct dlk_chunk *c = calloc(1, sizeof *c);
    CHECK(c);
    /* an exact-size copy, so that ASan sees any read past the object */
    c->object.data = malloc(size ? size : 1);
    CHECK(c->object.data);
    if (size)
        memcpy(c->object.data, data, size);
    c->object.len = c->object.cap = size;
    return c;
}

static volatile uint8_t sink;

/* Every sample of a decoded chunk lies in its payload. */
static void walk(const struct dlk_chunk *c)
{
    size_t total;
    const uint8_t *p = dlk_chunk_payload(c, &total);
    uint32_t n = dlk_chunk_samples(c);
    CHECK(n == c->h.samples && total == c->h.raw_bytes);
    CHECK(dlk_chunk_sample(c, n, NULL, NULL) == NULL);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        /* all samples when few; the first and last 64 otherwise */
        if (n > 256 && i == 64)
            i = n - 64;
        size_t nb;
        int64_t shape[DLK_MAX_NDIM];
        const uint8_t *s = dlk_chunk_sample(c, i, &nb, shape);
        CHECK(s);
        CHECK(s >= p && (size_t)(s - p) <= total && nb <= total - (size_t)(s - p));
        uint64_t want = dlk_dtype_size(c->h.dtype);
        for (int d = 0; d < c->h.ndim; d++) {
            CHECK(shape[d] >= 0);
            want *= (uint64_t)shape[d];
        }
        CHECK(want == nb);
        if (nb)
            sink ^= s[0] ^ s[nb - 1];
        sum += nb;
    }
    if (n <= 256)
        CHECK(sum == total);
}

/* The parts of a decoded chunk tile its payload; checked part by part,
 * they agree with the decode's own verdict on them. */
static void parts(const struct dlk_chunk *c, unsigned mode)
{
    uint64_t off, len;
    if (!c->nparts) {
        CHECK(!c->part_hash && Dlk_chunk_part_span(c, 0, 0, &off, &len));
        return;
    }
    CHECK(c->h.codec == DLK_CODEC_NONE && c->nparts <= c->h.samples);
    uint64_t end = 0;
    for (uint32_t p = 0; p < c->nparts; p++) {
        CHECK(Dlk_chunk_part_span(c, p, p + 1, &off, &len) == DLK_OK);
        CHECK(off == end && len <= c->h.raw_bytes - off);
        end = off + len;
    }
    CHECK(end == c->h.raw_bytes);
    CHECK(Dlk_chunk_part_span(c, 0, c->nparts + 1, &off, &len) == DLK_EINVAL);
    dlk_error err = {0};
    dlk_status rc = Dlk_chunk_verify_parts(c, 0, c->nparts, c->payload,
                                           c->h.raw_bytes, "fuzz", &err);
    CHECK(rc == DLK_OK || (rc == DLK_ECORRUPT && strstr(err.msg, "fuzz")));
    if (mode & DLK_DECODE_VERIFY_PARTS)
        CHECK(rc == DLK_OK);
}

/* Encode the decoded samples again and decode the result: same bytes. */
static void reencode(const struct dlk_chunk *c)
{
    if (c->h.raw_bytes > (1u << 20))
        return;
    bool variable = c->h.flags & DLK_CHUNK_FLAG_VARIABLE;
    Dlk_chunk_enc e = {
        .dtype = c->h.dtype, .codec = c->h.codec, .level = 1,
        .ndim = c->h.ndim, .variable = variable,
        .shape = c->shape, .shapes = c->shapes, .samples = c->h.samples,
        .raw = c->payload, .raw_bytes = (size_t)c->h.raw_bytes,
        .part_bytes = c->part_bytes,
    };
    Dlk_buf out;
    Dlk_buf_init(&out);
    dlk_error err = {0};
    dlk_status rc = Dlk_chunk_encode(&e, &out, &err);
    if (rc) {
        /* only the index may be too large to encode again */
        CHECK(rc == DLK_ELIMIT);
        Dlk_buf_free(&out);
        return;
    }
    struct dlk_chunk *d = load(out.data, out.len);
    Dlk_buf_free(&out);
    rc = Dlk_chunk_decode(d, "again", DLK_DECODE_VERIFY, NULL, 0, &err);
    if (rc)
        fprintf(stderr, "re-encoded chunk does not decode: %s\n", err.msg);
    CHECK(rc == DLK_OK);
    CHECK(d->h.samples == c->h.samples && d->h.raw_bytes == c->h.raw_bytes);
    CHECK(c->h.raw_bytes == 0 ||
          memcmp(d->payload, c->payload, (size_t)c->h.raw_bytes) == 0);
    /* part hashes are a function of the payload (checked when decoded) */
    CHECK(d->nparts == c->nparts &&
          (c->nparts == 0 ||
           memcmp(d->part_hash, c->part_hash, 8 * (size_t)c->nparts) == 0));
    dlk_chunk_free(d);
}

static dlk_status decode(const uint8_t *data, size_t size, unsigned mode,
                         size_t cap, bool check)
{
    struct dlk_chunk *c = load(data, size);
    uint8_t *dst = cap ? malloc(cap) : NULL;
    dlk_error err = {0};
    dlk_status rc = Dlk_chunk_decode(c, "fuzz", mode, dst, cap, &err);
    if (rc) {
        /* a clean error: a known code and a message naming the chunk */
        CHECK(err.code == rc && err.msg[0]);
        CHECK(rc == DLK_ECORRUPT || rc == DLK_EUNSUPPORTED ||
              rc == DLK_ELIMIT || rc == DLK_ENOMEM);
        CHECK(strstr(err.msg, "fuzz") != NULL);
    } else if (!(mode & DLK_DECODE_HEADER_ONLY)) {
        walk(c);
        parts(c, mode);
        if (check)
            reencode(c);
    }
    dlk_chunk_free(c);
    free(dst);
    return rc;
}

static void one(const uint8_t *data, size_t size)
{
    Dlk_chunk_header h;
    dlk_error err = {0};
    dlk_status hrc = Dlk_chunk_parse_header(data, size, "fuzz", &h, &err);
    dlk_status rc = decode(data, size, DLK_DECODE_HEADER_ONLY, 0, false);
    /* the same verdict as the header alone, or an index error after it */
    CHECK(hrc ? rc == hrc : (rc == DLK_OK || rc == DLK_ECORRUPT));
    if (rc || h.raw_bytes > FUZZ_MAX_DECODE)
        return;
    /* size of the buffer offered for the payload: from the input's last
     * byte, so that both "too small" and "big enough" are explored */
    size_t raw = (size_t)h.raw_bytes;
    size_t cap = size && (data[size - 1] & 1) ? raw : raw / 2;
    dlk_status r1 = decode(data, size, DLK_DECODE_VERIFY |
                           DLK_DECODE_VERIFY_PARTS, cap, true);
    dlk_status r2 = decode(data, size, 0, 0, false);
    /* verification only ever adds failures */
    CHECK(r1 == DLK_OK ? r2 == DLK_OK : 1);
}

/* The input with its header and stored-payload checksums recomputed, so
 * that mutations reach the checks behind the checksums (a fuzzer cannot
 * forge XXH3).  A saved crash input is stored resealed: this is then a
 * no-op and the input replays the same through either path. */
static bool reseal(uint8_t *p, size_t len)
{
    if (len < DLK_CHUNK_HEADER_BYTES)
        return false;
    uint64_t ib = Dlk_get_le64(p + 16), sb = Dlk_get_le64(p + 24);
    if (ib > len - DLK_CHUNK_HEADER_BYTES)
        return false;
    size_t rest = len - DLK_CHUNK_HEADER_BYTES - (size_t)ib;
    if (sb == rest)
        Dlk_put_le64(p + 48, Dlk_hash64(p + len - rest, rest));
    Dlk_put_le64(p + 56, Dlk_hash64_2(p, 56, p + DLK_CHUNK_HEADER_BYTES,
                                      (size_t)ib));
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    CHECK(copy);
    if (size)
        memcpy(copy, data, size);
    if (reseal(copy, size) && memcmp(copy, data, size) != 0)
        one(copy, size);
    free(copy);
    return 0;
}
