/* test_order_perm.c - the order's implicit permutation: a window's
 * shuffle is a bijection on [0, m) for every m (powers of two or not, 1
 * included), keyed (another key, another permutation) and well mixed; a
 * position's sample is the same read alone or in a run; rank shares are
 * disjoint and complete over many sizes; a resume under other world and
 * batch sizes deals exactly the samples a list of what was left would
 * deal; and a plan for a billion rows, resumed or not, costs its blocks,
 * not its rows. */
#include "unit.h"
#include "order_arrays.h"
#include "util/hash.h"

#include <math.h>
#include <sys/resource.h>

static int is_bijection(uint64_t m, uint64_t key)
{
    uint8_t *hit = calloc(m ? m : 1, 1);
    int ok = hit != NULL;
    for (uint64_t x = 0; ok && x < m; x++) {
        uint64_t y = Dlk_order_permute(x, m, key);
        ok = y < m && !hit[y];
        if (ok)
            hit[y] = 1;
    }
    free(hit);
    return ok;
}

static void test_bijection(void)
{
    int all = 1;
    for (uint64_t m = 1; m <= 600; m++)
        for (uint64_t key = 0; key < 4; key++)
            all &= is_bijection(m, Dlk_mix64(key) ^ m);
    UNIT_CHECK("a bijection on [0, m) for every m from 1 to 600, 4 keys", all);
    static const uint64_t big[] = {1023, 1024, 1025, 4097, 65535, 65536,
                                   65537, 100003, 1u << 20, (1u << 20) + 7};
    all = 1;
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        all &= is_bijection(big[i], 0x5eed + i);
    UNIT_CHECK("a bijection for powers of two and their neighbours to 2^20",
               all);
    UNIT_CHECK("m = 1: the one position", Dlk_order_permute(0, 1, 99) == 0);
    /* near 2^64 the halves are 32 bits: outputs stay below m */
    uint64_t m = (1ull << 63) + 12345, inside = 1;
    for (uint64_t x = 0; x < 1000; x++)
        inside &= Dlk_order_permute(x * 0x9e3779b97f4a7c15ull % m, m, 7) < m;
    UNIT_CHECK("m near 2^63: every value inside", inside);

    /* keyed: two keys rarely agree; mixed: few fixed points, a mean
     * displacement near a random permutation's m/3 */
    const uint64_t n = 10000;
    uint64_t same = 0, fixed = 0;
    double disp = 0;
    for (uint64_t x = 0; x < n; x++) {
        uint64_t a = Dlk_order_permute(x, n, 1), b = Dlk_order_permute(x, n, 2);
        same += a == b;
        fixed += a == x;
        disp += fabs((double)a - (double)x);
    }
    UNIT_CHECK("another key: another permutation", same < n / 100);
    UNIT_CHECK("few fixed points", fixed < n / 100);
    disp /= n * (n / 3.0);
    UNIT_CHECK("mean displacement within 5% of a random permutation's",
               disp > 0.95 && disp < 1.05);
}

/* Blocks of 1..span samples (uneven). */
static size_t blocks(uint64_t n, uint32_t span, uint64_t *first,
                     uint32_t *count)
{
    size_t nb = 0;
    for (uint64_t f = 0; f < n; nb++) {
        uint32_t c = 1 + (uint32_t)(Dlk_mix64(nb) % span);
        if (c > n - f)
            c = (uint32_t)(n - f);
        first[nb] = f;
        count[nb] = c;
        f += c;
    }
    return nb;
}

static dlk_loader_state state(uint64_t seed, uint32_t world, uint32_t batch)
{
    dlk_loader_state st;
    memset(&st, 0, sizeof st);
    st.seed = seed;
    st.nseg = 1;
    st.seg[0].world = world;
    st.seg[0].batch = batch;
    return st;
}

static void test_shares(void)
{
    static uint64_t first[8192];
    static uint32_t count[8192];
    int all = 1, at_ok = 1;
    for (uint64_t n = 1; n < 2000 && all; n = n * 3 + 1) {
        for (uint32_t span = 1; span <= 64; span *= 4) {
            size_t nb = blocks(n, span, first, count);
            for (uint32_t w = 1; w <= 8; w++) {
                Dlk_order_params p = {.shuffle = 1, .seed = n, .window_blocks = 5,
                                      .chunk_blocks = 2};
                dlk_loader_state st = state(n, w, 7);
                uint32_t *seen = calloc(n, sizeof *seen);
                uint64_t batches = UINT64_MAX;
                for (uint32_t r = 0; r < w; r++) {
                    tord o;
                    Dlk_order one;
                    if (tord_build(first, count, nb, &p, &st, r, &o, NULL) ||
                        Dlk_order_build(first, count, nb, &p, &st, r, &one,
                                        NULL)) {
                        all = 0;
                        break;
                    }
                    if (batches == UINT64_MAX)
                        batches = o.batches;
                    all &= o.batches == batches && o.n == batches * 7;
                    for (uint64_t i = 0; i < o.n; i++) {
                        all &= o.sample[i] < n;
                        if (!o.pad[i] && o.sample[i] < n)
                            seen[o.sample[i]]++;
                        /* alone, backwards: the same as in the run */
                        uint64_t j = o.n - 1 - i, s;
                        uint8_t pd;
                        Dlk_order_at(&one, j, 1, &s, &pd);
                        at_ok &= s == o.sample[j] && pd == o.pad[j];
                    }
                    tord_free(&o);
                    Dlk_order_free(&one);
                }
                for (uint64_t i = 0; i < n; i++)
                    all &= seen[i] == 1;
                free(seen);
            }
        }
    }
    UNIT_CHECK("rank shares disjoint and complete, equal batches, sizes "
               "1 to 1,093, blocks of 1 to 64, worlds 1-8", all);
    UNIT_CHECK("a position read alone is the one read in a run", at_ok);
}

/* The resume the plain way: the samples every rank of each earlier
 * segment left, listed rank after rank, dealt again in equal spans;
 * rank r's stream of the last segment into *out (a tord). */
static int resume_ref(const uint64_t *first, const uint32_t *count,
                      size_t nb, const Dlk_order_params *p,
                      const dlk_loader_state *st, uint32_t rank, tord *out)
{
    dlk_loader_state s0 = *st;
    s0.nseg = 1;
    uint64_t *rest = NULL, len = 0;
    for (uint32_t k = 0; k + 1 < st->nseg; k++) {
        uint32_t w = st->seg[k].world, b = st->seg[k].batch;
        uint64_t *next = NULL, nn = 0;
        for (uint32_t r = 0; r < w; r++) {
            tord o;
            uint64_t span, n;
            if (!k) {
                s0.seg[0] = st->seg[0];
                if (tord_build(first, count, nb, p, &s0, r, &o, NULL))
                    return 0;
            } else { /* the plain deal of the list */
                span = p->drop_last ? len / w : (len + w - 1) / w;
                uint64_t batches = p->drop_last ? span / b
                                                : (span + b - 1) / b;
                n = batches * b;
                o.n = n;
                o.sample = malloc((n ? n : 1) * 8);
                o.pad = malloc(n ? n : 1);
                for (uint64_t i = 0; i < n; i++) {
                    int tail = i >= span;
                    uint64_t g = r * span + (tail ? (i - span) % span : i);
                    o.sample[i] = rest[g % len];
                    o.pad[i] = tail || g >= len;
                }
            }
            next = realloc(next, (nn + o.n + 1) * 8);
            for (uint64_t i = st->seg[k].steps * b; i < o.n; i++)
                if (!o.pad[i])
                    next[nn++] = o.sample[i];
            tord_free(&o);
        }
        free(rest);
        rest = next;
        len = nn;
    }
    uint32_t w = st->seg[st->nseg - 1].world, b = st->seg[st->nseg - 1].batch;
    uint64_t span = p->drop_last ? len / w : (len + w - 1) / w;
    uint64_t batches = p->drop_last ? span / b : (span + b - 1) / b;
    out->n = batches * b;
    out->batches = batches;
    out->sample = malloc((out->n ? out->n : 1) * 8);
    out->pad = malloc(out->n ? out->n : 1);
    for (uint64_t i = 0; i < out->n; i++) {
        int tail = i >= span;
        uint64_t g = rank * span + (tail ? (i - span) % span : i);
        out->sample[i] = len ? rest[g % len] : 0;
        out->pad[i] = tail || g >= len;
    }
    free(rest);
    return 1;
}

/* Dlk_order_pieces' pieces, checked against the positions they stand
 * for: they follow each other from 0; a whole window's runs are the
 * samples of its positions (in another order), a part's hold them and
 * the window's others; a piece read one by one is under
 * 1/DLK_ORDER_PART_MIN of its window, or of no shuffled window. */
typedef struct pcheck {
    const Dlk_order *o;
    uint64_t next, whole, parts;
    int ok;
    uint64_t *got, ngot;
} pcheck;

static void collect(void *ud, uint64_t s, uint64_t c, uint64_t pos)
{
    pcheck *pc = ud;
    (void)pos;
    for (uint64_t i = 0; i < c; i++)
        pc->got[pc->ngot++] = s + i;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void piece(void *ud, const Dlk_order *src, size_t win, uint64_t a,
                  uint64_t b)
{
    pcheck *pc = ud;
    pc->ok &= a == pc->next && b > a;
    pc->next = b;
    if (!src || !pc->ok)
        return;
    uint64_t wa, wb;
    bool shuffled;
    pc->ok &= Dlk_order_window(src, win, &wa, &wb, &shuffled) && shuffled &&
              (b - a) * DLK_ORDER_PART_MIN >= wb - wa && b - a <= wb - wa;
    if (!pc->ok)
        return;
    bool whole = b - a == wb - wa;
    pc->whole += whole;
    pc->parts += !whole;
    uint64_t *want = malloc((b - a) * sizeof *want);
    pc->got = malloc((wb - wa) * sizeof *pc->got);
    pc->ngot = 0;
    Dlk_order_at(pc->o, a, b - a, want, NULL);
    Dlk_order_runs(src, win, collect, pc);
    qsort(want, b - a, 8, cmp_u64);
    qsort(pc->got, pc->ngot, 8, cmp_u64);
    pc->ok &= pc->ngot == wb - wa;
    /* every sample of the positions among the window's */
    for (uint64_t i = 0, j = 0; pc->ok && i < b - a; i++) {
        while (j < pc->ngot && pc->got[j] < want[i])
            j++;
        pc->ok &= j < pc->ngot && pc->got[j] == want[i];
        j++;
    }
    free(want);
    free(pc->got);
}

static void test_resume(void)
{
    static uint64_t first[4096];
    static uint32_t count[4096];
    static uint64_t rows[3000];
    int same = 1, cases = 0, pieces_ok = 1;
    uint64_t wholes = 0, parts = 0;
    for (uint64_t c = 0; c < 400; c++) {
        uint64_t h = Dlk_mix64(c + 77);
        uint64_t n = 1 + h % 2500;
        size_t nb = blocks(n, 1 + (uint32_t)(h >> 12) % 40, first, count);
        Dlk_order_params p = {.shuffle = (h >> 20) % 4 != 0, .seed = c,
                              .window_blocks = 1 + (h >> 24) % 9,
                              .chunk_blocks = 1 + (h >> 28) % 3,
                              .drop_last = (h >> 32) % 3 == 0};
        if ((h >> 36) % 4 == 0) { /* a view: some rows only */
            uint64_t k = 0;
            for (uint64_t i = 0; i < n && k < 3000; i++)
                if (Dlk_mix64(i ^ h) % 3)
                    rows[k++] = i;
            p.rows = rows;
            p.nrows = k;
        }
        dlk_loader_state st = state(c, 1 + (h >> 40) % 8,
                                    1 + (h >> 44) % 13);
        st.epoch = c % 3;
        st.nseg = 2 + (h >> 48) % 3;
        for (uint32_t k = 0; k < st.nseg; k++) {
            uint64_t g = Dlk_mix64(h + k);
            if (k) {
                st.seg[k].world = 1 + g % 8;
                st.seg[k].batch = 1 + (g >> 8) % 13;
            }
            if (k + 1 < st.nseg) /* some steps, sometimes past the end */
                st.seg[k].steps = (g >> 16) % (1 + n / (st.seg[k].world *
                                                        st.seg[k].batch) +
                                               2);
        }
        for (uint32_t r = 0; r < st.seg[st.nseg - 1].world; r++) {
            tord want, got;
            if (!resume_ref(first, count, nb, &p, &st, r, &want) ||
                tord_build(first, count, nb, &p, &st, r, &got, NULL)) {
                same = 0;
                break;
            }
            same &= want.n == got.n;
            for (uint64_t i = 0; same && i < got.n; i++)
                same &= want.pad[i] == got.pad[i] &&
                        want.sample[i] == got.sample[i];
            tord_free(&want);
            tord_free(&got);
            Dlk_order o;
            if (Dlk_order_build(first, count, nb, &p, &st, r, &o, NULL)) {
                pieces_ok = 0;
                break;
            }
            pcheck pc = {.o = &o, .ok = 1};
            uint64_t end = Dlk_order_pieces(&o, piece, &pc);
            pieces_ok &= pc.ok && pc.next == end && end <= o.n &&
                         Dlk_order_resumed(&o);
            wholes += pc.whole;
            parts += pc.parts;
            Dlk_order_free(&o);
        }
        cases++;
    }
    UNIT_CHECK("resumed under other worlds and batches (2-4 segments, "
               "views, drop_last): the plain list's stream, position by "
               "position", same && cases == 400);
    UNIT_CHECK("... its pieces follow each other, a whole window's runs "
               "the samples of its positions, a part's a superset of them",
               pieces_ok && wholes > 100 && parts > 20);
}

/* A plan for 2^30 rows: built in its blocks' memory, its positions read
 * anywhere, every share inside the rows. */
static void test_billion(void)
{
    const uint64_t n = 1ull << 30;
    const size_t nb = 1024;
    uint64_t *first = malloc(nb * sizeof *first);
    uint32_t *count = malloc(nb * sizeof *count);
    for (size_t i = 0; i < nb; i++) {
        first[i] = i * (n / nb);
        count[i] = (uint32_t)(n / nb);
    }
    Dlk_order_params p = {.shuffle = 1, .seed = 3, .window_blocks = 16,
                          .chunk_blocks = 4};
    dlk_loader_state st = state(3, 8, 256);
    struct rusage u0, u1;
    getrusage(RUSAGE_SELF, &u0);
    Dlk_order o;
    int ok = Dlk_order_build(first, count, nb, &p, &st, 3, &o, NULL) == 0;
    int inside = 1;
    for (uint64_t k = 0; ok && k < 100000; k++) {
        uint64_t pos = Dlk_mix64(k) % o.n, s;
        uint8_t pd;
        Dlk_order_at(&o, pos, 1, &s, &pd);
        inside &= s < n && !pd;
    }
    getrusage(RUSAGE_SELF, &u1);
    UNIT_CHECK("2^30 rows, 8 ranks: rank 3's plan built", ok);
    UNIT_CHECK("... its positions' samples inside the rows", inside);
    UNIT_CHECK("... in under 16 MiB more memory (not 9 bytes a row)",
               (u1.ru_maxrss - u0.ru_maxrss) * 1024 < (16 << 20));
    if (ok)
        Dlk_order_free(&o);

    /* resumed: 8 ranks took 1000 batches, 6 ranks of another batch go on */
    st.nseg = 2;
    st.seg[0].steps = 1000;
    st.seg[1].world = 6;
    st.seg[1].batch = 100;
    getrusage(RUSAGE_SELF, &u0);
    ok = Dlk_order_build(first, count, nb, &p, &st, 5, &o, NULL) == 0;
    inside = 1;
    for (uint64_t k = 0; ok && k < 100000; k++) {
        uint64_t pos = Dlk_mix64(k) % o.n, s;
        uint8_t pd;
        Dlk_order_at(&o, pos, 1, &s, &pd);
        inside &= s < n;
    }
    getrusage(RUSAGE_SELF, &u1);
    UNIT_CHECK("2^30 rows resumed on 6 ranks: rank 5's plan built", ok);
    UNIT_CHECK("... its samples inside the rows", inside);
    UNIT_CHECK("... in under 16 MiB more memory (not 8 bytes a row)",
               (u1.ru_maxrss - u0.ru_maxrss) * 1024 < (16 << 20));
    if (ok)
        Dlk_order_free(&o);
    free(first);
    free(count);
}

int main(void)
{
    test_bijection();
    test_shares();
    test_resume();
    test_billion();
    return unit_done();
}
