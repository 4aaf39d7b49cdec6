/* hash_simd_impl.h - the XXH3 entry points hash.c dispatches to, compiled
 * for one vector width: included by hash_avx2.c and hash_avx512.c, each
 * after choosing its target, XXH_VECTOR and SIMD_NAME(f) (f's name with
 * the width's suffix).  The values are XXH3's whatever the width. */
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t SIMD_NAME(Dlk_hash64)(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}

void SIMD_NAME(Dlk_hash128_v)(const struct iovec *v, size_t n,
                              uint64_t out[2])
{
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    for (size_t i = 0; i < n; i++)
        XXH3_128bits_update(&st, v[i].iov_base, v[i].iov_len);
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    out[0] = h.high64;
    out[1] = h.low64;
}

void SIMD_NAME(Dlk_hash64_update)(void *state, const void *p, size_t n)
{
    XXH3_64bits_update((XXH3_state_t *)state, p, n);
}
