/* clock.c - the monotonic clock the library times its stages with, a
 * thread's time on (or waiting for) a CPU, and timed waits. */
#include "internal.h"

#include <stdio.h>
#include <time.h>

double dlk_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double dlk_thread_cpu_s(void)
{
    /* the run time from the clock, which brings a running thread's up to
     * date (schedstat's first field lags by up to a tick); the wait for
     * a CPU from schedstat's second field, current while the thread
     * runs: both are time the thread wanted a CPU, not the store */
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
        return 0;
    double s = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    FILE *f = fopen("/proc/thread-self/schedstat", "re");
    if (f) {
        unsigned long long run, wait;
        if (fscanf(f, "%llu %llu", &run, &wait) == 2)
            s += (double)wait / 1e9;
        fclose(f);
    }
    return s;
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
