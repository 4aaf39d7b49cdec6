/* fuzz_manifest.c - libFuzzer target: the input is a manifest document.
 *
 * A document that parses must dump to JSON that parses to the same
 * manifest, and dumping that again gives the same text (a fixed point). */
#include "format/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (%s:%d)\n", \
                                         #c, __FILE__, __LINE__); abort(); } } while (0)

static void same(const Dlk_manifest *a, const Dlk_manifest *b)
{
    CHECK(a->ntensors == b->ntensors);
    CHECK(!a->parent == !b->parent);
    CHECK(!a->parent || strcmp(a->parent, b->parent) == 0);
    for (size_t i = 0; i < a->ntensors; i++) {
        const Dlk_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        CHECK(strcmp(x->spec.name, y->spec.name) == 0);
        CHECK(x->spec.dtype == y->spec.dtype && x->spec.kind == y->spec.kind);
        CHECK(x->spec.codec == y->spec.codec);
        CHECK(x->spec.ndim == y->spec.ndim);
        CHECK(memcmp(x->spec.shape, y->spec.shape,
                     sizeof x->spec.shape) == 0);
        CHECK(x->spec.chunk_bytes == y->spec.chunk_bytes);
        CHECK(x->samples == y->samples && x->nchunks == y->nchunks);
        CHECK(x->nsegs == y->nsegs && x->segs_pending == y->segs_pending);
        for (size_t j = 0; j < x->nsegs; j++)
            CHECK(memcmp(&x->segs[j], &y->segs[j], sizeof x->segs[j]) == 0);
        CHECK(x->stored_bytes == y->stored_bytes);
        CHECK(x->raw_bytes == y->raw_bytes);
        CHECK(x->n_class_names == y->n_class_names);
        for (size_t j = 0; j < x->n_class_names; j++)
            CHECK(strcmp(x->class_names[j], y->class_names[j]) == 0);
        CHECK(x->have_minmax == y->have_minmax);
        if (x->have_minmax)
            for (int d = 0; d < x->spec.ndim; d++)
                CHECK(x->shape_min[d] == y->shape_min[d] &&
                      x->shape_max[d] == y->shape_max[d]);
        for (size_t j = 0; j < x->nchunks; j++) {
            const Dlk_chunk_entry *p = &x->chunks[j], *q = &y->chunks[j];
            CHECK(strcmp(p->key, q->key) == 0 && p->samples == q->samples);
            CHECK(p->stored_bytes == q->stored_bytes);
            CHECK(p->raw_bytes == q->raw_bytes && p->first == q->first);
            /* every sample of the tensor is found in its chunk */
            CHECK(Dlk_tensor_find_chunk(x, p->first) == (ssize_t)j);
            CHECK(Dlk_tensor_find_chunk(x, p->first + p->samples - 1) ==
                  (ssize_t)j);
        }
        CHECK(Dlk_tensor_find_chunk(x, x->samples) == -1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Dlk_manifest m, m2;
    dlk_error err = {0};
    dlk_status rc = Dlk_manifest_parse((const char *)data, size, "fuzz", &m,
                                       &err);
    if (rc) {
        CHECK(err.code == rc && err.msg[0]);
        CHECK(rc == DLK_ECORRUPT || rc == DLK_EUNSUPPORTED ||
              rc == DLK_ELIMIT || rc == DLK_ENOMEM);
        CHECK(m.ntensors == 0 && m.tensors == NULL && m.parent == NULL);
        return 0;
    }
    char *text, *text2;
    size_t len, len2;
    CHECK(Dlk_manifest_dump(&m, &text, &len, &err) == DLK_OK);
    rc = Dlk_manifest_parse(text, len, "dumped", &m2, &err);
    if (rc)
        fprintf(stderr, "dumped manifest does not parse: %s\n%s\n", err.msg,
                text);
    CHECK(rc == DLK_OK);
    same(&m, &m2);
    CHECK(Dlk_manifest_dump(&m2, &text2, &len2, &err) == DLK_OK);
    CHECK(len == len2 && memcmp(text, text2, len) == 0);
    free(text);
    free(text2);
    Dlk_manifest_free(&m);
    Dlk_manifest_free(&m2);
    return 0;
}
