/*
 * grow.h - growable arrays (util/buf.c); not installed.
 */
#ifndef DLK_UTIL_GROW_H
#define DLK_UTIL_GROW_H

#include <stdbool.h>
#include <stddef.h>

/* Room for element n of an array of *cap elements of elem bytes: p itself
 * when n < *cap, else p reallocated to twice the capacity (first when
 * empty) with *cap updated; NULL when out of memory or the size
 * overflows, p and *cap then unchanged (the caller still owns p). */
void *Dlk_grow(void *p, size_t *cap, size_t n, size_t elem, size_t first);
/* DLK_GROW(arr, n, cap, first): the same on an array variable, which is
 * replaced by the grown array; false when out of memory. */
#define DLK_GROW(arr, n, cap, first)                                      \
    __extension__({                                                       \
        void *Dlk_grown_ = Dlk_grow((arr), &(cap), (n), sizeof *(arr),    \
                                    (first));                             \
        if (Dlk_grown_)                                                   \
            (arr) = Dlk_grown_;                                           \
        Dlk_grown_ != NULL;                                               \
    })

#endif /* DLK_UTIL_GROW_H */
