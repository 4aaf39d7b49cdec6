/* hash_avx2.c - hash.c's XXH3 compiled for AVX2, taken at run time where
 * the CPU has it (hash.c decides).  Every byte ingest writes is hashed
 * twice (the chunk's raw_hash as samples arrive, its XXH3-128 name when
 * it is sealed) and the loader checks raw_hash on every chunk it reads:
 * the baseline (SSE2) XXH3 ran at 5.8 GB/s over 16 MiB chunks from
 * memory and 18.5 GB/s in cache on a 2-core x86-64 host, this one at
 * 12.4 and 33.9.  The values are XXH3's whatever the vector width. */
#include "util/hash_simd.h"

#if DLK_HASH_AVX2
#pragma GCC target("avx2")
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

uint64_t dlk_hash64_avx2(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}

void dlk_hash128_avx2_v(const struct iovec *v, size_t n, uint64_t out[2])
{
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    for (size_t i = 0; i < n; i++)
        XXH3_128bits_update(&st, v[i].iov_base, v[i].iov_len);
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    out[0] = h.high64;
    out[1] = h.low64;
}

void dlk_hash64_update_avx2(void *state, const void *p, size_t n)
{
    XXH3_64bits_update((XXH3_state_t *)state, p, n);
}
#else
typedef int dlk_hash_avx2_unused; /* ISO C: no empty translation unit */
#endif
