/* ingest.c - dlk ingest: append samples to a dataset from a source. */
#include "cmd.h"
#include "ingest_opts.h"

#include <unistd.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk ingest DATASET from-s3 s3://BUCKET/PREFIX [options]\n"
    "       dlk ingest DATASET from-gs gs://BUCKET/PREFIX [options]\n"
    "       dlk ingest DATASET from-dir DIR [options]\n"
    "\n"
    "Decode images, video and labels once into the dataset's tensors.\n"
    "Resumable: after a crash, run the same command again.  Each row keeps\n"
    "its object's key: a rerun ingests only the objects added since.\n"
    "\n";

/* printed after the shared ingest options, so that --help ends with it */
static const char examples_text[] =
    "\n"
    "Examples:\n"
    "  dlk ingest pets from-dir new-batch/ --resize 224x224 --fit crop\n"
    "  dlk ingest s3://lake/pets from-s3 s3://raw/train/ --shard 0/8 --json\n";

int cmd_ingest(int argc, char **argv)
{
    ingest_cli cli;
    ingest_cli_init(&cli);
    static const char *const help[] = {usage_text, ingest_opts_usage,
                                       examples_text, NULL};
    cmd_opt opts[INGEST_NOPTIONS + 2];
    size_t n = ingest_cli_options(&cli, opts);
    opts[n++] = (cmd_opt)CMD_OPT_HELP_TEXTS(help);
    opts[n] = (cmd_opt)CMD_OPT_END();
    /* the usage, with the shared options', follows any usage error */
    int code = cmd_parse_options("ingest", opts, NULL, NULL, argc, argv);
    if (code == EXIT_OK) {
        ingest_cli_free(&cli);
        return code;
    }
    if (code == CMD_OPTS_DONE)
        code = EXIT_OK;
    if (code == EXIT_OK && argc - optind != 3) {
        cmd_error("ingest", "expected DATASET SOURCE LOCATION");
        code = EXIT_USAGE;
    }
    if (code == EXIT_OK)
        code = cmd_check_url("ingest", argv[optind]);
    if (code == EXIT_OK)
        code = ingest_cli_source(&cli, "ingest", argv[optind + 1],
                                 argv[optind + 2]);
    if (code != EXIT_OK) {
        ingest_cli_free(&cli);
        if (code == EXIT_USAGE) {
            fputs(usage_text, stderr);
            fputs(ingest_opts_usage, stderr);
        }
        return code;
    }
    dlk_error err;
    dlk_ingest_result res = DLK_INGEST_RESULT_INIT;
    ingest_cli_signals(&cli);
    dlk_status rc = ingest_cli_store(&cli, argv[optind], &err);
    if (!rc)
        rc = dlk_ingest(argv[optind], &cli.o, &res, &err);
    code = ingest_cli_report(&cli, "ingest", rc, &res, &err);
    ingest_cli_free(&cli);
    return cmd_finish("ingest", code);
}
