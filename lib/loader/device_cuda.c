/* device_cuda.c - the loader's device on a CUDA GPU (built with
 * DLK_HAVE_CUDA).  Chunks arrive in pinned host buffers (a pool), are
 * copied whole to device memory on a copy stream, and each batch is
 * gathered from them on a compute stream that waits only for the copies
 * it needs.  Device chunk memory comes from the stream-ordered allocator
 * and is freed in stream order after the last gather that reads it.
 * Every CUDA call is checked. */
#ifdef DLK_HAVE_CUDA
#include "device.h"
#include "augment.h"
#include "part_check.h"
#include "pinned_pool.h"
#include "util/xxh3_blocks.h"
#include "util/error.h"
#include "util/grow.h"
#include "util/clock.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

cudaError_t Dlk_cuda_gather(const void *items, unsigned n, uint64_t max_bytes,
                            void *dst, cudaStream_t s);
cudaError_t Dlk_cuda_fold(const void *buf, const void *items, unsigned n,
                          uint64_t max_bytes, unsigned long long *acc,
                          double step_ms, cudaStream_t s);
cudaError_t Dlk_cuda_gather_load(void);
cudaError_t Dlk_cuda_augment(const void *items, unsigned n,
                             unsigned max_frames, const Dlk_aug_spec *sp,
                             void *dst, cudaStream_t s);

static uint64_t max_sample(const Dlk_gather *g, size_t n)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (g[i].nbytes > m)
            m = g[i].nbytes;
    return m;
}

#define CK(call)                                                            \
    do {                                                                    \
        cudaError_t e_ = (call);                                            \
        if (e_ != cudaSuccess)                                              \
            return Dlk_fail(err, DLK_EGPU, "%s: %s", #call,                 \
                            cudaGetErrorString(e_));                        \
    } while (0)

/* Device memory for chunks: buffers reused in place.  A released buffer
 * is reused once the compute stream has passed the gathers that read it
 * (an event recorded at release).  The total is bounded by the loader's
 * budget; at the bound the copy thread waits for the oldest release, which
 * is the back-pressure that keeps copies at most a budget ahead.  (The
 * stream-ordered allocator grew without bound here and stalled the copies
 * while it did: seen on an H200.) */
/* A region that buffers are cut from, front to back. */
typedef struct slab {
    void *p;
    size_t cap, used;
} slab;

typedef struct devbuf {
    void *p;
    size_t cap;
    cudaEvent_t freed;
    int state;           /* 0 free, 1 in use, 2 released (event pending) */
    uint64_t seq;        /* release order */
} devbuf;

typedef struct upload {
    cudaEvent_t copied;
    Dlk_check_job *check; /* its parts' check (NULL: none) */
    bool waited;       /* the compute stream already waits for it */
} upload;

typedef struct timing {
    cudaEvent_t a, b;
    int kind;          /* 0 gather, 1 step, 2 copy, 3 part check */
    bool shared_a;     /* a is the previous pair's b: destroyed there */
    double issued;     /* host clock when queued (for the trace) */
} timing;

typedef struct cuda_dev {
    Dlk_dev base;
    int index;
    bool no_copy_timing;         /* copies untimed (always timed today) */
    cudaStream_t copy, compute;
    pthread_mutex_t mu;          /* timings */
    Dlk_pinned_pool *pinned;     /* host buffers for the loads */
    /* CUDA starts on `starter` when the open is async (Dlk_dev_opts),
     * while loads already fill host buffers; up: 0 starting, 1 up, -1
     * failed (why: up_why) */
    pthread_t starter;
    bool have_starter;
    int up;
    char up_why[160];
    pthread_mutex_t upmu;
    pthread_cond_t upcv;
    char *trace_path;
    double t_open, t_driver;     /* the open began; the driver answered */
    /* device buffers are cut from slabs of device memory (dev_cut) */
    slab *dslabs;
    size_t ndslabs, capdslabs;
    timing *times;
    size_t ntimes, captimes;
    double gather_s, step_s, copy_s;
    unsigned long long *acc;     /* device checksum */
    /* part checks (cu_check): the checker, made while CUDA starts when
     * the loader checks parts (checks), else at the first */
    Dlk_part_checker *checker;
    bool checks;                 /* parts will be checked: made at start */
    /* gather lists, written by the host into mapped pinned memory that
     * the kernels read directly: no copy, no implicit synchronization */
    uint8_t *items;              /* host view */
    uint8_t *items_dev;          /* device view of the same memory */
    size_t items_cap;
    size_t items_off;            /* ring position */
    struct { const void *buf; void *items; } last[64]; /* per batch buffer */
    cudaEvent_t gather_end;      /* the step's start: fewer events queued */
    devbuf *bufs;
    size_t nbufs, capbufs;
    uint64_t dev_bytes, dev_limit, release_seq;
    pthread_mutex_t bmu;
    /* DLK_CUDA_TRACE=FILE: every timed copy, gather and step as a line
     * "kind host_issued gpu_start gpu_end" (seconds from t0), to see
     * what the compute stream waited for (no profiler on every machine) */
    FILE *trace;
    cudaEvent_t t0_ev;
    double t0_host;
    /* marks (cu_mark) and, once any exists, every finished gather and
     * step as [start, end) seconds after t0_ev, for cu_span */
    struct { cudaEvent_t ev; double t; } *marks;
    size_t nmarks, capmarks, resolved;
    struct { double s, e; } *ivs;
    size_t nivs, capivs;
} cuda_dev;

static void set_device(cuda_dev *c)
{
    cudaSetDevice(c->index);
}

static void free_host_side(cuda_dev *c);

/* CUDA up, or why it failed to start; waits while it starts. */
static dlk_status wait_up(cuda_dev *c, dlk_error *err)
{
    if (__atomic_load_n(&c->up, __ATOMIC_ACQUIRE) > 0)
        return DLK_OK;
    pthread_mutex_lock(&c->upmu);
    while (c->up == 0)
        pthread_cond_wait(&c->upcv, &c->upmu);
    int up = c->up;
    pthread_mutex_unlock(&c->upmu);
    return up > 0 ? DLK_OK : Dlk_fail(err, DLK_EGPU, "%s", c->up_why);
}

static dlk_status cu_ready(Dlk_dev *d, dlk_error *err)
{
    return wait_up((cuda_dev *)d, err);
}

static void *cu_host_alloc(Dlk_dev *d, size_t n)
{
    return Dlk_pinned_get(((cuda_dev *)d)->pinned, n);
}

static void cu_host_free(Dlk_dev *d, void *p)
{
    Dlk_pinned_put(((cuda_dev *)d)->pinned, p);
}

static void add_timing2(cuda_dev *c, cudaEvent_t a, cudaEvent_t b, int kind,
                        bool shared_a)
{
    pthread_mutex_lock(&c->mu);
    if (!DLK_GROW(c->times, c->ntimes, c->captimes, 256)) {
        pthread_mutex_unlock(&c->mu);
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        return;
    }
    c->times[c->ntimes++] = (timing){a, b, kind, shared_a,
                                     c->trace ? Dlk_now_s() : 0};
    pthread_mutex_unlock(&c->mu);
}

static void add_timing(cuda_dev *c, cudaEvent_t a, cudaEvent_t b, int kind)
{
    add_timing2(c, a, b, kind, false);
}

/* A device buffer of at least n bytes (see devbuf). */
/* Device memory is cut from slabs of DEV_SLAB bytes (or one buffer's,
 * if larger): a cudaMalloc a buffer, on the one thread that queues the
 * copies, cost ~0.2 s of that thread's time at the start of a run from
 * S3 (~360 buffers; DLK_CUDA_TRACE's devalloc lines). */
#define DEV_SLAB ((size_t)256 << 20)

/* A device slab of at least cap bytes (DEV_SLAB where the GPU has it),
 * none of it cut yet (called with bmu held). */
static cudaError_t dev_slab_new(cuda_dev *c, size_t cap)
{
    if (!DLK_GROW(c->dslabs, c->ndslabs, c->capdslabs, 8))
        return cudaErrorMemoryAllocation;
    size_t sz = cap > DEV_SLAB ? cap : DEV_SLAB;
    double m0 = c->trace ? Dlk_now_s() : 0;
    void *p;
    cudaError_t e = cudaMalloc(&p, sz);
    if (e != cudaSuccess && sz > cap) { /* a smaller GPU: just the buffer */
        (void)cudaGetLastError();
        e = cudaMalloc(&p, sz = cap);
    }
    if (c->trace)
        fprintf(c->trace, "devalloc %.6f %.6f %.6f\n", m0 - c->t0_host,
                m0 - c->t0_host, Dlk_now_s() - c->t0_host);
    if (e != cudaSuccess)
        return e;
    c->dslabs[c->ndslabs++] = (slab){p, sz, 0};
    return cudaSuccess;
}

static cudaError_t dev_cut(cuda_dev *c, size_t cap, void **out)
{
    slab *sl = c->ndslabs ? &c->dslabs[c->ndslabs - 1] : NULL;
    if (!sl || sl->cap - sl->used < cap) {
        cudaError_t e = dev_slab_new(c, cap);
        if (e != cudaSuccess)
            return e;
        sl = &c->dslabs[c->ndslabs - 1];
    }
    *out = (uint8_t *)sl->p + sl->used;
    sl->used += cap;
    return cudaSuccess;
}

/* A device buffer of at least n bytes (see devbuf). */
static cudaError_t acquire(cuda_dev *c, size_t n, void **out)
{
    size_t cap = Dlk_buf_cap(n);
    pthread_mutex_lock(&c->bmu);
    for (;;) {
        /* a free one needs no driver call; released ones come free in
         * the order they were released (their events are on the compute
         * stream), so only the oldest can have, if any has */
        devbuf *oldest = NULL;
        for (size_t i = 0; i < c->nbufs; i++) {
            devbuf *b = &c->bufs[i];
            if (b->cap < n)
                continue;
            if (b->state == 0) {
                b->state = 1;
                *out = b->p;
                pthread_mutex_unlock(&c->bmu);
                return cudaSuccess;
            }
            if (b->state == 2 && (!oldest || b->seq < oldest->seq))
                oldest = b;
        }
        if (oldest && cudaEventQuery(oldest->freed) == cudaSuccess) {
            oldest->state = 1;
            *out = oldest->p;
            pthread_mutex_unlock(&c->bmu);
            return cudaSuccess;
        }
        if (oldest && c->dev_bytes + cap > c->dev_limit) {
            cudaEvent_t ev = oldest->freed;
            pthread_mutex_unlock(&c->bmu);
            double w0 = c->trace ? Dlk_now_s() : 0;
            cudaError_t e = cudaEventSynchronize(ev);
            if (c->trace)
                fprintf(c->trace, "budget %.6f %.6f %.6f\n", w0 - c->t0_host,
                        w0 - c->t0_host, Dlk_now_s() - c->t0_host);
            pthread_mutex_lock(&c->bmu);
            if (e != cudaSuccess) {
                pthread_mutex_unlock(&c->bmu);
                return e;
            }
            continue; /* now free (or taken by another thread: look again) */
        }
        break; /* under the budget, or nothing to wait for: allocate */
    }
    if (!DLK_GROW(c->bufs, c->nbufs, c->capbufs, 64)) {
        pthread_mutex_unlock(&c->bmu);
        return cudaErrorMemoryAllocation;
    }
    devbuf *b = &c->bufs[c->nbufs];
    memset(b, 0, sizeof *b);
    cudaError_t e = dev_cut(c, cap, &b->p);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&b->freed, cudaEventDisableTiming);
    if (e == cudaSuccess) {
        b->cap = cap;
        b->state = 1;
        c->nbufs++;
        c->dev_bytes += b->cap;
        *out = b->p;
    }
    pthread_mutex_unlock(&c->bmu);
    return e;
}

/* Give a buffer back once the compute stream has passed what is queued. */
static void give_back(cuda_dev *c, void *p)
{
    pthread_mutex_lock(&c->bmu);
    for (size_t i = 0; i < c->nbufs; i++)
        if (c->bufs[i].p == p) {
            cudaEventRecord(c->bufs[i].freed, c->compute);
            c->bufs[i].state = 2;
            c->bufs[i].seq = ++c->release_seq;
            break;
        }
    pthread_mutex_unlock(&c->bmu);
}

static void cu_set_budget(Dlk_dev *d, uint64_t bytes)
{
    cuda_dev *c = (cuda_dev *)d;
    c->dev_limit = bytes;
}

static dlk_status cu_upload(Dlk_dev *d, const void *host, size_t n,
                            void **dev_ptr, void **handle, dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    dlk_status rc = wait_up(c, err);
    if (rc)
        return rc;
    /* a buffer filled while CUDA started: its slab registered first */
    Dlk_pinned_ready(c->pinned, host);
    set_device(c);
    upload *u = calloc(1, sizeof *u);
    if (!u)
        return Dlk_oom(err);
    cudaEvent_t a = NULL, b = NULL;
    void *p = NULL;
    bool timed = !c->no_copy_timing;
    cudaError_t e = timed ? cudaEventCreate(&a) : cudaSuccess;
    if (e == cudaSuccess && timed)
        e = cudaEventCreate(&b);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&u->copied, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = acquire(c, n, &p);
    if (e == cudaSuccess && timed)
        e = cudaEventRecord(a, c->copy);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(p, host, n, cudaMemcpyHostToDevice, c->copy);
    if (e == cudaSuccess && timed)
        e = cudaEventRecord(b, c->copy);
    if (e == cudaSuccess)
        e = cudaEventRecord(u->copied, c->copy);
    if (e != cudaSuccess) {
        free(u);
        return Dlk_fail(err, DLK_EGPU, "cannot copy a chunk of %zu bytes to "
                        "cuda:%d: %s", n, c->index, cudaGetErrorString(e));
    }
    if (timed)
        add_timing(c, a, b, 2);
    *dev_ptr = p;
    *handle = u;
    return DLK_OK;
}

/* A part check's kernel, timed for the trace. */
static void check_timed(void *ud, cudaEvent_t a, cudaEvent_t b)
{
    add_timing(ud, a, b, 3);
}

/* The checker (part_check.c), or why it cannot be made: the first check
 * tries again and says why.  Its checks are timed when there is a trace
 * (made before: set_origin). */
static cudaError_t check_start(cuda_dev *c)
{
    return c->checker ? cudaSuccess
                      : Dlk_part_checker_new(c->index,
                                             c->trace ? check_timed : NULL,
                                             c, &c->checker);
}

static dlk_status cu_check(Dlk_dev *d, void *handle, const void *dev_ptr,
                           const Dlk_vpart *parts, uint32_t n, uint64_t tag,
                           dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    upload *u = handle;
    set_device(c);
    cudaError_t e = check_start(c);
    if (e == cudaSuccess)
        e = Dlk_part_check_submit(c->checker, u->copied, dev_ptr, parts, n,
                                  tag, &u->check);
    if (e != cudaSuccess)
        return Dlk_fail(err, DLK_EGPU, "cannot check %u parts on cuda:%d: "
                        "%s", n, c->index, cudaGetErrorString(e));
    return DLK_OK;
}

static dlk_status cu_checked(Dlk_dev *d, void *handle, Dlk_vbad *bad,
                             dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    upload *u = handle;
    if (!u || !u->check)
        return DLK_OK;
    set_device(c);
    bool mismatch;
    cudaError_t e = Dlk_part_check_wait(c->checker, u->check, &mismatch, bad);
    if (e != cudaSuccess)
        return Dlk_fail(err, DLK_EGPU, "cannot read a part check on "
                        "cuda:%d: %s", c->index, cudaGetErrorString(e));
    return mismatch ? DLK_ECORRUPT : DLK_OK;
}

static bool cu_host_done(Dlk_dev *d, void *handle)
{
    (void)d;
    upload *u = handle;
    return u && cudaEventQuery(u->copied) == cudaSuccess;
}

static void cu_release(Dlk_dev *d, void *handle, void *dev_ptr)
{
    cuda_dev *c = (cuda_dev *)d;
    upload *u = handle;
    if (!u && !dev_ptr)
        return; /* never uploaded (CUDA may not have started) */
    set_device(c);
    if (u) {
        /* the check reads the device buffer given back below, and waits
         * for the copy's event */
        Dlk_part_check_forget(c->checker, u->check);
        /* the pinned buffer goes back to the pool after this: the copy
         * out of it must be over */
        cudaEventSynchronize(u->copied);
        cudaEventDestroy(u->copied);
        free(u);
    }
    if (dev_ptr)
        give_back(c, dev_ptr); /* reused after the gathers queued */
}

static void *cu_batch_alloc(Dlk_dev *d, size_t n)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    void *p = NULL;
    return cudaMalloc(&p, n ? n : 64) == cudaSuccess ? p : NULL;
}

static void cu_batch_free(Dlk_dev *d, void *p)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    cudaStreamSynchronize(c->compute);
    cudaFree(p);
}

/* The ring of gather lists given back (the compute stream past it). */
static void items_free(cuda_dev *c)
{
    if (c->items) {
        cudaHostUnregister(c->items);
        munmap(c->items, c->items_cap);
    }
    c->items = c->items_dev = NULL;
    c->items_cap = c->items_off = 0;
}

/* The ring of gather lists in mapped pinned memory, made for lists of up
 * to `bytes` (64 of them, 4 MiB at least) once the compute stream has
 * passed every kernel that reads the old one.  Made while CUDA starts:
 * made at the first batch (by cudaHostAlloc, which zeroes and pins at
 * ~1 GB/s), it held that batch's gather for 2.2-2.9 ms on an H200 host.
 * Pages faulted in here and registered pin at the slabs' rate
 * (pinned_pool.c). */
static cudaError_t items_grow(cuda_dev *c, size_t bytes)
{
    cudaError_t e = cudaStreamSynchronize(c->compute);
    if (e != cudaSuccess)
        return e;
    items_free(c);
    size_t cap = bytes * 64 > ((size_t)4 << 20) ? bytes * 64
                                                : (size_t)4 << 20;
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED)
        return cudaErrorMemoryAllocation;
    e = cudaHostRegister(p, cap, cudaHostRegisterMapped |
                                     cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        munmap(p, cap);
        return e;
    }
    void *dev = NULL;
    if ((e = cudaHostGetDevicePointer(&dev, p, 0)) != cudaSuccess) {
        cudaHostUnregister(p);
        munmap(p, cap);
        return e;
    }
    c->items = p;
    c->items_dev = dev;
    c->items_cap = cap;
    return cudaSuccess;
}

/* Place a gather list where the kernels read it: the ring.  A region is
 * written again only after the compute stream has passed every kernel
 * that reads it (we synchronize when the ring wraps, which happens once
 * per many batches). */
static dlk_status bytes_to_device(cuda_dev *c, const void *g, size_t bytes,
                                  void **out, dlk_error *err)
{
    if (bytes > c->items_cap / 8)
        CK(items_grow(c, bytes));
    if (c->items_off + bytes > c->items_cap) {
        CK(cudaStreamSynchronize(c->compute));
        c->items_off = 0;
    }
    memcpy(c->items + c->items_off, g, bytes);
    *out = c->items_dev + c->items_off;
    c->items_off += (bytes + 255) & ~(size_t)255;
    return DLK_OK;
}

static dlk_status items_to_device(cuda_dev *c, const Dlk_gather *g, size_t n,
                                  void **out, dlk_error *err)
{
    return bytes_to_device(c, g, n * sizeof *g, out, err);
}

/* The step reads the list its batch was gathered with. */
static void remember_items(cuda_dev *c, const void *buf, void *items)
{
    for (int i = 0; i < 64; i++)
        if (c->last[i].buf == buf || !c->last[i].buf) {
            c->last[i].buf = buf;
            c->last[i].items = items;
            return;
        }
}

static void *recall_items(cuda_dev *c, const void *buf)
{
    for (int i = 0; i < 64 && c->last[i].buf; i++)
        if (c->last[i].buf == buf)
            return c->last[i].items;
    return NULL;
}

static dlk_status cu_gather(Dlk_dev *d, const Dlk_gather *g, size_t n,
                            void *dst, dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    /* wait only for the copies this batch reads */
    for (size_t i = 0; i < n; i++) {
        upload *u = g[i].handle;
        if (u && !u->waited) {
            CK(cudaStreamWaitEvent(c->compute, u->copied, 0));
            u->waited = true;
        }
    }
    void *items;
    dlk_status rc = items_to_device(c, g, n, &items, err);
    if (rc)
        return rc;
    remember_items(c, dst, items);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, c->compute));
    CK(Dlk_cuda_gather(items, (unsigned)n, max_sample(g, n), dst,
                       c->compute));
    CK(cudaEventRecord(b, c->compute));
    add_timing(c, a, b, 0);
    c->gather_end = b;
    return DLK_OK;
}

/* One (sample) of an augmented batch, as augment.cu reads it. */
typedef struct Dlk_aug_item {
    const uint8_t *src;
    uint64_t dst_off;
    uint64_t in_frame, out_frame;
    int32_t h, w, c, frames;
    Dlk_aug_params p;
} Dlk_aug_item;

static dlk_status cu_augment(Dlk_dev *d, const Dlk_aug_spec *sp,
                             const Dlk_gather *g, const uint64_t *rows,
                             const int64_t *shapes, int ndim, size_t n,
                             uint64_t epoch, uint64_t seed, void *dst,
                             dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    for (size_t i = 0; i < n; i++) {
        upload *u = g[i].handle;
        if (u && !u->waited) {
            CK(cudaStreamWaitEvent(c->compute, u->copied, 0));
            u->waited = true;
        }
    }
    Dlk_aug_item *it = malloc(n * sizeof *it + 1);
    if (!it)
        return Dlk_oom(err);
    unsigned max_frames = 1;
    for (size_t i = 0; i < n; i++) {
        const int64_t *sh = shapes + i * (size_t)ndim;
        it[i].src = g[i].src;
        it[i].dst_off = g[i].dst_off;
        it[i].frames = ndim == 4 ? (int32_t)sh[0] : 1;
        it[i].h = (int32_t)sh[ndim - 3];
        it[i].w = (int32_t)sh[ndim - 2];
        it[i].c = (int32_t)sh[ndim - 1];
        it[i].in_frame = (uint64_t)it[i].h * it[i].w * it[i].c;
        it[i].out_frame = Dlk_aug_out_bytes(sp, (uint32_t)it[i].c);
        if ((unsigned)it[i].frames > max_frames)
            max_frames = (unsigned)it[i].frames;
        Dlk_aug_params_for(sp, seed, epoch, rows[i], it[i].h, it[i].w,
                           &it[i].p);
    }
    void *items, *gl;
    dlk_status rc = bytes_to_device(c, it, n * sizeof *it, &items, err);
    free(it);
    if (!rc)
        rc = items_to_device(c, g, n, &gl, err);
    if (rc)
        return rc;
    /* the step folds the output: the list with its places */
    remember_items(c, dst, gl);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, c->compute));
    CK(Dlk_cuda_augment(items, (unsigned)n, max_frames, sp, dst,
                        c->compute));
    CK(cudaEventRecord(b, c->compute));
    add_timing(c, a, b, 0);
    c->gather_end = b;
    return DLK_OK;
}

static dlk_status cu_step(Dlk_dev *d, const void *buf, const Dlk_gather *g,
                          size_t n, double step_ms, dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    void *items = recall_items(c, buf);
    if (!items) {
        dlk_status rc = items_to_device(c, g, n, &items, err);
        if (rc)
            return rc;
    }
    /* the step starts where the last gather ended (one event less) */
    cudaEvent_t a = c->gather_end, b;
    bool shared = a != NULL;
    if (!shared) {
        CK(cudaEventCreate(&a));
        CK(cudaEventRecord(a, c->compute));
    }
    c->gather_end = NULL;
    CK(cudaEventCreate(&b));
    CK(Dlk_cuda_fold(buf, items, (unsigned)n, max_sample(g, n), c->acc,
                     step_ms, c->compute));
    CK(cudaEventRecord(b, c->compute));
    add_timing2(c, a, b, 1, shared);
    return DLK_OK;
}

/* A finished gather or step, for cu_span (called locked, in stream
 * order: the intervals stay sorted). */
static void keep_interval(cuda_dev *c, double s, double e)
{
    if (!DLK_GROW(c->ivs, c->nivs, c->capivs, 1024))
        return; /* the span then undercounts busy time; no failure */
    c->ivs[c->nivs].s = s;
    c->ivs[c->nivs].e = e;
    c->nivs++;
}

static dlk_status cu_sync(Dlk_dev *d, Dlk_dev_times *out, dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    CK(cudaStreamSynchronize(c->copy));
    CK(cudaStreamSynchronize(c->compute));
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->ntimes; i++) {
        float ms = 0;
        /* a check of a span read ahead may still run on its stream */
        if (c->times[i].kind == 3)
            cudaEventSynchronize(c->times[i].b);
        if (cudaEventElapsedTime(&ms, c->times[i].a, c->times[i].b) ==
            cudaSuccess) {
            double s = ms / 1000.0;
            if (c->times[i].kind == 0)
                c->gather_s += s;
            else if (c->times[i].kind == 1)
                c->step_s += s;
            else if (c->times[i].kind == 2)
                c->copy_s += s;
            float t0 = 0;
            bool at = (c->trace || c->nmarks) &&
                      cudaEventElapsedTime(&t0, c->t0_ev, c->times[i].a) ==
                          cudaSuccess;
            if (at && c->nmarks && c->times[i].kind < 2)
                keep_interval(c, t0 / 1000.0, (t0 + ms) / 1000.0);
            if (at && c->trace)
                fprintf(c->trace, "%s %.6f %.6f %.6f\n",
                        c->times[i].kind == 0   ? "gather"
                        : c->times[i].kind == 1 ? "step"
                        : c->times[i].kind == 2 ? "copy"
                                                : "check",
                        c->times[i].issued - c->t0_host, t0 / 1000.0,
                        (t0 + ms) / 1000.0);
        }
    }
    /* then destroy: a step's start is the gather's end before it */
    for (size_t i = 0; i < c->ntimes; i++) {
        if (!c->times[i].shared_a)
            cudaEventDestroy(c->times[i].a);
        cudaEventDestroy(c->times[i].b);
    }
    c->ntimes = 0;
    c->gather_end = NULL;
    pthread_mutex_unlock(&c->mu);
    unsigned long long acc = 0;
    CK(cudaMemcpy(&acc, c->acc, sizeof acc, cudaMemcpyDeviceToHost));
    out->gather_s = c->gather_s;
    out->step_s = c->step_s;
    out->copy_s = c->copy_s;
    out->checksum = acc;
    return DLK_OK;
}

static void cu_close(Dlk_dev *d)
{
    cuda_dev *c = (cuda_dev *)d;
    if (c->have_starter)
        pthread_join(c->starter, NULL);
    if (c->up > 0) {
        set_device(c);
        cudaStreamSynchronize(c->copy);
        cudaStreamSynchronize(c->compute);
        Dlk_part_checker_free(c->checker);
        c->checker = NULL;
        for (size_t i = 0; i < c->ntimes; i++) {
            if (!c->times[i].shared_a)
                cudaEventDestroy(c->times[i].a);
            cudaEventDestroy(c->times[i].b);
        }
        items_free(c);
        for (size_t i = 0; i < c->nbufs; i++)
            cudaEventDestroy(c->bufs[i].freed);
        for (size_t i = 0; i < c->ndslabs; i++)
            cudaFree(c->dslabs[i].p);
        for (size_t i = c->resolved; i < c->nmarks; i++)
            cudaEventDestroy(c->marks[i].ev);
        cudaEventDestroy(c->t0_ev);
        cudaFree(c->acc);
        cudaStreamDestroy(c->copy);
        cudaStreamDestroy(c->compute);
    }
    free_host_side(c);
}

static dlk_status cu_register(Dlk_dev *d, const void *p, size_t n,
                              dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    dlk_status rc = wait_up(c, err);
    if (rc)
        return rc;
    set_device(c);
    /* read-only: the mapping is PROT_READ (the page cache, in place) */
    CK(cudaHostRegister((void *)p, n,
                        cudaHostRegisterPortable | cudaHostRegisterReadOnly));
    return DLK_OK;
}

static void cu_unregister(Dlk_dev *d, const void *p)
{
    set_device((cuda_dev *)d);
    cudaHostUnregister((void *)p);
}

static dlk_status cu_mark(Dlk_dev *d, size_t *id, dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    if (!DLK_GROW(c->marks, c->nmarks, c->capmarks, 16))
        return Dlk_oom(err);
    cudaEvent_t ev;
    CK(cudaEventCreate(&ev));
    cudaError_t e = cudaEventRecord(ev, c->compute);
    if (e != cudaSuccess) {
        cudaEventDestroy(ev);
        return Dlk_fail(err, DLK_EGPU, "cudaEventRecord: %s",
                        cudaGetErrorString(e));
    }
    pthread_mutex_lock(&c->mu);
    c->marks[c->nmarks].ev = ev;
    c->marks[c->nmarks].t = 0;
    *id = c->nmarks++;
    pthread_mutex_unlock(&c->mu);
    return DLK_OK;
}

static dlk_status cu_span(Dlk_dev *d, size_t from, size_t to, double *wall_s,
                          double *busy_s, dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    Dlk_dev_times t;
    dlk_status rc = cu_sync(d, &t, err); /* the work and its intervals */
    if (rc)
        return rc;
    for (; c->resolved < c->nmarks; c->resolved++) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, c->t0_ev, c->marks[c->resolved].ev));
        c->marks[c->resolved].t = ms / 1000.0;
        cudaEventDestroy(c->marks[c->resolved].ev);
    }
    double a = c->marks[from].t, b = c->marks[to].t, busy = 0;
    /* the first interval that ends after a (they are sorted) */
    size_t lo = 0, hi = c->nivs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->ivs[mid].e <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < c->nivs && c->ivs[i].s < b; i++) {
        double s = c->ivs[i].s > a ? c->ivs[i].s : a;
        double e = c->ivs[i].e < b ? c->ivs[i].e : b;
        if (e > s)
            busy += e - s;
    }
    *wall_s = b - a;
    *busy_s = busy;
    return DLK_OK;
}

/* `waiter` waits for what is queued on `signaller` so far, through an
 * event (destroying it right after the wait is queued is allowed). */
static dlk_status stream_order(cudaStream_t signaller, cudaStream_t waiter,
                               dlk_error *err)
{
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaError_t e = cudaEventRecord(ev, signaller);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(waiter, ev, 0);
    cudaEventDestroy(ev);
    if (e != cudaSuccess)
        return Dlk_fail(err, DLK_EGPU, "cannot order a consumer's stream "
                        "with the loader's: %s", cudaGetErrorString(e));
    return DLK_OK;
}

static dlk_status cu_consumer_waits(Dlk_dev *d, void *stream, dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    return stream_order(c->compute, stream ? (cudaStream_t)stream
                                           : cudaStreamLegacy, err);
}

static dlk_status cu_wait_consumer(Dlk_dev *d, void *stream, dlk_error *err)
{
    cuda_dev *c = (cuda_dev *)d;
    set_device(c);
    return stream_order(stream ? (cudaStream_t)stream : cudaStreamLegacy,
                        c->compute, err);
}

/* Loads that end once the device is up (the trace is opened as it
 * starts; loads made meanwhile are not written). */
static void cu_trace_load(Dlk_dev *d, double begin, double buffer,
                          double end)
{
    cuda_dev *c = (cuda_dev *)d;
    if (__atomic_load_n(&c->up, __ATOMIC_ACQUIRE) != 1 || !c->trace)
        return;
    double t0 = c->t0_host;
    fprintf(c->trace, "load %.6f %.6f %.6f\n", begin - t0,
            (buffer > 0 ? buffer : begin) - t0, end - t0);
}

static void cu_host_ahead(Dlk_dev *d, uint64_t bytes)
{
    Dlk_pinned_pool_ahead(((cuda_dev *)d)->pinned, bytes);
}

static const Dlk_dev_ops cuda_ops = {
    true, cu_host_alloc, cu_host_free, cu_upload, cu_host_done, cu_release,
    cu_register, cu_unregister, cu_batch_alloc, cu_batch_free, cu_gather,
    cu_step, cu_sync, cu_close, cu_set_budget, cu_mark, cu_span,
    cu_consumer_waits, cu_wait_consumer, cu_ready, cu_check, cu_checked,
    cu_trace_load, cu_host_ahead, cu_augment,
};

int dlk_cuda_available(char *why, size_t cap)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        if (why && cap)
            snprintf(why, cap, "no NVIDIA GPU or driver found (%s)",
                     e != cudaSuccess ? cudaGetErrorString(e)
                                      : "no CUDA device");
        return 0;
    }
    return n;
}

/* The origin of marks and traces: an event on the compute stream and the
 * host's clock at once; the trace file opened (called once the streams
 * are made). */
static cudaError_t set_origin(cuda_dev *c)
{
    cudaError_t e = cudaEventCreate(&c->t0_ev);
    if (e == cudaSuccess)
        e = cudaEventRecord(c->t0_ev, c->compute);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(c->t0_ev);
    c->t0_host = Dlk_now_s();
    if (e == cudaSuccess && c->trace_path &&
        (c->trace = fopen(c->trace_path, "w"))) {
        /* where the trace's times start, on CLOCK_MONOTONIC: other
         * processes' logs (a server's requests) line up with it */
        fprintf(c->trace, "origin %.6f %.6f %.6f\n", c->t0_host, c->t0_host,
                c->t0_host);
        fprintf(c->trace, "cuda %.6f %.6f %.6f\n", c->t_open - c->t0_host,
                c->t_driver - c->t0_host, 0.0);
    }
    return e;
}

/* CUDA's start (on the starter thread when the open is async): the
 * context, the streams, the origin; then, while the pinners register the
 * host buffers made ahead, the checksum, the first device memory, the
 * ring of gather lists and the kernels.  The device is up once those
 * buffers are registered: the driver holds every other call of the
 * process while a registration runs, so copies could not start sooner,
 * and a loader that is up copies at line rate from its first batch. */
static cudaError_t start_cuda(cuda_dev *c)
{
    cudaError_t e = cudaSetDevice(c->index);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = set_origin(c);
    Dlk_pinned_pool_started(c->pinned, e == cudaSuccess, c->trace,
                            c->t0_host);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&c->acc, sizeof *c->acc);
    if (e == cudaSuccess)
        e = cudaMemset(c->acc, 0, sizeof *c->acc);
    if (e == cudaSuccess) {
        /* keep freed chunk memory in the pool instead of returning it */
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        if (cudaDeviceGetDefaultMemPool(&pool, c->index) == cudaSuccess) {
            cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                    &keep);
        }
    }
    if (e == cudaSuccess) {
        /* the first copies' device memory, so that the first copy does
         * not also wait for a cudaMalloc.  Not having it is no error:
         * the first copy asks again. */
        pthread_mutex_lock(&c->bmu);
        if (!c->ndslabs && dev_slab_new(c, DEV_SLAB) != cudaSuccess)
            (void)cudaGetLastError();
        pthread_mutex_unlock(&c->bmu);
        /* CUDA loads a kernel's module at its first launch: loaded here,
         * the first batch does not wait for it (1.5-3 ms on an H200
         * host).  A failure here is met again, and said, where the
         * kernel is first used. */
        if (Dlk_cuda_gather_load() != cudaSuccess)
            (void)cudaGetLastError();
        if (items_grow(c, 0) != cudaSuccess)
            (void)cudaGetLastError();
        if (c->checks && check_start(c) != cudaSuccess)
            (void)cudaGetLastError();
    }
    if (e == cudaSuccess)
        Dlk_pinned_pool_wait(c->pinned);
    pthread_mutex_lock(&c->upmu);
    if (e != cudaSuccess)
        snprintf(c->up_why, sizeof c->up_why, "cuda:%d: %s", c->index,
                 cudaGetErrorString(e));
    __atomic_store_n(&c->up, e == cudaSuccess ? 1 : -1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&c->upcv);
    pthread_mutex_unlock(&c->upmu);
    return e;
}

static void *starter(void *arg)
{
    start_cuda(arg);
    return NULL;
}

/* The host parts of the device and c itself. */
static void free_host_side(cuda_dev *c)
{
    Dlk_pinned_pool_free(c->pinned);
    free(c->times);
    free(c->bufs);
    free(c->dslabs);
    free(c->marks);
    free(c->ivs);
    free(c->trace_path);
    if (c->trace)
        fclose(c->trace);
    pthread_mutex_destroy(&c->bmu);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->upmu);
    pthread_cond_destroy(&c->upcv);
    free(c);
}

dlk_status Dlk_dev_open_cuda(int index, const Dlk_dev_opts *o,
                             Dlk_dev **out, dlk_error *err)
{
    *out = NULL;
    double t_open = Dlk_now_s();
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return Dlk_fail(err, DLK_EGPU, "cuda:%d: no NVIDIA GPU or driver "
                        "found (%s)", index, cudaGetErrorString(e));
    if (index >= n)
        return Dlk_fail(err, DLK_EGPU, "cuda:%d: this machine has %d CUDA "
                        "device%s", index, n, n == 1 ? "" : "s");
    cuda_dev *c = calloc(1, sizeof *c);
    if (!c)
        return Dlk_oom(err);
    c->base.ops = &cuda_ops;
    c->index = index;
    c->t_open = t_open;
    c->t_driver = Dlk_now_s();
    c->checks = o && o->checks;
    c->dev_limit = UINT64_MAX;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->bmu, NULL);
    pthread_mutex_init(&c->upmu, NULL);
    pthread_cond_init(&c->upcv, NULL);
    /* the host buffers' pages are faulted in while CUDA starts */
    c->pinned = Dlk_pinned_pool_new(index, o ? o->host_ahead : 0);
    if (!c->pinned || (o && o->trace && *o->trace &&
                       !(c->trace_path = strdup(o->trace)))) {
        free_host_side(c);
        return Dlk_oom(err);
    }
    if (o && o->async &&
        pthread_create(&c->starter, NULL, starter, c) == 0) {
        c->have_starter = true;
    } else if ((e = start_cuda(c)) != cudaSuccess) {
        free_host_side(c);
        return Dlk_fail(err, DLK_EGPU, "cuda:%d: %s", index,
                        cudaGetErrorString(e));
    }
    *out = &c->base;
    return DLK_OK;
}
#endif
