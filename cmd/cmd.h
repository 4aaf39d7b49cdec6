/* cmd.h - what the subcommands share: their entry points, exit
 * codes and printing helpers.  Adding a command takes: its cmd_<verb>
 * function in cmd/<verb>.c, its row in the table in cmd/dlk.c, its man
 * page man/dlk-<verb>.1, and its tests in tests/t/. */
#ifndef DLK_CMD_H
#define DLK_CMD_H

#include "dlk.h"

#include <stdbool.h>
#include <stdio.h>

/* Exit codes (documented in dlk(1)). */
enum {
    EXIT_OK = 0,
    EXIT_PROBLEMS = 1, /* a check found problems (verify) */
    EXIT_USAGE = 2,    /* bad usage: unknown command, flag or argument */
    EXIT_ERROR = 3,    /* the operation failed: i/o, corrupt, not found… */
    EXIT_CONFLICT = 4  /* another writer changed the dataset: retry */
};

int cmd_bench_stream(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_commit(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_log(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_verify(int argc, char **argv);

/* Seconds on the monotonic clock. */
double cmd_now_s(void);
/* Print "dlk CMD: message" to stderr. */
void cmd_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Print a library error and return the exit code for its status. */
int cmd_fail(const char *cmd, const dlk_error *err);
/* Print the usage text to `f`; return EXIT_USAGE for misuse (to stderr)
 * or EXIT_OK for --help (to stdout). */
int cmd_usage(const char *usage, bool help);
/* Report an unknown or incomplete option (the one getopt just passed)
 * and print the usage: returns EXIT_USAGE. */
int cmd_bad_option(const char *cmd, char **argv, const char *usage);
/* Flush stdout and report a failed write (a full disk, a closed pipe). */
int cmd_finish(const char *cmd, int code);
/* "1.5 MiB" style sizes. */
const char *cmd_bytes(unsigned long long n, char buf[32]);
/* "224x224x3" style shapes ('?' for variable). */
const char *cmd_shape(const int64_t *shape, int ndim, char buf[128]);

#endif
