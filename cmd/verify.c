/* verify.c - dlk verify: check every chunk the head references. */
#include "cmd.h"

#include <getopt.h>
#include <jansson.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk verify DATASET [--deep] [--json]\n"
    "\n"
    "Checks that every chunk the head references exists, has its recorded\n"
    "size, parses, matches its manifest entry and its content hash (its\n"
    "name), and that sample counts add up.  Exit 0 when clean, 1 when a\n"
    "problem was found (each printed with the object and why).\n"
    "\n"
    "  --deep       also decompress and re-hash every payload\n"
    "  --json       {\"ok\", \"chunks_checked\", \"bytes_checked\", \"errors\": [{\"object\",\n"
    "               \"error\"}]}\n"
    "  -h, --help   this text\n";

struct report {
    bool json;
    json_t *errors;
};

static void on_problem(void *ud, const char *object, const char *why)
{
    struct report *r = ud;
    if (r->json)
        json_array_append_new(r->errors, json_pack("{s:s,s:s}", "object",
                                                   object, "error", why));
    else
        printf("bad: %s: %s\n", *object ? object : "(dataset)", why);
}

int cmd_verify(int argc, char **argv)
{
    static const struct option opts[] = {
        {"deep", no_argument, 0, 'd'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct report r = {false, NULL};
    dlk_verify_opts vo = {0, on_problem, &r};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': vo.deep = 1; break;
        case 'j': r.json = true; break;
        case 'h': return cmd_finish("verify", cmd_usage(usage_text, true));
        default:
            cmd_error("verify", "unknown or incomplete option '%s'",
                      argv[optind - 1]);
            return cmd_usage(usage_text, false);
        }
    }
    if (argc - optind != 1) {
        cmd_error("verify", argc == optind ? "missing DATASET"
                                           : "too many arguments");
        return cmd_usage(usage_text, false);
    }
    const char *url = argv[optind];
    r.errors = json_array();
    dlk_verify_result res = {0};
    dlk_error err;
    dlk_dataset *ds = NULL;
    dlk_status rc = dlk_dataset_open(url, NULL, &ds, &err);
    if (rc == DLK_ECORRUPT || rc == DLK_EUNSUPPORTED || rc == DLK_ELIMIT) {
        /* a dataset whose description or manifest is bad is a finding */
        on_problem(&r, "", err.msg);
        res.problems = 1;
    } else if (rc) {
        json_decref(r.errors);
        return cmd_fail("verify", &err);
    } else if ((rc = dlk_verify(ds, &vo, &res, &err))) {
        json_decref(r.errors);
        dlk_dataset_free(ds);
        return cmd_fail("verify", &err);
    }
    dlk_dataset_free(ds);
    if (r.json) {
        json_t *o = json_pack("{s:b,s:I,s:I,s:o}", "ok", res.problems == 0,
                              "chunks_checked", (json_int_t)res.chunks_checked,
                              "bytes_checked", (json_int_t)res.bytes_checked,
                              "errors", r.errors);
        json_dumpf(o, stdout, JSON_PRESERVE_ORDER | JSON_INDENT(2));
        putchar('\n');
        json_decref(o);
    } else {
        char b[32];
        json_decref(r.errors);
        printf("%s: %llu chunks, %s checked%s; %llu problem%s\n",
               res.problems ? "FAILED" : "ok",
               (unsigned long long)res.chunks_checked,
               cmd_bytes(res.bytes_checked, b), vo.deep ? " (deep)" : "",
               (unsigned long long)res.problems,
               res.problems == 1 ? "" : "s");
    }
    return cmd_finish("verify", res.problems ? EXIT_PROBLEMS : EXIT_OK);
}
