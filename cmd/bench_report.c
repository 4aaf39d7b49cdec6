/* bench_report.c - dlk bench-report: draw the JSON reports that the
 * ranks of a run wrote (bench-stream --report FILE.json, or --json) on
 * one HTML page, so that a straggling rank stands out. */
#include "cmd.h"
#include "report_html.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk bench-report OUT.html REPORT.json...\n"
    "\n"
    "Draw the reports of bench-stream's ranks (each written with --report\n"
    "FILE.json or --json) on one self-contained HTML page, all ranks on\n"
    "the same axes, and print the ranks' rates together.\n"
    "\n"
    "  -h, --help         this text\n"
    "\n"
    "Example:\n"
    "  torchrun --nproc-per-node 2 --no-python dlk bench-stream pets --report r%r.json\n"
    "  dlk bench-report run.html r0.json r1.json\n";

/* Ranks beyond this are more than a page can show a lane each for. */
#define MAX_RANKS 1024

/* Report i of n (argv: their paths), read into ranks[i]: a JSON object
 * with a timeline, of a rank no report before it has.  An exit code. */
static int load_report(json_t **ranks, int i, char **paths)
{
    const char *path = paths[i];
    json_error_t je;
    ranks[i] = json_load_file(path, 0, &je);
    if (!ranks[i]) {
        cmd_error("bench-report", "cannot read report '%s': %s (line %d)",
                  path, je.text, je.line);
        return EXIT_ERROR;
    }
    if (!json_is_object(ranks[i]) ||
        !json_is_object(json_object_get(ranks[i], "timeline"))) {
        cmd_error("bench-report", "report '%s' has no timeline: not the "
                  "JSON of dlk bench-stream --report or --json", path);
        return EXIT_ERROR;
    }
    for (int k = 0; k < i; k++)
        if (json_integer_value(json_object_get(ranks[k], "rank")) ==
            json_integer_value(json_object_get(ranks[i], "rank"))) {
            cmd_error("bench-report", "reports '%s' and '%s' are both of "
                      "rank %lld", paths[k], path,
                      (long long)json_integer_value(
                          json_object_get(ranks[i], "rank")));
            return EXIT_USAGE;
        }
    return EXIT_OK;
}

/* The ranks' rates together, on one line after the page's name. */
static void print_totals(const char *out, json_t *const *ranks, int n)
{
    struct report_totals t;
    report_totals(ranks, (size_t)n, &t);
    if (n == 1)
        printf("%s: rank %ld, %.0f samples/s, %.2f GB/s (steady "
               "epochs %.2f GB/s), busy %.1f%%, %.3f s\n", out,
               t.least_busy_rank, t.samples_per_s,
               t.bytes_per_s / 1e9, t.steady_bytes_per_s / 1e9,
               t.least_busy_pct, t.longest_s);
    else
        printf("%s: %d ranks, together %.0f samples/s, %.2f GB/s "
               "(steady epochs %.2f GB/s); least busy: rank %ld, "
               "%.1f%%; longest run %.3f s\n", out, n,
               t.samples_per_s, t.bytes_per_s / 1e9,
               t.steady_bytes_per_s / 1e9, t.least_busy_rank,
               t.least_busy_pct, t.longest_s);
}

/* The page of the n reports written to out, then their totals printed.
 * An exit code. */
static int write_page(const char *out, json_t *const *ranks, int n)
{
    FILE *f = fopen(out, "w");
    if (!f) {
        cmd_error("bench-report", "cannot write '%s': %s", out,
                  strerror(errno));
        return EXIT_ERROR;
    }
    int rc = report_html_write(f, ranks, (size_t)n);
    bool write_failed = (ferror(f) | fclose(f)) != 0;
    if (rc) {
        cmd_error("bench-report", "a report lacks the timeline's "
                  "columns: written by another version of dlk?");
        return EXIT_ERROR;
    }
    if (write_failed) {
        cmd_error("bench-report", "cannot write '%s': %s", out,
                  strerror(errno));
        return EXIT_ERROR;
    }
    print_totals(out, ranks, n);
    return EXIT_OK;
}

int cmd_bench_report(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': return cmd_finish("bench-report", cmd_usage(usage_text, true));
        default:
            return cmd_bad_option("bench-report", argv, opts, usage_text);
        }
    }
    int n = argc - optind - 1;
    if (n < 1) {
        cmd_error("bench-report", "expected OUT.html and at least one "
                  "REPORT.json");
        return cmd_usage(usage_text, false);
    }
    if (n > MAX_RANKS) {
        cmd_error("bench-report", "%d reports: at most %d", n, MAX_RANKS);
        return EXIT_USAGE;
    }
    const char *out = argv[optind];
    json_t **ranks = calloc((size_t)n, sizeof *ranks);
    if (!ranks) {
        cmd_error("bench-report", "out of memory");
        return EXIT_ERROR;
    }
    int code = EXIT_OK;
    for (int i = 0; i < n && code == EXIT_OK; i++)
        code = load_report(ranks, i, argv + optind + 1);
    if (code == EXIT_OK)
        code = write_page(out, ranks, n);
    for (int i = 0; i < n; i++)
        json_decref(ranks[i]);
    free(ranks);
    return cmd_finish("bench-report", code);
}
