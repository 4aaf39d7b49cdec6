/* test_util.c - lib/util's shared helpers: the byte-size parser every
 * size flag uses, the array growth step, the out-of-memory status, the
 * escaping and redaction of text from outside (text.c). */
#include "util/error.h"
#include "util/grow.h"
#include "util/size.h"
#include "util/text.h"
#include "unit.h"

static bool size_is(const char *s, uint64_t want)
{
    uint64_t v = 0;
    return Dlk_parse_size(s, &v) && v == want;
}

static bool size_refused(const char *s)
{
    uint64_t v = 12345;
    return !Dlk_parse_size(s, &v) && v == 12345;
}

static void sizes(void)
{
    UNIT_CHECK("4096", size_is("4096", 4096));
    UNIT_CHECK("16M", size_is("16M", 16ull << 20));
    UNIT_CHECK("16MiB", size_is("16MiB", 16ull << 20));
    UNIT_CHECK("16MB (powers of 1024)", size_is("16MB", 16ull << 20));
    UNIT_CHECK("64k", size_is("64k", 64ull << 10));
    UNIT_CHECK("1G", size_is("1G", 1ull << 30));
    UNIT_CHECK("1TiB, the largest", size_is("1TiB", 1ull << 40));
    UNIT_CHECK("512B", size_is("512B", 512));
    const char *bad[] = {"", "0", "0M", "-1", " 1", "+1", "1.5M", "2T",
                         "1099511627777", "16MiBx", "M", "16 M", "16iB",
                         NULL};
    for (int i = 0; bad[i]; i++) {
        char name[64];
        snprintf(name, sizeof name, "'%s' refused", bad[i]);
        UNIT_CHECK(name, size_refused(bad[i]));
    }
    uint64_t v;
    UNIT_CHECK("NULL refused", !Dlk_parse_size(NULL, &v));
}

static void grow(void)
{
    int *a = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (int i = 0; i < 1000 && ok; i++) {
        ok = DLK_GROW(a, n, cap, 4);
        if (ok)
            a[n++] = i;
    }
    bool same = ok && n == 1000 && cap >= 1000;
    for (size_t i = 0; same && i < n; i++)
        same = a[i] == (int)i;
    UNIT_CHECK("1000 elements appended one at a time keep their values",
               same);
    UNIT_CHECK("the capacity doubled from the first size", cap == 1024);
    size_t cap2 = cap;
    int *b = Dlk_grow(a, &cap2, 10, sizeof *a, 4);
    UNIT_CHECK("room already there: the same array", b == a && cap2 == cap);
    size_t huge = SIZE_MAX / 2 + 1;
    int *c = Dlk_grow(a, &huge, huge, sizeof *a, 4);
    UNIT_CHECK("an overflowing size fails, array and capacity unchanged",
               c == NULL && huge == SIZE_MAX / 2 + 1 && a[999] == 999);
    free(a);
}

static void oom(void)
{
    dlk_error e = {0};
    dlk_status rc = Dlk_oom(&e);
    UNIT_CHECK("Dlk_oom: DLK_ENOMEM and its message",
               rc == DLK_ENOMEM && e.code == DLK_ENOMEM &&
                   strcmp(e.msg, "out of memory") == 0);
    UNIT_CHECK("Dlk_oom without an error struct",
               Dlk_oom(NULL) == DLK_ENOMEM);
}

static bool escaped(const char *in, unsigned flags, const char *want)
{
    char out[256];
    Dlk_escape_n(in, strlen(in), out, sizeof out, flags);
    return strcmp(out, want) == 0;
}

static void escape(void)
{
    UNIT_CHECK("OSC 52: ESC and BEL as \\xNN",
               escaped("a\x1b]52;c;SGk=\x07" "b", DLK_ESC_BACKSLASH,
                       "a\\x1b]52;c;SGk=\\x07b"));
    UNIT_CHECK("C1 controls (U+009B) escaped, other UTF-8 kept",
               escaped("\xc2\x9b" "1m \xc3\xbc\xe2\x82\xac", DLK_ESC_BACKSLASH,
                       "\\xc2\\x9b1m \xc3\xbc\xe2\x82\xac"));
    UNIT_CHECK("bytes that are not UTF-8, DEL", escaped("\xff\x9b\x7f", 0,
               "\\xff\\x9b\\x7f"));
    UNIT_CHECK("backslash: \\x5c with DLK_ESC_BACKSLASH, else kept",
               escaped("a\\b", DLK_ESC_BACKSLASH, "a\\x5cb") &&
                   escaped("a\\b", 0, "a\\b"));
    UNIT_CHECK("quoted: \\\" and \\\\",
               escaped("\"\\\n", DLK_ESC_QUOTED, "\\\"\\\\\\x0a"));
    char small[12];
    Dlk_escape("\x1b\x1b\x1b\x1b\x1b", small, sizeof small);
    UNIT_CHECK("cut with ... to fit, never in an escape",
               strcmp(small, "\\x1b\\x1b...") == 0);
    char *d = Dlk_escape_dup("\x1b]0;t\x07");
    UNIT_CHECK("Dlk_escape_dup: the whole text",
               d && strcmp(d, "\\x1b]0;t\\x07") == 0);
    free(d);
    dlk_error e;
    Dlk_fail(&e, DLK_EINVAL, "no tensor '%s'", "x\x1b]52;c;x\x07");
    UNIT_CHECK("Dlk_fail: no control character in a message",
               strcmp(e.msg, "no tensor 'x\\x1b]52;c;x\\x07'") == 0);
}

static bool redacted(const char *in, const char *const *sec, size_t n,
                     const char *want)
{
    char msg[DLK_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", in);
    Dlk_redact(msg, sizeof msg, sec, n);
    return strcmp(msg, want) == 0;
}

static void redact(void)
{
    UNIT_CHECK("user information of a url",
               redacted("bad 'http://u:p4ss@h:9/x' and s3://K:S@b/k", NULL, 0,
                        "bad 'http://***@h:9/x' and s3://***@b/k"));
    UNIT_CHECK("a '@' in a key after the host is kept",
               redacted("s3://b/me@x.png", NULL, 0, "s3://b/me@x.png"));
    UNIT_CHECK("pre-signed query values",
               redacted("'s3://b/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=ab"
                        "&X-Amz-Security-Token=t0k' x", NULL, 0,
                        "'s3://b/k?X-Amz-Credential=***&X-Amz-Signature=***"
                        "&X-Amz-Security-Token=***' x"));
    UNIT_CHECK("an Authorization header and a bearer token",
               redacted("Credential=AKID/2026/s3, Signature=f00 Bearer ya29.x",
                        NULL, 0, "Credential=***, Signature=*** Bearer ***"));
    const char *sec[] = {"SecretKey/0123456789abcdef", "tok"};
    UNIT_CHECK("a known secret, as it is and percent-encoded; a short one "
               "left",
               redacted("id SecretKey/0123456789abcdef or "
                        "SecretKey%2F0123456789abcdef tok", sec, 2,
                        "id *** or *** tok"));
    UNIT_CHECK("the start of a known secret, cut short by the server",
               redacted("rid SecretKey/0123456) x", sec, 1, "rid ***) x"));
    char full[DLK_ERRMSG_MAX];
    memset(full, 'a', sizeof full - 1);
    full[sizeof full - 1] = '\0';
    memcpy(full + sizeof full - 10, " token=zz", 9);
    Dlk_redact(full, sizeof full, NULL, 0);
    UNIT_CHECK("a full message: the value cut off where no mark fits",
               strlen(full) < sizeof full && !strstr(full, "zz"));
}

int main(void)
{
    sizes();
    grow();
    oom();
    escape();
    redact();
    return unit_done();
}
