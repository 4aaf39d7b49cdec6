/* test_fill.c - small appends do not fragment a dataset
 * (lib/dataset/compact.c): 300 appends of one row each, each through its
 * own open and close, leave every chunk full (the next sample would not
 * have fit) but a short tail of ever smaller ones, for a fixed shape, a
 * variable shape with zstd and a scalar; appends of one row after a large
 * last chunk store what they add, not a copy of that chunk each; every commit made along the way still reads every
 * sample as it was; verify --all --deep finds nothing wrong, before and
 * after gc.  A writer that loses the race for the head fails with a
 * conflict and changes nothing.  dlk_compact turns a dataset of one-row
 * chunks (appended without filling) into full chunks with the same
 * samples, and a second compaction rewrites nothing. */
#include "dataset/dataset.h"
#include "unit.h"

#include <unistd.h>

#define ROWS 300
#define FRAG 120 /* rows of the dataset to compact */
#define EVERY 25 /* rows between commits */
#define NT 3
#define TARGET 256

static const char *const specs[NT] = {"fix:u8:2x2x4", "var:u16:?:zstd",
                                      "sc:i32"};

/* Row i's sample of tensor t into p; its size, and its shape in shape. */
static size_t sample(int t, int i, uint8_t *p, int64_t *shape, int *nd)
{
    size_t n;
    if (t == 0) {
        shape[0] = 2, shape[1] = 2, shape[2] = 4, *nd = 3, n = 16;
    } else if (t == 1) {
        shape[0] = 1 + i % 5, *nd = 1, n = (size_t)shape[0] * 2;
    } else {
        *nd = 0, n = 4;
    }
    for (size_t k = 0; k < n; k++)
        p[k] = (uint8_t)(k * 13 + (size_t)i * 7 + (size_t)t);
    return n;
}

static dlk_dataset *make(const char *root, uint64_t target)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        return NULL;
    dlk_tensor_spec s[NT];
    for (int t = 0; t < NT; t++) {
        if (dlk_tensor_spec_parse(specs[t], &s[t], NULL))
            return NULL;
        s[t].chunk_bytes = target;
    }
    dlk_dataset *ds;
    return dlk_dataset_create(root, s, NT, &ds, NULL) ? NULL : ds;
}

/* Append row i to every tensor; fill false: as before filling (each
 * append's chunk stands alone). */
static int append_row(dlk_dataset *ds, int i, bool fill)
{
    uint8_t p[64];
    int64_t shape[DLK_MAX_NDIM];
    int nd, bad = 0;
    for (int t = 0; t < NT; t++) {
        if (!fill) { /* as if the new chunks began after the last */
            ds->builders[t].tail_seen = true;
            ds->builders[t].new_from = SIZE_MAX;
        }
        size_t n = sample(t, i, p, shape, &nd);
        bad += dlk_append(ds, (size_t)t, p, n, shape, nd, NULL) != DLK_OK;
    }
    return bad;
}

/* Every sample of rows 0..rows-1 reads back as appended. */
static bool reads_back(dlk_dataset *ds, int rows)
{
    uint8_t p[64];
    int64_t shape[DLK_MAX_NDIM];
    int nd;
    for (int t = 0; t < NT; t++) {
        dlk_tensor_info info;
        if (dlk_tensor_info_get(ds, (size_t)t, &info, NULL) ||
            info.samples != (uint64_t)rows)
            return false;
        for (int i = 0; i < rows; i++) {
            size_t n = sample(t, i, p, shape, &nd);
            dlk_sample s;
            if (dlk_read_sample(ds, (size_t)t, (uint64_t)i, &s, NULL))
                return false;
            bool same = s.nbytes == n && memcmp(s.data, p, n) == 0 &&
                        (nd == 0 || s.shape[0] == shape[0]);
            dlk_sample_free(&s);
            if (!same)
                return false;
        }
    }
    return true;
}

/* Every chunk is full (the next sample would not have fit) up to a tail
 * of small ones, each smaller than the one before and at most
 * log2(TARGET / 2) + 2 of them (the smallest sample is 2 bytes); *chunks
 * receives the number of chunks over all tensors. */
static bool packed(dlk_dataset *ds, size_t *chunks)
{
    uint8_t p[64];
    int64_t shape[DLK_MAX_NDIM];
    int nd;
    *chunks = 0;
    for (int t = 0; t < NT; t++) {
        size_t n = dlk_tensor_nchunks(ds, (size_t)t), small = 0;
        uint64_t last_small = 0;
        *chunks += n;
        for (size_t c = 0; c < n; c++) {
            dlk_chunk_ref r, next;
            dlk_tensor_chunk(ds, (size_t)t, c, &r);
            bool full = false;
            if (c + 1 < n) {
                dlk_tensor_chunk(ds, (size_t)t, c + 1, &next);
                size_t sz = sample(t, (int)next.first_sample, p, shape, &nd);
                full = r.raw_bytes + sz > TARGET;
            }
            if (full && small) {
                printf("# tensor %d chunk %zu: full after small ones\n", t, c);
                return false;
            }
            if (!full) {
                if (small && r.raw_bytes >= last_small) {
                    printf("# tensor %d chunk %zu: %llu bytes, not below the "
                           "small one before (%llu)\n", t, c,
                           (unsigned long long)r.raw_bytes,
                           (unsigned long long)last_small);
                    return false;
                }
                small++;
                last_small = r.raw_bytes;
            }
        }
        if (small > 9) {
            printf("# tensor %d: %zu small chunks at the end\n", t, small);
            return false;
        }
    }
    return true;
}

/* Bytes of the chunk objects under root/chunks/. */
static long long chunk_bytes_stored(const char *root)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "du -sb --apparent-size %s/chunks | cut -f1",
             root);
    FILE *f = popen(cmd, "r");
    long long n = -1;
    if (f && fscanf(f, "%lld", &n) != 1)
        n = -1;
    if (f)
        pclose(f);
    return n;
}

static bool verify_all(dlk_dataset *ds, uint64_t *commits)
{
    dlk_verify_opts vo = {.size = sizeof vo, .deep = 1, .all = 1};
    dlk_verify_result vr = DLK_VERIFY_RESULT_INIT;
    dlk_error err;
    if (dlk_verify(ds, &vo, &vr, &err))
        return false;
    *commits = vr.commits_checked;
    return vr.problems == 0;
}

int main(void)
{
    char root[256], root2[256];
    snprintf(root, sizeof root, "/tmp/dlk-test-fill-%d", (int)getpid());
    snprintf(root2, sizeof root2, "/tmp/dlk-test-fill-%d-b", (int)getpid());
    dlk_dataset *ds = make(root, TARGET);
    UNIT_CHECK("create", ds);
    if (!ds)
        return unit_done();
    dlk_dataset_free(ds);

    char ids[ROWS / EVERY][DLK_ID_MAX];
    int ncommits = 0, bad = 0;
    for (int i = 0; i < ROWS; i++) {
        dlk_error err;
        if (dlk_dataset_open(root, NULL, &ds, &err)) {
            bad++;
            break;
        }
        bad += append_row(ds, i, true);
        if ((i + 1) % EVERY == 0) {
            int committed;
            bad += dlk_dataset_flush(ds, NULL) != DLK_OK;
            bad += dlk_commit(ds, "rows", 0, ids[ncommits++], &committed,
                              NULL) != DLK_OK;
        }
        bad += dlk_dataset_close(ds, NULL) != DLK_OK;
    }
    UNIT_CHECK("300 appends of one row, each its own open and close",
               bad == 0);

    UNIT_CHECK("open the head", !dlk_dataset_open(root, NULL, &ds, NULL));
    size_t chunks;
    UNIT_CHECK("full chunks, then a short tail of ever smaller ones",
               packed(ds, &chunks));
    printf("# %zu chunks in all for %d rows of %d tensors\n", chunks, ROWS, NT);
    /* 16 B samples: 16 a chunk; 4 B: 64 a chunk; 2..10 B: about 42 */
    UNIT_CHECK("a handful of chunks, not one per append", chunks <= 40);
    UNIT_CHECK("the head reads every sample back", reads_back(ds, ROWS));
    uint64_t commits = 0;
    UNIT_CHECK("verify --all --deep: no problems", verify_all(ds, &commits));
    UNIT_CHECK("verify --all saw every commit",
               commits == (uint64_t)ncommits);

    bool all = true;
    for (int c = 0; c < ncommits; c++) {
        dlk_dataset *at;
        if (dlk_dataset_open(root, ids[c], &at, NULL)) {
            all = false;
            continue;
        }
        all &= reads_back(at, (c + 1) * EVERY);
        dlk_dataset_free(at);
    }
    UNIT_CHECK("every commit reads its samples as they were", all);

    dlk_gc_opts go = {.size = sizeof go, .grace_seconds = 0};
    dlk_gc_result gr = DLK_GC_RESULT_INIT;
    UNIT_CHECK("gc", !dlk_gc(ds, &go, &gr, NULL));
    printf("# gc removed %llu replaced chunks, kept %llu\n",
           (unsigned long long)gr.removed, (unsigned long long)gr.referenced);
    UNIT_CHECK("gc removed the chunks replaced between commits",
               gr.removed > 0);
    UNIT_CHECK("after gc, verify --all --deep: no problems",
               verify_all(ds, &commits));
    all = true;
    for (int c = 0; c < ncommits; c++) {
        dlk_dataset *at;
        if (dlk_dataset_open(root, ids[c], &at, NULL)) {
            all = false;
            continue;
        }
        all &= reads_back(at, (c + 1) * EVERY);
        dlk_dataset_free(at);
    }
    UNIT_CHECK("after gc, every commit reads as it was", all);
    dlk_dataset_free(ds);

    /* Two writers fill the same last chunk: the second to publish loses
     * the race for the head and changes nothing. */
    dlk_dataset *w1, *w2;
    bad = dlk_dataset_open(root, NULL, &w1, NULL) != DLK_OK;
    bad += dlk_dataset_open(root, NULL, &w2, NULL) != DLK_OK;
    UNIT_CHECK("two writers open the head", bad == 0);
    if (!bad) {
        bad += append_row(w1, ROWS, true);
        bad += append_row(w2, ROWS + 7, true); /* other bytes */
        UNIT_CHECK("both append", bad == 0);
        UNIT_CHECK("the first publishes", !dlk_dataset_flush(w1, NULL));
        dlk_error err;
        dlk_status rc = dlk_dataset_flush(w2, &err);
        if (rc != DLK_ECONFLICT)
            printf("# %d: %s\n", (int)rc, err.msg);
        UNIT_CHECK("the second gets a conflict", rc == DLK_ECONFLICT);
        dlk_dataset_free(w1);
        dlk_dataset_free(w2);
        UNIT_CHECK("open the head again",
                   !dlk_dataset_open(root, NULL, &ds, NULL));
        UNIT_CHECK("the head holds the first writer's row once",
                   reads_back(ds, ROWS + 1) && packed(ds, &chunks));
        dlk_dataset_free(ds);
    }

    /* Compaction of one-row chunks. */
    ds = make(root2, TARGET);
    UNIT_CHECK("create a second dataset", ds);
    if (!ds)
        return unit_done();
    bad = 0;
    for (int i = 0; i < FRAG; i++) {
        bad += append_row(ds, i, false);
        bad += dlk_dataset_flush(ds, NULL) != DLK_OK;
    }
    char id[DLK_ID_MAX];
    int committed;
    bad += dlk_commit(ds, "fragmented", 0, id, &committed, NULL) != DLK_OK;
    UNIT_CHECK("one-row chunks", bad == 0 &&
               dlk_tensor_nchunks(ds, 0) == FRAG &&
               dlk_tensor_nchunks(ds, 1) == FRAG);
    dlk_compact_result cr = DLK_COMPACT_RESULT_INIT;
    dlk_error err;
    UNIT_CHECK("compact", !dlk_compact(ds, NULL, &cr, &err));
    printf("# compact: %llu chunks to %llu, %llu read, %llu written\n",
           (unsigned long long)cr.chunks_before,
           (unsigned long long)cr.chunks_after,
           (unsigned long long)cr.chunks_read,
           (unsigned long long)cr.chunks_written);
    UNIT_CHECK("compact counts", cr.chunks_before == NT * FRAG &&
               cr.chunks_read == NT * FRAG &&
               cr.chunks_after == cr.chunks_written && cr.chunks_after <= 20);
    dlk_dataset_free(ds);
    UNIT_CHECK("reopen", !dlk_dataset_open(root2, NULL, &ds, NULL));
    UNIT_CHECK("compacted: full chunks and a short tail",
               packed(ds, &chunks) && chunks == cr.chunks_after);
    UNIT_CHECK("compacted: the same samples in the same order",
               reads_back(ds, FRAG));
    dlk_dataset *at;
    UNIT_CHECK("the commit before compaction reads as it was",
               !dlk_dataset_open(root2, id, &at, NULL) &&
               reads_back(at, FRAG) && dlk_tensor_nchunks(at, 0) == FRAG);
    dlk_dataset_free(at);
    UNIT_CHECK("verify --all --deep after compaction",
               verify_all(ds, &commits));
    UNIT_CHECK("a second compaction rewrites nothing",
               !dlk_compact(ds, NULL, &cr, NULL) && cr.chunks_written == 0 &&
               cr.chunks_after == chunks);
    dlk_compact_opts co = {.size = sizeof co, .target_bytes = 1024};
    UNIT_CHECK("compact to a larger target",
               !dlk_compact(ds, &co, &cr, NULL) &&
               cr.chunks_after < chunks && reads_back(ds, FRAG));
    dlk_dataset_free(ds);

    /* Small appends cost what they add: a tensor's last chunk just below
     * its 64 KiB target, then 40 appends of one row, each its own open,
     * flush and commit.  Joining the last chunk whatever its size
     * rewrote it each time (40 x about 90 KB of the three tensors), and
     * every commit kept each copy. */
    ds = make(root2, 65536);
    UNIT_CHECK("create a third dataset", ds);
    if (!ds)
        return unit_done();
    bad = 0;
    for (int i = 0; i < 4000; i++) /* 64,000 B of the fixed shape */
        bad += append_row(ds, i, true);
    bad += dlk_dataset_close(ds, NULL) != DLK_OK;
    long long before = chunk_bytes_stored(root2);
    for (int i = 4000; i < 4040; i++) {
        int done;
        char cid[DLK_ID_MAX];
        if (dlk_dataset_open(root2, NULL, &ds, NULL)) {
            bad++;
            break;
        }
        bad += append_row(ds, i, true);
        bad += dlk_dataset_flush(ds, NULL) != DLK_OK;
        bad += dlk_commit(ds, "row", 0, cid, &done, NULL) != DLK_OK;
        bad += dlk_dataset_close(ds, NULL) != DLK_OK;
    }
    long long after = chunk_bytes_stored(root2);
    printf("# 40 one-row appends: chunk objects %lld -> %lld bytes\n", before,
           after);
    UNIT_CHECK("40 one-row appends and commits", bad == 0 && before > 0);
    /* 40 rows are 1,120 B of samples; the chunks they make, with headers
     * and indexes, and the joins of small ones, stay far below the
     * 3.6 MB that rewriting the last chunks took */
    UNIT_CHECK("the appends stored under 200 KB of chunks",
               after - before < 200000);
    UNIT_CHECK("open after the appends",
               !dlk_dataset_open(root2, NULL, &ds, NULL));
    UNIT_CHECK("they read back", reads_back(ds, 4040));
    dlk_dataset_free(ds);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", root, root2);
    if (system(cmd) != 0)
        return 1;
    return unit_done();
}
