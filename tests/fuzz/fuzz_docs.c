/* fuzz_docs.c - libFuzzer target: the input is read as the dataset's
 * description (dlk.json) and as a commit document.  Either parses or
 * fails with a status and a message; what parses is bounded: an id that
 * fits, a manifest that dumps and parses again to the same tensors. */
#include "format/manifest.h"
#include "format/docs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (%s:%d)\n", \
                                         #c, __FILE__, __LINE__); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *json = (const char *)data;
    dlk_error err = {0};
    char id[64];
    dlk_status rc = Dlk_dataset_doc_parse(json, size, "dlk.json", id,
                                          sizeof id, &err);
    if (rc)
        CHECK(err.code == rc && err.msg[0]);
    else
        CHECK(id[0] && strlen(id) < sizeof id);

    Dlk_manifest m;
    Dlk_commit_meta meta;
    memset(&err, 0, sizeof err);
    rc = Dlk_commit_parse(json, size, "commits/x.json", &m, &meta, &err);
    if (rc) {
        CHECK(err.code == rc && err.msg[0]);
        CHECK(!meta.time && !meta.message); /* nothing left to free */
        return 0;
    }
    CHECK(meta.time && meta.message);
    char *text = NULL;
    size_t len = 0;
    if (Dlk_manifest_dump(&m, &text, &len, &err) == DLK_OK) {
        Dlk_manifest m2;
        CHECK(Dlk_manifest_parse(text, len, "again", &m2, &err) == DLK_OK);
        CHECK(m2.ntensors == m.ntensors);
        for (size_t i = 0; i < m.ntensors; i++)
            CHECK(m2.tensors[i].samples == m.tensors[i].samples &&
                  m2.tensors[i].nchunks == m.tensors[i].nchunks);
        Dlk_manifest_free(&m2);
        free(text);
    }
    Dlk_commit_meta_free(&meta);
    Dlk_manifest_free(&m);
    return 0;
}
