// host_path_probe.cu - what this host's memory allows a page-cache-to-GPU
// loader, measured without dlk: the plain CUDA runtime and pread(2).
// Reading from the page cache into pinned memory is one copy by the
// kernel (it reads the cached page and writes the pinned one); the copy
// to the GPU then reads the pinned page once more.  So each byte that
// reaches the GPU crosses host memory three times, and the path's limit
// is the lower of the link (pinned H2D) and what the host's memory gives
// to those copies while the link also reads it.  Figures, each over the
// FILES given (read whole in PIECE-byte pieces, pieces dealt to threads):
//   memcpy          THREADS threads copying 64 MiB buffers (GB/s copied)
//   pread           THREADS threads pread()ing into pinned buffers
//   pread+H2D       the same, each piece then copied to the GPU on the
//                   thread's own stream (two buffers a thread), which is
//                   a loader's whole path without its bookkeeping
//   pinned H2D      the link alone, 16 MiB copies on 4 streams
//   pool            pread+H2D with the buffers taken from one pool of
//                   POOL_BUFS pinned buffers (a loader's budget) and given
//                   back once their copy is over: the one given back last
//                   taken first, then the one given back longest ago.
//                   Reused soon, a buffer is still in the last-level
//                   cache when the kernel writes it and the copy engine
//                   reads it; taken in turn, every byte crosses DRAM
//   host_path_probe THREADS PIECE_MIB FILE...
#include "cuda_probe.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static piece *pieces;
static size_t npieces, piece_bytes;
static size_t next_piece; /* __atomic builtins: nvcc compiles C++ */
static int mode; /* 0 memcpy, 1 pread, 2 pread+H2D, 3 the pool */
/* the pool: 104 buffers of 4 MiB are the 416 MiB of pinned memory that
 * dlk's loader holds by default */
#define POOL_BUFS 104
static char *pool_buf[POOL_BUFS];
static int pool_free[POOL_BUFS], pool_nfree, pool_head;
static bool pool_lifo;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static int pool_take(void)
{
    pthread_mutex_lock(&pool_mu);
    int b;
    if (pool_lifo) {
        b = pool_free[--pool_nfree];
    } else {
        b = pool_free[pool_head];
        pool_head = (pool_head + 1) % POOL_BUFS;
        pool_nfree--;
    }
    pthread_mutex_unlock(&pool_mu);
    return b;
}
static void pool_give(int b)
{
    pthread_mutex_lock(&pool_mu);
    if (pool_lifo)
        pool_free[pool_nfree++] = b;
    else
        pool_free[(pool_head + pool_nfree++) % POOL_BUFS] = b;
    pthread_mutex_unlock(&pool_mu);
}
static double copy_s = 0.5;

/* each thread's buffers, made before any timing: cudaHostAlloc pins at
 * about 1 GB/s, which is not what is measured here */
typedef struct thread_bufs {
    char *buf[2];
    void *dev[2];
    cudaEvent_t ev[2];
    cudaStream_t st;
} thread_bufs;
static thread_bufs tbs[256];

static void *worker(void *arg)
{
    (void)arg;
    if (mode == 0) {
        size_t n = 64u << 20;
        char *a = (char *)malloc(n), *b = (char *)malloc(n);
        memset(a, 1, n);
        memset(b, 2, n);
        double t0 = now();
        size_t done = 0;
        while (now() - t0 < copy_s) {
            copy_fn(b, a, n);
            done += n;
        }
        __atomic_fetch_add(&next_piece, done, __ATOMIC_RELAXED);
        free(a);
        free(b);
        return NULL;
    }
    thread_bufs *tb = &tbs[(long)arg];
    char **buf = tb->buf;
    void **dev = tb->dev;
    cudaEvent_t *ev = tb->ev;
    cudaStream_t st = tb->st;
    int k = 0;
    bool used[2] = {false, false};
    int held[2] = {-1, -1}; /* mode 3: the pool's buffer each copy reads */
    for (;;) {
        size_t i = __atomic_fetch_add(&next_piece, 1, __ATOMIC_RELAXED);
        if (i >= npieces)
            break;
        if (mode >= 2 && used[k])
            CK(cudaEventSynchronize(ev[k]));
        char *b = buf[k];
        if (mode == 3) {
            if (held[k] >= 0)
                pool_give(held[k]);
            held[k] = pool_take();
            b = pool_buf[held[k]];
        }
        read_piece(&pieces[i], b);
        if (mode >= 2) {
            CK(cudaMemcpyAsync(dev[k], b, pieces[i].len, cudaMemcpyHostToDevice,
                               st));
            CK(cudaEventRecord(ev[k], st));
            used[k] = true;
        }
        k ^= 1;
    }
    if (mode >= 2)
        CK(cudaStreamSynchronize(st));
    for (k = 0; k < 2; k++)
        if (held[k] >= 0)
            pool_give(held[k]);
    return NULL;
}

static double run(int threads, size_t total)
{
    pthread_t th[256];
    __atomic_store_n(&next_piece, 0, __ATOMIC_RELAXED);
    double t0 = now();
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(long)i);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double s = now() - t0;
    if (mode == 0)
        return (double)__atomic_load_n(&next_piece, __ATOMIC_RELAXED) / copy_s / 1e9;
    return (double)total / s / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: host_path_probe THREADS PIECE_MIB FILE...\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    if (threads < 1 || threads > 256) threads = 16;
    piece_bytes = (size_t)atoi(argv[2]) << 20;
    if (!piece_bytes) piece_bytes = 4u << 20;
    size_t total = 0, cap = 1024;
    pieces = (piece *)malloc(cap * sizeof *pieces);
    for (int a = 3; a < argc; a++) {
        int fd = open(argv[a], O_RDONLY);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb)) { perror(argv[a]); return 1; }
        for (off_t at = 0; at < sb.st_size; at += (off_t)piece_bytes) {
            if (npieces == cap)
                pieces = (piece *)realloc(pieces, (cap *= 2) * sizeof *pieces);
            size_t len = (size_t)(sb.st_size - at) < piece_bytes
                             ? (size_t)(sb.st_size - at) : piece_bytes;
            pieces[npieces++] = (piece){fd, at, len};
            total += len;
        }
    }
    CK(cudaFree(0));
    /* the link alone: 16 MiB copies on 4 streams from pinned memory */
    {
        size_t n = 16u << 20;
        void *h, *d;
        cudaStream_t st[4];
        CK(cudaHostAlloc(&h, 4 * n, cudaHostAllocPortable));
        CK(cudaMalloc(&d, 4 * n));
        for (int i = 0; i < 4; i++) CK(cudaStreamCreate(&st[i]));
        for (int i = 0; i < 4; i++)
            cudaMemcpyAsync((char *)d + i * n, (char *)h + i * n, n,
                            cudaMemcpyHostToDevice, st[i]);
        CK(cudaDeviceSynchronize());
        double t0 = now();
        for (int r = 0; r < 64; r++)
            for (int i = 0; i < 4; i++)
                cudaMemcpyAsync((char *)d + i * n, (char *)h + i * n, n,
                                cudaMemcpyHostToDevice, st[i]);
        CK(cudaDeviceSynchronize());
        printf("pinned H2D (4 streams of 16 MiB copies): %.2f GB/s\n",
               64.0 * 4 * n / (now() - t0) / 1e9);
        cudaFreeHost(h);
        cudaFree(d);
    }
    for (int t = 0; t < threads; t++) {
        for (int i = 0; i < 2; i++) {
            CK(cudaHostAlloc((void **)&tbs[t].buf[i], piece_bytes,
                             cudaHostAllocPortable));
            CK(cudaMalloc(&tbs[t].dev[i], piece_bytes));
            CK(cudaEventCreateWithFlags(&tbs[t].ev[i], cudaEventDisableTiming));
        }
        CK(cudaStreamCreateWithFlags(&tbs[t].st, cudaStreamNonBlocking));
    }
    mode = 0;
    printf("memcpy, %d threads (64 MiB buffers): %.2f GB/s copied\n", threads,
           run(threads, 0));
    /* warm the page cache, then two passes of each mode, the best kept */
    mode = 1;
    run(threads, total);
    double best = 0;
    for (int r = 0; r < 2; r++) { double g = run(threads, total); if (g > best) best = g; }
    printf("pread into pinned, %d threads, %zu MiB pieces, %.2f GB: %.2f GB/s\n",
           threads, piece_bytes >> 20, total / 1e9, best);
    mode = 2;
    best = 0;
    for (int r = 0; r < 3; r++) { double g = run(threads, total); if (g > best) best = g; }
    printf("pread into pinned + H2D, %d threads, own stream each: %.2f GB/s\n",
           threads, best);
    if (threads * 2 > POOL_BUFS)
        return 0;
    char *pool;
    CK(cudaHostAlloc((void **)&pool, POOL_BUFS * piece_bytes,
                     cudaHostAllocPortable));
    mode = 3;
    for (int lifo = 1; lifo >= 0; lifo--) {
        pool_lifo = lifo;
        pool_nfree = POOL_BUFS;
        pool_head = 0;
        for (int i = 0; i < POOL_BUFS; i++) {
            pool_buf[i] = pool + (size_t)i * piece_bytes;
            pool_free[i] = i;
        }
        best = 0;
        for (int r = 0; r < 3; r++) { double g = run(threads, total); if (g > best) best = g; }
        printf("pread into a pool of %d pinned buffers + H2D, %d threads, the "
               "buffer given back %s taken: %.2f GB/s\n", POOL_BUFS, threads,
               lifo ? "last" : "longest ago", best);
    }
    cudaFreeHost(pool);
    return 0;
}
