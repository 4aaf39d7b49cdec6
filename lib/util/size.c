/* size.c - the one parser of byte sizes that flags and options take. */
#include "util/size.h"

#include <errno.h>
#include <stdlib.h>

int Dlk_scan_size(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1; /* strtoull would take "-1" and " 1" */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    bool range = errno == ERANGE;
    unsigned long long mul = 1;
    switch (*end) {
    case 'K': case 'k': mul = 1ull << 10; end++; break;
    case 'M': case 'm': mul = 1ull << 20; end++; break;
    case 'G': case 'g': mul = 1ull << 30; end++; break;
    case 'T': case 't': mul = 1ull << 40; end++; break;
    }
    if (mul > 1 && *end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    if (range || v > UINT64_MAX / mul)
        return 1;
    *out = v * mul;
    return 0;
}

bool Dlk_parse_size(const char *s, uint64_t *out)
{
    uint64_t v;
    if (Dlk_scan_size(s, &v) || v == 0 || v > (1ull << 40))
        return false;
    *out = v;
    return true;
}
