/* keys.c - object keys: what a key may hold (Dlk_key_problem) and how one
 * that may not is shown (Dlk_key_escape, as all text from outside is:
 * Dlk_escape, text.c).  Pure string functions, used by
 * every store operation and by the listings of ingest sources. */
#include "util/keys.h"
#include "util/text.h"

#include <stdio.h>
#include <string.h>

const char *Dlk_key_problem(const char *key)
{
    if (!key || !*key)
        return "an empty key";
    if (key[0] == '/')
        return "an absolute path";
    if (strlen(key) > 1024)
        return "longer than 1024 bytes";
    for (const unsigned char *p = (const unsigned char *)key; *p;) {
        if (*p < 0x20 || *p == 0x7f)
            return "a control character";
        if (*p == '\\')
            return "a backslash";
        int n = Dlk_utf8_len(p, (size_t)-1);
        if (!n)
            return "invalid UTF-8";
        p += n;
    }
    const char *seg = key;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0)
            return "an empty path segment";
        if ((n == 1 && seg[0] == '.') ||
            (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return "a '.' or '..' path segment";
        if (!end)
            return NULL;
        seg = end + 1;
    }
}

bool Dlk_key_valid(const char *key)
{
    return Dlk_key_problem(key) == NULL;
}

void Dlk_key_escape(const char *key, char *out, size_t cap)
{
    Dlk_escape(key, out, cap);
}
