/* order_resume.c - the CPU seconds of a resumed epoch's plan
 * (Dlk_order_build of a later segment) by the blocks and segment 0's
 * world, linked statically to a build's libdlk.a (tests/bench/
 * order_resume.sh builds it against an old and a new build):
 *   order_resume ROWS BLOCKS WORLD0 WORLD1 [REPS]
 * ROWS rows in BLOCKS equal blocks, shuffled, segment 0 of WORLD0 ranks
 * of batch 256 that took a quarter of their batches, resumed by WORLD1
 * ranks: the plan of rank WORLD1/2 built REPS times (default 5); prints
 * one line with the median seconds of one build and a checksum of 4096
 * of its positions (the same for both builds when their plans agree). */
#include "loader/order.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: order_resume ROWS BLOCKS WORLD0 WORLD1 "
                        "[REPS]\n");
        return 2;
    }
    uint64_t rows = strtoull(argv[1], NULL, 10);
    size_t nb = strtoull(argv[2], NULL, 10);
    uint32_t w0 = (uint32_t)atol(argv[3]), w1 = (uint32_t)atol(argv[4]);
    int reps = argc > 5 ? atoi(argv[5]) : 5;
    if (!rows || !nb || nb > rows || !w0 || !w1 || reps < 1 || reps > 99)
        return 2;
    uint64_t *first = malloc(nb * sizeof *first);
    uint32_t *count = malloc(nb * sizeof *count);
    if (!first || !count)
        return 1;
    for (size_t i = 0; i < nb; i++) {
        first[i] = rows / nb * i;
        count[i] = (uint32_t)(i + 1 < nb ? rows / nb : rows - first[i]);
    }
    Dlk_order_params p = {.shuffle = 1, .seed = 1, .window_blocks = 16,
                          .chunk_blocks = 1};
    dlk_loader_state st;
    memset(&st, 0, sizeof st);
    st.seed = 1;
    st.nseg = 2;
    st.seg[0].world = w0;
    st.seg[0].batch = 256;
    st.seg[0].steps = rows / w0 / 256 / 4;
    st.seg[1].world = w1;
    st.seg[1].batch = 256;
    double t[99];
    uint64_t sum = 0;
    for (int k = 0; k < reps; k++) {
        Dlk_order o;
        dlk_error err;
        double c0 = cpu_s();
        if (Dlk_order_build(first, count, nb, &p, &st, w1 / 2, &o, &err)) {
            fprintf(stderr, "order_resume: %s\n", err.msg);
            return 1;
        }
        t[k] = cpu_s() - c0;
        if (!k)
            for (uint64_t i = 0; i < 4096 && o.n; i++) {
                uint64_t s;
                uint8_t pad;
                Dlk_order_at(&o, i * 7919 % o.n, 1, &s, &pad);
                sum = sum * 31 + s * 2 + pad;
            }
        Dlk_order_free(&o);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    printf("rows %llu blocks %zu world %u -> %u: plan %.4f s cpu (median "
           "of %d), positions checksum %016llx\n",
           (unsigned long long)rows, nb, w0, w1, t[reps / 2], reps,
           (unsigned long long)sum);
    free(first);
    free(count);
    return 0;
}
