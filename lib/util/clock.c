/* clock.c - the monotonic clock the library times its stages with, a
 * thread's time on (or waiting for) a CPU, and timed waits. */
#include "util/clock.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

double Dlk_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Each thread's schedstat, opened once and read again in place (a file
 * opened by the thread: /proc/thread-self names the opener), closed when
 * the thread ends. */
static pthread_key_t schedstat_key;
static pthread_once_t schedstat_once = PTHREAD_ONCE_INIT;

static void schedstat_close(void *v)
{
    close((int)(intptr_t)v - 1);
}

static void schedstat_key_make(void)
{
    pthread_key_create(&schedstat_key, schedstat_close);
}

double Dlk_thread_cpu_s(void)
{
    /* the run time from the clock, which brings a running thread's up to
     * date (schedstat's first field lags by up to a tick); the wait for
     * a CPU from schedstat's second field, current while the thread
     * runs: both are time the thread wanted a CPU, not the store */
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
        return 0;
    double s = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    pthread_once(&schedstat_once, schedstat_key_make);
    int fd = (int)(intptr_t)pthread_getspecific(schedstat_key) - 1;
    if (fd < 0 && (fd = open("/proc/thread-self/schedstat",
                             O_RDONLY | O_CLOEXEC)) >= 0)
        pthread_setspecific(schedstat_key, (void *)(intptr_t)(fd + 1));
    char b[96];
    ssize_t n = fd >= 0 ? pread(fd, b, sizeof b - 1, 0) : -1;
    unsigned long long run, wait;
    if (n > 0 && (b[n] = 0, sscanf(b, "%llu %llu", &run, &wait) == 2))
        s += (double)wait / 1e9;
    return s;
}

int Dlk_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms)
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
