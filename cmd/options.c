/* options.c - the one parser of the commands' options (options.h): a
 * table turned into getopt_long's, and each value read by its type and
 * checked against its range before it is stored. */
#include "options.h"
#include "cmd.h"
#include "util/size.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* The most options a command has (with room to grow). */
#define MAX_OPTS 96

static char current[80];
static const char *current_cmd = "";

const char *cmd_option_name(void) { return current; }
const char *cmd_option_cmd(void) { return current_cmd; }

/* "4K", "1G", "1T" when n is a whole number of the unit, else bytes. */
static const char *size_text(uint64_t n, char buf[32])
{
    static const char units[] = "KMGT";
    int u = -1;
    while (u < 3 && n && n % 1024 == 0) {
        n /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, 32, "%llu", (unsigned long long)n);
    else
        snprintf(buf, 32, "%llu%c", (unsigned long long)n, units[u]);
    return buf;
}

/* "90s", "30m", "2d": the largest unit that divides n. */
static const char *duration_text(uint64_t n, char buf[32])
{
    if (n && n % 86400 == 0)
        snprintf(buf, 32, "%llud", (unsigned long long)(n / 86400));
    else if (n && n % 3600 == 0)
        snprintf(buf, 32, "%lluh", (unsigned long long)(n / 3600));
    else if (n && n % 60 == 0)
        snprintf(buf, 32, "%llum", (unsigned long long)(n / 60));
    else
        snprintf(buf, 32, "%llus", (unsigned long long)n);
    return buf;
}

static int out_of_range(const char *cmd, const char *what, const char *arg,
                        const char *range)
{
    cmd_error(cmd, "%s: %s is out of range (%s)", what, arg, range);
    return EXIT_USAGE;
}

/* Digits, after an optional '-' (a negative number is out of range, not
 * malformed): 0 and *v; 1 out of range (negative, past 2^64 - 1); -1
 * malformed.  strtoull alone would take " 1", "+1" and "-1" (as
 * 2^64 - 1). */
static int scan_uint(const char *s, uint64_t *v)
{
    const char *p = *s == '-' ? s + 1 : s;
    if (*p < '0' || *p > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(p, &end, 10);
    if (*end)
        return -1;
    if (errno == ERANGE || p != s)
        return 1;
    *v = x;
    return 0;
}

int cmd_read_uint(const char *cmd, const char *what, const char *arg,
                  uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    int r = scan_uint(arg, &v);
    if (r < 0) {
        cmd_error(cmd, "%s: '%s' is not a whole number", what, arg);
        return EXIT_USAGE;
    }
    if (r > 0 || v < min || v > max) {
        char range[64];
        snprintf(range, sizeof range, "%llu to %llu",
                 (unsigned long long)min, (unsigned long long)max);
        return out_of_range(cmd, what, arg, range);
    }
    *out = v;
    return 0;
}

int cmd_read_size(const char *cmd, const char *what, const char *arg,
                  uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    /* "-1" is a number out of range, not a malformed size */
    int r = *arg == '-' && arg[1] >= '0' && arg[1] <= '9'
                ? 1 : Dlk_scan_size(arg, &v);
    if (r < 0) {
        cmd_error(cmd, "%s: '%s' is not a size (bytes with an optional K, "
                  "M, G or T, like 16M or 64KiB)", what, arg);
        return EXIT_USAGE;
    }
    if (r > 0 || v < min || v > max) {
        char lo[32], hi[32], range[80];
        snprintf(range, sizeof range, "%s to %s", size_text(min, lo),
                 size_text(max, hi));
        return out_of_range(cmd, what, arg, range);
    }
    *out = v;
    return 0;
}

/* A whole number with an optional unit s, m, h or d, in seconds. */
static int read_duration(const char *cmd, const char *what, const char *arg,
                         uint64_t min, uint64_t max, uint64_t *out)
{
    char num[32];
    size_t len = strlen(arg);
    uint64_t mul = 1;
    if (len && len < sizeof num && strchr("smhd", arg[len - 1])) {
        switch (arg[len - 1]) {
        case 'm': mul = 60; break;
        case 'h': mul = 3600; break;
        case 'd': mul = 86400; break;
        }
        len--;
    }
    uint64_t v = 0;
    int r = -1;
    if (len < sizeof num) {
        memcpy(num, arg, len);
        num[len] = '\0';
        r = scan_uint(num, &v);
    }
    if (r < 0) {
        cmd_error(cmd, "%s: '%s' is not a duration (like 90s, 30m, 1h, 2d)",
                  what, arg);
        return EXIT_USAGE;
    }
    if (r > 0 || v > UINT64_MAX / mul || v * mul < min || v * mul > max) {
        char lo[32], hi[32], range[80];
        snprintf(range, sizeof range, "%s to %s", duration_text(min, lo),
                 duration_text(max, hi));
        return out_of_range(cmd, what, arg, range);
    }
    *out = v * mul;
    return 0;
}

int cmd_read_float(const char *cmd, const char *what, const char *arg,
                   double min, bool above_min, double max, double *out)
{
    /* a digit first (after a sign or a point): strtod would take "nan",
     * "inf", " 1" and hexadecimal */
    const char *p = *arg == '-' ? arg + 1 : arg;
    p += *p == '.';
    char *end = NULL;
    double v = 0;
    if (*p >= '0' && *p <= '9' && !strpbrk(arg, "xX")) {
        errno = 0;
        v = strtod(arg, &end);
    }
    if (!end || *end) {
        cmd_error(cmd, "%s: '%s' is not a number", what, arg);
        return EXIT_USAGE;
    }
    bool huge = errno == ERANGE && (v > 1 || v < -1);
    if (huge || !isfinite(v) || (above_min ? !(v > min) : !(v >= min)) ||
        !(v <= max)) {
        char range[96];
        if (above_min && isinf(max))
            snprintf(range, sizeof range, "above %g", min);
        else if (above_min)
            snprintf(range, sizeof range, "above %g, at most %g", min, max);
        else if (isinf(max))
            snprintf(range, sizeof range, "%g or more", min);
        else
            snprintf(range, sizeof range, "%g to %g", min, max);
        return out_of_range(cmd, what, arg, range);
    }
    *out = v;
    return 0;
}

/* The largest value an integer of `width` bytes holds. */
static uint64_t type_max(size_t width, bool is_signed)
{
    uint64_t m = width >= 8 ? UINT64_MAX : (1ull << (8 * width)) - 1;
    return is_signed ? m >> 1 : m;
}

static void store_int(void *p, size_t width, uint64_t v)
{
    switch (width) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static int store(const char *cmd, const cmd_opt *o, const char *arg,
                 void *ctx)
{
    const char *what = current;
    uint64_t v = 0, max = o->max;
    if (o->type == CMD_OPT_T_UINT || o->type == CMD_OPT_T_SIZE ||
        o->type == CMD_OPT_T_DURATION) {
        uint64_t tmax = type_max(o->width, o->is_signed);
        if (max > tmax)
            max = tmax;
    }
    int code = 0;
    switch (o->type) {
    case CMD_OPT_T_FLAG:
        store_int(o->value, o->width, (uint64_t)o->set);
        return 0;
    case CMD_OPT_T_STRING:
        *(const char **)o->value = arg;
        return 0;
    case CMD_OPT_T_UINT:
        code = cmd_read_uint(cmd, what, arg, o->min, max, &v);
        break;
    case CMD_OPT_T_SIZE:
        code = cmd_read_size(cmd, what, arg, o->min, max, &v);
        break;
    case CMD_OPT_T_DURATION:
        code = read_duration(cmd, what, arg, o->min, max, &v);
        break;
    case CMD_OPT_T_FLOAT:
        return cmd_read_float(cmd, what, arg, o->fmin, o->above_min, o->fmax,
                              (double *)o->value);
    case CMD_OPT_T_CALL:
        return o->fn(o, arg, ctx);
    case CMD_OPT_T_END:
    case CMD_OPT_T_HELP:
        return 0;
    }
    if (!code)
        store_int(o->value, o->width, v);
    return code;
}

static bool takes_value(const cmd_opt *o)
{
    switch (o->type) {
    case CMD_OPT_T_FLAG:
    case CMD_OPT_T_HELP:
    case CMD_OPT_T_END:
        return false;
    case CMD_OPT_T_CALL:
        return o->takes_value;
    default:
        return true;
    }
}

int cmd_parse_options(const char *cmd, const cmd_opt *opts,
                      const char *usage, void *ctx, int argc, char **argv)
{
    struct option longs[MAX_OPTS + 1];
    char shorts[2 * MAX_OPTS + 1];
    size_t n = 0, ns = 0;
    for (; opts[n].type != CMD_OPT_T_END && n < MAX_OPTS; n++) {
        bool v = takes_value(&opts[n]);
        longs[n] = (struct option){opts[n].name,
                                   v ? required_argument : no_argument,
                                   NULL, 256 + (int)n};
        if (opts[n].short_name) {
            shorts[ns++] = (char)opts[n].short_name;
            if (v)
                shorts[ns++] = ':';
        }
    }
    longs[n] = (struct option){0, 0, 0, 0};
    shorts[ns] = '\0';
    current_cmd = cmd;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        const cmd_opt *o = NULL;
        if (c >= 256 && (size_t)(c - 256) < n) {
            o = &opts[c - 256];
            snprintf(current, sizeof current, "--%s", o->name);
        } else if (c != '?' && c != ':') {
            for (size_t i = 0; i < n && !o; i++)
                if (opts[i].short_name == c)
                    o = &opts[i];
            snprintf(current, sizeof current, "-%c", c);
        }
        if (!o) {
            cmd_option_error(cmd, argv, longs);
            if (usage)
                cmd_usage(usage, false);
            return EXIT_USAGE;
        }
        if (o->type == CMD_OPT_T_HELP) {
            const char *const *texts = o->value;
            for (size_t i = 0; texts && texts[i]; i++)
                fputs(texts[i], stdout);
            if (!texts && !usage)
                return CMD_OPTS_HELP;
            if (!texts)
                cmd_usage(usage, true);
            return cmd_finish(cmd, EXIT_OK);
        }
        int code = store(cmd, o, optarg, ctx);
        if (code)
            return code;
    }
    return CMD_OPTS_DONE;
}
