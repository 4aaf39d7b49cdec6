/* error.c - filling dlk_error and naming status codes. */
#include "util/error.h"
#include "util/check.h"
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dlk_strerror(dlk_status code)
{
    switch (code) {
    case DLK_OK: return "success";
    case DLK_EINVAL: return "invalid argument";
    case DLK_ENOTFOUND: return "not found";
    case DLK_EEXIST: return "already exists";
    case DLK_ECORRUPT: return "corrupt data";
    case DLK_EIO: return "i/o error";
    case DLK_ENOMEM: return "out of memory";
    case DLK_EUNSUPPORTED: return "unsupported";
    case DLK_ECONFLICT: return "conflicting concurrent update";
    case DLK_EAUTH: return "access denied";
    case DLK_ENET: return "network or server error";
    case DLK_ELIMIT: return "over a limit";
    case DLK_EDECODE: return "cannot decode";
    case DLK_EGPU: return "gpu error";
    case DLK_EINTERNAL: return "internal error";
    case DLK_ECANCELED: return "canceled";
    }
    return "unknown status";
}

int dlk_version_number(void) { return DLK_VERSION_NUMBER; }
const char *dlk_version_string(void) { return DLK_VERSION_STRING; }

/* Every message leaves safe to show, whatever its arguments held: with
 * the credentials URLs and servers' texts carry redacted, then with no
 * control character or byte that is not UTF-8 left (Dlk_escape_n without
 * backslashes: names quoted in it may be escaped already). */
static void make_safe(dlk_error *err)
{
    char tmp[DLK_ERRMSG_MAX];
    Dlk_redact(err->msg, sizeof err->msg, NULL, 0);
    size_t n = strlen(err->msg);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)err->msg[i];
        if (c < 0x20 || c >= 0x7f) {
            Dlk_escape_n(err->msg, n, tmp, sizeof tmp, 0);
            memcpy(err->msg, tmp, sizeof tmp);
            return;
        }
    }
}

dlk_status Dlk_fail(dlk_error *err, dlk_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
        make_safe(err);
    }
    return code;
}

dlk_status Dlk_fail_wrap(dlk_error *err, const char *fmt, ...)
{
    if (!err)
        return DLK_EINTERNAL;
    char old[DLK_ERRMSG_MAX], pre[DLK_ERRMSG_MAX];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    size_t n = strlen(pre);
    if (n > sizeof err->msg - 3)
        n = sizeof err->msg - 3;
    memcpy(err->msg, pre, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3;
    size_t m = strnlen(old, room);
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
    make_safe(err);
    return err->code;
}

dlk_status Dlk_oom(dlk_error *err)
{
    return Dlk_fail(err, DLK_ENOMEM, "out of memory");
}

#ifdef DLK_CHECKS
void Dlk_assert_fail(const char *cond, const char *file, int line)
{
    /* test and sanitizer builds only: a broken invariant is a bug in dlk,
     * and stopping at it is what those builds are for */
    fprintf(stderr, "dlk: internal invariant '%s' broken at %s:%d\n", cond,
            file, line);
    abort();
}
#endif

void Dlk_error_clear(dlk_error *err)
{
    if (err) {
        err->code = DLK_OK;
        err->msg[0] = '\0';
    }
}
