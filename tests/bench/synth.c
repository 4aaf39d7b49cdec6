/* synth.c - make a benchmark dataset fast through libdlk: N images of
 * HxWx3 u8 (smooth gradients, a moving disc and mild noise: compressible
 * like photos, not constant, not pure noise) and i32 labels: i mod 1000,
 * or with sorted:K, K classes stored in class order (row i of class
 * i*K/N, as a class-folder tree ingested --order sorted).  With vec,
 * a tensor of H*W bytes a row instead (H*W u8, each row its index and
 * noise): rows as small as the loader's plan, to measure what it costs
 * per row.
 *
 *   synth DATASET N H W [zstd] [sorted:K] [vec]
 */
#include "dlk.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: synth DATASET N H W [zstd] [sorted:K] [vec]\n");
        return 2;
    }
    const char *url = argv[1];
    long n = atol(argv[2]), h = atol(argv[3]), w = atol(argv[4]);
    int zstd = 0, vec = 0;
    long sorted = 0;
    for (int a = 5; a < argc; a++) {
        if (strcmp(argv[a], "zstd") == 0)
            zstd = 1;
        else if (strncmp(argv[a], "sorted:", 7) == 0)
            sorted = atol(argv[a] + 7);
        else if (strcmp(argv[a], "vec") == 0)
            vec = 1;
    }
    char spec[128];
    if (vec)
        snprintf(spec, sizeof spec, "images:u8:%ld%s", h * w,
                 zstd ? ":zstd1" : "");
    else
        snprintf(spec, sizeof spec, "images:u8:%ldx%ldx3%s", h, w,
                 zstd ? ":zstd1" : "");
    dlk_tensor_spec s[2];
    dlk_error err;
    if (dlk_tensor_spec_parse(spec, &s[0], &err) ||
        dlk_tensor_spec_parse("labels:i32", &s[1], &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    dlk_dataset *ds;
    if (dlk_dataset_create(url, s, 2, &ds, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t bytes = (size_t)h * w * (vec ? 1 : 3);
    if (vec) {
        uint8_t row[4096];
        uint64_t x = 88172645463325252ull;
        int64_t shape1[1] = {h * w};
        if (bytes > sizeof row || bytes < sizeof(long)) {
            fprintf(stderr, "synth: vec rows are 8 to 4096 bytes\n");
            return 2;
        }
        for (long i = 0; i < n; i++) {
            for (size_t k = 0; k < bytes; k++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                row[k] = (uint8_t)x;
            }
            memcpy(row, &i, sizeof i);
            int32_t label = sorted > 0 ? (int32_t)(i * sorted / n)
                                       : (int32_t)(i % 1000);
            if (dlk_append(ds, 0, row, bytes, shape1, 1, &err) ||
                dlk_append(ds, 1, &label, 4, NULL, 0, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
        }
        if (dlk_dataset_close(ds, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        return 0;
    }
    /* 16 base images, each sample a base with its index stamped in and a
     * row shifted: fast to make, every sample distinct */
    enum { BASES = 16 };
    uint8_t *base = malloc(bytes * BASES), *img = malloc(bytes);
    uint64_t x = 88172645463325252ull;
    int64_t shape[3] = {h, w, 3};
    for (long b = 0; b < BASES; b++) {
        long cx = (b * 37) % w, cy = (b * 53) % h, r = 20 + b * 3;
        for (long y = 0; y < h; y++)
            for (long xx = 0; xx < w; xx++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                int noise = (int)(x & 7) - 3;
                bool disc = (xx - cx) * (xx - cx) + (y - cy) * (y - cy) < r * r;
                uint8_t *p = base + b * bytes + (y * w + xx) * 3;
                for (int c = 0; c < 3; c++) {
                    int v = disc ? 40 + 90 * c
                                 : (int)((xx * (c + 1) + y * (3 - c) + b) % 256);
                    v += noise;
                    p[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
            }
    }
    for (long i = 0; i < n; i++) {
        memcpy(img, base + (i % BASES) * bytes, bytes);
        memcpy(img, &i, sizeof i);
        long row = (i / BASES) % h;
        for (long k = 0; k < w * 3; k++)
            img[row * w * 3 + k] ^= (uint8_t)(i >> 4);
        int32_t label = sorted > 0 ? (int32_t)(i * sorted / n)
                                   : (int32_t)(i % 1000);
        if (dlk_append(ds, 0, img, bytes, shape, 3, &err) ||
            dlk_append(ds, 1, &label, 4, NULL, 0, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    }
    free(img);
    free(base);
    if (dlk_dataset_close(ds, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return 0;
}
