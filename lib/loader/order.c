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
 * Nothing is kept per position: a window's shuffle is a keyed bijection
 * on its positions (Dlk_order_permute), the concatenation is the blocks'
 * starts, so a position's sample is a search and a few mixes away, and
 * a rank's plan is the size of its blocks and windows, whatever the rows
 * (an array of every position costs 9 bytes a row of each rank's share,
 * and the sample list it was dealt from 9 a row of the whole dataset on
 * every rank).
 *
 * A later segment (an epoch resumed with another world size or batch
 * size): the positions the previous segment's ranks had not consumed,
 * rank after rank, are dealt again in equal spans the same way, without a
 * new shuffle.  So a resume reproduces exactly the samples left.  Those
 * are not listed either: what each rank of a segment left is a stretch
 * of its stream less its few padding positions, so a later segment's
 * position is found by a search in each earlier segment's ranks, down
 * to segment 0's plan of the rank that held it (a list of the rest
 * costs 8 bytes a row of the epoch at every resume). */
#include "order.h"
#include "util/error.h"
#include "util/grow.h"
#include "util/hash.h"

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
        return Dlk_fail(err, DLK_ENOMEM, "out of memory planning %llu "
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

uint64_t Dlk_order_permute(uint64_t x, uint64_t m, uint64_t key)
{
    if (m <= 1)
        return 0;
    /* a balanced Feistel network of 4 rounds on the 2h bits that hold m,
     * walked again until it lands below m (a bijection on [0, 2^2h),
     * so on [0, m); 2^2h < 4m: under 4 rounds of walking on average) */
    unsigned bits = 64 - (unsigned)__builtin_clzll(m - 1);
    unsigned h = (bits + 1) / 2;
    uint64_t mask = h >= 64 ? ~0ull : (1ull << h) - 1;
    do {
        uint64_t hi = x >> h, lo = x & mask;
        for (uint64_t r = 0; r < 4; r++) {
            uint64_t f = Dlk_mix64(key ^ Dlk_mix64(lo + (r << 58))) & mask;
            uint64_t t = hi ^ f;
            hi = lo;
            lo = t;
        }
        x = (hi << h) | lo;
    } while (x >= m);
    return x;
}

/* The last index of a[0..n) (ascending, a[0] <= x) whose value is at
 * most x: the block or window that holds position x. */
static size_t last_at_or_before(const uint64_t *a, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* What the ranks of one segment left, rank after rank: rank r's
 * positions from lo[r] on, less those in skip (its padding, in segment 0
 * only: fewer than its world in all), numbered from cum[r].  Segment 0's
 * are positions of its ranks' streams; a later segment's, of its base
 * (not shuffled: a rank's stream is a stretch of it). */
typedef struct rest_level {
    uint32_t world;
    uint64_t *lo, *cum;     /* world; world + 1 */
    uint64_t *skip;         /* rank r's: skip[skip_at[r] .. skip_at[r+1]),
                               ascending */
    size_t *skip_at;        /* world + 1 */
} rest_level;

struct Dlk_order_rest {
    Dlk_order *ranks;       /* segment 0's plan of each of its ranks
                               (their windows owned, the blocks the
                               final plan's) */
    uint32_t nranks;
    uint32_t nbuilt;        /* of them planned (their windows made) */
    rest_level lev[DLK_LOADER_MAX_SEGMENTS];
    uint32_t nlev;
};

static uint64_t base_at(const Dlk_order *o, uint64_t g);

/* Position g of the last level's numbering: its sample. */
static uint64_t rest_at(const struct Dlk_order_rest *h, uint64_t g)
{
    for (uint32_t lv = h->nlev; lv-- > 0;) {
        const rest_level *v = &h->lev[lv];
        size_t r = last_at_or_before(v->cum, v->world, g);
        uint64_t pos = v->lo[r] + (g - v->cum[r]);
        for (size_t j = v->skip_at[r]; j < v->skip_at[r + 1] &&
                                       v->skip[j] <= pos; j++)
            pos++;
        if (!lv) {
            uint64_t sample;
            Dlk_order_at(&h->ranks[r], pos, 1, &sample, NULL);
            return sample;
        }
        g = pos;
    }
    return 0; /* not reached: there is a level */
}

static void rest_free(struct Dlk_order_rest *h)
{
    if (!h)
        return;
    for (uint32_t r = 0; h->ranks && r < h->nranks; r++) {
        free(h->ranks[r].win);
        free(h->ranks[r].wkey);
    }
    free(h->ranks);
    for (uint32_t k = 0; k < h->nlev; k++) {
        free(h->lev[k].lo);
        free(h->lev[k].cum);
        free(h->lev[k].skip);
        free(h->lev[k].skip_at);
    }
    free(h);
}

/* Position g of the base (g < base_n): its sample. */
static uint64_t base_at(const Dlk_order *o, uint64_t g)
{
    if (o->rest)
        return rest_at(o->rest, g);
    size_t lo = last_at_or_before(o->at, o->nb, g); /* g's block */
    uint64_t k = g - o->at[lo];
    return o->rows ? o->rows[o->rlo[lo] + k] : o->first[o->blk[lo]] + k;
}

/* Share position i (< span): its place in the base before the wrap. */
static uint64_t share_at(const Dlk_order *o, uint64_t i)
{
    if (!o->shuffled)
        return o->start + i;
    size_t lo = last_at_or_before(o->win, o->nwin, i); /* i's window */
    uint64_t a = o->win[lo], m = o->win[lo + 1] - a;
    return o->start + a + Dlk_order_permute(i - a, m, o->wkey[lo]);
}

void Dlk_order_at(const Dlk_order *o, uint64_t pos, uint64_t count,
                  uint64_t *sample, uint8_t *pad)
{
    for (uint64_t k = 0; k < count; k++) {
        uint64_t i = pos + k;
        bool tail = i >= o->span; /* the last batch: padded from the start
                                     of this rank's stream */
        if (tail)
            i = (i - o->span) % o->span;
        uint64_t g = share_at(o, i);
        sample[k] = base_at(o, g % o->base_n);
        if (pad)
            pad[k] = tail || g >= o->base_n;
    }
}

size_t Dlk_order_nwindows(const Dlk_order *o)
{
    return o->nwin;
}

bool Dlk_order_window(const Dlk_order *o, size_t k, uint64_t *a, uint64_t *b,
                      bool *shuffled)
{
    uint64_t e = o->win[k + 1];
    *a = o->win[k];
    *b = e < o->n ? e : o->n;
    *shuffled = o->shuffled;
    return !o->rest && e <= o->n;
}

void Dlk_order_runs(const Dlk_order *o, size_t k, Dlk_order_run_fn fn,
                    void *ud)
{
    uint64_t a = o->win[k], len = o->win[k + 1] - a;
    uint64_t g = (o->start + a) % o->base_n, pos = a;
    size_t lo = 0, hi = o->nb;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->at[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    size_t i = lo;
    uint64_t off = g - o->at[i];
    while (len) {
        uint64_t c = o->at[i + 1] - o->at[i] - off;
        if (c > len)
            c = len;
        if (!o->rows) {
            fn(ud, o->first[o->blk[i]] + off, c, pos);
        } else { /* rows: runs of consecutive indices */
            const uint64_t *r = o->rows + o->rlo[i] + off;
            uint64_t j = 0;
            while (j < c) {
                uint64_t e = j + 1;
                while (e < c && r[e] == r[e - 1] + 1)
                    e++;
                fn(ud, r[j], e - j, pos + j);
                j = e;
            }
        }
        pos += c;
        len -= c;
        off = 0;
        i = i + 1 == o->nb ? 0 : i + 1;
    }
}

/* Level lv's numbering [g0, g1), at this plan's positions from p0 on:
 * through each rank it spans and between the padding it skips, down to
 * segment 0's streams, whose windows are handed to fn. */
static void pieces_of(const struct Dlk_order_rest *h, uint32_t lv,
                      uint64_t g0, uint64_t g1, uint64_t p0,
                      Dlk_order_piece_fn fn, void *ud)
{
    const rest_level *v = &h->lev[lv];
    while (g0 < g1) {
        size_t r = last_at_or_before(v->cum, v->world, g0);
        uint64_t e = v->cum[r + 1] < g1 ? v->cum[r + 1] : g1;
        /* the rank's positions: from lo + offset, a skipped one breaking
         * the stretch */
        uint64_t pos = v->lo[r] + (g0 - v->cum[r]), left = e - g0;
        size_t j = v->skip_at[r];
        while (j < v->skip_at[r + 1] && v->skip[j] <= pos) {
            j++;
            pos++;
        }
        while (left) {
            uint64_t len = left;
            if (j < v->skip_at[r + 1] && v->skip[j] - pos < len)
                len = v->skip[j] - pos;
            if (len) {
                if (lv) {
                    pieces_of(h, lv - 1, pos, pos + len, p0, fn, ud);
                } else { /* segment 0's stream of rank r */
                    const Dlk_order *o = &h->ranks[r];
                    uint64_t q = pos, qe = pos + len;
                    while (q < qe) {
                        size_t k = last_at_or_before(o->win, o->nwin, q);
                        uint64_t wa = o->win[k], wb = o->win[k + 1];
                        uint64_t b = wb < qe ? wb : qe;
                        /* a whole shuffled window, or enough of one
                         * (where a rank's stretch starts or ends inside
                         * it) that its rows touch about every chunk the
                         * window holds: planned by the window's runs,
                         * not position by position (which cost a resume
                         * most of its open) */
                        bool win = o->shuffled && wb <= o->n;
                        bool most = win && (b - q) * DLK_ORDER_PART_MIN >=
                                           wb - wa;
                        fn(ud, most ? o : NULL, k, p0 + (q - pos),
                           p0 + (b - pos));
                        q = b;
                    }
                }
            }
            p0 += len;
            pos += len;
            left -= len;
            while (j < v->skip_at[r + 1] && v->skip[j] <= pos) {
                j++;
                pos++;
            }
        }
        g0 = e;
    }
}

bool Dlk_order_resumed(const Dlk_order *o)
{
    return o->rest != NULL;
}

uint64_t Dlk_order_pieces(const Dlk_order *o, Dlk_order_piece_fn fn,
                          void *ud)
{
    uint64_t end = o->span;
    uint64_t left = o->start < o->base_n ? o->base_n - o->start : 0;
    if (end > left)
        end = left;
    if (end > o->n)
        end = o->n;
    if (o->rest && end)
        pieces_of(o->rest, o->rest->nlev - 1, o->start, o->start + end, 0,
                  fn, ud);
    return end;
}

void Dlk_order_free(Dlk_order *o)
{
    rest_free(o->rest);
    free(o->at);
    free(o->blk);
    free(o->rlo);
    free(o->win);
    free(o->wkey);
    memset(o, 0, sizeof *o);
}

/* The first index of bounds[0..n) (ascending) whose value is past x (n
 * when none): a search, where a scan from 0 for each rank would cost
 * world times the blocks. */
static size_t bounds_after(const uint64_t *bounds, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (bounds[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Rank r's share of the base in o (its blocks' or samples' fields set)
 * under (world, batch), block starts in `bounds` when the windows are
 * shuffled: its span, batches and windows. */
/* The arithmetic part of rank_share: span, start, batches, n and
 * whether the share is shuffled, its windows not made (win NULL). */
static void rank_span(Dlk_order *o, bool bounds, const Dlk_order_params *p,
                      uint32_t world, uint32_t batch, uint32_t r)
{
    uint64_t n = o->base_n;
    uint64_t span = p->drop_last ? n / world : (n + world - 1) / world;
    uint64_t batches = p->drop_last ? span / batch
                                    : (span + batch - 1) / batch;
    o->span = span;
    o->start = (uint64_t)r * span;
    o->batch = batch;
    o->batches = batches;
    o->n = batches * batch;
    o->shuffled = p->shuffle && bounds && span;
    o->win = NULL;
    o->wkey = NULL;
    o->nwin = 0;
}

static dlk_status rank_share(Dlk_order *o, const uint64_t *bounds,
                             size_t nbounds, const Dlk_order_params *p,
                             uint64_t epoch, uint32_t world, uint32_t batch,
                             uint32_t r, dlk_error *err)
{
    rank_span(o, bounds != NULL, p, world, batch, r);
    uint64_t span = o->span, n = o->base_n;
    /* windows: at most one a block of the span, and one more */
    size_t cap = 2;
    if (o->shuffled) {
        size_t bi = bounds_after(bounds, nbounds, o->start);
        size_t e = bi;
        while (e < nbounds && bounds[e] < o->start + span)
            e++;
        cap = e - bi + 2;
    }
    o->win = malloc(cap * sizeof *o->win);
    o->wkey = malloc(cap * sizeof *o->wkey);
    if (!o->win || !o->wkey)
        return Dlk_fail(err, DLK_ENOMEM, "out of memory planning %zu "
                        "windows", cap);
    o->win[0] = 0;
    o->nwin = 0;
    if (!span) {
        o->win[1] = 0;
        return DLK_OK;
    }
    if (!o->shuffled) {
        o->win[1] = span;
        o->nwin = 1;
        return DLK_OK;
    }
    /* windows of window_blocks blocks, cut at block starts in the span;
     * the first ones ramp up from the blocks a batch fills on average,
     * doubling, so that the first batch waits for the blocks it needs
     * rather than a whole window (as a shuffle buffer that starts
     * small: WebDataset's `initial`) */
    uint64_t start = o->start, blocks = 0, w = 0;
    uint64_t size = nbounds ? (batch * (uint64_t)nbounds + n - 1) / n : 1;
    /* as many bytes as the chunks a batch fills: spans of parts then
     * come from that many more chunks at the same cost */
    if (p->chunk_blocks > 1)
        size = (size + p->chunk_blocks - 1) / p->chunk_blocks *
               p->chunk_blocks;
    if (size > p->window_blocks)
        size = p->window_blocks;
    uint64_t seed = Dlk_mix64(p->seed ^ Dlk_mix64(epoch * 0x100000001b3ull +
                                                  ((uint64_t)world << 32) + r));
    size_t bi = bounds_after(bounds, nbounds, start);
    /* from block start to block start, not position by position */
    uint64_t i = 0;
    while (i < span) {
        uint64_t next = span;
        if (bi < nbounds && bounds[bi] < start + span)
            next = bounds[bi] - start;
        i = next;
        bool edge = i == span;
        if (!edge) {
            bi++;
            if (++blocks == size)
                edge = true;
        }
        if (edge) {
            o->wkey[o->nwin] = seed ^ w++;
            o->win[++o->nwin] = i;
            blocks = 0;
            if (size < p->window_blocks)
                size = size * 2 < p->window_blocks ? size * 2
                                                   : p->window_blocks;
        }
    }
    return DLK_OK;
}

/* The positions [from, to) of a shuffled share that are padding, those
 * whose place is past the base (the last ranks' wrap), appended to
 * v->skip (*nskip of *cap). */
static dlk_status skip_past_base(const Dlk_order *one, uint64_t from,
                                 uint64_t to, rest_level *v, size_t *nskip,
                                 size_t *cap, dlk_error *err)
{
    for (size_t k = 0; k < one->nwin; k++) {
        if (one->start + one->win[k + 1] <= one->base_n)
            continue;
        uint64_t a = one->win[k] > from ? one->win[k] : from;
        uint64_t e = one->win[k + 1] < to ? one->win[k + 1] : to;
        for (uint64_t i = a; i < e; i++) {
            if (share_at(one, i) < one->base_n)
                continue;
            if (!DLK_GROW(v->skip, *nskip, *cap, 16))
                return Dlk_fail(err, DLK_ENOMEM, "out of memory planning a "
                                "resume");
            v->skip[(*nskip)++] = i;
        }
    }
    return DLK_OK;
}

/* What the ranks of a segment of (world, batch) left of b's base after
 * `steps` batches each, as the next level of
 * b's rest; b's base becomes it.  bnd: segment 0's block starts (its
 * ranks' plans are kept, the rest's positions being theirs); NULL for a
 * later segment. */
static dlk_status rest_level_add(Dlk_order *b, const uint64_t *bnd,
                                 size_t nbnd, const Dlk_order_params *p,
                                 uint64_t epoch, uint32_t world,
                                 uint32_t batch, uint64_t steps,
                                 dlk_error *err)
{
    if (!b->rest && !(b->rest = calloc(1, sizeof *b->rest)))
        return Dlk_fail(err, DLK_ENOMEM, "out of memory planning a resume");
    struct Dlk_order_rest *h = b->rest;
    if (!bnd && !h->nlev)
        return Dlk_fail(err, DLK_EINVAL, "a later segment without an "
                        "earlier one"); /* not reached */
    rest_level *v = &h->lev[h->nlev];
    v->world = world;
    v->lo = malloc(world * sizeof *v->lo);
    v->cum = malloc((world + 1) * sizeof *v->cum);
    v->skip_at = malloc((world + 1) * sizeof *v->skip_at);
    size_t nskip = 0, skip_cap = 0;
    if (bnd) {
        h->ranks = calloc(world, sizeof *h->ranks);
        h->nranks = world;
    }
    h->nlev++; /* freed with the rest whatever happens next */
    if (!v->lo || !v->cum || !v->skip_at || (bnd && !h->ranks))
        return Dlk_fail(err, DLK_ENOMEM, "out of memory planning a resume "
                        "of %u ranks", world);
    v->cum[0] = 0;
    v->skip_at[0] = 0;
    dlk_status rc = DLK_OK;
    for (uint32_t r = 0; !rc && r < world; r++) {
        Dlk_order one = *b;
        rank_span(&one, bnd != NULL, p, world, batch, r);
        /* the windows only where the count needs them: a shuffled share
         * that reaches past the base has padding among its positions;
         * segment 0's other ranks are planned later, those that the
         * last segment's rank reads from only (rest_plan_ranks) */
        if (one.shuffled && one.start + one.span > one.base_n) {
            rc = rank_share(&one, bnd, nbnd, p, epoch, world, batch, r,
                            err);
            h->nbuilt++;
        }
        /* the rank consumed `steps` batches; its positions past its span
         * are padding, and so, in a shuffled stream, are those whose
         * place is past the base (the last ranks' wrap) */
        uint64_t from = steps * batch;
        uint64_t to = one.n < one.span ? one.n : one.span;
        if (!one.shuffled) {
            uint64_t left = one.start < one.base_n ? one.base_n - one.start
                                                   : 0;
            if (to > left)
                to = left;
        }
        if (from > to)
            from = to;
        size_t s0 = nskip;
        if (!rc && one.shuffled)
            rc = skip_past_base(&one, from, to, v, &nskip, &skip_cap, err);
        if (bnd) {
            v->lo[r] = from; /* positions of the rank's stream */
            h->ranks[r] = one;
            h->ranks[r].rest = NULL;
        } else {
            v->lo[r] = one.start + from; /* positions of the base */
            free(one.win);
            free(one.wkey);
        }
        v->skip_at[r + 1] = nskip;
        v->cum[r + 1] = v->cum[r] + (to - from) - (nskip - s0);
    }
    if (rc)
        return rc;
    b->base_n = v->cum[world];
    return DLK_OK;
}

/* Intervals [a, b) of a level's numbering. */
typedef struct ivals {
    uint64_t *v;            /* a, b pairs */
    size_t n, cap;
} ivals;

static bool ivals_add(ivals *s, uint64_t a, uint64_t b)
{
    if (a >= b)
        return true;
    /* an element is a pair of values */
    uint64_t *nv = Dlk_grow(s->v, &s->cap, s->n, 2 * sizeof *s->v, 16);
    if (!nv)
        return false;
    s->v = nv;
    s->v[2 * s->n] = a;
    s->v[2 * s->n + 1] = b;
    s->n++;
    return true;
}

/* Plan segment 0's ranks that o (the last segment's plan of one rank,
 * its share set) reads from: its share's positions of the last base
 * (Dlk_order_at reads them modulo the base), followed down the levels
 * through the ranks whose stretch they overlap.  The others are never
 * read (rest_at and pieces_of go down the same way), so that a resume
 * costs the blocks of the ranks it reads from, not of every rank of
 * segment 0.  bnd: segment 0's block starts. */
static dlk_status rest_plan_ranks(Dlk_order *o, const uint64_t *bnd,
                                  size_t nbnd, const Dlk_order_params *p,
                                  uint64_t epoch, dlk_error *err)
{
    struct Dlk_order_rest *h = o->rest;
    ivals cur = {0}, next = {0};
    uint64_t n = o->base_n, span = o->span;
    bool ok = true;
    if (n && span >= n) {
        ok = ivals_add(&cur, 0, n);
    } else if (n && span) {
        uint64_t a = o->start % n;
        ok = ivals_add(&cur, a, a + span < n ? a + span : n) &&
             (a + span <= n || ivals_add(&cur, 0, a + span - n));
    }
    bool *need = calloc(h->nranks ? h->nranks : 1, sizeof *need);
    ok = ok && need;
    for (uint32_t lv = h->nlev; ok && lv-- > 0;) {
        const rest_level *v = &h->lev[lv];
        next.n = 0;
        for (size_t i = 0; ok && i < cur.n; i++) {
            uint64_t x = cur.v[2 * i], y = cur.v[2 * i + 1];
            for (size_t r = last_at_or_before(v->cum, v->world, x);
                 ok && r < v->world && v->cum[r] < y; r++) {
                uint64_t a = x > v->cum[r] ? x : v->cum[r];
                uint64_t e = y < v->cum[r + 1] ? y : v->cum[r + 1];
                if (a >= e)
                    continue;
                if (!lv)
                    need[r] = true;
                else /* a later segment's ranks skip nothing */
                    ok = ivals_add(&next, v->lo[r] + (a - v->cum[r]),
                                   v->lo[r] + (e - v->cum[r]));
            }
        }
        ivals t = cur;
        cur = next;
        next = t;
    }
    dlk_status rc = ok ? DLK_OK
                       : Dlk_fail(err, DLK_ENOMEM, "out of memory planning "
                                  "a resume");
    for (uint32_t r = 0; !rc && r < h->nranks; r++) {
        Dlk_order *x = &h->ranks[r];
        if (!need[r] || x->win)
            continue;
        rc = rank_share(x, bnd, nbnd, p, epoch, h->lev[0].world, x->batch,
                        r, err);
        h->nbuilt++;
    }
    free(need);
    free(cur.v);
    free(next.v);
    return rc;
}

uint32_t Dlk_order_rest_planned(const Dlk_order *o)
{
    return o->rest ? o->rest->nbuilt : 0;
}

/* Whether st is a state a plan can be built from for this rank. */
static dlk_status check_state(const dlk_loader_state *st, uint32_t rank,
                              dlk_error *err)
{
    if (st->nseg < 1 || st->nseg > DLK_LOADER_MAX_SEGMENTS)
        return Dlk_fail(err, DLK_EINVAL, "bad loader state: %u segments",
                        st->nseg);
    for (uint32_t k = 0; k < st->nseg; k++)
        if (!st->seg[k].world || !st->seg[k].batch)
            return Dlk_fail(err, DLK_EINVAL, "bad loader state: segment %u "
                            "has no world or batch size", k);
    if (rank >= st->seg[st->nseg - 1].world)
        return Dlk_fail(err, DLK_EINVAL, "rank %u of a world of %u", rank,
                        st->seg[st->nseg - 1].world);
    return DLK_OK;
}

/* How many of the rows p->rows (sorted) fall in the block [f, f + c):
 * a binary search for the first (*lo), then a run. */
static uint64_t block_rows(const Dlk_order_params *p, uint64_t f, uint64_t c,
                           uint64_t *lo_out)
{
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
    *lo_out = lo;
    return e - lo;
}

/* Segment 0's base into b: blocks permuted, samples concatenated; each
 * block's start is kept, not its samples.  On failure b is freed. */
static dlk_status build_base(const uint64_t *first, const uint32_t *count,
                             size_t nblocks, const Dlk_order_params *p,
                             uint64_t epoch, Dlk_order *b, dlk_error *err)
{
    uint64_t *order = malloc((nblocks ? nblocks : 1) * sizeof *order);
    b->at = malloc((nblocks + 1) * sizeof *b->at);
    b->blk = malloc((nblocks ? nblocks : 1) * sizeof *b->blk);
    b->rlo = p->rows ? malloc((nblocks ? nblocks : 1) * sizeof *b->rlo)
                     : NULL;
    b->first = first;
    b->rows = p->rows;
    dlk_status rc = DLK_OK;
    if (!order || !b->at || !b->blk || (p->rows && !b->rlo))
        rc = Dlk_fail(err, DLK_ENOMEM, "out of memory planning %llu "
                      "blocks", (unsigned long long)nblocks);
    for (size_t i = 0; !rc && i < nblocks; i++)
        order[i] = i;
    if (!rc && p->shuffle) {
        rng g = {Dlk_mix64(p->seed) ^ Dlk_mix64(epoch + 1)};
        rc = stratify(order, nblocks, p->window_blocks, &g, err);
    }
    if (rc) {
        free(order);
        Dlk_order_free(b);
        return rc;
    }
    uint64_t pos = 0;
    for (size_t i = 0; i < nblocks; i++) {
        uint64_t f = first[order[i]], c = count[order[i]];
        if (p->rows) { /* the block's rows */
            uint64_t lo;
            c = block_rows(p, f, c, &lo);
            if (c)
                b->rlo[b->nb] = lo;
        }
        if (!c)
            continue;
        b->at[b->nb] = pos;
        b->blk[b->nb++] = order[i];
        pos += c;
    }
    b->at[b->nb] = pos; /* rows past every block are not streamed */
    b->base_n = pos;
    free(order);
    return DLK_OK;
}

dlk_status Dlk_order_build(const uint64_t *first, const uint32_t *count,
                           size_t nblocks, const Dlk_order_params *p,
                           const dlk_loader_state *st, uint32_t rank,
                           Dlk_order *out, dlk_error *err)
{
    memset(out, 0, sizeof *out);
    dlk_status rc = check_state(st, rank, err);
    if (rc)
        return rc;
    Dlk_order b = {0};
    if ((rc = build_base(first, count, nblocks, p, st->epoch, &b, err)))
        return rc;

    /* the block starts: where segment 0's windows may be cut */
    const uint64_t *bnd = b.at;
    size_t nbnd = b.nb;
    for (uint32_t sgi = 0; !rc; sgi++) {
        uint32_t world = st->seg[sgi].world, batch = st->seg[sgi].batch;
        if (sgi == st->nseg - 1) {
            rc = rank_share(&b, bnd, nbnd, p, st->epoch, world, batch, rank,
                            err);
            if (!rc && b.rest)
                rc = rest_plan_ranks(&b, b.at, b.nb, p, st->epoch, err);
            if (!rc) {
                *out = b;
                return DLK_OK;
            }
            break;
        }
        rc = rest_level_add(&b, bnd, nbnd, p, st->epoch, world, batch,
                            st->seg[sgi].steps, err);
        bnd = NULL; /* later segments keep the order they were given */
        nbnd = 0;
    }
    Dlk_order_free(&b);
    return rc;
}
