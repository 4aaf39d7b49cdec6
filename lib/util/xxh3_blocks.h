/* xxh3_blocks.h - XXH3-64 (seed 0, the default secret) of an input of more
 * than 240 bytes, cut into the pieces a GPU computes at once.  XXH3 runs
 * eight 64-bit accumulators over stripes of 64 bytes and scrambles them
 * after every block of 16 stripes (1024 bytes); within a block each
 * stripe only adds to the accumulators, so a block's additions may be
 * computed in any order, in parallel, and summed (Dlk_xxh3_word), and only
 * the chain of blocks (Dlk_xxh3_scramble) is sequential.  The stripes of
 * the last, partial block and the final stripe add the same way; then
 * the accumulators are merged (Dlk_xxh3_merge).  Shared by the host's
 * reference (Dlk_hash64_blocks, hash.c) and the device's part check
 * (lib/loader/verify.cu), both checked against XXH3_64bits. */
#ifndef DLK_XXH3_BLOCKS_H
#define DLK_XXH3_BLOCKS_H

#include <stdint.h>

#ifdef __CUDACC__
#define DLK_HD __host__ __device__ __forceinline__
#else
#define DLK_HD static inline
#endif

#define DLK_XXH3_STRIPE 64
#define DLK_XXH3_BLOCK 1024     /* 16 stripes */
#define DLK_XXH3_MIN_LONG 241   /* shorter inputs hash another way */

/* The default secret's words as each step reads them (little-endian, at
 * the byte offsets XXH3 uses): stripe[s][lane] at 8s + 8 lane,
 * scramble[lane] at 128 + 8 lane, last[lane] at 121 + 8 lane,
 * merge[i] at 11 + 8 i. */
typedef struct Dlk_xxh3_keys {
    uint64_t stripe[16][8];
    uint64_t scramble[8];
    uint64_t last[8];
    uint64_t merge[8];
} Dlk_xxh3_keys;

#define DLK_XXH3_PRIME32_1 0x9E3779B1u
#define DLK_XXH3_PRIME32_2 0x85EBCA77u
#define DLK_XXH3_PRIME32_3 0xC2B2AE3Du
#define DLK_XXH3_PRIME64_1 0x9E3779B185EBCA87ull
#define DLK_XXH3_PRIME64_2 0xC2B2AE3D27D4EB4Full
#define DLK_XXH3_PRIME64_3 0x165667B19E3779F9ull
#define DLK_XXH3_PRIME64_4 0x85EBCA77C2B2AE63ull
#define DLK_XXH3_PRIME64_5 0x27D4EB2F165667C5ull

DLK_HD uint64_t Dlk_xxh3_acc_init(int lane)
{
    const uint64_t init[8] = {
        DLK_XXH3_PRIME32_3, DLK_XXH3_PRIME64_1, DLK_XXH3_PRIME64_2,
        DLK_XXH3_PRIME64_3, DLK_XXH3_PRIME64_4, DLK_XXH3_PRIME32_2,
        DLK_XXH3_PRIME64_5, DLK_XXH3_PRIME32_1};
    return init[lane];
}

/* What word v of a stripe, at lane `lane`, adds: v itself to the
 * accumulator of lane ^ 1 (*to_pair), and the product of the halves of
 * v ^ key to its own (the return value). */
DLK_HD uint64_t Dlk_xxh3_word(uint64_t v, uint64_t key, uint64_t *to_pair)
{
    uint64_t k = v ^ key;
    *to_pair = v;
    return (uint64_t)(uint32_t)k * (k >> 32);
}

DLK_HD uint64_t Dlk_xxh3_scramble(uint64_t acc, uint64_t key)
{
    acc ^= acc >> 47;
    acc ^= key;
    return acc * DLK_XXH3_PRIME32_1;
}

DLK_HD uint64_t Dlk_xxh3_mul128_fold64(uint64_t a, uint64_t b)
{
#ifdef __CUDA_ARCH__
    return (a * b) ^ __umul64hi(a, b);
#else
    unsigned __int128 p = (unsigned __int128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
#endif
}

/* The hash from the eight final accumulators of an input of len bytes. */
DLK_HD uint64_t Dlk_xxh3_merge(const uint64_t acc[8], uint64_t len,
                               const Dlk_xxh3_keys *k)
{
    uint64_t h = len * DLK_XXH3_PRIME64_1;
    for (int i = 0; i < 4; i++)
        h += Dlk_xxh3_mul128_fold64(acc[2 * i] ^ k->merge[2 * i],
                                    acc[2 * i + 1] ^ k->merge[2 * i + 1]);
    h ^= h >> 37;
    h *= 0x165667919E3779F9ull;
    return h ^ (h >> 32);
}

/* Full blocks of an input of len bytes (each followed by a scramble),
 * the stripes of the last block after them, none scrambled, then the
 * last stripe at len - 64 (with keys->last). */
DLK_HD uint64_t Dlk_xxh3_full_blocks(uint64_t len)
{
    return (len - 1) / DLK_XXH3_BLOCK;
}

DLK_HD uint64_t Dlk_xxh3_tail_stripes(uint64_t len)
{
    return ((len - 1) - DLK_XXH3_BLOCK * Dlk_xxh3_full_blocks(len)) /
           DLK_XXH3_STRIPE;
}

#endif
