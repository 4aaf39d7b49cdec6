/* order.h - which samples each rank reads, in which order, per epoch: a
 * pure function of the dataset's chunk sizes, the options and the state,
 * so every rank computes the same plan without talking to the others. */
#ifndef DLK_ORDER_H
#define DLK_ORDER_H

#include "internal.h"

typedef struct dlk_order_params {
    int shuffle;
    uint64_t seed;
    uint64_t window_blocks;  /* blocks a shuffle window holds */
    uint64_t chunk_blocks;   /* blocks a chunk makes, on average (the
                                first window is a whole number of
                                chunks' worth); 0 or 1: blocks are chunks */
    int drop_last;
    const uint64_t *rows;  /* only these samples (ascending); NULL: all */
    uint64_t nrows;
} dlk_order_params;

/* The stream of one rank for the current segment of an epoch. */
typedef struct dlk_order {
    uint64_t n;          /* positions: batches * batch */
    uint64_t *sample;    /* global sample index at each position */
    uint8_t *pad;        /* 1 where the position repeats a sample */
    uint64_t batches;
    uint32_t batch;
} dlk_order;

/* Blocks are the units the dataset is stored in (the chunks of its main
 * tensor): block i holds samples [first[i], first[i] + count[i]).  The
 * plan for `rank` under the last segment of `st` (its world and batch);
 * with p->rows, of those samples only (a block keeps its place in the
 * permutation; one without any is left out);
 * the steps of earlier segments are consumed, those of the last are not
 * skipped here (the loader skips them). */
dlk_status dlk_order_build(const uint64_t *first, const uint32_t *count,
                           size_t nblocks, const dlk_order_params *p,
                           const dlk_loader_state *st, uint32_t rank,
                           dlk_order *out, dlk_error *err);
void dlk_order_free(dlk_order *o);

#endif
