/* test_loader_view.c - a loader over some rows (a view's) reads, of a
 * chunk with part checksums, only the parts that hold them: the bytes it
 * loads are those parts' (a span most of whose parts hold rows whole),
 * far fewer than the spans or chunks holding the rows; every batch has
 * the right bytes for its rows, each row once across ranks in equal
 * batches; a resumed loader goes on where it stopped. */
#include "unit.h"
#include "format/chunk.h"
#include "dlk.h"

#include <unistd.h>

enum { ROW = 1000, PER_CHUNK = 64, PART = 4096, N = 640 };

static char dir[256];

static uint8_t vbyte(uint64_t row, int k)
{
    return (uint8_t)(row * 31 + (uint64_t)k * 7);
}

/* tokens of row r: r % 5 + 1 of them, each r + k */
static int make_dataset(void)
{
    snprintf(dir, sizeof dir, "/tmp/dlk-test-loader-view-%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return -1;
    dlk_tensor_spec s[3];
    if (dlk_tensor_spec_parse("vec:u8:1000", &s[0], NULL) ||
        dlk_tensor_spec_parse("labels:i64", &s[1], NULL) ||
        dlk_tensor_spec_parse("tokens:u16:?", &s[2], NULL))
        return -1;
    s[0].chunk_bytes = (uint64_t)ROW * PER_CHUNK;
    s[0].part_bytes = PART;
    s[2].chunk_bytes = 2048;
    s[2].part_bytes = PART;
    dlk_dataset *ds;
    if (dlk_dataset_create(dir, s, 3, &ds, NULL))
        return -1;
    for (uint64_t i = 0; i < N; i++) {
        uint8_t v[ROW];
        for (int k = 0; k < ROW; k++)
            v[k] = vbyte(i, k);
        int64_t vshape[1] = {ROW}, tshape[1] = {(int64_t)(i % 5 + 1)};
        int64_t label = (int64_t)i;
        uint16_t tok[5];
        for (int k = 0; k < 5; k++)
            tok[k] = (uint16_t)(i + (uint64_t)k);
        if (dlk_append(ds, 0, v, ROW, vshape, 1, NULL) ||
            dlk_append(ds, 1, &label, 8, NULL, 0, NULL) ||
            dlk_append(ds, 2, tok, (size_t)tshape[0] * 2, tshape, 1, NULL))
            return -1;
    }
    return dlk_dataset_close(ds, NULL) ? -1 : 0;
}

/* The bytes a loader over rows reads of vec, by the part layout
 * (formats/dlk-v1.md 3.2) and the rule that a span of `unit` parts is
 * read whole once 3 of 4 of its parts hold rows: *parts, the needed
 * parts' bytes alone; *units, the bytes of the spans holding a row. */
static void vec_bytes(const uint64_t *rows, size_t n, uint32_t unit,
                      uint64_t *parts, uint64_t *units)
{
    uint32_t np = Dlk_parts_count(PER_CHUNK, (uint64_t)ROW * PER_CHUNK, PART);
    size_t nchunks = (N + PER_CHUNK - 1) / PER_CHUNK;
    *parts = *units = 0;
    for (size_t c = 0; c < nchunks; c++)
        for (uint32_t a = 0; a < np; a += unit) {
            uint32_t z = a + unit < np ? a + unit : np, held = 0;
            uint64_t held_bytes = 0;
            for (uint32_t p = a; p < z; p++) {
                uint64_t f = c * PER_CHUNK + Dlk_part_first(p, PER_CHUNK, np);
                uint64_t e = c * PER_CHUNK + Dlk_part_first(p + 1, PER_CHUNK,
                                                             np);
                bool has = false;
                for (size_t i = 0; i < n; i++)
                    has |= rows[i] >= f && rows[i] < e;
                held += has;
                held_bytes += has ? (e - f) * ROW : 0;
            }
            uint64_t all = (uint64_t)(Dlk_part_first(z, PER_CHUNK, np) -
                                      Dlk_part_first(a, PER_CHUNK, np)) * ROW;
            if (held)
                *units += all;
            *parts += held * 4 >= (z - a) * 3 ? all : held_bytes;
        }
}

/* The bytes of vec one loader over rows loads in an epoch, alone on
 * one rank, a sample a batch (no padding to read a span again). */
static uint64_t vec_loaded(dlk_dataset *ds, const uint64_t *rows, size_t n,
                           int whole)
{
    const char *vec_only[1] = {"vec"};
    dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
    o.tensors = vec_only;
    o.ntensors = 1;
    o.batch_size = 1;
    o.epochs = 1; /* nothing of a next epoch read ahead */
    o.shuffle = 1;
    o.window_chunks = 2;
    o.rows = rows;
    o.nrows = n;
    o.whole_chunks = whole;
    dlk_loader *l;
    dlk_error err;
    if (dlk_loader_open(ds, &o, &l, &err))
        return 0;
    const dlk_batch *b;
    dlk_status rc;
    while ((rc = dlk_loader_next(l, &b, &err)) == DLK_OK && b)
        ;
    dlk_loader_stats st = DLK_LOADER_STATS_INIT;
    dlk_loader_stats_get(l, &st);
    dlk_loader_close(l);
    return rc ? 0 : st.bytes_loaded;
}

/* Stream one epoch of rows on `world` ranks: every sample's bytes must
 * be its row's, each row seen once, the batches equal; and the bytes
 * of vec loaded the parts holding the rows. */
static void stream_rows(dlk_dataset *ds, const uint64_t *rows, size_t n,
                        uint32_t world, int whole, const char *what)
{
    char name[160];
    uint32_t *seen = calloc(N, sizeof *seen);
    int right = 1, equal = 1, opened = 1;
    uint64_t batches0 = UINT64_MAX;
    for (uint32_t r = 0; r < world && seen && opened; r++) {
        dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
        o.batch_size = 4;
        o.shuffle = 1;
        o.seed = 11;
        o.window_chunks = 2;
        o.rank = r;
        o.world_size = world;
        o.io_threads = 3;
        o.check = 1;
        o.rows = rows;
        o.nrows = n;
        o.whole_chunks = whole;
        dlk_loader *l;
        dlk_error err;
        if (dlk_loader_open(ds, &o, &l, &err)) {
            UNIT_CHECK(err.msg, 0);
            opened = 0;
            break;
        }
        const dlk_batch *b;
        uint64_t nb = 0;
        dlk_status rc;
        while ((rc = dlk_loader_next(l, &b, &err)) == DLK_OK && b) {
            nb++;
            const uint8_t *v = b->tensors[0].data;
            const int64_t *lab = b->tensors[1].data;
            const uint16_t *tok = b->tensors[2].data;
            for (uint32_t i = 0; i < b->size; i++) {
                uint64_t s = b->indices[i];
                uint64_t off = b->tensors[2].offsets[i];
                right &= lab[i] == (int64_t)s;
                right &= b->tensors[2].shapes[i] == (int64_t)(s % 5 + 1);
                for (int k = 0; k < (int)(s % 5 + 1); k++)
                    right &= tok[off / 2 + (size_t)k] ==
                             (uint16_t)(s + (uint64_t)k);
                for (int k = 0; k < ROW; k++)
                    right &= v[(size_t)i * ROW + (size_t)k] == vbyte(s, k);
                if (!b->pad[i])
                    seen[s]++;
            }
        }
        if (rc) {
            UNIT_CHECK(err.msg, 0);
            right = 0;
        }
        if (batches0 == UINT64_MAX)
            batches0 = nb;
        equal &= nb == batches0;
        dlk_loader_close(l);
    }
    int once = seen != NULL;
    for (uint64_t s = 0, i = 0; s < N && seen; s++) {
        bool in = i < n && rows[i] == s;
        once &= seen[s] == (in ? 1u : 0u);
        i += in;
    }
    snprintf(name, sizeof name, "%s: every sample its row's bytes", what);
    UNIT_CHECK(name, right && opened);
    snprintf(name, sizeof name, "%s: each row once, no other", what);
    UNIT_CHECK(name, once);
    snprintf(name, sizeof name, "%s: equal batches on %u ranks", what, world);
    UNIT_CHECK(name, equal);
    uint64_t parts, units, loaded = vec_loaded(ds, rows, n, whole);
    vec_bytes(rows, n, 4, &parts, &units);
    if (whole) {
        snprintf(name, sizeof name, "%s: whole chunks, more than the "
                 "spans holding rows (%llu)", what, (unsigned long long)units);
        UNIT_CHECK(name, loaded > units);
    } else {
        snprintf(name, sizeof name, "%s: vec's bytes loaded are the parts "
                 "holding the rows (%llu)", what, (unsigned long long)parts);
        UNIT_CHECK(name, loaded == parts);
        if (loaded != parts)
            printf("#   loaded %llu\n", (unsigned long long)loaded);
        if (parts * 2 < units) {
            snprintf(name, sizeof name, "%s: under half the bytes of the "
                     "spans holding them (%llu)", what,
                     (unsigned long long)units);
            UNIT_CHECK(name, loaded * 2 < units);
        }
    }
    free(seen);
}

/* A loader over rows stopped after k batches and resumed from its state
 * by a new one gives the rest of the epoch the first would have. */
static void resume_rows(dlk_dataset *ds, const uint64_t *rows, size_t n)
{
    uint64_t full[N], rest[N];
    size_t nfull = 0, nrest = 0, cut = 0;
    int ok = 1;
    for (int run = 0; run < 2 && ok; run++) {
        dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
        o.batch_size = 3;
        o.shuffle = 1;
        o.seed = 4;
        o.window_chunks = 2;
        o.rows = rows;
        o.nrows = n;
        dlk_loader *l;
        dlk_error err;
        dlk_loader_state st;
        if (dlk_loader_open(ds, &o, &l, &err)) {
            ok = 0;
            break;
        }
        const dlk_batch *b;
        uint64_t nb = 0;
        while (dlk_loader_next(l, &b, &err) == DLK_OK && b) {
            for (uint32_t i = 0; i < b->size; i++) {
                if (run == 0 && nfull < N)
                    full[nfull++] = b->indices[i];
                else if (run == 1 && nrest < N)
                    rest[nrest++] = b->indices[i];
            }
            if (run == 1 && ++nb == 2) {
                dlk_loader_state_get(l, &st);
                dlk_loader_close(l);
                cut = nrest;
                if (dlk_loader_open(ds, &o, &l, &err) ||
                    dlk_loader_restore(l, &st, &err)) {
                    ok = 0;
                    break;
                }
            }
        }
        if (ok)
            dlk_loader_close(l);
    }
    UNIT_CHECK("over rows, resumed after 2 batches: the same epoch",
               ok && cut && nfull == nrest &&
               !memcmp(full, rest, nfull * sizeof *full));
}

int main(void)
{
    if (make_dataset()) {
        UNIT_CHECK("make a dataset", 0);
        return unit_done();
    }
    dlk_dataset *ds;
    dlk_error err;
    if (dlk_dataset_open(dir, NULL, &ds, &err)) {
        UNIT_CHECK(err.msg, 0);
        return unit_done();
    }
    /* sparse: one row in 37, each alone in its span of 4 parts */
    uint64_t sparse[N], range[N], half[N];
    size_t ns = 0, nr = 0, nh = 0;
    for (uint64_t r = 5; r < N; r += 37)
        sparse[ns++] = r;
    /* a range: whole spans inside it, parts at its ends */
    for (uint64_t r = 101; r < 262; r++)
        range[nr++] = r;
    /* every other row: every part holds some */
    for (uint64_t r = 0; r < N; r += 2)
        half[nh++] = r;
    stream_rows(ds, sparse, ns, 2, 0, "one row in 37");
    stream_rows(ds, sparse, ns, 1, 1, "one row in 37, --whole-chunks");
    stream_rows(ds, range, nr, 3, 0, "rows 101-261");
    stream_rows(ds, half, nh, 2, 0, "every other row");
    resume_rows(ds, sparse, ns);
    dlk_dataset_close(ds, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        UNIT_CHECK("remove the dataset", 0);
    return unit_done();
}
