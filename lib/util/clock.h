/*
 * clock.h - clocks and timed waits (util/clock.c); not installed.
 */
#ifndef DLK_UTIL_CLOCK_H
#define DLK_UTIL_CLOCK_H

#include <pthread.h>

/* Seconds on the monotonic clock (util/clock.c). */
double Dlk_now_s(void);
/* the calling thread's time on a CPU or runnable waiting for one,
 * seconds (its CPU time where the wait is not kept; 0 if neither is) */
double Dlk_thread_cpu_s(void);
/* pthread_cond_timedwait for at most ms milliseconds from now (callers
 * that poll a stop or cancel callback a few times a second while they
 * wait); returns its result (ETIMEDOUT when the time ran out). */
int Dlk_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms);

#endif /* DLK_UTIL_CLOCK_H */
