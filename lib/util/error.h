/*
 * error.h - a failed call's status and message (util/error.c); not installed.
 */
#ifndef DLK_UTIL_ERROR_H
#define DLK_UTIL_ERROR_H

#include "dlk.h"
#include "util/attr.h"

/* Set err (if not NULL) and return code.  The message follows the style
 * "cannot read chunk 'KEY': why" (lower-case, no full stop). */
dlk_status Dlk_fail(dlk_error *err, dlk_status code, const char *fmt, ...)
    DLK_PRINTF(3, 4);
/* Prefix an existing message: "CONTEXT: old message". */
dlk_status Dlk_fail_wrap(dlk_error *err, const char *fmt, ...)
    DLK_PRINTF(2, 3);
void Dlk_error_clear(dlk_error *err);

/* Dlk_oom(err): the one message for an
 * allocation that failed where nothing more useful can be said. */
dlk_status Dlk_oom(dlk_error *err);

#endif /* DLK_UTIL_ERROR_H */
