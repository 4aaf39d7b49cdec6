/* test_seg_order.c - a resumed epoch's plan (an epoch resumed under other
 * world and batch sizes) against a brute-force computation: every rank
 * of every earlier segment listed position by position, what each left
 * concatenated rank after rank and dealt again.  The plan plans only the
 * ranks of segment 0 that its rank reads from; it must give the same
 * stream, position by position, and plan fewer ranks than a wide
 * segment 0 has. */
#include "unit.h"
#include "order_arrays.h"
#include "util/hash.h"

#include <stdlib.h>
#include <string.h>

/* Blocks of 1..maxc samples: first[i], count[i]; their number. */
static size_t make_blocks(uint64_t n, uint32_t maxc, uint64_t seed,
                          uint64_t *first, uint32_t *count)
{
    size_t nb = 0;
    for (uint64_t at = 0; at < n; nb++) {
        uint64_t c = 1 + Dlk_mix64(seed + nb) % maxc;
        if (c > n - at)
            c = n - at;
        first[nb] = at;
        count[nb] = (uint32_t)c;
        at += c;
    }
    return nb;
}

/* The deal of a list of len entries to rank r of (w, b): its stream's
 * n positions, each an index into the list (mod len) and a pad flag. */
static uint64_t deal(uint64_t len, uint32_t w, uint32_t b, uint32_t r,
                     int drop_last, uint64_t *idx, uint8_t *pad)
{
    uint64_t span = drop_last ? len / w : (len + w - 1) / w;
    uint64_t batches = drop_last ? span / b : (span + b - 1) / b;
    uint64_t n = batches * b;
    for (uint64_t i = 0; i < n; i++) {
        int tail = i >= span;
        uint64_t g = (uint64_t)r * span + (tail ? (i - span) % span : i);
        idx[i] = len ? g % len : 0;
        pad[i] = tail || g >= len;
    }
    return n;
}

/* The stream of `rank` under st, computed the long way into *out. */
static int brute(const uint64_t *first, const uint32_t *count, size_t nb,
                 const Dlk_order_params *p, const dlk_loader_state *st,
                 uint32_t rank, uint64_t n_all, tord *out)
{
    dlk_loader_state s0 = *st;
    s0.nseg = 1;
    uint64_t *list = NULL, len = 0;
    /* segment 0: each rank's own stream (a plan of one segment) */
    uint64_t *next = malloc((n_all * 2 + 64) * sizeof *next), nn = 0;
    for (uint32_t r = 0; r < st->seg[0].world; r++) {
        tord o;
        if (tord_build(first, count, nb, p, &s0, r, &o, NULL))
            return 0;
        for (uint64_t i = st->seg[0].steps * st->seg[0].batch; i < o.n; i++)
            if (!o.pad[i])
                next[nn++] = o.sample[i];
        tord_free(&o);
    }
    list = next;
    len = nn;
    uint64_t cap = n_all * 2 + 64;
    uint64_t *idx = malloc(cap * 8);
    uint8_t *pad = malloc(cap);
    for (uint32_t k = 1; k < st->nseg; k++) {
        uint32_t w = st->seg[k].world, b = st->seg[k].batch;
        bool last = k + 1 == st->nseg;
        next = malloc((len + 1) * sizeof *next);
        nn = 0;
        for (uint32_t r = 0; r < w; r++) {
            if (last && r != rank)
                continue;
            uint64_t n = deal(len, w, b, r, p->drop_last, idx, pad);
            if (last) {
                out->n = n;
                out->sample = malloc((n ? n : 1) * 8);
                out->pad = malloc(n ? n : 1);
                for (uint64_t i = 0; i < n; i++) {
                    out->sample[i] = len ? list[idx[i]] : 0;
                    out->pad[i] = pad[i];
                }
                continue;
            }
            for (uint64_t i = st->seg[k].steps * b; i < n; i++)
                if (!pad[i])
                    next[nn++] = list[idx[i]];
        }
        free(list);
        list = next;
        len = nn;
    }
    free(list);
    free(idx);
    free(pad);
    return 1;
}

static void test_against_brute(void)
{
    static uint64_t first[4096];
    static uint32_t count[4096];
    static uint64_t rows[4096];
    int same = 1, cases = 0;
    uint64_t planned = 0, ranks0 = 0;
    for (uint64_t c = 0; c < 150 && same; c++) {
        uint64_t h = Dlk_mix64(c * 7919 + 3);
        uint64_t n = 1 + h % 3000;
        size_t nb = make_blocks(n, 1 + (uint32_t)(h >> 10) % 30, h, first,
                                count);
        Dlk_order_params p = {.shuffle = (h >> 20) % 5 != 0, .seed = c,
                              .window_blocks = 1 + (h >> 24) % 7,
                              .chunk_blocks = 1 + (h >> 28) % 3,
                              .drop_last = (h >> 32) % 4 == 0};
        uint64_t n_all = n;
        if ((h >> 36) % 5 == 0) { /* a view */
            uint64_t k = 0;
            for (uint64_t i = 0; i < n && k < 4096; i++)
                if (Dlk_mix64(i + h) % 4)
                    rows[k++] = i;
            p.rows = rows;
            p.nrows = k;
        }
        dlk_loader_state st;
        memset(&st, 0, sizeof st);
        st.seed = c;
        st.epoch = c % 4;
        st.nseg = 2 + (uint32_t)((h >> 40) % 3);
        for (uint32_t k = 0; k < st.nseg; k++) {
            uint64_t g = Dlk_mix64(h ^ (k + 1));
            /* wide worlds first (so that a rank reads from few of
             * them), then narrower and wider ones */
            st.seg[k].world = k ? 1 + (uint32_t)(g % 24)
                                : 8 + (uint32_t)(g % 57);
            st.seg[k].batch = 1 + (uint32_t)((g >> 8) % 9);
            if (k + 1 < st.nseg)
                st.seg[k].steps = (g >> 16) %
                    (2 + n / ((uint64_t)st.seg[k].world * st.seg[k].batch));
        }
        uint32_t wl = st.seg[st.nseg - 1].world;
        for (uint32_t r = 0; r < wl && same; r++) {
            tord want = {0}, got = {0};
            Dlk_order o;
            if (!brute(first, count, nb, &p, &st, r, n_all, &want) ||
                tord_build(first, count, nb, &p, &st, r, &got, NULL) ||
                Dlk_order_build(first, count, nb, &p, &st, r, &o, NULL)) {
                same = 0;
                break;
            }
            same &= want.n == got.n;
            for (uint64_t i = 0; same && i < got.n; i++)
                same &= want.pad[i] == got.pad[i] &&
                        want.sample[i] == got.sample[i];
            planned += Dlk_order_rest_planned(&o);
            ranks0 += st.seg[0].world;
            Dlk_order_free(&o);
            tord_free(&want);
            tord_free(&got);
        }
        cases++;
    }
    UNIT_CHECK("resumed plans (2-4 segments, segment 0 of 8-64 ranks, "
               "views, drop_last) equal the brute-force deal position by "
               "position", same && cases == 150);
    printf("# segment 0 ranks planned: %llu of %llu\n",
           (unsigned long long)planned, (unsigned long long)ranks0);
    UNIT_CHECK("... planning fewer than half of segment 0's ranks",
               same && planned * 2 < ranks0);
}

/* One wide segment 0 resumed on one rank: it reads everything that is
 * left, so every rank with something left is planned; resumed on as many
 * ranks, each reads one or two. */
static void test_counts(void)
{
    static uint64_t first[2048];
    static uint32_t count[2048];
    size_t nb = make_blocks(20000, 20, 5, first, count);
    Dlk_order_params p = {.shuffle = 1, .seed = 1, .window_blocks = 4};
    dlk_loader_state st;
    memset(&st, 0, sizeof st);
    st.nseg = 2;
    st.seg[0].world = 64;
    st.seg[0].batch = 8;
    st.seg[0].steps = 10;
    st.seg[1].world = 1;
    st.seg[1].batch = 8;
    Dlk_order o;
    int ok = Dlk_order_build(first, count, nb, &p, &st, 0, &o, NULL) == 0;
    uint32_t one = ok ? Dlk_order_rest_planned(&o) : 0;
    if (ok)
        Dlk_order_free(&o);
    st.seg[1].world = 64;
    uint32_t most = 0;
    for (uint32_t r = 0; ok && r < 64; r++) {
        ok = Dlk_order_build(first, count, nb, &p, &st, r, &o, NULL) == 0;
        if (ok && Dlk_order_rest_planned(&o) > most)
            most = Dlk_order_rest_planned(&o);
        if (ok)
            Dlk_order_free(&o);
    }
    UNIT_CHECK("one rank after 64 plans all 64; each of 64 plans at most 2",
               ok && one == 64 && most >= 1 && most <= 2);
}

int main(void)
{
    test_against_brute();
    test_counts();
    return unit_done();
}
