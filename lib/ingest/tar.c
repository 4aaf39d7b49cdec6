/* tar.c - tar shards (WebDataset's "000123.tar") as a source's objects.
 * A shard's headers are read once while the source is listed (libarchive:
 * ustar, pax and GNU long names alike) and each regular member becomes an
 * object "SHARD.tar/MEMBER", grouped into rows by its stem as a file is;
 * a member is read later as one byte range of its shard, since tar keeps
 * a member's bytes whole and as they are.  No shard is staged on disk or
 * held whole in memory: a local one is mapped (only its headers' pages
 * are touched), a remote one read in ranges that are dropped as the
 * headers are passed.  A compressed shard (".tar.gz", ".tgz") is listed
 * the same way through libarchive's gzip filter, its members numbered in
 * shard order rather than placed, since gzip has no random access: they
 * are read by streaming the shard (tgz.c). */
#include "pipeline.h"
#include "tar_open.h"

#include <archive.h>
#include <archive_entry.h>
#include <pthread.h>
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

bool ing_has_tgz(const ing_source *s)
{
    for (size_t i = 0; i < s->nshards; i++)
        if (s->shards[i].gz)
            return true;
    return false;
}

/* Reading a remote shard: ranges from 64 KiB after a skip (a member's
 * bytes passed over) up to 1 MiB while reading on, so that a shard of
 * small members costs a few requests and one of large ones little more
 * than its headers. */
#define RANGE_MIN (64u << 10)
#define RANGE_MAX (1u << 20)

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
    in->rc = Dlk_store_get_span(in->store, in->sh->key, in->sh->size,
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

/* What a shard's headers gave, gathered by a lister thread and added to
 * the source in shard order once all are read. */
typedef struct found {
    char *key;
    uint64_t size, off;
    const char *why;    /* not NULL: no object, reported with this */
    uint8_t *data;      /* a compressed shard's small member's bytes */
} found;

/* A compressed shard's members of at most INLINE_MAX bytes (labels,
 * captions, small .json) are read while listing, up to INLINE_TOTAL over
 * the source: the stream passes them anyway, and a later read would
 * stream the shard again to reach them. */
#define INLINE_MAX 4096
#define INLINE_TOTAL ((uint64_t)64 << 20)

typedef struct shard_list {
    found *v;
    size_t n, cap;
    uint64_t *inline_used; /* atomic, over every shard */
    dlk_status rc;
    dlk_error err;
} shard_list;

static dlk_status put(shard_list *l, char *key, uint64_t size, uint64_t off,
                      const char *why, dlk_error *err)
{
    if (!DLK_GROW(l->v, l->n, l->cap, 64)) {
        free(key);
        return Dlk_oom(err);
    }
    l->v[l->n++] = (found){key, size, off, why, NULL};
    return DLK_OK;
}

/* The current member's bytes into the last entry of l, when small and
 * within the source's budget; a member that does not read whole is left
 * to be read (and reported) as any other. */
static void take_small(struct archive *a, shard_list *l, uint64_t size)
{
    if (size > INLINE_MAX ||
        __atomic_add_fetch(l->inline_used, size, __ATOMIC_RELAXED) >
            INLINE_TOTAL)
        return;
    uint8_t *d = malloc(size ? size : 1);
    uint64_t got = 0;
    la_ssize_t n = 1;
    while (d && got < size &&
           (n = archive_read_data(a, d + got, (size_t)(size - got))) > 0)
        got += (uint64_t)n;
    if (d && got == size)
        l->v[l->n - 1].data = d;
    else
        free(d);
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
static dlk_status member_done(const ing_shard *sh, pending *p, int64_t next,
                              shard_list *l, dlk_error *err)
{
    if (!p->set)
        return DLK_OK;
    p->set = false;
    int64_t off = next - ((p->size + 511) / 512) * 512;
    char *key = p->key;
    p->key = NULL;
    if (off < p->header + 512 || (uint64_t)off + (uint64_t)p->size > sh->size) {
        dlk_status rc = Dlk_fail(err, DLK_EDECODE, "tar shard '%s': member "
                                 "'%s' is not where its header says",
                                 sh->key, key + strlen(sh->key) + 1);
        free(key);
        return rc;
    }
    return put(l, key, (uint64_t)p->size, (uint64_t)off, NULL, err);
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

/* Why reading a shard failed: the store's read (in, NULL for a mapped
 * shard) before libarchive's message, else fallback; *rc its status. */
static const char *tar_why(struct archive *a, const tar_in *in,
                           const char *fallback, dlk_status *rc)
{
    if (in && in->rc) {
        *rc = in->rc;
        return in->err.msg;
    }
    *rc = DLK_EDECODE;
    const char *why = archive_error_string(a);
    return why ? why : fallback;
}

/* A compressed shard's members are placed by their number in the shard
 * (ING_TGZ_ORDINAL: every header counts, directories included), as the
 * stream reader (tgz.c) counts them again; no byte offset is known. */
static dlk_status read_members(const ing_shard *sh, struct archive *a,
                               tar_in *in, shard_list *l, dlk_error *err)
{
    pending p = {0};
    dlk_status rc = DLK_OK;
    struct archive_entry *e;
    int r;
    uint64_t nth = 0;
    char last[256] = "";  /* the last member read before a failure */
    while (!rc && ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK ||
                   r == ARCHIVE_WARN)) {
        uint64_t ord = nth++;
        int64_t header = archive_read_header_position(a);
        if (!sh->gz && (rc = member_done(sh, &p, header, l, err)))
            break;
        if (archive_entry_filetype(e) == AE_IFDIR)
            continue;
        const char *path = member_path(e);
        snprintf(last, sizeof last, "%s", path ? path : "");
        char *key = NULL;
        if (asprintf(&key, "%s/%s", sh->key, path ? path : "") < 0)
            return Dlk_oom(err);
        const char *why = path ? member_problem(e)
                               : "not read: a tar member of no name";
        if (why)
            rc = put(l, key, 0, 0, why, err);
        else if (sh->gz) {
            uint64_t size = (uint64_t)archive_entry_size(e);
            if (!(rc = put(l, key, size, ord, NULL, err)))
                take_small(a, l, size);
        } else
            p = (pending){key, header, archive_entry_size(e), true};
    }
    if (!rc && r != ARCHIVE_EOF) {
        bool at = sh->gz && last[0];
        dlk_status why_rc;
        const char *why = tar_why(a, in, at ? "truncated, or not a gzip'd tar"
                                            : "truncated, or not a tar archive",
                                  &why_rc);
        rc = Dlk_fail(err, why_rc, "tar shard '%s': %s%s%s%s", sh->key, why,
                      at ? " (read up to member '" : "", at ? last : "",
                      at ? "')" : "");
    }
    if (!rc && !sh->gz)
        rc = member_done(sh, &p, archive_read_header_position(a), l, err);
    free(p.key);
    return rc;
}

dlk_status ing_tar_open(Dlk_store *store, const ing_shard *sh,
                        ing_tar_reader *t, dlk_error *err)
{
    memset(t, 0, sizeof *t);
    t->in = (tar_in){.store = store, .sh = sh, .range = RANGE_MIN};
    Dlk_buf_init(&t->in.buf);
    if (!(t->a = archive_read_new()))
        return Dlk_oom(err);
    t->store = store;
    /* tar only, or tar in gzip: a shard named .tar that is compressed, or
     * any other archive, is an error; gzip is read by libarchive's own
     * zlib, never by a program it would start (ARCHIVE_WARN) */
    archive_read_support_format_tar(t->a);
    if (sh->gz && archive_read_support_filter_gzip(t->a) != ARCHIVE_OK) {
        ing_tar_close(t);
        return Dlk_fail(err, DLK_EUNSUPPORTED, "tar shard '%s': this "
                        "build's libarchive cannot read gzip", sh->key);
    }
    int r;
    if (Dlk_store_map(store, sh->key, &t->map, &t->len, NULL) == DLK_OK) {
        r = archive_read_open_memory(t->a, t->map, t->len);
    } else {
        if (sh->gz)
            t->in.range = RANGE_MAX; /* read on to its end: no skip */
        archive_read_set_read_callback(t->a, read_range);
        archive_read_set_skip_callback(t->a, skip_range);
        archive_read_set_callback_data(t->a, &t->in);
        r = archive_read_open1(t->a);
    }
    if (r != ARCHIVE_OK) {
        dlk_status rc;
        const char *why = tar_why(t->a, &t->in, "cannot be read", &rc);
        rc = Dlk_fail(err, rc, "tar shard '%s': %s", sh->key, why);
        ing_tar_close(t);
        return rc;
    }
    return DLK_OK;
}

void ing_tar_close(ing_tar_reader *t)
{
    if (t->a)
        archive_read_free(t->a);
    if (t->map)
        Dlk_store_unmap(t->store, t->map, t->len);
    Dlk_buf_free(&t->in.buf);
    memset(t, 0, sizeof *t);
}

const char *ing_tar_read_error(ing_tar_reader *t, dlk_status *rc)
{
    return tar_why(t->a, &t->in, "truncated", rc);
}

const char *ing_tar_member_path(struct archive_entry *e)
{
    return member_path(e);
}

/* One shard's members into l; on a thread of its own (reads s's store
 * and writes only shard si's size). */
static dlk_status list_shard(ing_source *s, size_t si, shard_list *l,
                             dlk_error *err)
{
    ing_shard *sh = &s->shards[si];
    ing_tar_reader t;
    dlk_status rc = ing_tar_open(s->store, sh, &t, err);
    if (rc)
        return rc;
    /* the size mapped now, not the listing's, bounds the members */
    if (t.map)
        sh->size = t.len;
    rc = read_members(sh, t.a, t.map ? NULL : &t.in, l, err);
    ing_tar_close(&t);
    return rc;
}

/* Shards are listed on several threads at once: a remote shard's
 * headers cost a round trip a range, a local one's a page fault each. */
#define LISTERS_REMOTE 16
#define LISTERS_LOCAL 4

typedef struct listers {
    ing_source *s;
    const dlk_ingest_opts *o;
    shard_list *out;
    size_t next;        /* the next shard to list (atomic) */
    bool failed, stop;  /* atomic */
} listers;

static void *lister(void *arg)
{
    listers *L = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&L->next, 1, __ATOMIC_RELAXED);
        if (i >= L->s->nshards || __atomic_load_n(&L->failed, __ATOMIC_RELAXED))
            break;
        if (L->o && L->o->stop && L->o->stop(L->o->ud)) {
            __atomic_store_n(&L->stop, true, __ATOMIC_RELAXED);
            break;
        }
        shard_list *l = &L->out[i];
        l->rc = list_shard(L->s, i, l, &l->err);
        if (l->rc)
            __atomic_store_n(&L->failed, true, __ATOMIC_RELAXED);
    }
    return NULL;
}

dlk_status ing_tar_list(ing_source *s, const dlk_ingest_opts *o,
                        dlk_error *err)
{
    listers L = {.s = s, .o = o, .out = calloc(s->nshards, sizeof *L.out)};
    if (!L.out)
        return Dlk_oom(err);
    uint64_t inline_used = 0;
    for (size_t i = 0; i < s->nshards; i++)
        L.out[i].inline_used = &inline_used;
    /* a compressed shard is listed by inflating it: one core each */
    size_t cores = (size_t)dlk_cpu_count();
    size_t want = Dlk_store_is_remote(s->store) ? LISTERS_REMOTE
                  : ing_has_tgz(s) && cores > LISTERS_LOCAL
                      ? (cores < LISTERS_REMOTE ? cores : LISTERS_REMOTE)
                      : LISTERS_LOCAL;
    if (want > s->nshards)
        want = s->nshards;
    pthread_t th[LISTERS_REMOTE];
    size_t started = 0;
    while (started + 1 < want &&
           pthread_create(&th[started], NULL, lister, &L) == 0)
        started++;
    lister(&L); /* this thread is one of them */
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    dlk_status rc = DLK_OK;
    for (size_t i = 0; !rc && i < s->nshards; i++)
        if (L.out[i].rc) {
            rc = L.out[i].rc;
            *err = L.out[i].err;
        }
    if (!rc && L.stop)
        s->stopped = true;
    for (size_t i = 0; i < s->nshards; i++) {
        shard_list *l = &L.out[i];
        for (size_t j = 0; j < l->n; j++) {
            found *f = &l->v[j];
            size_t had = s->nobjs;
            if (rc || s->stopped)
                ;
            else if (f->why)
                ing_source_unused(s, f->key, f->why);
            else if (ing_source_add_obj(s, f->key, f->size,
                                        s->shards[i].version, (uint32_t)i + 1,
                                        (uint32_t)strlen(s->shards[i].key) + 1,
                                        f->off))
                rc = Dlk_oom(err);
            if (s->nobjs > had) /* made an object: it owns the bytes */
                s->objs[s->nobjs - 1].inl = f->data;
            else
                free(f->data);
            free(f->key);
        }
        free(l->v);
    }
    free(L.out);
    if (!rc && s->oom)
        rc = Dlk_oom(err);
    if (!rc)
        rc = ing_tgz_new(s, err);
    return rc;
}

/* The first len bytes of tar member o: kept from the listing, a range of
 * its shard, or (a compressed shard's, which is a stream) all of it. */
static dlk_status member_bytes(const ing_source *s, const ing_obj *o,
                               uint64_t len, Dlk_buf *out, dlk_error *err)
{
    const ing_shard *sh = &s->shards[o->shard - 1];
    if (o->inl)
        return Dlk_buf_append(out, o->inl, (size_t)len, err);
    if (sh->gz)
        return ing_tgz_get(s, o, out, err);
    dlk_status rc = Dlk_store_get_span(s->store, sh->key, sh->size, o->off,
                                       len, out, err);
    if (rc)
        Dlk_fail_wrap(err, "member '%s' of tar shard '%s'",
                      o->key + o->member, sh->key);
    return rc;
}

dlk_status ing_obj_get(const ing_source *s, const ing_obj *o, uint64_t max,
                       Dlk_buf *out, dlk_error *err)
{
    if (!o->shard)
        return Dlk_store_get(s->store, o->key, max, out, NULL, err);
    if (o->size > max)
        return Dlk_fail(err, DLK_ELIMIT, "'%s': %llu bytes, over the limit "
                        "of %llu", o->key, (unsigned long long)o->size,
                        (unsigned long long)max);
    return member_bytes(s, o, o->size, out, err);
}

dlk_status ing_obj_head(const ing_source *s, const ing_obj *o, uint64_t n,
                        Dlk_buf *out, dlk_error *err)
{
    uint64_t len = o->size < n ? o->size : n;
    if (!o->shard)
        return len ? Dlk_store_get_range(s->store, o->key, 0, len, out, err)
                   : DLK_OK;
    return member_bytes(s, o, len, out, err);
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
