/* log.c - dlk log: commits newest first. */
#include "cmd.h"
#include "options.h"

#include <stdint.h>
#include <unistd.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk log DATASET [--at REF] [-n N] [--json]\n"
    "\n"
    "Commits newest first: id, time, message, samples per tensor, bytes\n"
    "added.\n"
    "\n"
    "  --at REF        start from this commit instead of main\n"
    "  -n, --max N     at most N commits\n"
    "  --json          [{\"id\", \"parent\", \"time\", \"message\", \"samples\": {tensor:\n"
    "                  n}, \"bytes_added\", \"chunks_added\"}]\n"
    "  -h, --help      this text\n"
    "\n"
    "Example:\n"
    "  dlk log pets -n 5\n";

struct log_out {
    bool json;
    json_t *arr;
};

static int on_entry(void *ud, const dlk_log_entry *e)
{
    struct log_out *o = ud;
    if (o->json) {
        json_t *samples = json_object();
        for (size_t i = 0; i < e->ntensors; i++)
            json_object_set_new(samples, e->tensor_names[i],
                                json_integer((json_int_t)e->samples[i]));
        json_array_append_new(o->arr, json_pack(
            "{s:s,s:o,s:s,s:s,s:o,s:I,s:I}", "id", e->id, "parent",
            e->parent ? json_string(e->parent) : json_null(), "time",
            e->time, "message", e->message, "samples", samples,
            "bytes_added", (json_int_t)e->bytes_added, "chunks_added",
            (json_int_t)e->chunks_added));
        return 0;
    }
    char b[32], id[256], t[256], name[256];
    printf("commit %s\ndate   %s\nadded  %s in %llu chunk%s\nsamples",
           cmd_safe(e->id, id, sizeof id), cmd_safe(e->time, t, sizeof t),
           cmd_bytes(e->bytes_added, b),
           (unsigned long long)e->chunks_added,
           e->chunks_added == 1 ? "" : "s");
    for (size_t i = 0; i < e->ntensors; i++)
        printf(" %s=%llu", cmd_safe(e->tensor_names[i], name, sizeof name),
               (unsigned long long)e->samples[i]);
    /* line by line, indented, each escaped (no control sequence of a
     * message reaches the terminal) */
    fputs("\n\n", stdout);
    for (const char *l = e->message;;) {
        const char *nl = strchr(l, '\n');
        char *line = strndup(l, nl ? (size_t)(nl - l) : strlen(l));
        char *safe = line ? cmd_safe_dup(line) : NULL;
        printf("    %s\n", safe ? safe : "");
        free(safe);
        free(line);
        if (!nl)
            break;
        l = nl + 1;
    }
    putchar('\n');
    return 0;
}

int cmd_log(int argc, char **argv)
{
    struct log_out o = {false, NULL};
    const char *at = NULL;
    size_t max = 0;
    const cmd_opt opts[] = {
        CMD_OPT_STRING("at", 0, &at),
        CMD_OPT_UINT("max", 'n', &max, 1, SIZE_MAX),
        CMD_OPT_FLAG("json", 0, &o.json),
        CMD_OPT_HELP(),
        CMD_OPT_END(),
    };
    int code = cmd_parse_options("log", opts, usage_text, NULL, argc, argv);
    if (code != CMD_OPTS_DONE)
        return code;
    if (argc - optind != 1) {
        cmd_error("log", "expected one DATASET");
        return cmd_usage(usage_text, false);
    }
    if (cmd_check_url("log", argv[optind]))
        return EXIT_USAGE;
    dlk_error err;
    const dlk_store_options *so;
    if (cmd_store(argv[optind], &so, &err))
        return cmd_fail("log", &err);
    o.arr = json_array();
    /* the commits alone: no head, no chunk list */
    dlk_status rc = dlk_log_url(argv[optind], so, at, max, on_entry, &o,
                                &err);
    if (rc) {
        json_decref(o.arr);
        return cmd_fail("log", &err);
    }
    if (o.json) {
        cmd_json_print(o.arr, JSON_PRESERVE_ORDER | JSON_INDENT(2));
    }
    json_decref(o.arr);
    return cmd_finish("log", EXIT_OK);
}
