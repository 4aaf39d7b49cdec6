/* test_index.c - the resident vector index (dlk_index_*) on the CPU:
 * every query's rows and scores equal dlk_select's vector search bit for
 * bit (each metric, f32 with a tail of D % 16 and f64, a filter, a view,
 * k past the rows, one thread or several, many queries in one call); the
 * accessors; and the errors (bad arguments, a tensor that is not an
 * embedding, an expression error with its column, CUDA without a GPU).
 * Where there is a GPU, its index gives the CPU's rows and scores, bit
 * for bit, over several batches of queries. */
#include "dlk.h"
#include "unit.h"

#include <unistd.h>

#define ROWS 1500
#define NQ 5
#define K 7

static char root[256];

/* A dataset of ROWS rows: emb f32 [D], wide f64 [DW], score f32, with a
 * tie (row 1200 a copy of row 9). */
#define D 21
#define DW 16
static float X[ROWS][D], Q[NQ][D], QW[NQ][DW];
static double XW[ROWS][DW];

static dlk_dataset *make(void)
{
    snprintf(root, sizeof root, "/tmp/dlk-test-index-%d", (int)getpid());
    dlk_tensor_spec s[3];
    if (dlk_tensor_spec_parse("emb:f32:21", &s[0], NULL) ||
        dlk_tensor_spec_parse("wide:f64:16", &s[1], NULL) ||
        dlk_tensor_spec_parse("score:f32", &s[2], NULL))
        return NULL;
    for (int t = 0; t < 3; t++)
        s[t].chunk_bytes = 16 << 10; /* many chunks */
    dlk_dataset *ds;
    if (dlk_dataset_create(root, s, 3, &ds, NULL))
        return NULL;
    uint64_t x = 12345;
    for (int i = 0; i < ROWS; i++) {
        for (int j = 0; j < D; j++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            X[i][j] = (float)((double)(x >> 11) * 0x1p-53 * 2 - 1);
        }
        for (int j = 0; j < DW; j++)
            XW[i][j] = X[i][j] * 1.5 + j;
    }
    memcpy(X[1200], X[9], sizeof X[9]);
    for (int q = 0; q < NQ; q++) {
        for (int j = 0; j < D; j++)
            Q[q][j] = X[q * 100 + 3][j] * 0.5f + (float)j / D;
        for (int j = 0; j < DW; j++)
            QW[q][j] = (float)XW[q * 50][j];
    }
    memcpy(Q[NQ - 1], X[9], sizeof X[9]);
    int64_t shd = D, shw = DW;
    for (int i = 0; i < ROWS; i++) {
        float sc = (float)((i * 37) % 100) / 100.0f;
        if (dlk_append(ds, 0, X[i], sizeof X[i], &shd, 1, NULL) ||
            dlk_append(ds, 1, XW[i], sizeof XW[i], &shw, 1, NULL) ||
            dlk_append(ds, 2, &sc, sizeof sc, NULL, 0, NULL))
            return NULL;
    }
    return dlk_dataset_flush(ds, NULL) ? NULL : ds;
}

/* Every query of an index against dlk_select with the same options. */
static bool same_as_select(dlk_dataset *ds, const char *tensor,
                           const char *where, const char *view,
                           uint32_t threads, const float *qs, uint32_t dim,
                           uint32_t k, dlk_metric metric)
{
    dlk_index_opts io = {.size = sizeof(dlk_index_opts),
        .tensor = tensor, .where = where, .view = view,
                         .device = DLK_QUERY_DEVICE_CPU, .threads = threads};
    dlk_index *ix;
    dlk_error err;
    if (dlk_index_open(ds, &io, &ix, &err)) {
        printf("# %s\n", err.msg);
        return false;
    }
    uint64_t *rows = calloc((size_t)NQ * k, sizeof *rows);
    double *scores = calloc((size_t)NQ * k, sizeof *scores);
    uint32_t n = 0;
    bool ok = rows && scores && dlk_index_dim(ix) == dim &&
              dlk_index_device(ix) == DLK_QUERY_DEVICE_CPU &&
              !dlk_index_search(ix, qs, NQ, k, metric, rows, scores, &n,
                                &err);
    for (uint32_t q = 0; ok && q < NQ; q++) {
        dlk_select_opts so = {.size = sizeof(dlk_select_opts),
            .where = where, .view = view,
                              .near_tensor = tensor,
                              .near_vector = qs + (size_t)q * dim,
                              .near_dim = dim, .k = k,
                              .metric = metric, .threads = 3,
                              .device = DLK_QUERY_DEVICE_CPU};
        dlk_select_result r = DLK_SELECT_RESULT_INIT;
        if (dlk_select(ds, &so, &r, &err)) {
            printf("# %s\n", err.msg);
            ok = false;
            break;
        }
        ok = r.n == n && r.n && r.candidates == dlk_index_rows(ix) &&
             dlk_index_bytes(ix) == r.candidates * dim *
                                        (strcmp(tensor, "wide") ? 4 : 8) &&
             memcmp(r.rows, rows + (size_t)q * k, n * sizeof *rows) == 0 &&
             memcmp(r.scores, scores + (size_t)q * k,
                    n * sizeof *scores) == 0;
        dlk_select_result_free(&r);
    }
    free(rows);
    free(scores);
    dlk_index_close(ix);
    return ok;
}

/* With a GPU: the CUDA index's rows and scores are the CPU index's, bit
 * for bit, for nq queries (many: several batches of the GPU's buffers),
 * and dlk_select's on CUDA for the first. */
static bool cuda_same_as_cpu(dlk_dataset *ds, const char *tensor,
                             const char *where, uint32_t dim, uint32_t nq,
                             uint32_t k, dlk_metric metric)
{
    float *qs = malloc((size_t)nq * dim * sizeof *qs);
    uint64_t *r[2] = {calloc((size_t)nq * k, 8), calloc((size_t)nq * k, 8)};
    double *sc[2] = {calloc((size_t)nq * k, 8), calloc((size_t)nq * k, 8)};
    uint32_t n[2] = {0, 0};
    bool ok = qs && r[0] && r[1] && sc[0] && sc[1];
    uint64_t x = 99;
    for (size_t i = 0; ok && i < (size_t)nq * dim; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        qs[i] = (float)((double)(x >> 11) * 0x1p-53 - 0.5);
    }
    dlk_error err;
    for (int d = 0; ok && d < 2; d++) {
        dlk_index_opts io = {.size = sizeof(dlk_index_opts),
            .tensor = tensor, .where = where,
                             .device = d ? DLK_QUERY_DEVICE_CUDA
                                         : DLK_QUERY_DEVICE_CPU};
        dlk_index *ix;
        ok = !dlk_index_open(ds, &io, &ix, &err) &&
             dlk_index_device(ix) == io.device &&
             !dlk_index_search(ix, qs, nq, k, metric, r[d], sc[d], &n[d],
                               &err);
        if (!ok)
            printf("# %s\n", err.msg);
        dlk_index_close(ix);
    }
    ok = ok && n[0] == n[1] &&
         memcmp(r[0], r[1], (size_t)nq * k * 8) == 0 &&
         memcmp(sc[0], sc[1], (size_t)nq * k * 8) == 0;
    dlk_select_opts so = {.size = sizeof(dlk_select_opts),
        .where = where, .near_tensor = tensor,
                          .near_vector = qs, .near_dim = dim,
                          .k = k, .metric = metric,
                          .device = DLK_QUERY_DEVICE_CUDA};
    dlk_select_result res = DLK_SELECT_RESULT_INIT;
    if (ok && !dlk_select(ds, &so, &res, &err)) {
        ok = res.n == n[1] && memcmp(res.rows, r[1], res.n * 8) == 0 &&
             memcmp(res.scores, sc[1], res.n * 8) == 0;
        dlk_select_result_free(&res);
    } else {
        ok = false;
    }
    free(qs);
    for (int d = 0; d < 2; d++) {
        free(r[d]);
        free(sc[d]);
    }
    return ok;
}

int main(void)
{
    dlk_dataset *ds = make();
    UNIT_CHECK("an embedding dataset", ds);
    if (!ds)
        return unit_done();
    dlk_error err;
    const char *mn[] = {"cosine", "l2", "ip"};
    char name[200];
    for (int m = 0; m < 3; m++) {
        snprintf(name, sizeof name, "%s: every row, 4 threads", mn[m]);
        UNIT_CHECK(name, same_as_select(ds, "emb", NULL, NULL, 4, &Q[0][0],
                                        D, K, (dlk_metric)m));
        snprintf(name, sizeof name, "%s: a filter, 1 thread", mn[m]);
        UNIT_CHECK(name, same_as_select(ds, "emb", "score > 0.4", NULL, 1,
                                        &Q[0][0], D, K, (dlk_metric)m));
        snprintf(name, sizeof name, "%s: f64 rows, 3 threads", mn[m]);
        UNIT_CHECK(name, same_as_select(ds, "wide", "row % 3 != 1", NULL, 3,
                                        &QW[0][0], DW, K, (dlk_metric)m));
    }
    UNIT_CHECK("k past the rows", same_as_select(ds, "emb", "row < 6", NULL,
                                                 2, &Q[0][0], D, 50,
                                                 DLK_METRIC_L2));
    uint64_t vrows[] = {3, 9, 10, 500, 777, 1200, 1499};
    UNIT_CHECK("save a view", !dlk_view_save(ds, "some", vrows, 7, NULL,
                                             &err));
    UNIT_CHECK("a view and a filter",
               same_as_select(ds, "emb", "row != 10", "some", 2, &Q[0][0], D,
                              4, DLK_METRIC_COSINE));

    /* ties: row 9 and its copy 1200, the lower first */
    dlk_index_opts io = {.size = sizeof(dlk_index_opts),
        .tensor = "emb", .device = DLK_QUERY_DEVICE_CPU};
    dlk_index *ix = NULL;
    UNIT_CHECK("open", !dlk_index_open(ds, &io, &ix, &err));
    if (!ix)
        return unit_done();
    uint64_t rows[2 * K];
    double scores[2 * K];
    uint32_t n;
    UNIT_CHECK("a tie: the lower row first",
               !dlk_index_search(ix, Q[NQ - 1], 1, 2, DLK_METRIC_L2, rows,
                                 scores, &n, &err) &&
                   n == 2 && rows[0] == 9 && rows[1] == 1200 &&
                   scores[0] == scores[1] && scores[0] < 1e-3);
    UNIT_CHECK("rows, dim, bytes", dlk_index_rows(ix) == ROWS &&
                                       dlk_index_dim(ix) == D &&
                                       dlk_index_bytes(ix) == ROWS * D * 4);
    UNIT_CHECK("no queries", dlk_index_search(ix, &Q[0][0], 0, K,
                                              DLK_METRIC_L2, rows, scores, &n,
                                              &err) == DLK_EINVAL);
    UNIT_CHECK("k 0", dlk_index_search(ix, &Q[0][0], 1, 0, DLK_METRIC_L2,
                                       rows, scores, &n, &err) == DLK_EINVAL);
    UNIT_CHECK("k over 1000000",
               dlk_index_search(ix, &Q[0][0], 1, 1000001, DLK_METRIC_L2, rows,
                                scores, &n, &err) == DLK_EINVAL);
    UNIT_CHECK("an unknown metric",
               dlk_index_search(ix, &Q[0][0], 1, K, (dlk_metric)7, rows,
                                scores, &n, &err) == DLK_EINVAL);
    dlk_index_close(ix);
    dlk_index_close(NULL);

    /* options left zero name no row: the vector given is the query (the
     * distance of a row to itself is 0 but for the rounding of
     * |x|^2 - 2 x.q + |q|^2) */
    dlk_select_opts zo = {.size = sizeof(dlk_select_opts),
        .near_tensor = "emb", .near_vector = X[9],
                          .near_dim = D, .k = 1, .metric = DLK_METRIC_L2,
                          .device = DLK_QUERY_DEVICE_CPU};
    dlk_select_result zr = DLK_SELECT_RESULT_INIT;
    dlk_status zrc = dlk_select(ds, &zo, &zr, &err);
    if (zrc)
        printf("# %s\n", err.msg);
    UNIT_CHECK("zeroed options: the vector alone is the query",
               !zrc && zr.n == 1 && zr.rows[0] == 9 && zr.scores[0] < 1e-3);
    if (!zrc)
        dlk_select_result_free(&zr);
    zo.near_vector = NULL;
    zo.near_dim = 0;
    zo.near_row_plus1 = 1200 + 1;
    zrc = dlk_select(ds, &zo, &zr, &err);
    UNIT_CHECK("row 1200 as near_row_plus1 1201 (a copy of row 9)",
               !zrc && zr.n == 1 && zr.rows[0] == 9 && zr.scores[0] < 1e-3);
    if (!zrc)
        dlk_select_result_free(&zr);
    zo.near_row_plus1 = 1;
    zrc = dlk_select(ds, &zo, &zr, &err);
    UNIT_CHECK("row 0 as near_row_plus1 1",
               !zrc && zr.n == 1 && zr.rows[0] == 0 && zr.scores[0] < 1e-3);
    if (!zrc)
        dlk_select_result_free(&zr);
    zo.near_row_plus1 = ROWS + 1;
    UNIT_CHECK("a row past the rows",
               dlk_select(ds, &zo, &zr, &err) == DLK_ENOTFOUND &&
                   strstr(err.msg, "no row 1500"));
    zo.near_npy = "/nonexistent.npy";
    UNIT_CHECK("a row and a .npy: two query vectors",
               dlk_select(ds, &zo, &zr, &err) == DLK_EINVAL);

    io.tensor = "score";
    UNIT_CHECK("not an embedding",
               dlk_index_open(ds, &io, &ix, &err) == DLK_EINVAL && !ix &&
                   strstr(err.msg, "tensor 'score' is not an embedding"));
    io.tensor = "nope";
    UNIT_CHECK("no such tensor",
               dlk_index_open(ds, &io, &ix, &err) == DLK_ENOTFOUND &&
                   strstr(err.msg, "'nope'"));
    size_t col = 99;
    io = (dlk_index_opts){.size = sizeof(dlk_index_opts),
        .tensor = "emb", .where = "score >> 2",
                          .error_column = &col};
    UNIT_CHECK("an expression error, with its column",
               dlk_index_open(ds, &io, &ix, &err) == DLK_EINVAL && col == 8);
    io = (dlk_index_opts){.size = sizeof(dlk_index_opts),
        .tensor = "emb", .view = "none"};
    UNIT_CHECK("no such view",
               dlk_index_open(ds, &io, &ix, &err) == DLK_ENOTFOUND);
    io = (dlk_index_opts){.size = sizeof(dlk_index_opts),
        .tensor = "emb", .device = (dlk_query_device)9};
    UNIT_CHECK("an unknown device",
               dlk_index_open(ds, &io, &ix, &err) == DLK_EINVAL);
    if (!dlk_cuda_available(NULL, 0)) {
        io = (dlk_index_opts){.size = sizeof(dlk_index_opts), .tensor = "emb",
                              .device = DLK_QUERY_DEVICE_CUDA};
        UNIT_CHECK("cuda without a GPU",
                   dlk_index_open(ds, &io, &ix, &err) == DLK_EGPU &&
                       strstr(err.msg, "cannot search on a CUDA GPU"));
        io.device = DLK_QUERY_DEVICE_AUTO;
        UNIT_CHECK("auto without a GPU: the CPU",
                   !dlk_index_open(ds, &io, &ix, &err) &&
                       dlk_index_device(ix) == DLK_QUERY_DEVICE_CPU);
        dlk_index_close(ix);
    } else {
        UNIT_SKIP("cuda without a GPU", "a GPU is there");
    }
    if (dlk_cuda_available(NULL, 0)) {
        for (int m = 0; m < 3; m++) {
            snprintf(name, sizeof name, "%s on the GPU: the CPU's, f32, "
                     "6000 queries", mn[m]);
            UNIT_CHECK(name, cuda_same_as_cpu(ds, "emb", NULL, D, 6000, K,
                                              (dlk_metric)m));
            snprintf(name, sizeof name, "%s on the GPU: the CPU's, f64, "
                     "a filter", mn[m]);
            UNIT_CHECK(name, cuda_same_as_cpu(ds, "wide", "score < 0.5", DW,
                                              9, 3, (dlk_metric)m));
        }
    } else {
        UNIT_SKIP("the GPU's rows and scores are the CPU's", "no GPU");
    }
    dlk_dataset_free(ds);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", root);
    return unit_done();
}
