/* s3_list.c - listings on the S3 store: ListObjectsV2 page by page, with
 * the next page asked for while this one is parsed, and the wide listing,
 * which lists a prefix's folders in ranges at once.  Keys come back
 * relative to the store's root; keys outside it are dropped. */
#include "s3_store.h"
#include "util/attr.h"
#include "util/error.h"
#include "util/hash.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- continuation tokens -------------------------------------------- */

int list_tokens_add(list_tokens *t, const char *token)
{
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        uint64_t *h = calloc(cap, sizeof *h);
        if (!h)
            return -1;
        for (size_t i = 0; i < t->cap; i++)
            for (size_t j = t->h[i] % cap; t->h[i]; j = (j + 1) % cap)
                if (!h[j]) {
                    h[j] = t->h[i];
                    break;
                }
        free(t->h);
        t->h = h;
        t->cap = cap;
    }
    uint64_t x = Dlk_hash64(token, strlen(token));
    x += !x; /* 0 marks an empty place */
    size_t j = x % t->cap;
    for (; t->h[j]; j = (j + 1) % t->cap)
        if (t->h[j] == x)
            return 0;
    t->h[j] = x;
    t->n++;
    return 1;
}

void list_tokens_free(list_tokens *t)
{
    free(t->h);
    memset(t, 0, sizeof *t);
}

/* ---- list ----------------------------------------------------------- */

typedef struct list_ctx {
    const s3_store *s;
    Dlk_list_fn fn;
    void *ud;
    size_t strip;     /* bytes of "PREFIX/" to drop from each key */
} list_ctx;

/* Whether a listed key is below the store's root ("PREFIX/", strip
 * bytes of it); others are not ours. */
static bool below_root(const s3_store *s, size_t strip, const char *key)
{
    return strlen(key) > strip &&
           (!strip || (strncmp(key, s3_store_prefix(s), strip - 1) == 0 &&
                       key[strip - 1] == '/'));
}

static int list_item(void *ud, const char *key, uint64_t size,
                     const char *etag)
{
    list_ctx *c = ud;
    DLK_UNUSED(etag);
    if (!below_root(c->s, c->strip, key))
        return 0;
    return c->fn(c->ud, key + c->strip, size);
}

/* The query of a ListObjectsV2 page, its parameters in name order. */
static dlk_status list_query(Dlk_buf *q, const char *full, const char *token,
                             const char *start_after, bool delimit,
                             dlk_error *err)
{
    q->len = 0;
    dlk_status rc = DLK_OK;
    if (token) {
        rc = s3_str_append(q, "continuation-token=", err);
        if (!rc)
            rc = s3_enc_append(q, token, false, err);
        if (!rc)
            rc = s3_str_append(q, "&", err);
    }
    if (!rc && delimit)
        rc = s3_str_append(q, "delimiter=%2F&", err);
    if (!rc)
        rc = s3_str_append(q, "encoding-type=url&list-type=2", err);
    if (!rc && *full) {
        rc = s3_str_append(q, "&prefix=", err);
        if (!rc)
            rc = s3_enc_append(q, full, false, err);
    }
    if (!rc && start_after && !token) {
        rc = s3_str_append(q, "&start-after=", err);
        if (!rc)
            rc = s3_enc_append(q, start_after, false, err);
    }
    return rc ? rc : s3_terminate(q, err);
}

/* Check a listing's answer and parse its page. */
static dlk_status list_answer(s3_store *s, s3_req *r, const char *full,
                              const Dlk_buf *resp, s3_list_etag_fn fn,
                              void *ud, s3_list_page *page, dlk_error *err)
{
    memset(page, 0, sizeof *page);
    if (!s3_ok2xx(r))
        return s3_store_fail(s, r, "list", full, err);
    if (r->over_limit || r->short_body)
        return Dlk_fail(err, DLK_ENET, "cannot list 's3://%s/%s': bad "
                        "answer size", s3_store_bucket(s), full);
    char what[1200];
    snprintf(what, sizeof what, "s3://%s/%s", s3_store_bucket(s), full);
    return s3_xml_list_etags(resp->data, resp->len, fn, ud, page, what, err);
}

/* "PREFIX/" + prefix, or just prefix at the bucket's root. */
static char *full_prefix(const s3_store *s, const char *prefix)
{
    const char *root = s3_store_prefix(s);
    size_t n = strlen(root) + strlen(prefix) + 2;
    char *full = malloc(n);
    if (full)
        snprintf(full, n, "%s%s%s", root, *root ? "/" : "", prefix);
    return full;
}

/* ---- pages of a listing --------------------------------------------
 * A listing's pages come one after another (each needs the last one's
 * token).  The next page is asked for as soon as a page is in, where the
 * page's token comes before its keys (s3_xml_list_token: AWS, MinIO and
 * s3_dir_server send it near the top; moto after the keys), so that the
 * server answers it while this one is parsed (a page of 1,000 keys took
 * ~1 ms to parse on a 2-core x86-64 host, 1.5-2.5 ms on a 16-core host: about
 * what a local server takes to answer); otherwise after the parse.  At
 * the end of a listing that ends early (a range's next folder, a callback
 * that stops) the page asked for ahead is not used. */

/* What one listing may take, whatever the server answers: its pages
 * and keys (every chain of a wide listing counts into one; atomic). */
typedef struct list_bound {
    uint64_t pages, keys;
    uint64_t max_pages, max_keys;
} list_bound;

static list_bound bound_of(const s3_store *s)
{
    const s3_config *c = s3_store_config(s);
    return (list_bound){.max_pages = c->list_max_pages,
                        .max_keys = c->list_max_keys};
}

typedef struct page_chain {
    const char *full;    /* the prefix listed */
    list_bound *bound;
    const char *after;   /* its first page starts after this (or NULL) */
    bool delimit;
    s3_req r[2];         /* the page answered next, and the one after */
    Dlk_buf q[2], url[2], resp[2];
    bool busy[2];
    int cur;
    char early[1024];    /* the token that r[!cur] was asked with */
    list_tokens seen;    /* the tokens asked with */
} page_chain;

/* Ask for a page (token; NULL: the first) into request i: refused when
 * the token was asked with before, or the listing has had its pages. */
static dlk_status chain_ask(s3_store *s, page_chain *c, int i,
                            const char *token, dlk_error *err)
{
    if (__atomic_add_fetch(&c->bound->pages, 1, __ATOMIC_RELAXED) >
        c->bound->max_pages)
        return Dlk_fail(err, DLK_ELIMIT, "cannot list 's3://%s/%s': more "
                        "than %llu pages (DLK_S3_LIST_MAX_PAGES)",
                        s3_store_bucket(s), c->full,
                        (unsigned long long)c->bound->max_pages);
    int fresh = token ? list_tokens_add(&c->seen, token) : 1;
    if (fresh <= 0)
        return fresh < 0 ? Dlk_oom(err)
                   : Dlk_fail(err, DLK_ENET, "cannot list 's3://%s/%s': the "
                              "server sent a continuation token it had sent "
                              "before: the listing would never end",
                              s3_store_bucket(s), c->full);
    memset(&c->r[i], 0, sizeof c->r[i]);
    c->resp[i].len = 0;
    dlk_status rc = list_query(&c->q[i], c->full, token, c->after,
                               c->delimit, err);
    Dlk_buf_free(&c->url[i]); /* make_url starts a new one */
    /* the bucket itself: base_url + "/" + "" */
    if (!rc)
        rc = s3_make_url(s, "", (const char *)c->q[i].data, &c->url[i], err);
    if (rc)
        return rc;
    c->r[i].method = "GET";
    c->r[i].url = (const char *)c->url[i].data;
    c->r[i].out = &c->resp[i];
    c->r[i].max = 64u << 20;
    s3_submit(s3_store_engine(s), &c->r[i]);
    c->busy[i] = true;
    return DLK_OK;
}

static bool chain_pending(const page_chain *c) { return c->busy[c->cur]; }

/* Wait for what is in flight and drop it. */
static void chain_drop(s3_store *s, page_chain *c)
{
    for (int i = 0; i < 2; i++)
        if (c->busy[i]) {
            s3_wait(s3_store_engine(s), &c->r[i]);
            s3_req_fini(&c->r[i]);
            c->busy[i] = false;
        }
}

static void chain_fini(s3_store *s, page_chain *c)
{
    chain_drop(s, c);
    list_tokens_free(&c->seen);
    for (int i = 0; i < 2; i++) {
        Dlk_buf_free(&c->q[i]);
        Dlk_buf_free(&c->url[i]);
        Dlk_buf_free(&c->resp[i]);
    }
}

/* A page's keys on their way to the chain's callback, counted against
 * the listing's bound. */
typedef struct counted {
    s3_list_etag_fn fn;
    void *ud;
    list_bound *bound;
    bool over;
} counted;

static int count_key(void *ud, const char *key, uint64_t size,
                     const char *etag)
{
    counted *k = ud;
    if (__atomic_add_fetch(&k->bound->keys, 1, __ATOMIC_RELAXED) >
        k->bound->max_keys) {
        k->over = true;
        return 1;
    }
    return k->fn(k->ud, key, size, etag);
}

/* Wait for the next page (chain_pending) and parse it into *page, fn
 * called for each key; the page after it may be asked for meanwhile. */
static dlk_status chain_take(s3_store *s, page_chain *c, s3_list_etag_fn fn,
                             void *ud, s3_list_page *page, dlk_error *err)
{
    int k = c->cur;
    s3_req *r = &c->r[k];
    s3_wait(s3_store_engine(s), r);
    c->busy[k] = false;
    c->cur = 1 - k;
    dlk_error e2;
    if (!(s3_ok2xx(r) && !r->over_limit && !r->short_body &&
          s3_xml_list_token(c->resp[k].data, c->resp[k].len, c->early,
                            sizeof c->early) &&
          chain_ask(s, c, c->cur, c->early, &e2) == DLK_OK))
        c->early[0] = '\0';
    counted kc = {fn, ud, c->bound, false};
    dlk_status rc = list_answer(s, r, c->full, &c->resp[k], count_key, &kc,
                                page, err);
    s3_req_fini(r);
    if (!rc && kc.over)
        rc = Dlk_fail(err, DLK_ELIMIT, "cannot list 's3://%s/%s': more than "
                      "%llu keys (DLK_S3_LIST_MAX_KEYS)", s3_store_bucket(s),
                      c->full, (unsigned long long)c->bound->max_keys);
    return rc;
}

/* After chain_take: the listing goes on from token (more), its next page
 * asked for unless it was already, or ends. */
static dlk_status chain_next(s3_store *s, page_chain *c, bool more,
                             const char *token, dlk_error *err)
{
    bool asked = chain_pending(c);
    if (asked && !(more && token && strcmp(c->early, token) == 0)) {
        chain_drop(s, c); /* not the page wanted, or none is */
        asked = false;
    }
    return more && !asked ? chain_ask(s, c, c->cur, token, err) : DLK_OK;
}

dlk_status s3_list(Dlk_store *st, const char *prefix, Dlk_list_fn fn,
                   void *ud, dlk_error *err)
{
    s3_store *s = (s3_store *)st;
    const char *root = s3_store_prefix(s);
    list_ctx lc = {s, fn, ud, *root ? strlen(root) + 1 : 0};
    char *full = full_prefix(s, prefix);
    if (!full)
        return Dlk_oom(err);
    list_bound b = bound_of(s);
    page_chain c = {.full = full, .bound = &b};
    dlk_status rc = chain_ask(s, &c, 0, NULL, err);
    while (!rc && chain_pending(&c)) {
        s3_list_page page;
        rc = chain_take(s, &c, list_item, &lc, &page, err);
        bool more = !rc && !page.stopped && page.truncated;
        dlk_status r2 = chain_next(s, &c, more, page.next_token, err);
        rc = rc ? rc : r2;
        s3_list_page_fini(&page);
    }
    chain_fini(s, &c);
    free(full);
    return rc;
}

/* ---- the wide listing ------------------------------------------------
 * ListObjectsV2 pages follow each other (each needs the last one's token),
 * so one listing of 10,000 keys is ten round trips in a row, and of a
 * million a thousand.  Where the keys are spread over folders, those can
 * be listed at once: the top folder is listed with a delimiter (its keys
 * and its subfolders; down the chain while it has a single subfolder),
 * then its subfolders, split into up to WIDE_RANGES ranges, are listed
 * flat, every range's pages in flight together.  A range's listing
 * starts just before its first folder and ends at the next range's. */

#define WIDE_RANGES 32
#define WIDE_DEPTH 64    /* single-folder levels followed down, at most */

typedef struct key_set {
    const s3_store *s;
    size_t strip;        /* as list_ctx */
    char **k;
    uint64_t *sz;
    char **etag;         /* kept when `etags` */
    bool etags;
    size_t n, cap;
    bool oom;
    /* a range's page: keep keys whose folder below `full` (flen bytes)
     * is in [lo, hi), hi NULL at the end; past: one at or after hi came */
    size_t flen;
    const char *lo, *hi;
    bool past;
} key_set;

/* a (n bytes) against the string b, as strcmp would order them */
static int cmp_prefix(const char *a, size_t n, const char *b)
{
    size_t bn = strlen(b);
    int c = memcmp(a, b, n < bn ? n : bn);
    return c ? c : (n > bn) - (n < bn);
}

static int gather(void *ud, const char *key, uint64_t size,
                  const char *etag)
{
    key_set *g = ud;
    if (g->lo) {
        if (g->hi && strcmp(key, g->hi) >= 0) {
            g->past = true;
            return 0;
        }
        const char *slash =
            strlen(key) < g->flen ? NULL : strchr(key + g->flen, '/');
        if (!slash)
            return 0; /* a key of the top folder: listed with it */
        size_t fl = (size_t)(slash + 1 - key);
        if (cmp_prefix(key, fl, g->lo) < 0)
            return 0; /* an earlier range's */
    }
    if (!below_root(g->s, g->strip, key))
        return 0;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 1024;
        char **k = realloc(g->k, cap * sizeof *k);
        uint64_t *sz = k ? realloc(g->sz, cap * sizeof *sz) : NULL;
        if (k)
            g->k = k;
        if (sz)
            g->sz = sz;
        char **e = sz && g->etags ? realloc(g->etag, cap * sizeof *e) : NULL;
        if (e)
            g->etag = e;
        if (!sz || (g->etags && !e)) {
            g->oom = true;
            return 1;
        }
        g->cap = cap;
    }
    if (!(g->k[g->n] = strdup(key + g->strip))) {
        g->oom = true;
        return 1;
    }
    if (g->etags && !(g->etag[g->n] = strdup(etag))) {
        free(g->k[g->n]);
        g->oom = true;
        return 1;
    }
    g->sz[g->n++] = size;
    __atomic_add_fetch((uint64_t *)&((const Dlk_store *)g->s)->listed, 1,
                       __ATOMIC_RELAXED);
    return 0;
}

/* A range of folders, listed flat from just before its first. */
typedef struct wide_range {
    const char *lo, *hi;
    char *after;         /* lo without its last '/' */
    page_chain c;
    key_set g;           /* its keys, in the order listed */
} wide_range;

/* The ranges a listing thread takes: first, first + step, ... */
typedef struct range_job {
    s3_store *s;
    wide_range *w;
    size_t nw, first, step;
    bool *failed;        /* any thread's error: the others stop too */
    dlk_status rc;
    dlk_error err;
} range_job;

/* The thread's ranges, each page taken as it comes (in turn); after an
 * error, what is in flight is waited for and dropped. */
static void *range_run(void *arg)
{
    range_job *j = arg;
    wide_range *w = j->w;
    for (size_t i = j->first; !j->rc && i < j->nw; i += j->step)
        j->rc = chain_ask(j->s, &w[i].c, 0, NULL, &j->err);
    for (bool any = !j->rc; any;) {
        any = false;
        if (__atomic_load_n(j->failed, __ATOMIC_RELAXED))
            break;
        for (size_t i = j->first; !j->rc && i < j->nw; i += j->step) {
            if (!chain_pending(&w[i].c))
                continue;
            key_set *g = &w[i].g;
            g->past = false;
            s3_list_page page;
            dlk_status r = chain_take(j->s, &w[i].c, gather, g, &page,
                                      &j->err);
            if (!r && g->oom)
                r = Dlk_oom(&j->err);
            bool more = !r && page.truncated && !g->past;
            dlk_status r2 = chain_next(j->s, &w[i].c, more, page.next_token,
                                       &j->err);
            s3_list_page_fini(&page);
            j->rc = r ? r : r2;
            any |= chain_pending(&w[i].c);
        }
    }
    if (j->rc)
        __atomic_store_n(j->failed, true, __ATOMIC_RELAXED);
    for (size_t i = j->first; i < j->nw; i += j->step)
        chain_drop(j->s, &w[i].c);
    return NULL;
}

/* Add src's keys to dst (src keeps none). */
static bool keys_move(key_set *dst, key_set *src)
{
    if (!src->n)
        return true;
    if (dst->n + src->n > dst->cap) {
        size_t cap = dst->n + src->n;
        char **k = realloc(dst->k, cap * sizeof *k);
        uint64_t *sz = k ? realloc(dst->sz, cap * sizeof *sz) : NULL;
        if (k)
            dst->k = k;
        if (sz)
            dst->sz = sz;
        char **e = sz && dst->etags ? realloc(dst->etag, cap * sizeof *e)
                                    : NULL;
        if (e)
            dst->etag = e;
        if (!sz || (dst->etags && !e))
            return false;
        dst->cap = cap;
    }
    memcpy(dst->k + dst->n, src->k, src->n * sizeof *src->k);
    memcpy(dst->sz + dst->n, src->sz, src->n * sizeof *src->sz);
    if (dst->etags)
        memcpy(dst->etag + dst->n, src->etag, src->n * sizeof *src->etag);
    dst->n += src->n;
    src->n = 0;
    return true;
}

/* The set's keys, sizes and ETags freed. */
static void keys_free(key_set *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->k[i]);
        if (g->etags)
            free(g->etag[i]);
    }
    free(g->k);
    free(g->sz);
    free(g->etag);
}

#define WIDE_THREADS 8 /* listing threads: each parses its ranges' pages */

/* The ranges' pages are parsed on up to WIDE_THREADS threads (a page of
 * 1,000 keys takes a core ~1-2 ms to parse, and all ranges' pages
 * arrive at once). */
static dlk_status list_ranges(s3_store *s, const char *full, char **cps,
                              size_t ncps, key_set *g, list_bound *b,
                              dlk_error *err)
{
    size_t nr = ncps < WIDE_RANGES ? ncps : WIDE_RANGES;
    size_t nt = nr < WIDE_THREADS ? nr : WIDE_THREADS;
    wide_range *w = calloc(nr, sizeof *w);
    range_job *jobs = calloc(nt, sizeof *jobs);
    pthread_t *th = calloc(nt, sizeof *th);
    bool *started = calloc(nt, sizeof *started);
    bool failed = false;
    dlk_status rc = w && jobs && th && started
                        ? DLK_OK
                        : Dlk_oom(err);
    for (size_t i = 0; !rc && i < nr; i++) {
        w[i].lo = cps[i * ncps / nr];
        w[i].hi = i + 1 < nr ? cps[(i + 1) * ncps / nr] : NULL;
        w[i].g = (key_set){.s = g->s, .strip = g->strip, .etags = g->etags,
                           .flen = strlen(full), .lo = w[i].lo,
                           .hi = w[i].hi};
        size_t n = strlen(w[i].lo);
        if (!(w[i].after = strndup(w[i].lo, n ? n - 1 : 0)))
            rc = Dlk_oom(err);
        w[i].c = (page_chain){.full = full, .after = w[i].after,
                              .bound = b};
    }
    for (size_t t = 0; !rc && t < nt; t++) {
        jobs[t] = (range_job){.s = s, .w = w, .nw = nr, .first = t,
                              .step = nt, .failed = &failed};
        /* the first on this thread; the others where one cannot start */
        started[t] = t > 0 && pthread_create(&th[t], NULL, range_run,
                                             &jobs[t]) == 0;
    }
    for (size_t t = 0; !rc && t < nt; t++)
        if (!started[t])
            range_run(&jobs[t]);
    for (size_t t = 0; !rc && t < nt; t++)
        if (started[t])
            pthread_join(th[t], NULL);
    /* the first error by range order of the threads; the ranges' keys in
     * range order (so in key order, unless the server's order is not) */
    for (size_t t = 0; !rc && t < nt; t++)
        if (jobs[t].rc) {
            rc = jobs[t].rc;
            if (err)
                *err = jobs[t].err;
        }
    for (size_t i = 0; !rc && i < nr; i++)
        if (!keys_move(g, &w[i].g))
            rc = Dlk_oom(err);
    for (size_t i = 0; w && i < nr; i++) {
        keys_free(&w[i].g);
        chain_fini(s, &w[i].c);
        free(w[i].after);
    }
    free(w);
    free(jobs);
    free(th);
    free(started);
    return rc;
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

/* A page's folders appended to *cps (*ncps of them), counted as keys
 * against the bound: folders cost memory as keys do. */
static dlk_status add_folders(s3_store *s, const char *full,
                              s3_list_page *page, char ***cps, size_t *ncps,
                              list_bound *b, dlk_error *err)
{
    char **v = realloc(*cps, (*ncps + page->nprefixes) * sizeof *v);
    if (!v)
        return Dlk_oom(err);
    *cps = v;
    memcpy(v + *ncps, page->prefixes, page->nprefixes * sizeof *v);
    *ncps += page->nprefixes;
    b->keys += page->nprefixes;
    page->nprefixes = 0;
    if (b->keys > b->max_keys)
        return Dlk_fail(err, DLK_ELIMIT, "cannot list 's3://%s/%s': more "
                        "than %llu keys (DLK_S3_LIST_MAX_KEYS)",
                        s3_store_bucket(s), full,
                        (unsigned long long)b->max_keys);
    return DLK_OK;
}

/* The top folder *full: its keys into g and its subfolders into *cps,
 * down a single subfolder (*full becomes it). */
static dlk_status list_top(s3_store *s, char **full, key_set *g,
                           char ***cps, size_t *ncps, list_bound *b,
                           dlk_error *err)
{
    dlk_status rc = DLK_OK;
    for (int depth = 0; !rc && depth < WIDE_DEPTH; depth++) {
        page_chain c = {.full = *full, .delimit = true, .bound = b};
        rc = chain_ask(s, &c, 0, NULL, err);
        while (!rc && chain_pending(&c)) {
            s3_list_page page;
            rc = chain_take(s, &c, gather, g, &page, err);
            if (!rc && page.nprefixes)
                rc = add_folders(s, *full, &page, cps, ncps, b, err);
            bool more = !rc && !g->oom && page.truncated;
            dlk_status r2 = chain_next(s, &c, more, page.next_token, err);
            rc = rc ? rc : r2;
            s3_list_page_fini(&page);
        }
        chain_fini(s, &c);
        if (!rc && g->oom)
            rc = Dlk_oom(err);
        if (rc || *ncps != 1)
            break;
        free(*full);
        *full = (*cps)[0];
        (*cps)[0] = NULL;
        *ncps = 0;
    }
    return rc;
}

/* g's keys to fn or, with versions, to vfn, in key order as list gives
 * them. */
static dlk_status give_keys(const key_set *g, Dlk_list_fn fn,
                            Dlk_list_version_fn vfn, void *ud,
                            dlk_error *err)
{
    dlk_status rc = DLK_OK;
    char ***by = NULL;
    if (g->n) {
        by = malloc(g->n * sizeof *by);
        if (!by)
            rc = Dlk_oom(err);
        bool sorted = true;
        for (size_t i = 0; by && i < g->n; i++) {
            by[i] = &g->k[i];
            sorted &= i == 0 || strcmp(g->k[i - 1], g->k[i]) < 0;
        }
        /* sorted already where the top folder has no keys of its own */
        if (by && !sorted)
            qsort(by, g->n, sizeof *by, cmp_keys);
    }
    for (size_t i = 0; !rc && i < g->n; i++) {
        size_t j = (size_t)(by[i] - g->k);
        if (vfn ? vfn(ud, g->k[j], g->sz[j], g->etag[j])
                : fn(ud, g->k[j], g->sz[j]))
            break;
    }
    free(by);
    return rc;
}

/* The wide listing to fn or, with versions, to vfn. */
static dlk_status list_wide(Dlk_store *st, const char *prefix,
                            Dlk_list_fn fn, Dlk_list_version_fn vfn,
                            void *ud, dlk_error *err)
{
    s3_store *s = (s3_store *)st;
    const char *root = s3_store_prefix(s);
    key_set g = {.s = s, .strip = *root ? strlen(root) + 1 : 0,
                 .etags = vfn != NULL};
    char *full = full_prefix(s, prefix);
    char **cps = NULL;
    size_t ncps = 0;
    dlk_status rc = full ? DLK_OK
                         : Dlk_oom(err);
    list_bound b = bound_of(s);
    if (!rc)
        rc = list_top(s, &full, &g, &cps, &ncps, &b, err);
    if (!rc && ncps)
        rc = list_ranges(s, full, cps, ncps, &g, &b, err);
    for (size_t i = 0; i < ncps; i++)
        free(cps[i]);
    free(cps);
    free(full);
    if (!rc)
        rc = give_keys(&g, fn, vfn, ud, err);
    keys_free(&g);
    return rc;
}

dlk_status s3_list_wide(Dlk_store *st, const char *prefix,
                        Dlk_list_fn fn, void *ud, dlk_error *err)
{
    return list_wide(st, prefix, fn, NULL, ud, err);
}

/* The version of an object is its ETag. */
dlk_status s3_list_versions(Dlk_store *st, const char *prefix,
                            Dlk_list_version_fn fn, void *ud,
                            dlk_error *err)
{
    return list_wide(st, prefix, NULL, fn, ud, err);
}
