/* hash_simd.h - XXH3 with AVX2 (hash_avx2.c) and AVX-512 (hash_avx512.c),
 * for hash.c to call when the CPU has them.  Each gives what hash.c's own
 * XXH3 gives. */
#ifndef DLK_UTIL_HASH_SIMD_H
#define DLK_UTIL_HASH_SIMD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DLK_HASH_SIMD 1
uint64_t Dlk_hash64_avx2(const void *p, size_t n);
uint64_t Dlk_hash64_avx512(const void *p, size_t n);
/* out[0] = the high 64 bits, out[1] the low */
void Dlk_hash128_v_avx2(const struct iovec *v, size_t n, uint64_t out[2]);
void Dlk_hash128_v_avx512(const struct iovec *v, size_t n, uint64_t out[2]);
/* state: an XXH3_state_t reset for 64 bits */
void Dlk_hash64_update_avx2(void *state, const void *p, size_t n);
void Dlk_hash64_update_avx512(void *state, const void *p, size_t n);
#else
#define DLK_HASH_SIMD 0
#endif

#endif
