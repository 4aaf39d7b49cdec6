/* test_order_rows.c - the loader's order over a subset of rows (a view):
 * every row of the subset exactly once per epoch across ranks, no other
 * row, equal batches on every rank, shuffled or not, and a resume with
 * another world size deals exactly the rows left; and the query
 * language's random() against its documented formula. */
#include "unit.h"
#include "order_arrays.h"
#include "query/query.h"

#include <stdlib.h>
#include <string.h>

#define N 5000

/* rows kept: every `step`-th from `from`, or a contiguous range */
static uint64_t make_rows(uint64_t *rows, uint64_t step, uint64_t from,
                          uint64_t to)
{
    uint64_t n = 0;
    for (uint64_t r = from; r < to; r += step)
        rows[n++] = r;
    return n;
}

static int check(const uint64_t *rows, uint64_t nrows, uint32_t world,
                 uint32_t batch, int shuffle)
{
    static uint64_t first[N];
    static uint32_t count[N];
    size_t nb = unit_blocks(N, 40, 23, first, count);
    Dlk_order_params p = {.shuffle = shuffle, .seed = 7, .window_blocks = 4, .drop_last = 0, .rows = rows, .nrows = nrows};
    dlk_loader_state st;
    memset(&st, 0, sizeof st);
    st.seed = 7;
    st.nseg = 1;
    st.seg[0].world = world;
    st.seg[0].batch = batch;
    uint8_t *in = calloc(N, 1);
    uint32_t *seen = calloc(N, sizeof *seen);
    for (uint64_t i = 0; i < nrows; i++)
        in[rows[i]] = 1;
    uint64_t batches = UINT64_MAX;
    int ok = 1;
    for (uint32_t r = 0; r < world; r++) {
        tord o;
        if (tord_build(first, count, nb, &p, &st, r, &o, NULL)) {
            ok = 0;
            break;
        }
        if (batches == UINT64_MAX)
            batches = o.batches;
        ok &= o.batches == batches && o.n == o.batches * batch;
        for (uint64_t i = 0; i < o.n; i++) {
            ok &= o.sample[i] < N && in[o.sample[i]];
            if (!o.pad[i] && o.sample[i] < N)
                seen[o.sample[i]]++;
        }
        tord_free(&o);
    }
    for (uint64_t i = 0; i < N; i++)
        ok &= seen[i] == in[i];
    free(in);
    free(seen);
    return ok;
}

/* Segment 0 with world 3, 2 steps consumed; then world 2: the rows left
 * are exactly the subset less what was consumed. */
static int check_resume(const uint64_t *rows, uint64_t nrows)
{
    static uint64_t first[N];
    static uint32_t count[N];
    size_t nb = unit_blocks(N, 40, 23, first, count);
    Dlk_order_params p = {.shuffle = 1, .seed = 3, .window_blocks = 4, .drop_last = 0, .rows = rows, .nrows = nrows};
    dlk_loader_state st;
    memset(&st, 0, sizeof st);
    st.seed = 3;
    st.nseg = 1;
    st.seg[0].world = 3;
    st.seg[0].batch = 8;
    uint32_t *seen = calloc(N, sizeof *seen);
    int ok = 1;
    for (uint32_t r = 0; r < 3; r++) {
        tord o;
        if (tord_build(first, count, nb, &p, &st, r, &o, NULL))
            return 0;
        for (uint64_t i = 0; i < 2 * 8 && i < o.n; i++)
            if (!o.pad[i])
                seen[o.sample[i]]++;
        tord_free(&o);
    }
    st.seg[0].steps = 2;
    st.nseg = 2;
    st.seg[1].world = 2;
    st.seg[1].batch = 5;
    for (uint32_t r = 0; r < 2; r++) {
        tord o;
        if (tord_build(first, count, nb, &p, &st, r, &o, NULL))
            return 0;
        for (uint64_t i = 0; i < o.n; i++)
            if (!o.pad[i])
                seen[o.sample[i]]++;
        tord_free(&o);
    }
    uint64_t k = 0;
    for (uint64_t i = 0; i < N; i++) {
        bool in = k < nrows && rows[k] == i;
        k += in;
        ok &= seen[i] == (uint32_t)in;
    }
    free(seen);
    return ok;
}

int main(void)
{
    static uint64_t rows[N];
    struct { const char *what; uint64_t step, from, to; } sets[] = {
        {"1% spread over every block", 100, 3, N},
        {"50% spread over every block", 2, 1, N},
        {"a contiguous range", 1, 1200, 2100},
        {"one row", 1, 4321, 4322},
        {"no row", 1, 0, 0},
    };
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        uint64_t n = make_rows(rows, sets[s].step, sets[s].from, sets[s].to);
        int all = 1;
        for (uint32_t w = 1; w <= 5; w++)
            for (uint32_t b = 1; b <= 33; b += 8)
                for (int sh = 0; sh <= 1; sh++)
                    all &= check(rows, n, w, b, sh);
        char name[160];
        snprintf(name, sizeof name, "%s: each row once across 1-5 ranks, "
                 "equal batches, no other row", sets[s].what);
        UNIT_CHECK(name, all);
        snprintf(name, sizeof name, "%s: a resume with another world size "
                 "deals exactly the rows left", sets[s].what);
        UNIT_CHECK(name, check_resume(rows, n));
    }
    /* man/dlk-query.1's formula, computed here apart from q_random */
    int same = 1;
    for (uint64_t row = 0; row < 1000; row++) {
        uint64_t x = 5 + 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        x ^= row;
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        same &= q_random(5, row) == (double)(x >> 11) / 9007199254740992.0;
    }
    UNIT_CHECK("random(seed) is the documented formula", same);
    return unit_done();
}
