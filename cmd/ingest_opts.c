/* ingest_opts.c - options, progress line and report shared by
 * `dlk ingest` and `dlk create DATASET from-s3|from-gs|from-dir`. */
#include "ingest_opts.h"
#include "options.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

const char ingest_opts_usage[] =
    "Sources:\n"
    "  from-s3 s3://BUCKET/PREFIX   every object below the prefix\n"
    "  from-gs gs://BUCKET/PREFIX   the same on Google Cloud Storage\n"
    "  from-dir DIR                 every file below DIR (.npy files as\n"
    "                               rows of STEM.TENSOR.npy, or file by file)\n"
    "Objects with one stem form a row: 0001.jpg (or .png, .mp4 ...) with\n"
    "0001.cls (class), 0001.txt (text), 0001.json (numeric fields).\n"
    "A sidecar kind is inferred as a tensor when most rows have one; rows\n"
    "without an image or video, READMEs, dotfiles, _SUCCESS and the like\n"
    "are not samples: reported, not ingested.\n"
    "\n"
    "  --resize WxH         final image size (default: each its own)\n"
    "  --fit MODE           stretch (default), crop or pad\n"
    "  --layout L           hwc (default) or chw\n"
    "  --channels N         1, 3 (default) or 4\n"
    "  --max-pixels N       refuse larger sources (default 268435456)\n"
    "  --frames N           video: N frames sampled uniformly\n"
    "  --fps F              video: sample at F frames per second ...\n"
    "  --clip-seconds S     ... for S seconds from the start\n"
    "  --labels FILE|URL    CSV (key,label,...) or JSONL label manifest\n"
    "  --coco FILE|URL      COCO annotations: each image it names is a row\n"
    "                       with its boxes [N,4], category_ids [N], image_id\n"
    "  --no-metadata        do not read metadata.jsonl / metadata.csv files\n"
    "                       (Hugging Face ImageFolder: their file_name\n"
    "                       column names the rows, other columns feed tensors)\n"
    "  --on-error MODE      skip (default: report and go on) or fail\n"
    "  --order ORDER        shuffled (default: rows in a seeded permutation,\n"
    "                       so every chunk holds a sample of the whole\n"
    "                       source) or sorted (by key, as listed)\n"
    "  --order-seed N       the permutation's seed (default 0)\n"
    "  --unordered          append rows as decoded, not in order\n"
    "  -j, --jobs N         decode threads (default: the cores it may use)\n"
    "  --fetch N            rows fetched ahead (default 256 from S3, 16 from a dir)\n"
    "  --shard I/N          this process takes share I of N; auto[/N]: from\n"
    "                       JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_*\n"
    "  --checkpoint SEC     publish progress every SEC seconds (default 30)\n"
    "  --no-resume          start afresh instead of resuming an interrupted run\n"
    "                       (keys already in the dataset are still skipped)\n"
    "  --strict-classes     a class the dataset lacks is a bad row, not a\n"
    "                       new class appended to its class list\n"
    "  --no-key             a new dataset gets no 'key' and 'key_version'\n"
    "                       tensors (then a rerun picks up no new objects)\n"
    "  --on-changed MODE    an ingested object whose version changed: skip\n"
    "                       (default: report it and go on) or fail (exit 3,\n"
    "                       ingest nothing)\n"
    "  --keys-relative-to URL  the source that the relative keys of rows\n"
    "                       ingested before keys named whole objects came\n"
    "                       from (recorded in the dataset)\n"
    "  --dry-run            list and infer, print what would be ingested and\n"
    "                       what not (and the schema); write nothing\n"
    "  --max-skip F         fail (exit 3, nothing merged) when more than the\n"
    "                       share F of the rows tried is skipped (default\n"
    "                       0.1; 1: never); a run that ingests no row of a\n"
    "                       source that is not empty fails as well\n"
    "  --json               print a summary as JSON\n"
    "  -q, --quiet          print nothing but errors\n";

static void clear_line(ingest_cli *c)
{
    if (c->drawn)
        fputs("\r\033[K", stderr);
    c->drawn = false;
}

/* The progress line on a terminal, redrawn at most four times a second:
 * while listing the keys found, then rows, their rate, MB/s and ETA. */
static void on_progress(void *ud, const dlk_ingest_progress *p)
{
    ingest_cli *c = ud;
    double now = cmd_now_s();
    bool last = !p->listing && p->rows_done == p->rows_total &&
                p->rows_total;
    if (!c->tty || c->quiet || c->json || c->finished ||
        (now - c->last_draw < 0.25 && !last))
        return;
    c->finished = last;
    c->last_draw = now;
    if (p->listing) {
        fprintf(stderr, "\r\033[Klisting: %llu keys found (%.0f s)",
                (unsigned long long)p->keys_listed, p->seconds);
        c->drawn = true;
        return;
    }
    double s = p->seconds > 1e-6 ? p->seconds : 1e-6;
    double rate = (double)p->rows_done / s;
    double eta = rate > 0 ? (double)(p->rows_total - p->rows_done) / rate : 0;
    fprintf(stderr, "\r\033[K%llu/%llu rows  %.0f rows/s  in %.1f MB/s  "
            "out %.1f MB/s  ETA ", (unsigned long long)p->rows_done,
            (unsigned long long)p->rows_total, rate,
            (double)p->bytes_in / s / 1e6, (double)p->bytes_out / s / 1e6);
    if (rate > 0 || last)
        fprintf(stderr, "%dm%02ds", (int)(eta / 60), (int)fmod(eta, 60));
    else
        fputs("-", stderr);
    c->drawn = !last;
    if (last)
        fputc('\n', stderr);
}

/* The signal that stopped the run (0: none), and when (monotonic
 * seconds).  A second one ends the process at once: the handler gives
 * the signal back its default. */
static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t stop_at_s;

/* After a signal the run stops at once where it reads the source (its
 * store is canceled by o.stop), and has this long to write its
 * checkpoint; then every request of every store ends, so that a merge or
 * a checkpoint against a server that hangs ends too. */
#define STOP_GRACE_S 2

static long mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
    return (long)ts.tv_sec;
}

static void on_signal(int sig)
{
    stop_at_s = (sig_atomic_t)mono_s();
    stop_signal = sig;
    signal(sig, SIG_DFL);
}

static int should_stop(void *ud)
{
    (void)ud;
    return stop_signal != 0;
}

static int stores_cancel(void *ud)
{
    (void)ud;
    return stop_signal != 0 && mono_s() - (long)stop_at_s >= STOP_GRACE_S;
}

void ingest_cli_signals(ingest_cli *c)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* the run stops when it polls, not in a call */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    c->o.stop = should_stop;
    cmd_store_cancel(stores_cancel, NULL);
}

static void on_changed(void *ud, const char *key)
{
    ingest_cli *c = ud;
    if (c->json) {
        if (!c->changed)
            c->changed = json_array();
        json_array_append_new(c->changed, json_string(key));
    } else if (!c->quiet) {
        if (c->tty)
            fputs("\r\033[K", stderr);
        fprintf(stderr, "dlk: changed since it was ingested (skipped): "
                "'%s'\n", key);
    }
}

/* A class name appended to the dataset's class list (or, dry run, that
 * would be). */
static void on_new_class(void *ud, const char *tensor, const char *name,
                         uint64_t id)
{
    ingest_cli *c = ud;
    if (!c->classes)
        c->classes = json_array();
    json_array_append_new(c->classes, json_pack("{s:s,s:s,s:I}", "tensor",
                                                tensor, "name", name, "id",
                                                (json_int_t)id));
    if (!c->json && !c->quiet) {
        if (c->tty)
            fputs("\r\033[K", stderr);
        fprintf(stderr, "dlk: %s class '%s' (id %llu) to tensor '%s'\n",
                c->o.dry_run ? "would add" : "added", name,
                (unsigned long long)id, tensor);
    }
}

static void on_bad(void *ud, const char *key, const char *reason)
{
    ingest_cli *c = ud;
    if (c->json) {
        if (!c->errors)
            c->errors = json_array();
        json_array_append_new(c->errors, json_pack("{s:s,s:s}", "key",
                                                   key ? key : "",
                                                   "reason",
                                                   reason ? reason : ""));
    } else {
        clear_line(c);
        fprintf(stderr, "dlk: skipped '%s': %s\n", key ? key : "",
                reason ? reason : "");
    }
}

/* Objects not ingested on stderr: the first few by key, the rest only
 * counted (a tree of 100,000 .xml annotations would drown the output);
 * --json lists more. */
#define UNUSED_PRINTED 20
#define UNUSED_LISTED 1000

static void on_unused(void *ud, const char *key, const char *reason)
{
    ingest_cli *c = ud;
    if (!c->unused_why)
        c->unused_why = json_object();
    if (!c->unused)
        c->unused = json_array();
    json_t *n = json_object_get(c->unused_why, reason);
    json_object_set_new(c->unused_why, reason,
                        json_integer(n ? json_integer_value(n) + 1 : 1));
    size_t listed = json_array_size(c->unused);
    if (listed < UNUSED_LISTED)
        json_array_append_new(c->unused, json_pack("{s:s,s:s}", "key", key,
                                                   "reason", reason));
    if (c->json || c->quiet || listed >= UNUSED_PRINTED)
        return;
    clear_line(c);
    fprintf(stderr, "dlk: not ingested '%s': %s\n", key, reason);
}

static json_t *schema_json(const dlk_tensor_spec *specs, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        const dlk_tensor_spec *t = &specs[i];
        json_t *shape = json_array(), *classes = json_array();
        for (int d = 0; d < t->ndim; d++)
            json_array_append_new(shape, t->shape[d] == DLK_DIM_VARIABLE
                                         ? json_null()
                                         : json_integer(t->shape[d]));
        for (size_t k = 0; k < t->n_class_names; k++)
            json_array_append_new(classes, json_string(t->class_names[k]));
        json_array_append_new(a, json_pack("{s:s,s:s,s:o,s:s,s:s,s:o}",
                                           "name", t->name,
                                           "dtype", dlk_dtype_name(t->dtype),
                                           "shape", shape,
                                           "kind", dlk_kind_name(t->kind),
                                           "codec", dlk_codec_name(t->codec),
                                           "classes", classes));
    }
    return a;
}

/* The schema as lines "  NAME  DTYPE  SHAPE  KIND  CODEC  classes...". */
static void print_schema(FILE *f, const json_t *schema)
{
    size_t i;
    json_t *t;
    fprintf(f, "schema:\n");
    json_array_foreach(schema, i, t) {
        char shape[128] = "scalar";
        size_t d, len = 0;
        json_t *x;
        json_array_foreach(json_object_get(t, "shape"), d, x) {
            if (len >= sizeof shape - 24)
                break;
            if (json_is_null(x))
                len += (size_t)snprintf(shape + len, sizeof shape - len,
                                        "%s?", d ? "x" : "");
            else
                len += (size_t)snprintf(shape + len, sizeof shape - len,
                                        "%s%lld", d ? "x" : "",
                                        (long long)json_integer_value(x));
        }
        char name[256];
        fprintf(f, "  %-16s %-5s %-12s %-12s %s",
                cmd_safe(json_string_value(json_object_get(t, "name")), name,
                         sizeof name),
                json_string_value(json_object_get(t, "dtype")), shape,
                json_string_value(json_object_get(t, "kind")),
                json_string_value(json_object_get(t, "codec")));
        json_t *cl = json_object_get(t, "classes");
        size_t nc = json_array_size(cl);
        for (size_t k = 0; k < nc && k < 8; k++)
            fprintf(f, "%s%s", k ? ", " : "  classes: ",
                    cmd_safe(json_string_value(json_array_get(cl, k)), name,
                             sizeof name));
        if (nc > 8)
            fprintf(f, ", ... (%zu)", nc);
        fputc('\n', f);
    }
}

static void on_schema(void *ud, const dlk_tensor_spec *specs, size_t n)
{
    ingest_cli *c = ud;
    json_decref(c->schema);
    c->schema = schema_json(specs, n);
    /* before the rows on a terminal, so a wrong guess can be stopped */
    if (c->tty && !c->quiet && !c->json && !c->o.dry_run) {
        clear_line(c);
        print_schema(stderr, c->schema);
    }
}

/* Ingest's threads allocate blocks of a few hundred KB by the thousand
 * (a slot's file, a sample).  glibc maps the larger ones and unmaps each
 * when freed; every munmap holds the address-space lock and interrupts
 * every core that ran a thread of the process.  At the end of an ingest
 * that freed hundreds at once: 17-83 ms from the last row to the end on
 * a 16-core host, 13-18 ms with blocks under 32 MiB from the arenas.
 * Freed blocks are reused while the ingest runs and the process exits
 * after it: peak RSS stayed the same (within 5%).  A user's
 * GLIBC_TUNABLES for malloc are left as set. */
static void tune_malloc(void)
{
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, "glibc.malloc."))
        return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void ingest_cli_init(ingest_cli *c)
{
    tune_malloc();
    memset(c, 0, sizeof *c);
    dlk_ingest_opts_init(&c->o);
    c->tty = isatty(2);
    c->errors = NULL; /* made on the first error: nothing to free on misuse */
    c->o.progress = on_progress;
    c->o.on_bad = on_bad;
    c->o.on_schema = on_schema;
    c->o.on_unused = on_unused;
    c->o.on_changed_key = on_changed;
    c->o.on_new_class = on_new_class;
    c->o.ud = c;
}

void ingest_cli_free(ingest_cli *c)
{
    json_decref(c->errors);
    json_decref(c->schema);
    json_decref(c->unused);
    json_decref(c->unused_why);
    json_decref(c->changed);
    json_decref(c->classes);
}

/* The callbacks of the table below: opt->value is the ingest_cli. */

static int bad_word(const char *arg, const char *want)
{
    cmd_error(cmd_option_cmd(), "%s: '%s' is not %s", cmd_option_name(), arg,
              want);
    return EXIT_USAGE;
}

static int opt_resize(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    ingest_cli *c = opt->value;
    const char *x = strchr(arg, 'x');
    char w[32];
    uint64_t wv, hv;
    if (!x || x == arg || (size_t)(x - arg) >= sizeof w)
        return bad_word(arg, "WxH, e.g. 224x224");
    memcpy(w, arg, (size_t)(x - arg));
    w[x - arg] = '\0';
    if (cmd_read_uint(cmd_option_cmd(), cmd_option_name(), w, 1, 65535, &wv) ||
        cmd_read_uint(cmd_option_cmd(), cmd_option_name(), x + 1, 1, 65535, &hv))
        return EXIT_USAGE;
    c->o.width = (int)wv;
    c->o.height = (int)hv;
    return 0;
}

static int opt_fit(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    if (!strcmp(arg, "stretch")) o->fit = DLK_FIT_STRETCH;
    else if (!strcmp(arg, "crop")) o->fit = DLK_FIT_CROP;
    else if (!strcmp(arg, "pad")) o->fit = DLK_FIT_PAD;
    else return bad_word(arg, "stretch, crop or pad");
    return 0;
}

static int opt_layout(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    if (!strcmp(arg, "hwc")) o->layout = DLK_LAYOUT_HWC;
    else if (!strcmp(arg, "chw")) o->layout = DLK_LAYOUT_CHW;
    else return bad_word(arg, "hwc or chw");
    return 0;
}

static int opt_channels(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    uint64_t v;
    if (cmd_read_uint(cmd_option_cmd(), cmd_option_name(), arg, 1, 4, &v))
        return EXIT_USAGE;
    if (v == 2) {
        cmd_error(cmd_option_cmd(), "%s: 2 is not 1, 3 or 4", cmd_option_name());
        return EXIT_USAGE;
    }
    o->channels = (int)v;
    return 0;
}

static int opt_on_error(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    if (!strcmp(arg, "skip")) o->on_error = DLK_ON_ERROR_SKIP;
    else if (!strcmp(arg, "fail")) o->on_error = DLK_ON_ERROR_FAIL;
    else return bad_word(arg, "skip or fail");
    return 0;
}

static int opt_order(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    if (!strcmp(arg, "shuffled")) o->order = DLK_ORDER_SHUFFLED;
    else if (!strcmp(arg, "sorted")) o->order = DLK_ORDER_SORTED;
    else return bad_word(arg, "shuffled or sorted");
    return 0;
}

static int opt_on_changed(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    if (!strcmp(arg, "skip")) o->on_changed = DLK_ON_CHANGED_SKIP;
    else if (!strcmp(arg, "fail")) o->on_changed = DLK_ON_CHANGED_FAIL;
    else return bad_word(arg, "skip or fail");
    return 0;
}

/* An environment variable's whole number, into *v (1: it is set). */
static int env_uint(const char *name, uint64_t *v, int *bad)
{
    const char *cmd = cmd_option_cmd(), *s = getenv(name);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || *s == '-' || x > 100000000) {
        cmd_error(cmd, "--shard auto: %s is '%s', not a whole "
                "number", name, s);
        *bad = 1;
        return 0;
    }
    *v = x;
    return 1;
}

/* --shard auto[/N]: the share from the launcher's environment, as a
 * Kubernetes Indexed Job (JOB_COMPLETION_INDEX; its completions are not
 * in the environment, so N is given) or a Slurm job array
 * (SLURM_ARRAY_TASK_ID from SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT
 * tasks) sets it; into *iv and *nv (nv 0: not given). */
static int shard_auto(const char *rest, uint64_t *iv, uint64_t *nv)
{
    const char *cmd = cmd_option_cmd();
    int bad = 0;
    *nv = 0;
    if (*rest == '/' &&
        cmd_read_uint(cmd, cmd_option_name(), rest + 1, 1, 100000, nv))
        return EXIT_USAGE;
    if (*rest && *rest != '/')
        return bad_word(rest, "auto or auto/N");
    uint64_t k8s, id, lo = 0, hi, count;
    int has_k8s = env_uint("JOB_COMPLETION_INDEX", &k8s, &bad);
    int has_slurm = env_uint("SLURM_ARRAY_TASK_ID", &id, &bad);
    if (bad)
        return EXIT_USAGE;
    if (has_k8s) {
        if (!*nv) {
            cmd_error(cmd, "--shard auto: JOB_COMPLETION_INDEX is "
                    "%llu, but a Kubernetes Job does not tell its completions: "
                    "give them as --shard auto/N",
                    (unsigned long long)k8s);
            return EXIT_USAGE;
        }
        *iv = k8s;
    } else if (has_slurm) {
        /* an array of 10-17 is 8 tasks, task 10 share 0; a step (1-15:2)
         * leaves holes that would be shares nobody takes */
        env_uint("SLURM_ARRAY_TASK_MIN", &lo, &bad);
        int has_hi = env_uint("SLURM_ARRAY_TASK_MAX", &hi, &bad);
        int has_count = env_uint("SLURM_ARRAY_TASK_COUNT", &count, &bad);
        if (bad)
            return EXIT_USAGE;
        if (has_count && has_hi && hi - lo + 1 != count) {
            cmd_error(cmd, "--shard auto: the Slurm array %llu-%llu "
                    "has %llu tasks, not one for each index: give each task "
                    "--shard I/N", (unsigned long long)lo,
                    (unsigned long long)hi, (unsigned long long)count);
            return EXIT_USAGE;
        }
        if (!has_count && !*nv) {
            cmd_error(cmd, "--shard auto: SLURM_ARRAY_TASK_ID is "
                    "set but not SLURM_ARRAY_TASK_COUNT: give --shard "
                    "auto/N");
            return EXIT_USAGE;
        }
        if (has_count && *nv && count != *nv) {
            cmd_error(cmd, "--shard auto/%llu: the Slurm array has "
                    "%llu tasks", (unsigned long long)*nv,
                    (unsigned long long)count);
            return EXIT_USAGE;
        }
        if (!*nv)
            *nv = count;
        if (id < lo) {
            cmd_error(cmd, "--shard auto: SLURM_ARRAY_TASK_ID %llu "
                    "is below SLURM_ARRAY_TASK_MIN %llu",
                    (unsigned long long)id, (unsigned long long)lo);
            return EXIT_USAGE;
        }
        *iv = id - lo;
    } else {
        cmd_error(cmd, "--shard auto: neither JOB_COMPLETION_INDEX "
                "(a Kubernetes Indexed Job) nor SLURM_ARRAY_TASK_ID (a Slurm "
                "job array) is set: give --shard I/N");
        return EXIT_USAGE;
    }
    if (*nv < 1 || *nv > 100000 || *iv >= *nv) {
        cmd_error(cmd, "--shard auto: share %llu of %llu is not "
                "one of 0 to N-1 (N from 1 to 100000)",
                (unsigned long long)*iv, (unsigned long long)*nv);
        return EXIT_USAGE;
    }
    return 0;
}

/* --shard I/N: N from 1 to 100000, I below it; or auto[/N] */
static int opt_shard(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    const char *slash = strchr(arg, '/');
    char i[32];
    uint64_t iv, nv;
    if (!strncmp(arg, "auto", 4)) {
        int rc = shard_auto(arg + 4, &iv, &nv);
        if (rc)
            return rc;
        o->shard = (unsigned)iv;
        o->nshards = (unsigned)nv;
        return 0;
    }
    if (!slash || slash == arg || (size_t)(slash - arg) >= sizeof i)
        return bad_word(arg, "I/N with 0 <= I < N, or auto");
    memcpy(i, arg, (size_t)(slash - arg));
    i[slash - arg] = '\0';
    if (cmd_read_uint(cmd_option_cmd(), cmd_option_name(), slash + 1, 1, 100000,
                      &nv) ||
        cmd_read_uint(cmd_option_cmd(), cmd_option_name(), i, 0, nv - 1, &iv))
        return EXIT_USAGE;
    o->shard = (unsigned)iv;
    o->nshards = (unsigned)nv;
    return 0;
}

static int opt_max_skip(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    double f;
    if (cmd_read_float(cmd_option_cmd(), cmd_option_name(), arg, 0, false, 1, &f))
        return EXIT_USAGE;
    o->max_skip = f > 0 ? f : -1; /* the library's "none" */
    return 0;
}

/* --keys-relative-to URL: the source that an earlier build's relative
 * keys were ingested from */
static int opt_keys_relative_to(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)ctx;
    dlk_ingest_opts *o = &((ingest_cli *)opt->value)->o;
    if (cmd_check_url(cmd_option_cmd(), arg))
        return EXIT_USAGE;
    if (!*arg)
        return bad_word(arg, "the URL or directory those rows were ingested "
                        "from");
    o->keys_relative_to = arg;
    return 0;
}

size_t ingest_cli_options(ingest_cli *c, cmd_opt *out)
{
    dlk_ingest_opts *o = &c->o;
    const cmd_opt rows[INGEST_NOPTIONS] = {
        CMD_OPT_CALL_WITH("resize", 0, opt_resize, c),
        CMD_OPT_CALL_WITH("fit", 0, opt_fit, c),
        CMD_OPT_CALL_WITH("layout", 0, opt_layout, c),
        CMD_OPT_CALL_WITH("channels", 0, opt_channels, c),
        CMD_OPT_UINT("max-pixels", 0, &o->max_pixels, 1, 1ull << 40),
        CMD_OPT_UINT("frames", 0, &o->frames, 1, 4096),
        CMD_OPT_FLOAT_ABOVE("fps", 0, &o->fps, 0, INFINITY),
        CMD_OPT_FLOAT_ABOVE("clip-seconds", 0, &o->clip_seconds, 0, INFINITY),
        CMD_OPT_STRING("labels", 0, &o->labels),
        CMD_OPT_STRING("coco", 0, &o->coco),
        CMD_OPT_CALL_WITH("on-error", 0, opt_on_error, c),
        CMD_OPT_FLAG("unordered", 0, &o->unordered),
        CMD_OPT_CALL_WITH("order", 0, opt_order, c),
        CMD_OPT_UINT("order-seed", 0, &o->order_seed, 0, INT64_MAX),
        CMD_OPT_UINT("jobs", 'j', &o->jobs, 1, 1024),
        CMD_OPT_UINT("fetch", 0, &o->fetchers, 1, 1024),
        CMD_OPT_CALL_WITH("shard", 0, opt_shard, c),
        CMD_OPT_FLOAT_ABOVE("checkpoint", 0, &o->checkpoint_seconds, 0,
                            INFINITY),
        CMD_OPT_FLAG("no-resume", 0, &o->no_resume),
        CMD_OPT_FLAG("dry-run", 0, &o->dry_run),
        CMD_OPT_CALL_WITH("max-skip", 0, opt_max_skip, c),
        CMD_OPT_FLAG("no-key", 0, &o->no_key),
        CMD_OPT_FLAG("strict-classes", 0, &o->strict_classes),
        CMD_OPT_FLAG("no-metadata", 0, &o->no_metadata),
        CMD_OPT_CALL_WITH("on-changed", 0, opt_on_changed, c),
        CMD_OPT_CALL_WITH("keys-relative-to", 0, opt_keys_relative_to, c),
        CMD_OPT_FLAG("json", 0, &c->json),
        CMD_OPT_FLAG("quiet", 'q', &c->quiet),
    };
    memcpy(out, rows, sizeof rows);
    return INGEST_NOPTIONS;
}

int ingest_cli_source(ingest_cli *c, const char *cmd, const char *kind,
                      const char *where)
{
    if (cmd_check_url(cmd, where) || cmd_check_url(cmd, c->o.labels) ||
        cmd_check_url(cmd, c->o.coco))
        return EXIT_USAGE;
    if (c->o.labels && c->o.coco) {
        cmd_error(cmd, "--labels and --coco cannot be combined");
        return EXIT_USAGE;
    }
    if (strcmp(kind, "from-s3") == 0) {
        if (strncmp(where, "gs://", 5) == 0) {
            cmd_error(cmd, "from-s3 needs an s3://BUCKET/PREFIX url; use "
                      "from-gs for '%s'", where);
            return EXIT_USAGE;
        }
        if (strncmp(where, "s3://", 5) != 0) {
            cmd_error(cmd, "from-s3 needs an s3://BUCKET/PREFIX url, not "
                      "'%s'", where);
            return EXIT_USAGE;
        }
    } else if (strcmp(kind, "from-gs") == 0) {
        if (strncmp(where, "gs://", 5) != 0 || !where[5] || where[5] == '/') {
            cmd_error(cmd, "from-gs needs a gs://BUCKET/PREFIX url, not "
                      "'%s'", where);
            return EXIT_USAGE;
        }
    } else if (strcmp(kind, "from-dir") == 0) {
        if (strncasecmp(where, "s3:", 3) == 0 ||
            strncasecmp(where, "gs:", 3) == 0) {
            cmd_error(cmd, "from-dir needs a directory; use from-%.2s for "
                      "'%s'", where[0] == 'g' || where[0] == 'G' ? "gs" : "s3",
                      where);
            return EXIT_USAGE;
        }
    } else {
        static const char *const kinds[] = {"from-s3", "from-gs", "from-dir"};
        const char *near = cmd_nearest(kind, kinds, 3);
        if (near)
            cmd_error(cmd, "unknown source '%s'; did you mean '%s'?", kind,
                      near);
        else
            cmd_error(cmd, "unknown source '%s' (from-s3, from-gs or from-dir)",
                      kind);
        return EXIT_USAGE;
    }
    c->o.source = where;
    return 0;
}

/* "; N objects not ingested" when there are any (not samples, or not
 * read: links, special files; each was reported with why). */
static const char *unused_note(const dlk_ingest_result *r, char note[64])
{
    note[0] = '\0';
    if (r->unused)
        snprintf(note, 64, "; %llu object%s not ingested",
                 (unsigned long long)r->unused, r->unused == 1 ? "" : "s");
    return note;
}

/* "K skipped" for the text summary: every row of the source that was not
 * ingested for a reason other than being there already, bad rows and
 * changed objects alike, with the share of each when both are there. */
static const char *skipped_text(const dlk_ingest_result *r, char out[96])
{
    unsigned long long bad = r->skipped, ch = r->changed;
    if (!ch)
        snprintf(out, 96, "%llu skipped", bad);
    else if (!bad)
        snprintf(out, 96, "%llu skipped (changed since ingested)", ch);
    else
        snprintf(out, 96, "%llu skipped (%llu bad, %llu changed since "
                 "ingested)", bad + ch, bad, ch);
    return out;
}

/* The summary of a run for --json (also of a failed one). */
static json_t *summary_json(ingest_cli *c, const dlk_ingest_result *r)
{
    json_t *o = json_pack("{s:I,s:I,s:o,s:I,s:I,s:f,s:{s:f,s:f,s:f,s:f,s:f,"
                          "s:f,s:f,s:f,s:f},s:I,s:I,s:b,s:b,s:i}",
                          "ingested", (json_int_t)r->ingested,
                          "skipped", (json_int_t)r->skipped,
                          "errors", c->errors ? json_incref(c->errors)
                                              : json_array(),
                          "bytes_in", (json_int_t)r->bytes_in,
                          "bytes_out", (json_int_t)r->bytes_out,
                          "seconds", r->seconds,
                          "stages", "list", r->list_seconds,
                          "rows", r->rows_seconds,
                          "append", r->append_seconds,
                          "finish", r->seconds - r->list_seconds -
                                        r->rows_seconds,
                          "fetch", r->fetch_seconds,
                          "decode", r->decode_seconds,
                          "decode_wait", r->decode_wait_seconds,
                          "decode_lock", r->decode_lock_seconds,
                          "write_wait", r->write_wait_seconds,
                          "ignored", (json_int_t)r->ignored,
                          "resumed", (json_int_t)r->resumed_rows,
                          "complete", r->complete,
                          "already", r->already,
                          "jobs", r->jobs);
    if (!o)
        return NULL;
    json_object_set_new(o, "order", json_string(
        r->order == DLK_ORDER_SORTED ? "sorted" : "shuffled"));
    json_object_set_new(o, "order_seed",
                        json_integer((json_int_t)r->order_seed));
    json_object_set_new(o, "dry_run", json_boolean(c->o.dry_run));
    /* the share this process took (--shard auto says which it found) */
    json_object_set_new(o, "shard", json_pack("{s:I,s:I}", "index",
                        (json_int_t)c->o.shard, "count",
                        (json_int_t)(c->o.nshards ? c->o.nshards : 1)));
    json_object_set_new(o, "planned", json_integer((json_int_t)r->planned));
    json_object_set_new(o, "shard_reads",
                        json_integer((json_int_t)r->shard_reads));
    json_object_set_new(o, "unused", json_integer((json_int_t)r->unused));
    json_object_set_new(o, "unused_reasons", c->unused_why
                        ? json_incref(c->unused_why) : json_object());
    json_object_set_new(o, "unused_objects", c->unused
                        ? json_incref(c->unused) : json_array());
    json_object_set_new(o, "schema", c->schema ? json_incref(c->schema)
                                               : json_array());
    json_object_set_new(o, "classes_added", c->classes
                        ? json_incref(c->classes) : json_array());
    json_object_set_new(o, "keys", json_boolean(r->keyed));
    if (r->keyed) {
        json_object_set_new(o, "new", json_integer((json_int_t)r->new_rows));
        json_object_set_new(o, "present",
                            json_integer((json_int_t)r->present));
        json_object_set_new(o, "changed",
                            json_integer((json_int_t)r->changed));
        json_object_set_new(o, "changed_keys",
                            c->changed ? json_incref(c->changed)
                                       : json_array());
    }
    return o;
}

/* A run that did not finish: the message (stderr) and, with --json, the
 * summary with its "error". */
static int report_failure(ingest_cli *c, const dlk_ingest_result *r,
                          const char *cmd, const char *msg, int code)
{
    clear_line(c);
    cmd_error(cmd, "%s", msg);
    if (c->json) {
        json_t *o = summary_json(c, r);
        json_object_set_new(o, "error", cmd_json_error(msg, code));
        if (r->interrupted) {
            json_object_set_new(o, "interrupted", json_true());
            json_object_set_new(o, "kept", json_integer((json_int_t)r->kept));
        }
        cmd_json_print(o, JSON_PRESERVE_ORDER);
        json_decref(o);
    }
    return code;
}

/* A failed run reported: its message and exit code. */
static int report_error(ingest_cli *c, const char *cmd, dlk_status rc,
                        const dlk_ingest_result *r, const dlk_error *err)
{
    /* create refuses an existing dataset as a usage error: the
     * command names the wrong url or lacks --exist-ok */
    int code = rc == DLK_ECONFLICT ? EXIT_CONFLICT : EXIT_ERROR;
    dlk_dataset *ds;
    dlk_error e2;
    if (rc == DLK_EEXIST && !strcmp(cmd, "create") && c->url &&
        !cmd_dataset_open(c->url, NULL, &ds, &e2)) {
        dlk_dataset_free(ds);
        code = EXIT_USAGE; /* a dataset, not other objects, is there */
    }
    if (stop_signal) /* a request ended by the signal, or after it */
        code = 128 + stop_signal;
    return report_failure(c, r, cmd,
                          err->msg[0] ? err->msg : dlk_strerror(rc), code);
}

/* What a dry run would ingest, and what not. */
static void print_dry_run(const ingest_cli *c, const dlk_ingest_result *r)
{
    char src[1024], sk[96];
    printf("dry run, nothing written: would ingest %llu rows from '%s'"
           "%s; %llu objects not ingested, %s\n",
           (unsigned long long)r->planned,
           cmd_safe_url(c->o.source, src, sizeof src),
           c->o.nshards > 1 ? " (this shard)" : "",
           (unsigned long long)r->unused, skipped_text(r, sk));
    if (c->schema)
        print_schema(stdout, c->schema);
    const char *why;
    json_t *n;
    json_object_foreach(c->unused_why, why, n)
        printf("not ingested: %lld %s\n",
               (long long)json_integer_value(n), why);
}

/* The run's outcome in a line, and a keyed run's source keys. */
static void print_summary(const dlk_ingest_result *r)
{
    char b1[32], b2[32], note[64], sk[96];
    if (r->already)
        printf("already ingested by an earlier run of this command; "
               "nothing to do (this dataset has no 'key' tensor, so "
               "objects added to the source since are not picked up; "
               "--no-resume ingests everything again)\n");
    else if (r->keyed && !r->new_rows && !r->ingested && !r->skipped &&
             !r->resumed_rows)
        printf("nothing new: %llu object%s already ingested; %llu "
               "changed since (skipped)%s\n",
               (unsigned long long)r->present, r->present == 1 ? "" : "s",
               (unsigned long long)r->changed, unused_note(r, note));
    else
        printf("ingested %llu rows (%s read, %s of samples) in %.2f s; "
               "%s%s%s%s\n", (unsigned long long)r->ingested,
               cmd_bytes(r->bytes_in, b1), cmd_bytes(r->bytes_out, b2),
               r->seconds, skipped_text(r, sk),
               unused_note(r, note),
               r->resumed_rows ? "; resumed an interrupted run" : "",
               r->complete ? ""
               : "; shard staged, the last shard to finish merges");
    if (r->keyed && (r->new_rows || r->ingested || r->skipped ||
                     r->resumed_rows))
        printf("source keys: %llu new, %llu already ingested, %llu "
               "changed since (skipped)\n",
               (unsigned long long)r->new_rows,
               (unsigned long long)r->present,
               (unsigned long long)r->changed);
}

int ingest_cli_report(ingest_cli *c, const char *cmd, dlk_status rc,
                      const dlk_ingest_result *r, const dlk_error *err)
{
    if (rc)
        return report_error(c, cmd, rc, r, err);
    if (r->interrupted) {
        char msg[128];
        snprintf(msg, sizeof msg, "interrupted: %llu rows kept; run the same "
                 "command to continue", (unsigned long long)r->kept);
        int sig = stop_signal ? stop_signal : SIGINT;
        clear_line(c);
        if (!c->json) {
            fprintf(stderr, "%s\n", msg);
            return 128 + sig;
        }
        return report_failure(c, r, cmd, msg, 128 + sig);
    }
    clear_line(c);
    if (c->json) {
        json_t *o = summary_json(c, r);
        cmd_json_print(o, JSON_PRESERVE_ORDER);
        json_decref(o);
    } else if (!c->quiet && c->o.dry_run) {
        print_dry_run(c, r);
    } else if (!c->quiet) {
        print_summary(r);
    }
    return EXIT_OK;
}

dlk_status ingest_cli_store(ingest_cli *c, const char *url, dlk_error *err)
{
    /* once one of them is remote, every call gives the same options */
    const char *urls[4] = {url, c->o.source, c->o.labels, c->o.coco};
    for (int i = 0; i < 4; i++) {
        dlk_status rc = cmd_store(urls[i], &c->o.store, err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}
