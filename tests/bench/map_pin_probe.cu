// map_pin_probe.cu - what a chunk costs copied to the GPU straight out of
// the page cache, pinned only while its copy runs: the file's piece mapped
// (MAP_POPULATE), registered read-only with cudaHostRegister, copied,
// unregistered and unmapped, on T threads each with a stream of its own.
// Beside it, in the same run, the two paths the loader has today: a pinned
// buffer copied back to back (the line), and the page cache read into a
// pinned buffer that is then copied (the default path, one buffer per
// thread). Each phase's time is summed over threads so the per-byte CPU
// cost of pinning shows apart from the copy. The pages are faulted by
// MAP_POPULATE, by the registration, or by MADV_POPULATE_READ. Last,
// pinned copies on one thread alone and while another thread registers
// pieces back to back: whether a registration holds up the copies.
//   map_pin_probe FILE GIB PIECE_MIB [THREADS...]
#include "cuda_probe.h"
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>

static const char *path;
static size_t total, piece_len;
static int nthreads;
static double ph[5]; /* map, register, copy, unregister, unmap */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *dev;
static int mode; /* 0: map+pin, 1: read into pinned, 2: map+pin with the
                  * pages faulted by the registration, 3: by
                  * MADV_POPULATE_READ */

static void *worker(void *a)
{
    long id = (long)a;
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); exit(1); }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    char *dst = (char *)dev + (size_t)id * piece_len;
    char *buf = NULL;
    if (mode == 1)
        CK(cudaHostAlloc((void **)&buf, piece_len, cudaHostAllocPortable));
    double t[5] = {0};
    size_t n = total / piece_len;
    for (size_t i = id; i < n; i += nthreads) {
        off_t at = (off_t)(i * piece_len);
        double a0 = now();
        if (mode != 1) {
            void *p = mmap(NULL, piece_len, PROT_READ,
                           MAP_SHARED | (mode == 0 ? MAP_POPULATE : 0), fd, at);
            if (p == MAP_FAILED) { perror("mmap"); exit(1); }
            if (mode == 3 && madvise(p, piece_len, MADV_POPULATE_READ) != 0) {
                perror("madvise"); exit(1);
            }
            double a1 = now();
            CK(cudaHostRegister(p, piece_len, cudaHostRegisterPortable |
                                cudaHostRegisterReadOnly));
            double a2 = now();
            CK(cudaMemcpyAsync(dst, p, piece_len, cudaMemcpyHostToDevice, s));
            CK(cudaStreamSynchronize(s));
            double a3 = now();
            CK(cudaHostUnregister(p));
            double a4 = now();
            munmap(p, piece_len);
            double a5 = now();
            t[0] += a1 - a0; t[1] += a2 - a1; t[2] += a3 - a2;
            t[3] += a4 - a3; t[4] += a5 - a4;
        } else {
            piece pc = { fd, at, piece_len };
            read_piece(&pc, buf);
            double a1 = now();
            CK(cudaMemcpyAsync(dst, buf, piece_len, cudaMemcpyHostToDevice, s));
            CK(cudaStreamSynchronize(s));
            double a2 = now();
            t[0] += a1 - a0; t[2] += a2 - a1;
        }
    }
    if (buf)
        cudaFreeHost(buf);
    cudaStreamDestroy(s);
    close(fd);
    pthread_mutex_lock(&mu);
    for (int k = 0; k < 5; k++)
        ph[k] += t[k];
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* Registrations back to back on a thread of their own until told to stop,
 * counting the pieces. */
static volatile int reg_stop;
static volatile long reg_done;
static void *registrar(void *a)
{
    (void)a;
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); exit(1); }
    size_t n = total / piece_len;
    for (size_t i = 0; !reg_stop; i = (i + 1) % n) {
        void *p = mmap(NULL, piece_len, PROT_READ, MAP_SHARED, fd,
                       (off_t)(i * piece_len));
        if (p == MAP_FAILED) { perror("mmap"); exit(1); }
        CK(cudaHostRegister(p, piece_len, cudaHostRegisterPortable |
                            cudaHostRegisterReadOnly));
        CK(cudaHostUnregister(p));
        munmap(p, piece_len);
        reg_done++;
    }
    close(fd);
    return NULL;
}

/* Pinned copies back to back for about a second: GB/s. */
static double copies(void *h, cudaStream_t s)
{
    size_t k = 0;
    double t0 = now(), el;
    do {
        for (int j = 0; j < 16; j++, k++)
            CK(cudaMemcpyAsync(dev, h, piece_len, cudaMemcpyHostToDevice, s));
        CK(cudaStreamSynchronize(s));
    } while ((el = now() - t0) < 1.0);
    return k * (double)piece_len / el / 1e9;
}

static double run(int m, int threads)
{
    mode = m;
    nthreads = threads;
    memset(ph, 0, sizeof ph);
    pthread_t th[64];
    double t0 = now();
    for (long i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double el = now() - t0;
    size_t moved = total / piece_len * piece_len;
    return moved / el / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: map_pin_probe FILE GIB PIECE_MIB [THREADS...]\n");
        return 2;
    }
    path = argv[1];
    total = (size_t)(atof(argv[2]) * (1 << 30));
    piece_len = (size_t)atoi(argv[3]) << 20;
    struct stat st;
    if (stat(path, &st) != 0 || (size_t)st.st_size < total) {
        /* the file made here and left in the page cache */
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { perror(path); return 1; }
        size_t blk = 64u << 20;
        char *b = (char *)malloc(blk);
        for (size_t i = 0; i < blk; i++)
            b[i] = (char)(i * 2654435761u >> 13);
        for (size_t o = 0; o < total; o += blk)
            if (pwrite(fd, b, blk, (off_t)o) != (ssize_t)blk) { perror("pwrite"); return 1; }
        close(fd);
        free(b);
    }
    /* warm: read it all once */
    {
        int fd = open(path, O_RDONLY);
        char *b = (char *)malloc(64u << 20);
        while (read(fd, b, 64u << 20) > 0) {}
        close(fd);
        free(b);
    }
    CK(cudaFree(0));
    CK(cudaMalloc(&dev, (size_t)64 * piece_len));
    /* the line: one pinned buffer copied back to back */
    {
        void *h;
        CK(cudaHostAlloc(&h, piece_len, cudaHostAllocPortable));
        memset(h, 1, piece_len);
        size_t n = total / piece_len;
        double t0 = now();
        for (size_t i = 0; i < n; i++)
            CK(cudaMemcpy(dev, h, piece_len, cudaMemcpyHostToDevice));
        double el = now() - t0;
        printf("pinned copy, %zu MiB pieces: %.2f GB/s\n", piece_len >> 20,
               n * (double)piece_len / el / 1e9);
        cudaFreeHost(h);
    }
    for (int a = 4; a < argc; a++) {
        int th = atoi(argv[a]);
        if (th < 1 || th > 64)
            continue;
        for (int rep = 0; rep < 2; rep++) {
            double g = run(0, th);
            double n = (double)(total / piece_len);
            printf("map+pin+copy+unpin, %2d threads: %6.2f GB/s  per piece ms: "
                   "map %.3f reg %.3f copy %.3f unreg %.3f unmap %.3f\n", th, g,
                   ph[0] / n * 1e3, ph[1] / n * 1e3, ph[2] / n * 1e3,
                   ph[3] / n * 1e3, ph[4] / n * 1e3);
            for (int m = 2; m <= 3; m++) {
                g = run(m, th);
                printf("map+pin+copy+unpin, %s, %2d threads: %6.2f GB/s  per piece ms: "
                       "map %.3f reg %.3f copy %.3f unreg %.3f unmap %.3f\n",
                       m == 2 ? "faulted by the registration" : "MADV_POPULATE_READ",
                       th, g, ph[0] / n * 1e3, ph[1] / n * 1e3, ph[2] / n * 1e3,
                       ph[3] / n * 1e3, ph[4] / n * 1e3);
            }
            g = run(1, th);
            printf("read into pinned+copy,  %2d threads: %6.2f GB/s  per piece ms: "
                   "read %.3f copy %.3f\n", th, g, ph[0] / n * 1e3, ph[2] / n * 1e3);
        }
    }
    /* does a registration hold up another thread's copies? */
    {
        void *h;
        cudaStream_t st;
        CK(cudaHostAlloc(&h, piece_len, cudaHostAllocPortable));
        CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        double alone = copies(h, st);
        pthread_t th;
        reg_stop = 0;
        reg_done = 0;
        pthread_create(&th, NULL, registrar, NULL);
        double t0 = now();
        double with = copies(h, st);
        reg_stop = 1;
        pthread_join(th, NULL);
        double el = now() - t0;
        printf("pinned copies on one thread: %.2f GB/s alone, %.2f GB/s while another "
               "thread maps, registers and unregisters %zu MiB pieces (%.2f GB/s of them)\n",
               alone, with, piece_len >> 20, reg_done * (double)piece_len / el / 1e9);
        cudaFreeHost(h);
    }
    return 0;
}
