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
 * source rather than a range of its classes.  The rows of a compressed
 * tar shard stay together (stem_rank). */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* A compressed shard can only be read from its start (tgz.c): its rows
 * take the shard's place in the shuffled order, together and in stem
 * order after it, so that it is read once, not once a row. */
static uint64_t stem_rank(uint64_t seed, const char *stem, size_t len)
{
    return Dlk_mix64(seed ^ Dlk_hash64(stem, tgz_prefix(stem, len)));
}

static int stem_cmp(const char *a, size_t na, const char *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

int ing_order_cmp(const ing_source *s, const ing_order *o, size_t row,
                  const char *stem)
{
    if (!o->shuffled)
        return ing_row_cmp(s, row, stem);
    size_t len, sl = strlen(stem);
    const char *p = ing_row_stem(s, row, &len);
    uint64_t a = stem_rank(o->seed, p, len), b = stem_rank(o->seed, stem, sl);
    if (a != b)
        return a < b ? -1 : 1;
    return stem_cmp(p, len, stem, sl);
}

typedef struct keyed {
    uint64_t rank;
    size_t row;
    const char *stem;
    size_t len;
} keyed;

static int keyed_cmp(const void *x, const void *y)
{
    const keyed *a = x, *b = y;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return stem_cmp(a->stem, a->len, b->stem, b->len);
}

dlk_status ing_order_rows(const ing_source *s, const ing_order *o,
                          size_t **out, dlk_error *err)
{
    size_t n = s->nrows;
    size_t *perm = malloc((n ? n : 1) * sizeof *perm);
    keyed *k = o->shuffled ? malloc((n ? n : 1) * sizeof *k) : NULL;
    if (!perm || (o->shuffled && !k)) {
        free(perm);
        free(k);
        return Dlk_fail(err, DLK_ENOMEM, "out of memory ordering %zu rows",
                        n);
    }
    if (!o->shuffled) {
        for (size_t i = 0; i < n; i++)
            perm[i] = i;
        *out = perm;
        return DLK_OK;
    }
    for (size_t i = 0; i < n; i++) {
        k[i].row = i;
        k[i].stem = ing_row_stem(s, i, &k[i].len);
        k[i].rank = stem_rank(o->seed, k[i].stem, k[i].len);
    }
    qsort(k, n, sizeof *k, keyed_cmp);
    for (size_t i = 0; i < n; i++)
        perm[i] = k[i].row;
    free(k);
    *out = perm;
    return DLK_OK;
}
