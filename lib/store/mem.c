/* mem.c - a read-only store over objects in the caller's memory
 * (dlk_ingest_opts.objects): an ingest source whose objects come from a
 * table the caller read (a Parquet file's rows), listed, read and
 * ranged as a directory's files are, so that the rest of ingest does not
 * know the difference.  Nothing is copied at open but the index.  An
 * object given without its bytes is read through the caller's
 * read_object when a get needs it (a table too large to hold). */
#include "util/error.h"
#include "util/buf.h"
#include "util/keys.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mem_store {
    Dlk_store base;
    const dlk_ingest_object **objs; /* sorted by key */
    size_t n;
    const dlk_ingest_object *given; /* objs' array, for their indices */
    Dlk_mem_read read;
    void *read_ud;
} mem_store;

static int obj_cmp(const void *a, const void *b)
{
    return strcmp((*(const dlk_ingest_object *const *)a)->key,
                  (*(const dlk_ingest_object *const *)b)->key);
}

static const dlk_ingest_object *find(const mem_store *m, const char *key)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->objs[mid]->key, key);
        if (c == 0)
            return m->objs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void fill_info(const dlk_ingest_object *o, Dlk_obj_info *info)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->size = o->len;
    snprintf(info->etag, sizeof info->etag, "%s", o->version ? o->version : "");
}

/* Bytes [off, off + n) of o, which the caller reads when asked: the
 * whole object read, into out's free space when it is all of it. */
static dlk_status read_range(const mem_store *m, const dlk_ingest_object *o,
                             uint64_t off, uint64_t n, Dlk_buf *out,
                             dlk_error *err)
{
    bool whole = off == 0 && n == o->len;
    Dlk_buf tmp = {0};
    Dlk_buf *into = whole ? out : &tmp;
    dlk_status rc = Dlk_buf_reserve(into, o->len, err);
    if (rc)
        return rc;
    char why[256] = "";
    if (m->read(m->read_ud, (size_t)(o - m->given), into->data + into->len,
                o->len, why, sizeof why)) {
        why[sizeof why - 1] = 0;
        Dlk_buf_free(&tmp);
        return Dlk_fail(err, DLK_EIO, "object '%s' was not read: %s", o->key,
                        why[0] ? why : "the caller's read failed");
    }
    if (whole) {
        out->len += o->len;
        return DLK_OK;
    }
    rc = Dlk_buf_append(out, tmp.data + off, (size_t)n, err);
    Dlk_buf_free(&tmp);
    return rc;
}

static dlk_status mem_get(Dlk_store *s, const char *key, uint64_t off,
                          uint64_t len, uint64_t max, Dlk_buf *out,
                          Dlk_obj_info *info, dlk_error *err)
{
    const dlk_ingest_object *o = find((const mem_store *)s, key);
    if (!o)
        return Dlk_fail(err, DLK_ENOTFOUND, "no object '%s' in the source",
                        key);
    uint64_t size = o->len;
    if (off > size || (len != UINT64_MAX && len > size - off))
        return Dlk_fail(err, DLK_ECORRUPT, "short object '%s': range "
                        "%llu+%llu past its %llu bytes", key,
                        (unsigned long long)off, (unsigned long long)len,
                        (unsigned long long)size);
    uint64_t n = len == UINT64_MAX ? size - off : len;
    if (n > max)
        return Dlk_fail(err, DLK_ELIMIT, "object '%s' is %llu bytes, over "
                        "the limit of %llu", key, (unsigned long long)n,
                        (unsigned long long)max);
    dlk_status rc = o->data || !size
                        ? Dlk_buf_append(out, (const uint8_t *)o->data + off,
                                         (size_t)n, err)
                        : read_range((const mem_store *)s, o, off, n, out,
                                     err);
    if (!rc)
        fill_info(o, info);
    return rc;
}

static dlk_status mem_head(Dlk_store *s, const char *key, Dlk_obj_info *info,
                           dlk_error *err)
{
    const dlk_ingest_object *o = find((const mem_store *)s, key);
    if (!o)
        return Dlk_fail(err, DLK_ENOTFOUND, "no object '%s' in the source",
                        key);
    fill_info(o, info);
    return DLK_OK;
}

static dlk_status read_only(Dlk_store *s, const char *key, dlk_error *err)
{
    return Dlk_fail(err, DLK_EINVAL, "'%s' in '%s': the caller's objects "
                    "are read-only", key, s->url);
}

static dlk_status mem_put(Dlk_store *s, const char *key, const void *data,
                          size_t len, Dlk_put_mode mode, const char *etag,
                          Dlk_obj_info *out, dlk_error *err)
{
    (void)data, (void)len, (void)mode, (void)etag, (void)out;
    return read_only(s, key, err);
}

static dlk_status mem_del(Dlk_store *s, const char *key, dlk_error *err)
{
    return read_only(s, key, err);
}

static dlk_status mem_list_versions(Dlk_store *s, const char *prefix,
                                    Dlk_list_version_fn fn, void *ud,
                                    dlk_error *err)
{
    (void)err;
    const mem_store *m = (const mem_store *)s;
    size_t pn = strlen(prefix);
    for (size_t i = 0; i < m->n; i++) {
        const dlk_ingest_object *o = m->objs[i];
        if (strncmp(o->key, prefix, pn) != 0)
            continue;
        __atomic_add_fetch(&s->listed, 1, __ATOMIC_RELAXED);
        if (fn(ud, o->key, o->len, o->version ? o->version : ""))
            break;
    }
    return DLK_OK;
}

typedef struct unversioned {
    Dlk_list_fn fn;
    void *ud;
} unversioned;

static int drop_version(void *ud, const char *key, uint64_t size,
                        const char *version)
{
    (void)version;
    const unversioned *u = ud;
    return u->fn(u->ud, key, size);
}

static dlk_status mem_list(Dlk_store *s, const char *prefix, Dlk_list_fn fn,
                           void *ud, dlk_error *err)
{
    unversioned u = {fn, ud};
    return mem_list_versions(s, prefix, drop_version, &u, err);
}

static void mem_free(Dlk_store *s)
{
    mem_store *m = (mem_store *)s;
    free(m->objs);
    free(m->base.url);
    free(m);
}

static const Dlk_store_ops mem_ops = {
    .scheme = "mem", .get = mem_get, .head = mem_head, .put = mem_put,
    .del = mem_del, .list = mem_list, .free = mem_free,
    .list_versions = mem_list_versions,
};

dlk_status Dlk_store_open_mem(const char *url, const dlk_ingest_object *objs,
                              size_t n, Dlk_mem_read read, void *read_ud,
                              Dlk_store **out, dlk_error *err)
{
    *out = NULL;
    if (n && !objs)
        return Dlk_fail(err, DLK_EINVAL, "%zu objects given and no array "
                        "of them", n);
    mem_store *m = calloc(1, sizeof *m);
    if (!m || !(m->base.url = strdup(url ? url : "")) ||
        !(m->objs = malloc((n ? n : 1) * sizeof *m->objs))) {
        if (m)
            free(m->base.url);
        free(m);
        return Dlk_oom(err);
    }
    m->base.ops = &mem_ops;
    m->given = objs;
    m->read = read;
    m->read_ud = read_ud;
    for (size_t i = 0; i < n; i++) {
        if (!objs[i].key || (objs[i].len && !objs[i].data && !read)) {
            mem_free(&m->base);
            return Dlk_fail(err, DLK_EINVAL, "object %zu of the source has "
                            "no %s", i, objs[i].key ? "data" : "key");
        }
        m->objs[i] = &objs[i];
    }
    m->n = n;
    qsort(m->objs, n, sizeof *m->objs, obj_cmp);
    for (size_t i = 1; i < n; i++)
        if (strcmp(m->objs[i - 1]->key, m->objs[i]->key) == 0) {
            char safe[512];
            Dlk_key_escape(m->objs[i]->key, safe, sizeof safe);
            mem_free(&m->base);
            return Dlk_fail(err, DLK_EINVAL, "two objects of the source have "
                            "the key '%s'", safe);
        }
    *out = &m->base;
    return DLK_OK;
}
