/* test_seg_writer.c - a writer's open without the segments
 * (Dlk_dataset_open_writer): an append to a dataset of 2,500 chunks (two
 * segments and a tail) publishes the same chunk list as through an open
 * that reads every segment, whether it touches only the tail (full
 * chunks: the list stays pending, no segment read) or joins small chunks
 * back past the tail's start (the segments are then read and the join
 * made on the whole list); every row reads back. */
#include "dataset/dataset.h"
#include "unit.h"

#include <unistd.h>

#define ROWS 2500

static int32_t value(int i) { return i * 7 + 3; }

/* A dataset of ROWS rows of i32, each row its own chunk, chunks sealed
 * at `target` bytes (4: every chunk full; 64: every chunk small). */
static bool make(const char *root, uint64_t target)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        return false;
    dlk_tensor_spec s;
    if (dlk_tensor_spec_parse("x:i32", &s, NULL))
        return false;
    s.chunk_bytes = target;
    dlk_dataset *ds;
    if (dlk_dataset_create(root, &s, 1, &ds, NULL))
        return false;
    int bad = 0;
    for (int i = 0; i < ROWS && !bad; i++) {
        int32_t v = value(i);
        /* as if the new chunks began after the last: no joining */
        ds->builders[0].tail_seen = true;
        ds->builders[0].new_from = SIZE_MAX;
        bad += dlk_append(ds, 0, &v, 4, NULL, 0, NULL) != DLK_OK;
        bad += Dlk_dataset_seal(ds, NULL) != DLK_OK;
    }
    return dlk_dataset_close(ds, NULL) == DLK_OK && !bad;
}

static bool copy(const char *from, const char *to)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s %s", to, from, to);
    return system(cmd) == 0;
}

/* One more row through ds; *pending receives whether the list was still
 * pending after the flush. */
static bool append_one(dlk_dataset *ds, bool *pending)
{
    int32_t v = value(ROWS);
    bool ok = dlk_append(ds, 0, &v, 4, NULL, 0, NULL) == DLK_OK &&
              dlk_dataset_flush(ds, NULL) == DLK_OK;
    *pending = ds->m.tensors[0].segs_pending;
    return dlk_dataset_close(ds, NULL) == DLK_OK && ok;
}

/* The two datasets' chunk lists are the same, every row reads back. */
static bool same_lists(const char *a, const char *b, size_t *chunks)
{
    dlk_dataset *x, *y;
    if (dlk_dataset_open(a, NULL, &x, NULL))
        return false;
    if (dlk_dataset_open(b, NULL, &y, NULL)) {
        dlk_dataset_free(x);
        return false;
    }
    const Dlk_tensor *s = &x->m.tensors[0], *t = &y->m.tensors[0];
    bool ok = s->nchunks == t->nchunks && s->samples == ROWS + 1 &&
              t->samples == ROWS + 1 && s->nsegs == t->nsegs;
    for (size_t i = 0; ok && i < s->nchunks; i++)
        ok = strcmp(s->chunks[i].key, t->chunks[i].key) == 0 &&
             s->chunks[i].samples == t->chunks[i].samples &&
             s->chunks[i].first == t->chunks[i].first;
    for (size_t k = 0; ok && k < s->nsegs; k++)
        ok = strcmp(s->segs[k].key, t->segs[k].key) == 0;
    for (int i = 0; ok && i <= ROWS; i++) {
        dlk_sample v;
        ok = dlk_read_sample(x, 0, (uint64_t)i, &v, NULL) == DLK_OK &&
             v.nbytes == 4 && *(int32_t *)v.data == value(i);
        if (ok)
            dlk_sample_free(&v);
    }
    *chunks = s->nchunks;
    dlk_dataset_free(x);
    dlk_dataset_free(y);
    return ok;
}

static void one_case(const char *name, uint64_t target, bool *pend_w,
                     size_t *chunks, bool *same, bool *opened_pending)
{
    char base[128], a[160], b[160];
    snprintf(base, sizeof base, "/tmp/dlk-seg-writer-%d-%s", (int)getpid(),
             name);
    snprintf(a, sizeof a, "%s-a", base);
    snprintf(b, sizeof b, "%s-b", base);
    *same = false;
    if (!make(base, target) || !copy(base, a) || !copy(base, b))
        return;
    dlk_dataset *w, *r;
    bool pend_r;
    if (Dlk_dataset_open_writer(a, NULL, &w, NULL))
        return;
    *opened_pending = w->m.tensors[0].segs_pending &&
                      Dlk_tensor_base(&w->m.tensors[0]) == 2048 &&
                      w->m.tensors[0].nchunks == ROWS - 2048 &&
                      w->m.tensors[0].samples == ROWS &&
                      dlk_tensor_nchunks(w, 0) == ROWS;
    if (!append_one(w, pend_w) ||
        dlk_dataset_open(b, NULL, &r, NULL) || !append_one(r, &pend_r))
        return;
    *same = same_lists(a, b, chunks);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", base, a, b);
    if (system(cmd) != 0)
        *same = false;
}

int main(void)
{
    bool pend, same, opened = false;
    size_t chunks = 0;
    one_case("full", 4, &pend, &chunks, &same, &opened);
    UNIT_CHECK("a writer's open of 2,500 chunks keeps two segments pending "
               "and the tail of 452", opened);
    UNIT_CHECK("full chunks: an append reads no segment and publishes the "
               "list a whole open publishes", same && pend &&
               chunks == ROWS + 1);
    opened = false;
    one_case("small", 64, &pend, &chunks, &same, &opened);
    UNIT_CHECK("small chunks: the join reaches past the tail, the segments "
               "are read, the list is the whole open's", same && !pend &&
               opened && chunks < ROWS / 2);
    return unit_done();
}
