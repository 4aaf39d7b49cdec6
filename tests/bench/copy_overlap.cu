// copy_overlap.cu - does a kernel running on another stream slow the
// host-to-device copies the loader depends on?  Measures the H2D rate of
// back-to-back chunk copies (pinned memory, and a registered mapping of a
// file in the page cache, as the loader uses) alone and while a second
// stream runs (a) a one-thread spin kernel, (b) a device-to-device copy
// kernel plus the spin (the loader's gather and step).
//   copy_overlap [FILE] [CHUNK_MIB] [TOTAL_GIB]
#include <cuda_runtime.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CK(x)                                                              \
    do {                                                                   \
        cudaError_t e_ = (x);                                              \
        if (e_ != cudaSuccess) {                                           \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));       \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

__global__ void spin(unsigned long long ns, volatile int *stop)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns && !*stop);
}

__global__ void d2d(const uint4 *s, uint4 *d, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = s[i];
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

// mode 0: copies alone; 1: spin kernels meanwhile; 2: d2d + spin
static double run(const char *src, size_t src_n, size_t chunk, size_t total,
                  int mode, int inflight)
{
    cudaStream_t cs, ks;
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
    void *dev[64];
    for (int i = 0; i < inflight; i++)
        CK(cudaMalloc(&dev[i], chunk));
    uint4 *a, *b;
    size_t batch = 38u << 20;
    CK(cudaMalloc(&a, batch));
    CK(cudaMalloc(&b, batch));
    int *stop;
    CK(cudaMallocManaged(&stop, sizeof *stop));
    *stop = 0;
    CK(cudaDeviceSynchronize());
    // keep the compute stream busy with 0.834 ms steps
    int nk = 0;
    if (mode)
        for (; nk < 2000; nk++) {
            if (mode == 2)
                d2d<<<264, 256, 0, ks>>>(a, b, batch / 16);
            spin<<<1, 1, 0, ks>>>(834000, stop);
        }
    double t0 = now();
    size_t done = 0, off = 0;
    int k = 0;
    while (done < total) {
        if (off + chunk > src_n)
            off = 0;
        CK(cudaMemcpyAsync(dev[k], src + off, chunk, cudaMemcpyHostToDevice,
                           cs));
        k = (k + 1) % inflight;
        off += chunk;
        done += chunk;
    }
    CK(cudaStreamSynchronize(cs));
    double t = now() - t0;
    *stop = 1;
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < inflight; i++)
        CK(cudaFree(dev[i]));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(stop));
    CK(cudaStreamDestroy(cs));
    CK(cudaStreamDestroy(ks));
    return done / t / 1e9;
}

int main(int argc, char **argv)
{
    const char *file = argc > 1 ? argv[1] : NULL;
    size_t chunk = (argc > 2 ? atoi(argv[2]) : 16) * ((size_t)1 << 20);
    size_t total = (argc > 3 ? atoi(argv[3]) : 8) * ((size_t)1 << 30);
    size_t pn = (size_t)1 << 30;
    char *pinned;
    CK(cudaHostAlloc((void **)&pinned, pn, cudaHostAllocPortable));
    for (size_t i = 0; i < pn; i += 4096)
        pinned[i] = (char)i;
    const char *names[] = {"alone", "with spin kernel", "with d2d+spin"};
    for (int mode = 0; mode < 3; mode++)
        printf("pinned 1 GiB, %zu MiB copies, %s: %.2f GB/s\n", chunk >> 20,
               names[mode], run(pinned, pn, chunk, total, mode, 8));
    if (file) {
        int fd = open(file, O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st)) {
            perror(file);
            return 1;
        }
        size_t n = st.st_size & ~(size_t)4095;
        char *m = (char *)mmap(NULL, n, PROT_READ, MAP_SHARED | MAP_POPULATE,
                               fd, 0);
        if (m == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        CK(cudaHostRegister(m, n, cudaHostRegisterPortable |
                                      cudaHostRegisterReadOnly));
        for (int mode = 0; mode < 3; mode++)
            printf("registered mapping of %s (%zu MiB), %s: %.2f GB/s\n",
                   file, n >> 20, names[mode],
                   run(m, n, chunk, total, mode, 8));
        cudaHostUnregister(m);
        munmap(m, n);
    }
    return 0;
}
