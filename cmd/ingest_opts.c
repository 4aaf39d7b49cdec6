/* ingest_opts.c - options, progress line and report shared by
 * `dlk ingest` and `dlk create DATASET from-s3|from-dir`. */
#include "ingest_opts.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char ingest_opts_usage[] =
    "Sources:\n"
    "  from-s3 s3://BUCKET/PREFIX   every object below the prefix\n"
    "  from-dir DIR                 every file below DIR (a tree of only\n"
    "                               .npy files is read as before)\n"
    "Objects with one stem form a row: 0001.jpg (or .png, .mp4 ...) with\n"
    "0001.cls (class), 0001.txt (text), 0001.json (numeric fields).\n"
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
    "  --on-error MODE      skip (default: report and go on) or fail\n"
    "  --order ORDER        shuffled (default: rows in a seeded permutation,\n"
    "                       so every chunk holds a sample of the whole\n"
    "                       source) or sorted (by key, as listed)\n"
    "  --order-seed N       the permutation's seed (default 0)\n"
    "  --unordered          append rows as decoded, not in order\n"
    "  -j, --jobs N         decode threads (default: the cores it may use)\n"
    "  --fetch N            rows fetched ahead (default 256 from S3, 16 from a dir)\n"
    "  --shard I/N          this process takes share I of N\n"
    "  --checkpoint SEC     publish progress every SEC seconds (default 30)\n"
    "  --no-resume          ingest everything again, ignoring earlier runs\n"
    "  --json               print a summary as JSON\n"
    "  -q, --quiet          print nothing but errors\n";

static void on_progress(void *ud, const dlk_ingest_progress *p)
{
    ingest_cli *c = ud;
    double now = cmd_now_s();
    bool last = p->rows_done == p->rows_total;
    if (!c->tty || c->quiet || c->json || (now - c->last_draw < 0.1 && !last))
        return;
    c->last_draw = now;
    double s = p->seconds > 1e-6 ? p->seconds : 1e-6;
    double rate = (double)p->rows_done / s;
    double eta = rate > 0 ? (double)(p->rows_total - p->rows_done) / rate : 0;
    fprintf(stderr, "\r\033[K%llu/%llu rows  %.0f obj/s  in %.1f MB/s  out "
            "%.1f MB/s  ETA %dm%02ds", (unsigned long long)p->rows_done,
            (unsigned long long)p->rows_total, rate,
            (double)p->bytes_in / s / 1e6, (double)p->bytes_out / s / 1e6,
            (int)(eta / 60), (int)fmod(eta, 60));
    if (last)
        fputc('\n', stderr);
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
        if (c->tty && !c->quiet)
            fputs("\r\033[K", stderr);
        fprintf(stderr, "dlk: skipped '%s': %s\n", key ? key : "",
                reason ? reason : "");
    }
}

/* Ingest's threads allocate blocks of a few hundred KB by the thousand
 * (a slot's file, a sample).  glibc maps the larger ones and unmaps each
 * when freed; every munmap holds the address-space lock and interrupts
 * every core that ran a thread of the process.  At the end of an ingest
 * that freed hundreds at once: 17-83 ms from the last row to the end on
 * a 16-core host, 13-18 ms with blocks under 32 MiB from the arenas
 * (session 9).  Freed blocks are reused while the ingest runs and the
 * process exits after it: peak RSS stayed the same (within 5%).  A
 * user's GLIBC_TUNABLES for malloc are left as set. */
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
    c->tty = isatty(2);
    c->errors = NULL; /* made on the first error: nothing to free on misuse */
    c->o.progress = on_progress;
    c->o.on_bad = on_bad;
    c->o.ud = c;
}

void ingest_cli_free(ingest_cli *c)
{
    json_decref(c->errors);
}

static int bad(const char *cmd, const char *opt, const char *arg,
               const char *want)
{
    cmd_error(cmd, "bad %s '%s' (%s)", opt, arg, want);
    return EXIT_USAGE;
}

static bool parse_int(const char *s, long long lo, long long hi,
                      long long *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0) || !isfinite(v))
        return false;
    *out = v;
    return true;
}

int ingest_cli_opt(ingest_cli *c, const char *cmd, int code, const char *arg)
{
    dlk_ingest_opts *o = &c->o;
    long long v;
    switch (code) {
    case IO_RESIZE: {
        int w, h, n;
        if (sscanf(arg, "%dx%d%n", &w, &h, &n) != 2 || arg[n] || w < 1 ||
            h < 1 || w > 65535 || h > 65535)
            return bad(cmd, "--resize", arg, "WxH, e.g. 224x224");
        o->width = w;
        o->height = h;
        return 0;
    }
    case IO_FIT:
        if (!strcmp(arg, "stretch")) o->fit = 0;
        else if (!strcmp(arg, "crop")) o->fit = 1;
        else if (!strcmp(arg, "pad")) o->fit = 2;
        else return bad(cmd, "--fit", arg, "stretch, crop or pad");
        return 0;
    case IO_LAYOUT:
        if (!strcmp(arg, "hwc")) o->layout = 1;
        else if (!strcmp(arg, "chw")) o->layout = 2;
        else return bad(cmd, "--layout", arg, "hwc or chw");
        return 0;
    case IO_CHANNELS:
        if (!parse_int(arg, 1, 4, &v) || v == 2)
            return bad(cmd, "--channels", arg, "1, 3 or 4");
        o->channels = (int)v;
        return 0;
    case IO_MAX_PIXELS:
        if (!parse_int(arg, 1, 1LL << 40, &v))
            return bad(cmd, "--max-pixels", arg, "a positive count");
        o->max_pixels = (uint64_t)v;
        return 0;
    case IO_FRAMES:
        if (!parse_int(arg, 1, 4096, &v))
            return bad(cmd, "--frames", arg, "1 to 4096");
        o->frames = (int)v;
        return 0;
    case IO_FPS:
        if (!parse_double(arg, &o->fps) || o->fps <= 0)
            return bad(cmd, "--fps", arg, "a positive rate");
        return 0;
    case IO_CLIP:
        if (!parse_double(arg, &o->clip_seconds) || o->clip_seconds <= 0)
            return bad(cmd, "--clip-seconds", arg, "a positive length");
        return 0;
    case IO_LABELS:
        o->labels = arg;
        return 0;
    case IO_ON_ERROR:
        if (!strcmp(arg, "skip")) o->on_error = DLK_ON_ERROR_SKIP;
        else if (!strcmp(arg, "fail")) o->on_error = DLK_ON_ERROR_FAIL;
        else return bad(cmd, "--on-error", arg, "skip or fail");
        return 0;
    case IO_UNORDERED:
        o->unordered = 1;
        return 0;
    case IO_ORDER:
        if (!strcmp(arg, "shuffled")) o->order = DLK_ORDER_SHUFFLED;
        else if (!strcmp(arg, "sorted")) o->order = DLK_ORDER_SORTED;
        else return bad(cmd, "--order", arg, "shuffled or sorted");
        return 0;
    case IO_ORDER_SEED: {
        char *end;
        errno = 0;
        unsigned long long seed = strtoull(arg, &end, 10);
        if (end == arg || *end || errno || *arg == '-' || seed > INT64_MAX)
            return bad(cmd, "--order-seed", arg, "a whole number from 0 to "
                       "9223372036854775807");
        o->order_seed = seed;
        return 0;
    }
    case IO_JOBS:
        if (!parse_int(arg, 1, 1024, &v))
            return bad(cmd, "--jobs", arg, "1 to 1024");
        o->jobs = (int)v;
        return 0;
    case IO_FETCH:
        if (!parse_int(arg, 1, 1024, &v))
            return bad(cmd, "--fetch", arg, "1 to 1024");
        o->fetchers = (int)v;
        return 0;
    case IO_SHARD: {
        unsigned i, n;
        int len;
        if (sscanf(arg, "%u/%u%n", &i, &n, &len) != 2 || arg[len] || n < 1 ||
            i >= n || n > 100000)
            return bad(cmd, "--shard", arg, "I/N with 0 <= I < N");
        o->shard = i;
        o->nshards = n;
        return 0;
    }
    case IO_CHECKPOINT:
        if (!parse_double(arg, &o->checkpoint_seconds) ||
            o->checkpoint_seconds <= 0)
            return bad(cmd, "--checkpoint", arg, "seconds, more than 0");
        return 0;
    case IO_NO_RESUME:
        o->no_resume = 1;
        return 0;
    case IO_JSON:
        c->json = true;
        return 0;
    case IO_QUIET:
        c->quiet = true;
        return 0;
    }
    cmd_error(cmd, "unknown option");
    return EXIT_USAGE;
}

int ingest_cli_source(ingest_cli *c, const char *cmd, const char *kind,
                      const char *where)
{
    if (strcmp(kind, "from-s3") == 0) {
        if (strncmp(where, "s3://", 5) != 0) {
            cmd_error(cmd, "from-s3 needs an s3://BUCKET/PREFIX url, not "
                      "'%s'", where);
            return EXIT_USAGE;
        }
    } else if (strcmp(kind, "from-dir") == 0) {
        if (strncmp(where, "s3://", 5) == 0) {
            cmd_error(cmd, "from-dir needs a directory; use from-s3 for "
                      "'%s'", where);
            return EXIT_USAGE;
        }
    } else {
        cmd_error(cmd, "unknown source '%s' (from-s3 or from-dir)", kind);
        return EXIT_USAGE;
    }
    c->o.source = where;
    return 0;
}

int ingest_cli_report(ingest_cli *c, const char *cmd, dlk_status rc,
                      const dlk_ingest_result *r, const dlk_error *err)
{
    if (rc)
        return cmd_fail(cmd, err);
    if (c->json) {
        json_t *o = json_pack("{s:I,s:I,s:o,s:I,s:I,s:f,s:{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f},"
                              "s:I,s:I,s:b,s:b,s:i}",
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
        json_object_set_new(o, "order", json_string(
            r->order == DLK_ORDER_SORTED ? "sorted" : "shuffled"));
        json_object_set_new(o, "order_seed",
                            json_integer((json_int_t)r->order_seed));
        json_dumpf(o, stdout, JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(o);
    } else if (!c->quiet) {
        char b1[32], b2[32];
        if (r->already)
            printf("already ingested by an earlier run of this command; "
                   "nothing to do\n");
        else
            printf("ingested %llu rows (%s read, %s of samples) in %.2f s; "
                   "%llu skipped%s%s\n", (unsigned long long)r->ingested,
                   cmd_bytes(r->bytes_in, b1), cmd_bytes(r->bytes_out, b2),
                   r->seconds, (unsigned long long)r->skipped,
                   r->resumed_rows ? "; resumed an interrupted run" : "",
                   r->complete ? ""
                   : "; shard staged, the last shard to finish merges");
    }
    return EXIT_OK;
}
