/* gcs_upload.c - writes to the GCS store.
 *
 * Every write is a multipart upload (metadata and bytes in one request)
 * with its precondition in the query: ifGenerationMatch=0 creates only,
 * ifGenerationMatch=GENERATION replaces only that version.  GCS and its
 * emulator (fake-gcs-server) both check the precondition there; the
 * emulator ignores it on media and resumable uploads, on compose and on
 * delete.  Large objects that replace nothing (content-addressed chunks)
 * go up in a resumable upload, piece by piece. */
#include "gcs_internal.h"
#include "util/error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* "ifGenerationMatch=0" (create only), "=N" (replace generation N) or "" */
static void precondition(Dlk_put_mode mode, const char *etag, char *q,
                         size_t cap)
{
    if (mode == DLK_PUT_IF_ABSENT)
        snprintf(q, cap, "ifGenerationMatch=0");
    else if (mode == DLK_PUT_IF_MATCH)
        snprintf(q, cap, "ifGenerationMatch=%s", etag ? etag : "");
    else
        q[0] = '\0';
}

/* {"name": okey, "contentType": ...} */
static char *metadata(const char *okey)
{
    json_t *j = json_pack("{s:s, s:s}", "name", okey, "contentType",
                          "application/octet-stream");
    char *m = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return m;
}

/* The answer's generation and size into info (when asked for). */
static dlk_status put_answer(gcs_store *s, const char *okey,
                             const Dlk_buf *resp, size_t len,
                             Dlk_obj_info *info, dlk_error *err)
{
    Dlk_obj_info oi = {0};
    dlk_status rc = gcs_parse_object(s, okey, resp, &oi, err);
    if (!rc && oi.size != len)
        rc = Dlk_fail(err, DLK_ENET, "cannot write 'gs://%s/%s': %zu bytes "
                      "sent, %llu stored", s->bucket, okey, len,
                      (unsigned long long)oi.size);
    if (!rc && info) {
        *info = oi;
        if (!info->mtime)
            info->mtime = (int64_t)time(NULL);
    }
    return rc;
}

/* One multipart/related upload: the metadata and the bytes together. */
static dlk_status put_multipart(gcs_store *s, const char *okey,
                                const struct iovec *v, int n, size_t len,
                                Dlk_put_mode mode, const char *etag,
                                Dlk_obj_info *info, dlk_error *err)
{
    char *meta = metadata(okey);
    if (!meta)
        return Dlk_oom(err);
    /* a random boundary; one found in the bytes is drawn again */
    char bnd[40];
    Dlk_buf body, resp, url;
    Dlk_buf_init(&body);
    Dlk_buf_init(&resp);
    Dlk_buf_init(&url);
    dlk_status rc = DLK_OK;
    for (int tries = 0;; tries++) {
        uint8_t rnd[12] = {0};
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            memcpy(rnd, &len, sizeof len < sizeof rnd ? sizeof len
                                                      : sizeof rnd);
        snprintf(bnd, sizeof bnd, "dlk-%02x%02x%02x%02x%02x%02x%02x%02x%02x"
                 "%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
                 rnd[5], rnd[6], rnd[7], rnd[8], rnd[9], rnd[10], rnd[11]);
        bool found = false;
        for (int i = 0; i < n && !found; i++)
            found = v[i].iov_len &&
                    memmem(v[i].iov_base, v[i].iov_len, bnd, strlen(bnd));
        if (!found || tries > 8)
            break;
    }
    char head[512];
    int hn = snprintf(head, sizeof head, "--%s\r\nContent-Type: "
                      "application/json; charset=UTF-8\r\n\r\n", bnd);
    rc = Dlk_buf_reserve(&body, len + strlen(meta) + 2 * (size_t)hn + 64,
                         err);
    if (!rc)
        rc = Dlk_buf_append(&body, head, (size_t)hn, err);
    if (!rc)
        rc = s3_str_append(&body, meta, err);
    hn = snprintf(head, sizeof head, "\r\n--%s\r\nContent-Type: "
                  "application/octet-stream\r\n\r\n", bnd);
    if (!rc)
        rc = Dlk_buf_append(&body, head, (size_t)hn, err);
    for (int i = 0; !rc && i < n; i++)
        if (v[i].iov_len)
            rc = Dlk_buf_append(&body, v[i].iov_base, v[i].iov_len, err);
    hn = snprintf(head, sizeof head, "\r\n--%s--\r\n", bnd);
    if (!rc)
        rc = Dlk_buf_append(&body, head, (size_t)hn, err);
    char q[80], query[160];
    precondition(mode, etag, q, sizeof q);
    snprintf(query, sizeof query, "uploadType=multipart%s%s", q[0] ? "&" : "",
             q);
    if (!rc)
        rc = gcs_make_url(s, "/upload/storage/v1", NULL, query, &url, err);
    char ct[96];
    snprintf(ct, sizeof ct, "Content-Type: multipart/related; boundary=%s",
             bnd);
    struct curl_slist *h = rc ? NULL : curl_slist_append(NULL, ct);
    if (!rc && !h)
        rc = Dlk_oom(err);
    s3_req r = {0};
    if (!rc) {
        r.method = "POST";
        r.url = (const char *)url.data;
        r.headers = h;
        r.body = body.data;
        r.body_len = body.len;
        r.out = &resp;
        r.max = GCS_META_MAX;
        rc = gcs_run(s, &r, err);
    }
    if (!rc && !s3_ok2xx(&r))
        rc = gcs_fail(s, &r, "write", okey, mode, err);
    if (!rc)
        rc = put_answer(s, okey, &resp, len, info, err);
    s3_req_fini(&r);
    curl_slist_free_all(h);
    free(meta);
    Dlk_buf_free(&body);
    Dlk_buf_free(&resp);
    Dlk_buf_free(&url);
    return rc;
}

/* The bytes [from, to) of the parts, gathered into b. */
static dlk_status gather(const struct iovec *v, int n, uint64_t from,
                         uint64_t to, Dlk_buf *b, dlk_error *err)
{
    b->len = 0;
    uint64_t at = 0;
    for (int i = 0; i < n && at < to; i++) {
        uint64_t a = at, z = at + v[i].iov_len;
        at = z;
        if (z <= from)
            continue;
        uint64_t s = a < from ? from : a, e = z < to ? z : to;
        dlk_status rc = Dlk_buf_append(b, (const uint8_t *)v[i].iov_base +
                                       (s - a), (size_t)(e - s), err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

/* Start a resumable upload: the URL its pieces go to into upload. */
static dlk_status upload_start(gcs_store *s, const char *okey, size_t len,
                               Dlk_put_mode mode, char *upload, size_t cap,
                               dlk_error *err)
{
    char *meta = metadata(okey);
    if (!meta)
        return Dlk_oom(err);
    char q[80], query[160], total[64];
    precondition(mode, NULL, q, sizeof q);
    snprintf(query, sizeof query, "uploadType=resumable%s%s", q[0] ? "&" : "",
             q);
    snprintf(total, sizeof total, "X-Upload-Content-Length: %zu", len);
    Dlk_buf url;
    dlk_status rc = gcs_make_url(s, "/upload/storage/v1", NULL, query, &url, err);
    struct curl_slist *h = NULL, *t;
    if (!rc && (!(h = curl_slist_append(NULL, "Content-Type: application/"
                                        "json; charset=UTF-8")) ||
                !(t = curl_slist_append(h, total)) || !(h = t)))
        rc = Dlk_oom(err);
    s3_req r = {0};
    if (!rc) {
        r.method = "POST";
        r.url = (const char *)url.data;
        r.headers = h;
        r.body = (const uint8_t *)meta;
        r.body_len = strlen(meta);
        r.want_header = "location";
        rc = gcs_run(s, &r, err);
        Dlk_buf_free(&url);
    }
    if (!rc && !s3_ok2xx(&r))
        rc = gcs_fail(s, &r, "start the upload of", okey, mode, err);
    if (!rc && (!r.want_value[0] || strlen(r.want_value) >= cap))
        rc = Dlk_fail(err, DLK_ENET, "cannot start the upload of "
                      "'gs://%s/%s': no upload URL in the answer", s->bucket,
                      okey);
    if (!rc)
        snprintf(upload, cap, "%s", r.want_value);
    s3_req_fini(&r);
    curl_slist_free_all(h);
    free(meta);
    return rc;
}

/* Send the pieces of one upload in order, each once (attempts_max 1):
 * *again when one failed in a way worth a new upload. */
static dlk_status send_pieces(gcs_store *s, const char *okey,
                              const char *upload, const struct iovec *v,
                              int n, size_t len, Dlk_put_mode mode,
                              Dlk_buf *piece, Dlk_buf *resp, bool *again,
                              dlk_error *err)
{
    *again = false;
    uint64_t at = 0;
    for (;;) {
        uint64_t end = at + s->piece_size;
        if (end > len)
            end = len;
        dlk_status rc = gather(v, n, at, end, piece, err);
        if (rc)
            return rc;
        char cr[96];
        snprintf(cr, sizeof cr, "Content-Range: bytes %llu-%llu/%zu",
                 (unsigned long long)at, (unsigned long long)end - 1, len);
        struct curl_slist *ph = curl_slist_append(NULL, cr);
        if (!ph)
            return Dlk_oom(err);
        s3_req r = {0};
        r.method = "PUT";
        r.url = upload;
        r.headers = ph;
        r.body = piece->data;
        r.body_len = piece->len;
        r.out = resp;
        r.max = GCS_META_MAX;
        r.attempts_max = 1;
        r.want_header = "range";
        resp->len = 0;
        rc = gcs_run(s, &r, err);
        curl_slist_free_all(ph);
        unsigned long long a, b;
        bool range = r.want_value[0] &&
                     sscanf(r.want_value, "bytes=%llu-%llu", &a, &b) == 2;
        if (!rc && s3_ok2xx(&r)) {
            s3_req_fini(&r);
            return DLK_OK;
        }
        if (!rc && r.status == 308 && range && b + 1 == end && end < len) {
            at = end;
        } else if (!rc) {
            *again = r.status == 0 || r.status == 308 || r.status == 404 ||
                     r.status == 408 || r.status == 410 || r.status == 429 ||
                     r.status >= 500 || r.short_body;
            rc = r.status == 308
                ? Dlk_fail(err, DLK_ENET, "cannot write 'gs://%s/%s': the "
                           "server holds %s of %llu bytes sent", s->bucket,
                           okey, range ? r.want_value : "none",
                           (unsigned long long)end)
                : gcs_fail(s, &r, "write", okey, mode, err);
        }
        s3_req_fini(&r);
        if (rc)
            return rc;
    }
}

/* A resumable upload: its URL, then its pieces in order.  A piece that
 * fails starts the upload again under a new URL, rather than asking the
 * server what it holds (an empty PUT, a status query) and resending from
 * there as GCS allows: fake-gcs-server finalises the object at such a query with
 * what it has, and appends a piece sent twice twice. */
static dlk_status put_resumable(gcs_store *s, const char *okey,
                                const struct iovec *v, int n, size_t len,
                                Dlk_put_mode mode, Dlk_obj_info *info,
                                dlk_error *err)
{
    Dlk_buf resp, piece;
    Dlk_buf_init(&resp);
    Dlk_buf_init(&piece);
    dlk_status rc;
    for (int attempt = 1;; attempt++) {
        char upload[1024];
        bool again = false;
        rc = upload_start(s, okey, len, mode, upload, sizeof upload, err);
        if (!rc)
            rc = send_pieces(s, okey, upload, v, n, len, mode, &piece,
                             &resp, &again, err);
        if (!rc || !again || attempt >= s->max_attempts)
            break;
        /* back off as the engine does, then a new upload */
        unsigned ms = 100u << (attempt < 6 ? attempt : 6);
        uint8_t j = 128;
        if (getrandom(&j, 1, 0) != 1)
            j = 128;
        usleep((useconds_t)(ms / 2 + ms * j / 512) * 1000u);
        Dlk_error_clear(err);
    }
    if (!rc)
        rc = put_answer(s, okey, &resp, len, info, err);
    Dlk_buf_free(&resp);
    Dlk_buf_free(&piece);
    return rc;
}

dlk_status gcs_putv(Dlk_store *st, const char *key,
                           const struct iovec *v, int n, Dlk_put_mode mode,
                           const char *etag, Dlk_obj_info *info,
                           dlk_error *err)
{
    gcs_store *s = (gcs_store *)st;
    /* a generation is a decimal number; anything else would reach the
     * query string */
    if (mode == DLK_PUT_IF_MATCH &&
        (!etag || !*etag || strlen(etag) > 20 ||
         strspn(etag, "0123456789") != strlen(etag)))
        return Dlk_fail(err, DLK_EINVAL, "invalid generation for a "
                        "conditional put of '%s'", key);
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += v[i].iov_len;
    char *okey = gcs_object_key(s, key);
    if (!okey)
        return Dlk_oom(err);
    /* A replacement is one multipart upload whatever its size: the
     * emulator ignores ifGenerationMatch on a resumable upload, and a
     * replacement that overwrote another writer's would lose its data. */
    bool resumable = len >= s->resumable_threshold &&
                     mode != DLK_PUT_IF_MATCH;
    dlk_status rc = resumable
        ? put_resumable(s, okey, v, n, len, mode, info, err)
        : put_multipart(s, okey, v, n, len, mode, etag, info, err);
    free(okey);
    return rc;
}

dlk_status gcs_put(Dlk_store *st, const char *key, const void *data,
                          size_t len, Dlk_put_mode mode, const char *etag,
                          Dlk_obj_info *info, dlk_error *err)
{
    struct iovec v = {(void *)data, len};
    return gcs_putv(st, key, &v, 1, mode, etag, info, err);
}
