/* read_bench.c - write and read one uncompressed u8 tensor through libdlk.
 *
 *   read_bench write DATASET GIB      create + append GIB of 1 MiB samples
 *   read_bench read DATASET THREADS [verify]
 *
 * `read` reads every chunk with dlk_chunk_read into a reused buffer per
 * thread (the loader's path) and prints bytes and GB/s; `verify` also
 * checks each payload checksum. */
#include "dlk.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int bench_write(const char *url, double gib)
{
    dlk_tensor_spec spec;
    dlk_error err;
    if (dlk_tensor_spec_parse("data:u8:1024x1024", &spec, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    dlk_dataset *ds;
    if (dlk_dataset_create(url, &spec, 1, &ds, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t n = (size_t)(gib * 1024);
    uint8_t *s = malloc(1 << 20);
    int64_t shape[2] = {1024, 1024};
    uint64_t x = 88172645463325252ull;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < (1 << 20) / 8; k++) { /* xorshift: not zeros */
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            memcpy(s + 8 * k, &x, 8);
        }
        if (dlk_append(ds, 0, s, 1 << 20, shape, 2, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    }
    if (dlk_dataset_close(ds, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t = now_s() - t0;
    printf("write %.2f GiB in %.2f s: %.2f GB/s\n", gib, t,
           n * 1048576.0 / t / 1e9);
    free(s);
    return 0;
}

struct job {
    const char *url;
    int id, threads;
    unsigned flags;
    unsigned long long bytes;
    int failed;
};

static void *reader(void *arg)
{
    struct job *j = arg;
    dlk_error err;
    dlk_dataset *ds;
    if (dlk_dataset_open(j->url, NULL, &ds, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        j->failed = 1;
        return NULL;
    }
    size_t cap = 17u << 20;
    void *buf = malloc(cap);
    size_t n = dlk_tensor_nchunks(ds, 0);
    for (size_t c = (size_t)j->id; c < n; c += (size_t)j->threads) {
        dlk_chunk *ch;
        if (dlk_chunk_read(ds, 0, c, j->flags, buf, cap, &ch, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            j->failed = 1;
            break;
        }
        size_t nb;
        dlk_chunk_payload(ch, &nb);
        j->bytes += nb;
        dlk_chunk_free(ch);
    }
    free(buf);
    dlk_dataset_free(ds);
    return NULL;
}

static int bench_read(const char *url, int threads, unsigned flags)
{
    struct job jobs[64];
    pthread_t th[64];
    if (threads < 1 || threads > 64)
        threads = 1;
    double t0 = now_s();
    for (int i = 0; i < threads; i++) {
        jobs[i] = (struct job){url, i, threads, flags, 0, 0};
        pthread_create(&th[i], NULL, reader, &jobs[i]);
    }
    unsigned long long bytes = 0;
    int failed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        bytes += jobs[i].bytes;
        failed |= jobs[i].failed;
    }
    double t = now_s() - t0;
    printf("read %llu bytes in %.3f s: %.2f GB/s (%d thread%s%s)\n", bytes, t,
           bytes / t / 1e9, threads, threads == 1 ? "" : "s",
           flags ? ", verified" : "");
    return failed;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "write") == 0)
        return bench_write(argv[2], atof(argv[3]));
    if (argc >= 4 && strcmp(argv[1], "read") == 0)
        return bench_read(argv[2], atoi(argv[3]),
                          argc > 4 ? DLK_READ_VERIFY : 0);
    fprintf(stderr, "usage: read_bench write DATASET GIB | read DATASET "
                    "THREADS [verify]\n");
    return 2;
}
