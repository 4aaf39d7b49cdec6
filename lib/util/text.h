/*
 * text.h - text from outside dlk made safe to show: escaped, redacted
 * (util/text.c); not installed.
 */
#ifndef DLK_UTIL_TEXT_H
#define DLK_UTIL_TEXT_H

#include "dlk.h"

#include <stddef.h>

/* Text from outside dlk (text.c): a dataset's names, ids, messages and
 * queries, a source's keys, a server's answers, the command line. */
/* The length of the UTF-8 sequence at p (1..4, within `left` bytes), or
 * 0 when it is not valid UTF-8 (overlong, surrogate, past U+10FFFF, cut
 * short). */
int Dlk_utf8_len(const unsigned char *p, size_t left);
enum {
    DLK_ESC_BACKSLASH = 1, /* '\\' as \x5c too, so that an escape cannot
                              be told from the text it stands for */
    DLK_ESC_QUOTED = 2     /* '"' and '\\' as \" and \\ (a quoted string) */
};
/* len bytes of text made safe to print, to put in a message and in JSON:
 * control characters (C0, DEL, C1) and bytes that are not UTF-8 as \xNN
 * (a terminal never sees an escape sequence), backslashes as flags say;
 * cut with "..." to fit cap bytes (with the NUL).  Returns out. */
char *Dlk_escape_n(const void *text, size_t len, char *out, size_t cap,
                   unsigned flags);
/* Dlk_escape_n of a string, backslashes escaped. */
char *Dlk_escape(const char *s, char *out, size_t cap);
/* The whole of s escaped so, in a new string (the caller frees it);
 * NULL when out of memory. */
char *Dlk_escape_dup(const char *s);
/* msg (a string in cap bytes) with credentials replaced by "***": every
 * one of the n secrets the caller knows (as it is and percent-encoded),
 * the user information of URLs (the "KEY:SECRET" of
 * "s3://KEY:SECRET@host") and the values of pre-signed URLs' and headers'
 * credentials (X-Amz-Signature=, X-Amz-Credential=,
 * X-Amz-Security-Token=, X-Goog-Signature=, Credential=, Signature=,
 * token=, "Bearer ...").  Dlk_fail applies it without secrets to every
 * message; the stores add theirs where a server's text is quoted. */
void Dlk_redact(char *msg, size_t cap, const char *const *secrets,
                size_t nsecrets);
/* url, redacted as Dlk_redact does, into out (cut to cap).  Returns out. */
char *Dlk_redact_url(const char *url, char *out, size_t cap);
/* Dlk_redact of err's message. */
void Dlk_error_redact(dlk_error *err, const char *const *secrets,
                      size_t nsecrets);

#endif /* DLK_UTIL_TEXT_H */
