/* size.c - the one parser of byte sizes that flags and options take. */
#include "internal.h"

#include <stdlib.h>

bool dlk_parse_size(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false; /* strtoull would take "-1" and " 1" */
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
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
    if (*end || v == 0 || v > (1ull << 40) / mul)
        return false;
    *out = v * mul;
    return true;
}
