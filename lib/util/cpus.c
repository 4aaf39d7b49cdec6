/* cpus.c - how many CPUs this process may use. */
#include "dlk.h"

#include <sched.h>
#include <unistd.h>

int dlk_cpu_count(void)
{
    /* the affinity mask, not the online count: under taskset, a cpuset
     * or a Slurm allocation, a thread per online core would oversubscribe
     * the cores this process actually gets */
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
