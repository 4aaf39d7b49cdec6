/* abi.c - reading and writing the caller's versioned structs (dlk.h,
 * "Versioned structs"): only as many bytes as the caller's header had. */
#include "util/error.h"
#include "util/abi.h"

#include <string.h>

/* own zeroed, its size its own: the defaults */
static void own_defaults(void *own, size_t own_size)
{
    memset(own, 0, own_size);
    memcpy(own, &own_size, sizeof own_size);
}

static dlk_status size_refused(const char *what, size_t n, dlk_error *err)
{
    return Dlk_fail(err, DLK_EINVAL, "%s.size is %zu: set it with its "
                    "_INIT macro or _init function", what, n);
}

dlk_status abi_copy_in(void *own, size_t own_size, const void *caller,
                       const char *what, dlk_error *err)
{
    memset(own, 0, own_size);
    if (!caller)
        return Dlk_fail(err, DLK_EINVAL, "no %s given", what);
    size_t n;
    memcpy(&n, caller, sizeof n);
    if (n < sizeof n)
        return size_refused(what, n, err);
    memcpy(own, caller, n < own_size ? n : own_size);
    memcpy(own, &own_size, sizeof own_size); /* it is ours now */
    return DLK_OK;
}

dlk_status abi_opts_in(void *own, size_t own_size, const void *caller,
                       const char *what, dlk_error *err)
{
    if (!caller) {
        own_defaults(own, own_size);
        return DLK_OK;
    }
    return abi_copy_in(own, own_size, caller, what, err);
}

dlk_status abi_result_in(void *own, size_t own_size, const void *caller,
                         const char *what, dlk_error *err)
{
    own_defaults(own, own_size);
    if (!caller)
        return DLK_OK;
    size_t n;
    memcpy(&n, caller, sizeof n);
    return n < sizeof n ? size_refused(what, n, err) : DLK_OK;
}

void abi_copy_out(void *caller, const void *own, size_t own_size)
{
    size_t n;
    if (!caller)
        return;
    memcpy(&n, caller, sizeof n);
    if (n <= sizeof n)
        return;
    /* the caller's size member stays as it set it */
    memcpy((char *)caller + sizeof n, (const char *)own + sizeof n,
           (n < own_size ? n : own_size) - sizeof n);
}
