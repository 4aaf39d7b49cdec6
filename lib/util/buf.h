/*
 * buf.h - a growable byte buffer (util/buf.c); not installed.
 */
#ifndef DLK_UTIL_BUF_H
#define DLK_UTIL_BUF_H

#include "dlk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dlk_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    bool fixed; /* wraps caller memory of `cap` bytes: never reallocated */
} dlk_buf;

void dlk_buf_init(dlk_buf *b);
/* Wrap caller-owned memory; writes past cap fail with DLK_ELIMIT. */
void dlk_buf_wrap(dlk_buf *b, void *mem, size_t cap);
dlk_status dlk_buf_reserve(dlk_buf *b, size_t extra, dlk_error *err);
dlk_status dlk_buf_append(dlk_buf *b, const void *p, size_t n, dlk_error *err);
void dlk_buf_free(dlk_buf *b);

#endif /* DLK_UTIL_BUF_H */
