/* hash.c - XXH3 (seed 0) as the format uses it: 64-bit checksums and the
 * 128-bit content address of chunk objects. */
#include "util/hash.h"
#include "util/hash_simd.h"
#include "util/xxh3_blocks.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#if DLK_HASH_SIMD
/* The widest XXH3 the CPU runs: 2 hash_avx512.c's, 1 hash_avx2.c's
 * (twice as fast over large inputs as the baseline), 0 this file's. */
static int simd(void)
{
    static int have = -1;
    int v = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") ? 2
            : __builtin_cpu_supports("avx2")  ? 1
                                              : 0;
        __atomic_store_n(&have, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

uint64_t Dlk_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t Dlk_hash64(const void *p, size_t n)
{
#if DLK_HASH_SIMD
    switch (simd()) {
    case 2:
        return Dlk_hash64_avx512(p, n);
    case 1:
        return Dlk_hash64_avx2(p, n);
    }
#endif
    return XXH3_64bits(p, n);
}

static void hex128(uint64_t high, uint64_t low, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)high,
             (unsigned long long)low);
}

void Dlk_hash128_hex(const void *p, size_t n, char out[33])
{
    struct iovec v = {(void *)p, n};
    Dlk_hash128_hex_v(&v, 1, out);
}

void Dlk_hash128_hex_2(const void *a, size_t na, const void *b, size_t nb,
                       char out[33])
{
    struct iovec v[2] = {{(void *)a, na}, {(void *)b, nb}};
    Dlk_hash128_hex_v(v, 2, out);
}

void Dlk_hash128_hex_v(const struct iovec *v, size_t n, char out[33])
{
#if DLK_HASH_SIMD
    if (simd()) {
        uint64_t h[2];
        if (simd() == 2)
            Dlk_hash128_v_avx512(v, n, h);
        else
            Dlk_hash128_v_avx2(v, n, h);
        hex128(h[0], h[1], out);
        return;
    }
#endif
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    for (size_t i = 0; i < n; i++)
        XXH3_128bits_update(&st, v[i].iov_base, v[i].iov_len);
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    hex128(h.high64, h.low64, out);
}

/* XXH3-64 state fed with n bytes at p. */
static void update64(XXH3_state_t *st, const void *p, size_t n)
{
#if DLK_HASH_SIMD
    switch (simd()) {
    case 2:
        Dlk_hash64_update_avx512(st, p, n);
        return;
    case 1:
        Dlk_hash64_update_avx2(st, p, n);
        return;
    }
#endif
    XXH3_64bits_update(st, p, n);
}

uint64_t Dlk_hash64_2(const void *a, size_t na, const void *b, size_t nb)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    update64(&st, a, na);
    update64(&st, b, nb);
    return XXH3_64bits_digest(&st);
}

struct Dlk_hash64_stream {
    XXH3_state_t st;
};

Dlk_hash64_stream *Dlk_hash64_stream_new(void)
{
    Dlk_hash64_stream *h = (Dlk_hash64_stream *)XXH3_createState();
    if (h)
        XXH3_64bits_reset(&h->st);
    return h;
}

void Dlk_hash64_stream_reset(Dlk_hash64_stream *h)
{
    XXH3_64bits_reset(&h->st);
}

void Dlk_hash64_stream_update(Dlk_hash64_stream *h, const void *p, size_t n)
{
    update64(&h->st, p, n);
}

uint64_t Dlk_hash64_stream_digest(const Dlk_hash64_stream *h)
{
    return XXH3_64bits_digest(&h->st);
}

void Dlk_hash64_stream_hex128(const Dlk_hash64_stream *h, char out[33])
{
    XXH128_hash_t v = XXH3_128bits_digest(&h->st);
    hex128(v.high64, v.low64, out);
}

void Dlk_hash64_stream_free(Dlk_hash64_stream *h)
{
    XXH3_freeState((XXH3_state_t *)h);
}

/* Little-endian hosts (x86-64, AArch64), as the format's hashes are. */
static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

void Dlk_xxh3_keys_init(Dlk_xxh3_keys *k)
{
    const uint8_t *s = XXH3_kSecret;
    for (int i = 0; i < 8; i++) {
        for (int st = 0; st < 16; st++)
            k->stripe[st][i] = rd64(s + 8 * st + 8 * i);
        k->scramble[i] = rd64(s + sizeof XXH3_kSecret - 64 + 8 * i);
        k->last[i] = rd64(s + sizeof XXH3_kSecret - 64 - 7 + 8 * i);
        k->merge[i] = rd64(s + 11 + 8 * i);
    }
}

/* Stripe at p: its additions to the accumulators' sums in add[8]. */
static void add_stripe(uint64_t add[8], const uint8_t *p,
                       const uint64_t key[8])
{
    for (int i = 0; i < 8; i++) {
        uint64_t pair;
        add[i] += Dlk_xxh3_word(rd64(p + 8 * i), key[i], &pair);
        add[i ^ 1] += pair;
    }
}

uint64_t Dlk_hash64_blocks(const void *vp, size_t n, const Dlk_xxh3_keys *k)
{
    const uint8_t *p = vp;
    uint64_t acc[8];
    for (int i = 0; i < 8; i++)
        acc[i] = Dlk_xxh3_acc_init(i);
    uint64_t nb = Dlk_xxh3_full_blocks(n);
    for (uint64_t b = 0; b < nb; b++) {
        /* a block's stripes summed first, last stripe first: as a GPU
         * sums them, in no fixed order */
        uint64_t add[8] = {0};
        for (int st = 15; st >= 0; st--)
            add_stripe(add, p + b * DLK_XXH3_BLOCK + st * DLK_XXH3_STRIPE,
                       k->stripe[st]);
        for (int i = 0; i < 8; i++)
            acc[i] = Dlk_xxh3_scramble(acc[i] + add[i], k->scramble[i]);
    }
    uint64_t ns = Dlk_xxh3_tail_stripes(n);
    uint64_t add[8] = {0};
    for (uint64_t st = 0; st < ns; st++)
        add_stripe(add, p + nb * DLK_XXH3_BLOCK + st * DLK_XXH3_STRIPE,
                   k->stripe[st]);
    add_stripe(add, p + n - DLK_XXH3_STRIPE, k->last);
    for (int i = 0; i < 8; i++)
        acc[i] += add[i];
    return Dlk_xxh3_merge(acc, n, k);
}
