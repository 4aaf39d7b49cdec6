/* order.h - which samples each rank reads, in which order, per epoch: a
 * pure function of the dataset's chunk sizes, the options and the state,
 * so every rank computes the same plan without talking to the others.
 * A plan holds what the blocks and the rank's windows are, not a sample
 * for every position: a position's sample is computed when it is asked
 * for (Dlk_order_at), so the plan's memory follows the blocks. */
#ifndef DLK_ORDER_H
#define DLK_ORDER_H

#include "dlk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Dlk_order_params {
    int shuffle;
    uint64_t seed;
    uint64_t window_blocks;  /* blocks a shuffle window holds */
    uint64_t chunk_blocks;   /* blocks a chunk makes, on average (the
                                first window is a whole number of
                                chunks' worth); 0 or 1: blocks are chunks */
    int drop_last;
    const uint64_t *rows;  /* only these samples (ascending); NULL: all */
    uint64_t nrows;
} Dlk_order_params;

/* The stream of one rank for the current segment of an epoch.  It
 * borrows the blocks' `first` array and the params' rows, which must
 * outlive it. */
typedef struct Dlk_order {
    uint64_t n;          /* positions: batches * batch */
    uint64_t batches;
    uint32_t batch;
    /* the rest is order.c's */
    uint64_t span;       /* positions of the rank's share of the base
                          * (positions from span on repeat the first) */
    uint64_t start;      /* where the share starts in the base */
    uint64_t base_n;     /* samples the segment deals out */
    struct Dlk_order_rest *rest; /* a later segment's: what the earlier
                           * segments' ranks left (owned); NULL:
                           * segment 0's, read from the blocks */
    uint64_t *at;        /* segment 0: block i starts at position at[i] */
    size_t *blk;         /*   of the base, and is block blk[i] */
    uint64_t *rlo;       /*   with rows: its first row is rows[rlo[i]] */
    size_t nb;
    const uint64_t *first;
    const uint64_t *rows;
    uint64_t *win;       /* window k: share positions [win[k], win[k+1]) */
    uint64_t *wkey;      /* its permutation's key (shuffled only) */
    size_t nwin;
    bool shuffled;
} Dlk_order;

/* Blocks are the units the dataset is stored in (the chunks of its main
 * tensor): block i holds samples [first[i], first[i] + count[i]).  The
 * plan for `rank` under the last segment of `st` (its world and batch);
 * with p->rows, of those samples only (a block keeps its place in the
 * permutation; one without any is left out);
 * the steps of earlier segments are consumed, those of the last are not
 * skipped here (the loader skips them). */
dlk_status Dlk_order_build(const uint64_t *first, const uint32_t *count,
                           size_t nblocks, const Dlk_order_params *p,
                           const dlk_loader_state *st, uint32_t rank,
                           Dlk_order *out, dlk_error *err);
void Dlk_order_free(Dlk_order *o);

/* The samples of positions [pos, pos + count) (within o->n) into
 * sample[], and 1 into pad[] (may be NULL) where a position repeats a
 * sample as padding. */
void Dlk_order_at(const Dlk_order *o, uint64_t pos, uint64_t count,
                  uint64_t *sample, uint8_t *pad);

/* The windows of the rank's share, for a plan that follows them instead
 * of every position: window k covers positions [*a, *b) (b <= o->n) and
 * its samples are those of runs of consecutive sample indices
 * (Dlk_order_runs): in their positions' order from *a on when not
 * *shuffled, anywhere in [*a, *b) when shuffled.  False (a, b still
 * set) where the window's samples cannot be listed so (a later
 * segment's, or one cut short by drop_last): the caller reads those
 * positions with Dlk_order_at.  Positions from the end of the last
 * window to o->n are padding, read with Dlk_order_at. */
size_t Dlk_order_nwindows(const Dlk_order *o);
bool Dlk_order_window(const Dlk_order *o, size_t k, uint64_t *a, uint64_t *b,
                      bool *shuffled);
typedef void (*Dlk_order_run_fn)(void *ud, uint64_t sample, uint64_t count,
                                 uint64_t pos);
void Dlk_order_runs(const Dlk_order *o, size_t k, Dlk_order_run_fn fn,
                    void *ud);

/* A later segment's plan (a resume under another world or batch size),
 * whose windows cannot be listed: Dlk_order_pieces hands fn its
 * positions from 0 on in pieces, each [a, b) either a shuffled window
 * `win` of segment 0's plan `src`, whole or at least 1/DLK_ORDER_PART_MIN
 * of it (its samples listed by Dlk_order_runs(src, win, ...), anywhere
 * in [a, b): those of the positions, and of a part also the window's
 * others, whose chunks such a part needs about all of anyway) or, with
 * src NULL, positions to read one by one (Dlk_order_at).  It returns
 * where the pieces end; positions from there to o->n are padding. */
#define DLK_ORDER_PART_MIN 16
bool Dlk_order_resumed(const Dlk_order *o);
typedef void (*Dlk_order_piece_fn)(void *ud, const Dlk_order *src,
                                   size_t win, uint64_t a, uint64_t b);
uint64_t Dlk_order_pieces(const Dlk_order *o, Dlk_order_piece_fn fn,
                          void *ud);

/* Segment 0's rank plans a later segment's plan made (those its rank
 * reads from; 0 for segment 0's plan): for tests and benchmarks. */
uint32_t Dlk_order_rest_planned(const Dlk_order *o);

/* A bijection on [0, m) keyed by `key` (order.c's window permutation,
 * exposed for its tests). */
uint64_t Dlk_order_permute(uint64_t x, uint64_t m, uint64_t key);

#endif
