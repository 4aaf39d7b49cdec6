/* cmd.h - what the subcommands share: their entry points, exit
 * codes and printing helpers.  Adding a command takes: its cmd_<verb>
 * function in cmd/<verb>.c with its table of options beside its usage
 * text (cmd/options.h), its row in the table in cmd/dlk.c, its man page
 * man/dlk-<verb>.1, and its tests in tests/t/. */
#ifndef DLK_CMD_H
#define DLK_CMD_H

#include "dlk.h"
#include "dlk_bench.h"

#include <jansson.h>

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

int cmd_bench_report(int argc, char **argv);
int cmd_bench_stream(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_commit(int argc, char **argv);
int cmd_compact(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_log(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_query(int argc, char **argv);
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
/* Report an unknown or incomplete option (the one getopt just passed),
 * with the nearest of `opts` when one is close, and print the usage:
 * returns EXIT_USAGE. */
struct option;
int cmd_bad_option(const char *cmd, char **argv, const struct option *opts,
                   const char *usage);
/* The report of an unknown or incomplete option without the usage text:
 * returns EXIT_USAGE. */
int cmd_option_error(const char *cmd, char **argv,
                     const struct option *opts);
/* The candidate nearest to `word` (edit distance) when it is close
 * enough to be a likely typo, else NULL. */
const char *cmd_nearest(const char *word, const char *const *cands,
                        size_t n);
/* A URL argument that starts like an S3 URL must be s3://BUCKET[/...]:
 * "s3:/x" or "s3://" is refused (EXIT_USAGE, after saying why) rather
 * than taken for a local path; 0 when fine. */
int cmd_check_url(const char *cmd, const char *url);

/* Storage settings (cmd_store.c).  --no-sign-request and
 * --s3-addressing, from any place on the command line (dlk.c): */
extern bool cmd_no_sign;
extern int cmd_s3_addressing;   /* a dlk_s3_addressing, -1: not given */
/* The store options for opening `url`: the environment's (store_env.h),
 * read once, at the first remote URL, with the flags above over them;
 * defaults for a local one.  *out lives until exit.
 * @return DLK_OK; the error reading the environment (naming the
 *         variable) for a remote URL. */
dlk_status cmd_store(const char *url, const dlk_store_options **out,
                     dlk_error *err);
/* Every remote store cmd_store's options open from now on asks fn(ud) to
 * cancel its requests (dlk_store_options.cancel); a command that handles
 * SIGINT and SIGTERM itself sets it, so that no request outlives them. */
void cmd_store_cancel(int (*fn)(void *ud), void *ud);
/* dlk_dataset_open_with the options of cmd_store. */
dlk_status cmd_dataset_open(const char *url, const char *at,
                            dlk_dataset **out, dlk_error *err);

/* --json anywhere on the command line (before "--"): every exit prints
 * one JSON object on stdout, {"error": {...}} when the command printed
 * none (cmd_json_main). */
extern bool cmd_json;
/* Print a JSON object on stdout (flags as for json_dumpf) as the
 * command's one object; later calls print nothing. */
void cmd_json_print(json_t *o, size_t flags);
/* The "error" member of a failure's object: message and exit code. */
json_t *cmd_json_error(const char *msg, int code);
/* At exit with --json: the error object, unless an object was printed. */
int cmd_json_main(int code);
/* The last message cmd_error printed (for the error object). */
const char *cmd_last_error(void);
/* Flush stdout and report a failed write (a full disk, a closed pipe). */
int cmd_finish(const char *cmd, int code);
/* "16M", "64KiB", "1G" -> bytes (K, M, G, T are powers of 1024), as
 * Dlk_parse_size reads them; 0 when malformed or over 1 TiB. */
unsigned long long cmd_parse_size(const char *s);
/* "1.5 MiB" style sizes. */
const char *cmd_bytes(unsigned long long n, char buf[32]);
/* "224x224x3" style shapes ('?' for variable). */
const char *cmd_shape(const int64_t *shape, int ndim, char buf[128]);
/* Text bytes to stdout in double quotes, '"' and '\\' escaped, control
 * bytes and bytes that are not UTF-8 as \xNN; after `limit` bytes, `..."`
 * ends it. */
void cmd_print_quoted(const void *text, size_t n, size_t limit);
/* Text from a dataset, a source, a server or the command line, safe to
 * print (Dlk_escape: no control sequence reaches the terminal), in buf
 * (cut with "..." to fit); returns buf.  Every such string goes through
 * one of these before it is printed outside --json (which keeps the
 * exact strings: JSON escapes control characters itself). */
const char *cmd_safe(const char *s, char *buf, size_t cap);
/* The whole of a long text (a commit message, a query) so; free it
 * (NULL when out of memory). */
char *cmd_safe_dup(const char *s);
/* A URL so, with its credentials redacted too (Dlk_redact_url). */
const char *cmd_safe_url(const char *url, char *buf, size_t cap);
/* A URL with its credentials redacted, not escaped: for --json. */
const char *cmd_redact_url(const char *url, char *buf, size_t cap);

#endif
