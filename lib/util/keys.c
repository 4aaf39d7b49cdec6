/* keys.c - object keys: what a key may hold (dlk_key_problem) and how one
 * that may not is shown (dlk_key_escape).  Pure string functions, used by
 * every store operation and by the listings of ingest sources. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* The length of the UTF-8 sequence at p (1..4), or 0 when it is not
 * valid UTF-8 (overlong, surrogate, past U+10FFFF, cut short). */
static int utf8_len(const unsigned char *p)
{
    unsigned c = *p, min;
    int n;
    if (c < 0x80) return 1;
    else if ((c & 0xe0) == 0xc0) { n = 1; c &= 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { n = 2; c &= 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { n = 3; c &= 0x07; min = 0x10000; }
    else return 0;
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n + 1;
}

const char *dlk_key_problem(const char *key)
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
        int n = utf8_len(p);
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

bool dlk_key_valid(const char *key)
{
    return dlk_key_problem(key) == NULL;
}

void dlk_key_escape(const char *key, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!cap)
        return;
    for (const unsigned char *p = (const unsigned char *)(key ? key : "");
         *p;) {
        int n = utf8_len(p);
        bool plain = n > 1 || (n == 1 && *p >= 0x20 && *p != 0x7f &&
                               *p != '\\');
        size_t need = plain ? (size_t)n : 4;
        if (o + need + 4 >= cap) { /* room for "..." */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (plain) {
            memcpy(out + o, p, (size_t)n);
            o += (size_t)n;
            p += n;
        } else {
            out[o++] = '\\', out[o++] = 'x';
            out[o++] = hex[*p >> 4], out[o++] = hex[*p & 15];
            p++;
        }
    }
    out[o] = '\0';
}
