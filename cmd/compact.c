/* compact.c - dlk compact: rewrite runs of small chunks into full ones. */
#include "cmd.h"
#include "options.h"

#include <unistd.h>
#include <jansson.h>
#include <stdlib.h>

static const char usage_text[] =
    "usage: dlk compact DATASET [--target-size SIZE] [--json]\n"
    "\n"
    "Rewrites every run of two or more consecutive small chunks of each\n"
    "tensor into chunks of the target size, folds the key index's runs\n"
    "into one, and publishes them as the new head: the samples, their\n"
    "order and their values stay as they were.\n"
    "Commits keep the chunks they name; 'dlk gc' removes the replaced ones\n"
    "that nothing names once they are past the grace period.\n"
    "\n"
    "  --target-size SIZE  raw size of the new chunks (default: each\n"
    "                      tensor's chunk size; K M G suffixes, at most 1G)\n"
    "  --json              {\"chunks_before\", \"chunks_after\", \"chunks_read\",\n"
    "                      \"bytes_read\", \"chunks_written\", \"key_runs_before\",\n"
    "                      \"key_runs_after\", \"seconds\"}\n"
    "  -h, --help          this text\n"
    "\n"
    "Example:\n"
    "  dlk compact s3://lake/pets --target-size 64M\n";

int cmd_compact(int argc, char **argv)
{
    dlk_compact_opts co = DLK_COMPACT_OPTS_INIT;
    bool json = false;
    const cmd_opt opts[] = {
        CMD_OPT_SIZE("target-size", 0, &co.target_bytes, 1, 1u << 30),
        CMD_OPT_FLAG("json", 0, &json),
        CMD_OPT_HELP(),
        CMD_OPT_END(),
    };
    int code = cmd_parse_options("compact", opts, usage_text, NULL, argc,
                                 argv);
    if (code != CMD_OPTS_DONE)
        return code;
    if (argc - optind != 1) {
        cmd_error("compact", "expected one DATASET");
        return cmd_usage(usage_text, false);
    }
    if (cmd_check_url("compact", argv[optind]))
        return EXIT_USAGE;
    double t0 = cmd_now_s();
    dlk_error err;
    dlk_dataset *ds;
    if (cmd_dataset_open(argv[optind], NULL, &ds, &err))
        return cmd_fail("compact", &err);
    dlk_compact_result res = DLK_COMPACT_RESULT_INIT;
    dlk_status rc = dlk_compact(ds, &co, &res, &err);
    dlk_dataset_free(ds);
    if (rc)
        return cmd_fail("compact", &err);
    double secs = cmd_now_s() - t0;
    if (json) {
        json_t *j = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}",
                              "chunks_before", (json_int_t)res.chunks_before,
                              "chunks_after", (json_int_t)res.chunks_after,
                              "chunks_read", (json_int_t)res.chunks_read,
                              "bytes_read", (json_int_t)res.bytes_read,
                              "chunks_written", (json_int_t)res.chunks_written,
                              "key_runs_before",
                              (json_int_t)res.key_runs_before,
                              "key_runs_after", (json_int_t)res.key_runs_after,
                              "seconds", secs);
        cmd_json_print(j, JSON_PRESERVE_ORDER | JSON_INDENT(2));
        json_decref(j);
    } else {
        bool keys = res.key_runs_before != res.key_runs_after ||
                    res.key_runs_before > 1;
        if (res.chunks_written) {
            char b[32];
            printf("compacted %llu small chunks (%s) into %llu; %llu chunks "
                   "in all, %llu before, in %.2f s\n",
                   (unsigned long long)res.chunks_read,
                   cmd_bytes(res.bytes_read, b),
                   (unsigned long long)res.chunks_written,
                   (unsigned long long)res.chunks_after,
                   (unsigned long long)res.chunks_before, secs);
        } else {
            printf("nothing to compact: %llu chunks, no run of small ones\n",
                   (unsigned long long)res.chunks_after);
        }
        if (keys)
            printf("key index: %llu object%s folded into %llu run\n",
                   (unsigned long long)res.key_runs_before,
                   res.key_runs_before == 1 ? "" : "s",
                   (unsigned long long)res.key_runs_after);
    }
    return cmd_finish("compact", EXIT_OK);
}
