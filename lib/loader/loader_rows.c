/* loader_rows.c - a loader over some rows only: the caller's list or a
 * view's, copied and checked at open; order.c deals only those. */
#include "loader_int.h"

#include <stdlib.h>
#include <string.h>

dlk_status dlk_loader_pick_rows(dlk_loader *l, dlk_error *err)
{
    uint64_t *rows = NULL, n = 0;
    if (l->o.view && l->o.rows)
        return dlk_fail(err, DLK_EINVAL, "the loader takes a view or a row "
                        "list, not both");
    if (l->o.view) {
        dlk_status rc = dlk_view_rows(l->ds, l->o.view, &rows, &n, err);
        if (rc)
            return rc;
    } else {
        n = l->o.nrows;
        if (n > DLK_VIEW_MAX_ROWS)
            return dlk_fail(err, DLK_ELIMIT, "%llu rows, at most 2^34",
                            (unsigned long long)n);
        if (!(rows = malloc((n ? n : 1) * sizeof *rows)))
            return dlk_fail(err, DLK_ENOMEM, "out of memory");
        memcpy(rows, l->o.rows, n * sizeof *rows);
    }
    uint64_t samples = l->nt ? l->t[0].tensor->samples : 0;
    for (uint64_t i = 0; i < n; i++)
        if ((i && rows[i] <= rows[i - 1]) || rows[i] >= samples) {
            dlk_status rc = dlk_fail(err, DLK_EINVAL, "%s%s%s: row %llu is "
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
