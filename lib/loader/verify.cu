// verify.cu - a chunk's parts checked on the GPU after their copy: the
// XXH3-64 of each part's bytes on the device against the hash its
// chunk's part table stores (formats/dlk-v1.md, "Checksums"), so that a
// first epoch's loading threads do not hash every byte on the CPU.
// One block of 256 threads a part: its 1024-byte XXH3 blocks are summed
// in parallel, a tile at a time, and chained by eight threads
// (util/xxh3_blocks.h says why that gives XXH3's value); the chain of one
// tile runs while the next is summed (tests/bench/verify_bench.cu: a
// span of four 1 MiB parts in 154 us alone, 216 GB/s on eight streams,
// against 203 us and 165 GB/s with the chain between the tiles, on an
// H200).  A part that
// does not match is recorded in device memory, and a flag is raised in
// mapped host memory that the host reads once the check's event is done.
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "../util/xxh3_blocks.h"

struct Dlk_vpart {  // mirrors Dlk_vpart in device.h
    uint64_t off, len, want;
    uint32_t part, pad;
};

struct Dlk_vbad {  // mirrors Dlk_vbad in device.h
    unsigned int count;
    uint32_t part;
    uint64_t tag, got;
};

#define VMAX 16   // parts a launch (kernel arguments, 528 bytes)

struct vargs {
    Dlk_vpart p[VMAX];
    uint64_t tag;
};

__constant__ Dlk_xxh3_keys vkeys;

__device__ __forceinline__ uint64_t ld64(const uint8_t *q)
{
    if (((uintptr_t)q & 7) == 0)
        return *(const uint64_t *)q;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | q[i];
    return v;
}

// The sums a warp's four groups of eight threads made (group g took
// stripes g, g + 4, ...), over the groups: lane i of each group gets
// what lane i's accumulator adds (its products and lane i ^ 1's words).
__device__ __forceinline__ uint64_t warp_add(uint64_t prod, uint64_t data)
{
    prod += __shfl_xor_sync(0xffffffffu, prod, 8);
    prod += __shfl_xor_sync(0xffffffffu, prod, 16);
    data += __shfl_xor_sync(0xffffffffu, data, 8);
    data += __shfl_xor_sync(0xffffffffu, data, 16);
    return prod + __shfl_xor_sync(0xffffffffu, data, 1);
}

// Warps 1-7 sum a tile of blocks (block b of the tile by warp 1 + b % 7)
// into one of two buffers while warp 0's first eight threads chain the
// tile before it from the other: the chain (a scramble a block, one after
// another) runs beside the loads instead of between them.  Each thread's
// four stripe keys are in registers: read from constant memory at
// different addresses across a warp they were read one address at a time.
#define LOADERS 7
#define TILE (LOADERS * 8) // blocks a tile: eight a loading warp

// Blocks in tile i of nb: TILE, the last one's fewer.
__device__ __forceinline__ uint64_t tile_blocks(uint64_t nb, uint64_t i)
{
    return nb - i * TILE < TILE ? nb - i * TILE : TILE;
}

__global__ void __launch_bounds__(256)
verify_kernel(const uint8_t *base, vargs a, Dlk_vbad *bad,
              unsigned int *flag)
{
    const Dlk_vpart pt = a.p[blockIdx.x];
    const uint8_t *p = base + pt.off;
    const uint64_t len = pt.len;
    __shared__ uint64_t add_s[2][TILE][8];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 7,
              group = (tid & 31) >> 3;
    uint64_t key[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
        key[i] = vkeys.stripe[4 * i + group][lane];
    uint64_t acc = Dlk_xxh3_acc_init(lane); // kept by threads 0-7
    const uint64_t skey = vkeys.scramble[lane];
    const uint64_t nb = Dlk_xxh3_full_blocks(len);
    const uint64_t ntiles = (nb + TILE - 1) / TILE;
    // step i: the loaders sum tile i, warp 0 chains tile i - 1
    for (uint64_t i = 0; i <= ntiles; i++) {
        if (warp > 0 && i < ntiles) {
            uint64_t t0 = i * TILE, nt = tile_blocks(nb, i);
            uint64_t prod[8], data[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint64_t b = (uint64_t)(warp - 1) + LOADERS * j;
                prod[j] = data[j] = 0;
                if (b >= nt)
                    continue;
                const uint8_t *blk = p + (t0 + b) * DLK_XXH3_BLOCK + lane * 8;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    uint64_t pair;
                    prod[j] += Dlk_xxh3_word(
                        ld64(blk + (4 * k + group) * DLK_XXH3_STRIPE), key[k],
                        &pair);
                    data[j] += pair;
                }
            }
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint64_t b = (uint64_t)(warp - 1) + LOADERS * j;
                uint64_t add = warp_add(prod[j], data[j]);
                if (group == 0 && b < nt)
                    add_s[i & 1][b][lane] = add;
            }
        } else if (warp == 0 && i > 0 && tid < 8) {
            uint64_t nt = tile_blocks(nb, i - 1);
            for (uint64_t b = 0; b < nt; b++)
                acc = Dlk_xxh3_scramble(acc + add_s[(i - 1) & 1][b][lane],
                                        skey);
        }
        __syncthreads();
    }
    if (warp != 0)
        return;
    // the last block's stripes, then the last stripe (st == ns)
    const uint64_t ns = Dlk_xxh3_tail_stripes(len);
    const uint8_t *tail = p + nb * DLK_XXH3_BLOCK;
    uint64_t prod = 0, data = 0;
    for (uint64_t st = group; st <= ns; st += 4) {
        uint64_t pair;
        const uint8_t *q = st < ns ? tail + st * DLK_XXH3_STRIPE
                                   : p + len - DLK_XXH3_STRIPE;
        prod += Dlk_xxh3_word(ld64(q + lane * 8),
                              st < ns ? vkeys.stripe[st][lane]
                                      : vkeys.last[lane], &pair);
        data += pair;
    }
    uint64_t fin = acc + warp_add(prod, data);
    uint64_t accs[8];
    for (int i = 0; i < 8; i++)
        accs[i] = __shfl_sync(0xffffffffu, fin, i);
    if (tid != 0)
        return;
    uint64_t h = Dlk_xxh3_merge(accs, len, &vkeys);
    if (h != pt.want && atomicAdd(&bad->count, 1u) == 0) {
        bad->part = pt.part;
        bad->tag = a.tag;
        bad->got = h;
        __threadfence_system();
        *(volatile unsigned int *)flag = 1;
    }
}

extern "C" cudaError_t Dlk_cuda_verify_init(const void *keys)
{
    return cudaMemcpyToSymbol(vkeys, keys, sizeof(Dlk_xxh3_keys));
}

// Parts of the bytes at base (device memory), each longer than 240 bytes,
// checked on stream st; tag comes back with a part that did not match.
extern "C" cudaError_t Dlk_cuda_verify(const void *base, const void *parts,
                                       unsigned n, uint64_t tag, void *bad,
                                       unsigned int *flag, cudaStream_t st)
{
    const Dlk_vpart *pp = (const Dlk_vpart *)parts;
    for (unsigned i = 0; i < n; i += VMAX) {
        unsigned m = n - i < VMAX ? n - i : VMAX;
        vargs a;
        memset(&a, 0, sizeof a);
        memcpy(a.p, pp + i, m * sizeof *pp);
        a.tag = tag;
        verify_kernel<<<m, 256, 0, st>>>((const uint8_t *)base, a,
                                         (Dlk_vbad *)bad, flag);
    }
    return cudaGetLastError();
}
