/* commit.c - dlk commit: the head becomes an immutable commit. */
#include "cmd.h"

#include <getopt.h>
#include <jansson.h>

static const char usage_text[] =
    "usage: dlk commit DATASET -m MESSAGE [--json] [--unsafe-single-writer]\n"
    "\n"
    "Turns the head (everything ingested so far) into an immutable commit\n"
    "and moves main to it.  A run pinned to the commit (--at ID) reads the\n"
    "same bytes forever.  Chunks are shared with earlier commits: a commit\n"
    "costs its new data and one small object.\n"
    "\n"
    "  -m, --message MSG        what the commit holds (required)\n"
    "  --json                   {\"id\", \"committed\", \"parent\"}\n"
    "  --unsafe-single-writer   commit even on a store that ignores\n"
    "                           conditional writes (no concurrent writers!)\n"
    "  -h, --help               this text\n"
    "\n"
    "Example:\n"
    "  dlk commit pets -m \"pets v1\"\n";

int cmd_commit(int argc, char **argv)
{
    static const struct option opts[] = {
        {"message", required_argument, 0, 'm'},
        {"json", no_argument, 0, 'j'},
        {"unsafe-single-writer", no_argument, 0, 'U'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *message = NULL;
    bool json = false;
    unsigned flags = 0;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': message = optarg; break;
        case 'j': json = true; break;
        case 'U': flags |= DLK_COMMIT_UNSAFE_SINGLE_WRITER; break;
        case 'h': return cmd_finish("commit", cmd_usage(usage_text, true));
        default:
            return cmd_bad_option("commit", argv, opts, usage_text);
        }
    }
    if (argc - optind != 1 || !message) {
        cmd_error("commit", !message ? "a message is required (-m MESSAGE)"
                                     : "expected one DATASET");
        return cmd_usage(usage_text, false);
    }
    if (cmd_check_url("commit", argv[optind]))
        return EXIT_USAGE;
    const char *url = argv[optind];
    dlk_error err;
    dlk_dataset *ds;
    if (cmd_dataset_open(url, NULL, &ds, &err))
        return cmd_fail("commit", &err);
    char parent[DLK_ID_MAX] = "";
    if (dlk_dataset_head(ds))
        snprintf(parent, sizeof parent, "%s", dlk_dataset_head(ds));
    char id[DLK_ID_MAX];
    int committed;
    if (dlk_commit(ds, message, flags, id, &committed, &err)) {
        dlk_dataset_free(ds);
        return cmd_fail("commit", &err);
    }
    dlk_dataset_free(ds);
    if (json) {
        json_t *o = json_pack("{s:s,s:b,s:o}", "id", id, "committed",
                              committed, "parent",
                              *parent && committed ? json_string(parent)
                                                   : json_null());
        cmd_json_print(o, JSON_PRESERVE_ORDER);
        json_decref(o);
    } else if (committed) {
        printf("%s\n", id);
    } else {
        printf("nothing to commit: main is %s\n", id);
    }
    return cmd_finish("commit", EXIT_OK);
}
