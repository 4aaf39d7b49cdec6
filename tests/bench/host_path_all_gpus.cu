// host_path_all_gpus.cu - what the host allows a loader that copies out
// of the page cache on every GPU of the host at once, measured without
// dlk, in one process so that every GPU's work runs in the same window:
//   memcpy      every thread copying 64 MiB buffers of its own (the
//               host's memory alone; GB/s copied)
//   own share   each GPU's threads pread() 4 MiB pieces of that GPU's
//               share of FILES (dealt file by file, as ranks read
//               disjoint chunks) into pinned buffers, each piece then
//               copied to the GPU on the thread's stream
//   all files   the same with every GPU reading every file: GPUs that
//               read the same pages at nearly the same time find some in
//               the CPU's cache, which ranks reading disjoint chunks do
//               not
// Each for SECONDS after a barrier (a share read again from its start
// when done), the bytes of all threads over that time.
//   host_path_all_gpus THREADS_PER_GPU SECONDS FILE...
#include "cuda_probe.h"
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PIECE ((size_t)4 << 20)
#define MAX_THREADS 512

typedef struct gpu {
    int dev;
    piece *pieces;              /* its share, or every piece */
    size_t npieces, cap;
    size_t next;                /* __atomic: the next piece to read */
} gpu;

typedef struct worker {
    gpu *g;
    char *buf[2];
    void *dev[2];
    cudaEvent_t ev[2];
    cudaStream_t st;
    size_t done;
} worker;

static gpu *gpus;
static worker ws[MAX_THREADS];
static int ngpus, nthreads, mode; /* 0 memcpy, 1 own share, 2 all files */
static double seconds = 2.0;
static pthread_barrier_t ready, go; /* set up; the clock started */
static double t_go;

static void add_piece(gpu *g, piece p)
{
    if (g->npieces == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 1024;
        g->pieces = (piece *)realloc(g->pieces, g->cap * sizeof *g->pieces);
        if (!g->pieces) { perror("realloc"); exit(1); }
    }
    g->pieces[g->npieces++] = p;
}

static void *run(void *arg)
{
    worker *w = (worker *)arg;
    w->done = 0;
    if (mode == 0) {
        size_t n = 64u << 20;
        char *a = (char *)malloc(n), *b = (char *)malloc(n);
        if (!a || !b) { perror("malloc"); exit(1); }
        memset(a, 1, n);
        memset(b, 2, n);
        pthread_barrier_wait(&ready);
        pthread_barrier_wait(&go);
        while (now() - t_go < seconds) {
            copy_fn(b, a, n);
            w->done += n;
        }
        free(a);
        free(b);
        return NULL;
    }
    CK(cudaSetDevice(w->g->dev));
    gpu *g = mode == 1 ? w->g : &gpus[ngpus]; /* gpus[ngpus]: every piece */
    bool used[2] = {false, false};
    int k = 0;
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    while (now() - t_go < seconds) {
        size_t i = __atomic_fetch_add(mode == 1 ? &g->next : &w->g->next, 1,
                                      __ATOMIC_RELAXED) % g->npieces;
        if (used[k])
            CK(cudaEventSynchronize(w->ev[k]));
        const piece *p = &g->pieces[i];
        read_piece(p, w->buf[k]);
        CK(cudaMemcpyAsync(w->dev[k], w->buf[k], p->len,
                           cudaMemcpyHostToDevice, w->st));
        CK(cudaEventRecord(w->ev[k], w->st));
        used[k] = true;
        w->done += p->len;
        k ^= 1;
    }
    CK(cudaStreamSynchronize(w->st));
    return NULL;
}

static double together(int m)
{
    pthread_t th[MAX_THREADS];
    mode = m;
    for (int i = 0; i <= ngpus; i++)
        gpus[i].next = 0;
    pthread_barrier_init(&ready, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&go, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, run, &ws[i]);
    pthread_barrier_wait(&ready);
    t_go = now();
    pthread_barrier_wait(&go);
    size_t done = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        done += ws[i].done;
    }
    double s = now() - t_go;
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&go);
    return done / s / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: host_path_all_gpus THREADS_PER_GPU SECONDS "
                        "FILE...\n");
        return 2;
    }
    int per = atoi(argv[1]);
    seconds = atof(argv[2]) > 0 ? atof(argv[2]) : 2.0;
    CK(cudaGetDeviceCount(&ngpus));
    if (per < 1)
        per = 1;
    if (ngpus * per > MAX_THREADS)
        per = MAX_THREADS / ngpus;
    nthreads = ngpus * per;
    gpus = (gpu *)calloc((size_t)ngpus + 1, sizeof *gpus);
    for (int a = 3; a < argc; a++) {
        int fd = open(argv[a], O_RDONLY);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb)) { perror(argv[a]); return 1; }
        for (off_t at = 0; at < sb.st_size; at += (off_t)PIECE) {
            size_t len = (size_t)(sb.st_size - at) < PIECE
                             ? (size_t)(sb.st_size - at) : PIECE;
            add_piece(&gpus[(a - 3) % ngpus], (piece){fd, at, len});
            add_piece(&gpus[ngpus], (piece){fd, at, len});
        }
    }
    for (int i = 0; i < ngpus; i++)
        if (!gpus[i].npieces) {
            fprintf(stderr, "fewer files than GPUs\n");
            return 1;
        }
    /* buffers made before any timing: cudaHostAlloc pins at about 1 GB/s,
     * which is not what is measured here */
    for (int t = 0; t < nthreads; t++) {
        worker *w = &ws[t];
        w->g = &gpus[t / per];
        w->g->dev = t / per;
        CK(cudaSetDevice(w->g->dev));
        for (int i = 0; i < 2; i++) {
            CK(cudaHostAlloc((void **)&w->buf[i], PIECE, cudaHostAllocPortable));
            CK(cudaMalloc(&w->dev[i], PIECE));
            CK(cudaEventCreateWithFlags(&w->ev[i], cudaEventDisableTiming));
        }
        CK(cudaStreamCreateWithFlags(&w->st, cudaStreamNonBlocking));
    }
    printf("memcpy, %d threads at once (64 MiB buffers): %.2f GB/s copied\n",
           nthreads, together(0));
    together(1); /* the page cache and the links warmed */
    double own = 0, all = 0;
    for (int r = 0; r < 2; r++) {
        double g = together(1);
        own = g > own ? g : own;
    }
    printf("pread into pinned + H2D, %d GPUs at once, %d threads each, each "
           "GPU its own share of the files: %.2f GB/s together\n", ngpus, per,
           own);
    for (int r = 0; r < 2; r++) {
        double g = together(2);
        all = g > all ? g : all;
    }
    printf("the same, every GPU reading all the files: %.2f GB/s together\n",
           all);
    return 0;
}
