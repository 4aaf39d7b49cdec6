/* common.c - printing helpers shared by the subcommands. */
#include "cmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

void cmd_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dlk %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cmd_fail(const char *cmd, const dlk_error *err)
{
    cmd_error(cmd, "%s", err->msg[0] ? err->msg : dlk_strerror(err->code));
    switch (err->code) {
    case DLK_OK: return EXIT_OK;
    case DLK_ECONFLICT: return EXIT_CONFLICT;
    default: return EXIT_ERROR;
    }
}

int cmd_usage(const char *usage, bool help)
{
    fputs(usage, help ? stdout : stderr);
    return help ? EXIT_OK : EXIT_USAGE;
}

int cmd_bad_option(const char *cmd, char **argv, const char *usage)
{
    cmd_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
    return cmd_usage(usage, false);
}

int cmd_finish(const char *cmd, int code)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cmd_error(cmd, "cannot write to standard output: %s",
                  strerror(errno));
        return EXIT_ERROR;
    }
    return code;
}

const char *cmd_bytes(unsigned long long n, char buf[32])
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (n < 1024) {
        snprintf(buf, 32, "%llu B", n);
        return buf;
    }
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, 32, "%.1f %s", v, units[u]);
    return buf;
}

const char *cmd_shape(const int64_t *shape, int ndim, char buf[128])
{
    if (ndim == 0) {
        snprintf(buf, 128, "scalar");
        return buf;
    }
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && n < 100; i++) {
        if (shape[i] == DLK_DIM_VARIABLE)
            n += (size_t)snprintf(buf + n, 128 - n, "%s?", i ? "x" : "");
        else
            n += (size_t)snprintf(buf + n, 128 - n, "%s%lld", i ? "x" : "",
                                  (long long)shape[i]);
    }
    return buf;
}

double cmd_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
