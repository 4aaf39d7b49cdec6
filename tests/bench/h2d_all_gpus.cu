// h2d_all_gpus.cu - the host's aggregate pinned host-to-device rate: one
// thread and one copy stream a GPU, all copying at once (16 MiB copies
// from a pinned buffer of each GPU's own) for SECONDS, after each GPU
// alone.  The baseline a loader on every GPU of one host is measured
// against.
//   h2d_all_gpus [SECONDS]
#include "cuda_probe.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SZ ((size_t)16 << 20)

typedef struct gpu {
    int dev;
    void *h, *d;
    cudaStream_t st;
    double gbs;
} gpu;

static double seconds = 2.0;
static pthread_barrier_t go;

static void *run(void *arg)
{
    gpu *g = (gpu *)arg;
    CK(cudaSetDevice(g->dev));
    pthread_barrier_wait(&go);
    double t0 = now();
    size_t done = 0;
    while (now() - t0 < seconds) {
        for (int i = 0; i < 16; i++)
            CK(cudaMemcpyAsync(g->d, g->h, SZ, cudaMemcpyHostToDevice, g->st));
        CK(cudaStreamSynchronize(g->st));
        done += 16 * SZ;
    }
    g->gbs = done / (now() - t0) / 1e9;
    return NULL;
}

static double together(gpu *g, int n)
{
    pthread_t th[64];
    pthread_barrier_init(&go, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, run, &g[i]);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        sum += g[i].gbs;
    }
    pthread_barrier_destroy(&go);
    return sum;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        seconds = atof(argv[1]) > 0 ? atof(argv[1]) : 2.0;
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    if (n > 64)
        n = 64;
    gpu g[64];
    for (int i = 0; i < n; i++) {
        g[i].dev = i;
        CK(cudaSetDevice(i));
        CK(cudaHostAlloc(&g[i].h, SZ, cudaHostAllocPortable));
        CK(cudaMalloc(&g[i].d, SZ));
        CK(cudaStreamCreateWithFlags(&g[i].st, cudaStreamNonBlocking));
    }
    for (int i = 0; i < n; i++) {
        double one = together(&g[i], 1);
        printf("pinned H2D, GPU %d alone: %.2f GB/s\n", i, one);
    }
    double all = together(g, n);
    printf("pinned H2D, all %d GPUs at once: %.2f GB/s (", n, all);
    for (int i = 0; i < n; i++)
        printf("%s%.2f", i ? " + " : "", g[i].gbs);
    printf(")\n");
    return 0;
}
