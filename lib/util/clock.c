/* clock.c - the monotonic clock the library times its stages with. */
#include "internal.h"

#include <time.h>

double dlk_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
