/* abi.c - reading and writing the caller's versioned structs (dlk.h,
 * "Versioned structs"): only as many bytes as the caller's header had. */
#include "internal.h"

#include <string.h>

dlk_status abi_copy_in(void *own, size_t own_size, const void *caller,
                       const char *what, dlk_error *err)
{
    memset(own, 0, own_size);
    if (!caller)
        return dlk_fail(err, DLK_EINVAL, "no %s given", what);
    size_t n;
    memcpy(&n, caller, sizeof n);
    if (n < sizeof n)
        return dlk_fail(err, DLK_EINVAL,
                        "%s.size is %zu: set it with its _INIT macro or "
                        "_init function", what, n);
    memcpy(own, caller, n < own_size ? n : own_size);
    memcpy(own, &own_size, sizeof own_size); /* it is ours now */
    return DLK_OK;
}

void abi_copy_out(void *caller, const void *own, size_t own_size)
{
    size_t n;
    memcpy(&n, caller, sizeof n);
    if (n <= sizeof n)
        return;
    /* the caller's size member stays as it set it */
    memcpy((char *)caller + sizeof n, (const char *)own + sizeof n,
           (n < own_size ? n : own_size) - sizeof n);
}
