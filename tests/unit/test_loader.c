/* test_loader.c - the loader's order (every sample once per epoch across
 * ranks, equal batches, reproducible, resumable across world sizes) and
 * its batches (the right bytes for the indices it reports), on the CPU;
 * its per-batch timeline stays within a fixed number of buckets. */
#include "unit.h"
#include "dlk_bench.h"
#include <sched.h>
#include "order_arrays.h"
#include "loader/device.h"
#include "dlk.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dlk_loader_state state1(uint64_t seed, uint64_t epoch, uint32_t world,
                               uint32_t batch)
{
    dlk_loader_state st;
    memset(&st, 0, sizeof st);
    st.seed = seed;
    st.epoch = epoch;
    st.nseg = 1;
    st.seg[0].world = world;
    st.seg[0].batch = batch;
    return st;
}

/* Every non-pad sample exactly once across ranks; equal batch counts. */
static int check_epoch(uint64_t n, uint32_t world, uint32_t batch,
                       int drop_last, int shuffle)
{
    uint64_t first[4096];
    uint32_t count[4096];
    size_t nb = unit_blocks(n, 7, 11, first, count);
    Dlk_order_params p = {.shuffle = shuffle, .seed = 42, .window_blocks = 3, .drop_last = drop_last};
    dlk_loader_state st = state1(42, 0, world, batch);
    uint32_t *seen = calloc(n, sizeof *seen);
    uint64_t batches = UINT64_MAX, real = 0;
    int ok = 1;
    for (uint32_t r = 0; r < world; r++) {
        tord o;
        if (tord_build(first, count, nb, &p, &st, r, &o, NULL))
            return 0;
        if (batches == UINT64_MAX)
            batches = o.batches;
        ok &= o.batches == batches && o.n == o.batches * batch;
        for (uint64_t i = 0; i < o.n; i++) {
            ok &= o.sample[i] < n;
            if (!o.pad[i] && o.sample[i] < n) {
                seen[o.sample[i]]++;
                real++;
            }
        }
        tord_free(&o);
    }
    for (uint64_t i = 0; i < n; i++)
        ok &= drop_last ? seen[i] <= 1 : seen[i] == 1;
    /* drop_last loses less than a batch per rank plus the span remainder */
    if (drop_last)
        ok &= real + (uint64_t)world * batch + world > n;
    free(seen);
    return ok;
}

static uint64_t *stream(uint64_t n, const dlk_loader_state *st, uint32_t r,
                        uint64_t *len, uint8_t **pad)
{
    static uint64_t first[4096];
    static uint32_t count[4096];
    size_t nb = unit_blocks(n, 7, 11, first, count);
    Dlk_order_params p = {.shuffle = 1, .seed = st->seed, .window_blocks = 3, .drop_last = 0};
    tord o;
    if (tord_build(first, count, nb, &p, st, r, &o, NULL))
        return NULL;
    *len = o.n;
    if (pad)
        *pad = o.pad;
    else
        free(o.pad);
    return o.sample;
}

static void test_order(void)
{
    int all = 1;
    for (uint32_t w = 1; w <= 8; w++)
        for (uint64_t n = 1; n < 300; n += 37)
            all &= check_epoch(n, w, 5, 0, 1) && check_epoch(n, w, 5, 1, 1) &&
                   check_epoch(n, w, 4, 0, 0);
    UNIT_CHECK("every sample exactly once per epoch, world 1-8, uneven sizes",
               all);
    UNIT_CHECK("a big uneven dataset too", check_epoch(10007, 7, 64, 0, 1));

    dlk_loader_state a = state1(42, 0, 1, 8), b = state1(42, 1, 1, 8),
                     c = state1(43, 0, 1, 8);
    uint64_t la, lb, lc, la2;
    uint64_t *sa = stream(500, &a, 0, &la, NULL);
    uint64_t *sb = stream(500, &b, 0, &lb, NULL);
    uint64_t *sc = stream(500, &c, 0, &lc, NULL);
    uint64_t *sa2 = stream(500, &a, 0, &la2, NULL);
    UNIT_CHECK("same seed and epoch: same order",
               la == la2 && !memcmp(sa, sa2, la * 8));
    UNIT_CHECK("another epoch: another order", la == lb && memcmp(sa, sb, la * 8));
    UNIT_CHECK("another seed: another order", la == lc && memcmp(sa, sc, la * 8));
    int moved = 0;
    for (uint64_t i = 0; i < la; i++)
        moved += sa[i] != i;
    UNIT_CHECK("shuffled: most samples leave their place", moved > 400);
    free(sa); free(sb); free(sc); free(sa2);

    /* the windows ramp up from the blocks a batch fills (blocks of 7-17
     * samples: 1 for a batch of 4, 4 for a batch of 40), doubling up to
     * window_chunks (8) */
    static const uint32_t ramp_batch[2] = {4, 40}, ramp[2][6] = {
        {1, 2, 4, 8, 8, 8}, {4, 8, 8, 8, 8, 8}};
    for (int rc = 0; rc < 2; rc++) {
        static uint64_t first[4096];
        static uint32_t count[4096];
        size_t nb = unit_blocks(3000, 7, 11, first, count);
        Dlk_order_params p = {.shuffle = 1, .seed = 77, .window_blocks = 8, .drop_last = 0};
        dlk_loader_state st = state1(77, 0, 1, ramp_batch[rc]);
        tord o;
        int ok = tord_build(first, count, nb, &p, &st, 0, &o, NULL) == 0;
        const uint32_t *want = ramp[rc];
        uint64_t pos = 0;
        for (size_t w = 0; ok && w < 6; w++) {
            /* a window is the samples of its blocks: it ends where the
             * positions taken equal the samples of the blocks seen */
            uint64_t taken = 0, held = 0;
            uint32_t blocks = 0;
            size_t seen[16];
            do {
                uint64_t s = o.sample[pos + taken++];
                size_t blk = 0;
                while (blk + 1 < nb && first[blk + 1] <= s)
                    blk++;
                int known = 0;
                for (uint32_t k = 0; k < blocks; k++)
                    known |= seen[k] == blk;
                if (!known && blocks < 16) {
                    seen[blocks++] = blk;
                    held += count[blk];
                }
            } while (taken < held && pos + taken < o.n);
            ok &= blocks == want[w] && taken == held;
            pos += taken;
        }
        if (ok)
            tord_free(&o);
        UNIT_CHECK(rc ? "batch 40: shuffle windows of 4, then 8 blocks"
                     : "batch 4: shuffle windows of 1, 2, 4, then 8 blocks",
                   ok);
    }

    /* resume: world 3 for 7 steps, then world 5 (and batch 4): the rest of
     * the epoch is exactly the samples not yet consumed */
    const uint64_t n = 1000;
    dlk_loader_state s3 = state1(9, 2, 3, 6);
    uint32_t *seen = calloc(n, sizeof *seen);
    for (uint32_t r = 0; r < 3; r++) {
        uint64_t len;
        uint8_t *pad;
        uint64_t *s = stream(n, &s3, r, &len, &pad);
        for (uint64_t i = 0; i < 7 * 6; i++)
            if (!pad[i])
                seen[s[i]]++;
        free(s);
        free(pad);
    }
    dlk_loader_state s5 = s3;
    s5.seg[0].steps = 7;
    s5.nseg = 2;
    s5.seg[1].world = 5;
    s5.seg[1].batch = 4;
    s5.seg[1].steps = 0;
    uint64_t batches = 0;
    int eq = 1;
    for (uint32_t r = 0; r < 5; r++) {
        uint64_t len;
        uint8_t *pad;
        uint64_t *s = stream(n, &s5, r, &len, &pad);
        if (r == 0)
            batches = len / 4;
        eq &= len / 4 == batches;
        for (uint64_t i = 0; i < len; i++)
            if (!pad[i])
                seen[s[i]]++;
        free(s);
        free(pad);
    }
    int once = 1;
    for (uint64_t i = 0; i < n; i++)
        once &= seen[i] == 1;
    UNIT_CHECK("resume with another world and batch size: every sample once",
               once);
    UNIT_CHECK("resume: equal batches on the new ranks", eq);
    free(seen);

    /* resume with the same layout reproduces the same stream */
    dlk_loader_state r1 = state1(9, 2, 3, 6);
    uint64_t l1, l2;
    uint64_t *x1 = stream(n, &r1, 1, &l1, NULL);
    r1.seg[0].steps = 11; /* the loader skips steps; the plan is the same */
    uint64_t *x2 = stream(n, &r1, 1, &l2, NULL);
    UNIT_CHECK("resume with the same layout: the same plan",
               l1 == l2 && !memcmp(x1, x2, l1 * 8));
    free(x1);
    free(x2);
}

/* ---- end to end on the CPU ----------------------------------------- */

static char dir[256];

static int make_dataset(uint64_t n)
{
    snprintf(dir, sizeof dir, "/tmp/dlk-test-loader-%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return -1;
    dlk_tensor_spec s[3];
    if (dlk_tensor_spec_parse("images:u8:8x8x3", &s[0], NULL) ||
        dlk_tensor_spec_parse("labels:i64", &s[1], NULL) ||
        dlk_tensor_spec_parse("boxes:u16:?x2:zstd", &s[2], NULL))
        return -1;
    s[0].chunk_bytes = 8 * 8 * 3 * 10; /* 10 images a chunk */
    s[1].chunk_bytes = 8 * 64;
    s[2].chunk_bytes = 300;
    dlk_dataset *ds;
    if (dlk_dataset_create(dir, s, 3, &ds, NULL))
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t img[192];
        for (int k = 0; k < 192; k++)
            img[k] = (uint8_t)(i * 7 + k);
        int64_t ishape[3] = {8, 8, 3}, bshape[2] = {(int64_t)(i % 4 + 1), 2};
        int64_t label = (int64_t)i;
        uint16_t boxes[8];
        for (int k = 0; k < 8; k++)
            boxes[k] = (uint16_t)(i + k);
        if (dlk_append(ds, 0, img, 192, ishape, 3, NULL) ||
            dlk_append(ds, 1, &label, 8, NULL, 0, NULL) ||
            dlk_append(ds, 2, boxes, (size_t)bshape[0] * 4, bshape, 2, NULL))
            return -1;
    }
    return dlk_dataset_close(ds, NULL) ? -1 : 0;
}

/* Read `epochs` epochs from one loader (the next epoch's plan made and
 * read ahead while one ends) into seq[e * cap ...]; lens[e] positions. */
static int read_epochs(dlk_dataset *ds, const dlk_loader_opts *o,
                       const dlk_loader_state *from, int epochs,
                       uint64_t *seq, size_t cap, size_t *lens, int *right)
{
    dlk_loader *l;
    dlk_error err;
    if (dlk_loader_open(ds, o, &l, &err))
        return -1;
    if (from && dlk_loader_restore(l, from, &err)) {
        dlk_loader_close(l);
        return -1;
    }
    const dlk_batch *b;
    for (int e = 0; e < epochs; e++) {
        lens[e] = 0;
        dlk_status rc;
        while ((rc = dlk_loader_next(l, &b, &err)) == DLK_OK && b) {
            const int64_t *labels = b->tensors[1].data;
            const uint8_t *imgs = b->tensors[0].data;
            for (uint32_t i = 0; i < b->size; i++) {
                uint64_t smp = b->indices[i];
                *right &= labels[i] == (int64_t)smp &&
                          imgs[i * 192 + 9] == (uint8_t)(smp * 7 + 9) &&
                          b->epoch == (uint64_t)e + (from ? from->epoch : 0);
                if (lens[e] < cap)
                    seq[(size_t)e * cap + lens[e]++] = smp;
            }
        }
        if (rc) {
            dlk_loader_close(l);
            return -1;
        }
    }
    dlk_loader_close(l);
    return 0;
}

/* Epochs read back to back, with the next one's chunks read ahead, are
 * the epochs a fresh loader reads on its own (same order, same bytes),
 * within a budget of a few chunks and with room to spare. */
static void epochs_ahead(dlk_dataset *ds)
{
    enum { E = 4, CAP = 512 };
    uint64_t *seq = calloc((size_t)E * CAP, sizeof *seq),
             *one = calloc(CAP, sizeof *one);
    size_t lens[E], len1[1];
    const uint64_t limits[2] = {2048, 0};
    for (int k = 0; k < 2 && seq && one; k++) {
        dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
        o.batch_size = 12;
        o.shuffle = 1;
        o.seed = 31;
        o.window_chunks = 3;
        o.io_threads = 4;
        o.memory_limit = limits[k];
        o.tensors = NULL;
        int right = 1, same = 1, differ = 0;
        UNIT_CHECK("read 4 epochs from one loader",
                   read_epochs(ds, &o, NULL, E, seq, CAP, lens, &right) == 0);
        for (int e = 0; e < E; e++) {
            dlk_loader_state st = {0};
            st.seed = o.seed;
            st.epoch = (uint64_t)e;
            st.nseg = 1;
            st.seg[0].world = 1;
            st.seg[0].batch = o.batch_size;
            if (read_epochs(ds, &o, &st, 1, one, CAP, len1, &right)) {
                same = 0;
                continue;
            }
            same &= len1[0] == lens[e] &&
                    memcmp(one, seq + (size_t)e * CAP,
                           lens[e] * sizeof *one) == 0;
            if (e)
                differ |= memcmp(seq + (size_t)(e - 1) * CAP,
                                 seq + (size_t)e * CAP,
                                 lens[e] * sizeof *one) != 0;
        }
        char name[160];
        snprintf(name, sizeof name, "epochs back to back (budget %llu): the "
                 "bytes of the samples named, in the right epoch",
                 (unsigned long long)limits[k]);
        UNIT_CHECK(name, right);
        snprintf(name, sizeof name, "epochs back to back (budget %llu): each "
                 "as a fresh loader reads it, each in a new order",
                 (unsigned long long)limits[k]);
        UNIT_CHECK(name, same && differ);
        /* told it reads 2 epochs, a third still works (nothing ahead) */
        o.epochs = 2;
        right = 1;
        UNIT_CHECK("a loader told of 2 epochs reads a third as well",
                   read_epochs(ds, &o, NULL, 3, seq, CAP, lens, &right) ==
                           0 && right && lens[2] == lens[0]);
    }
    free(seq);
    free(one);
}

static void test_loader_cpu(void)
{
    const uint64_t n = 253;
    if (make_dataset(n)) {
        UNIT_CHECK("make a dataset", 0);
        return;
    }
    dlk_dataset *ds;
    dlk_error err;
    UNIT_CHECK("open", dlk_dataset_open(dir, NULL, &ds, &err) == DLK_OK);
    uint32_t *seen = calloc(n, sizeof *seen);
    int right = 1, equal_batches = 1, sums = 1, threads_given = 1;
    uint64_t batches0 = 0;
    for (uint32_t r = 0; r < 3; r++) {
        dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
        o.batch_size = 16;
        o.shuffle = 1;
        o.seed = 5;
        o.window_chunks = 2;
        o.rank = r;
        o.world_size = 3;
        o.io_threads = 3;
        o.check = 1;
        o.memory_limit = 4096; /* tiny: exercises the budget */
        dlk_loader *l;
        if (dlk_loader_open(ds, &o, &l, &err)) {
            UNIT_CHECK(err.msg, 0);
            break;
        }
        const dlk_batch *b;
        uint64_t nb = 0;
        size_t m0 = 9, m1 = 9;
        if (r == 0)
            UNIT_CHECK("mark the start", dlk_loader_mark(l, &m0, &err) == 0);
        while (dlk_loader_next(l, &b, &err) == DLK_OK && b) {
            nb++;
            const int64_t *labels = b->tensors[1].data;
            const uint8_t *imgs = b->tensors[0].data;
            const uint16_t *boxes = b->tensors[2].data;
            for (uint32_t i = 0; i < b->size; i++) {
                uint64_t s = b->indices[i];
                right &= labels[i] == (int64_t)s;
                right &= imgs[i * 192 + 5] == (uint8_t)(s * 7 + 5);
                uint64_t off = b->tensors[2].offsets[i];
                right &= b->tensors[2].shapes[i * 2] == (int64_t)(s % 4 + 1);
                right &= boxes[off / 2] == (uint16_t)s;
                if (!b->pad[i])
                    seen[s]++;
            }
            dlk_loader_step(l, 0, &err);
        }
        if (r == 0) {
            batches0 = nb;
            double sec = -1, busy = -1;
            UNIT_CHECK("mark the end", dlk_loader_mark(l, &m1, &err) == 0);
            UNIT_CHECK("marks are numbered in order", m0 == 0 && m1 == 1);
            UNIT_CHECK("a span between marks: time passed, busy within it",
                       dlk_loader_span(l, m0, m1, &sec, &busy, &err) == 0 &&
                           sec > 0 && busy > 0 && busy <= sec);
            UNIT_CHECK("a span backwards is refused",
                       dlk_loader_span(l, m1, m0, &sec, &busy, &err) ==
                               DLK_EINVAL && err.msg[0]);
            UNIT_CHECK("a span to a mark not made is refused",
                       dlk_loader_span(l, m0, 7, &sec, &busy, &err) ==
                           DLK_EINVAL);
        }
        equal_batches &= nb == batches0 && nb == dlk_loader_batches(l) + 0 * nb;
        dlk_loader_stats ls = DLK_LOADER_STATS_INIT;
        dlk_loader_stats_get(l, &ls);
        threads_given &= ls.io_threads == 3;
        uint64_t dev, host;
        dlk_loader_checksums(l, &dev, &host);
        sums &= dev == host && dev != 0;
        dlk_loader_close(l);
    }
    int once = 1;
    for (uint64_t i = 0; i < n; i++)
        once &= seen[i] == 1;
    UNIT_CHECK("cpu loader: batches hold the bytes of the samples they name",
               right);
    UNIT_CHECK("cpu loader: 3 ranks see every sample once", once);
    UNIT_CHECK("cpu loader: device and host checksums agree", sums);
    UNIT_CHECK("cpu loader: the same number of batches on every rank",
               equal_batches);
    UNIT_CHECK("cpu loader: stats report the I/O threads asked for",
               threads_given);

    /* stop mid-epoch, save the state, resume in a new loader with 2 ranks */
    memset(seen, 0, n * sizeof *seen);
    dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
    o.batch_size = 10;
    o.shuffle = 1;
    o.seed = 77;
    o.world_size = 1;
    dlk_loader *l;
    const dlk_batch *b;
    dlk_loader_open(ds, &o, &l, &err);
    dlk_loader_stats ls = DLK_LOADER_STATS_INIT;
    dlk_loader_stats_get(l, &ls);
    int ncpu = dlk_cpu_count();
    UNIT_CHECK("cpu loader: by default an I/O thread a core, at most 32",
               ls.io_threads == (uint32_t)(ncpu > 32 ? 32 : ncpu));
    for (int k = 0; k < 9 && dlk_loader_next(l, &b, &err) == DLK_OK && b; k++)
        for (uint32_t i = 0; i < b->size; i++)
            seen[b->indices[i]] += !b->pad[i];
    dlk_loader_state st;
    dlk_loader_state_get(l, &st);
    char *js = dlk_loader_state_json(&st);
    dlk_loader_close(l);
    dlk_loader_state back;
    UNIT_CHECK("state round-trips through JSON",
               js && dlk_loader_state_parse(js, &back, &err) == DLK_OK &&
                   back.seg[0].steps == 9 && back.seed == 77);
    free(js);
    for (uint32_t r = 0; r < 2; r++) {
        dlk_loader_opts o2 = o;
        o2.world_size = 2;
        o2.rank = r;
        o2.batch_size = 7;
        /* rank 0 restores after its open, rank 1 starts from the state */
        o2.start = r == 1 ? &back : NULL;
        if (dlk_loader_open(ds, &o2, &l, &err)) {
            UNIT_CHECK(err.msg, 0);
            break;
        }
        if (r == 0 && dlk_loader_restore(l, &back, &err)) {
            UNIT_CHECK(err.msg, 0);
            dlk_loader_close(l);
            break;
        }
        while (dlk_loader_next(l, &b, &err) == DLK_OK && b)
            for (uint32_t i = 0; i < b->size; i++)
                seen[b->indices[i]] += !b->pad[i];
        dlk_loader_close(l);
    }
    once = 1;
    for (uint64_t i = 0; i < n; i++)
        once &= seen[i] == 1;
    UNIT_CHECK("resumed mid-epoch on 2 ranks (restored, and from "
               "opts.start): the epoch completes, each sample once", once);

    /* a start of another seed is refused at open, naming both */
    dlk_loader_opts o3 = o;
    o3.seed = 78;
    o3.start = &back;
    UNIT_CHECK("opts.start of another seed: DLK_EINVAL naming the seeds",
               dlk_loader_open(ds, &o3, &l, &err) == DLK_EINVAL &&
                   strstr(err.msg, "77") && strstr(err.msg, "78"));

    /* of two bad options the first checked is the one named */
    dlk_loader_opts o4 = o;
    o4.rank = 1;
    o4.on_bad = 7;
    UNIT_CHECK("a rank past the world and a bad on_bad: the rank is named",
               dlk_loader_open(ds, &o4, &l, &err) == DLK_EINVAL &&
                   strstr(err.msg, "rank 1") && !strstr(err.msg, "on_bad"));
    o4.rank = 0;
    UNIT_CHECK("a bad on_bad alone is named",
               dlk_loader_open(ds, &o4, &l, &err) == DLK_EINVAL &&
                   strstr(err.msg, "on_bad 7"));

    /* the first epoch is read from the open on, before any batch is
     * asked for: the time a program spends before it fills the window */
    o3.start = NULL;
    int early = 0;
    if (dlk_loader_open(ds, &o3, &l, &err) == DLK_OK) {
        for (int k = 0; k < 500 && !early; k++) {
            dlk_loader_stats_get(l, &ls);
            early = ls.chunks_loaded > 0;
            if (!early)
                usleep(10000);
        }
        dlk_loader_close(l);
    }
    UNIT_CHECK("chunks are loaded after dlk_loader_open, before the first "
               "dlk_loader_next", early);

    epochs_ahead(ds);

    dlk_loader_opts bad = DLK_LOADER_OPTS_INIT;
    bad.device = "cuda:0";
    char why[128];
    if (!dlk_cuda_available(why, sizeof why)) {
        UNIT_CHECK("cuda:0 without a GPU is a clear error",
                   dlk_loader_open(ds, &bad, &l, &err) == DLK_EGPU &&
                       err.msg[0]);
    } else {
        UNIT_SKIP("cuda:0 without a GPU", "a GPU is present");
    }
    bad.device = "auto";
    UNIT_CHECK("auto falls back to a working device",
               dlk_loader_open(ds, &bad, &l, &err) == DLK_OK);
    dlk_loader_close(l);
    free(seen);
    dlk_dataset_free(ds);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

/* dlk_cpu_count follows the affinity mask (taskset, cpusets, Slurm): the
 * default decode and I/O thread counts come from it. */
static void test_cpu_count(void)
{
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0) {
        UNIT_SKIP("cpu count follows the affinity mask", "no affinity mask");
        return;
    }
    UNIT_CHECK("cpu count is the mask's", dlk_cpu_count() == CPU_COUNT(&all));
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        UNIT_SKIP("cpu count follows the affinity mask", "cannot set it");
        return;
    }
    UNIT_CHECK("cpu count is 1 on one cpu", dlk_cpu_count() == 1);
    sched_setaffinity(0, sizeof all, &all);
    UNIT_CHECK("cpu count back to the mask's",
               dlk_cpu_count() == CPU_COUNT(&all));
}

/* The timeline keeps a bounded number of buckets however many batches:
 * 200 epochs of batches of one sample (50600 batches) merge into at most
 * DLK_TRACE_BUCKETS buckets that still cover every batch once, in order. */
static void test_loader_trace(void)
{
    const uint64_t n = 253, epochs = 200;
    dlk_dataset *ds;
    dlk_error err;
    if (make_dataset(n) || dlk_dataset_open(dir, NULL, &ds, &err)) {
        UNIT_CHECK("a dataset for the timeline", 0);
        return;
    }
    dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
    o.batch_size = 1;
    o.io_threads = 1;
    o.epochs = epochs;
    dlk_loader *l;
    if (dlk_loader_open(ds, &o, &l, &err)) {
        UNIT_CHECK(err.msg, 0);
        dlk_dataset_free(ds);
        return;
    }
    const dlk_batch *b;
    uint64_t batches = 0;
    size_t most = 0;
    for (uint64_t e = 0; e < epochs; e++)
        while (dlk_loader_next(l, &b, &err) == DLK_OK && b) {
            batches++;
            size_t k = dlk_loader_trace(l, NULL, 0);
            if (k > most)
                most = k;
        }
    UNIT_CHECK("every batch delivered", batches == n * epochs);
    UNIT_CHECK("never more than DLK_TRACE_BUCKETS buckets",
               most == DLK_TRACE_BUCKETS);
    dlk_trace_bucket *t = calloc(DLK_TRACE_BUCKETS, sizeof *t);
    size_t k = t ? dlk_loader_trace(l, t, DLK_TRACE_BUCKETS) : 0;
    UNIT_CHECK("at least half of them in use after merging",
               k >= DLK_TRACE_BUCKETS / 2 && k <= DLK_TRACE_BUCKETS);
    uint64_t next = 0, samples = 0;
    int ordered = 1;
    for (size_t i = 0; i < k; i++) {
        ordered &= t[i].first_batch == next && t[i].t0 <= t[i].t1 &&
                   t[i].wait_s <= t[i].next_s + 1e-9 &&
                   (i == 0 || (t[i].t0 >= t[i - 1].t1 - 1e-9 &&
                               t[i].epoch >= t[i - 1].last_epoch));
        next += t[i].batches;
        samples += t[i].samples;
    }
    UNIT_CHECK("the buckets cover every batch once, in order", ordered &&
               next == batches && samples == batches);
    UNIT_CHECK("from the first epoch to the last",
               k && t[0].epoch == 0 && t[k - 1].last_epoch == epochs - 1);
    free(t);
    dlk_loader_close(l);
    dlk_dataset_free(ds);
}

/* The batch checksum's fold, summed in four lanes of 16 bytes (8 without
 * SSE2), against one word at a time: every length (tails of 1-7 bytes,
 * runs under and over 64 bytes) and alignment. */
static void test_fold(void)
{
    uint8_t b[1100];
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (uint8_t)(i * 131 + 7);
    bool same = true;
    for (size_t off = 0; off < 8 && same; off++)
        for (size_t n = 0; n + off <= sizeof b && n < 1090; n++) {
            uint64_t want = 0, w;
            size_t i = 0;
            for (; i + 8 <= n; i += 8) {
                memcpy(&w, b + off + i, 8);
                want += w;
            }
            if (i < n) {
                w = 0;
                memcpy(&w, b + off + i, n - i);
                want += w;
            }
            if (Dlk_fold64(b + off, n) != want) {
                same = false;
                break;
            }
        }
    UNIT_CHECK("the fold of every length and alignment is the words' sum",
               same);
}

int main(void)
{
    test_cpu_count();
    test_fold();
    test_order();
    test_loader_cpu();
    test_loader_trace();
    return unit_done();
}
