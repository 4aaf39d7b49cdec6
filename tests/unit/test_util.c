/* test_util.c - lib/util's shared helpers: the byte-size parser every
 * size flag uses, the array growth step, the out-of-memory status. */
#include "internal.h"
#include "unit.h"

static bool size_is(const char *s, uint64_t want)
{
    uint64_t v = 0;
    return dlk_parse_size(s, &v) && v == want;
}

static bool size_refused(const char *s)
{
    uint64_t v = 12345;
    return !dlk_parse_size(s, &v) && v == 12345;
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
    UNIT_CHECK("NULL refused", !dlk_parse_size(NULL, &v));
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
    int *b = dlk_grow(a, &cap2, 10, sizeof *a, 4);
    UNIT_CHECK("room already there: the same array", b == a && cap2 == cap);
    size_t huge = SIZE_MAX / 2 + 1;
    int *c = dlk_grow(a, &huge, huge, sizeof *a, 4);
    UNIT_CHECK("an overflowing size fails, array and capacity unchanged",
               c == NULL && huge == SIZE_MAX / 2 + 1 && a[999] == 999);
    free(a);
}

static void oom(void)
{
    dlk_error e = {0};
    dlk_status rc = dlk_oom(&e);
    UNIT_CHECK("dlk_oom: DLK_ENOMEM and its message",
               rc == DLK_ENOMEM && e.code == DLK_ENOMEM &&
                   strcmp(e.msg, "out of memory") == 0);
    UNIT_CHECK("dlk_oom without an error struct",
               dlk_oom(NULL) == DLK_ENOMEM);
}

int main(void)
{
    sizes();
    grow();
    oom();
    return unit_done();
}
