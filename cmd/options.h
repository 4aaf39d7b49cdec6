/* options.h - a command's options as one table beside its usage string,
 * parsed in one call (in the spirit of git's parse-options): each value
 * is typed (a whole number, a byte size, a duration, a decimal number)
 * and checked against its range by one parser, so that no flag reads
 * "4294967297" as 1 or "-1" as 4294967295.  Every bad value is a usage
 * error (exit 2) naming the option:
 *
 *   dlk bench-stream: --batch-size: 4294967297 is out of range (1 to 16777216)
 *   dlk gc: --grace: 'soon' is not a duration (like 90s, 30m, 1h, 2d)
 *
 * A table:
 *
 *   cmd_opt opts[] = {
 *       CMD_OPT_UINT("batch-size", 0, &o.batch_size, 1, 1 << 24),
 *       CMD_OPT_FLAG("shuffle", 0, &o.shuffle),
 *       CMD_OPT_STRING("at", 0, &at),
 *       CMD_OPT_HELP(),
 *       CMD_OPT_END(),
 *   };
 *   int code = cmd_parse_options("bench-stream", opts, usage_text, NULL,
 *                                argc, argv);
 *   if (code != CMD_OPTS_DONE)
 *       return code;
 *   ... the operands are argv[optind] to argv[argc - 1]
 *
 * The options are read by getopt_long: they may come anywhere among the
 * operands, "--name=value" and "--name value" both work, a unique prefix
 * of a long name names it, and "--" ends them.  t090 reads the tables to
 * check that the man pages document every option. */
#ifndef DLK_CMD_OPTIONS_H
#define DLK_CMD_OPTIONS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cmd_opt_type {
    CMD_OPT_T_END = 0,
    CMD_OPT_T_FLAG,      /* no value: `set` is stored (width bytes) */
    CMD_OPT_T_STRING,    /* const char *: the argument itself */
    CMD_OPT_T_UINT,      /* a whole number from min to max */
    CMD_OPT_T_SIZE,      /* bytes, as Dlk_parse_size reads them (16M,
                            64KiB, 1G), from min to max */
    CMD_OPT_T_DURATION,  /* seconds: 90 (or 90s), 30m, 1h, 2d; min to max */
    CMD_OPT_T_FLOAT,     /* a decimal number from fmin (or above it, with
                            above_min) to fmax (a double) */
    CMD_OPT_T_CALL,      /* fn(opt, arg, ctx) reads the value */
    CMD_OPT_T_HELP       /* -h, --help */
} cmd_opt_type;

typedef struct cmd_opt cmd_opt;
/* A value of a syntax of its own: 0, or EXIT_USAGE after saying why
 * (cmd_option_value names the option as given). */
typedef int (*cmd_opt_fn)(const cmd_opt *opt, const char *arg, void *ctx);

struct cmd_opt {
    cmd_opt_type type;
    const char *name;    /* the long name, without "--" */
    int short_name;      /* a letter, or 0 for none */
    void *value;         /* where the value is stored */
    size_t width;        /* sizeof the integer (or flag) at value */
    bool is_signed;      /* that integer's type is signed */
    uint64_t min, max;   /* whole numbers, sizes (bytes), durations (s) */
    double fmin, fmax;   /* decimal numbers */
    bool above_min;      /* decimal numbers: fmin itself is out of range */
    long long set;       /* flags: the value stored */
    cmd_opt_fn fn;       /* CMD_OPT_T_CALL */
    bool takes_value;    /* CMD_OPT_T_CALL: whether a value follows */
};

/* Whether the integer type of `lvalue` is signed (for the store). */
#define CMD_OPT_SIGNED_(lvalue)                                             \
    _Generic((lvalue), signed char: true, short: true, int: true,            \
             long: true, long long: true, default: false)

#define CMD_OPT_FLAG(l, s, p)                                               \
    {CMD_OPT_T_FLAG, (l), (s), (p), sizeof *(p), false, 0, 0, 0, 0, false,   \
     1, NULL, false}
/* A flag that stores v (e.g. 0 for --no-check). */
#define CMD_OPT_SET(l, s, p, v)                                             \
    {CMD_OPT_T_FLAG, (l), (s), (p), sizeof *(p), false, 0, 0, 0, 0, false,   \
     (v), NULL, false}
#define CMD_OPT_STRING(l, s, p)                                             \
    {CMD_OPT_T_STRING, (l), (s), (p), sizeof *(p), false, 0, 0, 0, 0, false, \
     0, NULL, true}
/* p: any integer type; values past what it holds are out of range too. */
#define CMD_OPT_UINT(l, s, p, lo, hi)                                       \
    {CMD_OPT_T_UINT, (l), (s), (p), sizeof *(p), CMD_OPT_SIGNED_(*(p)),      \
     (lo), (hi), 0, 0, false, 0, NULL, true}
#define CMD_OPT_SIZE(l, s, p, lo, hi)                                       \
    {CMD_OPT_T_SIZE, (l), (s), (p), sizeof *(p), CMD_OPT_SIGNED_(*(p)),      \
     (lo), (hi), 0, 0, false, 0, NULL, true}
#define CMD_OPT_DURATION(l, s, p, lo, hi)                                   \
    {CMD_OPT_T_DURATION, (l), (s), (p), sizeof *(p), CMD_OPT_SIGNED_(*(p)),  \
     (lo), (hi), 0, 0, false, 0, NULL, true}
/* p: a double; from lo to hi */
#define CMD_OPT_FLOAT(l, s, p, lo, hi)                                      \
    {CMD_OPT_T_FLOAT, (l), (s), (p), sizeof *(p), true, 0, 0, (lo), (hi),    \
     false, 0, NULL, true}
/* p: a double; more than lo, at most hi (INFINITY: no bound) */
#define CMD_OPT_FLOAT_ABOVE(l, s, p, lo, hi)                                \
    {CMD_OPT_T_FLOAT, (l), (s), (p), sizeof *(p), true, 0, 0, (lo), (hi),    \
     true, 0, NULL, true}
/* fn reads the value (arg); CMD_OPT_CALL_FLAG: none (arg NULL) */
#define CMD_OPT_CALL(l, s, f)                                               \
    {CMD_OPT_T_CALL, (l), (s), NULL, 0, false, 0, 0, 0, 0, false, 0, (f),    \
     true}
/* the same with p for fn to find at opt->value */
#define CMD_OPT_CALL_WITH(l, s, f, p)                                       \
    {CMD_OPT_T_CALL, (l), (s), (p), 0, false, 0, 0, 0, 0, false, 0, (f),     \
     true}
#define CMD_OPT_CALL_FLAG(l, s, f)                                          \
    {CMD_OPT_T_CALL, (l), (s), NULL, 0, false, 0, 0, 0, 0, false, 0, (f),    \
     false}
#define CMD_OPT_CALL_FLAG_WITH(l, s, f, p)                                  \
    {CMD_OPT_T_CALL, (l), (s), (p), 0, false, 0, 0, 0, 0, false, 0, (f),     \
     false}
#define CMD_OPT_HELP()                                                      \
    {CMD_OPT_T_HELP, "help", 'h', NULL, 0, false, 0, 0, 0, 0, false, 0,      \
     NULL, false}
/* -h, --help printing these texts (a NULL-ended array) on stdout */
#define CMD_OPT_HELP_TEXTS(texts)                                           \
    {CMD_OPT_T_HELP, "help", 'h', (void *)(texts), 0, false, 0, 0, 0, 0,     \
     false, 0, NULL, false}
#define CMD_OPT_END()                                                       \
    {CMD_OPT_T_END, NULL, 0, NULL, 0, false, 0, 0, 0, 0, false, 0, NULL,     \
     false}

/* cmd_parse_options: every option was read and stored; the operands are
 * argv[optind] to argv[argc - 1]. */
#define CMD_OPTS_DONE (-1)
/* cmd_parse_options without a usage text or help texts: -h or --help
 * was given. */
#define CMD_OPTS_HELP (-2)

/* Read argv's options by the table `opts` (ended by CMD_OPT_END()).
 * ctx goes to the callbacks.
 * @return CMD_OPTS_DONE; EXIT_OK after --help printed its texts
 *         (CMD_OPT_HELP_TEXTS) or else `usage` on stdout (CMD_OPTS_HELP
 *         instead when there is neither: the caller prints its own); EXIT_USAGE after an unknown or incomplete option
 *         (named, with the nearest known one, then `usage` on stderr when
 *         there is one) or a bad value (named, with the range or form
 *         it should have), or the code a callback returned. */
int cmd_parse_options(const char *cmd, const cmd_opt *opts,
                      const char *usage, void *ctx, int argc, char **argv);

/* The option being read, as the user wrote it ("-j" or "--jobs"), for a
 * callback's messages. */
const char *cmd_option_name(void);
/* The command whose options are being read ("ingest"). */
const char *cmd_option_cmd(void);

/* The typed readers of the table, for the parts of values of a syntax
 * of their own (--shard I/N, --resize WxH) and for numeric operands.
 * `what` names the value in the message ("--shard", "INDEX"); each
 * returns 0 with *out set, or EXIT_USAGE after printing
 * "dlk CMD: WHAT: ARG is out of range (MIN to MAX)" or
 * "dlk CMD: WHAT: 'ARG' is not a whole number". */
int cmd_read_uint(const char *cmd, const char *what, const char *arg,
                  uint64_t min, uint64_t max, uint64_t *out);
int cmd_read_size(const char *cmd, const char *what, const char *arg,
                  uint64_t min, uint64_t max, uint64_t *out);
int cmd_read_float(const char *cmd, const char *what, const char *arg,
                   double min, bool above_min, double max, double *out);

#endif
