/* gcs_list.c - listing a GCS store: objects.list pages of up to 1,000
 * names (in name order, as the store's list promises) followed by their
 * nextPageToken, each object with its size and generation. */
#include "gcs_internal.h"
#include "util/error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_MAX (64u << 20)  /* bytes of one page's answer */

typedef struct lister {
    Dlk_list_fn fn;
    Dlk_list_version_fn vfn;
    void *ud;
    size_t skip;          /* the root's "PREFIX/" */
    int stopped;
    uint64_t keys;        /* listed so far, against the store's bound */
} lister;

/* One page: each item to the callback; *token the next page's (malloc'd,
 * NULL at the end). */
static dlk_status page(gcs_store *s, Dlk_store *st, const char *full,
                       lister *l, const Dlk_buf *body, char **token,
                       dlk_error *err)
{
    *token = NULL;
    json_error_t je;
    json_t *j = json_loadb((const char *)body->data, body->len, 0, &je);
    json_t *items = json_object_get(j, "items");
    if (!json_is_object(j) || (items && !json_is_array(items))) {
        json_decref(j);
        return Dlk_fail(err, DLK_ENET, "cannot list 'gs://%s': the answer "
                        "is not an object listing", full);
    }
    dlk_status rc = DLK_OK;
    size_t i;
    json_t *it;
    if (l->keys + json_array_size(items) > s->list_max_keys) {
        json_decref(j);
        return Dlk_fail(err, DLK_ELIMIT, "cannot list 'gs://%s/%s': more than "
                        "%llu keys (DLK_S3_LIST_MAX_KEYS)", s->bucket, full,
                        (unsigned long long)s->list_max_keys);
    }
    l->keys += json_array_size(items);
    json_array_foreach(items, i, it) {
        const char *name = json_string_value(json_object_get(it, "name"));
        const char *size = json_string_value(json_object_get(it, "size"));
        const char *gen = json_string_value(json_object_get(it,
                                                            "generation"));
        char *end = NULL;
        unsigned long long n = size ? strtoull(size, &end, 10) : 0;
        if (!name || !size || !end || *end) {
            rc = Dlk_fail(err, DLK_ENET, "cannot list 'gs://%s': an entry "
                          "without a name or size", full);
            break;
        }
        if (strlen(name) <= l->skip ||
            strncmp(name, s->prefix, l->skip ? l->skip - 1 : 0))
            continue;   /* not below the root */
        __atomic_add_fetch(&st->listed, 1, __ATOMIC_RELAXED);
        const char *key = name + l->skip;
        l->stopped = l->vfn ? l->vfn(l->ud, key, n, gen ? gen : "")
                            : l->fn(l->ud, key, n);
        if (l->stopped)
            break;
    }
    const char *t = json_string_value(json_object_get(j, "nextPageToken"));
    if (!rc && !l->stopped && t && *t && !(*token = strdup(t)))
        rc = Dlk_oom(err);
    json_decref(j);
    return rc;
}

static dlk_status list_all(Dlk_store *st, const char *prefix, lister *l,
                           dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    const char *root = s->prefix;
    size_t rn = strlen(root);
    l->skip = rn ? rn + 1 : 0;
    size_t fn = rn + strlen(prefix) + 2;
    char *full = malloc(fn);
    if (!full)
        return Dlk_oom(err);
    snprintf(full, fn, "%s%s%s", root, rn ? "/" : "", prefix);
    char *token = NULL;
    dlk_status rc = DLK_OK;
    Dlk_buf body;
    Dlk_buf_init(&body);
    list_tokens seen = {0};
    uint64_t pages = 0;
    do {
        int fresh = token ? list_tokens_add(&seen, token) : 1;
        if (fresh <= 0) {
            rc = fresh < 0 ? Dlk_oom(err)
                           : Dlk_fail(err, DLK_ENET, "cannot list 'gs://%s/%s': "
                                      "the server sent a page token it had "
                                      "sent before: the listing would never "
                                      "end", s->bucket, full);
            break;
        }
        if (++pages > s->list_max_pages) {
            rc = Dlk_fail(err, DLK_ELIMIT, "cannot list 'gs://%s/%s': more than "
                          "%llu pages (DLK_S3_LIST_MAX_PAGES)", s->bucket, full,
                          (unsigned long long)s->list_max_pages);
            break;
        }
        Dlk_buf q, url;
        Dlk_buf_init(&q);
        /* only the fields read: a page of full resources is ~10x larger */
        rc = s3_str_append(&q, "fields=nextPageToken%2Citems%28name%2Csize"
                           "%2Cgeneration%29&maxResults=1000&prefix=", err);
        if (!rc)
            rc = s3_enc_append(&q, full, false, err);
        if (!rc && token) {
            rc = s3_str_append(&q, "&pageToken=", err);
            if (!rc)
                rc = s3_enc_append(&q, token, false, err);
        }
        if (!rc)
            rc = s3_terminate(&q, err);
        if (!rc)
            rc = gcs_object_url(s, NULL, (const char *)q.data, &url, err);
        Dlk_buf_free(&q);
        free(token);
        token = NULL;
        if (rc)
            break;
        s3_req r = {0};
        r.method = "GET";
        r.url = (const char *)url.data;
        r.out = &body;
        r.max = PAGE_MAX;
        body.len = 0;
        rc = gcs_run(s, &r, err);
        if (!rc && (r.status < 200 || r.status >= 300))
            rc = gcs_fail(s, &r, "list", full, DLK_PUT_ALWAYS, err);
        else if (!rc && r.over_limit)
            rc = Dlk_fail(err, DLK_ELIMIT, "cannot list 'gs://%s': a page "
                          "over %u bytes", full, PAGE_MAX);
        s3_req_fini(&r);
        Dlk_buf_free(&url);
        if (!rc)
            rc = page(s, st, full, l, &body, &token, err);
    } while (!rc && token);
    list_tokens_free(&seen);
    free(token);
    free(full);
    Dlk_buf_free(&body);
    return rc;
}

dlk_status gcs_list(Dlk_store *st, const char *prefix, Dlk_list_fn fn,
                    void *ud, dlk_error *err)
{
    lister l = {.fn = fn, .ud = ud};
    return list_all(st, prefix, &l, err);
}

dlk_status gcs_list_versions(Dlk_store *st, const char *prefix,
                             Dlk_list_version_fn fn, void *ud,
                             dlk_error *err)
{
    lister l = {.vfn = fn, .ud = ud};
    return list_all(st, prefix, &l, err);
}
