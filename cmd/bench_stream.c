/* bench_stream.c - dlk bench-stream: stream a dataset the way a training
 * job would and report what the GPU (or CPU) would see.  This file parses
 * the command line; bench_stream_run.c streams, bench_stream_report.c and
 * report_html.c say what it measured. */
#include "bench_stream.h"
#include "options.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: dlk bench-stream DATASET [options]\n"
    "       dlk bench-stream --mix URL=W[,URL=W...] [options]\n"
    "\n"
    "  --mix URL=W,...    stream several datasets as one, each batch drawn\n"
    "                     from them in the weights' proportions (the\n"
    "                     flag may be repeated); the epoch is every\n"
    "                     source's rows unless --epoch-size\n"
    "  --epoch-size N     with --mix, the samples an epoch deals to all\n"
    "                     ranks (default: every source's rows)\n"
    "  --device DEV       cuda:N, cpu or auto (default auto: cuda:LOCAL_RANK,\n"
    "                     modulo the GPUs it sees, when a GPU is there, else\n"
    "                     cpu with a notice)\n"
    "  --batch-size B     samples per batch (default 256)\n"
    "  --workers N        I/O threads (default: cores, at most 32; ranks\n"
    "                     on one host share them)\n"
    "  --prefetch P       chunks read ahead of the shuffle window (default 2x)\n"
    "  --window K         shuffle window, in chunks' worth of data (default\n"
    "                     8); chunks with part checksums are read in spans\n"
    "                     of parts, so the window holds parts of many\n"
    "  --whole-chunks     read every chunk whole, even with part checksums\n"
    "  --span-parts N     parts a span holds (default 4)\n"
    "  --shuffle          shuffle (else dataset order)\n"
    "  --seed S           shuffle seed (default 0)\n"
    "  --epochs E         epochs to stream (default 1)\n"
    "  --step-ms T        a simulated training step of T ms per batch\n"
    "  --rank R --world W this process's rank and the world size (default\n"
    "                     from RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*)\n"
    "  --tensors A,B      load only these tensors (default all)\n"
    "  --memory BYTES     budget for chunk buffers (e.g. 512M, 4GiB); at\n"
    "                     most half the memory, which ranks on one host\n"
    "                     share\n"
    "  --pin-cache BYTES  on a GPU, keep up to BYTES (or auto: that half\n"
    "                     less the budget) of a local dataset's page cache\n"
    "                     mapped and pinned across epochs: no copy, but\n"
    "                     counted in RSS (default 0: read into the pinned\n"
    "                     buffers)\n"
    "  --cache-dir DIR    keep the chunks of a remote dataset in DIR, shared\n"
    "                     by the ranks of a node: fetched once, read from\n"
    "                     there in later epochs and runs (default\n"
    "                     $DLK_CACHE_DIR; '' for none)\n"
    "  --augment SPEC     augment the image (or video) tensor as each batch\n"
    "                     is gathered (imagenet-train, imagenet-eval, or\n"
    "                     fields: dlk-bench-stream(1)); the gathered bytes\n"
    "                     are not checked then\n"
    "  --cache-limit BYTES  at most BYTES in DIR, least recently used\n"
    "                     chunks evicted (default $DLK_CACHE_LIMIT, else the\n"
    "                     file system's free space less an eighth)\n"
    "  --no-check         skip the CPU-side checksum of every batch\n"
    "  --no-verify        skip the check of each chunk's stored checksum on\n"
    "                     read (on a GPU, the parts are checked there after\n"
    "                     their copy; else a CPU pass over every byte)\n"
    "  --at REF           stream a commit (main, main~N, an id or prefix)\n"
    "  --view NAME        stream only the rows of a view (dlk query\n"
    "                     --save-view); of chunks with part checksums\n"
    "                     only the parts holding its rows are read\n"
    "  --source-baseline URL   also stream the raw files there (s3://bucket/\n"
    "                     prefix or a directory of JPEG/PNG) the way teams\n"
    "                     train today: one GET and one decode per sample, same\n"
    "                     batch size and workers; print both side by side\n"
    "  --baseline-seconds S    time limit of the baseline (default 20)\n"
    "  --s3-price G,E     dollars per 1000 GETs and per GB read, for the cost\n"
    "                     of an epoch (default 0.0004,0.09: AWS S3 Standard,\n"
    "                     us-east-1, to the internet; 0 egress in-region)\n"
    "  --on-bad fail|skip a chunk (or span of parts) that cannot be read\n"
    "                     whole and verified: fail the run (default), or\n"
    "                     give its rows' batch positions other rows of the\n"
    "                     batch (of a span, only a part whose checksum\n"
    "                     fails), with a warning naming the chunk and parts\n"
    "  --max-bad N        with skip, the most rows replaced in an epoch on\n"
    "                     this rank before the run fails (default 0.1% of\n"
    "                     them, at least the largest chunk's)\n"
    "  --order-out FILE   write the dataset rows of each batch, one line a\n"
    "                     batch (padding left out), to FILE\n"
    "  --json             print the report as JSON\n"
    "  --report FILE      also write the report as a page to look at: one\n"
    "                     self-contained HTML file (timeline of the batches,\n"
    "                     rates, stages, memory, requests), or its data as\n"
    "                     JSON when FILE ends in .json (for dlk bench-report\n"
    "                     to draw several ranks); %r in FILE is the rank,\n"
    "                     and ranks above 0 of a world without %r add\n"
    "                     .rankR before the extension\n"
    "  -h, --help         this text\n"
    "\n"
    "Examples:\n"
    "  dlk bench-stream pets --shuffle --epochs 2\n"
    "  dlk bench-stream s3://lake/pets --device cpu --json --report pets.html\n";

/* --pin-cache BYTES or auto */
static int pin_cache_opt(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)opt;
    struct bench_opts *o = ctx;
    if (strcmp(arg, "auto") == 0) {
        o->lo.pin_cache = DLK_PIN_CACHE_AUTO;
        return 0;
    }
    uint64_t v;
    if (cmd_read_size("bench-stream", cmd_option_name(), arg, 0, 1ull << 40,
                      &v))
        return EXIT_USAGE;
    o->lo.pin_cache = v;
    return 0;
}

/* --on-bad fail|skip */
static int on_bad_opt(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)opt;
    struct bench_opts *o = ctx;
    if (strcmp(arg, "fail") == 0 || strcmp(arg, "skip") == 0) {
        o->lo.on_bad = arg[0] == 's' ? DLK_ON_BAD_SKIP : DLK_ON_BAD_FAIL;
        return 0;
    }
    cmd_error("bench-stream", "%s: '%s' is neither fail nor skip",
              cmd_option_name(), arg);
    return EXIT_USAGE;
}

/* A read whose rows were replaced: one line each (the library says what
 * failed, the command prints it). */
static void on_bad_read(void *ud, const dlk_bad_read *b)
{
    (void)ud;
    char parts[48] = "";
    if (b->part1 == b->part0 + 1)
        snprintf(parts, sizeof parts, " part %u", b->part0);
    else if (b->part1)
        snprintf(parts, sizeof parts, " parts %u-%u", b->part0,
                 b->part1 - 1);
    fprintf(stderr, "dlk bench-stream: warning: epoch %llu: rows %llu-%llu "
            "of '%s'%s replaced: %s\n", (unsigned long long)b->epoch,
            (unsigned long long)b->first_row,
            (unsigned long long)(b->first_row + b->rows - 1), b->object,
            parts, b->why);
}

/* --s3-price G,E: two decimal numbers, each read as a --s3-price value */
static int s3_price_opt(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)opt;
    struct bench_opts *o = ctx;
    const char *comma = strchr(arg, ',');
    char get[64];
    if (!comma || (size_t)(comma - arg) >= sizeof get) {
        cmd_error("bench-stream", "%s: '%s' is not G,E (dollars per 1000 "
                  "GETs and per GB, e.g. 0.0004,0.09)", cmd_option_name(),
                  arg);
        return EXIT_USAGE;
    }
    memcpy(get, arg, (size_t)(comma - arg));
    get[comma - arg] = '\0';
    if (cmd_read_float("bench-stream", cmd_option_name(), get, 0, false, 1e6,
                       &o->price_get) ||
        cmd_read_float("bench-stream", cmd_option_name(), comma + 1, 0, false,
                       1e6, &o->price_gb))
        return EXIT_USAGE;
    o->price_given = true;
    return 0;
}

/* The chunk cache's defaults from DLK_CACHE_DIR and DLK_CACHE_LIMIT
 * (the flags override them): 0, or EXIT_USAGE for a bad limit. */
static int cache_env(dlk_loader_opts *lo)
{
    const char *dir = getenv("DLK_CACHE_DIR");
    const char *lim = getenv("DLK_CACHE_LIMIT");
    lo->cache_dir = dir && *dir ? dir : NULL;
    if (lim && *lim &&
        cmd_read_size("bench-stream", "DLK_CACHE_LIMIT", lim, 1, 1ull << 50,
                      &lo->cache_limit))
        return EXIT_USAGE;
    return 0;
}

/* --mix URL=W[,URL=W...]: the weight after each URL's last '=' */
static int mix_opt(const cmd_opt *opt, const char *arg, void *ctx)
{
    (void)opt;
    struct bench_opts *o = ctx;
    char *text = strdup(arg);
    if (!text || o->nmix_text == BENCH_MIX_MAX) {
        free(text);
        cmd_error("bench-stream", "%s: too many", cmd_option_name());
        return EXIT_USAGE;
    }
    o->mix_text[o->nmix_text++] = text;
    for (char *tok = strtok(text, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strrchr(tok, '=');
        if (!eq || eq == tok) {
            cmd_error("bench-stream", "%s: '%s' is not URL=WEIGHT (e.g. "
                      "s3://lake/a=0.7)", cmd_option_name(), tok);
            return EXIT_USAGE;
        }
        *eq = '\0';
        if (o->nmix == BENCH_MIX_MAX) {
            cmd_error("bench-stream", "%s: more than %d sources",
                      cmd_option_name(), BENCH_MIX_MAX);
            return EXIT_USAGE;
        }
        if (cmd_read_float("bench-stream", cmd_option_name(), eq + 1, 0,
                           false, 1e12, &o->mix_w[o->nmix]) ||
            cmd_check_url("bench-stream", tok))
            return EXIT_USAGE;
        o->mix_url[o->nmix++] = tok;
    }
    return 0;
}

/* The settings before the flags and DLK_CACHE_*: 0, or EXIT_USAGE for a
 * bad DLK_CACHE_LIMIT. */
static int bench_defaults(struct bench_opts *o)
{
    memset(o, 0, sizeof *o);
    dlk_loader_opts_init(&o->lo);
    o->lo.check = 1;
    o->device = "auto";
    o->baseline_s = 20;
    /* AWS S3 Standard in us-east-1: GET $0.0004 per 1,000 requests, data
     * transfer out to the internet $0.09 per GB (the first 10 TB a month) */
    o->price_get = 0.0004;
    o->price_gb = 0.09;
    o->epochs = 1;
    o->rank = -1;
    o->world = -1;
    return cache_env(&o->lo);
}

/* --tensors A,B,...: the names, cut from a copy, for the loader. */
static void tensor_names(struct bench_opts *o)
{
    o->tlist = o->tensors ? strdup(o->tensors) : NULL;
    if (o->tlist) {
        size_t n = 0;
        for (char *tok = strtok(o->tlist, ","); tok && n < 256;
             tok = strtok(NULL, ","))
            o->names[n++] = tok;
        o->lo.tensors = (const char *const *)o->names;
        o->lo.ntensors = n;
    }
}

/* The operands: one DATASET, or none beside --mix, and the flags that
 * go with one or the other. */
static int check_operands(int argc, char **argv, const struct bench_opts *o)
{
    if (o->nmix && argc - optind != 0) {
        cmd_error("bench-stream", "--mix names the datasets: no DATASET "
                  "beside it");
        return cmd_usage(usage_text, false);
    }
    if (o->nmix && (o->lo.view || o->at)) {
        cmd_error("bench-stream", "--view and --at take one dataset, not "
                  "a --mix");
        return EXIT_USAGE;
    }
    if (!o->nmix && o->lo.epoch_size) {
        cmd_error("bench-stream", "--epoch-size is the epoch of a --mix");
        return EXIT_USAGE;
    }
    if (!o->nmix && argc - optind != 1) {
        cmd_error("bench-stream", "expected one DATASET");
        return cmd_usage(usage_text, false);
    }
    if ((!o->nmix && cmd_check_url("bench-stream", argv[optind])) ||
        cmd_check_url("bench-stream", o->baseline))
        return EXIT_USAGE;
    return 0;
}

/* Rank and world from the flags, else from the launcher (*launch), into
 * the loader's options. */
static int rank_and_world(struct bench_opts *o, dlk_launch *launch)
{
    dlk_error lerr;
    /* a launcher's world without a rank is an error only where --rank
     * does not give it */
    if (dlk_launch_env(launch, &lerr) &&
        (launch->rank != DLK_LAUNCH_NO_RANK || o->rank < 0)) {
        cmd_error("bench-stream", "%s", lerr.msg);
        return EXIT_USAGE;
    }
    if (o->rank < 0)
        o->rank = launch->rank;
    if (o->world < 0)
        o->world = launch->world_size;
    if (o->world < 1 || o->rank < 0 || o->rank >= o->world) {
        cmd_error("bench-stream", "rank %ld is not in a world of %ld", o->rank,
                  o->world);
        return EXIT_USAGE;
    }
    o->lo.rank = (uint32_t)o->rank;
    o->lo.world_size = (uint32_t)o->world;
    o->lo.local_world_size = launch->local_world_size;
    o->lo.epochs = (uint64_t)o->epochs; /* nothing read ahead after the last */
    return 0;
}

/* --device auto: the launcher's GPU of this rank, else the CPU (said on
 * stderr). */
static void pick_device(struct bench_opts *o, const dlk_launch *launch)
{
    if (strcmp(o->device, "auto") == 0) {
        char why[160];
        int ngpus = dlk_cuda_available(why, sizeof why);
        if (ngpus > 0) {
            snprintf(o->devbuf, sizeof o->devbuf, "cuda:%d",
                     dlk_launch_gpu(launch, ngpus));
            o->device = o->devbuf;
        } else {
            fprintf(stderr, "dlk bench-stream: no usable GPU (%s); running "
                    "on the cpu\n", why);
            o->device = "cpu";
        }
    }
}

/* Fill o from the command line: -1 to go on, else the exit code. */
static int bench_parse(int argc, char **argv, struct bench_opts *o)
{
    if (bench_defaults(o))
        return EXIT_USAGE;
    /* the limits are the loader's (dlk_loader_open), checked here so that
     * a bad value is named before the dataset is opened */
    const cmd_opt opts[] = {
        CMD_OPT_STRING("device", 0, &o->device),
        CMD_OPT_UINT("batch-size", 0, &o->lo.batch_size, 1, 1u << 24),
        CMD_OPT_UINT("workers", 0, &o->lo.io_threads, 1, 256),
        CMD_OPT_UINT("prefetch", 0, &o->lo.prefetch_chunks, 1, 65536),
        CMD_OPT_UINT("window", 0, &o->lo.window_chunks, 1, 65536),
        CMD_OPT_FLAG("shuffle", 0, &o->lo.shuffle),
        CMD_OPT_UINT("seed", 0, &o->lo.seed, 0, UINT64_MAX),
        CMD_OPT_UINT("epochs", 0, &o->epochs, 1, 1000000),
        CMD_OPT_FLOAT("step-ms", 0, &o->step_ms, 0, 60000),
        CMD_OPT_UINT("rank", 0, &o->rank, 0, UINT32_MAX - 1),
        CMD_OPT_UINT("world", 0, &o->world, 1, UINT32_MAX),
        CMD_OPT_STRING("tensors", 0, &o->tensors),
        CMD_OPT_SIZE("memory", 0, &o->lo.memory_limit, 1, 1ull << 40),
        CMD_OPT_CALL("pin-cache", 0, pin_cache_opt),
        CMD_OPT_STRING("cache-dir", 0, &o->lo.cache_dir),
        CMD_OPT_STRING("augment", 0, &o->lo.augment),
        CMD_OPT_SIZE("cache-limit", 0, &o->lo.cache_limit, 1, 1ull << 50),
        CMD_OPT_SET("no-check", 0, &o->lo.check, 0),
        CMD_OPT_FLAG("no-verify", 0, &o->lo.no_verify),
        CMD_OPT_FLAG("whole-chunks", 0, &o->lo.whole_chunks),
        CMD_OPT_UINT("span-parts", 0, &o->lo.span_parts, 1, 65536),
        CMD_OPT_STRING("at", 0, &o->at),
        CMD_OPT_STRING("view", 0, &o->lo.view),
        CMD_OPT_STRING("source-baseline", 0, &o->baseline),
        CMD_OPT_FLOAT_ABOVE("baseline-seconds", 0, &o->baseline_s, 0, 86400),
        CMD_OPT_FLAG("json", 0, &o->json),
        CMD_OPT_STRING("report", 0, &o->report),
        CMD_OPT_STRING("order-out", 0, &o->order_out),
        CMD_OPT_CALL("on-bad", 0, on_bad_opt),
        CMD_OPT_UINT("max-bad", 0, &o->lo.max_bad, 1, UINT64_MAX),
        CMD_OPT_CALL("s3-price", 0, s3_price_opt),
        CMD_OPT_CALL("mix", 0, mix_opt),
        CMD_OPT_UINT("epoch-size", 0, &o->lo.epoch_size, 1, UINT64_MAX),
        CMD_OPT_HELP(),
        CMD_OPT_END(),
    };
    int code = cmd_parse_options("bench-stream", opts, usage_text, o, argc,
                                 argv);
    if (code != CMD_OPTS_DONE)
        return code;
    /* check folds the stored bytes, which an augmented batch no longer
     * holds */
    if (o->lo.augment)
        o->lo.check = 0;
    if ((code = check_operands(argc, argv, o)))
        return code;
    dlk_launch launch;
    if ((code = rank_and_world(o, &launch)))
        return code;
    pick_device(o, &launch);
    o->lo.device = o->device;
    o->lo.on_bad_read = on_bad_read;
    tensor_names(o);
    /* debugging knobs of the loader, documented in dlk(1) */
    o->lo.no_map = getenv("DLK_NO_MMAP") != NULL;
    o->lo.cuda_trace = getenv("DLK_CUDA_TRACE");
    o->dataset = o->nmix ? o->mix_url[0] : argv[optind];
    o->argc = argc;
    o->argv = argv;
    return -1;

}

static void bench_opts_free(struct bench_opts *o)
{
    free(o->tlist);
    for (size_t i = 0; i < o->nmix_text; i++)
        free(o->mix_text[i]);
}

int cmd_bench_stream(int argc, char **argv)
{
    struct bench_opts o;
    int code = bench_parse(argc, argv, &o);
    if (code >= 0) {
        bench_opts_free(&o);
        return code;
    }
    /* the ranks of a host share its terminal: each rank's report leaves
     * in one write, at the end, rather than line by line among the
     * others' (a text report is a few KiB) */
    static char outbuf[1 << 16]; /* glibc takes a size only with a buffer */
    if (o.world > 1)
        setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    if ((code = bench_open_report(&o)) != EXIT_OK) {
        free(o.report_path);
        bench_opts_free(&o);
        return cmd_finish("bench-stream", code);
    }
    struct bench_result r;
    code = bench_run(&o, &r);
    if (code == EXIT_OK) {
        json_t *report = bench_json(&o, &r);
        if (!report) {
            cmd_error("bench-stream", "out of memory");
            code = EXIT_ERROR;
        } else {
            if (o.json)
                cmd_json_print(report, JSON_PRESERVE_ORDER | JSON_INDENT(2));
            else
                bench_print_text(&o, &r);
            if (o.report)
                code = bench_write_report(&o, report);
            json_decref(report);
        }
    }
    /* after the report, so that it is the last thing printed: a warning
     * and the checksum verdict */
    if (code == EXIT_OK)
        code = bench_verdict(&o, &r);
    bench_result_free(&r);
    if (o.report_f) { /* the run failed: no empty page left behind */
        fclose(o.report_f);
        unlink(o.report_path);
    }
    free(o.report_path);
    bench_opts_free(&o);
    return cmd_finish("bench-stream", code);
}
