/* tgz.c - the members of compressed tar shards (".tar.gz", ".tgz").
 * gzip has no random access, so a member is no byte range of its shard:
 * each shard has one stream reader (libarchive's tar format over its
 * gzip filter, reading the shard through the store as a listing does),
 * used under the shard's lock by whichever fetch wants a member of it
 * (members of 4 KiB or less are kept from the listing, tar.c, and never
 * streamed).
 * A fetch of member n reads on from where the reader is to n; the
 * members passed over on the way are kept, within TGZ_KEEP bytes over
 * all shards, for the fetches that want them next: another member of
 * the same row (a row's members are fetched in key order, a shard holds
 * them in the order they were written) or a row another thread fetches
 * a moment later.  A shard's rows are fetched in stem order (the
 * shuffled order lets those of a few shards take turns, row_order.c),
 * which is shard order for a shard written in key order (webdataset's
 * writers), so each shard is read once from its start to its end, a
 * bounded window of it in memory; a member wanted after the reader
 * passed it, and not kept, costs reading the shard again from its
 * start.  Before the rows are fetched (ing_tgz_plan) every reader is
 * closed, what it kept dropped, and a shard's objects become those the
 * rows fetch: what the schema's pass kept (the .cls labels read for the
 * class list keep the images passed on the way) would fill the window
 * with members no row fetches soon, and then every row of another
 * shard, its image passed for its label (key order) and not kept,
 * would read that shard again from its start; members no row fetches
 * (done, present, feeding no tensor) are not kept, and a reader closes
 * once it has read the last member a row fetches.  At most TGZ_OPEN
 * readers are open at once.  A member's size is its header's, read at
 * listing and bounded by the caller's max before anything is
 * reserved; a member that the stream does not hold as listed (a shard
 * changed, cut or corrupt) fails naming the shard and the member. */
#include "pipeline.h"
#include "tar_open.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TGZ_KEEP ((uint64_t)64 << 20)
#define TGZ_OPEN 16

typedef struct kept {
    uint64_t ord;
    Dlk_buf b;
} kept;

typedef struct tgz_stream {
    pthread_mutex_t mu;
    ing_tar_reader t;
    bool open;
    uint64_t next;      /* the number of the next header */
    uint64_t *ords;     /* the numbers of the shard's objects, ascending:
                           every one listed, then (ing_tgz_plan) those
                           the rows fetch */
    size_t nords, capords;
    kept *kept;         /* members passed over, not yet fetched */
    size_t nkept, capkept;
} tgz_stream;

struct ing_tgz {
    tgz_stream *v;      /* one a shard of the source (used: gz only) */
    size_t n;
    uint64_t kept_bytes; /* atomic: kept over all shards */
    size_t nopen;        /* atomic: readers open */
    size_t sweep;        /* atomic: where closing others looks first */
    uint64_t reads;      /* atomic: readers opened since ing_tgz_plan */
};

static int ord_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether object o is read from its compressed shard's stream (not a
 * plain object, nor a small member read while listing). */
static bool streamed(const ing_source *s, const ing_obj *o)
{
    return o->shard && s->shards[o->shard - 1].gz && !o->inl;
}

dlk_status ing_tgz_new(ing_source *s, dlk_error *err)
{
    if (!ing_has_tgz(s) || s->tgz)
        return DLK_OK;
    struct ing_tgz *t = calloc(1, sizeof *t);
    if (!t || !(t->v = calloc(s->nshards, sizeof *t->v))) {
        free(t);
        return Dlk_oom(err);
    }
    t->n = s->nshards;
    for (size_t i = 0; i < t->n; i++)
        pthread_mutex_init(&t->v[i].mu, NULL);
    s->tgz = t;
    for (size_t i = 0; i < s->nobjs; i++) {
        const ing_obj *o = &s->objs[i];
        if (streamed(s, o))
            t->v[o->shard - 1].nords++;
    }
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].nords &&
            !(t->v[i].ords = malloc(t->v[i].nords * sizeof *t->v[i].ords)))
            return Dlk_oom(err);
        else
            t->v[i].capords = t->v[i].nords;
    for (size_t i = 0; i < t->n; i++)
        t->v[i].nords = 0;
    for (size_t i = 0; i < s->nobjs; i++) {
        const ing_obj *o = &s->objs[i];
        if (streamed(s, o)) {
            tgz_stream *st = &t->v[o->shard - 1];
            st->ords[st->nords++] = o->off;
        }
    }
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].nords > 1)
            qsort(t->v[i].ords, t->v[i].nords, sizeof *t->v[i].ords,
                  ord_cmp);
    return DLK_OK;
}

static void drop_kept(struct ing_tgz *t, tgz_stream *st, size_t i)
{
    __atomic_sub_fetch(&t->kept_bytes, st->kept[i].b.len, __ATOMIC_RELAXED);
    Dlk_buf_free(&st->kept[i].b);
    memmove(&st->kept[i], &st->kept[i + 1],
            (st->nkept - i - 1) * sizeof *st->kept);
    st->nkept--;
}

static void close_stream(struct ing_tgz *t, tgz_stream *st)
{
    if (!st->open)
        return;
    ing_tar_close(&st->t);
    st->open = false;
    __atomic_sub_fetch(&t->nopen, 1, __ATOMIC_RELAXED);
}

void ing_tgz_free(struct ing_tgz *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        tgz_stream *st = &t->v[i];
        close_stream(t, st);
        while (st->nkept)
            drop_kept(t, st, st->nkept - 1);
        free(st->kept);
        free(st->ords);
        pthread_mutex_destroy(&st->mu);
    }
    free(t->v);
    free(t);
}

/* Past TGZ_OPEN readers, close another shard's that no fetch holds
 * (its kept members stay). */
static void close_others(struct ing_tgz *t, tgz_stream *mine)
{
    for (size_t k = 0; k < t->n && __atomic_load_n(&t->nopen,
                                                  __ATOMIC_RELAXED) >= TGZ_OPEN;
         k++) {
        size_t i = __atomic_fetch_add(&t->sweep, 1, __ATOMIC_RELAXED) % t->n;
        tgz_stream *st = &t->v[i];
        if (st == mine || !st->open || pthread_mutex_trylock(&st->mu))
            continue;
        close_stream(t, st);
        pthread_mutex_unlock(&st->mu);
    }
}

/* Whether number ord is one of the shard's objects. */
static bool is_obj(const tgz_stream *st, uint64_t ord)
{
    return bsearch(&ord, st->ords, st->nords, sizeof *st->ords,
                   ord_cmp) != NULL;
}

/* The current member's bytes, size of them, appended to b. */
static dlk_status read_data(tgz_stream *st, const ing_shard *sh,
                            const char *path, uint64_t size, Dlk_buf *b,
                            dlk_error *err)
{
    dlk_status rc = Dlk_buf_reserve(b, (size_t)size, err);
    if (rc)
        return rc;
    uint64_t got = 0;
    while (got < size) {
        la_ssize_t n = archive_read_data(st->t.a, b->data + b->len,
                                         (size_t)(size - got));
        if (n <= 0) {
            dlk_status why_rc = DLK_EDECODE;
            const char *why = n == 0 ? "truncated"
                              : ing_tar_read_error(&st->t, &why_rc);
            return Dlk_fail(err, why_rc, "member '%s' of tar shard '%s': "
                            "%s", path, sh->key, why);
        }
        b->len += (size_t)n;
        got += (uint64_t)n;
    }
    return DLK_OK;
}

/* Keep member ord (size bytes, current) when the window has room, the
 * shard's lowest kept members given up for it first. */
static dlk_status keep(struct ing_tgz *t, tgz_stream *st, const ing_shard *sh,
                       const char *path, uint64_t ord, uint64_t size,
                       dlk_error *err)
{
    while (st->nkept && __atomic_load_n(&t->kept_bytes, __ATOMIC_RELAXED) +
                            size > TGZ_KEEP)
        drop_kept(t, st, 0);
    if (__atomic_load_n(&t->kept_bytes, __ATOMIC_RELAXED) + size > TGZ_KEEP)
        return DLK_OK; /* passed over: a fetch of it reads again */
    if (!DLK_GROW(st->kept, st->nkept, st->capkept, 16))
        return Dlk_oom(err);
    kept *k = &st->kept[st->nkept];
    k->ord = ord;
    Dlk_buf_init(&k->b);
    dlk_status rc = read_data(st, sh, path, size, &k->b, err);
    if (rc) {
        Dlk_buf_free(&k->b);
        return rc;
    }
    __atomic_add_fetch(&t->kept_bytes, k->b.len, __ATOMIC_RELAXED);
    st->nkept++; /* ascending: the reader only moves on */
    return DLK_OK;
}

/* Under st->mu: read on to member o (number o->off) into out. */
static dlk_status read_to(const ing_source *s, tgz_stream *st,
                          const ing_shard *sh, const ing_obj *o,
                          Dlk_buf *out, dlk_error *err)
{
    struct ing_tgz *t = s->tgz;
    const char *want = o->key + o->member;
    if (st->open && st->next > o->off) /* passed: from the start again */
        close_stream(t, st);
    if (!st->open) {
        close_others(t, st);
        dlk_status rc = ing_tar_open(s->store, sh, &st->t, err);
        if (rc)
            return rc;
        st->open = true;
        st->next = 0;
        __atomic_add_fetch(&t->nopen, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&t->reads, 1, __ATOMIC_RELAXED);
        /* what it kept is read again on the way (kept stays ascending,
         * each member kept once) */
        while (st->nkept)
            drop_kept(t, st, st->nkept - 1);
    }
    for (;;) {
        struct archive_entry *e;
        int r = archive_read_next_header(st->t.a, &e);
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            dlk_status why_rc = DLK_EDECODE;
            const char *why = r == ARCHIVE_EOF
                                  ? "not in the shard (changed since it "
                                    "was listed?)"
                                  : ing_tar_read_error(&st->t, &why_rc);
            return Dlk_fail(err, why_rc, "member '%s' of tar shard '%s': %s",
                            want, sh->key, why);
        }
        uint64_t ord = st->next++;
        const char *path = ing_tar_member_path(e);
        if (ord < o->off) {
            dlk_status rc = DLK_OK;
            if (path && is_obj(st, ord) &&
                archive_entry_size(e) >= 0)
                rc = keep(t, st, sh, path, ord,
                          (uint64_t)archive_entry_size(e), err);
            if (rc)
                return rc;
            continue;
        }
        if (!path || strcmp(path, want) != 0 ||
            !archive_entry_size_is_set(e) ||
            (uint64_t)archive_entry_size(e) != o->size)
            return Dlk_fail(err, DLK_EDECODE, "member '%s' of tar shard "
                            "'%s': not in the shard as it was listed (the "
                            "shard changed?)", want, sh->key);
        return read_data(st, sh, want, o->size, out, err);
    }
}

dlk_status ing_tgz_get(const ing_source *s, const ing_obj *o, Dlk_buf *out,
                       dlk_error *err)
{
    const ing_shard *sh = &s->shards[o->shard - 1];
    if (!s->tgz)
        return Dlk_fail(err, DLK_EINTERNAL, "tar shard '%s': no reader",
                        sh->key);
    struct ing_tgz *t = s->tgz;
    tgz_stream *st = &t->v[o->shard - 1];
    pthread_mutex_lock(&st->mu);
    dlk_status rc = DLK_OK;
    size_t i = 0;
    while (i < st->nkept && st->kept[i].ord < o->off)
        i++;
    if (i < st->nkept && st->kept[i].ord == o->off) {
        rc = Dlk_buf_append(out, st->kept[i].b.data, st->kept[i].b.len, err);
        drop_kept(t, st, i);
    } else {
        rc = read_to(s, st, sh, o, out, err);
        if (rc)
            close_stream(t, st); /* a failed reader is not read on */
    }
    /* past its last object the shard's reader is no use */
    if (!rc && st->open && st->nords && o->off >= st->ords[st->nords - 1] &&
        st->next > st->ords[st->nords - 1])
        close_stream(t, st);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

dlk_status ing_tgz_plan(const ing_source *s, const size_t *rows, size_t n,
                        dlk_error *err)
{
    struct ing_tgz *t = s->tgz;
    if (!t)
        return DLK_OK;
    for (size_t i = 0; i < t->n; i++) {
        tgz_stream *st = &t->v[i];
        close_stream(t, st);
        while (st->nkept)
            drop_kept(t, st, st->nkept - 1);
        st->nords = 0;
    }
    for (size_t j = 0; j < n; j++) {
        const ing_row *r = &s->rows[rows[j]];
        for (uint32_t i = 0; i < r->n; i++) {
            const ing_obj *o = &s->objs[r->first + i];
            if (!streamed(s, o) ||
                o->role == ING_NONE) /* not fetched (pipeline.c) */
                continue;
            tgz_stream *st = &t->v[o->shard - 1];
            if (!DLK_GROW(st->ords, st->nords, st->capords, 16))
                return Dlk_oom(err);
            st->ords[st->nords++] = o->off;
        }
    }
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].nords > 1)
            qsort(t->v[i].ords, t->v[i].nords, sizeof *t->v[i].ords,
                  ord_cmp);
    t->reads = 0;
    return DLK_OK;
}

uint64_t ing_tgz_reads(const struct ing_tgz *t)
{
    return t ? __atomic_load_n(&t->reads, __ATOMIC_RELAXED) : 0;
}
