/* gc.c - dlk gc: remove chunks that nothing references. */
#include "cmd.h"
#include "options.h"

#include <unistd.h>
#include <jansson.h>
#include <stdlib.h>

static const char usage_text[] =
    "usage: dlk gc DATASET [--grace DURATION] [--dry-run] [--json]\n"
    "\n"
    "Removes chunks that neither the head nor any commit reachable from\n"
    "main references (left by a crashed or failed run), once they are\n"
    "older than the grace period, so a writer still running is never\n"
    "disturbed.\n"
    "\n"
    "  --grace DURATION   keep younger unreferenced chunks (default 1h;\n"
    "                     units s m h d, e.g. 30m, 0 for none)\n"
    "  -n, --dry-run      only report what would be removed\n"
    "  --json             {\"removed\", \"removed_bytes\", \"young\", \"referenced\",\n"
    "                     \"dry_run\", \"objects\": [...]}\n"
    "  -h, --help         this text\n"
    "\n"
    "Examples:\n"
    "  dlk gc --dry-run s3://lake/pets\n"
    "  dlk gc --grace 1d s3://lake/pets\n";

struct gc_out {
    bool json;
    json_t *objects;
};

static void on_remove(void *ud, const char *object, uint64_t size)
{
    struct gc_out *o = ud;
    if (o->json)
        json_array_append_new(o->objects, json_string(object));
    else {
        char safe[1100];
        printf("removed %s (%llu bytes)\n", cmd_safe(object, safe, sizeof safe),
               (unsigned long long)size);
    }
}

int cmd_gc(int argc, char **argv)
{
    struct gc_out o = {false, NULL};
    dlk_gc_opts go = {.size = sizeof go, .grace_seconds = 3600,
                      .on_remove = on_remove, .ud = &o};
    const cmd_opt opts[] = {
        CMD_OPT_DURATION("grace", 0, &go.grace_seconds, 0, 1000000000),
        CMD_OPT_FLAG("dry-run", 'n', &go.dry_run),
        CMD_OPT_FLAG("json", 0, &o.json),
        CMD_OPT_HELP(),
        CMD_OPT_END(),
    };
    int code = cmd_parse_options("gc", opts, usage_text, NULL, argc, argv);
    if (code != CMD_OPTS_DONE)
        return code;
    if (argc - optind != 1) {
        cmd_error("gc", "expected one DATASET");
        return cmd_usage(usage_text, false);
    }
    if (cmd_check_url("gc", argv[optind]))
        return EXIT_USAGE;
    dlk_error err;
    dlk_dataset *ds;
    if (cmd_dataset_open(argv[optind], NULL, &ds, &err))
        return cmd_fail("gc", &err);
    o.objects = json_array();
    dlk_gc_result res = DLK_GC_RESULT_INIT;
    dlk_status rc = dlk_gc(ds, &go, &res, &err);
    dlk_dataset_free(ds);
    if (rc) {
        json_decref(o.objects);
        return cmd_fail("gc", &err);
    }
    if (o.json) {
        json_t *j = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:O}",
                              "removed", (json_int_t)res.removed,
                              "removed_bytes", (json_int_t)res.removed_bytes,
                              "young", (json_int_t)res.young,
                              "referenced", (json_int_t)res.referenced,
                              "temp_files", (json_int_t)res.temp_files,
                              "temp_bytes", (json_int_t)res.temp_bytes,
                              "dry_run", go.dry_run, "objects", o.objects);
        cmd_json_print(j, JSON_PRESERVE_ORDER | JSON_INDENT(2));
        json_decref(j);
    } else {
        char b[32];
        /* chunks, and the key index runs and segments (index/) too */
        printf("%s %llu unreferenced object%s (%s); kept %llu referenced, "
               "%llu within the grace period\n",
               go.dry_run ? "would remove" : "removed",
               (unsigned long long)res.removed, res.removed == 1 ? "" : "s",
               cmd_bytes(res.removed_bytes, b),
               (unsigned long long)res.referenced,
               (unsigned long long)res.young);
        if (res.temp_files)
            printf("%s %llu temporary file%s of interrupted writes (%s)\n",
                   go.dry_run ? "would remove" : "removed",
                   (unsigned long long)res.temp_files,
                   res.temp_files == 1 ? "" : "s",
                   cmd_bytes(res.temp_bytes, b));
    }
    json_decref(o.objects);
    return cmd_finish("gc", EXIT_OK);
}
