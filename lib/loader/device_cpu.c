/* device_cpu.c - the loader's "device" when batches stay in host memory. */
#include "device.h"
#include "augment.h"
#include "util/error.h"
#include "util/grow.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct cpu_dev {
    Dlk_dev base;
    double gather_s, step_s;
    uint64_t checksum;
    struct { double t, busy; } *marks; /* host clock: work is synchronous */
    size_t nmarks, capmarks;
} cpu_dev;

/* The sum mod 2^64 of the little-endian 64-bit words (a short last word
 * zero-padded): the same in any order, so the loads may be as wide as
 * the CPU has.  A first epoch folds every byte it reads, each piece
 * right after its read, from the core's cache: with SSE2 (every x86-64)
 * four sums of 16 bytes at a time; elsewhere four sums of 8 bytes (one
 * sum's chain of adds held it to about a word a cycle). */
uint64_t Dlk_fold64(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t s = 0, w;
    size_t i = 0;
#ifdef __SSE2__
    __m128i v0 = _mm_setzero_si128(), v1 = v0, v2 = v0, v3 = v0;
    for (; i + 64 <= n; i += 64) {
        v0 = _mm_add_epi64(v0, _mm_loadu_si128((const __m128i *)(b + i)));
        v1 = _mm_add_epi64(v1,
                           _mm_loadu_si128((const __m128i *)(b + i + 16)));
        v2 = _mm_add_epi64(v2,
                           _mm_loadu_si128((const __m128i *)(b + i + 32)));
        v3 = _mm_add_epi64(v3,
                           _mm_loadu_si128((const __m128i *)(b + i + 48)));
    }
    v0 = _mm_add_epi64(_mm_add_epi64(v0, v1), _mm_add_epi64(v2, v3));
    uint64_t lane[2];
    _mm_storeu_si128((__m128i *)lane, v0);
    s = lane[0] + lane[1];
#else
    uint64_t s1 = 0, s2 = 0, s3 = 0, x, y, z;
    for (; i + 32 <= n; i += 32) {
        memcpy(&w, b + i, 8);
        memcpy(&x, b + i + 8, 8);
        memcpy(&y, b + i + 16, 8);
        memcpy(&z, b + i + 24, 8);
        s += w;
        s1 += x;
        s2 += y;
        s3 += z;
    }
    s += s1 + s2 + s3;
#endif
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, 8);
        s += w;
    }
    if (i < n) {
        w = 0;
        memcpy(&w, b + i, n - i);
        s += w;
    }
    return s;
}

static void *cpu_alloc(Dlk_dev *d, size_t n)
{
    (void)d;
    void *p = NULL;
    /* 64-byte alignment, like the chunk payloads */
    return posix_memalign(&p, 64, n ? n : 64) ? NULL : p;
}

static void cpu_free(Dlk_dev *d, void *p)
{
    (void)d;
    free(p);
}

/* Chunk and span buffers: mapped, and unmapped when given back, so that
 * the memory they take is the budget's and no more (from malloc, spans
 * allocated and freed on many threads left arenas holding ~50 MiB more
 * per GiB streamed).  A 64-byte header holds the size. */
#define HOST_HDR 64u

static void *cpu_host_alloc(Dlk_dev *d, size_t n)
{
    (void)d;
    size_t len = n + HOST_HDR;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memcpy(p, &len, sizeof len);
    return (uint8_t *)p + HOST_HDR;
}

static void cpu_host_free(Dlk_dev *d, void *p)
{
    (void)d;
    if (!p)
        return;
    uint8_t *base = (uint8_t *)p - HOST_HDR;
    size_t len;
    memcpy(&len, base, sizeof len);
    munmap(base, len);
}

static dlk_status cpu_upload(Dlk_dev *d, const void *host, size_t n,
                             void **dev_ptr, void **handle, dlk_error *err)
{
    (void)d;
    (void)n;
    (void)err;
    *dev_ptr = (void *)host;
    *handle = NULL;
    return DLK_OK;
}

static bool cpu_host_done(Dlk_dev *d, void *handle)
{
    (void)d;
    (void)handle;
    return false; /* on cpu the chunk's host memory is its device copy */
}

static void cpu_release(Dlk_dev *d, void *handle, void *dev_ptr)
{
    (void)d;
    (void)handle;
    (void)dev_ptr;
}

static dlk_status cpu_gather(Dlk_dev *d, const Dlk_gather *g, size_t n,
                             void *dst, dlk_error *err)
{
    (void)err;
    cpu_dev *c = (cpu_dev *)d;
    double t0 = Dlk_now_s();
    for (size_t i = 0; i < n; i++)
        memcpy((uint8_t *)dst + g[i].dst_off, g[i].src, g[i].nbytes);
    c->gather_s += Dlk_now_s() - t0;
    return DLK_OK;
}

static dlk_status cpu_step(Dlk_dev *d, const void *buf, const Dlk_gather *g,
                           size_t n, double step_ms, dlk_error *err)
{
    (void)err;
    cpu_dev *c = (cpu_dev *)d;
    double t0 = Dlk_now_s();
    for (size_t i = 0; i < n; i++)
        c->checksum += Dlk_fold64((const uint8_t *)buf + g[i].dst_off,
                                  g[i].nbytes);
    /* a busy wait stands for the model's compute on this thread */
    while (step_ms > 0 && (Dlk_now_s() - t0) * 1000 < step_ms)
        ;
    c->step_s += Dlk_now_s() - t0;
    return DLK_OK;
}

static dlk_status cpu_sync(Dlk_dev *d, Dlk_dev_times *out, dlk_error *err)
{
    (void)err;
    cpu_dev *c = (cpu_dev *)d;
    out->gather_s = c->gather_s;
    out->step_s = c->step_s;
    out->copy_s = 0;
    out->checksum = c->checksum;
    return DLK_OK;
}

static void cpu_close(Dlk_dev *d)
{
    free(((cpu_dev *)d)->marks);
    free(d);
}

static dlk_status cpu_register(Dlk_dev *d, const void *p, size_t n,
                               dlk_error *err)
{
    (void)d; (void)p; (void)n; (void)err;
    return DLK_OK;
}

static void cpu_unregister(Dlk_dev *d, const void *p)
{
    (void)d; (void)p;
}

static void cpu_set_budget(Dlk_dev *d, uint64_t bytes)
{
    (void)d;
    (void)bytes;
}

static dlk_status cpu_mark(Dlk_dev *d, size_t *id, dlk_error *err)
{
    cpu_dev *c = (cpu_dev *)d;
    if (!DLK_GROW(c->marks, c->nmarks, c->capmarks, 16))
        return Dlk_oom(err);
    c->marks[c->nmarks].t = Dlk_now_s();
    c->marks[c->nmarks].busy = c->gather_s + c->step_s;
    *id = c->nmarks++;
    return DLK_OK;
}

static dlk_status cpu_span(Dlk_dev *d, size_t from, size_t to, double *wall_s,
                           double *busy_s, dlk_error *err)
{
    (void)err;
    cpu_dev *c = (cpu_dev *)d;
    *wall_s = c->marks[to].t - c->marks[from].t;
    *busy_s = c->marks[to].busy - c->marks[from].busy;
    return DLK_OK;
}

/* Batches are complete when gathered: no stream to order. */
static dlk_status cpu_no_stream(Dlk_dev *d, void *stream, dlk_error *err)
{
    (void)d;
    (void)stream;
    (void)err;
    return DLK_OK;
}

/* Ready at its open. */
static dlk_status cpu_ready(Dlk_dev *d, dlk_error *err)
{
    (void)d;
    (void)err;
    return DLK_OK;
}

static dlk_status cpu_augment(Dlk_dev *d, const Dlk_aug_spec *sp,
                              const Dlk_gather *g, const uint64_t *rows,
                              const int64_t *shapes, int ndim, size_t n,
                              uint64_t epoch, uint64_t seed, void *dst,
                              dlk_error *err)
{
    (void)err;
    cpu_dev *c = (cpu_dev *)d;
    double t0 = Dlk_now_s();
    for (size_t i = 0; i < n; i++) {
        const int64_t *s = shapes + i * (size_t)ndim;
        int64_t frames = ndim == 4 ? s[0] : 1;
        int32_t h = (int32_t)s[ndim - 3], w = (int32_t)s[ndim - 2];
        int32_t ch = (int32_t)s[ndim - 1];
        Dlk_aug_params p;
        Dlk_aug_params_for(sp, seed, epoch, rows[i], h, w, &p);
        uint64_t in_frame = (uint64_t)h * w * ch;
        uint64_t out_frame = Dlk_aug_out_bytes(sp, (uint32_t)ch);
        for (int64_t f = 0; f < frames; f++)
            Dlk_aug_image_cpu(sp, &p,
                              (const uint8_t *)g[i].src + in_frame * f, h, w,
                              ch, (uint8_t *)dst + g[i].dst_off +
                                      out_frame * f);
    }
    c->gather_s += Dlk_now_s() - t0;
    return DLK_OK;
}

static const Dlk_dev_ops cpu_ops = {
    false, cpu_host_alloc, cpu_host_free, cpu_upload, cpu_host_done,
    cpu_release,
    cpu_register, cpu_unregister, cpu_alloc, cpu_free, cpu_gather, cpu_step,
    cpu_sync, cpu_close, cpu_set_budget, cpu_mark, cpu_span, cpu_no_stream,
    cpu_no_stream, cpu_ready, NULL, NULL, NULL, NULL, cpu_augment,
};

dlk_status Dlk_dev_open_cpu(Dlk_dev **out, dlk_error *err)
{
    cpu_dev *c = calloc(1, sizeof *c);
    if (!c)
        return Dlk_oom(err);
    c->base.ops = &cpu_ops;
    *out = &c->base;
    return DLK_OK;
}
