/* loader_scale.c - what the loader costs before and at its first batch,
 * by the dataset's rows: the time from the dataset's open to the loader's
 * open and to its first batch, and the peak RSS after BATCHES more
 * batches (shuffled, check mode, as bench-stream reads).  Linked to
 * libdlk.so, so one binary measures any build through LD_LIBRARY_PATH
 * (tests/bench/loader_scale.sh runs two).
 *
 *   loader_scale DATASET WORLD RANK MEMORY [BATCHES [STEPS]]
 * prints one JSON line.  With STEPS, the epoch is resumed from a state in
 * which 8 ranks took STEPS batches each (a checkpoint of another world
 * size). */
#include "dlk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* the process's CPU seconds, all threads (on a machine shared with
 * other work its wall times stretch; these do not) */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 +
           u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

/* a /proc/self/status field, in bytes */
static unsigned long long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long v = 0;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = strtoull(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v * 1024;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: loader_scale DATASET WORLD RANK MEMORY "
                        "[BATCHES [STEPS]]\n");
        return 2;
    }
    long batches = argc > 5 ? atol(argv[5]) : 64;
    dlk_error err;
    double t0 = now_s(), c0 = cpu_s();
    dlk_dataset *ds;
    if (dlk_dataset_open(argv[1], NULL, &ds, &err)) {
        fprintf(stderr, "loader_scale: %s\n", err.msg);
        return 1;
    }
    dlk_loader_opts o = DLK_LOADER_OPTS_INIT;
    o.batch_size = 256;
    o.shuffle = 1;
    o.seed = 1;
    o.world_size = (uint32_t)atol(argv[2]);
    o.rank = (uint32_t)atol(argv[3]);
    o.memory_limit = strtoull(argv[4], NULL, 10);
    o.check = 1;
    o.epochs = 2;
    o.device = "cpu";
    dlk_loader_state st;
    if (argc > 6) {
        memset(&st, 0, sizeof st);
        st.seed = o.seed;
        st.nseg = 2;
        st.seg[0].world = 8;
        st.seg[0].batch = o.batch_size;
        st.seg[0].steps = strtoull(argv[6], NULL, 10);
        st.seg[1].world = o.world_size;
        st.seg[1].batch = o.batch_size;
        o.start = &st;
    }
    dlk_loader *l;
    if (dlk_loader_open(ds, &o, &l, &err)) {
        fprintf(stderr, "loader_scale: %s\n", err.msg);
        return 1;
    }
    double t_open = now_s() - t0, c_open = cpu_s() - c0;
    const dlk_batch *b;
    if (dlk_loader_next(l, &b, &err) || !b) {
        fprintf(stderr, "loader_scale: %s\n", b ? err.msg : "no batch");
        return 1;
    }
    double t_first = now_s() - t0, c_first = cpu_s() - c0;
    unsigned long long rss_first = status_kb("VmRSS");
    long got = 1;
    for (; got <= batches; got++)
        if (dlk_loader_next(l, &b, &err) || !b)
            break;
    printf("{\"world\": %s, \"rank\": %s, \"open_s\": %.3f, "
           "\"open_cpu_s\": %.3f, \"first_batch_s\": %.3f, "
           "\"first_batch_cpu_s\": %.3f, \"rss_first_bytes\": %llu, "
           "\"peak_rss_bytes\": %llu, \"batches\": %ld}\n",
           argv[2], argv[3], t_open, c_open, t_first, c_first, rss_first,
           status_kb("VmHWM"), got);
    dlk_loader_close(l);
    dlk_dataset_close(ds, &err);
    return 0;
}
