/* verify.c - dlk verify: check every chunk the head references. */
#include "cmd.h"

#include <getopt.h>
#include <jansson.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk verify DATASET [--at REF | --all] [--view NAME] [--deep]\n"
    "                  [--json]\n"
    "\n"
    "Checks that every chunk the head references exists, has its recorded\n"
    "size, parses, matches its manifest entry and its content hash (its\n"
    "name), and that sample counts add up.  Exit 0 when clean, 1 when a\n"
    "problem was found (each printed with the object and why).\n"
    "\n"
    "  --at REF     check exactly the chunks of a commit (main, main~N, an id\n"
    "               or a unique prefix)\n"
    "  --all        every commit reachable from main and the head, each chunk\n"
    "               once; also lists chunks that nothing references (left by\n"
    "               a crash; not a failure)\n"
    "  --view NAME  only the view NAME: its object, and the chunks that hold\n"
    "               its rows\n"
    "  --deep       also decompress and re-hash every payload\n"
    "  --json       {\"ok\", \"chunks_checked\", \"bytes_checked\", \"commits_checked\",\n"
    "               \"errors\": [{\"object\", \"error\"}], \"unreferenced\": [{\"object\",\n"
    "               \"bytes\"}]}\n"
    "  -h, --help   this text\n"
    "\n"
    "Example:\n"
    "  dlk verify --deep pets\n";

struct report {
    bool json;
    json_t *errors;
    json_t *unreferenced;
};

static void on_problem(void *ud, const char *object, const char *why)
{
    struct report *r = ud;
    char safe[1100];
    /* why is a library message, made safe where it was made */
    if (r->json)
        json_array_append_new(r->errors, json_pack("{s:s,s:s}", "object",
                                                   object, "error", why));
    else if (*object && strstr(why, object))
        printf("bad: %s\n", why); /* the message names the object */
    else
        printf("bad: %s: %s\n",
               *object ? cmd_safe(object, safe, sizeof safe) : "(dataset)",
               why);
}

static void on_unreferenced(void *ud, const char *object, uint64_t size)
{
    struct report *r = ud;
    if (r->json)
        json_array_append_new(r->unreferenced,
                              json_pack("{s:s,s:I}", "object", object,
                                        "bytes", (json_int_t)size));
    else {
        char safe[1100];
        printf("unreferenced: %s (%llu bytes; 'dlk gc' removes it)\n",
               cmd_safe(object, safe, sizeof safe), (unsigned long long)size);
    }
}

/* The command line into vo, r and *at: -1 to go on, else the exit
 * code (--help, a bad option or argument). */
static int read_args(int argc, char **argv, dlk_verify_opts *vo,
                     struct report *r, const char **at)
{
    static const struct option opts[] = {
        {"deep", no_argument, 0, 'd'},
        {"at", required_argument, 0, 'a'},
        {"all", no_argument, 0, 'A'},
        {"view", required_argument, 0, 'v'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': vo->deep = 1; break;
        case 'a': *at = optarg; break;
        case 'A': vo->all = 1; break;
        case 'v': vo->view = optarg; break;
        case 'j': r->json = true; break;
        case 'h': return cmd_finish("verify", cmd_usage(usage_text, true));
        default:
            return cmd_bad_option("verify", argv, opts, usage_text);
        }
    }
    if (argc - optind != 1) {
        cmd_error("verify", argc == optind ? "missing DATASET"
                                           : "too many arguments");
        return cmd_usage(usage_text, false);
    }
    if (cmd_check_url("verify", argv[optind]))
        return EXIT_USAGE;
    if ((*at || vo->view) && vo->all) {
        cmd_error("verify", "--all excludes --at and --view");
        return cmd_usage(usage_text, false);
    }
    return -1;
}

/* The dataset at url checked into *res, its findings reported to r: a
 * description or manifest that cannot be read as the format's is one
 * of them.  -1 to go on, else the exit code of a failure. */
static int check_dataset(const char *url, const char *at,
                         const dlk_verify_opts *vo, struct report *r,
                         dlk_verify_result *res)
{
    dlk_error err;
    dlk_dataset *ds = NULL;
    dlk_status rc = cmd_dataset_open(url, at, &ds, &err);
    if (rc == DLK_ECORRUPT || rc == DLK_EUNSUPPORTED || rc == DLK_ELIMIT) {
        /* a dataset whose description or manifest is bad is a finding */
        on_problem(r, "", err.msg);
        res->problems = 1;
    } else if (rc) {
        return cmd_fail("verify", &err);
    } else if (dlk_verify(ds, vo, res, &err)) {
        dlk_dataset_free(ds);
        return cmd_fail("verify", &err);
    }
    dlk_dataset_free(ds);
    return -1;
}

/* The findings as --json's object (taking r's arrays). */
static void print_json(struct report *r, const dlk_verify_result *res)
{
    json_t *o = json_pack("{s:b,s:I,s:I,s:I,s:o,s:o}", "ok",
                          res->problems == 0, "chunks_checked",
                          (json_int_t)res->chunks_checked, "bytes_checked",
                          (json_int_t)res->bytes_checked, "commits_checked",
                          (json_int_t)res->commits_checked, "errors",
                          r->errors, "unreferenced", r->unreferenced);
    cmd_json_print(o, JSON_PRESERVE_ORDER | JSON_INDENT(2));
    json_decref(o);
}

/* The summary line after the findings printed as they came. */
static void print_summary(const dlk_verify_opts *vo,
                          const dlk_verify_result *res)
{
    char b[32];
    char commits[64] = "";
    if (vo->all)
        snprintf(commits, sizeof commits, " in %llu commit%s and the head",
                 (unsigned long long)res->commits_checked,
                 res->commits_checked == 1 ? "" : "s");
    printf("%s: %llu chunks, %s checked%s%s; %llu problem%s\n",
           res->problems ? "FAILED" : "ok",
           (unsigned long long)res->chunks_checked,
           cmd_bytes(res->bytes_checked, b), commits,
           vo->deep ? " (deep)" : "", (unsigned long long)res->problems,
           res->problems == 1 ? "" : "s");
}

int cmd_verify(int argc, char **argv)
{
    struct report r = {false, NULL, NULL};
    dlk_verify_opts vo = {.size = sizeof vo, .on_problem = on_problem,
                          .on_unreferenced = on_unreferenced, .ud = &r};
    const char *at = NULL;
    int code = read_args(argc, argv, &vo, &r, &at);
    if (code >= 0)
        return code;
    const char *url = argv[optind];
    r.errors = json_array();
    r.unreferenced = json_array();
    dlk_verify_result res = DLK_VERIFY_RESULT_INIT;
    code = check_dataset(url, at, &vo, &r, &res);
    if (code < 0 && r.json) {
        print_json(&r, &res);
    } else {
        json_decref(r.errors);
        json_decref(r.unreferenced);
    }
    if (code >= 0)
        return code;
    if (!r.json)
        print_summary(&vo, &res);
    return cmd_finish("verify", res.problems ? EXIT_PROBLEMS : EXIT_OK);
}
