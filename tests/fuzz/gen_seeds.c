/* gen_seeds.c - writes the seed corpora of fuzz_chunk and fuzz_manifest:
 * small valid chunks (fixed and variable shapes, codecs none and zstd,
 * several dtypes) and manifests; and, given a second directory, the
 * hand-made hostile inputs of tests/corrupt/{chunk,manifest,dataset_json}.
 *
 *   gen_seeds CORPUS-DIR [CORRUPT-DIR]
 *   make -f tests/fuzz/Makefile seeds      (both) */
#include "util/buf.h"
#include "util/bytes.h"
#include "util/hash.h"
#include "format/chunk.h"
#include "format/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *root;

static void die(const char *what, const dlk_error *err)
{
    fprintf(stderr, "gen_seeds: %s: %s\n", what, err ? err->msg : strerror(errno));
    exit(1);
}

static void save(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f))
        die(path, NULL);
}

static Dlk_buf last_chunk;   /* the object chunk() encoded last */
static uint32_t part_bytes;  /* chunk() writes part tables of this size */

static void chunk(const char *name, dlk_dtype dt, dlk_codec codec, int ndim,
                  const int64_t *shape, const uint32_t *shapes,
                  uint32_t samples)
{
    /* payload size from the shapes */
    size_t raw = 0, es = dlk_dtype_size(dt);
    for (uint32_t s = 0; s < samples; s++) {
        size_t n = es;
        for (int d = 0; d < ndim; d++)
            n *= shapes ? shapes[(size_t)s * ndim + d] : (size_t)shape[d];
        raw += n;
    }
    uint8_t *data = malloc(raw ? raw : 1);
    for (size_t i = 0; i < raw; i++)   /* compressible, not constant */
        data[i] = (uint8_t)((i * 7) / 5);
    if (dt == DLK_BOOL)
        for (size_t i = 0; i < raw; i++)
            data[i] &= 1;
    Dlk_chunk_enc e = {
        .dtype = dt, .codec = codec, .ndim = ndim, .variable = shapes != NULL,
        .shape = shape, .shapes = shapes, .samples = samples, .raw = data,
        .raw_bytes = raw, .part_bytes = part_bytes,
    };
    Dlk_buf out;
    Dlk_buf_init(&out);
    dlk_error err;
    if (Dlk_chunk_encode(&e, &out, &err))
        die(name, &err);
    if (name)
        save("fuzz_chunk", name, out.data, out.len);
    Dlk_buf_free(&last_chunk);
    last_chunk = out;
    free(data);
}

static void chunks(void)
{
    int64_t img[3] = {4, 4, 3}, vec[1] = {5}, zero[2] = {0, 3};
    chunk("u8-4x4x3-none", DLK_U8, DLK_CODEC_NONE, 3, img, NULL, 3);
    chunk("u8-4x4x3-zstd", DLK_U8, DLK_CODEC_ZSTD, 3, img, NULL, 3);
    chunk("i32-scalar-none", DLK_I32, DLK_CODEC_NONE, 0, NULL, NULL, 10);
    chunk("i64-scalar-zstd", DLK_I64, DLK_CODEC_ZSTD, 0, NULL, NULL, 10);
    chunk("f32-5-none", DLK_F32, DLK_CODEC_NONE, 1, vec, NULL, 4);
    chunk("f16-5-zstd", DLK_F16, DLK_CODEC_ZSTD, 1, vec, NULL, 4);
    chunk("bool-5-none", DLK_BOOL, DLK_CODEC_NONE, 1, vec, NULL, 2);
    chunk("u16-0x3-none", DLK_U16, DLK_CODEC_NONE, 2, zero, NULL, 5);
    uint32_t v2[] = {2, 3, 1, 3, 4, 3};            /* ?x3, 3 samples */
    chunk("i16-var-none", DLK_I16, DLK_CODEC_NONE, 2, NULL, v2, 3);
    chunk("i16-var-zstd", DLK_I16, DLK_CODEC_ZSTD, 2, NULL, v2, 3);
    uint32_t v1[] = {3, 0, 7, 1};                   /* ?, 4 samples */
    chunk("u8-var1-none", DLK_U8, DLK_CODEC_NONE, 1, NULL, v1, 4);
    chunk("f64-var1-zstd", DLK_F64, DLK_CODEC_ZSTD, 1, NULL, v1, 4);
    uint32_t v3[] = {2, 2, 3, 1, 1, 3};             /* ?x?x3, 2 samples */
    chunk("bf16-var3-zstd", DLK_BF16, DLK_CODEC_ZSTD, 3, NULL, v3, 2);
    /* part tables (codec none): several parts, a rank with a gap before
     * the table, and variable shapes with an empty sample */
    part_bytes = 4096;
    int64_t row[1] = {3000}, odd[3] = {10, 10, 15};
    chunk("u8-3000-parts", DLK_U8, DLK_CODEC_NONE, 1, row, NULL, 5);
    chunk("u8-10x10x15-parts", DLK_U8, DLK_CODEC_NONE, 3, odd, NULL, 7);
    uint32_t vp[] = {2000, 0, 2500, 1, 3000, 700};
    chunk("u16-var1-parts", DLK_U16, DLK_CODEC_NONE, 1, NULL, vp, 6);
    part_bytes = 0;
}

static void manifest(const char *name, const char *const *specs, size_t n,
                     const char *parent, uint32_t nchunks)
{
    Dlk_manifest m = {0};
    dlk_error err;
    m.tensors = calloc(n, sizeof *m.tensors);
    m.parent = parent ? strdup(parent) : NULL;
    for (size_t i = 0; i < n; i++) {
        dlk_tensor_spec s;
        if (dlk_tensor_spec_parse(specs[i], &s, &err))
            die(specs[i], &err);
        static const char *const classes[] = {"cat", "dog", "bird"};
        if (s.kind == DLK_KIND_CLASS_LABEL) {
            s.class_names = classes;
            s.n_class_names = 3;
        }
        if (Dlk_tensor_init(&m.tensors[i], &s, &err))
            die(specs[i], &err);
        m.ntensors = i + 1;
        for (uint32_t c = 0; c < nchunks; c++) {
            Dlk_chunk_entry e = {0};
            snprintf(e.key, sizeof e.key, "%08x%08x%08x%08x", c * 2654435761u,
                     (unsigned)i, 0xdeadbeefu, c);
            e.samples = 100 + c;
            e.raw_bytes = (uint64_t)e.samples * 12;
            e.stored_bytes = 64 + e.raw_bytes / 2;
            int64_t smin[DLK_MAX_NDIM], smax[DLK_MAX_NDIM];
            for (int d = 0; d < s.ndim; d++) {
                smin[d] = s.shape[d] < 0 ? 1 + c : s.shape[d];
                smax[d] = s.shape[d] < 0 ? 50 + c : s.shape[d];
            }
            if (Dlk_tensor_add_chunk(&m.tensors[i], &e, smin, smax, &err))
                die(name, &err);
        }
    }
    char *text;
    size_t len;
    if (Dlk_manifest_dump(&m, &text, &len, &err))
        die(name, &err);
    save("fuzz_manifest", name, text, len);
    free(text);
    Dlk_manifest_free(&m);
}

static void manifests(void)
{
    static const char *const one[] = {"images:u8:8x8x3:zstd"};
    static const char *const two[] = {"images:u8:?x?x3:zstd5", "labels:i32"};
    static const char *const many[] = {"a:f32:10", "b:u16:2x2:none",
                                       "c.d-e_f:bool", "clip:u8:?x4x4x3",
                                       "t:i64:?:zstd22"};
    manifest("empty-images", one, 1, NULL, 0);
    manifest("images-3chunks", one, 1, NULL, 3);
    manifest("images-labels", two, 2, "0123456789abcdef0123456789abcdef", 2);
    manifest("five-tensors", many, 5, NULL, 1);
    const char *handwritten =
        "{\"format\": \"dlk\", \"version\": 1, \"parent\": null, \"tensors\": "
        "[{\"name\": \"x\", \"dtype\": \"f64\", \"kind\": \"generic\", "
        "\"shape\": [-1, 2], \"codec\": \"none\", \"chunk_bytes\": 1024, "
        "\"samples\": 3, \"shape_min\": [1, 2], \"shape_max\": [9, 2], "
        "\"chunks\": [[\"00000000000000000000000000000000\", 3, 100, 48]]}]}";
    save("fuzz_manifest", "handwritten", handwritten, strlen(handwritten));
}

/* ---- hostile inputs ------------------------------------------------ */

typedef struct obj { uint8_t *p; size_t len; } obj;

static obj take(void)
{
    obj o = {malloc(last_chunk.len), last_chunk.len};
    memcpy(o.p, last_chunk.data, last_chunk.len);
    return o;
}

/* Recompute the header checksum: the check under test must refuse it. */
static void reseal(obj *o)
{
    uint64_t ib = Dlk_get_le64(o->p + 16);
    if (ib <= o->len - DLK_CHUNK_HEADER_BYTES)
        Dlk_put_le64(o->p + 56, Dlk_hash64_2(o->p, 56, o->p + 64, (size_t)ib));
}

static void out(obj *o, const char *name, bool seal)
{
    if (seal)
        reseal(o);
    save("chunk", name, o->p, o->len);
    free(o->p);
}

/* Replace the payload of o (header fields and hashes updated). */
static void payload(obj *o, const void *pl, size_t n)
{
    size_t head = 64 + (size_t)Dlk_get_le64(o->p + 16);
    o->p = realloc(o->p, head + n);
    memcpy(o->p + head, pl, n);
    o->len = head + n;
    Dlk_put_le64(o->p + 24, n);
    Dlk_put_le64(o->p + 48, Dlk_hash64(pl, n));
}

/* Where the index holds the little-endian values v[0..n) of `width`
 * bytes each (the layout is not hard-coded here); exits if absent. */
static size_t find_seq(const obj *o, int width, const uint64_t *v, size_t n)
{
    size_t end = 64 + (size_t)Dlk_get_le64(o->p + 16);
    for (size_t at = 64; at + n * width <= end; at++) {
        size_t i = 0;
        for (; i < n; i++) {
            const uint8_t *q = o->p + at + i * width;
            if ((width == 4 ? Dlk_get_le32(q) : Dlk_get_le64(q)) != v[i])
                break;
        }
        if (i == n)
            return at;
    }
    fprintf(stderr, "gen_seeds: sequence not found in the index\n");
    exit(1);
}

static void bad_chunks(void)
{
    int64_t img[3] = {4, 4, 3};
    obj o;
    chunk(NULL, DLK_U8, DLK_CODEC_NONE, 3, img, NULL, 3);
    o = take(); o.len = 20; out(&o, "short-header", false);
    o = take(); o.len -= 1; out(&o, "truncated-payload", false);
    o = take(); memcpy(o.p, "DLKX", 4); out(&o, "bad-magic", false);
    o = take(); Dlk_put_le16(o.p + 4, 2); out(&o, "version-2", true);
    o = take(); o.p[6] = 0; out(&o, "dtype-0", true);
    o = take(); o.p[7] = 9; out(&o, "codec-9", true);
    o = take(); o.p[8] = 9; out(&o, "ndim-9", true);
    o = take(); o.p[9] = 0x80; out(&o, "flags-reserved", true);
    o = take(); o.p[10] = 1; out(&o, "reserved-field", true);
    o = take(); Dlk_put_le32(o.p + 12, 0); out(&o, "samples-0", true);
    o = take(); Dlk_put_le32(o.p + 12, UINT32_MAX); out(&o, "samples-huge", true);
    o = take(); Dlk_put_le64(o.p + 16, o.len); out(&o, "index-past-end", false);
    o = take(); Dlk_put_le64(o.p + 24, 1u << 30); out(&o, "stored-past-end", true);
    o = take(); Dlk_put_le64(o.p + 24, UINT64_MAX - 10); out(&o, "stored-overflow", true);
    o = take(); Dlk_put_le64(o.p + 32, DLK_CHUNK_MAX_RAW + 1); out(&o, "raw-over-limit", true);
    o = take(); o.p[57] ^= 1; out(&o, "header-checksum", false);
    o = take(); o.p[o.len - 5] ^= 0x20; out(&o, "payload-checksum", false);
    o = take(); Dlk_put_le32(o.p + 64, 5); out(&o, "fixed-shape-mismatch", true);
    o = take();
    for (int d = 0; d < 3; d++)
        Dlk_put_le32(o.p + 64 + 4 * d, UINT32_MAX);
    out(&o, "fixed-shape-overflow", true);

    uint32_t v[6] = {2, 3, 1, 3, 4, 3};   /* i16 ?x3: offsets 0 12 18 42 */
    chunk(NULL, DLK_I16, DLK_CODEC_NONE, 2, NULL, v, 3);
    static const uint64_t want_offs[4] = {0, 12, 18, 42};
    static const uint64_t want_dims[6] = {2, 3, 1, 3, 4, 3};
    o = take();
    size_t offs = find_seq(&o, 8, want_offs, 4);
    size_t dims = find_seq(&o, 4, want_dims, 6);
    Dlk_put_le64(o.p + offs + 8, 18);
    Dlk_put_le64(o.p + offs + 16, 12);
    out(&o, "var-offsets-unordered", true);
    o = take(); Dlk_put_le64(o.p + offs, 2); out(&o, "var-first-offset", true);
    o = take(); Dlk_put_le32(o.p + dims, 3); out(&o, "var-shape-mismatch", true);
    o = take(); Dlk_put_le64(o.p + offs + 24, 40); out(&o, "var-end-mismatch", true);
    o = take();
    Dlk_put_le32(o.p + dims, UINT32_MAX);
    Dlk_put_le32(o.p + dims + 4, UINT32_MAX);
    out(&o, "var-shape-overflow", true);
    o = take(); o.p[9] = 0; out(&o, "var-flag-cleared", true);

    int64_t vec[1] = {12};
    chunk(NULL, DLK_U32, DLK_CODEC_ZSTD, 1, vec, NULL, 4);
    uint8_t bomb[16] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0};
    Dlk_put_le64(bomb + 5, (uint64_t)1 << 40);
    bomb[13] = 0x01;
    o = take(); payload(&o, bomb, sizeof bomb); out(&o, "zstd-content-2e40", true);
    o = take(); payload(&o, bomb, sizeof bomb);
    Dlk_put_le64(o.p + 32, (uint64_t)1 << 40); out(&o, "zstd-bomb-header", true);
    uint8_t liar[26] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0};
    Dlk_put_le64(liar + 5, 192);
    liar[13] = 0x01 | (10 << 3);
    o = take(); payload(&o, liar, sizeof liar); out(&o, "zstd-short-content", true);
    size_t head = 64 + (size_t)Dlk_get_le64(last_chunk.data + 16);
    size_t stored = last_chunk.len - head;
    uint8_t *two = malloc(2 * stored);
    memcpy(two, last_chunk.data + head, stored);
    memcpy(two + stored, last_chunk.data + head, stored);
    o = take(); payload(&o, two, 2 * stored); out(&o, "zstd-two-frames", true);
    o = take(); payload(&o, two, stored - 3); out(&o, "zstd-truncated-frame", true);
    o = take(); payload(&o, "not a zstd frame", 16); out(&o, "zstd-not-a-frame", true);
    free(two);
}

static void text(const char *dir, const char *name, const char *t)
{
    save(dir, name, t, strlen(t));
}

#define T0 "{\"format\":\"dlk\",\"version\":1,\"parent\":null,\"tensors\":["
#define TX(name, extra) "{\"name\":\"" name "\",\"dtype\":\"u8\",\"kind\":" \
    "\"generic\",\"shape\":[4],\"codec\":\"none\",\"chunk_bytes\":4096," extra "}"
#define K "\"0123456789abcdef0123456789abcdef\""

static void bad_manifests(void)
{
    size_t n = 4096;
    char *deep = malloc(2 * n + 64);
    strcpy(deep, T0);
    size_t k = strlen(deep);
    memset(deep + k, '[', n);
    memset(deep + k + n, ']', n);
    strcpy(deep + k + 2 * n, "]}");
    text("manifest", "deep-nesting", deep);
    free(deep);
    char *many = malloc(2 * 4097 + 64);
    strcpy(many, T0);
    k = strlen(many);
    for (int i = 0; i < 4097; i++) {
        many[k++] = '0';
        many[k++] = ',';
    }
    strcpy(many + k - 1, "]}");
    text("manifest", "4097-tensors", many);
    free(many);
    text("manifest", "not-json", "{\"format\":\"dlk\",");
    text("manifest", "empty", "");
    text("manifest", "version-2",
         "{\"format\":\"dlk\",\"version\":2,\"tensors\":[]}");
    text("manifest", "version-1e400",
         "{\"format\":\"dlk\",\"version\":1e400,\"tensors\":[]}");
    text("manifest", "samples-huge-int", T0 TX("x", "\"samples\":"
         "99999999999999999999999,\"chunks\":[]") "]}");
    text("manifest", "dup-tensor", T0 TX("x", "\"samples\":0,\"chunks\":[]")
         "," TX("x", "\"samples\":0,\"chunks\":[]") "]}");
    text("manifest", "dup-key", T0 TX("x", "\"samples\":0,\"samples\":0,"
         "\"chunks\":[]") "]}");
    text("manifest", "name-traversal", T0 TX("../../etc", "\"samples\":0,"
         "\"chunks\":[]") "]}");
    text("manifest", "chunk-key-traversal", T0 TX("x", "\"samples\":1,"
         "\"chunks\":[[\"../../../../../../etc/passwd\",1,68,4]]") "]}");
    text("manifest", "chunk-key-short", T0 TX("x", "\"samples\":1,"
         "\"chunks\":[[\"0123\",1,68,4]]") "]}");
    text("manifest", "chunk-entry-object", T0 TX("x", "\"samples\":1,"
         "\"chunks\":[{\"key\":" K "}]") "]}");
    text("manifest", "chunk-samples-0", T0 TX("x", "\"samples\":0,"
         "\"chunks\":[[" K ",0,68,0]]") "]}");
    text("manifest", "chunk-raw-over-limit", T0 TX("x", "\"samples\":1,"
         "\"chunks\":[[" K ",1,68,4294967296]]") "]}");
    text("manifest", "stored-sum-overflow", T0 TX("x", "\"samples\":2,"
         "\"chunks\":[[" K ",1,9223372036854775807,4],"
         "[" K ",1,9223372036854775807,4]]") "]}");
    text("manifest", "samples-mismatch", T0 TX("x", "\"samples\":2,"
         "\"chunks\":[[" K ",1,68,4]]") "]}");
    text("manifest", "shape-9-dims", T0 "{\"name\":\"x\",\"dtype\":\"u8\","
         "\"kind\":\"generic\",\"shape\":[1,1,1,1,1,1,1,1,1],\"codec\":"
         "\"none\",\"chunk_bytes\":4096,\"samples\":0,\"chunks\":[]}]}");
    text("manifest", "dtype-unknown", T0 "{\"name\":\"x\",\"dtype\":\"u9\","
         "\"kind\":\"generic\",\"shape\":[],\"codec\":\"none\","
         "\"chunk_bytes\":4096,\"samples\":0,\"chunks\":[]}]}");
    text("manifest", "level-with-none", T0 TX("x", "\"level\":3,\"samples\":0,"
         "\"chunks\":[]") "]}");
    text("manifest", "nul-in-string", T0 TX("x\\u0000y", "\"samples\":0,"
         "\"chunks\":[]") "]}");
    text("manifest", "tensors-object",
         "{\"format\":\"dlk\",\"version\":1,\"tensors\":{}}");

    text("dataset_json", "not-json", "{\"format\": \"dlk\", \"version\": 1,");
    text("dataset_json", "empty", "");
    text("dataset_json", "array", "[\"dlk\", 1]");
    text("dataset_json", "no-format", "{\"version\": 1, \"id\": \"abc\"}");
    text("dataset_json", "version-2",
         "{\"format\": \"dlk\", \"version\": 2, \"id\": \"abc\"}");
    text("dataset_json", "version-string",
         "{\"format\": \"dlk\", \"version\": \"1\", \"id\": \"abc\"}");
    text("dataset_json", "no-id", "{\"format\": \"dlk\", \"version\": 1}");
    text("dataset_json", "id-number",
         "{\"format\": \"dlk\", \"version\": 1, \"id\": 7}");
    text("dataset_json", "id-empty",
         "{\"format\": \"dlk\", \"version\": 1, \"id\": \"\"}");
    text("dataset_json", "id-too-long",
         "{\"format\": \"dlk\", \"version\": 1, \"id\": "
         "\"0123456789abcdef0123456789abcdef"
         "0123456789abcdef0123456789abcdef\"}");   /* 64 bytes: 1..63 */
    char *d = malloc(8 * 1024 + 64);
    strcpy(d, "{\"format\": \"dlk\", \"version\": 1, \"x\": ");
    k = strlen(d);
    memset(d + k, '[', 4096);
    strcpy(d + k + 4096, "}");
    text("dataset_json", "deep-nesting", d);
    free(d);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: gen_seeds CORPUS-DIR [CORRUPT-DIR]\n");
        return 2;
    }
    root = argv[1];
    mkdir(root, 0777);
    chunks();
    manifests();
    if (argc == 3) {
        root = argv[2];
        mkdir(root, 0777);
        bad_chunks();
        bad_manifests();
    }
    Dlk_buf_free(&last_chunk);
    return 0;
}
