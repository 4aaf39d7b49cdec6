/* unit.h - a tiny TAP harness for the C unit tests in tests/unit/.
 * Each check prints "ok - name" or "not ok - name (file:line)"; main
 * returns unit_done(), non-zero when any check failed. */
#ifndef DLK_UNIT_H
#define DLK_UNIT_H

#include <stdio.h>

static int unit_failed;

#define UNIT_CHECK(name, cond)                                             \
    do {                                                                   \
        if (cond) {                                                        \
            printf("ok - %s\n", (name));                                   \
        } else {                                                           \
            unit_failed++;                                                 \
            printf("not ok - %s (%s:%d: %s)\n", (name), __FILE__,          \
                   __LINE__, #cond);                                       \
        }                                                                  \
        fflush(stdout);                                                    \
    } while (0)

#define UNIT_SKIP(name, why) printf("ok - %s # SKIP %s\n", (name), (why))

static inline int unit_done(void)
{
    return unit_failed ? 1 : 0;
}

#endif
