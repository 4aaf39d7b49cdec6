/* cat.c - dlk cat: one sample of a tensor, or a range of them, as text,
 * raw bytes, .npy, JSON (lines) or a PNG image. */
#include "cmd.h"
#include "options.h"
#include "values.h"

#include <unistd.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: dlk cat DATASET TENSOR INDEX|FIRST:END [--at REF] [--view NAME]\n"
    "               [--raw | --npy | --json | --png [--frame K]]\n"
    "\n"
    "  FIRST:END    the samples FIRST to END-1, in order (FIRST empty: 0;\n"
    "               END empty: to the last); with the summary, --raw\n"
    "               (the samples' bytes back to back) or --json (a line\n"
    "               each)\n"
    "  --at REF     read from a commit (main, main~N, an id or a unique\n"
    "               prefix) instead of the head\n"
    "  --view NAME  INDEX counts the rows of the view NAME (the sample is\n"
    "               that of the view's INDEX-th row, from 0)\n"
    "  (default)    a summary: dtype, shape and the values (long ones elided);\n"
    "               class labels with their class name, text as a string\n"
    "  --raw        the sample's bytes (C order, little-endian)\n"
    "  --npy        the sample as a .npy file (numpy.load reads it)\n"
    "  --json       {\"tensor\", \"index\", \"dtype\", \"shape\", \"values\"} with\n"
    "               every value ('class_name' for class labels)\n"
    "  --png        an image sample (u8 [H,W,C] or [C,H,W], C 1, 3 or 4)\n"
    "               as a PNG file\n"
    "  --frame K    frame K (from 0) of a clip [T,H,W,C] as a PNG file\n"
    "  -h, --help   this text\n"
    "\n"
    "Examples:\n"
    "  dlk cat pets labels 7\n"
    "  dlk cat pets labels 0:100 --json\n"
    "  dlk cat pets images 7 --png > 7.png\n";

#define SHOW_EDGE 8

static size_t elements(const dlk_sample *s)
{
    size_t esz = dlk_dtype_size(s->dtype);
    return esz ? s->nbytes / esz : 0;
}

static const char *class_name(const dlk_tensor_info *t, value v)
{
    if (t->kind != DLK_KIND_CLASS_LABEL)
        return NULL;
    if (v.kind == V_UINT && v.u < t->n_class_names)
        return t->class_names[v.u];
    if (v.kind == V_INT && v.i >= 0 && (uint64_t)v.i < t->n_class_names)
        return t->class_names[v.i];
    return NULL;
}

static void print_text(const dlk_tensor_info *t, const dlk_sample *s,
                       unsigned long long index)
{
    char shape[128], name[256];
    size_t n = elements(s);
    printf("tensor %s  sample %llu  kind %s  dtype %s  shape %s  (%zu bytes)\n",
           cmd_safe(t->name, name, sizeof name), index, dlk_kind_name(t->kind), dlk_dtype_name(s->dtype),
           cmd_shape(s->shape, s->ndim, shape), s->nbytes);
    if (t->kind == DLK_KIND_TEXT && s->dtype == DLK_U8) {
        printf("text: ");
        cmd_print_quoted(s->data, s->nbytes, 4096);
        putchar('\n');
        return;
    }
    printf("values: [");
    for (size_t i = 0; i < n; i++) {
        if (n > 2 * SHOW_EDGE && i == SHOW_EDGE) {
            printf(", ...");
            i = n - SHOW_EDGE;
        }
        value v = value_at(s->dtype, s->data, i);
        if (i)
            printf(", ");
        value_print(stdout, v);
        const char *cn = class_name(t, v);
        char safe[256];
        if (cn)
            printf(" (%s)", cmd_safe(cn, safe, sizeof safe));
    }
    printf("]%s\n", n > 2 * SHOW_EDGE ? "  (elided; --json or --npy for all)"
                                      : "");
}

static void print_json(const dlk_tensor_info *t, const dlk_sample *s,
                       unsigned long long index)
{
    json_t *shape = json_array(), *values = json_array();
    for (int d = 0; d < s->ndim; d++)
        json_array_append_new(shape, json_integer(s->shape[d]));
    size_t n = elements(s);
    const char *cn = NULL;
    for (size_t i = 0; i < n; i++) {
        value v = value_at(s->dtype, s->data, i);
        json_array_append_new(values, value_json(v));
        if (n == 1)
            cn = class_name(t, v);
    }
    json_t *o = json_pack("{s:s,s:I,s:s,s:o,s:o}", "tensor", t->name, "index",
                          (json_int_t)index, "dtype", dlk_dtype_name(s->dtype),
                          "shape", shape, "values", values);
    if (cn)
        json_object_set_new(o, "class_name", json_string(cn));
    /* a line a sample (cmd_json_print prints one object a command) */
    json_dumpf(o, stdout, JSON_PRESERVE_ORDER | JSON_COMPACT);
    putchar('\n');
    json_decref(o);
}

/* --raw, --npy, --json, --png and --frame K (a PNG of frame K): one
 * output mode */
struct cat_mode {
    int mode; /* 0: the summary, else the option's letter */
    int frame;
};

static int opt_mode(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    struct cat_mode *m = opt->value;
    int c = opt->name[0] == 'f' ? 'p' : opt->name[0]; /* r, n, j or p */
    if (arg) {
        uint64_t k;
        if (cmd_read_uint("cat", cmd_option_name(), arg, 0, INT_MAX, &k))
            return EXIT_USAGE;
        m->frame = (int)k;
    }
    if (m->mode && m->mode != c) {
        cmd_error("cat", "--raw, --npy, --json and --png exclude each other");
        return cmd_usage(usage_text, false);
    }
    m->mode = c;
    return 0;
}

/* INDEX (*first, *range false), or FIRST:END (either may be empty): the
 * samples [*first, *end), *end UINT64_MAX for "to the last". */
static int read_index(const char *arg, uint64_t *first, uint64_t *end,
                      bool *range)
{
    const char *colon = strchr(arg, ':');
    *range = colon != NULL;
    if (!colon) {
        if (cmd_read_uint("cat", "INDEX", arg, 0, UINT64_MAX, first))
            return EXIT_USAGE;
        *end = 0; /* unused */
        return 0;
    }
    char a[32] = "", b[32] = "";
    size_t la = (size_t)(colon - arg), lb = strlen(colon + 1);
    if (la >= sizeof a || lb >= sizeof b || strchr(colon + 1, ':')) {
        cmd_error("cat", "INDEX range '%s' is not FIRST:END", arg);
        return EXIT_USAGE;
    }
    memcpy(a, arg, la);
    memcpy(b, colon + 1, lb);
    *first = 0;
    *end = UINT64_MAX;
    if ((la && cmd_read_uint("cat", "FIRST", a, 0, UINT64_MAX - 1, first)) ||
        (lb && cmd_read_uint("cat", "END", b, 0, UINT64_MAX - 1, end)))
        return EXIT_USAGE;
    if (*end < *first) {
        cmd_error("cat", "range %s ends before it begins", arg);
        return EXIT_USAGE;
    }
    return 0;
}

/* Print sample `index` of tensor ti (t its info) in the mode: an exit
 * code. */
static int cat_one(dlk_dataset *ds, size_t ti, const dlk_tensor_info *t,
                   unsigned long long index, int mode, int frame)
{
    dlk_error err;
    dlk_sample s;
    int code = EXIT_OK;
    if (dlk_read_sample(ds, ti, index, &s, &err))
        return cmd_fail("cat", &err);
    if (mode == 'r') {
        fwrite(s.data, 1, s.nbytes, stdout);
    } else if (mode == 'n') {
        char hdr[256];
        size_t len;
        if (dlk_npy_header(s.dtype, s.ndim, s.shape, hdr, sizeof hdr, &len,
                           &err))
            code = cmd_fail("cat", &err);
        else {
            fwrite(hdr, 1, len, stdout);
            fwrite(s.data, 1, s.nbytes, stdout);
        }
    } else if (mode == 'p') {
        void *png;
        size_t len;
        if (dlk_png_from_sample(&s, frame, -1, &png, &len, &err)) {
            cmd_error("cat", "cannot write '%s' sample %llu as PNG: %s",
                      t->name, index, err.msg);
            code = EXIT_ERROR;
        } else {
            fwrite(png, 1, len, stdout);
            free(png);
        }
    } else if (mode == 'j') {
        print_json(t, &s, index);
    } else {
        print_text(t, &s, index);
    }
    dlk_sample_free(&s);
    return code;
}

/* The message for a tensor the dataset at url does not have, naming
 * those it has. */
static void no_tensor(dlk_dataset *ds, const char *url, const char *tname)
{
    dlk_error err;
    char names[512] = "";
    size_t len = 0, nt = dlk_dataset_ntensors(ds);
    for (size_t i = 0; i < nt && len < sizeof names - 1; i++) {
        dlk_tensor_info ti2;
        if (dlk_tensor_info_get(ds, i, &ti2, &err) == DLK_OK)
            len += (size_t)snprintf(names + len, sizeof names - len,
                                    "%s%s", i ? ", " : "", ti2.name);
    }
    cmd_error("cat", "no tensor '%s' in '%s' (its tensors: %s)", tname,
              url, nt ? names : "none");
}

/* The dataset at url (at: a past state) opened, with its tensor tname
 * (*ti, its info *t); on an error a message and nothing left open.  An
 * exit code. */
static int open_tensor(const char *url, const char *at, const char *tname,
                       dlk_dataset **ds, int *ti, dlk_tensor_info *t)
{
    dlk_error err;
    if (cmd_dataset_open(url, at, ds, &err))
        return cmd_fail("cat", &err);
    *ti = dlk_dataset_find(*ds, tname);
    if (*ti < 0) {
        no_tensor(*ds, url, tname);
        dlk_dataset_free(*ds);
        return EXIT_ERROR;
    }
    if (dlk_tensor_info_get(*ds, (size_t)*ti, t, &err)) {
        int code = cmd_fail("cat", &err);
        dlk_dataset_free(*ds);
        return code;
    }
    return EXIT_OK;
}

/* Whether the rows asked for are there: a range within the n rows (of
 * the view, or samples of t), its open end (FIRST:) made the last; a
 * view's row among its rows.  An exit code. */
static int check_span(const char *view, const dlk_tensor_info *t, uint64_t n,
                      bool range, uint64_t first, uint64_t *end)
{
    if (range && *end == UINT64_MAX) /* FIRST: runs to the last */
        *end = n > first ? n : first;
    if (range && *end > n) {
        if (view)
            cmd_error("cat", "view '%s' has %llu rows, the range ends at %llu",
                      view, (unsigned long long)n, (unsigned long long)*end);
        else
            cmd_error("cat", "tensor '%s' has %llu samples, the range ends "
                      "at %llu", t->name, (unsigned long long)n,
                      (unsigned long long)*end);
        return EXIT_ERROR;
    }
    if (!range && view && first >= n) {
        cmd_error("cat", "view '%s' has %llu rows, no row %llu", view,
                  (unsigned long long)n, (unsigned long long)first);
        return EXIT_ERROR;
    }
    return EXIT_OK;
}

int cmd_cat(int argc, char **argv)
{
    struct cat_mode m = {0, -1};
    const char *at = NULL, *view = NULL;
    const cmd_opt opts[] = {
        CMD_OPT_CALL_FLAG_WITH("raw", 0, opt_mode, &m),
        CMD_OPT_CALL_FLAG_WITH("npy", 0, opt_mode, &m),
        CMD_OPT_CALL_FLAG_WITH("json", 0, opt_mode, &m),
        CMD_OPT_CALL_FLAG_WITH("png", 0, opt_mode, &m),
        CMD_OPT_CALL_WITH("frame", 0, opt_mode, &m),
        CMD_OPT_STRING("at", 0, &at),
        CMD_OPT_STRING("view", 0, &view),
        CMD_OPT_HELP(),
        CMD_OPT_END(),
    };
    int code = cmd_parse_options("cat", opts, usage_text, NULL, argc, argv);
    if (code != CMD_OPTS_DONE)
        return code;
    int mode = m.mode, frame = m.frame;
    if (argc - optind != 3) {
        cmd_error("cat", "expected DATASET TENSOR INDEX");
        return cmd_usage(usage_text, false);
    }
    if (cmd_check_url("cat", argv[optind]))
        return EXIT_USAGE;
    const char *url = argv[optind], *tname = argv[optind + 1],
               *istr = argv[optind + 2];
    uint64_t first, end;
    bool range;
    if (read_index(istr, &first, &end, &range))
        return EXIT_USAGE;
    if (range && (mode == 'n' || mode == 'p')) {
        cmd_error("cat", "a range of samples is written with the summary, "
                  "--raw or --json, not --%s", mode == 'n' ? "npy" : "png");
        return cmd_usage(usage_text, false);
    }
    dlk_dataset *ds;
    int ti = -1;
    dlk_tensor_info t;
    code = open_tensor(url, at, tname, &ds, &ti, &t);
    if (code != EXIT_OK)
        return code;
    dlk_error err;
    uint64_t *rows = NULL, n = t.samples;
    if (view && dlk_view_rows(ds, view, &rows, &n, &err)) {
        code = cmd_fail("cat", &err);
        dlk_dataset_free(ds);
        return code;
    }
    code = check_span(view, &t, n, range, first, &end);
    if (code == EXIT_OK && !range) /* past the end: the read says how many */
        code = cat_one(ds, (size_t)ti, &t, rows ? rows[first] : first, mode,
                       frame);
    for (uint64_t i = first; range && code == EXIT_OK && i < end; i++)
        code = cat_one(ds, (size_t)ti, &t, rows ? rows[i] : i, mode, frame);
    free(rows);
    dlk_dataset_free(ds);
    return cmd_finish("cat", code);
}
