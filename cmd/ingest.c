/* ingest.c - dlk ingest: append samples to a dataset from a source. */
#include "cmd.h"

#include <getopt.h>
#include <jansson.h>
#include <string.h>
#include <time.h>

static const char usage_text[] =
    "usage: dlk ingest DATASET from-dir DIR [options]\n"
    "\n"
    "Sources:\n"
    "  from-dir DIR     every .npy file under DIR, in sorted path order; a\n"
    "                   file feeds the tensor named by its stem's suffix\n"
    "                   (0001.labels.npy, 0001_images.npy) or by a folder on\n"
    "                   its path (images/0001.npy); it holds one sample, or a\n"
    "                   batch of samples along its first axis\n"
    "\n"
    "  --json           print a summary as JSON\n"
    "  -q, --quiet      print nothing but errors\n"
    "  -h, --help       this text\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int cmd_ingest(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    bool json = false, quiet = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'q': quiet = true; break;
        case 'h': return cmd_finish("ingest", cmd_usage(usage_text, true));
        default:
            cmd_error("ingest", "unknown or incomplete option '%s'",
                      argv[optind - 1]);
            return cmd_usage(usage_text, false);
        }
    }
    if (argc - optind != 3) {
        cmd_error("ingest", "expected DATASET SOURCE LOCATION");
        return cmd_usage(usage_text, false);
    }
    const char *url = argv[optind], *kind = argv[optind + 1],
               *src = argv[optind + 2];
    if (strcmp(kind, "from-dir") != 0) {
        cmd_error("ingest", "unknown source '%s' (from-dir)", kind);
        return cmd_usage(usage_text, false);
    }
    dlk_error err;
    dlk_dataset *ds;
    if (dlk_dataset_open(url, NULL, &ds, &err))
        return cmd_fail("ingest", &err);
    double t0 = now_s();
    dlk_ingest_stats st;
    dlk_status rc = dlk_ingest_npy_dir(ds, src, &st, &err);
    double secs = now_s() - t0;
    if (rc) {
        /* nothing is published: the head stays as it was */
        dlk_dataset_free(ds);
        return cmd_fail("ingest", &err);
    }
    if (dlk_dataset_close(ds, &err))
        return cmd_fail("ingest", &err);
    if (json) {
        json_t *o = json_pack("{s:I,s:I,s:[],s:I,s:f}", "ingested",
                              (json_int_t)st.ingested, "skipped",
                              (json_int_t)st.skipped, "errors", "bytes_in",
                              (json_int_t)st.bytes_in, "seconds", secs);
        json_dumpf(o, stdout, JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(o);
    } else if (!quiet) {
        char b[32];
        printf("ingested %llu samples (%s read) in %.2f s; %llu files "
               "skipped\n", (unsigned long long)st.ingested,
               cmd_bytes(st.bytes_in, b), secs,
               (unsigned long long)st.skipped);
    }
    return cmd_finish("ingest", EXIT_OK);
}
