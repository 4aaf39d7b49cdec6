/* text.c - text from outside dlk (a dataset's documents, a source's keys,
 * a server's answers, the command line) made safe to show: escaped, so
 * that no terminal control sequence (an OSC 52 clipboard write, a title
 * change, a cursor move) reaches a terminal through a listing or a
 * message (Dlk_escape), and redacted, so that no credential a URL or a
 * server's text carries reaches a message (Dlk_redact).  Pure string
 * functions; Dlk_fail and Dlk_fail_wrap run every message through both. */
#include "util/text.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int Dlk_utf8_len(const unsigned char *p, size_t left)
{
    unsigned c = *p, min;
    int n;
    if (!left)
        return 0;
    if (c < 0x80) return 1;
    else if ((c & 0xe0) == 0xc0) { n = 1; c &= 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { n = 2; c &= 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { n = 3; c &= 0x07; min = 0x10000; }
    else return 0;
    if ((size_t)n >= left)
        return 0;
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n + 1;
}

/* The bytes at p that may be shown as they are (a printable character,
 * 1 to 4 bytes), or 0 when the byte at p must be escaped: C0 controls,
 * DEL, C1 controls (U+0080..U+009F, which terminals that read UTF-8 may
 * take as CSI, OSC, ...) and bytes that are not UTF-8 (a terminal set to
 * Latin-1 reads 0x9b as CSI). */
static int plain_len(const unsigned char *p, size_t left)
{
    int n = Dlk_utf8_len(p, left);
    if (n == 1 && (*p < 0x20 || *p == 0x7f))
        return 0;
    if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)
        return 0;
    return n;
}

char *Dlk_escape_n(const void *text, size_t len, char *out, size_t cap,
                   unsigned flags)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = text ? text : (const void *)"";
    size_t o = 0;
    if (!cap)
        return out;
    if (!text)
        len = 0;
    for (size_t i = 0; i < len;) {
        int n = plain_len(p + i, len - i);
        char esc[4];
        const char *src = esc;
        size_t need = 2;
        if (n && p[i] == '\\' && (flags & DLK_ESC_QUOTED)) {
            esc[0] = '\\', esc[1] = '\\';
        } else if (n && p[i] == '"' && (flags & DLK_ESC_QUOTED)) {
            esc[0] = '\\', esc[1] = '"';
        } else if (n && !(p[i] == '\\' && (flags & DLK_ESC_BACKSLASH))) {
            src = (const char *)p + i;
            need = (size_t)n;
        } else {
            esc[0] = '\\', esc[1] = 'x';
            esc[2] = hex[p[i] >> 4], esc[3] = hex[p[i] & 15];
            need = 4;
        }
        if (!n || src == esc)
            n = 1; /* an escape stands for one byte */
        if (o + need + 4 > cap) { /* room for "..." and the NUL */
            if (o + 4 <= cap) {
                memcpy(out + o, "...", 3);
                o += 3;
            }
            break;
        }
        memcpy(out + o, src, need);
        o += need;
        i += (size_t)n;
    }
    out[o] = '\0';
    return out;
}

char *Dlk_escape(const char *s, char *out, size_t cap)
{
    return Dlk_escape_n(s, s ? strlen(s) : 0, out, cap, DLK_ESC_BACKSLASH);
}

char *Dlk_escape_dup(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    char *out = malloc(4 * n + 1);
    if (out)
        Dlk_escape_n(s, n, out, 4 * n + 1, DLK_ESC_BACKSLASH);
    return out;
}

/* ---- redaction ------------------------------------------------------ */

#define REDACTED "***"

/* Replace msg[at, at+n) by REDACTED, within cap bytes (with the NUL);
 * where the mark does not fit, the message ends at `at` (the secret is
 * cut off with what follows).  Returns the offset after the mark. */
static size_t replace(char *msg, size_t cap, size_t at, size_t n)
{
    size_t len = strlen(msg), r = sizeof REDACTED - 1;
    if (at + r >= cap) {
        msg[at] = '\0';
        return at;
    }
    size_t tail = len - at - n;
    if (at + r + tail >= cap)
        tail = cap - 1 - at - r;
    memmove(msg + at + r, msg + at + n, tail);
    memcpy(msg + at, REDACTED, r);
    msg[at + r + tail] = '\0';
    return at + r;
}

/* Characters that end a credential quoted in a message or a URL. */
static bool ends_value(char c)
{
    return !c || c == '&' || c == ' ' || c == '\t' || c == '\'' ||
           c == '"' || c == '<' || c == '>' || c == ',' || c == ')' ||
           c == ';' || c == '\n' || c == '\r';
}

/* The user information of every "scheme://user:password@host" in msg:
 * the part before the last '@' of the authority. */
static void redact_userinfo(char *msg, size_t cap)
{
    for (char *p = strstr(msg, "://"); p; p = strstr(p, "://")) {
        p += 3;
        size_t at = 0, i = 0;
        for (; p[i] && p[i] != '/' && p[i] != '?' && p[i] != '#' &&
               !ends_value(p[i]);
             i++)
            if (p[i] == '@')
                at = i + 1;
        if (at > 1)
            p = msg + replace(msg, cap, (size_t)(p - msg), at - 1);
    }
}

/* Values of query parameters, header fields and words that carry
 * credentials: pre-signed URLs (AWS, Google), SigV4's Authorization
 * header, OAuth tokens. */
static void redact_named(char *msg, size_t cap)
{
    static const char *const names[] = {
        "X-Amz-Signature=", "X-Amz-Credential=", "X-Amz-Security-Token=",
        "X-Goog-Signature=", "X-Goog-Credential=", "Signature=",
        "Credential=", "AWSAccessKeyId=", "access_token=", "token=",
        "sig=", "password=", "secret=", "Bearer ", "Basic ",
    };
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        size_t nl = strlen(names[k]);
        for (char *p = msg; *p; p++) {
            if (strncasecmp(p, names[k], nl) != 0)
                continue;
            /* a name of its own: X-Amz-Signature= is not Signature= */
            if (p > msg && (isalnum((unsigned char)p[-1]) || p[-1] == '-' ||
                            p[-1] == '_'))
                continue;
            char *v = p + nl;
            size_t n = 0;
            while (!ends_value(v[n]))
                n++;
            p = n ? msg + replace(msg, cap, (size_t)(v - msg), n) : v;
            if (!*p)
                break;
        }
    }
}

/* A secret's first bytes, enough to tell it from ordinary text: a
 * server's text may hold only the start of a secret (a request id field
 * cut short), and that start is redacted too. */
#define SECRET_HEAD 16

/* Every occurrence in msg of form (a secret as it is or percent-encoded),
 * whole or its first SECRET_HEAD bytes or more. */
static void redact_form(char *msg, size_t cap, const char *form)
{
    size_t fl = strlen(form), head = fl < SECRET_HEAD ? fl : SECRET_HEAD;
    for (char *p = msg; (p = memmem(p, strlen(p), form, head)) != NULL;) {
        size_t n = head;
        while (n < fl && p[n] == form[n])
            n++;
        p = msg + replace(msg, cap, (size_t)(p - msg), n);
    }
}

/* Every occurrence of secret in msg, as it is and percent-encoded (as a
 * URL or a canonical request carries it). */
static void redact_one(char *msg, size_t cap, const char *secret)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(secret);
    if (n < 4) /* a shorter one would take ordinary words with it */
        return;
    redact_form(msg, cap, secret);
    char *enc = malloc(3 * n + 1);
    if (!enc)
        return;
    size_t e = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)secret[i];
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            enc[e++] = (char)c;
        } else {
            enc[e++] = '%';
            enc[e++] = hex[c >> 4];
            enc[e++] = hex[c & 15];
        }
    }
    enc[e] = '\0';
    if (e != n)
        redact_form(msg, cap, enc);
    free(enc);
}

void Dlk_redact(char *msg, size_t cap, const char *const *secrets,
                size_t nsecrets)
{
    if (!msg || !cap)
        return;
    for (size_t i = 0; i < nsecrets; i++)
        if (secrets[i])
            redact_one(msg, cap, secrets[i]);
    redact_userinfo(msg, cap);
    /* every name ends in '=' or a space after a letter */
    if (strchr(msg, '=') || strcasestr(msg, "bearer ") ||
        strcasestr(msg, "basic "))
        redact_named(msg, cap);
}

char *Dlk_redact_url(const char *url, char *out, size_t cap)
{
    if (!cap)
        return out;
    size_t n = url ? strlen(url) : 0;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, url ? url : "", n);
    out[n] = '\0';
    Dlk_redact(out, cap, NULL, 0);
    return out;
}

void Dlk_error_redact(dlk_error *err, const char *const *secrets,
                      size_t nsecrets)
{
    if (err)
        Dlk_redact(err->msg, sizeof err->msg, secrets, nsecrets);
}
