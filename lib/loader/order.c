/* order.c - the sample order of an epoch.
 *
 * Segment 0 of an epoch: the blocks (chunks of the main tensor) are
 * permuted by (seed, epoch) and their samples concatenated; rank r takes
 * the r-th of `world` equal spans (wrapping around as padding when the
 * count does not divide, or dropping the rest with drop_last), so every
 * rank reads about 1/world of the blocks plus at most two shared at its
 * span's edges.  Inside its span a rank shuffles samples within windows of
 * `window_blocks` consecutive blocks (the first ones smaller: from the
 * blocks one batch fills, doubling).
 * Batches are consecutive positions; the last one is padded (flagged) or
 * dropped, so all ranks have the same number of batches.
 *
 * A later segment (an epoch resumed with another world size or batch
 * size): the positions the previous segment's ranks had not consumed,
 * rank after rank, are dealt again in equal spans the same way, without a
 * new shuffle.  So a resume reproduces exactly the samples left. */
#include "order.h"

#include <stdlib.h>
#include <string.h>

typedef struct rng { uint64_t s; } rng;

static uint64_t rng_next(rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    uint64_t z = r->s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) without bias (Lemire). */
static uint64_t rng_below(rng *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = -n % n;
        while (lo < t) {
            m = (unsigned __int128)rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static void shuffle_u64(uint64_t *v, uint64_t n, rng *r)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rng_below(r, i);
        uint64_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* The blocks' order for a shuffled epoch: any run of consecutive blocks
 * in it comes from strata spread evenly over the stored order, the
 * strata being `w` stretches of neighbouring blocks.  Round j takes one
 * block from each stratum (the j-th of the stratum's blocks, shuffled);
 * within a round the strata come in bit-reversed order, rotated by a
 * random offset, so that any 2, 4, 8 ... consecutive blocks are strata
 * evenly spaced over the dataset.  So every window of blocks (the
 * small first ones included) samples the whole dataset evenly: a dataset
 * stored sorted by class gives windows with every class in its share,
 * where a uniform permutation of as few blocks would leave classes out.
 * On rows stored in random order the strata are random too and nothing
 * changes.  w of 1, or at least n: one uniform shuffle. */
static dlk_status stratify(uint64_t *v, uint64_t n, uint64_t w, rng *r,
                           dlk_error *err)
{
    if (w <= 1 || w >= n) {
        shuffle_u64(v, n, r);
        return DLK_OK;
    }
    uint64_t *tmp = malloc(n * sizeof *tmp);
    uint64_t *spread = malloc(w * sizeof *spread);
    if (!tmp || !spread) {
        free(tmp);
        free(spread);
        return dlk_fail(err, DLK_ENOMEM, "out of memory planning %llu "
                        "blocks", (unsigned long long)n);
    }
    /* the strata in bit-reversed order of the next power of two */
    unsigned bits = 0;
    while ((1ull << bits) < w)
        bits++;
    uint64_t ns = 0;
    for (uint64_t i = 0; i < (1ull << bits); i++) {
        uint64_t x = 0;
        for (unsigned b = 0; b < bits; b++)
            x |= ((i >> b) & 1) << (bits - 1 - b);
        if (x < w)
            spread[ns++] = x;
    }
    /* stratum k: blocks [k*n/w, (k+1)*n/w), shuffled in place */
    for (uint64_t k = 0; k < w; k++) {
        uint64_t a = k * n / w, b = (k + 1) * n / w;
        shuffle_u64(v + a, b - a, r);
    }
    /* one offset for every round: then any w consecutive blocks are a
     * rotation of one round, every stratum once, wherever the windows
     * of a rank's span start (offsets drawn round by round let a
     * window across two rounds take some strata twice and miss others:
     * a class half again its share) */
    uint64_t rot = rng_below(r, w);
    uint64_t out = 0;
    for (uint64_t j = 0; out < n; j++) {
        for (uint64_t i = 0; i < w; i++) {
            uint64_t k = (spread[i] + rot) % w;
            uint64_t a = k * n / w, b = (k + 1) * n / w;
            if (a + j < b)
                tmp[out++] = v[a + j];
        }
    }
    memcpy(v, tmp, n * sizeof *v);
    free(tmp);
    free(spread);
    return DLK_OK;
}

/* A sequence of samples with pad flags. */
typedef struct seq {
    uint64_t *s;
    uint8_t *pad;
    uint64_t n;
} seq;

static void seq_free(seq *q)
{
    free(q->s);
    free(q->pad);
    memset(q, 0, sizeof *q);
}

static dlk_status seq_alloc(seq *q, uint64_t n, dlk_error *err)
{
    q->n = n;
    q->s = malloc((n ? n : 1) * sizeof *q->s);
    q->pad = calloc(n ? n : 1, 1);
    if (!q->s || !q->pad) {
        seq_free(q);
        return dlk_fail(err, DLK_ENOMEM, "out of memory planning %llu "
                        "samples", (unsigned long long)n);
    }
    return DLK_OK;
}

/* The sequence a segment deals out: segment 0's is the blocks' samples
 * in the blocks' order, read from the blocks as they are needed (an
 * array of every position, on every rank, costs 9 bytes a row where a
 * rank needs only its share); a later segment's is what the ranks before
 * it left, an array. */
typedef struct base_seq {
    uint64_t n;
    const uint64_t *s;       /* a later segment: its samples; NULL: blocks */
    /* segment 0: the nb blocks with samples, in order; the i-th starts at
     * position at[i] (at[nb] = n) and holds samples first[blk[i]] + k, or
     * with rows, rows[rlo[i] + k] */
    const uint64_t *at;
    const size_t *blk;
    const uint64_t *rlo;
    const uint64_t *first;
    const uint64_t *rows;
    size_t nb;
} base_seq;

/* Samples of positions g0, g0 + 1, ... (mod n) into v[0, len). */
static void base_fill(const base_seq *b, uint64_t g0, uint64_t *v,
                      uint64_t len)
{
    if (!len || !b->n)
        return;
    uint64_t g = g0 % b->n;
    if (b->s) {
        for (uint64_t i = 0; i < len; i++) {
            v[i] = b->s[g];
            if (++g == b->n)
                g = 0;
        }
        return;
    }
    size_t lo = 0, hi = b->nb; /* the last block starting at or before g */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->at[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    size_t i = lo;
    uint64_t k = g - b->at[i], end = b->at[i + 1] - b->at[i];
    for (uint64_t j = 0; j < len; j++) {
        v[j] = b->rows ? b->rows[b->rlo[i] + k] : b->first[b->blk[i]] + k;
        if (++k == end) {
            i = i + 1 == b->nb ? 0 : i + 1;
            k = 0;
            end = b->at[i + 1] - b->at[i];
        }
    }
}

/* Rank r's stream of `base` (block starts in `bounds` when the windows
 * are shuffled) under (world, batch). */
static dlk_status rank_stream(const base_seq *base,
                              const uint64_t *bounds, size_t nbounds,
                              const dlk_order_params *p, uint64_t epoch,
                              uint32_t world, uint32_t batch, uint32_t r,
                              seq *out, dlk_error *err)
{
    uint64_t n = base->n;
    uint64_t span = p->drop_last ? n / world : (n + world - 1) / world;
    uint64_t batches = p->drop_last ? span / batch
                                    : (span + batch - 1) / batch;
    uint64_t len = batches * batch;
    /* room for the whole span (shuffled before drop_last cuts it) */
    dlk_status rc = seq_alloc(out, len > span ? len : span, err);
    if (rc)
        return rc;
    out->n = len;
    if (len == 0)
        return DLK_OK;
    uint64_t start = (uint64_t)r * span;
    base_fill(base, start, out->s, span);
    for (uint64_t i = 0; i < span; i++)
        out->pad[i] = start + i >= n;
    if (p->shuffle && bounds && span) {
        /* windows of window_blocks blocks, cut at block starts in the span;
         * the first ones ramp up from the blocks a batch fills on average,
         * doubling, so that the first batch waits for the blocks it needs
         * rather than a whole window (as a shuffle buffer that starts
         * small: WebDataset's `initial`) */
        uint64_t w0 = 0, blocks = 0, w = 0;
        uint64_t size = nbounds ? (batch * (uint64_t)nbounds + n - 1) / n : 1;
        /* as many bytes as the chunks a batch fills: spans of parts then
         * come from that many more chunks at the same cost */
        if (p->chunk_blocks > 1)
            size = (size + p->chunk_blocks - 1) / p->chunk_blocks *
                   p->chunk_blocks;
        if (size > p->window_blocks)
            size = p->window_blocks;
        size_t bi = 0;
        while (bi < nbounds && bounds[bi] <= start)
            bi++;
        for (uint64_t i = 1; i <= span; i++) {
            bool edge = i == span;
            if (!edge && bi < nbounds && bounds[bi] == start + i) {
                bi++;
                if (++blocks == size)
                    edge = true;
            }
            if (edge) {
                rng g = {dlk_mix64(p->seed ^ dlk_mix64(epoch * 0x100000001b3ull
                                   + ((uint64_t)world << 32) + r)) ^ w++};
                uint64_t m = i - w0;
                /* shuffle samples and pad flags together */
                for (uint64_t k = m; k > 1; k--) {
                    uint64_t j = rng_below(&g, k);
                    uint64_t t = out->s[w0 + k - 1];
                    out->s[w0 + k - 1] = out->s[w0 + j];
                    out->s[w0 + j] = t;
                    uint8_t tp = out->pad[w0 + k - 1];
                    out->pad[w0 + k - 1] = out->pad[w0 + j];
                    out->pad[w0 + j] = tp;
                }
                w0 = i;
                blocks = 0;
                if (size < p->window_blocks)
                    size = size * 2 < p->window_blocks ? size * 2
                                                       : p->window_blocks;
            }
        }
    }
    /* the last batch: padded from the start of this rank's stream */
    for (uint64_t i = span; i < len; i++) {
        out->s[i] = out->s[(i - span) % span];
        out->pad[i] = 1;
    }
    return DLK_OK;
}

dlk_status dlk_order_build(const uint64_t *first, const uint32_t *count,
                           size_t nblocks, const dlk_order_params *p,
                           const dlk_loader_state *st, uint32_t rank,
                           dlk_order *out, dlk_error *err)
{
    memset(out, 0, sizeof *out);
    if (st->nseg < 1 || st->nseg > DLK_LOADER_MAX_SEGMENTS)
        return dlk_fail(err, DLK_EINVAL, "bad loader state: %u segments",
                        st->nseg);
    for (uint32_t k = 0; k < st->nseg; k++)
        if (!st->seg[k].world || !st->seg[k].batch)
            return dlk_fail(err, DLK_EINVAL, "bad loader state: segment %u "
                            "has no world or batch size", k);
    if (rank >= st->seg[st->nseg - 1].world)
        return dlk_fail(err, DLK_EINVAL, "rank %u of a world of %u", rank,
                        st->seg[st->nseg - 1].world);
    /* segment 0's base: blocks permuted, samples concatenated; each
     * block's start is kept, not its samples */
    uint64_t *order = malloc((nblocks ? nblocks : 1) * sizeof *order);
    uint64_t *bounds = malloc((nblocks + 1) * sizeof *bounds);
    size_t *blk = malloc((nblocks ? nblocks : 1) * sizeof *blk);
    uint64_t *rlo = p->rows ? malloc((nblocks ? nblocks : 1) * sizeof *rlo)
                            : NULL;
    dlk_status rc = DLK_OK;
    if (!order || !bounds || !blk || (p->rows && !rlo))
        rc = dlk_fail(err, DLK_ENOMEM, "out of memory planning %llu "
                      "blocks", (unsigned long long)nblocks);
    for (size_t i = 0; !rc && i < nblocks; i++)
        order[i] = i;
    if (!rc && p->shuffle) {
        rng g = {dlk_mix64(p->seed) ^ dlk_mix64(st->epoch + 1)};
        rc = stratify(order, nblocks, p->window_blocks, &g, err);
    }
    if (rc) {
        free(order);
        free(bounds);
        free(blk);
        free(rlo);
        return rc;
    }
    uint64_t pos = 0;
    size_t nb = 0;
    for (size_t i = 0; i < nblocks; i++) {
        uint64_t f = first[order[i]], c = count[order[i]];
        if (p->rows) { /* the block's rows: a binary search, then a run */
            uint64_t lo = 0, hi = p->nrows;
            while (lo < hi) {
                uint64_t mid = lo + (hi - lo) / 2;
                if (p->rows[mid] < f)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            uint64_t e = lo;
            while (e < p->nrows && p->rows[e] < f + c)
                e++;
            if (e == lo)
                continue;
            c = e - lo;
            rlo[nb] = lo;
        }
        if (!c)
            continue;
        bounds[nb] = pos;
        blk[nb++] = order[i];
        pos += c;
    }
    bounds[nb] = pos; /* rows past every block are not streamed */
    free(order);
    base_seq base = {pos, NULL, bounds, blk, rlo, first, p->rows, nb};

    seq cur = {0}; /* a later segment's base, when there is one */
    const uint64_t *bnd = bounds;
    size_t nbnd = nb;
    for (uint32_t sgi = 0; !rc; sgi++) {
        uint32_t world = st->seg[sgi].world, batch = st->seg[sgi].batch;
        if (sgi == st->nseg - 1) {
            seq mine = {0};
            rc = rank_stream(&base, bnd, nbnd, p, st->epoch, world,
                             batch, rank, &mine, err);
            if (!rc) {
                out->n = mine.n;
                out->sample = mine.s;
                out->pad = mine.pad;
                out->batch = batch;
                out->batches = mine.n / batch;
            }
            break;
        }
        /* what the ranks of this segment left, rank after rank: one
         * rank's stream at a time, into room for all the base */
        seq next = {0};
        uint64_t steps = st->seg[sgi].steps, k = 0;
        rc = seq_alloc(&next, base.n, err);
        for (uint32_t r = 0; !rc && r < world; r++) {
            seq one = {0};
            rc = rank_stream(&base, bnd, nbnd, p, st->epoch, world, batch,
                             r, &one, err);
            for (uint64_t i = steps * batch; !rc && i < one.n; i++)
                if (!one.pad[i] && k < next.n)
                    next.s[k++] = one.s[i];
            seq_free(&one);
        }
        next.n = k;
        seq_free(&cur);
        cur = next;
        base = (base_seq){cur.n, cur.s, NULL, NULL, NULL, NULL, NULL, 0};
        bnd = NULL; /* later segments keep the order they were given */
        nbnd = 0;
    }
    seq_free(&cur);
    free(bounds);
    free(blk);
    free(rlo);
    return rc;
}

void dlk_order_free(dlk_order *o)
{
    free(o->sample);
    free(o->pad);
    memset(o, 0, sizeof *o);
}
