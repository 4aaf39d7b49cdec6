/* buf.c - a growable byte buffer, or a fixed one over caller memory; and
 * the growth step of the arrays that grow one element at a time. */
#include "util/error.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

void Dlk_buf_init(Dlk_buf *b)
{
    memset(b, 0, sizeof *b);
}

void Dlk_buf_wrap(Dlk_buf *b, void *mem, size_t cap)
{
    b->data = mem;
    b->len = 0;
    b->cap = cap;
    b->fixed = true;
}

dlk_status Dlk_buf_reserve(Dlk_buf *b, size_t extra, dlk_error *err)
{
    size_t need;
    if (__builtin_add_overflow(b->len, extra, &need))
        return Dlk_fail(err, DLK_ELIMIT, "buffer size overflows");
    if (need <= b->cap)
        return DLK_OK;
    if (b->fixed)
        return Dlk_fail(err, DLK_ELIMIT,
                        "%zu bytes do not fit a buffer of %zu", need, b->cap);
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p)
        return Dlk_fail(err, DLK_ENOMEM, "cannot allocate %zu bytes", cap);
    b->data = p;
    b->cap = cap;
    return DLK_OK;
}

dlk_status Dlk_buf_append(Dlk_buf *b, const void *p, size_t n, dlk_error *err)
{
    dlk_status st = Dlk_buf_reserve(b, n, err);
    if (st)
        return st;
    DLK_ASSERT(b->cap - b->len >= n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return DLK_OK;
}

void Dlk_buf_free(Dlk_buf *b)
{
    if (!b->fixed)
        free(b->data);
    Dlk_buf_init(b);
}

void *Dlk_grow(void *p, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return p;
    size_t c = *cap ? *cap : first ? first : 1, bytes;
    while (c <= n)
        if (__builtin_mul_overflow(c, (size_t)2, &c))
            return NULL;
    if (__builtin_mul_overflow(c, elem, &bytes))
        return NULL;
    void *q = realloc(p, bytes);
    if (q)
        *cap = c;
    return q;
}
