/* pinned_pool.h - pinned host memory for the CUDA device's loads: buffers
 * cut from slabs and reused, the slabs made ahead of need from the
 * device's open on (pinned_pool.c). */
#ifndef DLK_PINNED_POOL_H
#define DLK_PINNED_POOL_H

#include "dlk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

typedef struct Dlk_pinned_pool Dlk_pinned_pool;

/* A buffer's size, pinned or on the device: n rounded up to 64 KiB, so
 * that the few sizes of a run's spans and chunks reuse each other's. */
static inline size_t Dlk_buf_cap(size_t n)
{
    size_t a = (size_t)64 << 10;
    return n ? (n + a - 1) & ~(a - 1) : a;
}

/* A pool for CUDA device `device` that starts making `ahead` bytes of
 * slabs at once, before CUDA is up (NULL: out of memory). */
Dlk_pinned_pool *Dlk_pinned_pool_new(int device, uint64_t ahead);
/* Make slabs ahead for `bytes` in all (those asked at the open included),
 * on new threads; less than asked already does nothing. */
void Dlk_pinned_pool_ahead(Dlk_pinned_pool *pp, uint64_t bytes);
/* CUDA's context is up (ok: the slabs' registrations begin) or failed
 * to start; trace (may be NULL) gets a `pin` line a slab, in seconds
 * from t0. */
void Dlk_pinned_pool_started(Dlk_pinned_pool *pp, bool ok, FILE *trace,
                             double t0);
/* A buffer of at least n bytes, NULL when no memory is left.  It may be
 * filled before CUDA is up; its slab is registered after. */
/* Waits until the slabs asked ahead are made and registered (or failed
 * to), or the pool closes. */
void Dlk_pinned_pool_wait(Dlk_pinned_pool *pp);
void *Dlk_pinned_get(Dlk_pinned_pool *pp, size_t n);
/* Waits until buffer p's slab is registered (or failed to be: then it is
 * pageable memory), before a copy out of it. */
void Dlk_pinned_ready(Dlk_pinned_pool *pp, const void *p);
void Dlk_pinned_put(Dlk_pinned_pool *pp, void *p);
/* Stops the makers and frees every slab (CUDA must still be usable when
 * it started). */
void Dlk_pinned_pool_free(Dlk_pinned_pool *pp);

#endif
