/* test_parts.c - chunks cut into checksummed parts (formats/dlk-v1.md
 * 3.2, the part table): round trips of fixed and variable shapes,
 * zero-sized samples and part counts clamped to the samples; the part
 * spans and hashes a reader checks parts by; every rejection of a bad
 * table; the header and index parsed from the object's first
 * 64 + index_bytes bytes alone and checked against the manifest; and
 * datasets: new codec-none tensors get parts, a tensor without the
 * member keeps chunks without, verify --deep names a damaged part. */
#include "dataset/dataset.h"
#include "unit.h"

#include <fcntl.h>
#include <unistd.h>

#define NAME "chunks/t/parts"

typedef struct obj {
    uint8_t *p;
    size_t len;
} obj;

enum { O_FLAGS = 9, O_CODEC = 7, O_INDEX = 16, O_HEADER_HASH = 56 };

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 29 + (i >> 7) + seed);
}

/* Encode; o.p NULL (and the status in *rc) when refused. */
static obj enc(dlk_codec codec, int ndim, const int64_t *shape,
               const uint32_t *shapes, uint32_t samples, const uint8_t *raw,
               size_t raw_bytes, uint32_t part_bytes, dlk_status *rc)
{
    Dlk_chunk_enc e = {
        .dtype = DLK_U8, .codec = codec, .ndim = ndim,
        .variable = shapes != NULL, .shape = shape, .shapes = shapes,
        .samples = samples, .raw = raw, .raw_bytes = raw_bytes,
        .part_bytes = part_bytes,
    };
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_error err = {0};
    obj o = {NULL, 0};
    dlk_status r = Dlk_chunk_encode(&e, &b, &err);
    if (rc)
        *rc = r;
    if (r == DLK_OK) {
        o.p = malloc(b.len);
        memcpy(o.p, b.data, b.len);
        o.len = b.len;
    }
    Dlk_buf_free(&b);
    return o;
}

/* A chunk holding an exact-size copy of the first len bytes of p. */
static dlk_chunk *load(const uint8_t *p, size_t len)
{
    dlk_chunk *c = calloc(1, sizeof *c);
    c->object.data = malloc(len ? len : 1);
    memcpy(c->object.data, p, len);
    c->object.len = c->object.cap = len;
    return c;
}

static dlk_error last;

static dlk_status dec(const obj *o, unsigned mode)
{
    dlk_chunk *c = load(o->p, o->len);
    memset(&last, 0, sizeof last);
    dlk_status rc = Dlk_chunk_decode(c, NAME, mode, NULL, 0, &last);
    dlk_chunk_free(c);
    return rc;
}

/* Refused as corrupt, naming the chunk and saying `what`. */
static bool corrupt(const obj *o, unsigned mode, const char *what)
{
    dlk_status rc = dec(o, mode);
    bool ok = rc == DLK_ECORRUPT && last.code == rc &&
              strstr(last.msg, NAME) && (!what || strstr(last.msg, what));
    if (!ok)
        printf("# got %d: %s\n", rc, last.msg);
    return ok;
}

static void reseal(obj *o)
{
    uint64_t ib = Dlk_get_le64(o->p + O_INDEX);
    Dlk_put_le64(o->p + O_HEADER_HASH,
                 Dlk_hash64_2(o->p, 56, o->p + 64, (size_t)ib));
}

static obj copy_obj(const obj *o)
{
    obj c = {malloc(o->len), o->len};
    memcpy(c.p, o->p, o->len);
    return c;
}

/* Where the part table starts in the object (its part_bytes field). */
static size_t table_at(const obj *o, int ndim, bool variable,
                       uint32_t samples)
{
    uint64_t layout = variable ? 8 * ((uint64_t)samples + 1) +
                                     4 * (uint64_t)samples * ndim
                               : 4 * (uint64_t)ndim;
    (void)o;
    return 64 + (size_t)((layout + 7) / 8 * 8);
}

/* The chunk decodes; its parts are the formula's; each part hash is the
 * XXH3-64 of the samples' bytes [first(p), first(p+1)) as the offsets
 * give them; part spans and verify_parts agree; a flipped byte in any
 * part is found and named by verify_parts and by a verifying decode. */
static bool check_parts(const obj *o, const uint8_t *raw, uint32_t samples,
                        uint64_t raw_bytes, uint32_t part_bytes,
                        uint32_t want_nparts)
{
    dlk_chunk *c = load(o->p, o->len);
    dlk_error err = {0};
    bool ok = Dlk_chunk_decode(c, NAME, DLK_DECODE_VERIFY |
                               DLK_DECODE_VERIFY_PARTS, NULL, 0, &err) == 0;
    if (!ok)
        printf("# %s\n", err.msg);
    ok = ok && (c->h.flags & DLK_CHUNK_FLAG_PARTS) &&
         c->part_bytes == part_bytes && c->nparts == want_nparts &&
         c->nparts == Dlk_parts_count(samples, raw_bytes, part_bytes) &&
         c->part_hash != NULL && c->h.index_bytes % 64 == 0 &&
         c->part_hash >= c->object.data + 64 &&
         c->part_hash + 8 * (size_t)c->nparts <=
             c->object.data + 64 + c->h.index_bytes &&
         Dlk_chunk_sample_offset(c, samples) == raw_bytes &&
         Dlk_chunk_sample_offset(c, 0) == 0;
    for (uint32_t p = 0; ok && p < c->nparts; p++) {
        uint32_t f0 = Dlk_part_first(p, samples, c->nparts);
        uint32_t f1 = Dlk_part_first(p + 1, samples, c->nparts);
        /* offsets summed from the samples themselves */
        uint64_t a = 0, b = 0;
        for (uint32_t s = 0; s < f1; s++) {
            size_t n;
            dlk_chunk_sample(c, s, &n, NULL);
            if (s < f0)
                a += n;
            b += n;
        }
        uint64_t off, len;
        ok = f1 > f0 && Dlk_chunk_part_span(c, p, p + 1, &off, &len) == 0 &&
             off == a && len == b - a &&
             Dlk_get_le64(c->part_hash + 8 * (size_t)p) ==
                 Dlk_hash64(raw + a, (size_t)(b - a)) &&
             Dlk_chunk_verify_parts(c, p, p + 1, raw + a, len, NAME, &err) ==
                 DLK_OK;
        if (!ok)
            printf("# part %u: [%u,%u) bytes %llu..%llu\n", p, f0, f1,
                   (unsigned long long)a, (unsigned long long)b);
    }
    uint64_t off, len;
    ok = ok && Dlk_chunk_part_span(c, 0, c->nparts, &off, &len) == 0 &&
         off == 0 && len == raw_bytes &&
         Dlk_chunk_verify_parts(c, 0, c->nparts, raw, len, NAME, &err) == 0 &&
         Dlk_chunk_part_span(c, 1, 0, &off, &len) == DLK_EINVAL &&
         Dlk_chunk_part_span(c, 0, c->nparts + 1, &off, &len) == DLK_EINVAL &&
         Dlk_chunk_verify_parts(c, 0, c->nparts, raw, len + 1, NAME, &err) ==
             DLK_EINVAL;
    /* a flipped byte in the last non-empty part */
    uint32_t bad = c->nparts;
    for (uint32_t p = c->nparts; ok && p-- > 0;) {
        Dlk_chunk_part_span(c, p, p + 1, &off, &len);
        if (len) {
            bad = p;
            break;
        }
    }
    if (ok && bad < c->nparts) {
        uint8_t *copy = malloc(raw_bytes);
        memcpy(copy, raw, raw_bytes);
        Dlk_chunk_part_span(c, bad, bad + 1, &off, &len);
        copy[off + len / 2] ^= 0x10;
        char want[64];
        snprintf(want, sizeof want, "part %u of %u", bad, c->nparts);
        Dlk_chunk_part_span(c, 0, c->nparts, &off, &len);
        ok = Dlk_chunk_verify_parts(c, 0, c->nparts, copy, len, NAME, &err) ==
                 DLK_ECORRUPT && strstr(err.msg, NAME) &&
             strstr(err.msg, want);
        if (!ok)
            printf("# %s\n", err.msg);
        /* the same byte in the object: a verifying decode names the part */
        obj o2 = copy_obj(o);
        size_t payload = 64 + (size_t)c->h.index_bytes;
        memcpy(o2.p + payload, copy, raw_bytes);
        ok = ok && corrupt(&o2, DLK_DECODE_VERIFY, want) &&
             corrupt(&o2, DLK_DECODE_VERIFY | DLK_DECODE_VERIFY_PARTS, want) &&
             dec(&o2, 0) == DLK_OK && dec(&o2, DLK_DECODE_HEADER_ONLY) == 0;
        free(o2.p);
        free(copy);
    }
    dlk_chunk_free(c);
    return ok;
}

static void round_trips(void)
{
    /* fixed: 300 samples of 100 bytes in parts of 4096: 8 parts */
    enum { FS = 300, FB = 100 };
    uint8_t *raw = malloc(FS * FB);
    fill(raw, FS * FB, 1);
    int64_t shape[2] = {10, 10};
    obj o = enc(DLK_CODEC_NONE, 2, shape, NULL, FS, raw, FS * FB, 4096, NULL);
    UNIT_CHECK("parts: fixed shape, 300 samples in parts of 4096 bytes: 8 "
               "parts, each hash its samples' bytes",
               o.p && check_parts(&o, raw, FS, FS * FB, 4096, 8));
    /* the table sits after the 8-byte layout at the next multiple of 8 */
    size_t at = table_at(&o, 2, false, FS);
    UNIT_CHECK("parts: fixed table at pad8(4*ndim), index pad64(used)",
               o.p && Dlk_get_le32(o.p + at) == 4096 &&
               Dlk_get_le32(o.p + at + 4) == 8 &&
               Dlk_get_le64(o.p + O_INDEX) ==
                   (at - 64 + 8 + 8 * 8 + 63) / 64 * 64);
    free(o.p);

    /* odd rank: 4 bytes of zero gap before the table */
    int64_t s3[3] = {5, 4, 5};
    o = enc(DLK_CODEC_NONE, 3, s3, NULL, FS, raw, FS * FB, 8192, NULL);
    UNIT_CHECK("parts: fixed shape of rank 3 (gap before the table): 4 "
               "parts of 8192",
               o.p && check_parts(&o, raw, FS, FS * FB, 8192, 4));
    free(o.p);

    /* fewer samples than ceil(raw / part_bytes): one part per sample */
    int64_t big[1] = {10000};
    uint8_t *r3 = malloc(30000);
    fill(r3, 30000, 3);
    o = enc(DLK_CODEC_NONE, 1, big, NULL, 3, r3, 30000, 4096, NULL);
    UNIT_CHECK("parts: 3 samples of 10000 bytes in parts of 4096: clamped "
               "to 3 parts",
               o.p && check_parts(&o, r3, 3, 30000, 4096, 3));
    free(o.p);

    /* small chunk: one part */
    o = enc(DLK_CODEC_NONE, 2, shape, NULL, 7, raw, 700, 1 << 20, NULL);
    UNIT_CHECK("parts: a chunk under part_bytes has 1 part",
               o.p && check_parts(&o, raw, 7, 700, 1 << 20, 1));
    free(o.p);

    /* variable shapes with zero-sized samples, including whole parts */
    enum { VS = 40 };
    uint32_t shapes[VS];
    size_t vraw = 0;
    for (int i = 0; i < VS; i++) {
        shapes[i] = (i % 7 == 3 || (i >= 10 && i < 16)) ? 0
                                                         : 600 + 37u * i;
        vraw += shapes[i];
    }
    uint8_t *rv = malloc(vraw);
    fill(rv, vraw, 5);
    uint32_t want = (uint32_t)((vraw + 4095) / 4096);
    o = enc(DLK_CODEC_NONE, 1, NULL, shapes, VS, rv, vraw, 4096, NULL);
    UNIT_CHECK("parts: variable shapes with zero-sized samples",
               o.p && check_parts(&o, rv, VS, vraw, 4096, want));
    size_t vat = table_at(&o, 1, true, VS);
    UNIT_CHECK("parts: variable table at pad8(offsets + shapes)",
               o.p && Dlk_get_le32(o.p + vat) == 4096 &&
               Dlk_get_le32(o.p + vat + 4) == want);
    free(o.p);

    /* all samples empty: one part, the hash of no bytes */
    uint32_t zero[4] = {0, 0, 0, 0};
    o = enc(DLK_CODEC_NONE, 1, NULL, zero, 4, NULL, 0, 4096, NULL);
    dlk_chunk *c = o.p ? load(o.p, o.len) : NULL;
    bool ok = c && Dlk_chunk_decode(c, NAME, DLK_DECODE_VERIFY |
                                    DLK_DECODE_VERIFY_PARTS, NULL, 0,
                                    NULL) == 0 &&
              c->nparts == 1 &&
              Dlk_get_le64(c->part_hash) == Dlk_hash64("", 0) &&
              Dlk_chunk_verify_parts(c, 0, 1, "", 0, NAME, NULL) == 0;
    UNIT_CHECK("parts: every sample empty: 1 part hashing no bytes", ok);
    dlk_chunk_free(c);
    free(o.p);

    /* scalars: no layout at all, the table right at the index's start */
    o = enc(DLK_CODEC_NONE, 0, NULL, NULL, 5000, raw, 5000, 4096, NULL);
    UNIT_CHECK("parts: scalars: table at the index's first byte, 2 parts",
               o.p && Dlk_get_le32(o.p + 64) == 4096 &&
               Dlk_get_le32(o.p + 68) == 2 &&
               check_parts(&o, raw, 5000, 5000, 4096, 2));
    free(o.p);

    /* the payload given in pieces (the writer's) makes the same object */
    obj whole = enc(DLK_CODEC_NONE, 1, NULL, shapes, VS, rv, vraw, 4096,
                    NULL);
    struct iovec iov[5];
    size_t cut[6] = {0, 1, 2000, 2001, vraw - 3, vraw};
    for (int i = 0; i < 5; i++)
        iov[i] = (struct iovec){rv + cut[i], cut[i + 1] - cut[i]};
    Dlk_chunk_enc e = {
        .dtype = DLK_U8, .codec = DLK_CODEC_NONE, .ndim = 1,
        .variable = true, .shapes = shapes, .samples = VS, .raw = NULL,
        .raw_bytes = vraw, .have_raw_hash = true,
        .raw_hash = Dlk_hash64(rv, vraw), .part_bytes = 4096, .iov = iov,
        .niov = 5,
    };
    Dlk_buf head;
    Dlk_buf_init(&head);
    bool follows = false;
    ok = whole.p && Dlk_chunk_encode_head(&e, &head, &follows, NULL) == 0 &&
         follows && head.len + vraw == whole.len &&
         memcmp(head.data, whole.p, head.len) == 0;
    UNIT_CHECK("parts: the head encoded from payload pieces is the whole "
               "encoding's", ok);
    e.niov = 4; /* pieces short of raw_bytes */
    UNIT_CHECK("parts: pieces that do not add up are refused",
               Dlk_chunk_encode_head(&e, &head, &follows, NULL) ==
                   DLK_EINTERNAL);
    e.iov = NULL;
    UNIT_CHECK("parts: no payload to hash is refused",
               Dlk_chunk_encode_head(&e, &head, &follows, NULL) ==
                   DLK_EINTERNAL);
    Dlk_buf_free(&head);
    free(whole.p);

    /* encoder limits */
    dlk_status rc;
    o = enc(DLK_CODEC_ZSTD, 2, shape, NULL, 7, raw, 700, 4096, &rc);
    UNIT_CHECK("parts: encoding parts with zstd is refused",
               !o.p && rc == DLK_EINVAL);
    o = enc(DLK_CODEC_NONE, 2, shape, NULL, 7, raw, 700, 4095, &rc);
    UNIT_CHECK("parts: encoding parts of 4095 bytes is refused",
               !o.p && rc == DLK_EINVAL);
    o = enc(DLK_CODEC_NONE, 2, shape, NULL, 7, raw, 700, (1u << 30) + 1, &rc);
    UNIT_CHECK("parts: encoding parts over 2^30 bytes is refused",
               !o.p && rc == DLK_EINVAL);
    o = enc(DLK_CODEC_NONE, 2, shape, NULL, 7, raw, 699, 4096, &rc);
    UNIT_CHECK("parts: a fixed-shape payload of the wrong size is refused",
               !o.p && rc == DLK_EINTERNAL);

    UNIT_CHECK("parts: counts and firsts",
               Dlk_parts_count(10, 0, 4096) == 1 &&
               Dlk_parts_count(10, 4096, 4096) == 1 &&
               Dlk_parts_count(10, 4097, 4096) == 2 &&
               Dlk_parts_count(2, 1 << 20, 4096) == 2 &&
               Dlk_parts_count(1u << 26, (uint64_t)2 << 30, 4096) ==
                   1u << 19 &&
               Dlk_parts_count(5, 100, 0) == 0 &&
               Dlk_part_first(0, 10, 3) == 0 &&
               Dlk_part_first(1, 10, 3) == 3 &&
               Dlk_part_first(2, 10, 3) == 6 &&
               Dlk_part_first(3, 10, 3) == 10 &&
               Dlk_part_first(1u << 19, 1u << 26, 1u << 19) == 1u << 26 &&
               Dlk_part_first(3, 7, 0) == 0);
    free(raw);
    free(r3);
    free(rv);
}

/* ---- rejections ----------------------------------------------------- */

static obj with_index_grown(const obj *o, size_t extra)
{
    uint64_t ib = Dlk_get_le64(o->p + O_INDEX);
    obj n = {calloc(1, o->len + extra), o->len + extra};
    memcpy(n.p, o->p, 64 + (size_t)ib);
    memcpy(n.p + 64 + ib + extra, o->p + 64 + ib, o->len - 64 - (size_t)ib);
    Dlk_put_le64(n.p + O_INDEX, ib + extra);
    reseal(&n);
    return n;
}

static void rejections(void)
{
    uint8_t raw[5000];
    fill(raw, sizeof raw, 9);
    int64_t shape[3] = {5, 2, 5}; /* 50 bytes, rank 3: a 4-byte gap */
    obj good = enc(DLK_CODEC_NONE, 3, shape, NULL, 100, raw, 5000, 4096,
                   NULL);
    size_t at = table_at(&good, 3, false, 100);
    UNIT_CHECK("parts: base chunk decodes",
               good.p && dec(&good, DLK_DECODE_VERIFY) == DLK_OK &&
               Dlk_get_le32(good.p + at + 4) == 2);
    if (!good.p)
        return;

    obj o = copy_obj(&good);
    Dlk_put_le32(o.p + at, 4095);
    reseal(&o);
    UNIT_CHECK("parts: part_bytes 4095 is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "part size"));
    Dlk_put_le32(o.p + at, (1u << 30) + 1);
    reseal(&o);
    UNIT_CHECK("parts: part_bytes 2^30+1 is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "part size"));
    free(o.p);

    o = copy_obj(&good);
    Dlk_put_le32(o.p + at + 4, 3);
    reseal(&o);
    UNIT_CHECK("parts: nparts 3 where the formula gives 2 is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "parts"));
    Dlk_put_le32(o.p + at + 4, 0xffffffffu);
    reseal(&o);
    UNIT_CHECK("parts: nparts 2^32-1 is corrupt (not read past the index)",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "parts"));
    /* part_bytes changed to one that gives another count */
    Dlk_put_le32(o.p + at + 4, 2);
    Dlk_put_le32(o.p + at, 8192);
    reseal(&o);
    UNIT_CHECK("parts: part_bytes that gives another count is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "parts"));
    free(o.p);

    o = copy_obj(&good);
    o.p[at - 2] = 1;
    reseal(&o);
    UNIT_CHECK("parts: a non-zero byte between layout and table is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "before the part table"));
    free(o.p);

    o = copy_obj(&good);
    size_t end = 64 + (size_t)Dlk_get_le64(o.p + O_INDEX);
    o.p[end - 1] = 1;
    reseal(&o);
    UNIT_CHECK("parts: non-zero padding after the table is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "padding"));
    free(o.p);

    o = with_index_grown(&good, 64);
    UNIT_CHECK("parts: an index longer than its table makes is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "part table makes"));
    free(o.p);

    o = copy_obj(&good);
    o.p[O_CODEC] = DLK_CODEC_ZSTD;
    reseal(&o);
    UNIT_CHECK("parts: PARTS with codec zstd is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "codec none"));
    free(o.p);

    o = copy_obj(&good);
    Dlk_put_le64(o.p + at + 8, Dlk_get_le64(o.p + at + 8) ^ 1);
    reseal(&o);
    UNIT_CHECK("parts: a wrong part hash: header fine, a verifying decode "
               "names part 0",
               dec(&o, DLK_DECODE_HEADER_ONLY) == DLK_OK &&
               dec(&o, 0) == DLK_OK &&
               corrupt(&o, DLK_DECODE_VERIFY | DLK_DECODE_VERIFY_PARTS,
                       "part 0 of 2"));
    free(o.p);

    /* a chunk without a table, the flag set: the index cannot hold one */
    obj plain = enc(DLK_CODEC_NONE, 0, NULL, NULL, 100, raw, 100, 0, NULL);
    o = copy_obj(&plain);
    o.p[O_FLAGS] |= DLK_CHUNK_FLAG_PARTS;
    reseal(&o);
    UNIT_CHECK("parts: PARTS on a chunk whose index has no room for the "
               "table is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "at least 64"));
    free(o.p);
    /* and a table's chunk with the flag cleared: its index is too long */
    o = copy_obj(&good);
    o.p[O_FLAGS] &= (uint8_t)~DLK_CHUNK_FLAG_PARTS;
    reseal(&o);
    UNIT_CHECK("parts: a table without the PARTS flag is corrupt",
               corrupt(&o, DLK_DECODE_HEADER_ONLY, "index"));
    free(o.p);
    free(plain.p);
    free(good.p);
}

/* ---- the head alone, against the manifest ---------------------------- */

static void tensor(Dlk_tensor *t, const char *text, uint32_t part_bytes)
{
    dlk_tensor_spec s;
    dlk_tensor_spec_parse(text, &s, NULL);
    s.part_bytes = part_bytes;
    Dlk_tensor_init(t, &s, NULL);
    t->spec.part_bytes = part_bytes; /* as a manifest gives it */
}

static void head_only(void)
{
    enum { S = 64, B = 300 };
    uint8_t *raw = malloc(S * B);
    fill(raw, S * B, 2);
    int64_t shape[2] = {10, 30};
    obj o = enc(DLK_CODEC_NONE, 2, shape, NULL, S, raw, S * B, 4096, NULL);
    Dlk_tensor t, t8, tnone, tz;
    tensor(&t, "x:u8:10x30", 4096);
    tensor(&t8, "x:u8:10x30", 8192);
    tensor(&tnone, "x:u8:10x30", 0);
    tensor(&tz, "x:u8:10x30:zstd", 0);
    Dlk_chunk_entry e = {.samples = S, .stored_bytes = o.len,
                         .raw_bytes = S * B};
    uint64_t head = 64 + Dlk_get_le64(o.p + O_INDEX);
    UNIT_CHECK("head: the manifest alone gives 64 + index_bytes",
               Dlk_chunk_expected_head(&t, &e) == head &&
               Dlk_chunk_expected_head(&tnone, &e) == 0 &&
               Dlk_chunk_expected_head(&tz, &e) == 64 + 64);
    Dlk_chunk_entry bad = e;
    bad.samples = 0;
    UNIT_CHECK("head: an entry out of range gives 0",
               Dlk_chunk_expected_head(&t, &bad) == 0);

    /* exactly the head: every check, part table included */
    dlk_chunk *c = load(o.p, (size_t)head);
    dlk_error err = {0};
    dlk_status rc = Dlk_chunk_open(c, &t, &e, NAME, DLK_DECODE_HEADER_ONLY,
                                   NULL, 0, &err);
    uint64_t off, len;
    bool ok = rc == DLK_OK && c->nparts == 5 &&
              Dlk_chunk_part_span(c, 1, 3, &off, &len) == 0 &&
              Dlk_chunk_verify_parts(c, 1, 3, raw + off, len, NAME, &err) ==
                  DLK_OK &&
              Dlk_chunk_sample_offset(c, 10) == 10 * B;
    if (!ok)
        printf("# %d %s\n", rc, err.msg);
    UNIT_CHECK("head: open from exactly 64 + index_bytes bytes, parts "
               "verified from their bytes alone", ok);
    dlk_chunk_free(c);

    /* one byte short of the index */
    c = load(o.p, (size_t)head - 1);
    rc = Dlk_chunk_open(c, &t, &e, NAME, DLK_DECODE_HEADER_ONLY, NULL, 0,
                        &err);
    UNIT_CHECK("head: one byte short of the index is refused",
               rc == DLK_ECORRUPT && strstr(err.msg, NAME));
    dlk_chunk_free(c);

    /* a head with a damaged index byte: the header hash still guards */
    c = load(o.p, (size_t)head);
    c->object.data[head - 1] ^= 1;
    rc = Dlk_chunk_open(c, &t, &e, NAME, DLK_DECODE_HEADER_ONLY, NULL, 0,
                        &err);
    UNIT_CHECK("head: a damaged head is refused",
               rc == DLK_ECORRUPT && strstr(err.msg, "checksum"));
    dlk_chunk_free(c);

    /* the whole object still opens head-only, and fully */
    c = load(o.p, o.len);
    rc = Dlk_chunk_open(c, &t, &e, NAME, DLK_DECODE_HEADER_ONLY, NULL, 0,
                        &err);
    UNIT_CHECK("head: the whole object opens header-only", rc == DLK_OK);
    dlk_chunk_free(c);
    c = load(o.p, (size_t)head);
    rc = Dlk_chunk_open(c, &t, &e, NAME, DLK_DECODE_VERIFY, NULL, 0, &err);
    UNIT_CHECK("head: a full open of just the head is refused",
               rc == DLK_ECORRUPT);
    dlk_chunk_free(c);

    /* step 19: the tensor's part_bytes against the chunk's */
    c = load(o.p, (size_t)head);
    rc = Dlk_chunk_open(c, &t8, &e, NAME, DLK_DECODE_HEADER_ONLY, NULL, 0,
                        &err);
    UNIT_CHECK("head: parts of another size than the tensor's are corrupt",
               rc == DLK_ECORRUPT && strstr(err.msg, "another size"));
    dlk_chunk_free(c);
    c = load(o.p, o.len);
    rc = Dlk_chunk_open(c, &tnone, &e, NAME, DLK_DECODE_VERIFY, NULL, 0,
                        &err);
    UNIT_CHECK("head: a tensor without part_bytes reads chunks with parts",
               rc == DLK_OK);
    dlk_chunk_free(c);
    obj plain = enc(DLK_CODEC_NONE, 2, shape, NULL, S, raw, S * B, 0, NULL);
    Dlk_chunk_entry ep = e;
    ep.stored_bytes = plain.len;
    c = load(plain.p, plain.len);
    rc = Dlk_chunk_open(c, &t, &ep, NAME, DLK_DECODE_HEADER_ONLY, NULL, 0,
                        &err);
    UNIT_CHECK("head: a chunk without parts of a tensor with part_bytes is "
               "corrupt", rc == DLK_ECORRUPT && strstr(err.msg, "no parts"));
    dlk_chunk_free(c);
    c = load(plain.p, plain.len);
    rc = Dlk_chunk_open(c, &tnone, &ep, NAME, DLK_DECODE_VERIFY, NULL, 0,
                        &err);
    UNIT_CHECK("head: a tensor without part_bytes reads chunks without",
               rc == DLK_OK && c->nparts == 0 && c->part_hash == NULL);
    dlk_chunk_free(c);
    free(plain.p);
    Dlk_tensor_fini(&t);
    Dlk_tensor_fini(&t8);
    Dlk_tensor_fini(&tnone);
    Dlk_tensor_fini(&tz);
    free(o.p);
    free(raw);
}

/* ---- datasets ------------------------------------------------------- */

static char root[256];

static int append_rows(dlk_dataset *ds, int from, int to)
{
    uint8_t p[3000];
    int bad = 0;
    for (int i = from; i < to; i++) {
        int64_t sh[1] = {1000 + (i % 5) * 400};
        fill(p, (size_t)sh[0], (unsigned)i);
        int64_t fs[1] = {500};
        bad += dlk_append(ds, 0, p, 500, fs, 1, NULL) != DLK_OK;
        bad += dlk_append(ds, 1, p, (size_t)sh[0], sh, 1, NULL) != DLK_OK;
        bad += dlk_append(ds, 2, p, 500, fs, 1, NULL) != DLK_OK;
    }
    return bad;
}

static int chunks_with_parts(const dlk_dataset *ds, size_t ti, int *without)
{
    const Dlk_tensor *t = &ds->m.tensors[ti];
    int with = 0;
    *without = 0;
    for (size_t k = 0; k < t->nchunks; k++) {
        char key[DLK_CHUNK_KEY_MAX];
        Dlk_chunk_key(key, t->spec.name, t->chunks[k].key);
        Dlk_buf b;
        Dlk_buf_init(&b);
        Dlk_chunk_header h;
        if (Dlk_store_get(ds->store, key, UINT64_MAX, &b, NULL, NULL) ||
            Dlk_chunk_parse_header(b.data, b.len, key, &h, NULL))
            (*without) += 1000;
        else if (h.flags & DLK_CHUNK_FLAG_PARTS)
            with++;
        else
            (*without)++;
        Dlk_buf_free(&b);
    }
    return with;
}

static char problems[4096];
static void on_problem(void *ud, const char *object, const char *why)
{
    (void)ud;
    size_t n = strlen(problems);
    snprintf(problems + n, sizeof problems - n, "%s: %s\n", object, why);
}

static void datasets(void)
{
    snprintf(root, sizeof root, "%s/dlk-parts-%d",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) {}
    dlk_tensor_spec s[3];
    dlk_tensor_spec_parse("fix:u8:500", &s[0], NULL);
    dlk_tensor_spec_parse("var:u8:?", &s[1], NULL);
    dlk_tensor_spec_parse("z:u8:500:zstd", &s[2], NULL);
    s[1].part_bytes = 4096;
    for (int i = 0; i < 3; i++)
        s[i].chunk_bytes = 20000;
    dlk_dataset *ds = NULL;
    dlk_status rc = dlk_dataset_create(root, s, 3, &ds, NULL);
    UNIT_CHECK("dataset: created", rc == DLK_OK);
    if (rc)
        return;
    UNIT_CHECK("dataset: codec none gets parts of 1 MiB by default, an "
               "explicit size is kept, zstd gets none",
               ds->m.tensors[0].spec.part_bytes == DLK_DEFAULT_PART_BYTES &&
               ds->m.tensors[1].spec.part_bytes == 4096 &&
               ds->m.tensors[2].spec.part_bytes == 0);
    int bad = append_rows(ds, 0, 60);
    rc = dlk_dataset_flush(ds, NULL);
    int w0, w1, w2, wo0, wo1, wo2;
    w0 = chunks_with_parts(ds, 0, &wo0);
    w1 = chunks_with_parts(ds, 1, &wo1);
    w2 = chunks_with_parts(ds, 2, &wo2);
    UNIT_CHECK("dataset: every chunk of a tensor with part_bytes has parts, "
               "none of zstd", !bad && rc == DLK_OK && w0 > 1 && !wo0 &&
               w1 > 1 && !wo1 && w2 == 0 && wo2 > 1);
    dlk_dataset_close(ds, NULL);

    /* the manifest carries the member; reopened, it is kept */
    Dlk_buf b;
    Dlk_buf_init(&b);
    Dlk_store *st = NULL;
    Dlk_store_open(root, false, NULL, &st, NULL);
    Dlk_store_get(st, DLK_KEY_HEAD, UINT64_MAX, &b, NULL, NULL);
    Dlk_buf_append(&b, "", 1, NULL);
    const char *m = (const char *)b.data;
    UNIT_CHECK("dataset: manifest has part_bytes 1048576 and 4096, not for "
               "zstd",
               m && strstr(m, "\"part_bytes\":1048576") &&
               strstr(m, "\"part_bytes\":4096") &&
               !strstr(strstr(m, "\"name\":\"z\""), "part_bytes"));

    /* an existing tensor without the member keeps writing chunks without
     * parts: drop the member of "fix" from the head */
    char *text = strdup(m);
    char *at = strstr(text, ",\"part_bytes\":1048576");
    if (at)
        memmove(at, at + strlen(",\"part_bytes\":1048576"),
                strlen(at + strlen(",\"part_bytes\":1048576")) + 1);
    Dlk_store_put(st, DLK_KEY_HEAD, text, strlen(text), DLK_PUT_ALWAYS, NULL,
                  NULL, NULL);
    free(text);
    Dlk_buf_free(&b);
    rc = dlk_dataset_open(root, NULL, &ds, NULL);
    int before = rc ? 0 : (int)ds->m.tensors[0].nchunks;
    bad = rc ? 1 : append_rows(ds, 60, 200);
    if (!rc)
        rc = dlk_dataset_flush(ds, NULL);
    w0 = rc ? 0 : chunks_with_parts(ds, 0, &wo0);
    UNIT_CHECK("dataset: a tensor without the member appends chunks "
               "without parts (its older chunks keep theirs)",
               !rc && !bad && ds->m.tensors[0].spec.part_bytes == 0 &&
               (int)ds->m.tensors[0].nchunks > before + 1 &&
               wo0 >= (int)ds->m.tensors[0].nchunks - before && w0 > 0);
    dlk_verify_opts vo = {.size = sizeof vo,
                          .deep = true, .on_problem = on_problem};
    dlk_verify_result vr = DLK_VERIFY_RESULT_INIT;
    problems[0] = 0;
    rc = rc ? rc : dlk_verify(ds, &vo, &vr, NULL);
    UNIT_CHECK("dataset: verify --deep passes", rc == DLK_OK &&
               vr.problems == 0);
    if (problems[0])
        printf("# %s", problems);

    /* one payload byte of one part of "var" damaged on disk */
    const Dlk_tensor *tv = &ds->m.tensors[1];
    const Dlk_chunk_entry *e = &tv->chunks[0];
    char key[DLK_CHUNK_KEY_MAX], path[600];
    Dlk_chunk_key(key, tv->spec.name, e->key);
    dlk_chunk *c = NULL;
    rc = rc ? rc : Dlk_chunk_load(ds, tv, e, DLK_DECODE_HEADER_ONLY, NULL, 0,
                                  &c, NULL);
    uint64_t off = 0, len = 0;
    bool ok = !rc && c->nparts >= 3 &&
              Dlk_chunk_part_span(c, 2, 3, &off, &len) == 0 && len > 0;
    if (ok) {
        snprintf(path, sizeof path, "%s/%s", root, key);
        int fd = open(path, O_RDWR);
        uint8_t x;
        off_t at2 = (off_t)(64 + c->h.index_bytes + off + len - 1);
        ok = fd >= 0 && pread(fd, &x, 1, at2) == 1;
        x ^= 0x40;
        ok = ok && pwrite(fd, &x, 1, at2) == 1;
        if (fd >= 0)
            close(fd);
    }
    char want[64];
    snprintf(want, sizeof want, "part 2 of %u", c ? c->nparts : 0);
    dlk_chunk_free(c);
    problems[0] = 0;
    ok = ok && dlk_verify(ds, &vo, &vr, NULL) == DLK_OK &&
         vr.problems >= 1 && strstr(problems, key) &&
         strstr(problems, want);
    if (!ok)
        printf("# %s", problems);
    UNIT_CHECK("dataset: verify --deep names the damaged part", ok);
    dlk_dataset_close(ds, NULL);
    Dlk_store_free(st);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd)) {}
}

int main(void)
{
    round_trips();
    rejections();
    head_only();
    datasets();
    return unit_done();
}
