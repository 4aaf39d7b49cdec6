/*
 * size.h - sizes as the command line and settings write them (util/size.c);
 * not installed.
 */
#ifndef DLK_UTIL_SIZE_H
#define DLK_UTIL_SIZE_H

#include <stdbool.h>
#include <stdint.h>

/* "16M", "16MiB", "64KB", "1G", "4096" -> bytes: K, M, G and T are powers
 * of 1024, optionally followed by "i" and "B".  false when malformed,
 * negative, zero or over 1 TiB. */
bool Dlk_parse_size(const char *s, uint64_t *out);
/* The same syntax without its range: 0 and *out set (any size of 64
 * bits, 0 included); 1 for a size past 2^64 - 1; -1 when malformed
 * (a sign, a space, an unknown suffix). */
int Dlk_scan_size(const char *s, uint64_t *out);

#endif /* DLK_UTIL_SIZE_H */
