/*
 * buf.h - a growable byte buffer (util/buf.c); not installed.
 */
#ifndef DLK_UTIL_BUF_H
#define DLK_UTIL_BUF_H

#include "dlk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Dlk_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    bool fixed; /* wraps caller memory of `cap` bytes: never reallocated */
} Dlk_buf;

void Dlk_buf_init(Dlk_buf *b);
/* Wrap caller-owned memory; writes past cap fail with DLK_ELIMIT. */
void Dlk_buf_wrap(Dlk_buf *b, void *mem, size_t cap);
dlk_status Dlk_buf_reserve(Dlk_buf *b, size_t extra, dlk_error *err);
dlk_status Dlk_buf_append(Dlk_buf *b, const void *p, size_t n, dlk_error *err);
void Dlk_buf_free(Dlk_buf *b);

#endif /* DLK_UTIL_BUF_H */
