/* row_order.c - the order rows are appended in.
 *
 * Sorted: by stem, as listed.  A class-folder tree (train/<class>/...)
 * then becomes a class-sorted dataset, and a loader that shuffles within
 * a window of chunks sees one class at a time.
 *
 * Shuffled (the default): by a keyed hash of each stem, (mix(seed ^
 * XXH3-64(stem)), stem).  A row's place depends only on its stem and the
 * seed, not on the rest of the listing, so that a checkpoint ("every row
 * up to this stem is done") stays meaningful across a resume, and shards
 * split the shuffled order, so that each shard is a sample of the whole
 * source rather than a range of its classes.
 *
 * A compressed tar shard can only be read from its start (tgz.c), so its
 * rows are not spread over the order: they keep stem order, in a group of
 * up to TGZ_LANES compressed shards whose rows take turns (the first row
 * of each, then the second of each, ...) at the place of the group's
 * first shard, so that that many gzip streams are read at once, each
 * shard once from its start to its end.  The groups are the compressed
 * shards in the order of the hashes of their names, a new one begun at a
 * shard whose hash is a multiple of TGZ_LANES (one in TGZ_LANES) or after
 * TGZ_LANES shards: their places then depend on the stems and the seed,
 * never on the thread counts (every shard of a run orders alike), and a
 * shard added to the source or taken from it moves only the rows of its
 * own group.
 *
 * The rows of a table the caller reads as a stream (a Parquet file:
 * dlk_ingest_opts.objects_in_tables, stems "T/N" with N the row number)
 * are ordered as a compressed shard's, by row number rather than by stem
 * ("T/2" before "T/10"), and in the sorted order each table's rows are
 * in row number order at the table's place.  formats/dlk-v1.md section
 * 6.8 gives the order exactly. */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TGZ_LANES 8

/* A compressed shard's or a table's rows: [first, first + n) of the
 * listing, which holds them together (every stem of them, and no other,
 * begins with the shard's name and '/'). */
typedef struct tgz_unit {
    size_t first, n;
    uint64_t rank;      /* mix(seed ^ XXH3-64(the shard's name)) */
    uint64_t place;     /* the rank of its group's first shard */
    uint32_t lane;      /* its turn in the group */
    bool table;         /* a table's rows, in row number order */
} tgz_unit;

struct ing_lanes {
    tgz_unit *u;        /* in listing order */
    size_t n;
    const ing_source *s;
};

/* The length of the part of stem that names a compressed tar shard
 * ("x.tar.gz/s001": "x.tar.gz"), or len when it names none. */
static size_t tgz_prefix(const char *stem, size_t len)
{
    static const char *const ext[] = {".tar.gz/", ".tgz/"};
    for (size_t i = 0; i < len; i++)
        for (size_t e = 0; e < 2; e++) {
            size_t n = strlen(ext[e]);
            if (i + n <= len && strncasecmp(stem + i, ext[e], n) == 0 &&
                i > 0 && stem[i - 1] != '/')
                return i + n - 1;
        }
    return len;
}

/* The length of the part of stem "T/N" that names its table T, and its
 * row number N (*num), or len when it is no table's row. */
static size_t table_prefix(const char *stem, size_t len, uint64_t *num)
{
    size_t k = len;
    while (k > 0 && stem[k - 1] >= '0' && stem[k - 1] <= '9')
        k--;
    /* up to 19 digits: every such number fits in 64 bits */
    if (k < 2 || k == len || len - k > 19 || stem[k - 1] != '/')
        return len;
    uint64_t n = 0;
    for (size_t i = k; i < len; i++)
        n = n * 10 + (uint64_t)(stem[i] - '0');
    *num = n;
    return k - 1;
}

/* The part of stem that names the compressed shard or table whose row it
 * is (*table: a table's, *num its row number), or len. */
static size_t unit_prefix(const ing_order *o, const char *stem, size_t len,
                          bool *table, uint64_t *num)
{
    *table = false;
    size_t pl = tgz_prefix(stem, len);
    if (pl < len || !o->tables)
        return pl;
    pl = table_prefix(stem, len, num);
    *table = pl < len;
    return pl;
}

static uint64_t rank_of(uint64_t seed, const char *p, size_t len)
{
    return Dlk_mix64(seed ^ Dlk_hash64(p, len));
}

static int stem_cmp(const char *a, size_t na, const char *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

/* A row's place in the shuffled order, compared in this order. */
typedef struct okey {
    uint64_t rank;
    size_t pos;         /* in its compressed shard (0: another row) */
    uint32_t lane;
} okey;

static int okey_cmp(const okey *a, const okey *b)
{
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->pos != b->pos)
        return a->pos < b->pos ? -1 : 1;
    return (a->lane > b->lane) - (a->lane < b->lane);
}

typedef struct by_rank {
    uint64_t rank;
    size_t first, unit;
} by_rank;

static int by_rank_cmp(const void *x, const void *y)
{
    const by_rank *a = x, *b = y;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return (a->first > b->first) - (a->first < b->first); /* by name */
}

/* The compressed shards' groups of s (o->lanes). */
static dlk_status build_lanes(const ing_source *s, ing_order *o,
                              dlk_error *err)
{
    struct ing_lanes *L = calloc(1, sizeof *L);
    if (!L)
        return Dlk_oom(err);
    L->s = s;
    size_t cap = 0;
    const char *cur = NULL;
    size_t curlen = 0;
    for (size_t i = 0; i < s->nrows; i++) {
        size_t len;
        const char *p = ing_row_stem(s, i, &len);
        bool table;
        uint64_t num;
        size_t pl = unit_prefix(o, p, len, &table, &num);
        if (pl == len) {
            cur = NULL;
            continue;
        }
        if (cur && curlen == pl && memcmp(cur, p, pl) == 0 &&
            L->u[L->n - 1].table == table) {
            L->u[L->n - 1].n++;
            continue;
        }
        if (!DLK_GROW(L->u, L->n, cap, 16)) {
            free(L->u);
            free(L);
            return Dlk_oom(err);
        }
        L->u[L->n++] = (tgz_unit){.first = i, .n = 1, .table = table,
                                  .rank = rank_of(o->seed, p, pl)};
        cur = p;
        curlen = pl;
    }
    by_rank *by = malloc((L->n ? L->n : 1) * sizeof *by);
    if (!by) {
        free(L->u);
        free(L);
        return Dlk_oom(err);
    }
    for (size_t i = 0; i < L->n; i++)
        by[i] = (by_rank){L->u[i].rank, L->u[i].first, i};
    /* ties of two names' hashes (2^-64) go by name: listing order */
    qsort(by, L->n, sizeof *by, by_rank_cmp);
    uint64_t place = 0;
    uint32_t lane = TGZ_LANES;
    for (size_t i = 0; i < L->n; i++) {
        tgz_unit *u = &L->u[by[i].unit];
        if (lane == TGZ_LANES || u->rank % TGZ_LANES == 0) {
            place = u->rank;
            lane = 0;
        }
        u->place = place;
        u->lane = lane++;
    }
    free(by);
    o->lanes = L;
    return DLK_OK;
}

ing_order ing_order_of(const dlk_ingest_opts *o)
{
    return (ing_order){.shuffled = o->order != DLK_ORDER_SORTED,
                       .seed = o->order_seed,
                       .tables = o->objects && o->objects_in_tables};
}

void ing_order_free(ing_order *o)
{
    if (o->lanes)
        free(o->lanes->u);
    free(o->lanes);
    o->lanes = NULL;
}

/* The compressed shard whose rows hold row, or NULL. */
static const tgz_unit *unit_of(const struct ing_lanes *L, size_t row)
{
    size_t lo = 0, hi = L->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (L->u[mid].first <= row)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const tgz_unit *u = &L->u[lo - 1];
    return row < u->first + u->n ? u : NULL;
}

/* A row's place in its unit: its row number in a table, else its place
 * in the listing. */
static size_t unit_pos(const tgz_unit *u, const char *stem, size_t len,
                       size_t lo)
{
    uint64_t num = 0;
    if (u->table)
        table_prefix(stem, len, &num);
    return u->table ? (size_t)num : lo - u->first;
}

/* In the sorted order, a row's key is its place in the listing, but
 * that of its unit's first row for a table's (then its row number). */
static okey row_key(const ing_order *o, size_t row)
{
    const struct ing_lanes *L = o->lanes;
    const tgz_unit *u = unit_of(L, row);
    size_t len;
    const char *p = ing_row_stem(L->s, row, &len);
    if (!o->shuffled)
        return u && u->table ? (okey){u->first, unit_pos(u, p, len, row), 0}
                             : (okey){row, 0, 0};
    if (u)
        return (okey){u->place, unit_pos(u, p, len, row), u->lane};
    return (okey){rank_of(o->seed, p, len), 0, 0};
}

/* The key of a stem that may not be listed (a checkpoint's): a row of a
 * listed compressed shard at the place it would take in it; of a shard
 * not listed, the shard's own rank. */
static okey stem_key(const ing_order *o, const char *stem)
{
    const struct ing_lanes *L = o->lanes;
    const ing_source *s = L->s;
    bool table;
    uint64_t num;
    size_t sl = strlen(stem), pl = unit_prefix(o, stem, sl, &table, &num);
    if (pl == sl && o->shuffled)
        return (okey){rank_of(o->seed, stem, sl), 0, 0};
    size_t lo = 0, hi = s->nrows; /* the first row not below stem */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ing_row_cmp(s, mid, stem) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t c = 0; c < 2 && pl < sl; c++) {
        if (c == 1 && lo == 0)
            break;
        const tgz_unit *u = unit_of(L, lo - c);
        if (!u || u->table != table || (!o->shuffled && !table))
            continue;
        size_t len;
        bool t;
        uint64_t n;
        const char *p = ing_row_stem(s, u->first, &len);
        if (unit_prefix(o, p, len, &t, &n) == pl && memcmp(p, stem, pl) == 0)
            return o->shuffled
                       ? (okey){u->place, unit_pos(u, stem, sl, lo), u->lane}
                       : (okey){u->first, unit_pos(u, stem, sl, lo), 0};
    }
    return o->shuffled ? (okey){rank_of(o->seed, stem, pl), 0, 0}
                       : (okey){lo, 0, 0};
}

int ing_order_cmp(const ing_source *s, const ing_order *o, size_t row,
                  const char *stem)
{
    if (!o->shuffled && !o->tables)
        return ing_row_cmp(s, row, stem);
    DLK_ASSERT(o->lanes && o->lanes->s == s);
    okey a = row_key(o, row), b = stem_key(o, stem);
    int c = okey_cmp(&a, &b);
    if (c)
        return c;
    size_t len;
    const char *p = ing_row_stem(s, row, &len);
    return stem_cmp(p, len, stem, strlen(stem));
}

typedef struct keyed {
    okey k;
    size_t row;
    const char *stem;
    size_t len;
} keyed;

static int keyed_cmp(const void *x, const void *y)
{
    const keyed *a = x, *b = y;
    int c = okey_cmp(&a->k, &b->k);
    return c ? c : stem_cmp(a->stem, a->len, b->stem, b->len);
}

dlk_status ing_order_rows(const ing_source *s, ing_order *o, size_t **out,
                          dlk_error *err)
{
    size_t n = s->nrows;
    bool by_key = o->shuffled || o->tables;
    if (by_key && !o->lanes) {
        dlk_status rc = build_lanes(s, o, err);
        if (rc)
            return rc;
    }
    size_t *perm = malloc((n ? n : 1) * sizeof *perm);
    keyed *k = by_key ? malloc((n ? n : 1) * sizeof *k) : NULL;
    if (!perm || (by_key && !k)) {
        free(perm);
        free(k);
        return Dlk_fail(err, DLK_ENOMEM, "out of memory ordering %zu rows",
                        n);
    }
    if (!by_key) {
        for (size_t i = 0; i < n; i++)
            perm[i] = i;
        *out = perm;
        return DLK_OK;
    }
    for (size_t i = 0; i < n; i++) {
        k[i].row = i;
        k[i].stem = ing_row_stem(s, i, &k[i].len);
        k[i].k = row_key(o, i);
    }
    qsort(k, n, sizeof *k, keyed_cmp);
    for (size_t i = 0; i < n; i++)
        perm[i] = k[i].row;
    free(k);
    *out = perm;
    return DLK_OK;
}
