/* gen_seeds.c - writes the seed corpora of fuzz_chunk and fuzz_manifest:
 * small valid chunks (fixed and variable shapes, codecs none and zstd,
 * several dtypes) and manifests.  `make -f tests/fuzz/Makefile seeds`. */
#include "internal.h"

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
    dlk_chunk_enc e = {
        .dtype = dt, .codec = codec, .ndim = ndim, .variable = shapes != NULL,
        .shape = shape, .shapes = shapes, .samples = samples, .raw = data,
        .raw_bytes = raw,
    };
    dlk_buf out;
    dlk_buf_init(&out);
    dlk_error err;
    if (dlk_chunk_encode(&e, &out, &err))
        die(name, &err);
    save("fuzz_chunk", name, out.data, out.len);
    dlk_buf_free(&out);
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
}

static void manifest(const char *name, const char *const *specs, size_t n,
                     const char *parent, uint32_t nchunks)
{
    dlk_manifest m = {0};
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
        if (dlk_tensor_init(&m.tensors[i], &s, &err))
            die(specs[i], &err);
        m.ntensors = i + 1;
        for (uint32_t c = 0; c < nchunks; c++) {
            dlk_chunk_entry e = {0};
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
            if (dlk_tensor_add_chunk(&m.tensors[i], &e, smin, smax, &err))
                die(name, &err);
        }
    }
    char *text;
    size_t len;
    if (dlk_manifest_dump(&m, &text, &len, &err))
        die(name, &err);
    save("fuzz_manifest", name, text, len);
    free(text);
    dlk_manifest_free(&m);
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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_seeds CORPUS-DIR\n");
        return 2;
    }
    root = argv[1];
    mkdir(root, 0777);
    chunks();
    manifests();
    return 0;
}
