/* pinned_pool.c - pinned host memory for the CUDA device's loads.
 * Buffers are cut from slabs of HOST_SLAB bytes and reused.  The slabs a
 * loader's budget needs are made ahead of need by PINNERS threads from
 * the device's open on: a slab's pages are faulted in (the cost: the
 * kernel zeroes them) while CUDA starts, loads may fill its buffers at
 * once, and it is registered with the driver (pinned) once CUDA's
 * context is up; the device is up once the slabs made ahead are
 * (Dlk_pinned_pool_wait), and a copy out of a later slab's buffer waits
 * for its registration (Dlk_pinned_ready).  Past what was asked ahead, a
 * load makes a slab itself, one at a time. */
#ifdef DLK_HAVE_CUDA
#include "pinned_pool.h"
#include "util/grow.h"
#include "util/clock.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Slabs, not a pin a buffer: a pin a buffer on every loading thread at
 * once made ~300 pins of 5 MiB at the start of a run from S3 that took
 * 1.7-9.9 s of thread time in all, their page faults and registrations
 * queueing on the process's memory map and in the driver; from slabs,
 * 42-44 pins take 0.4 s (two H200 ranks, DLK_CUDA_TRACE;
 * docs/benchmarks.md#label-mix). */
#define HOST_SLAB ((size_t)32 << 20)

/* Threads that make slabs ahead.  One thread made ~3.5 GB/s of pinned
 * memory (an H200 host: 37 slabs in 0.34 s), less than a first epoch
 * from the page cache reads; with four, a budget of 13 slabs was pinned
 * within 15 ms of CUDA's start, and eight did no better
 * (docs/benchmarks.md#line-rate). */
#define PINNERS 4
/* Threads a pool may have started in all: PINNERS at its open, and as
 * many again for each of a few later asks (Dlk_pinned_pool_ahead). */
#define PINNERS_MAX (4 * PINNERS)

typedef struct slab {
    void *p;
    size_t cap, used;
    double t0;       /* when its faults began (the trace) */
    int pin;         /* 0 not yet, 1 being registered, 2 pinned, -1 failed */
} slab;

typedef struct pinned_buf {
    void *p;
    size_t cap;
    bool used;
} pinned_buf;

struct Dlk_pinned_pool {
    int device;
    pthread_mutex_t mu;
    pthread_cond_t made;     /* a slab was added or pinned, or a maker
                              * gave up */
    pthread_cond_t started;  /* CUDA is up, failed, or the pool closes */
    pinned_buf *bufs;
    size_t nbufs, capbufs;
    slab *slabs;
    size_t nslabs, capslabs;
    size_t unpinned;         /* slabs with pin 0 */
    size_t unready;          /* slabs with pin 0 or 1: changed locked,
                              * read without the lock by
                              * Dlk_pinned_ready */
    bool making;             /* a load is making a slab */
    pthread_t pinners[PINNERS_MAX];
    int npinners;
    size_t ahead;            /* slabs to make ahead */
    size_t claimed;          /* of those, taken by a pinner */
    size_t faulting;         /* claimed, not yet added */
    int state;               /* 0 CUDA starting, 1 up, -1 failed/closing */
    FILE *trace;
    double t0;
};

/* Anonymous memory with its pages faulted in by the calling thread (huge
 * pages where the kernel gives them: fewer to fault and to pin). */
static void *fault_in(size_t cap)
{
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, cap, MADV_HUGEPAGE);
    for (size_t o = 0; o < cap; o += 4096)
        ((volatile char *)p)[o] = 0;
    return p;
}

/* Registering pages already there runs at ~17 GB/s; cudaHostAlloc zeroes
 * and pins in the driver, one call at a time, at ~1 GB/s (an H100 host;
 * docs/benchmarks.md#s3-throughput).  Loads may be writing into the
 * slab meanwhile: registration pins its pages where they are.
 *
 * On the pinners, all at once, from CUDA's context on and before the
 * device is up: the driver holds the process's other CUDA calls while a
 * registration runs (DLK_CUDA_TRACE), so a first copy could not come
 * sooner.  Registered after the device was up, they held the first
 * epoch's copies for 11-15 ms (H200 hosts).  Made by the copy thread
 * instead, in the order its copies need them, one at a time between
 * copies, the 13 slabs took 24-37 ms and the first epoch ran 5-12%
 * slower on one, two and four H200. */
static bool pin(Dlk_pinned_pool *pp, void *p, size_t cap)
{
    cudaSetDevice(pp->device);
    return cudaHostRegister(p, cap, cudaHostRegisterPortable) == cudaSuccess;
}

/* A slab faulted in, its buffers free to cut (called locked). */
static bool add_slab(Dlk_pinned_pool *pp, void *p, size_t cap, double t0)
{
    if (!DLK_GROW(pp->slabs, pp->nslabs, pp->capslabs, 16))
        return false;
    pp->slabs[pp->nslabs++] = (slab){p, cap, 0, t0, 0};
    pp->unpinned++;
    __atomic_add_fetch(&pp->unready, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pp->made);
    return true;
}

/* Registers slab i (called locked, CUDA up; unlocks meanwhile).  A slab
 * that fails to register stays usable: copies out of it are then from
 * pageable memory. */
static void pin_slab(Dlk_pinned_pool *pp, size_t i)
{
    pp->slabs[i].pin = 1;
    pp->unpinned--;
    void *p = pp->slabs[i].p;
    size_t cap = pp->slabs[i].cap;
    pthread_mutex_unlock(&pp->mu);
    double t1 = Dlk_now_s();
    bool ok = pin(pp, p, cap);
    pthread_mutex_lock(&pp->mu);
    slab *sl = &pp->slabs[i]; /* the array may have moved */
    sl->pin = ok ? 2 : -1;
    __atomic_sub_fetch(&pp->unready, 1, __ATOMIC_RELEASE);
    if (ok && pp->trace)
        fprintf(pp->trace, "pin %.6f %.6f %.6f\n", sl->t0 - pp->t0,
                t1 - pp->t0, Dlk_now_s() - pp->t0);
    pthread_cond_broadcast(&pp->made);
}

static bool first_unpinned(const Dlk_pinned_pool *pp, size_t *i)
{
    for (*i = 0; *i < pp->nslabs; (*i)++)
        if (pp->slabs[*i].pin == 0)
            return true;
    return false;
}

/* A pinner registers the slabs faulted in once CUDA is up, before it
 * faults more (copies wait for registered ones); until then it faults
 * in the slabs asked ahead. */
static void *pinner(void *arg)
{
    Dlk_pinned_pool *pp = arg;
    size_t i;
    pthread_mutex_lock(&pp->mu);
    for (;;) {
        if (pp->state > 0 && first_unpinned(pp, &i)) {
            pin_slab(pp, i);
        } else if (pp->state >= 0 && pp->claimed < pp->ahead) {
            pp->claimed++;
            pp->faulting++;
            pthread_mutex_unlock(&pp->mu);
            double t0 = Dlk_now_s();
            void *p = fault_in(HOST_SLAB);
            pthread_mutex_lock(&pp->mu);
            pp->faulting--;
            if (!p || !add_slab(pp, p, HOST_SLAB, t0)) {
                if (p)
                    munmap(p, HOST_SLAB);
                pp->ahead = pp->claimed; /* memory is short: no more */
                pthread_cond_broadcast(&pp->made);
            }
        } else if (pp->state == 0 && pp->unpinned) {
            pthread_cond_wait(&pp->started, &pp->mu);
        } else {
            break;
        }
    }
    pthread_mutex_unlock(&pp->mu);
    return NULL;
}

Dlk_pinned_pool *Dlk_pinned_pool_new(int device, uint64_t ahead)
{
    Dlk_pinned_pool *pp = calloc(1, sizeof *pp);
    if (!pp)
        return NULL;
    pp->device = device;
    pthread_mutex_init(&pp->mu, NULL);
    pthread_cond_init(&pp->made, NULL);
    pthread_cond_init(&pp->started, NULL);
    pp->ahead = (size_t)((ahead + HOST_SLAB - 1) / HOST_SLAB);
    int want = pp->ahead < PINNERS ? (int)pp->ahead : PINNERS;
    for (int i = 0; i < want; i++) {
        if (pthread_create(&pp->pinners[i], NULL, pinner, pp) != 0)
            break;
        pthread_setname_np(pp->pinners[i], "dlk-pin");
        pp->npinners++;
    }
    if (!pp->npinners)
        pp->ahead = 0; /* the loads make their own */
    return pp;
}

void Dlk_pinned_pool_ahead(Dlk_pinned_pool *pp, uint64_t bytes)
{
    pthread_mutex_lock(&pp->mu);
    size_t want = (size_t)((bytes + HOST_SLAB - 1) / HOST_SLAB);
    if (want > pp->ahead && pp->state >= 0) {
        size_t more = want - pp->ahead;
        int made = 0;
        for (size_t i = 0; i < more && i < PINNERS &&
                           pp->npinners < PINNERS_MAX; i++) {
            if (pthread_create(&pp->pinners[pp->npinners], NULL, pinner,
                               pp) != 0)
                break;
            pthread_setname_np(pp->pinners[pp->npinners], "dlk-pin");
            pp->npinners++;
            made++;
        }
        if (made) /* else the loads make their own, as past any ahead */
            pp->ahead = want;
    }
    pthread_mutex_unlock(&pp->mu);
}

void Dlk_pinned_pool_started(Dlk_pinned_pool *pp, bool ok, FILE *trace,
                             double t0)
{
    pthread_mutex_lock(&pp->mu);
    pp->state = ok ? 1 : -1;
    pp->trace = trace;
    pp->t0 = t0;
    pthread_cond_broadcast(&pp->started);
    pthread_cond_broadcast(&pp->made);
    pthread_mutex_unlock(&pp->mu);
}

void Dlk_pinned_pool_wait(Dlk_pinned_pool *pp)
{
    pthread_mutex_lock(&pp->mu);
    while (pp->state > 0 &&
           (pp->claimed < pp->ahead || pp->faulting || pp->unready))
        pthread_cond_wait(&pp->made, &pp->mu);
    pthread_mutex_unlock(&pp->mu);
}

/* A slab made by a load, past what was made ahead (called locked; the
 * lock is let go meanwhile).  It is registered here once CUDA is up:
 * the pinners may be gone. */
static bool make_slab(Dlk_pinned_pool *pp, size_t sz)
{
    pp->making = true;
    pthread_mutex_unlock(&pp->mu);
    double t0 = Dlk_now_s();
    void *p = fault_in(sz);
    pthread_mutex_lock(&pp->mu);
    pp->making = false;
    bool ok = p && add_slab(pp, p, sz, t0);
    if (!ok && p)
        munmap(p, sz);
    pthread_cond_broadcast(&pp->made);
    if (!ok)
        return false;
    size_t i = pp->nslabs - 1;
    while (pp->state == 0)
        pthread_cond_wait(&pp->started, &pp->mu);
    if (pp->state > 0 && pp->slabs[i].pin == 0)
        pin_slab(pp, i);
    return true;
}

/* The first free buffer in the order they were cut: the loads keep
 * reusing the same few, which stay in the host's last-level cache (the
 * loader gives a span's buffer back once its copy is over; loader_io.c). */
void *Dlk_pinned_get(Dlk_pinned_pool *pp, size_t n)
{
    size_t cap = Dlk_buf_cap(n);
    void *out = NULL;
    pthread_mutex_lock(&pp->mu);
    for (;;) {
        for (size_t i = 0; i < pp->nbufs; i++)
            if (!pp->bufs[i].used && pp->bufs[i].cap >= n) {
                pp->bufs[i].used = true;
                out = pp->bufs[i].p;
                goto done;
            }
        for (size_t i = 0; i < pp->nslabs; i++) {
            slab *sl = &pp->slabs[i];
            if (sl->cap - sl->used < cap)
                continue;
            if (!DLK_GROW(pp->bufs, pp->nbufs, pp->capbufs, 64))
                goto done;
            out = (uint8_t *)sl->p + sl->used;
            sl->used += cap;
            pp->bufs[pp->nbufs++] = (pinned_buf){out, cap, true};
            goto done;
        }
        /* slabs on their way: made ahead, or by another load */
        if (pp->faulting || (pp->state >= 0 && pp->claimed < pp->ahead) ||
            pp->making) {
            pthread_cond_wait(&pp->made, &pp->mu);
            continue;
        }
        if (!make_slab(pp, cap > HOST_SLAB ? cap : HOST_SLAB))
            goto done;
    }
done:
    pthread_mutex_unlock(&pp->mu);
    return out;
}

void Dlk_pinned_ready(Dlk_pinned_pool *pp, const void *p)
{
    /* once every slab is registered (all but a run's first copies): no
     * lock, no search.  A slab is added, and counted, before any buffer
     * of it is handed out. */
    if (!__atomic_load_n(&pp->unready, __ATOMIC_ACQUIRE))
        return;
    const uint8_t *b = p;
    pthread_mutex_lock(&pp->mu);
    for (size_t i = 0; i < pp->nslabs; i++) {
        const uint8_t *s = pp->slabs[i].p;
        if (b < s || b >= s + pp->slabs[i].cap)
            continue;
        while (pp->state >= 0 && (pp->slabs[i].pin == 0 ||
                                   pp->slabs[i].pin == 1))
            pthread_cond_wait(&pp->made, &pp->mu);
        break;
    }
    pthread_mutex_unlock(&pp->mu);
}

void Dlk_pinned_put(Dlk_pinned_pool *pp, void *p)
{
    pthread_mutex_lock(&pp->mu);
    for (size_t i = 0; i < pp->nbufs; i++)
        if (pp->bufs[i].p == p)
            pp->bufs[i].used = false;
    pthread_mutex_unlock(&pp->mu);
}

void Dlk_pinned_pool_free(Dlk_pinned_pool *pp)
{
    if (!pp)
        return;
    pthread_mutex_lock(&pp->mu);
    pp->state = -1;
    pthread_cond_broadcast(&pp->started);
    pthread_cond_broadcast(&pp->made);
    pthread_mutex_unlock(&pp->mu);
    for (int i = 0; i < pp->npinners; i++)
        pthread_join(pp->pinners[i], NULL);
    for (size_t i = 0; i < pp->nslabs; i++) {
        if (pp->slabs[i].pin == 2)
            cudaHostUnregister(pp->slabs[i].p);
        munmap(pp->slabs[i].p, pp->slabs[i].cap);
    }
    free(pp->slabs);
    free(pp->bufs);
    pthread_cond_destroy(&pp->made);
    pthread_cond_destroy(&pp->started);
    pthread_mutex_destroy(&pp->mu);
    free(pp);
}
#endif
