/* tar.c - tar shards (WebDataset's "000123.tar") as a source's objects.
 * A shard's headers are read once while the source is listed (libarchive:
 * ustar, pax and GNU long names alike) and each regular member becomes an
 * object "SHARD.tar/MEMBER", grouped into rows by its stem as a file is;
 * a member is read later as one byte range of its shard, since tar keeps
 * a member's bytes whole and as they are.  No shard is staged on disk or
 * held whole in memory: a local one is mapped (only its headers' pages
 * are touched), a remote one read in ranges that are dropped as the
 * headers are passed. */
#include "pipeline.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool ends_with(const char *key, const char *ext)
{
    size_t n = strlen(key), e = strlen(ext);
    return n > e && strcasecmp(key + n - e, ext) == 0 && key[n - e - 1] != '/';
}

bool ing_tar_key(const char *key)
{
    return ends_with(key, ".tar");
}

bool ing_tgz_key(const char *key)
{
    return ends_with(key, ".tar.gz") || ends_with(key, ".tgz");
}

/* Reading a remote shard: ranges from 64 KiB after a skip (a member's
 * bytes passed over) up to 1 MiB while reading on, so that a shard of
 * small members costs a few requests and one of large ones little more
 * than its headers. */
#define RANGE_MIN (64u << 10)
#define RANGE_MAX (1u << 20)

typedef struct tar_in {
    dlk_store *store;
    const ing_shard *sh;
    uint64_t pos;       /* next byte to read */
    size_t range;
    dlk_buf buf;
    dlk_status rc;      /* a read's failure, kept for the message */
    dlk_error err;
} tar_in;

static la_ssize_t read_range(struct archive *a, void *ud, const void **out)
{
    tar_in *in = ud;
    uint64_t left = in->sh->size - in->pos;
    size_t n = left < in->range ? (size_t)left : in->range;
    if (in->range < RANGE_MAX)
        in->range *= 2;
    in->buf.len = 0;
    *out = NULL;
    if (!n)
        return 0;
    in->rc = dlk_store_get_span(in->store, in->sh->key, in->sh->size,
                                in->pos, n, &in->buf, &in->err);
    if (in->rc) {
        archive_set_error(a, -1, "%s", in->err.msg);
        return -1;
    }
    in->pos += n;
    *out = in->buf.data;
    return (la_ssize_t)n;
}

static la_int64_t skip_range(struct archive *a, void *ud, la_int64_t req)
{
    (void)a;
    tar_in *in = ud;
    uint64_t left = in->sh->size - in->pos;
    uint64_t n = req > 0 && (uint64_t)req < left ? (uint64_t)req : left;
    if (req <= 0)
        n = 0;
    in->pos += n;
    in->range = RANGE_MIN;
    return (la_int64_t)n;
}

/* A member's name as a key's tail: "./a.jpg" and "/a.jpg" are "a.jpg". */
static const char *member_path(struct archive_entry *e)
{
    const char *p = archive_entry_pathname_utf8(e);
    if (!p)
        p = archive_entry_pathname(e);
    while (p && (p[0] == '/' || (p[0] == '.' && p[1] == '/')))
        p += p[0] == '/' ? 1 : 2;
    return p && *p ? p : NULL;
}

/* The member whose header was read last, until the next header says
 * where its bytes end. */
typedef struct pending {
    char *key;
    int64_t header, size;
    bool set;
} pending;

/* A member's bytes end where the next header (or the archive's end)
 * begins, less the padding to 512 bytes; they begin after its own
 * header blocks (pax and long-name blocks before them). */
static dlk_status member_done(ing_source *s, size_t si, pending *p,
                              int64_t next, dlk_error *err)
{
    if (!p->set)
        return DLK_OK;
    const ing_shard *sh = &s->shards[si];
    p->set = false;
    int64_t off = next - ((p->size + 511) / 512) * 512;
    dlk_status rc = DLK_OK;
    if (off < p->header + 512 || (uint64_t)off + (uint64_t)p->size > sh->size)
        rc = dlk_fail(err, DLK_EDECODE, "tar shard '%s': member '%s' is "
                      "not where its header says", sh->key,
                      p->key + strlen(sh->key) + 1);
    else if (ing_source_add_obj(s, p->key, (uint64_t)p->size, sh->version,
                                (uint32_t)si + 1,
                                (uint32_t)strlen(sh->key) + 1,
                                (uint64_t)off))
        rc = dlk_oom(err);
    free(p->key);
    p->key = NULL;
    return rc;
}

/* Why a member is no object, or NULL when it may be one. */
static const char *member_problem(struct archive_entry *e)
{
    if (archive_entry_hardlink(e))
        return "not read: a tar member that is a hard link";
    if (archive_entry_filetype(e) != AE_IFREG)
        return "not read: a tar member that is not a regular file";
    if (archive_entry_sparse_count(e) > 0)
        return "not read: a sparse tar member";
    if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0)
        return "not read: a tar member of no size";
    return NULL;
}

static dlk_status read_members(ing_source *s, size_t si, struct archive *a,
                               tar_in *in, dlk_error *err)
{
    const ing_shard *sh = &s->shards[si];
    pending p = {0};
    dlk_status rc = DLK_OK;
    struct archive_entry *e;
    int r;
    while (!rc && ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK ||
                   r == ARCHIVE_WARN)) {
        int64_t header = archive_read_header_position(a);
        if ((rc = member_done(s, si, &p, header, err)))
            break;
        if (archive_entry_filetype(e) == AE_IFDIR)
            continue;
        const char *path = member_path(e);
        char *key = NULL;
        if (path && asprintf(&key, "%s/%s", sh->key, path) < 0)
            return dlk_oom(err);
        const char *why = path ? member_problem(e)
                               : "not read: a tar member of no name";
        if (why) {
            ing_source_unused(s, key ? key : sh->key, why);
            free(key);
            continue;
        }
        p = (pending){key, header, archive_entry_size(e), true};
    }
    if (!rc && r != ARCHIVE_EOF) {
        const char *why = in && in->rc ? in->err.msg : archive_error_string(a);
        rc = dlk_fail(err, in && in->rc ? in->rc : DLK_EDECODE,
                      "tar shard '%s': %s", sh->key,
                      why ? why : "truncated, or not a tar archive");
    }
    if (!rc)
        rc = member_done(s, si, &p, archive_read_header_position(a), err);
    free(p.key);
    return rc;
}

static dlk_status list_shard(ing_source *s, size_t si, dlk_error *err)
{
    const ing_shard *sh = &s->shards[si];
    struct archive *a = archive_read_new();
    if (!a)
        return dlk_oom(err);
    /* tar only: a compressed or other archive named .tar is an error */
    archive_read_support_format_tar(a);
    const void *map = NULL;
    size_t len = 0;
    tar_in in = {.store = s->store, .sh = sh, .range = RANGE_MIN};
    dlk_buf_init(&in.buf);
    dlk_status rc = DLK_OK;
    int r;
    if (dlk_store_map(s->store, sh->key, &map, &len, NULL) == DLK_OK) {
        /* the size mapped now, not the listing's, bounds the members */
        s->shards[si].size = len;
        r = archive_read_open_memory(a, map, len);
    } else {
        archive_read_set_read_callback(a, read_range);
        archive_read_set_skip_callback(a, skip_range);
        archive_read_set_callback_data(a, &in);
        r = archive_read_open1(a);
    }
    if (r != ARCHIVE_OK)
        rc = dlk_fail(err, in.rc ? in.rc : DLK_EDECODE, "tar shard '%s': %s",
                      sh->key, in.rc ? in.err.msg
                      : archive_error_string(a) ? archive_error_string(a)
                      : "cannot be read");
    else
        rc = read_members(s, si, a, map ? NULL : &in, err);
    archive_read_free(a);
    if (map)
        dlk_store_unmap(s->store, map, len);
    dlk_buf_free(&in.buf);
    return rc;
}

dlk_status ing_tar_list(ing_source *s, const dlk_ingest_opts *o,
                        dlk_error *err)
{
    for (size_t i = 0; i < s->nshards; i++) {
        if (o && o->stop && o->stop(o->ud)) {
            s->stopped = true;
            return DLK_OK;
        }
        dlk_status rc = list_shard(s, i, err);
        if (rc)
            return rc;
        if (s->oom)
            return dlk_oom(err);
    }
    return DLK_OK;
}

dlk_status ing_obj_get(const ing_source *s, const ing_obj *o, uint64_t max,
                       dlk_buf *out, dlk_error *err)
{
    if (!o->shard)
        return dlk_store_get(s->store, o->key, max, out, NULL, err);
    const ing_shard *sh = &s->shards[o->shard - 1];
    if (o->size > max)
        return dlk_fail(err, DLK_ELIMIT, "'%s': %llu bytes, over the limit "
                        "of %llu", o->key, (unsigned long long)o->size,
                        (unsigned long long)max);
    dlk_status rc = dlk_store_get_span(s->store, sh->key, sh->size, o->off,
                                       o->size, out, err);
    if (rc)
        dlk_fail_wrap(err, "member '%s' of tar shard '%s'",
                      o->key + o->member, sh->key);
    return rc;
}

int ing_obj_folder(const ing_source *s, const ing_obj *o, char *out,
                   size_t cap)
{
    if (!o->shard)
        return ing_parent_folder(o->key, out, cap);
    if (strchr(o->key + o->member, '/'))
        return ing_parent_folder(o->key + o->member, out, cap);
    return ing_parent_folder(s->shards[o->shard - 1].key, out, cap);
}
