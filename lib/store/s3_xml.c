/* s3_xml.c - the few S3 XML documents the store reads, parsed with expat:
 * <Error> bodies, ListObjectsV2 pages, and single values (UploadId,
 * ETag).  Element text is bounded; a document that breaks a bound or is
 * not well-formed is an error, never a crash. */
#include "s3_internal.h"
#include "util/attr.h"
#include "util/error.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XML_TEXT_MAX 8192   /* longest element text kept */
#define XML_DEPTH_MAX 16

typedef struct xml_walk {
    int depth;
    const char *names[XML_DEPTH_MAX];   /* local names, own copies */
    char text[XML_TEXT_MAX];
    size_t tlen;
    bool too_long;
    /* called at each element end with its local name, depth, text */
    int (*end)(struct xml_walk *w, const char *name, const char *text);
    void *ud;
    int stop;       /* non-zero: the callback asked to stop */
    bool broken;    /* a bound was broken: ignore the rest */
    XML_Parser p;
} xml_walk;

/* "{ns}Name" or "ns:Name" → "Name" */
static const char *local_name(const char *n)
{
    const char *c = strrchr(n, '}');
    if (c)
        return c + 1;
    c = strrchr(n, ':');
    return c ? c + 1 : n;
}

static void XMLCALL on_start(void *ud, const XML_Char *name,
                             const XML_Char **atts)
{
    xml_walk *w = ud;
    (void)atts;
    if (w->broken || w->stop)
        return;
    char *n = w->depth < XML_DEPTH_MAX ? strdup(local_name(name)) : NULL;
    if (!n) {
        w->broken = true;
        XML_StopParser(w->p, XML_FALSE);
        return;
    }
    w->names[w->depth++] = n;
    w->tlen = 0;
    w->too_long = false;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    xml_walk *w = ud;
    (void)name;
    if (w->broken || w->stop || w->depth <= 0)
        return;
    w->text[w->tlen] = '\0';
    const char *n = w->names[w->depth - 1];
    int r = w->end && !w->too_long ? w->end(w, n, w->text) : 0;
    free((void *)w->names[--w->depth]);
    w->tlen = 0;
    if (r) {
        w->stop = r;
        XML_StopParser(w->p, XML_FALSE);
    }
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    xml_walk *w = ud;
    if (len <= 0 || w->broken || w->stop)
        return;
    if ((size_t)len > sizeof w->text - 1 - w->tlen) {
        w->too_long = true;
        return;
    }
    memcpy(w->text + w->tlen, s, (size_t)len);
    w->tlen += (size_t)len;
}

/* Parse; true when well-formed (or stopped by the callback). */
static bool xml_run(xml_walk *w, const void *body, size_t len)
{
    if (len > (size_t)1 << 30)
        return false;
    w->p = XML_ParserCreate(NULL);
    if (!w->p)
        return false;
    XML_SetUserData(w->p, w);
    XML_SetElementHandler(w->p, on_start, on_end);
    XML_SetCharacterDataHandler(w->p, on_text);
    enum XML_Status st = XML_Parse(w->p, body, (int)len, XML_TRUE);
    bool ok = !w->broken && (st == XML_STATUS_OK || w->stop);
    XML_ParserFree(w->p);
    while (w->depth > 0)
        free((void *)w->names[--w->depth]);
    return ok;
}

static const char *parent(const xml_walk *w)
{
    return w->depth >= 2 ? w->names[w->depth - 2] : "";
}

static void copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- <Error> -------------------------------------------------------- */

typedef struct err_ud {
    s3_error_info *info;
    bool is_error;
} err_ud;

static int err_end(xml_walk *w, const char *name, const char *text)
{
    err_ud *u = w->ud;
    if (w->depth == 1 && strcmp(name, "Error") == 0)
        u->is_error = true;
    if (strcmp(parent(w), "Error") != 0)
        return 0;
    if (strcmp(name, "Code") == 0)
        copy_text(u->info->code, sizeof u->info->code, text);
    else if (strcmp(name, "RequestId") == 0)
        copy_text(u->info->request_id, sizeof u->info->request_id, text);
    return 0;
}

bool s3_xml_error(const void *body, size_t len, s3_error_info *out)
{
    memset(out, 0, sizeof *out);
    if (!body || !len)
        return false;
    err_ud u = {out, false};
    xml_walk w = {.end = err_end, .ud = &u};
    if (!xml_run(&w, body, len))
        return false;
    /* codes are identifiers: keep them printable */
    for (char *p = out->code; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            *p = '?';
    for (char *p = out->request_id; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            *p = '?';
    return u.is_error;
}

/* ---- a single value -------------------------------------------------- */

typedef struct find_ud {
    const char *name;
    char *out;
    size_t cap;
    bool found;
} find_ud;

static int find_end(xml_walk *w, const char *name, const char *text)
{
    find_ud *u = w->ud;
    if (strcmp(name, u->name) != 0)
        return 0;
    copy_text(u->out, u->cap, text);
    u->found = true;
    return 1;
}

bool s3_xml_find(const void *body, size_t len, const char *name, char *out,
                 size_t cap)
{
    if (!cap)
        return false;
    out[0] = '\0';
    if (!body || !len)
        return false;
    find_ud u = {name, out, cap, false};
    xml_walk w = {.end = find_end, .ud = &u};
    return xml_run(&w, body, len) && u.found;
}

/* The next page's token, when it comes before the page's entries */
static int token_end(xml_walk *w, const char *name, const char *text)
{
    find_ud *u = w->ud;
    if (w->depth == 2 && strcmp(name, "NextContinuationToken") == 0) {
        if (*text && strlen(text) < u->cap) {
            memcpy(u->out, text, strlen(text) + 1);
            u->found = true;
        }
        return 1;
    }
    return w->depth >= 3; /* the first entry's field: the token is not first */
}

bool s3_xml_list_token(const void *body, size_t len, char *out, size_t cap)
{
    if (!cap)
        return false;
    out[0] = '\0';
    if (!body || !len)
        return false;
    find_ud u = {"NextContinuationToken", out, cap, false};
    xml_walk w = {.end = token_end, .ud = &u};
    bool ok = xml_run(&w, body, len) && u.found;
    if (!ok)
        out[0] = '\0';
    return ok;
}

/* ---- ListObjectsV2 --------------------------------------------------- */

typedef struct list_ud {
    s3_list_page *page;
    bool encoded;          /* <EncodingType>url</EncodingType> seen */
    char **keys;           /* this page's entries, called back at the end */
    uint64_t *sizes;
    char **etags;
    size_t n, cap;
    char key[XML_TEXT_MAX];
    char etag[DLK_ETAG_MAX];
    bool have_key;
    uint64_t size;
    bool bad;              /* a malformed field */
    bool oom;
    bool is_list;
    char **pfx;            /* CommonPrefixes (with a delimiter) */
    size_t npfx, pfx_cap;
} list_ud;

static bool add_prefix(list_ud *u, const char *text)
{
    if (u->npfx == u->pfx_cap) {
        size_t cap = u->pfx_cap ? u->pfx_cap * 2 : 64;
        char **v = realloc(u->pfx, cap * sizeof *v);
        if (!v)
            return false;
        u->pfx = v;
        u->pfx_cap = cap;
    }
    return (u->pfx[u->npfx] = strdup(text)) && ++u->npfx;
}

static bool add_entry(list_ud *u)
{
    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 256;
        char **k = realloc(u->keys, cap * sizeof *k);
        if (!k)
            return false;
        u->keys = k;
        uint64_t *sz = realloc(u->sizes, cap * sizeof *sz);
        if (!sz)
            return false;
        u->sizes = sz;
        char **e = realloc(u->etags, cap * sizeof *e);
        if (!e)
            return false;
        u->etags = e;
        u->cap = cap;
    }
    if (!(u->keys[u->n] = strdup(u->key)))
        return false;
    if (!(u->etags[u->n] = strdup(u->etag))) {
        free(u->keys[u->n]);
        return false;
    }
    u->sizes[u->n++] = u->size;
    return true;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* In-place url-decoding ('+' is a space), as S3's encoding-type=url;
 * never longer than the text. */
static bool url_decode(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '+') {
            *o++ = ' ';
        } else if (*p == '%') {
            int h = hexval((unsigned char)p[1]);
            int l = h < 0 ? -1 : hexval((unsigned char)p[2]);
            if (l < 0)
                return false;
            if (h == 0 && l == 0) {
                /* a NUL cannot live in a C string: the overlong C0 80
                 * keeps the key whole and makes it invalid UTF-8, so it
                 * is refused (Dlk_key_problem) instead of read short */
                *o++ = (char)0xC0;
                *o++ = (char)0x80;
            } else {
                *o++ = (char)(h * 16 + l);
            }
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return true;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

static int list_end(xml_walk *w, const char *name, const char *text)
{
    list_ud *u = w->ud;
    const char *par = parent(w);
    if (w->depth == 1) {
        u->is_list = strcmp(name, "ListBucketResult") == 0;
        return 0;
    }
    if (w->depth == 2) {
        if (strcmp(name, "IsTruncated") == 0)
            u->page->truncated = strcmp(text, "true") == 0;
        else if (strcmp(name, "EncodingType") == 0)
            u->encoded = strcmp(text, "url") == 0;
        else if (strcmp(name, "NextContinuationToken") == 0 && *text) {
            free(u->page->next_token);
            if (!(u->page->next_token = strdup(text))) {
                u->oom = true;
                return 1;
            }
        } else if (strcmp(name, "Contents") == 0) {
            if (!u->have_key) {
                u->bad = true;
                return 1;
            }
            u->have_key = false;
            if (u->n >= 100000 || !add_entry(u)) {   /* S3 sends 1000 */
                u->oom = true;
                return 1;
            }
        }
        return 0;
    }
    if (w->depth == 3 && strcmp(par, "CommonPrefixes") == 0 &&
        strcmp(name, "Prefix") == 0) {
        if (u->npfx >= 100000 || !add_prefix(u, text)) {
            u->oom = true;
            return 1;
        }
        return 0;
    }
    if (w->depth == 3 && strcmp(par, "Contents") == 0) {
        if (strcmp(name, "Key") == 0) {
            copy_text(u->key, sizeof u->key, text);
            u->have_key = true;
            u->size = 0;
            u->etag[0] = '\0';
        } else if (strcmp(name, "ETag") == 0) {
            /* the version of the object; quotes are not part of it */
            size_t n = strlen(text);
            bool q = n >= 2 && text[0] == '"' && text[n - 1] == '"';
            snprintf(u->etag, sizeof u->etag, "%.*s",
                     (int)(q ? n - 2 : n), q ? text + 1 : text);
        } else if (strcmp(name, "Size") == 0 && !parse_u64(text, &u->size)) {
            u->bad = true;
            return 1;
        }
    }
    return 0;
}

typedef struct plain_ud {
    s3_list_item_fn fn;
    void *ud;
} plain_ud;

static int plain_item(void *ud, const char *key, uint64_t size,
                      const char *etag)
{
    plain_ud *p = ud;
    DLK_UNUSED(etag);
    return p->fn(p->ud, key, size);
}

dlk_status s3_xml_list(const void *body, size_t len, s3_list_item_fn fn,
                       void *ud, s3_list_page *page, const char *what,
                       dlk_error *err)
{
    plain_ud p = {fn, ud};
    return s3_xml_list_etags(body, len, plain_item, &p, page, what, err);
}

dlk_status s3_xml_list_etags(const void *body, size_t len, s3_list_etag_fn fn,
                             void *ud, s3_list_page *page, const char *what,
                             dlk_error *err)
{
    memset(page, 0, sizeof *page);
    list_ud *u = calloc(1, sizeof *u);
    xml_walk *w = calloc(1, sizeof *w);
    dlk_status rc = DLK_OK;
    if (!u || !w) {
        rc = Dlk_fail(err, DLK_ENOMEM, "out of memory listing '%s'", what);
        goto out;
    }
    u->page = page;
    w->end = list_end;
    w->ud = u;
    bool ok = xml_run(w, body, len);
    /* <EncodingType> may come after the entries (moto): decode last */
    for (size_t i = 0; ok && !u->bad && u->encoded && i < u->n; i++)
        if (!url_decode(u->keys[i]))
            u->bad = true;
    for (size_t i = 0; ok && !u->bad && u->encoded && i < u->npfx; i++)
        if (!url_decode(u->pfx[i]))
            u->bad = true;
    if (u->oom)
        rc = Dlk_fail(err, DLK_ENOMEM, "out of memory listing '%s'", what);
    else if (!ok || u->bad || !u->is_list)
        rc = Dlk_fail(err, DLK_ECORRUPT, "cannot list '%s': malformed "
                      "ListObjectsV2 response", what);
    else if (page->truncated && !page->next_token)
        rc = Dlk_fail(err, DLK_ECORRUPT, "cannot list '%s': truncated "
                      "listing without a continuation token", what);
    for (size_t i = 0; !rc && i < u->n; i++) {
        int r = fn(ud, u->keys[i], u->sizes[i], u->etags[i]);
        if (r) {
            page->stopped = r;
            break;
        }
    }
    if (!rc) {
        page->prefixes = u->pfx;
        page->nprefixes = u->npfx;
        u->pfx = NULL;
        u->npfx = 0;
    }
out:
    if (u) {
        for (size_t i = 0; i < u->n; i++) {
            free(u->keys[i]);
            free(u->etags[i]);
        }
        free(u->keys);
        free(u->sizes);
        free(u->etags);
        for (size_t i = 0; i < u->npfx; i++)
            free(u->pfx[i]);
        free(u->pfx);
    }
    if (rc) {
        free(page->next_token);
        page->next_token = NULL;
    }
    free(u);
    free(w);
    return rc;
}

void s3_list_page_fini(s3_list_page *page)
{
    free(page->next_token);
    for (size_t i = 0; i < page->nprefixes; i++)
        free(page->prefixes[i]);
    free(page->prefixes);
    memset(page, 0, sizeof *page);
}
