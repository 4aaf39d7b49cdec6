/* fuzz_query.c - libFuzzer target: the input is a row expression (as
 * `dlk query` and views take it), parsed and checked against a schema of
 * every kind of tensor the language refers to. */
#include "format/manifest.h"
#include "query/query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (%s:%d)\n", \
                                         #c, __FILE__, __LINE__); abort(); } } while (0)

static Dlk_tensor tensors[5];
static Dlk_manifest man;

static void tensor(int i, const char *name, dlk_dtype t, dlk_kind k, int ndim,
                   const int64_t *shape)
{
    dlk_tensor_spec *s = &tensors[i].spec;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->dtype = t;
    s->kind = k;
    s->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        s->shape[d] = shape[d];
    tensors[i].samples = 100;
}

static void schema(void)
{
    static char *classes[] = {"cat", "dog", "bird"};
    tensor(0, "labels", DLK_I32, DLK_KIND_CLASS_LABEL, 0, NULL);
    tensors[0].class_names = classes;
    tensors[0].n_class_names = 3;
    tensors[0].spec.class_names = (const char *const *)classes;
    tensors[0].spec.n_class_names = 3;
    tensor(1, "images", DLK_U8, DLK_KIND_IMAGE, 3,
           (const int64_t[]){DLK_DIM_VARIABLE, DLK_DIM_VARIABLE, 3});
    tensor(2, "key", DLK_U8, DLK_KIND_TEXT, 1,
           (const int64_t[]){DLK_DIM_VARIABLE});
    tensor(3, "emb", DLK_F32, DLK_KIND_GENERIC, 1, (const int64_t[]){8});
    tensor(4, "score.v2", DLK_F64, DLK_KIND_GENERIC, 0, NULL);
    man.tensors = tensors;
    man.ntensors = 5;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!man.ntensors)
        schema();
    char *src = malloc(size + 1);
    if (!src)
        return 0;
    memcpy(src, data, size);
    src[size] = '\0';
    size_t len = strlen(src); /* an embedded NUL ends the text, as in C */
    q_expr e;
    size_t col = 99999;
    dlk_error err = {0};
    dlk_status rc = q_parse(src, &man, &e, &col, &err);
    if (rc) {
        /* a named error pointing inside (or just past) the text */
        CHECK(err.code == rc && err.msg[0]);
        CHECK(rc == DLK_EINVAL || rc == DLK_ENOTFOUND || rc == DLK_ELIMIT ||
              rc == DLK_ENOMEM);
        CHECK(col <= len + 1);
    } else {
        /* a tree whose every reference is inside it */
        CHECK(len <= Q_EXPR_MAX);
        CHECK(e.n >= 1 && e.n <= Q_NODES_MAX);
        CHECK(e.root >= 0 && (size_t)e.root < e.n);
        CHECK(e.ntensors >= 0 && e.ntensors <= 64);
        for (int s = 0; s < e.ntensors; s++)
            CHECK(e.tensors[s] >= 0 && (size_t)e.tensors[s] < man.ntensors);
        for (size_t i = 0; i < e.n; i++) {
            const q_node *q = &e.nodes[i];
            CHECK(q->a >= -1 && q->a < (int)e.n);
            CHECK(q->b >= -1 && q->b < (int)e.n);
            CHECK(q->kind != N_IN || q->list || !q->nlist);
        }
        /* a number a row (operands that are not, strings and tensor
         * names, only under the nodes that take them) */
        const q_node *r = &e.nodes[e.root];
        CHECK(r->kind != N_STR && r->kind != N_TEXTREF &&
              r->kind != N_TENSORREF);
        q_expr_free(&e);
    }
    free(src);
    return 0;
}
