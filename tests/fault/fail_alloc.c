/* fail_alloc.c - allocation failures on demand, for the fault-injection
 * build (make fault): linked with -Wl,--wrap for malloc, calloc, realloc,
 * strdup, strndup and posix_memalign, so that dlk's own calls (not those
 * of the libraries it loads) come here.
 *
 *   DLK_FAIL_ALLOC=N    the Nth of those calls fails (from 1), the others
 *                       succeed; 0 or unset: none fails
 *   DLK_ALLOC_COUNT=F   at exit, write the number of calls to file F
 *   DLK_FAIL_TRACE=1    print the failing call's stack to stderr
 *                       (addresses: addr2line -e build-fault/dlk)
 *
 * As SQLite's and curl's test builds do: run a case once to count, then
 * once for every N, and ask that each run ends with its error, never a
 * crash, and leaves what was committed intact. */
#include <execinfo.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);

static atomic_ulong calls;
static unsigned long fail_at;
static atomic_int ready;

static void report(void)
{
    const char *f = getenv("DLK_ALLOC_COUNT");
    FILE *fp = f ? fopen(f, "w") : NULL;
    if (fp) {
        fprintf(fp, "%lu\n", (unsigned long)atomic_load(&calls));
        fclose(fp);
    }
}

__attribute__((constructor)) static void fail_alloc_init(void)
{
    const char *v = getenv("DLK_FAIL_ALLOC");
    fail_at = v ? strtoul(v, NULL, 10) : 0;
    if (getenv("DLK_ALLOC_COUNT"))
        atexit(report);
    atomic_store(&ready, 1);
}

/* whether this call is the one to fail */
static int fails(void)
{
    if (!atomic_load(&ready))
        return 0;
    unsigned long n = atomic_fetch_add(&calls, 1) + 1;
    if (!fail_at || n != fail_at)
        return 0;
    if (getenv("DLK_FAIL_TRACE")) {
        void *pc[32];
        backtrace_symbols_fd(pc, backtrace(pc, 32), 2);
    }
    return 1;
}

void *__wrap_malloc(size_t n)
{
    return fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    return fails() ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fails() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    return fails() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return fails() ? NULL : __real_strndup(s, n);
}

int __wrap_posix_memalign(void **p, size_t a, size_t n)
{
    return fails() ? 12 /* ENOMEM */ : __real_posix_memalign(p, a, n);
}
