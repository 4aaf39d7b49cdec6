/* loader_rows.c - a loader over some rows only: the caller's list or a
 * view's, copied and checked at open; order.c deals only those. */
#include "loader_int.h"

#include <stdlib.h>
#include <string.h>

dlk_status Dlk_loader_pick_rows(dlk_loader *l, dlk_error *err)
{
    uint64_t *rows = NULL, n = 0;
    if (l->o.view && l->o.rows)
        return Dlk_fail(err, DLK_EINVAL, "the loader takes a view or a row "
                        "list, not both");
    if (l->o.view) {
        dlk_status rc = dlk_view_rows(l->ds, l->o.view, &rows, &n, err);
        if (rc)
            return rc;
    } else {
        n = l->o.nrows;
        if (n > DLK_VIEW_MAX_ROWS)
            return Dlk_fail(err, DLK_ELIMIT, "%llu rows, at most 2^34",
                            (unsigned long long)n);
        if (!(rows = malloc((n ? n : 1) * sizeof *rows)))
            return Dlk_oom(err);
        memcpy(rows, l->o.rows, n * sizeof *rows);
    }
    uint64_t samples = l->nt ? l->t[0].tensor->samples : 0;
    for (uint64_t i = 0; i < n; i++)
        if ((i && rows[i] <= rows[i - 1]) || rows[i] >= samples) {
            dlk_status rc = Dlk_fail(err, DLK_EINVAL, "%s%s%s: row %llu is "
                                     "out of order or past the %llu rows",
                                     l->o.view ? "view '" : "rows",
                                     l->o.view ? l->o.view : "",
                                     l->o.view ? "'" : "",
                                     (unsigned long long)rows[i],
                                     (unsigned long long)samples);
            free(rows);
            return rc;
        }
    l->rows_owned = rows;
    l->o.rows = rows;
    l->o.nrows = n;
    l->o.view = NULL; /* the caller's string need not outlive the open */
    return DLK_OK;
}

/* A unit of a chunk (span_parts parts, as the whole dataset is dealt) is
 * read whole when at least this share of its parts hold rows: the parts
 * between cost little more than the requests they save. */
#define WHOLE_NUM 3
#define WHOLE_DEN 4

static bool need_has(const uint64_t *bits, uint64_t i)
{
    return bits[i >> 6] >> (i & 63) & 1;
}

static void need_set(uint64_t *bits, uint64_t i)
{
    bits[i >> 6] |= 1ull << (i & 63);
}

/* The parts of tensor lt that hold a row, in need (a bit a part, the
 * chunks' parts after one another from part_base); then every part of a
 * unit most of whose parts are needed. */
static dlk_status mark_tensor(dlk_loader *l, Dlk_loader_tensor *lt,
                              dlk_error *err)
{
    const Dlk_tensor *t = lt->tensor;
    if (!(lt->part_base = malloc((t->nchunks + 1) * sizeof *lt->part_base)))
        return Dlk_oom(err);
    lt->part_base[0] = 0;
    for (size_t c = 0; c < t->nchunks; c++)
        lt->part_base[c + 1] = lt->part_base[c] + Dlk_span_nparts(lt, c);
    uint64_t total = lt->part_base[t->nchunks];
    if (!(lt->need = calloc(total / 64 + 1, sizeof *lt->need)))
        return Dlk_oom(err);
    /* rows ascend: the chunk and the part only move on */
    size_t c = 0;
    uint32_t p = 0, np = t->nchunks ? Dlk_span_nparts(lt, 0) : 0;
    for (uint64_t i = 0; i < l->o.nrows; i++) {
        uint64_t r = l->o.rows[i];
        while (c < t->nchunks &&
               r >= t->chunks[c].first + t->chunks[c].samples) {
            if (++c < t->nchunks)
                np = Dlk_span_nparts(lt, c);
            p = 0;
        }
        if (c >= t->nchunks || r < t->chunks[c].first)
            return Dlk_fail(err, DLK_EINTERNAL, "tensor '%s' has no sample "
                            "%llu", t->spec.name, (unsigned long long)r);
        const Dlk_chunk_entry *e = &t->chunks[c];
        uint32_t s = (uint32_t)(r - e->first);
        if (s >= Dlk_part_first(p + 1, e->samples, np))
            p = Dlk_span_part_of(lt, c, s);
        need_set(lt->need, lt->part_base[c] + p);
    }
    for (c = 0; c < t->nchunks; c++) {
        uint32_t n = Dlk_span_nparts(lt, c), g = lt->unit_parts;
        uint64_t base = lt->part_base[c];
        for (uint32_t a = 0; a < n; a += g) {
            uint32_t z = a + g < n ? a + g : n, held = 0;
            for (uint32_t q = a; q < z; q++)
                held += need_has(lt->need, base + q);
            if (held &&
                (uint64_t)held * WHOLE_DEN >= (uint64_t)(z - a) * WHOLE_NUM)
                for (uint32_t q = a; q < z; q++)
                    need_set(lt->need, base + q);
        }
    }
    return DLK_OK;
}

dlk_status Dlk_loader_mark_parts(dlk_loader *l, dlk_error *err)
{
    if (!l->o.rows)
        return DLK_OK;
    for (size_t i = 0; i < l->nt; i++)
        if (l->t[i].unit_parts) {
            dlk_status rc = mark_tensor(l, &l->t[i], err);
            if (rc)
                return rc;
        }
    return DLK_OK;
}

uint64_t Dlk_view_run(const Dlk_loader_tensor *lt, size_t chunk, uint32_t p,
                      uint32_t *p0, uint32_t *p1)
{
    uint32_t np = Dlk_span_nparts(lt, chunk), g = lt->unit_parts;
    uint32_t lo = p / g * g, hi = lo + g < np ? lo + g : np;
    uint64_t base = lt->part_base[chunk];
    uint32_t a = p, b = p + 1;
    if (need_has(lt->need, base + p)) {
        while (a > lo && need_has(lt->need, base + a - 1))
            a--;
        while (b < hi && need_has(lt->need, base + b))
            b++;
    }
    *p0 = a;
    *p1 = b;
    return base + a;
}
