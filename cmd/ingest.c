/* ingest.c - dlk ingest: append samples to a dataset from a source. */
#include "cmd.h"
#include "ingest_opts.h"

#include <getopt.h>
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
    static const struct option opts[] = {
        INGEST_LONG_OPTIONS
        {"json", no_argument, 0, IO_JSON},
        {"quiet", no_argument, 0, IO_QUIET},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    ingest_cli cli;
    ingest_cli_init(&cli);
    int c, code = EXIT_OK;
    optind = 1;
    opterr = 0;
    while (code == EXIT_OK &&
           (c = getopt_long(argc, argv, "qj:h", opts, NULL)) != -1) {
        switch (c) {
        case 'q': code = ingest_cli_opt(&cli, "ingest", IO_QUIET, NULL); break;
        case 'j': code = ingest_cli_opt(&cli, "ingest", IO_JOBS, optarg);
                  break;
        case 'h':
            fputs(usage_text, stdout);
            fputs(ingest_opts_usage, stdout);
            fputs(examples_text, stdout);
            ingest_cli_free(&cli);
            return cmd_finish("ingest", EXIT_OK);
        case '?':
        case ':':
            code = cmd_option_error("ingest", argv, opts);
            break;
        default:
            code = ingest_cli_opt(&cli, "ingest", c, optarg);
            break;
        }
    }
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
    dlk_ingest_result res = {0};
    ingest_cli_signals(&cli);
    dlk_status rc = ingest_cli_store(&cli, argv[optind], &err);
    if (!rc)
        rc = dlk_ingest(argv[optind], &cli.o, &res, &err);
    code = ingest_cli_report(&cli, "ingest", rc, &res, &err);
    ingest_cli_free(&cli);
    return cmd_finish("ingest", code);
}
