/* clock.c - the monotonic clock the library times its stages with, and
 * timed waits. */
#include "internal.h"

#include <time.h>

double dlk_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int dlk_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return pthread_cond_timedwait(cv, mu, &ts);
}
