/* order_arrays.h - an epoch's order as arrays of every position, for
 * tests that look at each (the loader computes positions as it needs
 * them: Dlk_order_at). */
#ifndef DLK_TEST_ORDER_ARRAYS_H
#define DLK_TEST_ORDER_ARRAYS_H

#include "loader/order.h"

#include <stdlib.h>

typedef struct tord {
    uint64_t n, batches;
    uint32_t batch;
    uint64_t *sample;
    uint8_t *pad;
} tord;

/* Dlk_order_build, then every position's sample and pad flag. */
static inline dlk_status tord_build(const uint64_t *first,
                                    const uint32_t *count, size_t nblocks,
                                    const Dlk_order_params *p,
                                    const dlk_loader_state *st,
                                    uint32_t rank, tord *out,
                                    dlk_error *err)
{
    Dlk_order o;
    dlk_status rc = Dlk_order_build(first, count, nblocks, p, st, rank, &o,
                                    err);
    if (rc)
        return rc;
    out->n = o.n;
    out->batches = o.batches;
    out->batch = o.batch;
    out->sample = malloc((o.n ? o.n : 1) * sizeof *out->sample);
    out->pad = malloc(o.n ? o.n : 1);
    if (!out->sample || !out->pad) {
        free(out->sample);
        free(out->pad);
        Dlk_order_free(&o);
        return DLK_ENOMEM;
    }
    Dlk_order_at(&o, 0, o.n, out->sample, out->pad);
    Dlk_order_free(&o);
    return DLK_OK;
}

static inline void tord_free(tord *o)
{
    free(o->sample);
    free(o->pad);
}

#endif
