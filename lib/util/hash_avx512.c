/* hash_avx512.c - hash.c's XXH3 compiled for AVX-512, taken at run time
 * where the CPU has it (hash.c decides).  Over 256 KiB in cache (the
 * pieces a loader's first read of a span hashes) it ran at 79.9 GB/s
 * against AVX2's 37.5 on a core of a 2-core AMD EPYC (Zen 4) host. */
#include "util/hash_simd.h"

#if DLK_HASH_SIMD
#pragma GCC target("avx512f")
#define XXH_VECTOR XXH_AVX512
#define SIMD_NAME(f) f##_avx512
#include "util/hash_simd_impl.h"
#else
typedef int Dlk_hash_avx512_unused; /* ISO C: no empty translation unit */
#endif
