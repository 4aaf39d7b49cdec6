/* view.c - views: named row lists stored as content-addressed objects
 * under index/views/ and named by the head (formats/dlk-v1.md 6.10). */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VIEW_HEADER 32

uint64_t Dlk_manifest_rows(const Dlk_manifest *m)
{
    uint64_t rows = 0;
    for (size_t i = 0; i < m->ntensors; i++)
        if (i == 0 || m->tensors[i].samples < rows)
            rows = m->tensors[i].samples;
    return rows;
}

size_t dlk_dataset_nviews(const dlk_dataset *ds)
{
    return ds->m.nviews;
}

int dlk_view_get(const dlk_dataset *ds, size_t i, dlk_view_info *out)
{
    if (i >= ds->m.nviews)
        return -1;
    const Dlk_view_ref *v = &ds->m.views[i];
    out->name = v->name;
    out->object = v->object;
    out->rows = v->rows;
    out->dataset_rows = v->dataset_rows;
    out->query = v->query ? v->query : "";
    return 0;
}

static const Dlk_view_ref *find_view(const Dlk_manifest *m, const char *name)
{
    for (size_t i = 0; i < m->nviews; i++)
        if (strcmp(m->views[i].name, name) == 0)
            return &m->views[i];
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static dlk_status publish(dlk_dataset *ds, dlk_error *err)
{
    ds->dirty = true;
    return dlk_dataset_flush(ds, err);
}

/* Whether the head takes a view of this name, n rows and query. */
static dlk_status check_view(const dlk_dataset *ds, const char *name,
                             uint64_t n, const char *query, dlk_error *err)
{
    if (ds->read_only)
        return Dlk_fail(err, DLK_EINVAL, "'%s' is opened at a commit: views "
                        "are saved into the head", ds->url);
    if (!name || !Dlk_name_valid(name))
        return Dlk_fail(err, DLK_EINVAL, "invalid view name '%.80s' (use "
                        "1-64 of A-Z a-z 0-9 _ - ., not starting with '.')",
                        name ? name : "");
    if (n > DLK_VIEW_MAX_ROWS)
        return Dlk_fail(err, DLK_ELIMIT, "view '%s': %llu rows, at most 2^34",
                        name, (unsigned long long)n);
    if (query && strlen(query) > DLK_VIEW_QUERY_MAX)
        return Dlk_fail(err, DLK_ELIMIT, "view '%s': the query text is over "
                        "%d bytes", name, DLK_VIEW_QUERY_MAX);
    return DLK_OK;
}

/* The view object of rows[0, n) (sorted, each once, all below total):
 * *obj of *len bytes, the caller's to free, holding *k rows. */
static dlk_status encode_view(const char *name, const uint64_t *rows,
                              uint64_t n, uint64_t total, uint8_t **obj,
                              size_t *len, uint64_t *k, dlk_error *err)
{
    *len = VIEW_HEADER + (size_t)n * 8;
    *obj = malloc(*len);
    uint64_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!*obj || !sorted) {
        free(*obj);
        free(sorted);
        return Dlk_oom(err);
    }
    memcpy(sorted, rows, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_u64);
    *k = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (sorted[i] >= total) {
            dlk_status rc = Dlk_fail(err, DLK_EINVAL, "view '%s': row %llu is "
                                     "past the head's %llu rows", name,
                                     (unsigned long long)sorted[i],
                                     (unsigned long long)total);
            free(*obj);
            free(sorted);
            return rc;
        }
        if (*k == 0 || sorted[*k - 1] != sorted[i])
            sorted[(*k)++] = sorted[i];
    }
    uint8_t *o = *obj;
    for (uint64_t i = 0; i < *k; i++)
        Dlk_put_le64(o + VIEW_HEADER + i * 8, sorted[i]);
    free(sorted);
    *len = VIEW_HEADER + (size_t)*k * 8;
    memcpy(o, "DLKV", 4);
    Dlk_put_le16(o + 4, 1);
    Dlk_put_le16(o + 6, 0);
    Dlk_put_le64(o + 8, *k);
    Dlk_put_le64(o + 16, total);
    Dlk_put_le64(o + 24, Dlk_hash64(o + VIEW_HEADER, *len - VIEW_HEADER));
    return DLK_OK;
}

/* The view's entry in the head: the one of its name, or a new one in
 * name order. */
static dlk_status view_slot(dlk_dataset *ds, const char *name,
                            Dlk_view_ref **out, dlk_error *err)
{
    Dlk_manifest *m = &ds->m;
    Dlk_view_ref *v = (Dlk_view_ref *)find_view(m, name);
    if (!v) {
        if (m->nviews >= DLK_VIEWS_MAX)
            return Dlk_fail(err, DLK_ELIMIT, "'%s' has %d views already",
                            ds->url, DLK_VIEWS_MAX);
        Dlk_view_ref *nv = realloc(m->views, (m->nviews + 1) * sizeof *nv);
        if (!nv)
            return Dlk_oom(err);
        m->views = nv;
        size_t at = 0;
        while (at < m->nviews && strcmp(m->views[at].name, name) < 0)
            at++;
        memmove(&m->views[at + 1], &m->views[at],
                (m->nviews - at) * sizeof *nv);
        m->nviews++;
        v = &m->views[at];
        memset(v, 0, sizeof *v);
        snprintf(v->name, sizeof v->name, "%s", name);
    }
    *out = v;
    return DLK_OK;
}

dlk_status dlk_view_save(dlk_dataset *ds, const char *name,
                         const uint64_t *rows, uint64_t n, const char *query,
                         dlk_error *err)
{
    dlk_status rc = check_view(ds, name, n, query, err);
    if (rc)
        return rc;
    uint64_t total = Dlk_manifest_rows(&ds->m), k = 0;
    uint8_t *obj = NULL;
    size_t len = 0;
    if ((rc = encode_view(name, rows, n, total, &obj, &len, &k, err)))
        return rc;
    char hex[33], key[DLK_VIEW_KEY_MAX];
    Dlk_hash128_hex(obj, len, hex);
    snprintf(key, sizeof key, "%s%s", DLK_VIEW_PREFIX, hex);
    rc = Dlk_store_put(ds->store, key, obj, len, DLK_PUT_IF_ABSENT, NULL,
                       NULL, err);
    free(obj);
    if (rc == DLK_EEXIST) { /* the same bytes: its name is their hash */
        Dlk_error_clear(err);
        rc = DLK_OK;
    }
    if (rc)
        return Dlk_fail_wrap(err, "cannot write view '%s'", name);
    char *q = strdup(query ? query : "");
    if (!q)
        return Dlk_oom(err);
    Dlk_view_ref *v = NULL;
    if ((rc = view_slot(ds, name, &v, err))) {
        free(q);
        return rc;
    }
    free(v->query);
    v->query = q;
    memcpy(v->object, key, sizeof v->object);
    v->rows = k;
    v->dataset_rows = total;
    return publish(ds, err);
}

dlk_status dlk_view_drop(dlk_dataset *ds, const char *name, dlk_error *err)
{
    if (ds->read_only)
        return Dlk_fail(err, DLK_EINVAL, "'%s' is opened at a commit: views "
                        "are dropped from the head", ds->url);
    Dlk_manifest *m = &ds->m;
    const Dlk_view_ref *v = find_view(m, name);
    if (!v)
        return Dlk_fail(err, DLK_ENOTFOUND, "no view '%s' in '%s'", name,
                        ds->url);
    size_t at = (size_t)(v - m->views);
    free(m->views[at].query);
    memmove(&m->views[at], &m->views[at + 1],
            (m->nviews - at - 1) * sizeof *m->views);
    m->nviews--;
    return publish(ds, err);
}

/* "a, b, c" of the views there are, for a message. */
static void view_names(const Dlk_manifest *m, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < m->nviews && len + 1 < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? ", " : "",
                                m->views[i].name);
    if (!m->nviews)
        snprintf(out, cap, "none");
}

dlk_status dlk_view_rows(dlk_dataset *ds, const char *name, uint64_t **rows,
                         uint64_t *n, dlk_error *err)
{
    *rows = NULL;
    *n = 0;
    const Dlk_view_ref *v = find_view(&ds->m, name ? name : "");
    if (!v) {
        char names[256];
        view_names(&ds->m, names, sizeof names);
        return Dlk_fail(err, DLK_ENOTFOUND, "no view '%s' in '%s' (its "
                        "views: %s)", name ? name : "", ds->url, names);
    }
    /* bounded by the manifest's count before anything is allocated */
    uint64_t want = VIEW_HEADER + v->rows * 8;
    Dlk_buf b;
    Dlk_buf_init(&b);
    Dlk_obj_info info;
    dlk_status rc = Dlk_store_get(ds->store, v->object, want, &b, &info, err);
    if (rc == DLK_ELIMIT || (!rc && b.len != want))
        rc = Dlk_fail(err, DLK_ECORRUPT, "view '%s' ('%s'): the object is not "
                      "the %llu bytes the manifest says", name, v->object,
                      (unsigned long long)want);
    if (rc) {
        Dlk_buf_free(&b);
        return rc == DLK_ENOTFOUND
                   ? Dlk_fail_wrap(err, "view '%s' is missing", name)
                   : rc;
    }
    char hex[33];
    Dlk_hash128_hex(b.data, b.len, hex);
    const uint8_t *p = b.data;
    if (strcmp(hex, v->object + strlen(DLK_VIEW_PREFIX)) != 0)
        rc = Dlk_fail(err, DLK_ECORRUPT, "view '%s' ('%s'): content does not "
                      "match its name", name, v->object);
    else if (memcmp(p, "DLKV", 4) != 0 || Dlk_get_le16(p + 4) != 1 ||
             Dlk_get_le16(p + 6) != 0 || Dlk_get_le64(p + 8) != v->rows ||
             Dlk_get_le64(p + 16) != v->dataset_rows ||
             Dlk_get_le64(p + 24) != Dlk_hash64(p + VIEW_HEADER,
                                                b.len - VIEW_HEADER))
        rc = Dlk_fail(err, DLK_ECORRUPT, "view '%s' ('%s'): bad header",
                      name, v->object);
    uint64_t *r = rc ? NULL : malloc((v->rows ? v->rows : 1) * sizeof *r);
    if (!rc && !r)
        rc = Dlk_oom(err);
    for (uint64_t i = 0; !rc && i < v->rows; i++) {
        r[i] = Dlk_get_le64(p + VIEW_HEADER + i * 8);
        if ((i && r[i] <= r[i - 1]) || r[i] >= v->dataset_rows)
            rc = Dlk_fail(err, DLK_ECORRUPT, "view '%s' ('%s'): row %llu is "
                          "out of order or past its %llu rows", name,
                          v->object, (unsigned long long)r[i],
                          (unsigned long long)v->dataset_rows);
    }
    Dlk_buf_free(&b);
    /* rows are never removed, so a view names rows of every later state;
     * one naming rows this state lacks comes from a hand-edited manifest
     * (formats/dlk-v1.md 6.10): refused, not read past the end.  The rows
     * ascend: the last is the highest. */
    uint64_t total = Dlk_manifest_rows(&ds->m);
    if (!rc && v->rows && r[v->rows - 1] >= total) {
        uint64_t i = 0;
        while (r[i] < total)
            i++;
        rc = Dlk_fail(err, DLK_ECORRUPT, "view '%s' ('%s') names row %llu, "
                      "past the %llu rows of '%s'", name, v->object,
                      (unsigned long long)r[i], (unsigned long long)total,
                      ds->url);
    }
    if (rc) {
        free(r);
        return rc;
    }
    *rows = r;
    *n = v->rows;
    return DLK_OK;
}
