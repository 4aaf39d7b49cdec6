/* hash_avx2.c - hash.c's XXH3 compiled for AVX2, taken at run time where
 * the CPU has it and not AVX-512 (hash.c decides).  Every byte ingest
 * writes is hashed twice (the chunk's raw_hash as samples arrive, its
 * XXH3-128 name when it is sealed) and the loader checks raw_hash on
 * every chunk it reads: the baseline (SSE2) XXH3 ran at 5.8 GB/s over 16
 * MiB chunks from memory and 18.5 GB/s in cache on a 2-core x86-64 host,
 * this one at 12.4 and 33.9. */
#include "util/hash_simd.h"

#if DLK_HASH_SIMD
#pragma GCC target("avx2")
#define XXH_VECTOR XXH_AVX2
#define SIMD_NAME(f) f##_avx2
#include "util/hash_simd_impl.h"
#else
typedef int Dlk_hash_avx2_unused; /* ISO C: no empty translation unit */
#endif
