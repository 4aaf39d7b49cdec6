/* part_check.c - a span's parts checked on a CUDA device after their copy.
 *
 * A check's kernel must not start before its copy is over.  Made to wait
 * on the device (a check stream waiting on the copy's event, queued
 * while the copy ran), the copies themselves slowed: 0.102 against 0.087
 * ms a 4 MiB span on an H200 host, and the first epoch with a step ran
 * at 84-86 ms against 76 without checks, as much with a kernel that
 * returned at once as with the real one.  Launched by this thread once
 * the host sees the copy over, nothing on the device waits on a copy
 * but the gathers, and that first epoch ran as fast as without checks
 * (docs/benchmarks.md#line-rate).  The thread polls the oldest copy's
 * event every few microseconds while checks are queued and sleeps
 * otherwise. */
#ifdef DLK_HAVE_CUDA
#include "part_check.h"
#include "util/xxh3_blocks.h"
#include "util/hash.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

cudaError_t Dlk_cuda_verify_init(const void *keys);
cudaError_t Dlk_cuda_verify(const void *base, const void *parts, unsigned n,
                            uint64_t tag, void *bad, unsigned int *flag,
                            cudaStream_t st);

/* Streams the checks are launched on, in turn: a span's check (a block
 * of threads a part, ~150 us for four 1 MiB parts on an H200) is longer
 * than its copy, so they overlap; four keep up with the copies, and with
 * the copy and compute streams stay within the eight queues CUDA gives a
 * process by default (more streams share queues). */
#define CHECK_STREAMS 4

/* How long the thread sleeps between looks at a copy's event. */
#define POLL_NS 5000

struct Dlk_check_job {
    cudaEvent_t copied;   /* the caller's */
    cudaEvent_t checked;  /* recorded after the kernel */
    const void *dev;
    Dlk_vpart *parts;
    uint32_t n;
    uint64_t tag;
    int state;            /* 0 queued, 1 launched, -1 failed to launch */
    cudaError_t err;
    Dlk_check_job *next;
};

struct Dlk_part_checker {
    int device;
    Dlk_check_timed timed;
    void *ud;
    cudaStream_t st[CHECK_STREAMS];
    unsigned next_st;
    Dlk_vbad *bad_dev;                  /* the first mismatch */
    unsigned int *flag, *flag_dev;      /* raised by the kernel with it */
    pthread_mutex_t mu;
    pthread_cond_t work;                /* a job queued, or stopping */
    pthread_cond_t launched;            /* a job left the queue */
    Dlk_check_job *head, *tail;
    bool stopping;
    pthread_t thread;
    bool have_thread;
};

/* Job j's copy over (the host polls its event), then its kernel and the
 * event after it. */
static cudaError_t launch(Dlk_part_checker *ck, Dlk_check_job *j)
{
    cudaError_t e;
    const struct timespec nap = {0, POLL_NS};
    while ((e = cudaEventQuery(j->copied)) == cudaErrorNotReady)
        nanosleep(&nap, NULL);
    if (e != cudaSuccess)
        return e;
    cudaStream_t st = ck->st[ck->next_st++ % CHECK_STREAMS];
    cudaEvent_t a = NULL, b = NULL;
    if (ck->timed && (cudaEventCreate(&a) != cudaSuccess ||
                      cudaEventCreate(&b) != cudaSuccess ||
                      cudaEventRecord(a, st) != cudaSuccess)) {
        /* untimed, not failed: the trace only lacks this line */
        (void)cudaGetLastError();
        if (a)
            cudaEventDestroy(a);
        if (b)
            cudaEventDestroy(b);
        a = b = NULL;
    }
    e = Dlk_cuda_verify(j->dev, j->parts, j->n, j->tag, ck->bad_dev,
                        ck->flag_dev, st);
    if (e == cudaSuccess && a && cudaEventRecord(b, st) == cudaSuccess) {
        ck->timed(ck->ud, a, b);
        a = b = NULL;
    }
    if (a) {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
    }
    return e == cudaSuccess ? cudaEventRecord(j->checked, st) : e;
}

static void *checker(void *arg)
{
    Dlk_part_checker *ck = arg;
    cudaSetDevice(ck->device);
    /* the default slack (50 us) would round every nap up to it */
    prctl(PR_SET_TIMERSLACK, 1000UL);
    pthread_mutex_lock(&ck->mu);
    for (;;) {
        while (!ck->head && !ck->stopping)
            pthread_cond_wait(&ck->work, &ck->mu);
        Dlk_check_job *j = ck->head;
        if (!j)
            break; /* stopping, and every queued check launched */
        pthread_mutex_unlock(&ck->mu);
        cudaError_t e = launch(ck, j);
        pthread_mutex_lock(&ck->mu);
        ck->head = j->next;
        if (!ck->head)
            ck->tail = NULL;
        j->err = e;
        j->state = e == cudaSuccess ? 1 : -1;
        pthread_cond_broadcast(&ck->launched);
    }
    pthread_mutex_unlock(&ck->mu);
    return NULL;
}

cudaError_t Dlk_part_checker_new(int device, Dlk_check_timed timed, void *ud,
                                 Dlk_part_checker **out)
{
    *out = NULL;
    Dlk_part_checker *ck = calloc(1, sizeof *ck);
    if (!ck)
        return cudaErrorMemoryAllocation;
    ck->device = device;
    ck->timed = timed;
    ck->ud = ud;
    pthread_mutex_init(&ck->mu, NULL);
    pthread_cond_init(&ck->work, NULL);
    pthread_cond_init(&ck->launched, NULL);
    Dlk_xxh3_keys k;
    Dlk_xxh3_keys_init(&k);
    cudaError_t e = Dlk_cuda_verify_init(&k);
    for (int i = 0; i < CHECK_STREAMS && e == cudaSuccess; i++)
        e = cudaStreamCreateWithFlags(&ck->st[i], cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&ck->bad_dev, sizeof *ck->bad_dev);
    if (e == cudaSuccess)
        e = cudaMemset(ck->bad_dev, 0, sizeof *ck->bad_dev);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&ck->flag, 64,
                          cudaHostAllocMapped | cudaHostAllocPortable);
    if (e == cudaSuccess) {
        *(volatile unsigned int *)ck->flag = 0;
        e = cudaHostGetDevicePointer((void **)&ck->flag_dev, ck->flag, 0);
    }
    if (e == cudaSuccess) {
        if (pthread_create(&ck->thread, NULL, checker, ck) == 0)
            ck->have_thread = true;
        else
            e = cudaErrorMemoryAllocation;
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        Dlk_part_checker_free(ck);
        return e;
    }
    *out = ck;
    return cudaSuccess;
}

cudaError_t Dlk_part_check_submit(Dlk_part_checker *ck, cudaEvent_t copied,
                                  const void *dev, const Dlk_vpart *parts,
                                  uint32_t n, uint64_t tag,
                                  Dlk_check_job **job)
{
    *job = NULL;
    Dlk_check_job *j = calloc(1, sizeof *j);
    if (!j || !(j->parts = malloc((n ? n : 1) * sizeof *parts))) {
        free(j);
        return cudaErrorMemoryAllocation;
    }
    cudaError_t e = cudaEventCreateWithFlags(&j->checked,
                                             cudaEventDisableTiming |
                                                 cudaEventBlockingSync);
    if (e != cudaSuccess) {
        free(j->parts);
        free(j);
        return e;
    }
    memcpy(j->parts, parts, n * sizeof *parts);
    j->copied = copied;
    j->dev = dev;
    j->n = n;
    j->tag = tag;
    pthread_mutex_lock(&ck->mu);
    if (ck->tail)
        ck->tail->next = j;
    else
        ck->head = j;
    ck->tail = j;
    pthread_cond_signal(&ck->work);
    pthread_mutex_unlock(&ck->mu);
    *job = j;
    return cudaSuccess;
}

/* The job off the queue: its kernel launched, or its launch failed. */
static cudaError_t wait_launched(Dlk_part_checker *ck, Dlk_check_job *j)
{
    pthread_mutex_lock(&ck->mu);
    while (j->state == 0)
        pthread_cond_wait(&ck->launched, &ck->mu);
    cudaError_t e = j->err;
    pthread_mutex_unlock(&ck->mu);
    return e;
}

cudaError_t Dlk_part_check_wait(Dlk_part_checker *ck, Dlk_check_job *job,
                                bool *mismatch, Dlk_vbad *bad)
{
    *mismatch = false;
    cudaError_t e = wait_launched(ck, job);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(job->checked);
    if (e != cudaSuccess || !*(volatile unsigned int *)ck->flag)
        return e;
    *mismatch = true;
    return cudaMemcpy(bad, ck->bad_dev, sizeof *bad, cudaMemcpyDeviceToHost);
}

void Dlk_part_check_forget(Dlk_part_checker *ck, Dlk_check_job *job)
{
    if (!job)
        return;
    if (wait_launched(ck, job) == cudaSuccess)
        cudaEventSynchronize(job->checked);
    cudaEventDestroy(job->checked);
    free(job->parts);
    free(job);
}

void Dlk_part_checker_free(Dlk_part_checker *ck)
{
    if (!ck)
        return;
    if (ck->have_thread) {
        pthread_mutex_lock(&ck->mu);
        ck->stopping = true;
        pthread_cond_signal(&ck->work);
        pthread_mutex_unlock(&ck->mu);
        pthread_join(ck->thread, NULL);
    }
    for (int i = 0; i < CHECK_STREAMS; i++)
        if (ck->st[i]) {
            cudaStreamSynchronize(ck->st[i]);
            cudaStreamDestroy(ck->st[i]);
        }
    if (ck->bad_dev)
        cudaFree(ck->bad_dev);
    if (ck->flag)
        cudaFreeHost(ck->flag);
    pthread_cond_destroy(&ck->launched);
    pthread_cond_destroy(&ck->work);
    pthread_mutex_destroy(&ck->mu);
    free(ck);
}

#endif
