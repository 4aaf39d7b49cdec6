/* s3_get_bench.c - GET every object below a prefix of an S3 store with N
 * threads through libdlk's store API, and print the throughput.
 *
 *   s3_get_bench s3://BUCKET/PREFIX THREADS
 *
 * The store's own in-flight limit (DLK_S3_MAX_INFLIGHT, default 64)
 * applies as usual; THREADS callers block in Dlk_store_get.  Prints
 * "objects=N bytes=B seconds=S mbps=M" (MB = 10^6 bytes). */
#include "util/buf.h"
#include "store/store.h"
#include "../../env/store_env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct job {
    Dlk_store *s;
    char **keys;
    size_t n, cap;
    size_t next;          /* shared: next key to fetch (atomic) */
    uint64_t bytes;       /* atomic */
    int failed;           /* atomic */
} job;

static int add(void *ud, const char *key, uint64_t size)
{
    job *j = ud;
    (void)size;
    if (j->n == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 64;
        char **k = realloc(j->keys, cap * sizeof *k);
        if (!k)
            return 1;
        j->keys = k;
        j->cap = cap;
    }
    j->keys[j->n++] = strdup(key);
    return 0;
}

static void *worker(void *arg)
{
    job *j = arg;
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_error err = {0};
    for (;;) {
        size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->n)
            break;
        b.len = 0;
        if (Dlk_store_get(j->s, j->keys[i], (uint64_t)1 << 32, &b, NULL,
                          &err) != DLK_OK) {
            fprintf(stderr, "s3_get_bench: %s\n", err.msg);
            __atomic_fetch_add(&j->failed, 1, __ATOMIC_RELAXED);
            continue;
        }
        __atomic_fetch_add(&j->bytes, b.len, __ATOMIC_RELAXED);
    }
    Dlk_buf_free(&b);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: s3_get_bench s3://BUCKET/PREFIX THREADS\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    if (threads < 1 || threads > 1024) {
        fprintf(stderr, "s3_get_bench: THREADS must be 1..1024\n");
        return 2;
    }
    dlk_error err = {0};
    job j = {0};
    store_env env; /* the store's settings, as dlk reads them */
    if (store_env_load(&env, false, &err) != DLK_OK ||
        Dlk_store_open(argv[1], false, &env.opts, &j.s, &err) != DLK_OK ||
        Dlk_store_list(j.s, "", add, &j, &err) != DLK_OK) {
        fprintf(stderr, "s3_get_bench: %s\n", err.msg);
        return 1;
    }
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, &j);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) +
                 (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("objects=%zu bytes=%llu seconds=%.3f mbps=%.1f\n", j.n,
           (unsigned long long)j.bytes, sec, (double)j.bytes / sec / 1e6);
    for (size_t i = 0; i < j.n; i++)
        free(j.keys[i]);
    free(j.keys);
    free(th);
    Dlk_store_free(j.s);
    return j.failed ? 1 : 0;
}
