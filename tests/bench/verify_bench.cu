// verify_bench.cu - the part check of lib/loader/verify.cu on its own: the
// time from a span's launch (four parts of 1 MiB, the default part size;
// a chunk of 16 MiB read in four spans) to its end, alone on the GPU; and
// the rate of many spans on eight streams at once, as the loader issues
// them.  Every part's hash is checked against XXH3_64bits on the host
// first, and one damaged byte must be found.
//   verify_bench [PART_BYTES]
#include "cuda_probe.h"
#include <stdint.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "../../lib/util/xxh3_blocks.h"

extern "C" cudaError_t Dlk_cuda_verify_init(const void *keys);
extern "C" cudaError_t Dlk_cuda_verify(const void *base, const void *parts,
                                       unsigned n, uint64_t tag, void *bad,
                                       unsigned int *flag, cudaStream_t st);
extern "C" void Dlk_xxh3_keys_init(Dlk_xxh3_keys *k);

struct vpart { uint64_t off, len, want; uint32_t part, pad; };
struct vbad { unsigned int count; uint32_t part; uint64_t tag, got; };

#define NPARTS 256
#define SPAN 4
#define STREAMS 8

int main(int argc, char **argv)
{
    size_t pb = argc > 1 ? (size_t)atol(argv[1]) : (size_t)1 << 20;
    if (pb < 4096)
        pb = 4096;
    size_t total = pb * NPARTS;
    uint8_t *h = (uint8_t *)malloc(total);
    vpart *parts = (vpart *)calloc(NPARTS, sizeof *parts);
    if (!h || !parts) { perror("malloc"); return 1; }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < total; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        h[i] = (uint8_t)x;
    }
    for (int i = 0; i < NPARTS; i++) {
        /* lengths as a chunk's parts have them: not multiples of a block */
        size_t len = pb - (size_t)(i % 7) * 61;
        parts[i] = (vpart){(uint64_t)i * pb, len, XXH3_64bits(h + i * pb, len),
                           (uint32_t)i, 0};
    }
    Dlk_xxh3_keys k;
    Dlk_xxh3_keys_init(&k);
    CK(Dlk_cuda_verify_init(&k));
    uint8_t *d;
    vbad *bad;
    unsigned int *flag, *flag_dev;
    CK(cudaMalloc(&d, total));
    CK(cudaMemcpy(d, h, total, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&bad, sizeof *bad));
    CK(cudaMemset(bad, 0, sizeof *bad));
    CK(cudaHostAlloc(&flag, 64, cudaHostAllocMapped));
    *flag = 0;
    CK(cudaHostGetDevicePointer(&flag_dev, flag, 0));
    cudaStream_t st[STREAMS];
    for (int i = 0; i < STREAMS; i++)
        CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    /* every part right, then one damaged byte found and named */
    for (int i = 0; i < NPARTS; i += SPAN)
        CK(Dlk_cuda_verify(d, parts + i, SPAN, 7, bad, flag_dev, st[0]));
    CK(cudaDeviceSynchronize());
    vbad b;
    CK(cudaMemcpy(&b, bad, sizeof b, cudaMemcpyDeviceToHost));
    printf("%s - every part's hash equals XXH3_64bits (%d parts of about %zu bytes)\n",
           b.count == 0 && !*flag ? "ok" : "NOT OK", NPARTS, pb);
    uint8_t one;
    CK(cudaMemcpy(&one, d + 77 * pb + 1000, 1, cudaMemcpyDeviceToHost));
    one ^= 0x10;
    CK(cudaMemcpy(d + 77 * pb + 1000, &one, 1, cudaMemcpyHostToDevice));
    CK(Dlk_cuda_verify(d, parts + 76, SPAN, 9, bad, flag_dev, st[0]));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(&b, bad, sizeof b, cudaMemcpyDeviceToHost));
    printf("%s - a damaged byte in part 77 found (count %u, part %u, tag %llu)\n",
           b.count == 1 && b.part == 77 && b.tag == 9 && *flag ? "ok" : "NOT OK",
           b.count, b.part, (unsigned long long)b.tag);
    one ^= 0x10;
    CK(cudaMemcpy(d + 77 * pb + 1000, &one, 1, cudaMemcpyHostToDevice));
    CK(cudaMemset(bad, 0, sizeof *bad));
    *flag = 0;
    /* one span alone: launch to end */
    double best = 1e9, sum = 0;
    for (int r = 0; r < 50; r++) {
        double t0 = now();
        CK(Dlk_cuda_verify(d, parts + (r % (NPARTS / SPAN)) * SPAN, SPAN, 0,
                           bad, flag_dev, st[0]));
        CK(cudaStreamSynchronize(st[0]));
        double t = now() - t0;
        sum += t;
        best = t < best ? t : best;
    }
    printf("one span of %d parts alone: %.1f us (best), %.1f us (mean of 50)\n",
           SPAN, best * 1e6, sum / 50 * 1e6);
    /* every span, on eight streams at once, four times over */
    double t0 = now();
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < NPARTS / SPAN; i++)
            CK(Dlk_cuda_verify(d, parts + i * SPAN, SPAN, 0, bad, flag_dev,
                               st[i % STREAMS]));
    CK(cudaDeviceSynchronize());
    double s = now() - t0;
    printf("%d spans on %d streams: %.1f GB/s checked\n", 4 * NPARTS / SPAN,
           STREAMS, 4.0 * total / s / 1e9);
    CK(cudaMemcpy(&b, bad, sizeof b, cudaMemcpyDeviceToHost));
    printf("%s - no mismatch in the timed runs\n", b.count == 0 ? "ok" : "NOT OK");
    return 0;
}
