/*
 * abi.h - versioned structs between a caller and the library (util/abi.c); not
 * installed.
 */
#ifndef DLK_UTIL_ABI_H
#define DLK_UTIL_ABI_H

#include "dlk.h"

#include <stddef.h>

/* A caller's versioned struct (dlk.h, "Versioned structs") into the
 * library's own `own` (own_size bytes: the fields the caller lacks 0);
 * DLK_EINVAL naming `what` for a size of 0, or for NULL.  abi_opts_in:
 * the same, but NULL gives the defaults.  abi_result_in: `own` zeroed
 * (its size its own) for a result the caller gives, whose size is
 * checked as above (NULL, a result not wanted, allowed).  abi_copy_out:
 * `own` into the caller's, up to the size it set (NULL: nothing). */
dlk_status abi_copy_in(void *own, size_t own_size, const void *caller,
                       const char *what, dlk_error *err);
dlk_status abi_opts_in(void *own, size_t own_size, const void *caller,
                       const char *what, dlk_error *err);
dlk_status abi_result_in(void *own, size_t own_size, const void *caller,
                         const char *what, dlk_error *err);
void abi_copy_out(void *caller, const void *own, size_t own_size);
/* The public NAME(ds, opts, out, err) of a function that opens a handle
 * HT with options OT: the caller's options copied into the library's own
 * layout, then RUN(ds, &own, out, err), which sees only that. */
#define ABI_OPEN_WRAPPER(NAME, RUN, OT, HT)                                  \
    dlk_status NAME(dlk_dataset *ds, const OT *opts, HT **out,              \
                    dlk_error *err)                                         \
    {                                                                       \
        *out = NULL;                                                        \
        OT own;                                                             \
        dlk_status rc = abi_copy_in(&own, sizeof own, opts, #OT, err);      \
        return rc ? rc : RUN(ds, &own, out, err);                           \
    }
/* The public NAME(a0, opts, res, err) of a function with options OT
 * (NULL: the defaults) and a result RT (NULL: not wanted): RUN(a0, &own
 * options, &own result, err) sees only the library's layouts, and the
 * result, zeroed first, goes back up to the caller's size whatever RUN
 * returns. */
#define ABI_RUN_WRAPPER(NAME, RUN, T0, OT, RT)                               \
    dlk_status NAME(T0 a0, const OT *opts, RT *res, dlk_error *err)         \
    {                                                                       \
        OT o;                                                               \
        RT r;                                                               \
        dlk_status rc = abi_result_in(&r, sizeof r, res, #RT, err);         \
        if (!rc)                                                            \
            rc = abi_opts_in(&o, sizeof o, opts, #OT, err);                 \
        if (!rc)                                                            \
            rc = RUN(a0, &o, &r, err);                                      \
        abi_copy_out(res, &r, sizeof r);                                    \
        return rc;                                                          \
    }

#endif /* DLK_UTIL_ABI_H */
