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

void dlk_hash128_hex(const void *p, size_t n, char out[33])
{
    XXH128_hash_t h = XXH3_128bits(p, n);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}

uint64_t dlk_hash64_2(const void *a, size_t na, const void *b, size_t nb)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, a, na);
    XXH3_64bits_update(&st, b, nb);
    return XXH3_64bits_digest(&st);
}
