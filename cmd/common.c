/* common.c - printing helpers shared by the subcommands. */
#include "cmd.h"
#include "util/size.h"
#include "util/text.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

bool cmd_json;
static bool json_printed;
static char last_error[1024];

void cmd_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    /* what the message quotes (an argument, a library message) is shown
     * with no credential and no control sequence in it */
    char tmp[sizeof last_error];
    Dlk_redact(last_error, sizeof last_error, NULL, 0);
    Dlk_escape_n(last_error, strlen(last_error), tmp, sizeof tmp, 0);
    memcpy(last_error, tmp, sizeof tmp);
    fprintf(stderr, "dlk%s%s: %s\n", *cmd ? " " : "", cmd, last_error);
}

const char *cmd_last_error(void) { return last_error; }

void cmd_json_print(json_t *o, size_t flags)
{
    if (json_printed || !o)
        return;
    json_printed = true;
    json_dumpf(o, stdout, flags);
    putchar('\n');
}

json_t *cmd_json_error(const char *msg, int code)
{
    return json_pack("{s:s,s:i}", "message", msg, "exit_code", code);
}

int cmd_json_main(int code)
{
    if (!cmd_json || json_printed || code == EXIT_OK)
        return code;
    char msg[64];
    if (!last_error[0])
        snprintf(msg, sizeof msg, "failed with exit code %d", code);
    json_t *o = json_pack("{s:o}", "error",
                          cmd_json_error(last_error[0] ? last_error : msg,
                                         code));
    cmd_json_print(o, JSON_PRESERVE_ORDER);
    json_decref(o);
    return cmd_finish("json", code);
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

/* Levenshtein distance, capped: the rows of two lengths up to 64. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *cmd_nearest(const char *word, const char *const *cands,
                        size_t n)
{
    const char *best = NULL;
    size_t bd = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = distance(word, cands[i]);
        if (d < bd) {
            bd = d;
            best = cands[i];
        }
    }
    /* a typo, not another word: two edits, or a third of a long name */
    size_t len = strlen(word), limit = len / 3 > 2 ? len / 3 : 2;
    return best && bd > 0 && bd <= limit ? best : NULL;
}

int cmd_option_error(const char *cmd, char **argv, const struct option *opts)
{
    const char *arg = argv[optind - 1];
    char word[80] = "";
    if (strncmp(arg, "--", 2) == 0) {
        snprintf(word, sizeof word, "%s", arg + 2);
        char *eq = strchr(word, '=');
        if (eq)
            *eq = '\0';
    }
    const char *names[128];
    size_t n = 0;
    const struct option *known = NULL;
    for (size_t i = 0; opts && opts[i].name && n < 128; i++) {
        names[n++] = opts[i].name;
        if (strcmp(opts[i].name, word) == 0)
            known = &opts[i];
    }
    const char *near = word[0] && !known ? cmd_nearest(word, names, n) : NULL;
    if (known && known->has_arg == no_argument)
        cmd_error(cmd, "option '--%s' takes no value", word);
    else if (known)
        cmd_error(cmd, "option '--%s' needs a value", word);
    else if (near)
        cmd_error(cmd, "unknown option '%s'; did you mean '--%s'?", arg, near);
    else
        cmd_error(cmd, "unknown or incomplete option '%s'", arg);
    return EXIT_USAGE;
}

int cmd_bad_option(const char *cmd, char **argv, const struct option *opts,
                   const char *usage)
{
    cmd_option_error(cmd, argv, opts);
    return cmd_usage(usage, false);
}

int cmd_check_url(const char *cmd, const char *url)
{
    if (!url)
        return 0;
    bool gs = strncasecmp(url, "gs:", 3) == 0;
    if (!gs && strncasecmp(url, "s3:", 3) != 0)
        return 0;
    if (strncmp(url, gs ? "gs://" : "s3://", 5) == 0 && url[5] &&
        url[5] != '/')
        return 0;
    cmd_error(cmd, "bad url '%s': %s url is %s://BUCKET/PREFIX", url,
              gs ? "a GCS" : "an S3", gs ? "gs" : "s3");
    return EXIT_USAGE;
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

unsigned long long cmd_parse_size(const char *s)
{
    uint64_t v;
    return Dlk_parse_size(s, &v) ? v : 0;
}

void cmd_print_quoted(const void *text, size_t n, size_t limit)
{
    size_t k = n < limit ? n : limit, cap = 4 * k + 8;
    char small[1024], *buf = cap <= sizeof small ? small : malloc(cap);
    if (!buf) {
        buf = small;
        cap = sizeof small;
    }
    Dlk_escape_n(text, k, buf, cap, DLK_ESC_QUOTED);
    printf("\"%s%s", buf, n > limit ? "\"..." : "\"");
    if (buf != small)
        free(buf);
}

const char *cmd_safe(const char *s, char *buf, size_t cap)
{
    return Dlk_escape(s, buf, cap);
}

char *cmd_safe_dup(const char *s)
{
    return Dlk_escape_dup(s);
}

const char *cmd_redact_url(const char *url, char *buf, size_t cap)
{
    return Dlk_redact_url(url, buf, cap);
}

const char *cmd_safe_url(const char *url, char *buf, size_t cap)
{
    char *r = malloc(cap);
    if (!r)
        return Dlk_escape("", buf, cap);
    Dlk_redact_url(url, r, cap);
    Dlk_escape(r, buf, cap);
    free(r);
    return buf;
}
