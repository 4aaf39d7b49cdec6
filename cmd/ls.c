/* ls.c - dlk ls: a dataset's tensors, their schemas and sizes. */
#include "cmd.h"

#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk ls DATASET [--at REF] [--view NAME] [--json]\n"
    "\n"
    "  --at REF     list a commit (main, main~N, an id or a unique prefix)\n"
    "               instead of the head\n"
    "  --view NAME  list the view NAME as a dataset: its rows, and the chunks\n"
    "               (and their bytes) that hold them\n"
    "  --json       print as JSON: {\"dataset\", \"id\", \"head\", \"at\", \"dirty\",\n"
    "               \"tensors\": [{\"name\",\n"
    "               \"kind\", \"dtype\", \"shape\", \"samples\", \"chunks\",\n"
    "               \"stored_bytes\", \"raw_bytes\", \"codec\", ...}],\n"
    "               \"views\": [{\"name\", \"rows\", \"dataset_rows\", \"object\",\n"
    "               \"query\"}]}\n"
    "  -h, --help   this text\n"
    "\n"
    "Examples:\n"
    "  dlk ls pets\n"
    "  dlk ls --json --at main pets\n";

static json_t *shape_json(const int64_t *shape, int ndim)
{
    json_t *a = json_array();
    for (int i = 0; i < ndim; i++)
        json_array_append_new(a, shape[i] == DLK_DIM_VARIABLE
                                     ? json_null() : json_integer(shape[i]));
    return a;
}

static json_t *tensor_json(const dlk_tensor_info *t)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:I,s:I,s:I,s:I,s:s}",
        "name", t->name, "kind", dlk_kind_name(t->kind),
        "dtype", dlk_dtype_name(t->dtype),
        "shape", shape_json(t->shape, t->ndim),
        "samples", (json_int_t)t->samples, "chunks", (json_int_t)t->chunks,
        "stored_bytes", (json_int_t)t->stored_bytes,
        "raw_bytes", (json_int_t)t->raw_bytes,
        "codec", dlk_codec_name(t->codec));
    if (t->codec == DLK_CODEC_ZSTD)
        json_object_set_new(o, "level", json_integer(t->level));
    json_object_set_new(o, "chunk_bytes", json_integer((json_int_t)t->chunk_bytes));
    if (t->part_bytes)
        json_object_set_new(o, "part_bytes", json_integer(t->part_bytes));
    if (t->shape_min) {
        json_object_set_new(o, "shape_min", shape_json(t->shape_min, t->ndim));
        json_object_set_new(o, "shape_max", shape_json(t->shape_max, t->ndim));
    }
    if (t->n_class_names) {
        json_t *names = json_array();
        for (size_t i = 0; i < t->n_class_names; i++)
            json_array_append_new(names, json_string(t->class_names[i]));
        json_object_set_new(o, "class_names", names);
    }
    return o;
}

static void print_tensor(const dlk_tensor_info *t)
{
    char shape[400], smin[128], smax[128], sb[32], rb[32];
    bool variable = false;
    for (int i = 0; i < t->ndim; i++)
        variable |= t->shape[i] == DLK_DIM_VARIABLE;
    cmd_shape(t->shape, t->ndim, shape);
    if (variable && t->shape_min) {
        cmd_shape(t->shape_min, t->ndim, smin);
        cmd_shape(t->shape_max, t->ndim, smax);
        size_t n = strlen(shape);
        snprintf(shape + n, sizeof shape - n, " (%s..%s)", smin, smax);
    }
    char codec[16], name[256];
    if (t->codec == DLK_CODEC_ZSTD)
        snprintf(codec, sizeof codec, "zstd:%d", t->level);
    else
        snprintf(codec, sizeof codec, "%s", dlk_codec_name(t->codec));
    printf("%-16s %-11s %-5s %-24s %10llu %7llu %11s %11s %s\n",
           cmd_safe(t->name, name, sizeof name),
           dlk_kind_name(t->kind), dlk_dtype_name(t->dtype), shape,
           (unsigned long long)t->samples, (unsigned long long)t->chunks,
           cmd_bytes(t->stored_bytes, sb), cmd_bytes(t->raw_bytes, rb), codec);
    if (t->n_class_names) {
        printf("%16s classes:", "");
        for (size_t i = 0; i < t->n_class_names && i < 20; i++)
            printf(" %zu=%s", i,
                   cmd_safe(t->class_names[i], name, sizeof name));
        if (t->n_class_names > 20)
            printf(" ... (%zu in all)", t->n_class_names);
        putchar('\n');
    }
}

/* The tensor as the view's rows see it: samples, and the chunks that
 * hold them. */
static void restrict_to(const dlk_dataset *ds, size_t ti, dlk_tensor_info *t,
                        const uint64_t *rows, uint64_t n)
{
    uint64_t chunks = 0, stored = 0, raw = 0, samples = 0, k = 0;
    dlk_chunk_ref c;
    for (size_t i = 0; dlk_tensor_chunk(ds, ti, i, &c) == 0; i++) {
        while (k < n && rows[k] < c.first_sample)
            k++;
        uint64_t in = 0;
        while (k < n && rows[k] < c.first_sample + c.samples) {
            in++;
            k++;
        }
        if (in) {
            chunks++;
            stored += c.stored_bytes;
            raw += c.raw_bytes;
            samples += in;
        }
    }
    t->samples = samples;
    t->chunks = chunks;
    t->stored_bytes = stored;
    t->raw_bytes = raw;
}

static json_t *views_json(const dlk_dataset *ds)
{
    json_t *a = json_array();
    dlk_view_info v;
    for (size_t i = 0; dlk_view_get(ds, i, &v) == 0; i++)
        json_array_append_new(a, json_pack("{s:s,s:I,s:I,s:s,s:s}", "name",
            v.name, "rows", (json_int_t)v.rows, "dataset_rows",
            (json_int_t)v.dataset_rows, "object", v.object, "query",
            v.query));
    return a;
}

static void print_views(const dlk_dataset *ds)
{
    dlk_view_info v;
    for (size_t i = 0; dlk_view_get(ds, i, &v) == 0; i++) {
        if (i == 0)
            printf("%-16s %10s %10s  %s\n", "VIEW", "ROWS", "OF", "QUERY");
        char name[256], *query = cmd_safe_dup(v.query);
        printf("%-16s %10llu %10llu  %s\n", cmd_safe(v.name, name, sizeof name),
               (unsigned long long)v.rows, (unsigned long long)v.dataset_rows,
               query ? query : "");
        free(query);
    }
}

/* What cmd_ls lists: the dataset at url (at a commit, or its head) and
 * with --view the number of the view's rows. */
struct listing {
    dlk_dataset *ds;
    const char *url, *at, *view, *head;
    int dirty;
    uint64_t nrows;
};

/* The lines above the tensors' table, and its column heads. */
static void print_header(const struct listing *ls)
{
    char safe_url[1024], id[256], safe_view[256];
    const char *head = ls->head;
    cmd_safe_url(ls->url, safe_url, sizeof safe_url);
    cmd_safe(dlk_dataset_id(ls->ds), id, sizeof id);
    if (ls->at)
        printf("dataset %s (id %s) at commit %s\n", safe_url, id, head);
    else
        printf("dataset %s (id %s), main at %s%s\n", safe_url, id,
               head ? head : "(no commits)",
               ls->dirty ? ", head has uncommitted changes" : "");
    if (ls->view)
        printf("view %s: %llu rows\n",
               cmd_safe(ls->view, safe_view, sizeof safe_view),
               (unsigned long long)ls->nrows);
    printf("%-16s %-11s %-5s %-24s %10s %7s %11s %11s %s\n", "TENSOR",
           "KIND", "DTYPE", "SHAPE", "SAMPLES", "CHUNKS", "STORED",
           "RAW", "CODEC");
}

/* --json: one object, the tensors (a reference taken) and the views. */
static void print_json(const struct listing *ls, json_t *tensors)
{
    char json_url[1024];
    const char *head = ls->head;
    json_t *o = json_pack("{s:s,s:s,s:o,s:o,s:b,s:o}", "dataset",
                          cmd_redact_url(ls->url, json_url, sizeof json_url),
                          "id", dlk_dataset_id(ls->ds), "head",
                          head ? json_string(head) : json_null(), "at",
                          ls->at ? json_string(head) : json_null(), "dirty",
                          ls->dirty, "tensors", tensors);
    json_object_set_new(o, "views", views_json(ls->ds));
    if (ls->view)
        json_object_set_new(o, "view", json_pack("{s:s,s:I}", "name",
                            ls->view, "rows", (json_int_t)ls->nrows));
    cmd_json_print(o, JSON_PRESERVE_ORDER | JSON_INDENT(2));
    json_decref(o);
}

int cmd_ls(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'},
        {"at", required_argument, 0, 'a'},
        {"view", required_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    bool json = false;
    const char *at = NULL, *view = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'a': at = optarg; break;
        case 'v': view = optarg; break;
        case 'h': return cmd_finish("ls", cmd_usage(usage_text, true));
        default:
            return cmd_bad_option("ls", argv, opts, usage_text);
        }
    }
    if (argc - optind != 1) {
        cmd_error("ls", argc == optind ? "missing DATASET"
                                       : "too many arguments");
        return cmd_usage(usage_text, false);
    }
    if (cmd_check_url("ls", argv[optind]))
        return EXIT_USAGE;
    const char *url = argv[optind];
    dlk_error err;
    dlk_dataset *ds;
    if (cmd_dataset_open(url, at, &ds, &err))
        return cmd_fail("ls", &err);
    size_t n = dlk_dataset_ntensors(ds);
    const char *head = dlk_dataset_head(ds);
    int code = EXIT_OK;
    int dirty = at ? 0 : dlk_dataset_dirty(ds, &err);
    if (dirty < 0) {
        code = cmd_fail("ls", &err);
        dlk_dataset_free(ds);
        return code;
    }
    uint64_t *rows = NULL, nrows = 0;
    if (view && dlk_view_rows(ds, view, &rows, &nrows, &err)) {
        code = cmd_fail("ls", &err);
        dlk_dataset_free(ds);
        return code;
    }
    const struct listing ls = {ds, url, at, view, head, dirty, nrows};
    json_t *tensors = json ? json_array() : NULL;
    if (!json)
        print_header(&ls);
    for (size_t i = 0; i < n; i++) {
        dlk_tensor_info t;
        if (dlk_tensor_info_get(ds, i, &t, &err)) {
            code = cmd_fail("ls", &err);
            break;
        }
        if (view)
            restrict_to(ds, i, &t, rows, nrows);
        if (json)
            json_array_append_new(tensors, tensor_json(&t));
        else
            print_tensor(&t);
    }
    if (json && code == EXIT_OK) {
        print_json(&ls, tensors);
    } else {
        json_decref(tensors);
        if (code == EXIT_OK && !view)
            print_views(ds);
    }
    free(rows);
    dlk_dataset_free(ds);
    return cmd_finish("ls", code);
}
