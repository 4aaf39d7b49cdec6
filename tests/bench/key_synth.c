/* key_synth.c - N keyed rows appended fast through the library to a
 * dataset made by `dlk create DATASET from-dir DIR` of text files (its
 * tensors text, key and key_version), then the key index its merge would
 * write: a dataset of millions of ingested rows in seconds, for
 * tests/bench/key_incr.sh.  It calls only what every build since the
 * key index has (ing_keyidx_update), so that the same source builds
 * against the build before and the one after a change of the index.
 *
 *   key_synth DATASET N    (keys s3://bench/base/<i>.txt, versions e<i>)
 */
#include "ingest/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: key_synth DATASET N\n");
        return 2;
    }
    long n = atol(argv[2]);
    dlk_dataset *ds;
    dlk_error e;
    if (dlk_dataset_open(argv[1], NULL, &ds, &e)) {
        fprintf(stderr, "key_synth: %s\n", e.msg);
        return 1;
    }
    int tt = dlk_dataset_find(ds, "text"), tk = dlk_dataset_find(ds, "key"),
        tv = dlk_dataset_find(ds, "key_version");
    if (tt < 0 || tk < 0 || tv < 0) {
        fprintf(stderr, "key_synth: no text, key and key_version tensors\n");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        char t[32], k[64], v[32];
        int64_t tn = snprintf(t, sizeof t, "row %ld\n", i);
        int64_t kn = snprintf(k, sizeof k, "s3://bench/base/%09ld.txt", i);
        int64_t vn = snprintf(v, sizeof v, "e%ld", i);
        if (dlk_append(ds, (size_t)tt, t, (size_t)tn, &tn, 1, &e) ||
            dlk_append(ds, (size_t)tk, k, (size_t)kn, &kn, 1, &e) ||
            dlk_append(ds, (size_t)tv, v, (size_t)vn, &vn, 1, &e)) {
            fprintf(stderr, "key_synth: %s\n", e.msg);
            return 1;
        }
    }
    if (dlk_dataset_flush(ds, &e) || ing_keyidx_update(ds, &e) ||
        Dlk_write_head(ds, &e)) {
        fprintf(stderr, "key_synth: %s\n", e.msg);
        return 1;
    }
    dlk_dataset_free(ds);
    return 0;
}
