/* source.c - listing a source (an S3 prefix or a local tree, both through
 * the store interface: paginated on S3) and grouping its objects by key
 * stem into rows, in sorted stem order. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *ext;
    ing_role role;
} roles[] = {
    {"jpg", ING_IMAGE}, {"jpeg", ING_IMAGE}, {"png", ING_IMAGE},
    {"mp4", ING_VIDEO}, {"m4v", ING_VIDEO}, {"mov", ING_VIDEO},
    {"mkv", ING_VIDEO}, {"webm", ING_VIDEO}, {"avi", ING_VIDEO},
    {"cls", ING_CLS}, {"txt", ING_TXT}, {"json", ING_JSON},
    {"npy", ING_NPY},
};

static bool hidden(const char *key)
{
    for (const char *p = key; p; p = strchr(p, '/')) {
        if (*p == '/')
            p++;
        if (*p == '.')
            return true;
    }
    return false;
}

/* A key that cannot be used safely: "a/../b" would be read as "b" by a
 * path normaliser, a NUL would cut it short, and control bytes or bad
 * UTF-8 cannot be printed or put in JSON.  Kept (escaped) to be reported
 * as skipped; a "." segment is only a hidden name. */
#define UNSAFE_KEPT 100000
static int add_unsafe(ing_source *s, const char *key, const char *why)
{
    if (s->nunsafe >= UNSAFE_KEPT)
        return 0;
    if (s->nunsafe % 64 == 0) {
        struct ing_unsafe *v =
            realloc(s->unsafe, (s->nunsafe + 64) * sizeof *v);
        if (!v)
            return s->oom = true;
        s->unsafe = v;
    }
    char safe[512];
    dlk_key_escape(key, safe, sizeof safe);
    if (!(s->unsafe[s->nunsafe].key = strdup(safe)))
        return s->oom = true;
    s->unsafe[s->nunsafe++].why = why;
    return 0;
}

static int add_obj(void *ud, const char *key, uint64_t size)
{
    ing_source *s = ud;
    const char *why = dlk_key_problem(key);
    if (why)
        return add_unsafe(s, key, why);
    if (hidden(key))
        return 0;
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    const char *dot = strrchr(base, '.');
    ing_role role = ING_NONE;
    for (size_t i = 0; dot && i < sizeof roles / sizeof roles[0]; i++)
        if (strcasecmp(dot + 1, roles[i].ext) == 0)
            role = roles[i].role;
    if (role == ING_NONE || dot == base) {
        s->ignored++;
        return 0;
    }
    if (s->nobjs == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        ing_obj *v = realloc(s->objs, cap * sizeof *v);
        if (!v)
            return s->oom = true;
        s->objs = v;
        s->cap = cap;
    }
    ing_obj *o = &s->objs[s->nobjs];
    memset(o, 0, sizeof *o);
    if (!(o->key = strdup(key)))
        return s->oom = true;
    o->size = size;
    o->role = role;
    o->stem_len = (uint32_t)(dot - key);
    if (role == ING_NPY) {
        /* "0001.images.npy": stem "0001", tensor "images" */
        s->npy++;
        const char *d2 = dot;
        while (d2 > base && d2[-1] != '.')
            d2--;
        if (d2 > base + 1 && (size_t)(dot - d2) <= DLK_NAME_MAX) {
            memcpy(o->tensor, d2, (size_t)(dot - d2));
            o->tensor[dot - d2] = '\0';
            o->stem_len = (uint32_t)(d2 - 1 - key);
        }
    }
    s->nobjs++;
    return 0;
}

static int stem_cmp(const ing_obj *a, const ing_obj *b)
{
    size_t n = a->stem_len < b->stem_len ? a->stem_len : b->stem_len;
    int c = memcmp(a->key, b->key, n);
    if (c)
        return c;
    return (a->stem_len > b->stem_len) - (a->stem_len < b->stem_len);
}

static int obj_cmp(const void *pa, const void *pb)
{
    const ing_obj *a = pa, *b = pb;
    int c = stem_cmp(a, b);
    return c ? c : strcmp(a->key, b->key);
}

static int unsafe_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ing_unsafe *)a)->key,
                  ((const struct ing_unsafe *)b)->key);
}

dlk_status ing_source_open(const char *url, ing_source *s, dlk_error *err)
{
    memset(s, 0, sizeof *s);
    dlk_status rc = dlk_store_open(url, false, &s->store, err);
    if (rc == DLK_ENOTFOUND)
        return dlk_fail(err, DLK_ENOTFOUND, "no source at '%s'", url);
    if (rc)
        return dlk_fail_wrap(err, "source");
    rc = dlk_store_list_wide(s->store, "", add_obj, s, err);
    if (!rc && s->oom)
        rc = dlk_fail(err, DLK_ENOMEM, "out of memory listing '%s'", url);
    if (rc) {
        ing_source_free(s);
        return rc;
    }
    /* in stem order already, unless a stem is followed by a byte below
     * '.' ("a.jpg" before "a-b.jpg" by stem, after it by key) */
    bool sorted = true;
    for (size_t i = 1; sorted && i < s->nobjs; i++)
        sorted = obj_cmp(&s->objs[i - 1], &s->objs[i]) <= 0;
    if (!sorted)
        qsort(s->objs, s->nobjs, sizeof *s->objs, obj_cmp);
    if (s->nunsafe)
        qsort(s->unsafe, s->nunsafe, sizeof *s->unsafe, unsafe_cmp);
    size_t nrows = 0;
    for (size_t i = 0; i < s->nobjs; i++)
        nrows += i == 0 || stem_cmp(&s->objs[i - 1], &s->objs[i]) != 0;
    s->rows = calloc(nrows ? nrows : 1, sizeof *s->rows);
    if (!s->rows) {
        ing_source_free(s);
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->nobjs; i++) {
        if (i == 0 || stem_cmp(&s->objs[i - 1], &s->objs[i]) != 0)
            s->rows[s->nrows++].first = i;
        s->rows[s->nrows - 1].n++;
    }
    return DLK_OK;
}

void ing_source_free(ing_source *s)
{
    for (size_t i = 0; i < s->nobjs; i++)
        free(s->objs[i].key);
    free(s->objs);
    free(s->rows);
    for (size_t i = 0; i < s->nunsafe; i++)
        free(s->unsafe[i].key);
    free(s->unsafe);
    dlk_store_free(s->store);
    memset(s, 0, sizeof *s);
}

const char *ing_row_stem(const ing_source *s, size_t row, size_t *len)
{
    const ing_obj *o = &s->objs[s->rows[row].first];
    *len = o->stem_len;
    return o->key;
}

int ing_row_cmp(const ing_source *s, size_t row, const char *stem)
{
    size_t len;
    const char *p = ing_row_stem(s, row, &len);
    size_t sl = strlen(stem);
    int c = memcmp(p, stem, len < sl ? len : sl);
    if (c)
        return c;
    return (len > sl) - (len < sl);
}

int ing_parent_folder(const char *key, char *out, size_t cap)
{
    const char *slash = strrchr(key, '/');
    if (!slash)
        return -1;
    const char *start = slash;
    while (start > key && start[-1] != '/')
        start--;
    size_t n = (size_t)(slash - start);
    if (n == 0 || n >= cap)
        return -1;
    memcpy(out, start, n);
    out[n] = '\0';
    return 0;
}
