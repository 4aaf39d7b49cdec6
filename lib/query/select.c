/* select.c - dlk_select: a view's rows (or all), then the filter, then
 * the vector search over what the filter let through. */
#include "query.h"
#include "format/npy.h"
#include "util/abi.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const metric_names[] = {"cosine", "l2", "ip"};

const char *dlk_metric_name(dlk_metric m)
{
    return (unsigned)m < 3 ? metric_names[m] : NULL;
}

int dlk_metric_parse(const char *name, dlk_metric *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, metric_names[i]) == 0) {
            *out = (dlk_metric)i;
            return 0;
        }
    return -1;
}

static const char *const device_names[] = {"auto", "cpu", "cuda"};

const char *dlk_query_device_name(dlk_query_device d)
{
    return (unsigned)d < 3 ? device_names[d] : NULL;
}

int dlk_query_device_parse(const char *name, dlk_query_device *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, device_names[i]) == 0) {
            *out = (dlk_query_device)i;
            return 0;
        }
    return -1;
}

#define NPY_MAX ((size_t)64 << 20)

dlk_status dlk_npy_vectors(const char *path, float **out, uint32_t *nvec,
                           uint32_t *dim, dlk_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return Dlk_fail(err, DLK_EIO, "cannot open '%s': %s", path,
                        strerror(errno));
    uint8_t *b = malloc(NPY_MAX + 1);
    size_t len = b ? fread(b, 1, NPY_MAX + 1, f) : 0;
    fclose(f);
    if (!b)
        return Dlk_oom(err);
    Dlk_npy_info h;
    dlk_status rc = len > NPY_MAX
        ? Dlk_fail(err, DLK_ELIMIT, "'%s': over 64 MiB of query vectors",
                   path)
        : Dlk_npy_parse(b, len, path, &h, err);
    uint64_t d = 0, nv = 0;
    if (!rc) {
        d = h.ndim == 1 ? (uint64_t)h.shape[0]
          : h.ndim == 2 ? (uint64_t)h.shape[1] : 0;
        nv = h.ndim == 1 ? 1 : h.ndim == 2 ? (uint64_t)h.shape[0] : 0;
        /* the parse checked the data is there for the shape */
        if (!d || d > (1u << 24) || !nv || nv > UINT32_MAX ||
            (h.dtype != DLK_F32 && h.dtype != DLK_F64 && h.dtype != DLK_F16))
            rc = Dlk_fail(err, DLK_EINVAL, "'%s': query vectors are float "
                          "values of shape [D] or [N, D]", path);
    }
    float *v = rc ? NULL : malloc(nv * d * sizeof *v);
    if (!rc && !v)
        rc = Dlk_oom(err);
    for (uint64_t i = 0; !rc && i < nv * d; i++) {
        const uint8_t *p = b + h.data_off;
        size_t esz = dlk_dtype_size(h.dtype);
        uint8_t e[8];
        for (size_t k = 0; k < esz; k++)
            e[k] = p[i * esz + (h.swap ? esz - 1 - k : k)];
        if (h.dtype == DLK_F32) {
            memcpy(&v[i], e, 4);
        } else if (h.dtype == DLK_F64) {
            double x;
            memcpy(&x, e, 8);
            v[i] = (float)x;
        } else {
            uint16_t x = (uint16_t)(e[0] | e[1] << 8);
            int ex = (x >> 10) & 0x1f, m = x & 0x3ff;
            float y = ex == 0 ? ldexpf((float)m, -24)
                    : ex == 31 ? (m ? NAN : INFINITY)
                    : ldexpf((float)(m + 1024), ex - 25);
            v[i] = (x & 0x8000) ? -y : y;
        }
    }
    free(b);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *nvec = (uint32_t)nv;
    *dim = (uint32_t)d;
    return DLK_OK;
}

/* The query vector of a .npy file: D values, shape [D] or [1, D]. */
static dlk_status vector_npy(const char *path, float **out, uint32_t *dim,
                             dlk_error *err)
{
    uint32_t n;
    dlk_status rc = dlk_npy_vectors(path, out, &n, dim, err);
    if (!rc && n != 1) {
        free(*out);
        *out = NULL;
        rc = Dlk_fail(err, DLK_EINVAL, "'%s': a query vector is float "
                      "values of shape [D] or [1, D]", path);
    }
    return rc;
}

/* The query vector from a row of the tensor. */
static dlk_status vector_row(dlk_dataset *ds, size_t ti, uint64_t row,
                             float **out, uint32_t *dim, dlk_error *err)
{
    dlk_sample s;
    dlk_status rc = dlk_read_sample(ds, ti, row, &s, err);
    if (rc)
        return rc;
    size_t esz = dlk_dtype_size(s.dtype), d = esz ? s.nbytes / esz : 0;
    float *v = malloc((d ? d : 1) * sizeof *v);
    if (!v) {
        dlk_sample_free(&s);
        return Dlk_oom(err);
    }
    for (size_t i = 0; i < d; i++) {
        if (s.dtype == DLK_F32) {
            memcpy(&v[i], (uint8_t *)s.data + 4 * i, 4);
        } else {
            double x;
            memcpy(&x, (uint8_t *)s.data + 8 * i, 8);
            v[i] = (float)x;
        }
    }
    dlk_sample_free(&s);
    *out = v;
    *dim = (uint32_t)d;
    return DLK_OK;
}

/* The manifest's entry of view `name`, or NULL. */
static const Dlk_view_ref *view_entry(const Dlk_manifest *m, const char *name)
{
    for (size_t i = 0; i < m->nviews; i++)
        if (strcmp(m->views[i].name, name) == 0)
            return &m->views[i];
    return NULL;
}

/* A count the manifest answers (true, *n set): of every row, or of a
 * view's by its entry's `rows` where the view was saved in a state of no
 * more rows than this one (so it names none past it: formats/dlk-v1.md
 * 6.10), with no filter or one decided for every row (decide.c). */
static bool count_by_manifest(dlk_dataset *ds, q_expr *e,
                              const char *view, uint64_t *n)
{
    uint64_t total = Dlk_manifest_rows(&ds->m), cands = total, span = total;
    if (view) {
        const Dlk_view_ref *v = view_entry(&ds->m, view);
        if (!v || v->dataset_rows > total)
            return false; /* the view object says what is wrong */
        cands = v->rows;
        span = v->dataset_rows;
    }
    bool holds = true;
    if (cands && e && !q_decided(e, &ds->m, 0, span - 1, &holds))
        return false;
    *n = holds ? cands : 0;
    return true;
}

dlk_status q_candidates(dlk_dataset *ds, q_expr *e, const char *view,
                        uint32_t threads, bool verify, uint64_t **out,
                        uint64_t *nout, uint64_t *bytes, dlk_error *err)
{
    if (out)
        *out = NULL;
    *nout = 0;
    if (!out && count_by_manifest(ds, e, view, nout))
        return DLK_OK;
    uint64_t total = Dlk_manifest_rows(&ds->m);
    uint64_t *vrows = NULL, nview = 0;
    dlk_status rc = DLK_OK;
    if (view && (rc = dlk_view_rows(ds, view, &vrows, &nview, err)) == DLK_OK) {
        /* a view of a later state may name rows this one lacks */
        if (nview && vrows[nview - 1] >= total)
            rc = Dlk_fail(err, DLK_EINVAL, "view '%s' names row %llu; '%s' "
                          "has %llu rows here", view,
                          (unsigned long long)vrows[nview - 1], ds->url,
                          (unsigned long long)total);
    }
    q_cands c = {vrows, view ? nview : total};
    /* a filter the schema decides over the candidates' rows reads no
     * chunk: every candidate, or none */
    bool holds;
    if (!rc && e && c.n &&
        q_decided(e, &ds->m, q_cand(&c, 0), q_cand(&c, c.n - 1), &holds)) {
        if (!holds)
            c.n = 0;
        e = NULL;
    } else if (!rc && e && c.n) {
        q_fold(e, &ds->m, q_cand(&c, 0), q_cand(&c, c.n - 1));
        /* only the candidates in the rows the expression allows: their
         * chunks alone are read (`row < 1000 and mean(images) > 9`) */
        uint64_t lo = q_cand(&c, 0), hi = q_cand(&c, c.n - 1) + 1;
        q_row_range(e, &lo, &hi);
        uint64_t i0 = q_cands_lower(&c, 0, c.n, lo);
        uint64_t i1 = q_cands_lower(&c, i0, c.n, hi);
        if (c.rows)
            c.rows += i0;
        else
            c.base += i0;
        c.n = i1 - i0;
    }
    uint64_t *rows = NULL, n = 0;
    if (!rc && e) {
        rc = q_filter(ds, e, &c, threads, verify, out ? &rows : NULL, &n,
                      bytes, err);
    } else if (!rc && !out) {
        n = c.n;
    } else if (!rc) {
        n = c.n;
        rows = vrows ? vrows : malloc((n ? n : 1) * sizeof *rows);
        if (vrows)
            vrows = NULL;
        else if (rows)
            for (uint64_t i = 0; i < n; i++)
                rows[i] = i;
        else
            rc = Dlk_oom(err);
    }
    free(vrows);
    if (rc) {
        free(rows);
        return rc;
    }
    if (out)
        *out = rows;
    *nout = n;
    return DLK_OK;
}

void dlk_select_result_free(dlk_select_result *res)
{
    if (!res)
        return;
    /* rows and scores are in every layout (the first members after size) */
    free(res->rows);
    free(res->scores);
    dlk_select_result zero = {0};
    abi_copy_out(res, &zero, sizeof zero);
}

static dlk_status select_run(dlk_dataset *ds, const dlk_select_opts *o,
                             dlk_select_result *res, dlk_error *err);

dlk_status dlk_select(dlk_dataset *ds, const dlk_select_opts *opts,
                      dlk_select_result *res, dlk_error *err)
{
    /* filled in full here, then up to the caller's size (the failures'
     * error_column too); its rows are the caller's to free, so it must
     * be given */
    if (!res)
        return Dlk_fail(err, DLK_EINVAL, "no dlk_select_result given");
    dlk_select_result own;
    dlk_status rc = abi_result_in(&own, sizeof own, res,
                                  "dlk_select_result", err);
    if (rc)
        return rc;
    dlk_select_opts oo;
    rc = abi_copy_in(&oo, sizeof oo, opts, "dlk_select_opts", err);
    if (!rc)
        rc = select_run(ds, &oo, &own, err);
    abi_copy_out(res, &own, sizeof own);
    return rc;
}

/* The vector search's tensor (*near_ti) and query vector (*vec of *dim
 * values, the caller's to free), checked. */
static dlk_status near_query(dlk_dataset *ds, const dlk_select_opts *o,
                             uint64_t total, int *near_ti, float **vec,
                             uint32_t *dim, dlk_error *err)
{
    int ti = *near_ti = dlk_dataset_find(ds, o->near_tensor);
    int given = !!o->near_vector + !!o->near_npy + !!o->near_row_plus1;
    if (ti < 0)
        return Dlk_fail(err, DLK_ENOTFOUND, "no tensor '%s' in '%s' to "
                        "search", o->near_tensor, ds->url);
    if (given != 1)
        return Dlk_fail(err, DLK_EINVAL, "a vector search takes one query "
                        "vector: values, a .npy file or a row");
    if (o->k > 1000000)
        return Dlk_fail(err, DLK_ELIMIT, "k %u is over 1000000", o->k);
    if (ds->m.tensors[ti].spec.dtype != DLK_F32 &&
        ds->m.tensors[ti].spec.dtype != DLK_F64)
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s' is not an embedding: "
                        "vector search takes f32 or f64 of a fixed shape "
                        "[D]", o->near_tensor);
    if ((unsigned)o->metric > DLK_METRIC_IP)
        return Dlk_fail(err, DLK_EINVAL, "unknown metric %d", o->metric);
    if ((unsigned)o->device > DLK_QUERY_DEVICE_CUDA)
        return Dlk_fail(err, DLK_EINVAL, "unknown device %d", o->device);
    if (o->near_npy)
        return vector_npy(o->near_npy, vec, dim, err);
    if (o->near_row_plus1)
        return o->near_row_plus1 - 1 >= total
            ? Dlk_fail(err, DLK_ENOTFOUND, "no row %llu: '%s' has %llu",
                       (unsigned long long)(o->near_row_plus1 - 1),
                       ds->url, (unsigned long long)total)
            : vector_row(ds, (size_t)ti, o->near_row_plus1 - 1, vec, dim,
                         err);
    if (!(*vec = malloc((o->near_dim ? o->near_dim : 1) * sizeof **vec)))
        return Dlk_oom(err);
    memcpy(*vec, o->near_vector, o->near_dim * sizeof **vec);
    *dim = o->near_dim;
    return DLK_OK;
}

static dlk_status select_run(dlk_dataset *ds, const dlk_select_opts *o,
                             dlk_select_result *res, dlk_error *err)
{
    uint32_t threads = o->threads ? o->threads : (uint32_t)dlk_cpu_count();
    if (threads > 256)
        threads = 256;
    bool verify = !o->no_verify;
    uint64_t total = Dlk_manifest_rows(&ds->m);
    res->rows_total = total;
    q_expr e;
    memset(&e, 0, sizeof e);
    bool have_expr = o->where && *o->where;
    dlk_status rc = DLK_OK;
    int near_ti = -1;
    float *vec = NULL;
    uint32_t dim = 0;
    if (have_expr)
        rc = q_parse(o->where, &ds->m, &e, &res->error_column, err);
    if (!rc && o->near_tensor)
        rc = near_query(ds, o, total, &near_ti, &vec, &dim, err);
    uint64_t *rows = NULL, n = 0;
    bool count_only = o->count_only && near_ti < 0;
    if (!rc)
        rc = q_candidates(ds, have_expr ? &e : NULL, o->view, threads, verify,
                          count_only ? NULL : &rows, &n, &res->bytes_read,
                          err);
    q_expr_free(&e);
    res->candidates = n;
    if (!rc && near_ti >= 0) {
        q_cands fc = {rows, n};
        uint64_t *top = NULL, ntop = 0;
        double *scores = NULL;
        rc = q_topk(ds, (size_t)near_ti, vec, dim, o->metric,
                    o->k ? o->k : 10, &fc, threads, verify, o->device,
                    &res->device, &top, &scores, &ntop, &res->bytes_read,
                    err);
        free(rows);
        rows = top;
        n = ntop;
        res->scores = scores;
    }
    free(vec);
    if (rc) {
        free(rows);
        free(res->scores);
        res->scores = NULL;
        return rc;
    }
    res->rows = rows;
    res->n = n;
    return DLK_OK;
}
