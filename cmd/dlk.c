/* dlk.c - the dlk binary: finds the subcommand in one table and runs it. */
#include "cmd.h"

#include <stdlib.h>
#include <string.h>

struct cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

/* Alphabetical. */
static const struct cmd commands[] = {
    {"bench-report", cmd_bench_report, "draw the reports of several ranks on one page"},
    {"bench-stream", cmd_bench_stream, "stream a dataset and report what a GPU would see"},
    {"cat", cmd_cat, "print one sample of a tensor"},
    {"commit", cmd_commit, "turn the head into an immutable commit"},
    {"compact", cmd_compact, "rewrite runs of small chunks into full ones"},
    {"create", cmd_create, "create an empty dataset with a schema"},
    {"gc", cmd_gc, "remove chunks that nothing references"},
    {"ingest", cmd_ingest, "append samples from a source"},
    {"log", cmd_log, "list commits, newest first"},
    {"ls", cmd_ls, "list a dataset's tensors"},
    {"query", cmd_query, "pick rows by value and vector similarity"},
    {"verify", cmd_verify, "check every chunk of a dataset"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const struct cmd *find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* "dlk: 'x' is not a dlk command", with the nearest one when close. */
static void unknown_command(const char *name)
{
    const char *names[N_COMMANDS + 1];
    for (size_t i = 0; i < N_COMMANDS; i++)
        names[i] = commands[i].name;
    names[N_COMMANDS] = "help";
    const char *near = cmd_nearest(name, names, N_COMMANDS + 1);
    if (near)
        cmd_error("", "'%s' is not a dlk command; did you mean '%s'?", name,
                  near);
    else
        cmd_error("", "'%s' is not a dlk command", name);
}

static int usage(FILE *f, int code)
{
    fprintf(f,
            "usage: dlk [--version] [--help] <command> [<args>]\n"
            "       [--no-sign-request] [--s3-addressing path|virtual|auto]\n"
            "\n"
            "dlk packs training data into large chunks of ready tensors on "
            "object\nstorage and streams them back.\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "   %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nfor s3:// URLs, with any command:\n"
               "   --no-sign-request   anonymous requests (public buckets)\n"
               "   --s3-addressing M   path, virtual or auto (default: path "
               "for custom\n                       endpoints, virtual for "
               "AWS)\n");
    fprintf(f, "\ngs:// URLs (Google Cloud Storage) take STORAGE_EMULATOR_HOST,\n"
               "GOOGLE_OAUTH_ACCESS_TOKEN and GOOGLE_APPLICATION_CREDENTIALS.\n");
    fprintf(f, "\n'dlk help <command>' or 'dlk <command> --help' for a "
               "command's options;\n'man dlk' for exit codes and the "
               "environment.\n");
    return code;
}

/* Options of every command that concern s3:// URLs, given anywhere on the
 * line: they go over the environment's settings (cmd_store.c), and are
 * removed from argv.  Returns -1 on a bad value. */
static int global_options(int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (strcmp(a, "--no-sign-request") == 0) {
            cmd_no_sign = true;
            continue;
        }
        const char *v = NULL;
        if (strncmp(a, "--s3-addressing=", 16) == 0)
            v = a + 16;
        else if (strcmp(a, "--s3-addressing") == 0 && i + 1 < *argc)
            v = argv[++i];
        if (v) {
            if (strcmp(v, "path") == 0)
                cmd_s3_addressing = DLK_S3_ADDRESSING_PATH;
            else if (strcmp(v, "virtual") == 0)
                cmd_s3_addressing = DLK_S3_ADDRESSING_VIRTUAL;
            else if (strcmp(v, "auto") == 0)
                cmd_s3_addressing = DLK_S3_ADDRESSING_AUTO;
            else {
                cmd_error("", "bad --s3-addressing '%s' (path, virtual or "
                          "auto)", v);
                return -1;
            }
            continue;
        }
        argv[out++] = argv[i];
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

static int run(int argc, char **argv);

int main(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        cmd_json |= strcmp(argv[i], "--json") == 0;
    return cmd_json_main(run(argc, argv));
}

static int run(int argc, char **argv)
{
    if (global_options(&argc, argv))
        return EXIT_USAGE;
    if (argc < 2)
        return usage(stderr, EXIT_USAGE);
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        return cmd_finish("help", usage(stdout, EXIT_OK));
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("dlk %s (format v%d)\n", dlk_version_string(),
               DLK_FORMAT_VERSION);
        return cmd_finish("version", EXIT_OK);
    }
    if (strcmp(name, "help") == 0) {
        if (argc < 3)
            return cmd_finish("help", usage(stdout, EXIT_OK));
        const struct cmd *c = find(argv[2]);
        if (!c) {
            unknown_command(argv[2]);
            return usage(stderr, EXIT_USAGE);
        }
        char *help_argv[] = {(char *)c->name, "--help", NULL};
        return c->fn(2, help_argv);
    }
    const struct cmd *c = find(name);
    if (!c) {
        unknown_command(name);
        return usage(stderr, EXIT_USAGE);
    }
    int code = c->fn(argc - 1, argv + 1);
    /* DLK_IO_STATS=1: what the command asked of storage, on stderr */
    const char *stats = getenv("DLK_IO_STATS");
    if (stats && *stats && *stats != '0') {
        dlk_io_counters io;
        dlk_io_counters_get(&io);
        fprintf(stderr, "dlk: io gets=%llu heads=%llu puts=%llu lists=%llu "
                "deletes=%llu bytes_read=%llu bytes_written=%llu hedges=%llu\n",
                (unsigned long long)io.gets, (unsigned long long)io.heads,
                (unsigned long long)io.puts, (unsigned long long)io.lists,
                (unsigned long long)io.deletes,
                (unsigned long long)io.bytes_read,
                (unsigned long long)io.bytes_written,
                (unsigned long long)io.hedges);
    }
    return code;
}
