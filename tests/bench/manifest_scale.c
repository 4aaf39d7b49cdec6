/* manifest_scale.c - a head of N chunk entries (default 10,000,000) and
 * what it costs: one real chunk named N times (a list MAY name a chunk
 * more than once, formats/dlk-v1.md 2.5), so that no N objects need be
 * written.  It prints the seconds to publish the head (its segments cut
 * and written), the head's and segments' bytes, the seconds and peak RSS
 * of an open that reads it back whole, and the size of a commit of it
 * and of one after one more entry.
 *
 *   build/tests/manifest_scale DIR [N]   (DIR must not exist)
 */
#include "dataset/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long rss_kib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

static long long file_size(const char *dir, const char *key)
{
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, key);
    return stat(p, &st) == 0 ? (long long)st.st_size : -1;
}

static int die(const dlk_error *err)
{
    fprintf(stderr, "manifest_scale: %s\n", err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: manifest_scale DIR [N]\n");
        return 2;
    }
    const char *dir = argv[1];
    size_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000;
    dlk_error err;
    dlk_tensor_spec s;
    dlk_dataset *ds;
    if (dlk_tensor_spec_parse("x:i32", &s, &err))
        return die(&err);
    s.chunk_bytes = 4;
    if (dlk_dataset_create(dir, &s, 1, &ds, &err))
        return die(&err);
    int32_t v = 7;
    if (dlk_append(ds, 0, &v, sizeof v, NULL, 0, &err) ||
        dlk_dataset_flush(ds, &err))
        return die(&err);
    Dlk_tensor *t = &ds->m.tensors[0];
    Dlk_chunk_entry e = t->chunks[0];
    for (size_t i = 1; i < n; i++)
        if (Dlk_tensor_add_chunk(t, &e, NULL, NULL, &err))
            return die(&err);
    ds->dirty = true;
    double t0 = now();
    if (dlk_dataset_flush(ds, &err))
        return die(&err);
    double pub = now() - t0;
    size_t nsegs = t->nsegs;
    unsigned long long seg_bytes = nsegs ? t->segs[0].bytes : 0;
    dlk_dataset_free(ds);
    long rss0 = rss_kib();
    printf("%zu entries: publish %.2f s; head %lld bytes; %zu segments of "
           "%llu bytes\n", n, pub, file_size(dir, DLK_KEY_HEAD), nsegs,
           seg_bytes);
    t0 = now();
    if (dlk_dataset_open(dir, NULL, &ds, &err))
        return die(&err);
    double open_s = now() - t0;
    printf("open (every segment read and checked): %.2f s, %zu entries, "
           "peak RSS %ld MiB (%ld before)\n", open_s,
           ds->m.tensors[0].nchunks, rss_kib() >> 10, rss0 >> 10);
    char id[DLK_ID_MAX], key[128];
    int made;
    t0 = now();
    if (dlk_commit(ds, "all", DLK_COMMIT_UNSAFE_SINGLE_WRITER, id, &made,
                   &err))
        return die(&err);
    snprintf(key, sizeof key, DLK_KEY_COMMITS "%s.json", id);
    printf("commit: %.2f s, %lld bytes\n", now() - t0, file_size(dir, key));
    if (dlk_append(ds, 0, &v, sizeof v, NULL, 0, &err))
        return die(&err);
    t0 = now();
    if (dlk_commit(ds, "one more", DLK_COMMIT_UNSAFE_SINGLE_WRITER, id,
                   &made, &err))
        return die(&err);
    snprintf(key, sizeof key, DLK_KEY_COMMITS "%s.json", id);
    printf("a commit after one more entry: %.2f s (the publish included), "
           "%lld bytes\n", now() - t0, file_size(dir, key));
    dlk_dataset_free(ds);
    return 0;
}
