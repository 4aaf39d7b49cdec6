/* labels.c - a label manifest (CSV with a header row, or JSON Lines)
 * mapping an object key to its label and other fields, and the number
 * parsing that label values and sidecars share. */
#include "pipeline.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LABELS_MAX ((uint64_t)1 << 30)

static uint64_t hash_str(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

/* Append a cell to the table (takes ownership of text). */
typedef struct table {
    char **cells;
    size_t n, cap;
} table;

static int push(table *t, char *text)
{
    if (!text)
        return -1;
    if (!DLK_GROW(t->cells, t->n, t->cap, 256)) {
        free(text);
        return -1;
    }
    t->cells[t->n++] = text;
    return 0;
}

/* One CSV record from p (RFC 4180 quoting); *p advances past it. */
static int csv_record(const char **pp, const char *end, table *t,
                      size_t *fields)
{
    const char *p = *pp;
    *fields = 0;
    for (;;) {
        char *cell = malloc((size_t)(end - p) + 1);
        if (!cell)
            return -1;
        size_t n = 0;
        if (p < end && *p == '"') {
            p++;
            while (p < end) {
                if (*p == '"') {
                    if (p + 1 < end && p[1] == '"') {
                        cell[n++] = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                cell[n++] = *p++;
            }
        }
        while (p < end && *p != ',' && *p != '\n' && *p != '\r')
            cell[n++] = *p++;
        cell[n] = '\0';
        if (push(t, cell))
            return -1;
        (*fields)++;
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '\r')
            p++;
        if (p < end && *p == '\n')
            p++;
        break;
    }
    *pp = p;
    return 0;
}

static dlk_status parse_csv(const char *p, const char *end, ing_labels *l,
                            table *t, dlk_error *err)
{
    size_t nf;
    if (csv_record(&p, end, t, &nf))
        return Dlk_oom(err);
    l->ncols = nf;
    if (nf < 2 && !l->exact)
        return Dlk_fail(err, DLK_EINVAL, "label manifest '%s': the header "
                        "needs at least two columns (key,label)", l->name);
    size_t line = 1;
    while (p < end) {
        line++;
        if (*p == '\n' || *p == '\r') {
            p++;
            continue;
        }
        if (csv_record(&p, end, t, &nf))
            return Dlk_oom(err);
        if (nf != l->ncols)
            return Dlk_fail(err, DLK_EINVAL, "%s '%s': record %zu has %zu "
                            "fields, the header %zu", l->exact
                            ? "metadata file" : "label manifest", l->name,
                            line, nf, l->ncols);
    }
    return DLK_OK;
}

static char *cell_text(json_t *v)
{
    if (!v || json_is_null(v))
        return strdup("");
    if (json_is_string(v))
        return strdup(json_string_value(v));
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

static dlk_status parse_jsonl(const char *p, const char *end, ing_labels *l,
                              const char *keycol, table *t, dlk_error *err)
{
    size_t line = 0;
    json_t **objs = NULL;
    size_t nobjs = 0, cap = 0;
    dlk_status rc = DLK_OK;
    /* columns: the key first, then every other field in first-seen order */
    json_t *cols = json_array();
    json_array_append_new(cols, json_string(keycol));
    while (!rc && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        line++;
        const char *q = p;
        p = nl ? nl + 1 : end;
        while (q < e && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q == e)
            continue;
        json_error_t je;
        json_t *o = json_loadb(q, (size_t)(e - q), 0, &je);
        if (!json_is_object(o) || !json_is_string(json_object_get(o, keycol))) {
            json_decref(o);
            rc = Dlk_fail(err, DLK_EINVAL, "%s '%s': line %zu is not a JSON "
                          "object with a string \"%s\"", l->exact
                          ? "metadata file" : "label manifest", l->name, line,
                          keycol);
            break;
        }
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
            bool seen = false;
            for (size_t i = 0; i < json_array_size(cols); i++)
                seen |= strcmp(json_string_value(json_array_get(cols, i)),
                               k) == 0;
            if (!seen)
                json_array_append_new(cols, json_string(k));
        }
        if (!DLK_GROW(objs, nobjs, cap, 256)) {
            json_decref(o);
            rc = Dlk_oom(err);
            break;
        }
        objs[nobjs++] = o;
    }
    l->ncols = json_array_size(cols);
    if (!rc) {
        for (size_t c = 0; !rc && c < l->ncols; c++)
            if (push(t, strdup(json_string_value(json_array_get(cols, c)))))
                rc = Dlk_oom(err);
        for (size_t i = 0; !rc && i < nobjs; i++)
            for (size_t c = 0; !rc && c < l->ncols; c++) {
                const char *f = json_string_value(json_array_get(cols, c));
                if (push(t, cell_text(json_object_get(objs[i], f))))
                    rc = Dlk_oom(err);
            }
    }
    for (size_t i = 0; i < nobjs; i++)
        json_decref(objs[i]);
    free(objs);
    json_decref(cols);
    return rc;
}

dlk_status ing_labels_index(ing_labels *l, dlk_error *err)
{
    size_t n = 16;
    while (n < 2 * l->nrows + 1)
        n *= 2;
    l->slots = calloc(n, sizeof *l->slots);
    if (!l->slots)
        return Dlk_oom(err);
    l->nslots = n;
    for (size_t r = 0; r < l->nrows; r++) {
        const char *k = l->cells[r * l->ncols];
        size_t h = (size_t)hash_str(k, strlen(k)) & (n - 1);
        while (l->slots[h]) {
            if (strcmp(l->cells[(l->slots[h] - 1) * l->ncols], k) == 0)
                return Dlk_fail(err, DLK_EINVAL, "%s '%s': %s '%.200s' "
                                "appears twice", l->coco ? "COCO file"
                                : l->exact ? "metadata file"
                                : "label manifest", l->name, l->exact
                                ? "file_name" : "key", k);
            h = (h + 1) & (n - 1);
        }
        l->slots[h] = r + 1;
    }
    return DLK_OK;
}

/* Read a whole object named by a path or URL through the store layer. */
static dlk_status read_path(const char *src, const dlk_store_options *so,
                            Dlk_buf *b, dlk_error *err)
{
    const char *slash = strrchr(src, '/');
    char *dir = slash ? strndup(src, (size_t)(slash - src)) : strdup(".");
    const char *base = slash ? slash + 1 : src;
    if (!dir)
        return Dlk_oom(err);
    if (!*dir) {
        free(dir);
        dir = strdup("/");
    }
    Dlk_store *st = NULL;
    dlk_status rc = Dlk_store_open(dir, false, so, &st, err);
    if (!rc)
        rc = Dlk_store_get(st, base, LABELS_MAX, b, NULL, err);
    if (rc == DLK_ENOTFOUND)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "no such file '%s'", src);
    Dlk_store_free(st);
    free(dir);
    return rc;
}

/* read_path of a manifest the command line names: a local one may be a
 * symbolic link, which the store (following none below its root) would
 * refuse, so it is resolved first. */
dlk_status ing_manifest_read(const char *src, const dlk_store_options *so,
                             Dlk_buf *b, dlk_error *err)
{
    bool remote = strncmp(src, "s3://", 5) == 0 ||
                  strncmp(src, "gs://", 5) == 0;
    char *real = remote ? NULL
                        : realpath(strncmp(src, "file://", 7) == 0 ? src + 7
                                                                   : src,
                                   NULL);
    dlk_status rc = read_path(real ? real : src, so, b, err);
    free(real);
    return rc;
}

dlk_status ing_labels_parse(const void *data, size_t len, const char *name,
                            const char *keycol, bool exact, ing_labels *l,
                            dlk_error *err)
{
    memset(l, 0, sizeof *l);
    l->exact = exact;
    if (!(l->name = strdup(name)))
        return Dlk_oom(err);
    dlk_status rc = DLK_OK;
    table t = {0};
    const char *p = data, *end = p + len;
    if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
        p += 3;
    const char *q = p;
    while (q < end && (*q == ' ' || *q == '\n' || *q == '\r'))
        q++;
    rc = (q < end && *q == '{') ? parse_jsonl(q, end, l, keycol, &t, err)
                                : parse_csv(p, end, l, &t, err);
    if (!rc && (!l->ncols || t.n < l->ncols))
        rc = Dlk_fail(err, DLK_EINVAL, "%s '%s' is empty", exact
                      ? "metadata file" : "label manifest", name);
    if (!rc && !(l->cols = malloc(l->ncols * sizeof *l->cols)))
        rc = Dlk_oom(err);
    if (rc) {
        for (size_t i = 0; i < t.n; i++)
            free(t.cells[i]);
        free(t.cells);
        free(l->name);
        memset(l, 0, sizeof *l);
        return rc;
    }
    /* the header row becomes cols */
    l->nrows = t.n / l->ncols - 1;
    memcpy(l->cols, t.cells, l->ncols * sizeof *l->cols);
    memmove(t.cells, t.cells + l->ncols,
            l->nrows * l->ncols * sizeof *t.cells);
    l->cells = t.cells;
    l->label_col = -1;
    /* a CSV's key column may be anywhere (file_name): moved first */
    size_t kc = 0;
    while (kc < l->ncols && strcmp(l->cols[kc], keycol))
        kc++;
    if (exact && kc == l->ncols) {
        rc = Dlk_fail(err, DLK_EINVAL, "metadata file '%s' has no column "
                      "'%s'", name, keycol);
        ing_labels_free(l);
        return rc;
    }
    if (exact && kc) {
        char *x = l->cols[0];
        l->cols[0] = l->cols[kc];
        l->cols[kc] = x;
        for (size_t r = 0; r < l->nrows; r++) {
            x = l->cells[r * l->ncols];
            l->cells[r * l->ncols] = l->cells[r * l->ncols + kc];
            l->cells[r * l->ncols + kc] = x;
        }
    }
    for (size_t c = 1; c < l->ncols; c++)
        if (l->label_col < 0 && (strcmp(l->cols[c], "label") == 0 ||
                                 strcmp(l->cols[c], "labels") == 0 ||
                                 strcmp(l->cols[c], "class") == 0))
            l->label_col = (int)c;
    /* a label manifest's second column is its label; a metadata file
     * has one only by name */
    if (l->label_col < 0 && !exact)
        l->label_col = 1;
    return DLK_OK;
}

dlk_status ing_labels_load(const char *src, const dlk_store_options *so,
                           ing_labels *l, dlk_error *err)
{
    memset(l, 0, sizeof *l);
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = ing_manifest_read(src, so, &b, err);
    if (!rc)
        rc = ing_labels_parse(b.data, b.len, src, "key", false, l, err);
    Dlk_buf_free(&b);
    if (!rc && (rc = ing_labels_index(l, err)))
        ing_labels_free(l);
    return rc;
}

void ing_labels_free(ing_labels *l)
{
    for (size_t i = 0; l->cols && i < l->ncols; i++)
        free(l->cols[i]);
    for (size_t i = 0; l->cells && i < l->nrows * l->ncols; i++)
        free(l->cells[i]);
    free(l->cols);
    free(l->cells);
    free(l->slots);
    free(l->name);
    memset(l, 0, sizeof *l);
}

static ssize_t lookup(const ing_labels *l, const char *k, size_t n)
{
    if (!l->nslots)
        return -1;
    size_t h = (size_t)hash_str(k, n) & (l->nslots - 1);
    while (l->slots[h]) {
        const char *c = l->cells[(l->slots[h] - 1) * l->ncols];
        if (strlen(c) == n && memcmp(c, k, n) == 0)
            return (ssize_t)(l->slots[h] - 1);
        h = (h + 1) & (l->nslots - 1);
    }
    return -1;
}

ssize_t ing_labels_find(const ing_labels *l, const char *key,
                        size_t stem_len)
{
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    ssize_t r = lookup(l, key, strlen(key));
    if (l->exact)
        return r;
    if (r < 0)
        r = lookup(l, key, stem_len);
    if (r < 0 && base != key)
        r = lookup(l, base, strlen(base));
    if (r < 0 && base != key && key + stem_len > base)
        r = lookup(l, base, (size_t)(key + stem_len - base));
    return r;
}

int ing_parse_numbers(const char *text, double *v, size_t cap, size_t *n,
                      size_t *inner)
{
    const char *p = text;
    int depth = 0, maxdepth = 0;
    size_t count = 0, row = 0, rowlen = 0;
    *inner = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' ||
               *p == ',')
            p++;
        if (!*p)
            break;
        if (*p == '[') {
            if (++depth > 2)
                return -1;
            if (depth > maxdepth)
                maxdepth = depth;
            row = 0;
            p++;
            continue;
        }
        if (*p == ']') {
            if (depth-- == 0)
                return -1;
            if (depth == 1) {
                if (rowlen && row != rowlen)
                    return -1;
                rowlen = row;
            }
            p++;
            continue;
        }
        char *e;
        errno = 0;
        double d;
        if (strncmp(p, "true", 4) == 0) {
            d = 1;
            e = (char *)p + 4;
        } else if (strncmp(p, "false", 5) == 0) {
            d = 0;
            e = (char *)p + 5;
        } else {
            d = strtod(p, &e);
        }
        if (e == p || errno == ERANGE || !isfinite(d))
            return -1;
        if (count == cap)
            return -1;
        v[count++] = d;
        row++;
        p = e;
        if (*p && !strchr(" \t\r\n,]", *p))
            return -1;
    }
    if (depth)
        return -1;
    *n = count;
    *inner = maxdepth == 2 ? rowlen : 0;
    return 0;
}
