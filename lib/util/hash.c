/* hash.c - XXH3 (seed 0) as the format uses it: 64-bit checksums and the
 * 128-bit content address of chunk objects. */
#include "internal.h"

#include <stdio.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t dlk_hash64(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}

static void hex128(XXH128_hash_t h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}

void dlk_hash128_hex(const void *p, size_t n, char out[33])
{
    hex128(XXH3_128bits(p, n), out);
}

void dlk_hash128_hex_2(const void *a, size_t na, const void *b, size_t nb,
                       char out[33])
{
    struct iovec v[2] = {{(void *)a, na}, {(void *)b, nb}};
    dlk_hash128_hex_v(v, 2, out);
}

void dlk_hash128_hex_v(const struct iovec *v, size_t n, char out[33])
{
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    for (size_t i = 0; i < n; i++)
        XXH3_128bits_update(&st, v[i].iov_base, v[i].iov_len);
    hex128(XXH3_128bits_digest(&st), out);
}

uint64_t dlk_hash64_2(const void *a, size_t na, const void *b, size_t nb)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, a, na);
    XXH3_64bits_update(&st, b, nb);
    return XXH3_64bits_digest(&st);
}

struct dlk_hash64_stream {
    XXH3_state_t st;
};

dlk_hash64_stream *dlk_hash64_stream_new(void)
{
    dlk_hash64_stream *h = (dlk_hash64_stream *)XXH3_createState();
    if (h)
        XXH3_64bits_reset(&h->st);
    return h;
}

void dlk_hash64_stream_reset(dlk_hash64_stream *h)
{
    XXH3_64bits_reset(&h->st);
}

void dlk_hash64_stream_update(dlk_hash64_stream *h, const void *p, size_t n)
{
    XXH3_64bits_update(&h->st, p, n);
}

uint64_t dlk_hash64_stream_digest(const dlk_hash64_stream *h)
{
    return XXH3_64bits_digest(&h->st);
}

void dlk_hash64_stream_free(dlk_hash64_stream *h)
{
    XXH3_freeState((XXH3_state_t *)h);
}
