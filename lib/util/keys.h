/*
 * keys.h - object keys: what a key may hold (util/keys.c); not installed.
 */
#ifndef DLK_UTIL_KEYS_H
#define DLK_UTIL_KEYS_H

#include <stdbool.h>
#include <stddef.h>

/* Keys: relative, no empty, "." or ".." segment, no leading '/', no NUL,
 * no control characters or backslash, valid UTF-8, at most 1024 bytes. */
bool Dlk_key_valid(const char *key);
/* Why key is not a valid object key ("a control character", "a '.' or
 * '..' path segment", ...), or NULL when it is. */
const char *Dlk_key_problem(const char *key);
/* key made safe to print and to put in JSON: Dlk_escape. */
void Dlk_key_escape(const char *key, char *out, size_t cap);

#endif /* DLK_UTIL_KEYS_H */
