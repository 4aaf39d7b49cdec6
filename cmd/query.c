/* query.c - dlk query: the rows an expression and a vector search pick,
 * printed or saved as a view. */
#include "cmd.h"
#include "options.h"
#include "values.h"

#include <unistd.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk query DATASET [EXPR] [--near TENSOR=VECTOR [--k K]\n"
    "                 [--metric cosine|l2|ip]] [--at REF] [--view NAME]\n"
    "                 [--show T1,T2,...] [--limit N] [--count] [--json]\n"
    "                 [--save-view NAME] [--drop-view NAME] [--threads N]\n"
    "                 [--no-verify] [--device auto|cpu|cuda]\n"
    "\n"
    "  EXPR           which rows: 'labels == \"cat\" and width >= 200'\n"
    "                 (man dlk-query for the language); all rows if omitted\n"
    "  --near T=V     the K rows nearest to vector V in the embedding tensor\n"
    "                 T (f32/f64 [D]), among those EXPR picks: V is a .npy\n"
    "                 file of D values or a row number; a .npy of shape\n"
    "                 [Q, D] asks Q queries, answered from the rows read\n"
    "                 once (a block of rows each; --json: \"results\")\n"
    "  --k K          how many nearest rows (default 10)\n"
    "  --metric M     cosine (default), l2 or ip (inner product)\n"
    "  --at REF       query a commit (main, main~N, an id or a prefix)\n"
    "  --view NAME    only the rows of a saved view\n"
    "  --show LIST    print these tensors' values with each row\n"
    "  --limit N      print at most N rows (the count is of all)\n"
    "  --count        print only the number of rows\n"
    "  --json         one JSON object: {\"rows\", \"scores\", \"count\", ...}\n"
    "  --save-view N  store the rows as view N of the head (and publish it)\n"
    "  --drop-view N  remove view N from the head\n"
    "  --threads N    threads that read and evaluate (default: the CPUs)\n"
    "  --no-verify    skip the chunks' payload checksums\n"
    "  --device D     where --near scores the rows: auto (default: the\n"
    "                 CPU, faster here than copying the rows to a GPU),\n"
    "                 cpu, or cuda (GPU 0; exit 3 when there is none)\n"
    "  -h, --help     this text\n"
    "\n"
    "Examples:\n"
    "  dlk query pets \"labels == 'cat' and shape(images)[0] >= 200\" --count\n"
    "  dlk query pets --near emb=17 --k 20 --save-view near17\n";

#define MAX_SHOW 16

typedef struct show {
    int ti[MAX_SHOW];
    dlk_tensor_info info[MAX_SHOW];
    int n;
} show;

static int parse_show(dlk_dataset *ds, char *list, show *sh)
{
    dlk_error err;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int ti = dlk_dataset_find(ds, tok);
        if (ti < 0) {
            cmd_error("query", "--show: no tensor '%s'", tok);
            return EXIT_USAGE;
        }
        if (sh->n == MAX_SHOW) {
            cmd_error("query", "--show: at most %d tensors", MAX_SHOW);
            return EXIT_USAGE;
        }
        if (dlk_tensor_info_get(ds, (size_t)ti, &sh->info[sh->n], &err))
            return cmd_fail("query", &err);
        sh->ti[sh->n++] = ti;
    }
    return EXIT_OK;
}

static bool is_text(const dlk_tensor_info *t, const dlk_sample *s)
{
    return t->kind == DLK_KIND_TEXT && s->dtype == DLK_U8;
}

static const char *class_of(const dlk_tensor_info *t, value v)
{
    if (t->kind != DLK_KIND_CLASS_LABEL)
        return NULL;
    uint64_t i = v.kind == V_INT ? (uint64_t)v.i : v.u;
    if (v.kind == V_INT && v.i < 0)
        return NULL;
    return i < t->n_class_names ? t->class_names[i] : NULL;
}

/* A sample as JSON: text as a string, one value as itself, else its
 * shape. */
static json_t *sample_json(const dlk_tensor_info *t, const dlk_sample *s)
{
    size_t esz = dlk_dtype_size(s->dtype), n = esz ? s->nbytes / esz : 0;
    if (is_text(t, s))
        return json_stringn_nocheck(s->data, s->nbytes);
    if (n == 1)
        return value_json(value_at(s->dtype, s->data, 0));
    json_t *shape = json_array();
    for (int d = 0; d < s->ndim; d++)
        json_array_append_new(shape, json_integer(s->shape[d]));
    return json_pack("{s:o}", "shape", shape);
}

static void sample_print(const dlk_tensor_info *t, const dlk_sample *s)
{
    size_t esz = dlk_dtype_size(s->dtype), n = esz ? s->nbytes / esz : 0;
    if (is_text(t, s)) {
        cmd_print_quoted(s->data, s->nbytes, 200);
    } else if (n == 1) {
        value v = value_at(s->dtype, s->data, 0);
        value_print(stdout, v);
        const char *cn = class_of(t, v);
        char safe[256];
        if (cn)
            printf(" (%s)", cmd_safe(cn, safe, sizeof safe));
    } else {
        char shape[128];
        printf("[%s %s]", cmd_shape(s->shape, s->ndim, shape),
               dlk_dtype_name(s->dtype));
    }
}

static int print_rows(dlk_dataset *ds, const dlk_select_result *r,
                      const show *sh, uint64_t limit, json_t *o)
{
    dlk_error err;
    json_t *rows = o ? json_array() : NULL,
           *scores = o && r->scores ? json_array() : NULL,
           *samples = o && sh->n ? json_array() : NULL;
    uint64_t n = r->n < limit ? r->n : limit;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t row = r->rows[i];
        if (o) {
            json_array_append_new(rows, json_integer((json_int_t)row));
            if (scores)
                json_array_append_new(scores, json_real(r->scores[i]));
        } else {
            printf("%llu", (unsigned long long)row);
            if (r->scores)
                printf("\t%.6g", r->scores[i]);
        }
        json_t *one = samples ? json_object() : NULL;
        for (int k = 0; k < sh->n; k++) {
            dlk_sample s;
            if (dlk_read_sample(ds, (size_t)sh->ti[k], row, &s, &err)) {
                json_decref(one);
                json_decref(rows);
                json_decref(scores);
                json_decref(samples);
                return cmd_fail("query", &err);
            }
            if (one) {
                json_object_set_new(one, sh->info[k].name,
                                    sample_json(&sh->info[k], &s));
            } else {
                char name[256];
                printf("\t%s=", cmd_safe(sh->info[k].name, name,
                                          sizeof name));
                sample_print(&sh->info[k], &s);
            }
            dlk_sample_free(&s);
        }
        if (one)
            json_array_append_new(samples, one);
        if (!o)
            putchar('\n');
    }
    if (o) {
        json_object_set_new(o, "rows", rows);
        if (scores)
            json_object_set_new(o, "scores", scores);
        if (samples)
            json_object_set_new(o, "samples", samples);
    }
    return EXIT_OK;
}

/* --near TENSOR=VECTOR: a row number, or a .npy file. */
static int parse_near(char *arg, dlk_select_opts *o)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) {
        cmd_error("query", "--near takes TENSOR=VECTOR (a .npy file or a "
                  "row number), not '%s'", arg);
        return EXIT_USAGE;
    }
    *eq = 0;
    o->near_tensor = arg;
    const char *v = eq + 1;
    if (strspn(v, "0123456789") == strlen(v)) {
        uint64_t row;
        if (cmd_read_uint("query", "--near", v, 0, INT64_MAX, &row))
            return EXIT_USAGE;
        o->near_row_plus1 = row + 1;
    } else {
        o->near_npy = v;
    }
    return EXIT_OK;
}

/* The expression again with a caret under the column at fault. */
static void point_at(const char *expr, size_t col)
{
    if (!col || cmd_json)
        return;
    /* escaped as the terminal will see it, the caret under the same
     * character */
    char *all = cmd_safe_dup(expr);
    char *head = strndup(expr, col - 1 < strlen(expr) ? col - 1
                                                        : strlen(expr));
    char *before = head ? cmd_safe_dup(head) : NULL;
    if (all && before)
        fprintf(stderr, "  %s\n  %*s^\n", all, (int)strlen(before), "");
    free(all);
    free(head);
    free(before);
}

/* The dataset's url in --json, credentials redacted. */
static char json_url[1024];

/* Whether the query vectors have as many values as the rows of the
 * tensor they are compared with (checked before the rows are read).  An
 * exit code. */
static int check_dim(dlk_dataset *ds, const dlk_select_opts *so, uint32_t dim)
{
    dlk_error err;
    int ti = dlk_dataset_find(ds, so->near_tensor);
    dlk_tensor_info ti_info;
    if (ti >= 0 && !dlk_tensor_info_get(ds, (size_t)ti, &ti_info, &err) &&
        ti_info.ndim == 1 && ti_info.shape[0] != (int64_t)dim) {
        cmd_error("query", "the query vectors have %u values; tensor '%s' "
                  "has %lld", dim, so->near_tensor,
                  (long long)ti_info.shape[0]);
        return EXIT_ERROR;
    }
    return EXIT_OK;
}

/* The resident index of the rows the queries search.  An exit code:
 * usage where the expression is at fault, with a caret under it. */
static int open_index(dlk_dataset *ds, const dlk_select_opts *so,
                      dlk_index **ix)
{
    dlk_error err;
    size_t col = 0;
    dlk_index_opts io = {.size = sizeof(dlk_index_opts),
        .tensor = so->near_tensor, .where = so->where, .view = so->view,
        /* auto stays the CPU, as for one query: CUDA's start-up and the
         * copy cost more than a batch of queries on the CPU unless the
         * batch is large; --device cuda asks for the GPU */
        .device = so->device == DLK_QUERY_DEVICE_AUTO ? DLK_QUERY_DEVICE_CPU
                                                      : so->device,
        .threads = so->threads,
        .no_verify = so->no_verify, .error_column = &col,
    };
    if (dlk_index_open(ds, &io, ix, &err)) {
        int code = cmd_fail("query", &err);
        if (col) { /* the expression is at fault: usage */
            point_at(so->where, col);
            code = EXIT_USAGE;
        }
        return code;
    }
    return EXIT_OK;
}

/* --json's object for nq queries answered by ix (got rows each), its
 * "results" an empty array for the queries' blocks: seconds from t0,
 * the index loaded at t1, searched by t2. */
static json_t *many_json(const char *url, const char *at,
                         const dlk_select_opts *so, uint32_t nq,
                         const dlk_index *ix, uint32_t got, double t0,
                         double t1, double t2)
{
    json_t *o = json_pack("{s:s,s:s?,s:s?,s:I,s:I,s:I}", "dataset",
                          cmd_redact_url(url, json_url, sizeof json_url),
                          "at", at, "expression", so->where,
                          "queries", (json_int_t)nq,
                          "candidates", (json_int_t)dlk_index_rows(ix),
                          "count", (json_int_t)got);
    if (so->view)
        json_object_set_new(o, "view", json_string(so->view));
    json_object_set_new(o, "device", json_string(dlk_query_device_name(
                                         dlk_index_device(ix))));
    json_object_set_new(o, "seconds", json_real(t2 - t0));
    json_object_set_new(o, "load_seconds", json_real(t1 - t0));
    json_object_set_new(o, "index_bytes",
                        json_integer((json_int_t)dlk_index_bytes(ix)));
    json_object_set_new(o, "results", json_array());
    return o;
}

/* --near T=FILE.npy of several query vectors: the rows are read once
 * into a resident index (dlk_index_open: on a GPU they are copied there
 * once), which answers every query; a block of rows per query. */
static int query_many(dlk_dataset *ds, const char *url, const char *at,
                      const dlk_select_opts *so, const float *vecs,
                      uint32_t nq, uint32_t dim, const show *sh,
                      uint64_t limit, bool json)
{
    dlk_error err;
    if (check_dim(ds, so, dim))
        return EXIT_ERROR;
    dlk_index *ix;
    double t0 = cmd_now_s();
    int code = open_index(ds, so, &ix);
    if (code != EXIT_OK)
        return code;
    double t1 = cmd_now_s();
    uint32_t k = so->k ? so->k : 10, got = 0;
    uint64_t *rows = malloc((size_t)nq * k * sizeof *rows);
    double *scores = malloc((size_t)nq * k * sizeof *scores);
    if (!rows || !scores) {
        cmd_error("query", "out of memory");
        code = EXIT_ERROR;
    } else if (dlk_index_search(ix, vecs, nq, k, so->metric, rows, scores,
                                &got, &err)) {
        code = cmd_fail("query", &err);
    }
    double t2 = cmd_now_s();
    json_t *o = NULL, *results = NULL;
    if (!code && json) {
        o = many_json(url, at, so, nq, ix, got, t0, t1, t2);
        results = json_object_get(o, "results");
    }
    for (uint32_t i = 0; !code && i < nq; i++) {
        dlk_select_result r = {.size = sizeof r,
            .rows = rows + (size_t)i * k, .scores = scores + (size_t)i * k,
            .n = got,
        };
        json_t *one = results ? json_object() : NULL;
        if (!json)
            printf("%s# query %u\n", i ? "\n" : "", i);
        code = print_rows(ds, &r, sh, limit, one);
        if (one)
            json_array_append_new(results, one);
    }
    if (!code && o)
        cmd_json_print(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    free(rows);
    free(scores);
    dlk_index_close(ix);
    return code;
}

/* What the callbacks of cmd_query's table fill, and the rest of its
 * options. */
struct query_args {
    dlk_select_opts so;
    bool have_metric, have_device;
    const char *url, *at, *save, *drop, *show_arg;
    bool count_only, json;
    uint32_t limit;
};

static int opt_near(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    struct query_args *q = opt->value;
    int code = parse_near((char *)arg, &q->so);
    return code ? cmd_usage(usage_text, false), code : 0;
}

static int opt_metric(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    struct query_args *q = opt->value;
    if (dlk_metric_parse(arg, &q->so.metric)) {
        cmd_error("query", "unknown metric '%s' (cosine, l2 or ip)", arg);
        return EXIT_USAGE;
    }
    q->have_metric = true;
    return 0;
}

static int opt_device(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    struct query_args *q = opt->value;
    if (dlk_query_device_parse(arg, &q->so.device)) {
        cmd_error("query", "unknown device '%s' (auto, cpu or cuda)", arg);
        return EXIT_USAGE;
    }
    q->have_device = true;
    return 0;
}

/* The operands and the flags that go together; the dataset's url and
 * the expression taken from argv. */
static int check_args(struct query_args *q, int argc, char **argv)
{
    bool have_k = q->so.k != 0;
    if (argc - optind < 1 || argc - optind > 2) {
        cmd_error("query", "expected DATASET [EXPR]");
        return cmd_usage(usage_text, false);
    }
    if ((have_k || q->have_metric || q->have_device) && !q->so.near_tensor) {
        cmd_error("query", "--k, --metric and --device go with --near");
        return EXIT_USAGE;
    }
    if (q->drop && (q->save || argc - optind == 2 || q->so.near_tensor ||
                    q->at)) {
        cmd_error("query", "--drop-view goes alone (with DATASET)");
        return EXIT_USAGE;
    }
    q->url = argv[optind];
    q->so.where = argc - optind == 2 ? argv[optind + 1] : NULL;
    if (cmd_check_url("query", q->url))
        return EXIT_USAGE;
    return EXIT_OK;
}

/* --drop-view NAME: the view removed from the head. */
static int drop_view(dlk_dataset *ds, const struct query_args *q)
{
    dlk_error err;
    int code = dlk_view_drop(ds, q->drop, &err) ? cmd_fail("query", &err)
                                                : EXIT_OK;
    if (!code && q->json)
        cmd_json_print(json_pack("{s:s,s:s}", "dataset",
                  cmd_redact_url(q->url, json_url, sizeof json_url),
                                 "dropped", q->drop), JSON_COMPACT);
    return code;
}

/* The rows the expression and --near pick, and the seconds that took;
 * an expression at fault is bad usage, shown with a caret. */
static int select_rows(dlk_dataset *ds, const dlk_select_opts *so,
                       dlk_select_result *r, double *secs)
{
    dlk_error err;
    double t0 = cmd_now_s();
    if (dlk_select(ds, so, r, &err)) {
        int code = cmd_fail("query", &err);
        if (r->error_column) { /* the expression is at fault: usage */
            point_at(so->where, r->error_column);
            code = EXIT_USAGE;
        }
        return code;
    }
    *secs = cmd_now_s() - t0;
    return EXIT_OK;
}

/* --save-view NAME: the rows stored as a view of the head, whatever
 * state was queried, with the query that picked them. */
static int save_view(dlk_dataset *ds, const struct query_args *q,
                     const dlk_select_result *r)
{
    const dlk_select_opts *so = &q->so;
    dlk_error err;
    int code = EXIT_OK;
    dlk_dataset *head = ds;
    if (q->at && cmd_dataset_open(q->url, NULL, &head, &err))
        code = cmd_fail("query", &err);
    char what[1024];
    if (so->near_tensor)
        snprintf(what, sizeof what, "%s%s--near %s k=%u %s",
                 so->where ? so->where : "", so->where ? " " : "",
                 so->near_tensor, so->k ? so->k : 10,
                 dlk_metric_name(so->metric));
    else
        snprintf(what, sizeof what, "%s", so->where ? so->where : "");
    if (!code && dlk_view_save(head, q->save, r->rows, r->n, what, &err))
        code = cmd_fail("query", &err);
    if (head != ds)
        dlk_dataset_free(head);
    return code;
}

/* --json's object for one selection, before its rows are added. */
static json_t *select_json(const struct query_args *q,
                           const dlk_select_result *r, double secs)
{
    const dlk_select_opts *so = &q->so;
    json_t *o = json_pack("{s:s,s:s?,s:s?,s:I,s:I,s:I}", "dataset",
                          cmd_redact_url(q->url, json_url, sizeof json_url),
                          "at", q->at, "expression", so->where,
                          "rows_total", (json_int_t)r->rows_total,
                          "candidates", (json_int_t)r->candidates,
                          "count", (json_int_t)r->n);
    if (so->view)
        json_object_set_new(o, "view", json_string(so->view));
    if (q->save)
        json_object_set_new(o, "saved_view", json_string(q->save));
    if (so->near_tensor)
        json_object_set_new(o, "device",
                            json_string(dlk_query_device_name(r->device)));
    json_object_set_new(o, "seconds", json_real(secs));
    json_object_set_new(o, "bytes_read", json_integer((json_int_t)r->bytes_read));
    return o;
}

/* The selection printed: its rows, its count or one JSON object, and
 * on stderr the view saved. */
static int print_selection(dlk_dataset *ds, const struct query_args *q,
                           const dlk_select_result *r, const show *sh,
                           double secs)
{
    int code = EXIT_OK;
    json_t *o = q->json ? select_json(q, r, secs) : NULL;
    if (!q->count_only)
        code = print_rows(ds, r, sh, q->limit, o);
    if (!code && q->count_only && !q->json)
        printf("%llu\n", (unsigned long long)r->n);
    if (!code && o)
        cmd_json_print(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    char safe_save[256];
    if (!code && !q->json && !q->count_only && q->save)
        fprintf(stderr, "saved view '%s': %llu rows\n",
                cmd_safe(q->save, safe_save, sizeof safe_save),
                (unsigned long long)r->n);
    return code;
}

int cmd_query(int argc, char **argv)
{
    struct query_args q;
    memset(&q, 0, sizeof q);
    dlk_select_opts_init(&q.so);
    q.limit = UINT32_MAX;
    dlk_select_opts *sop = &q.so;
    const cmd_opt opts[] = {
        CMD_OPT_CALL_WITH("near", 0, opt_near, &q),
        CMD_OPT_UINT("k", 0, &sop->k, 1, 1000000),
        CMD_OPT_CALL_WITH("metric", 0, opt_metric, &q),
        CMD_OPT_STRING("at", 0, &q.at),
        CMD_OPT_STRING("view", 0, &sop->view),
        CMD_OPT_STRING("show", 0, &q.show_arg),
        CMD_OPT_UINT("limit", 0, &q.limit, 0, UINT32_MAX),
        CMD_OPT_FLAG("count", 0, &q.count_only),
        CMD_OPT_FLAG("json", 0, &q.json),
        CMD_OPT_STRING("save-view", 0, &q.save),
        CMD_OPT_STRING("drop-view", 0, &q.drop),
        CMD_OPT_UINT("threads", 0, &sop->threads, 1, 256),
        CMD_OPT_FLAG("no-verify", 0, &sop->no_verify),
        CMD_OPT_CALL_WITH("device", 0, opt_device, &q),
        CMD_OPT_HELP(),
        CMD_OPT_END(),
    };
    int code = cmd_parse_options("query", opts, usage_text, NULL, argc, argv);
    if (code != CMD_OPTS_DONE)
        return code;
    if ((code = check_args(&q, argc, argv)))
        return code;
    dlk_select_opts *so = &q.so;
    dlk_error err;
    dlk_dataset *ds;
    if (cmd_dataset_open(q.url, q.drop ? NULL : q.at, &ds, &err))
        return cmd_fail("query", &err);
    if (q.drop) {
        code = drop_view(ds, &q);
        dlk_dataset_free(ds);
        return cmd_finish("query", code);
    }
    show sh = {0};
    /* the tensor list is cut up in place, as argv's strings may be */
    if (q.show_arg && (code = parse_show(ds, (char *)q.show_arg, &sh))) {
        dlk_dataset_free(ds);
        return code;
    }
    /* a .npy of several query vectors: answered by one resident index */
    float *vecs = NULL;
    uint32_t nq = 0, dim = 0;
    if (so->near_npy &&
        !dlk_npy_vectors(so->near_npy, &vecs, &nq, &dim, &err) && nq > 1) {
        if (q.save || q.count_only) {
            cmd_error("query", "--save-view and --count take one query "
                      "vector; '%s' has %u", so->near_npy, nq);
            code = EXIT_USAGE;
        } else {
            code = query_many(ds, q.url, q.at, so, vecs, nq, dim, &sh,
                              q.limit, q.json);
        }
        free(vecs);
        dlk_dataset_free(ds);
        return cmd_finish("query", code);
    }
    free(vecs);
    so->count_only = q.count_only && !q.save;
    dlk_select_result r = DLK_SELECT_RESULT_INIT;
    double secs = 0;
    if ((code = select_rows(ds, so, &r, &secs))) {
        dlk_dataset_free(ds);
        return code;
    }
    code = q.save ? save_view(ds, &q, &r) : EXIT_OK;
    if (!code)
        code = print_selection(ds, &q, &r, &sh, secs);
    dlk_select_result_free(&r);
    dlk_dataset_free(ds);
    return cmd_finish("query", code);
}
