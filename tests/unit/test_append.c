/* test_append.c - appending samples (lib/dataset/append.c): a large
 * sample handed over whole (Dlk_append_take) makes the same chunk objects,
 * byte for byte (their content-hash names), as the same samples copied,
 * also when small samples come between large ones; the caller gets a
 * buffer back to reuse; compressed tensors and small samples are copied
 * and the caller keeps its buffer. */
#include "dataset/dataset.h"
#include "unit.h"

#include <unistd.h>

#define N 40

static char root[2][256];

/* Sample i of tensor t: images are large (192 KiB), boxes small or
 * large by turns. */
static size_t sample(int t, int i, uint8_t *p, int64_t *shape)
{
    size_t n;
    if (t == 0) {
        shape[0] = 256;
        shape[1] = 256;
        shape[2] = 3;
        n = 256 * 256 * 3;
    } else {
        shape[0] = i % 3 == 0 ? 40000 : i % 5 + 1; /* 160 KB or a few */
        shape[1] = 2;
        n = (size_t)shape[0] * 2 * 2;
    }
    for (size_t k = 0; k < n; k++)
        p[k] = (uint8_t)(k * 31 + (size_t)i * 7 + (size_t)t);
    return n;
}

static dlk_dataset *make(int which)
{
    snprintf(root[which], sizeof root[which], "/tmp/dlk-test-append-%d-%d",
             (int)getpid(), which);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root[which]);
    if (system(cmd) != 0)
        return NULL;
    dlk_tensor_spec s[3];
    if (dlk_tensor_spec_parse("images:u8:256x256x3", &s[0], NULL) ||
        dlk_tensor_spec_parse("boxes:u16:?x2", &s[1], NULL) ||
        dlk_tensor_spec_parse("packed:u8:256x256x3:zstd", &s[2], NULL))
        return NULL;
    s[0].chunk_bytes = 1 << 20; /* five images a chunk, and a part */
    s[1].chunk_bytes = 1 << 20;
    s[2].chunk_bytes = 1 << 20;
    dlk_dataset *ds;
    return dlk_dataset_create(root[which], s, 3, &ds, NULL) ? NULL : ds;
}

int main(void)
{
    dlk_dataset *a = make(0), *b = make(1);
    UNIT_CHECK("two datasets", a && b);
    if (!a || !b)
        return unit_done();
    int64_t shape[3];
    Dlk_buf buf;
    Dlk_buf_init(&buf);
    int copied = 0, given = 0, kept = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        for (int t = 0; t < 3; t++) {
            if (Dlk_buf_reserve(&buf, 256 * 256 * 3, NULL))
                return 1;
            int src = t == 2 ? 0 : t; /* packed: the images' samples */
            buf.len = sample(src, i, buf.data, shape);
            int nd = src == 0 ? 3 : 2;
            bad += dlk_append(a, (size_t)t, buf.data, buf.len, shape, nd,
                              NULL) != DLK_OK;
            uint8_t *before = buf.data;
            size_t len = buf.len;
            bad += Dlk_append_take(b, (size_t)t, &buf, shape, nd, NULL) !=
                   DLK_OK;
            if (buf.data != before || buf.len != len) {
                given += buf.len == 0;
            } else {
                kept++;
                copied += t == 2 || len < DLK_TAKE_MIN;
            }
        }
    }
    Dlk_buf_free(&buf);
    UNIT_CHECK("every append succeeds", bad == 0);
    UNIT_CHECK("large samples of uncompressed tensors are taken, the caller "
               "gets an empty buffer back", given > N);
    UNIT_CHECK("compressed and small samples are copied, the caller keeps "
               "its buffer", kept == copied && kept > N);
    bool flushed = !dlk_dataset_flush(a, NULL) && !dlk_dataset_flush(b, NULL);
    UNIT_CHECK("both flush", flushed);
    for (size_t t = 0; flushed && t < 3; t++) {
        const Dlk_tensor *ta = &a->m.tensors[t], *tb = &b->m.tensors[t];
        bool same = ta->nchunks == tb->nchunks && ta->nchunks > 1 &&
                    ta->samples == N && tb->samples == N;
        for (size_t c = 0; same && c < ta->nchunks; c++)
            same = strcmp(ta->chunks[c].key, tb->chunks[c].key) == 0 &&
                   ta->chunks[c].samples == tb->chunks[c].samples;
        char name[200];
        snprintf(name, sizeof name, "tensor '%s': the same chunks, byte for "
                 "byte (%zu)", ta->spec.name, ta->nchunks);
        UNIT_CHECK(name, same);
    }
    /* what was taken reads back as it was appended */
    Dlk_buf want;
    Dlk_buf_init(&want);
    bool back = flushed;
    for (int i = 0; back && i < N; i++) {
        if (Dlk_buf_reserve(&want, 256 * 256 * 3, NULL))
            return 1;
        for (int t = 0; back && t < 2; t++) {
            want.len = sample(t, i, want.data, shape);
            dlk_sample got;
            back = dlk_read_sample(b, (size_t)t, (uint64_t)i, &got, NULL) ==
                   DLK_OK;
            back = back && got.nbytes == want.len &&
                   memcmp(got.data, want.data, got.nbytes) == 0;
            if (back || got.data)
                dlk_sample_free(&got);
        }
    }
    UNIT_CHECK("taken samples read back equal", back);
    Dlk_buf_free(&want);
    dlk_dataset_free(a);
    dlk_dataset_free(b);
    for (int w = 0; w < 2; w++) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", root[w]);
        if (system(cmd) != 0)
            return 1;
    }
    return unit_done();
}
