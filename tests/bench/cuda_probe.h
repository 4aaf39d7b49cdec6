// cuda_probe.h - what the CUDA probes in tests/bench/ share: a monotonic
// clock in seconds, a check that stops the probe on a CUDA error, and the
// host side of a page-cache loader's path: a piece of a file read whole
// with pread(2), and a memcpy the compiler keeps.
#pragma once
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

/* A piece of a file: len bytes at `at`. */
typedef struct piece { int fd; off_t at; size_t len; } piece;

/* The piece read whole into buf (the probe stops on an error). */
static inline void read_piece(const piece *p, char *buf)
{
    size_t got = 0;
    while (got < p->len) {
        ssize_t r = pread(p->fd, buf + got, p->len - got, p->at + (off_t)got);
        if (r <= 0) { perror("pread"); exit(1); }
        got += (size_t)r;
    }
}

/* memcpy through a volatile pointer: a copy into a buffer freed unread
 * is otherwise dropped by the compiler */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;
