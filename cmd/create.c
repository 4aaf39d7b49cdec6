/* create.c - dlk create: a new, empty dataset with a schema; or, with a
 * source, a dataset whose schema is inferred from it, then ingested. */
#include "cmd.h"
#include "ingest_opts.h"

#include <unistd.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk create DATASET --tensor NAME:DTYPE[:SHAPE[:CODEC]]... [options]\n"
    "       dlk create DATASET from-s3|from-gs URL|from-dir DIR [--tensor\n"
    "       ...] [options]\n"
    "\n"
    "With a source, the tensors are inferred from it unless given (images\n"
    "u8 HxWx3 with --resize else ?x?x3; labels i32 with class names from\n"
    "folders, .cls sidecars or --labels; video; text; numeric fields), and\n"
    "the source is ingested at once, as dlk ingest does (same options).\n"
    "\n"
    "  --tensor SPEC        a tensor (column), e.g. images:u8:224x224x3:zstd,\n"
    "                       labels:i32, img:u8:?x?x3 ('?' = variable dim);\n"
    "                       codecs: none (default), zstd, zstdN (level 1-22)\n"
    "  --kind NAME=KIND     set a tensor's kind: image video class_label bbox\n"
    "                       text generic (default: guessed from name and shape)\n"
    "  --classes NAME=A,B   class names of a class_label tensor, in id order\n"
    "  --chunk-size SIZE    target chunk size for every tensor (default 16M;\n"
    "                       suffixes K M G)\n"
    "  --part-size SIZE     checksummed parts of every uncompressed chunk\n"
    "                       (default 1M, at least 4K): what a shuffling\n"
    "                       reader fetches and verifies on its own\n"
    "  --exist-ok           a dataset with the same tensors there already is\n"
    "                       used (with a source: ingested into); without it\n"
    "                       an existing dataset is refused (exit 2)\n"
    "  --json               print the result as JSON\n"
    "  -h, --help           this text\n";

/* printed after the shared ingest options, so that --help ends with it */
static const char examples_text[] =
    "\n"
    "Examples:\n"
    "  dlk create pets from-dir train/ --resize 224x224 --fit crop\n"
    "  dlk create emb --tensor emb:f16:768:zstd --tensor id:u64\n";

#define MAX_TENSORS 256

/* The spec NAME=... names (its value in *value); NULL if none. */
static dlk_tensor_spec *find_spec(dlk_tensor_spec *specs, size_t n,
                                  const char *arg, const char **value)
{
    const char *eq = strchr(arg, '=');
    if (!eq)
        return NULL;
    *value = eq + 1;
    for (size_t i = 0; i < n; i++)
        if (strlen(specs[i].name) == (size_t)(eq - arg) &&
            strncmp(specs[i].name, arg, (size_t)(eq - arg)) == 0)
            return &specs[i];
    return NULL;
}

/* Split "a,b,c" into a NULL-terminated array owned by one allocation. */
static char **split_names(const char *list, size_t *n)
{
    size_t count = 1;
    for (const char *p = list; *p; p++)
        count += *p == ',';
    size_t len = strlen(list) + 1;
    char **v = malloc(count * sizeof *v + len);
    if (!v)
        return NULL;
    char *text = (char *)(v + count);
    memcpy(text, list, len);
    size_t i = 0;
    for (char *tok = text;; ) {
        v[i++] = tok;
        char *c = strchr(tok, ',');
        if (!c)
            break;
        *c = '\0';
        tok = c + 1;
    }
    *n = i;
    return v;
}

/* --kind and --classes onto the specs; class_lists receive the
 * allocations (freed by the caller). */
static int apply_kinds(dlk_tensor_spec *specs, size_t n, const char **kinds,
                       size_t nkinds, const char **classes, size_t nclasses,
                       char ***class_lists)
{
    for (size_t i = 0; i < nkinds; i++) {
        const char *v;
        dlk_tensor_spec *s = find_spec(specs, n, kinds[i], &v);
        if (!s || dlk_kind_parse(v, &s->kind)) {
            cmd_error("create", "bad --kind '%s' (NAME=KIND for a --tensor "
                      "NAME)", kinds[i]);
            return EXIT_USAGE;
        }
    }
    for (size_t i = 0; i < nclasses; i++) {
        const char *v;
        dlk_tensor_spec *s = find_spec(specs, n, classes[i], &v);
        if (!s) {
            cmd_error("create", "bad --classes '%s' (NAME=A,B,... for a "
                      "--tensor NAME)", classes[i]);
            return EXIT_USAGE;
        }
        size_t k = (size_t)(s - specs);
        free(class_lists[k]);
        class_lists[k] = split_names(v, &s->n_class_names);
        s->class_names = (const char *const *)class_lists[k];
        s->kind = DLK_KIND_CLASS_LABEL;
    }
    return EXIT_OK;
}

/* dlk create DATASET from-s3 URL: create (schema given or inferred) and
 * ingest; a rerun of the same command resumes. */
static int create_from(ingest_cli *cli, const char *url,
                       dlk_tensor_spec *specs, size_t n, const char **kinds,
                       size_t nkinds, const char **classes, size_t nclasses,
                       unsigned long long chunk_size)
{
    char **class_lists[MAX_TENSORS] = {0};
    int code = apply_kinds(specs, n, kinds, nkinds, classes, nclasses,
                           class_lists);
    for (size_t i = 0; i < n; i++) {
        specs[i].chunk_bytes = chunk_size;
        specs[i].part_bytes = cli->o.part_bytes;
    }
    if (code == EXIT_OK) {
        dlk_error err;
        dlk_ingest_result res = DLK_INGEST_RESULT_INIT;
        ingest_cli_signals(cli);
        cli->url = url;
        dlk_status rc = ingest_cli_store(cli, url, &err);
        if (!rc)
            rc = dlk_ingest_create(url, specs, n, chunk_size, &cli->o, &res,
                                   &err);
        code = ingest_cli_report(cli, "create", rc, &res, &err);
    }
    for (size_t i = 0; i < n; i++)
        free(class_lists[i]);
    return code;
}

/* Something exists at url (err says what): a dataset with the same
 * tensors is opened into *ds with --exist-ok (EXIT_OK); a dataset is
 * otherwise refused as a usage error, and other objects as a failure. */
static int existing(const char *url, const dlk_tensor_spec *specs, size_t n,
                    bool exist_ok, dlk_dataset **ds, dlk_error *err)
{
    dlk_error e2;
    if (cmd_dataset_open(url, NULL, ds, &e2))
        return cmd_fail("create", e2.code == DLK_ENOTFOUND ? err : &e2);
    if (!exist_ok) {
        dlk_dataset_free(*ds);
        *ds = NULL;
        cmd_error("create", "a dataset already exists at '%s' (--exist-ok "
                  "uses it when its tensors are the same)", url);
        return EXIT_USAGE;
    }
    bool same = dlk_dataset_ntensors(*ds) == n;
    for (size_t i = 0; same && i < n; i++) {
        dlk_tensor_info t;
        same = !dlk_tensor_info_get(*ds, i, &t, err) &&
               !strcmp(t.name, specs[i].name) && t.dtype == specs[i].dtype &&
               t.ndim == specs[i].ndim &&
               !memcmp(t.shape, specs[i].shape,
                       sizeof(int64_t) * (size_t)t.ndim);
    }
    if (!same) {
        dlk_dataset_free(*ds);
        *ds = NULL;
        cmd_error("create", "a dataset already exists at '%s' with other "
                  "tensors (see dlk ls '%s')", url, url);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* --tensor SPEC, appended to the list */
struct spec_list {
    dlk_tensor_spec *specs;
    size_t n;
};

static int opt_tensor(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    struct spec_list *l = opt->value;
    dlk_error err;
    if (l->n == MAX_TENSORS) {
        cmd_error("create", "at most %d tensors", MAX_TENSORS);
        return EXIT_USAGE;
    }
    if (dlk_tensor_spec_parse(arg, &l->specs[l->n], &err)) {
        cmd_error("create", "%s", err.msg);
        return EXIT_USAGE;
    }
    l->n++;
    return 0;
}

/* --kind and --classes, kept to apply once the tensors are known */
struct arg_list {
    const char *v[MAX_TENSORS];
    size_t n;
};

static int opt_append(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    struct arg_list *l = opt->value;
    if (l->n < MAX_TENSORS)
        l->v[l->n++] = arg;
    return 0;
}

/* The dataset created at url, or the one there with the same tensors
 * under --exist-ok (*existed); its id copied into id. */
static int create_dataset(const char *url, dlk_tensor_spec *specs, size_t n,
                          bool exist_ok, char id[DLK_ID_MAX], bool *existed)
{
    dlk_error err;
    dlk_dataset *ds = NULL;
    int code = EXIT_OK;
    const dlk_store_options *so = NULL;
    dlk_status rc = cmd_store(url, &so, &err);
    if (!rc)
        rc = dlk_dataset_create_with(url, specs, n, so, &ds, &err);
    if (rc == DLK_EEXIST)
        code = existing(url, specs, n, exist_ok, &ds, &err);
    else if (rc)
        code = cmd_fail("create", &err);
    *existed = rc == DLK_EEXIST;
    if (code == EXIT_OK) {
        snprintf(id, DLK_ID_MAX, "%s", dlk_dataset_id(ds));
        if (dlk_dataset_close(ds, &err))
            code = cmd_fail("create", &err);
    }
    return code;
}

/* The line (or --json object) that says what was created. */
static void print_created(const char *url, const char *id, size_t n,
                          bool existed, bool json)
{
    char safe_url[1024];
    if (json) {
        json_t *o = json_pack("{s:s,s:s,s:i,s:b}", "dataset",
                              cmd_redact_url(url, safe_url,
                                             sizeof safe_url), "id",
                              id, "tensors", (int)n, "created",
                              !existed);
        cmd_json_print(o, JSON_PRESERVE_ORDER);
        json_decref(o);
    } else if (existed) {
        printf("dataset '%s' exists with these %zu tensor%s\n",
               cmd_safe_url(url, safe_url, sizeof safe_url), n,
               n == 1 ? "" : "s");
    } else {
        printf("created dataset '%s' with %zu tensor%s\n",
               cmd_safe_url(url, safe_url, sizeof safe_url), n,
               n == 1 ? "" : "s");
    }
}

int cmd_create(int argc, char **argv)
{
    ingest_cli cli;
    dlk_tensor_spec specs[MAX_TENSORS];
    char **class_lists[MAX_TENSORS] = {0};
    struct spec_list sl = {specs, 0};
    struct arg_list kl = {{0}, 0}, cl = {{0}, 0};
    unsigned long long chunk_size = 0;
    int code = EXIT_OK;

    ingest_cli_init(&cli);
    static const char *const help[] = {usage_text, ingest_opts_usage,
                                       examples_text, NULL};
    cmd_opt opts[8 + INGEST_NOPTIONS] = {
        CMD_OPT_CALL_WITH("tensor", 0, opt_tensor, &sl),
        CMD_OPT_CALL_WITH("kind", 0, opt_append, &kl),
        CMD_OPT_CALL_WITH("classes", 0, opt_append, &cl),
        /* a chunk is at most 2 GiB raw, and a target is half that */
        CMD_OPT_SIZE("chunk-size", 0, &chunk_size, 1, 1u << 30),
        CMD_OPT_SIZE("part-size", 0, &cli.o.part_bytes, 4096, 1u << 30),
        CMD_OPT_FLAG("exist-ok", 0, &cli.o.exist_ok),
        CMD_OPT_HELP_TEXTS(help),
    };
    size_t nopts = 7;
    nopts += ingest_cli_options(&cli, opts + nopts);
    opts[nopts] = (cmd_opt)CMD_OPT_END();
    code = cmd_parse_options("create", opts, usage_text, NULL, argc, argv);
    if (code != CMD_OPTS_DONE) {
        ingest_cli_free(&cli);
        return code;
    }
    code = EXIT_OK;
    size_t n = sl.n;
    if (argc - optind == 3) {
        code = cmd_check_url("create", argv[optind]);
        if (code == EXIT_OK)
            code = ingest_cli_source(&cli, "create", argv[optind + 1],
                                     argv[optind + 2]);
        if (code == EXIT_OK)
            code = create_from(&cli, argv[optind], specs, n, kl.v, kl.n,
                               cl.v, cl.n, chunk_size);
        ingest_cli_free(&cli);
        return cmd_finish("create", code);
    }
    ingest_cli_free(&cli);
    if (optind != argc - 1 || n == 0) {
        cmd_error("create", optind == argc ? "missing DATASET"
                  : optind < argc - 1 ? "too many arguments"
                  : "at least one --tensor is needed");
        return cmd_usage(usage_text, false);
    }
    const char *url = argv[optind];
    if (cmd_check_url("create", url))
        return EXIT_USAGE;
    code = apply_kinds(specs, n, kl.v, kl.n, cl.v, cl.n, class_lists);
    for (size_t i = 0; i < n; i++) {
        specs[i].chunk_bytes = chunk_size;
        specs[i].part_bytes = cli.o.part_bytes;
    }
    char id[DLK_ID_MAX];
    bool existed = false;
    if (code == EXIT_OK)
        code = create_dataset(url, specs, n, cli.o.exist_ok, id, &existed);
    if (code == EXIT_OK)
        print_created(url, id, n, existed, cli.json);
    for (size_t i = 0; i < n; i++)
        free(class_lists[i]);
    return cmd_finish("create", code);
}
