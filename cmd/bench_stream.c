/* bench_stream.c - dlk bench-stream: stream a dataset the way a training
 * job would and report what the GPU (or CPU) would see.  This file parses
 * the command line; bench_stream_run.c streams, bench_stream_report.c and
 * report_html.c say what it measured. */
#include "bench_stream.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: dlk bench-stream DATASET [options]\n"
    "\n"
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
    "  --no-check         skip the CPU-side checksum of every batch\n"
    "  --no-verify        skip the check of each chunk's stored checksum on\n"
    "                     read (on a GPU, the parts are checked there after\n"
    "                     their copy; else a CPU pass over every byte)\n"
    "  --at REF           stream a commit (main, main~N, an id or prefix)\n"
    "  --view NAME        stream only the rows of a view (dlk query\n"
    "                     --save-view); a chunk or span holding none of\n"
    "                     its rows is not read\n"
    "  --source-baseline URL   also stream the raw files there (s3://bucket/\n"
    "                     prefix or a directory of JPEG/PNG) the way teams\n"
    "                     train today: one GET and one decode per sample, same\n"
    "                     batch size and workers; print both side by side\n"
    "  --baseline-seconds S    time limit of the baseline (default 20)\n"
    "  --s3-price G,E     dollars per 1000 GETs and per GB read, for the cost\n"
    "                     of an epoch (default 0.0004,0.09: AWS S3 Standard,\n"
    "                     us-east-1, to the internet; 0 egress in-region)\n"
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

/* Fill o from the command line: -1 to go on, else the exit code. */
static int bench_parse(int argc, char **argv, struct bench_opts *o)
{
    static const struct option opts[] = {
        {"device", required_argument, 0, 'd'},
        {"batch-size", required_argument, 0, 'b'},
        {"workers", required_argument, 0, 'w'},
        {"prefetch", required_argument, 0, 'p'},
        {"window", required_argument, 0, 'K'},
        {"shuffle", no_argument, 0, 's'},
        {"seed", required_argument, 0, 'S'},
        {"epochs", required_argument, 0, 'e'},
        {"step-ms", required_argument, 0, 't'},
        {"rank", required_argument, 0, 'r'},
        {"world", required_argument, 0, 'W'},
        {"tensors", required_argument, 0, 'T'},
        {"memory", required_argument, 0, 'm'},
        {"pin-cache", required_argument, 0, 'P'},
        {"no-check", no_argument, 0, 'C'},
        {"no-verify", no_argument, 0, 'V'},
        {"whole-chunks", no_argument, 0, 'H'},
        {"span-parts", required_argument, 0, 'U'},
        {"at", required_argument, 0, 'a'},
        {"view", required_argument, 0, 'v'},
        {"source-baseline", required_argument, 0, 'B'},
        {"baseline-seconds", required_argument, 0, 'L'},
        {"json", no_argument, 0, 'j'},
        {"report", required_argument, 0, 'R'},
        {"order-out", required_argument, 0, 'O'},
        {"s3-price", required_argument, 0, 'Q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
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
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'd': o->device = optarg; break;
        case 'b': o->lo.batch_size = (uint32_t)strtoul(optarg, &end, 10); break;
        case 'w': o->lo.io_threads = (uint32_t)strtoul(optarg, &end, 10); break;
        case 'p': o->lo.prefetch_chunks = (uint32_t)strtoul(optarg, &end, 10); break;
        case 'K': o->lo.window_chunks = (uint32_t)strtoul(optarg, &end, 10); break;
        case 's': o->lo.shuffle = 1; break;
        case 'S': o->lo.seed = strtoull(optarg, &end, 10); break;
        case 'e': o->epochs = strtol(optarg, &end, 10); break;
        case 't': o->step_ms = strtod(optarg, &end); break;
        case 'r': o->rank = strtol(optarg, &end, 10); break;
        case 'W': o->world = strtol(optarg, &end, 10); break;
        case 'T': o->tensors = optarg; break;
        case 'm':
            if (!(o->lo.memory_limit = cmd_parse_size(optarg))) {
                cmd_error("bench-stream", "bad --memory '%s'", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'P':
            if (strcmp(optarg, "auto") == 0)
                o->lo.pin_cache = DLK_PIN_CACHE_AUTO;
            else if (strcmp(optarg, "0") != 0 &&
                     !(o->lo.pin_cache = cmd_parse_size(optarg))) {
                cmd_error("bench-stream", "bad --pin-cache '%s' (bytes with "
                          "an optional K, M or G, or auto)", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'C': o->lo.check = 0; break;
        case 'V': o->lo.no_verify = 1; break;
        case 'H': o->lo.whole_chunks = 1; break;
        case 'U': o->lo.span_parts = (uint32_t)strtoul(optarg, &end, 10); break;
        case 'a': o->at = optarg; break;
        case 'v': o->lo.view = optarg; break;
        case 'B': o->baseline = optarg; break;
        case 'L':
            o->baseline_s = strtod(optarg, &end);
            if (!(o->baseline_s > 0 && o->baseline_s <= 86400)) { /* NaN too */
                cmd_error("bench-stream", "--baseline-seconds must be "
                          "above 0 and at most 86400");
                return EXIT_USAGE;
            }
            break;
        case 'j': o->json = true; break;
        case 'R': o->report = optarg; break;
        case 'O': o->order_out = optarg; break;
        case 'Q': {
            int n = 0;
            if (sscanf(optarg, "%lf,%lf%n", &o->price_get, &o->price_gb, &n) != 2 ||
                optarg[n] || !(o->price_get >= 0 && o->price_get < 1e6) ||
                !(o->price_gb >= 0 && o->price_gb < 1e6)) {
                cmd_error("bench-stream", "bad --s3-price '%s' (dollars per "
                          "1000 GETs and per GB, e.g. 0.0004,0.09)", optarg);
                return EXIT_USAGE;
            }
            o->price_given = true;
            break;
        }
        case 'h': return cmd_finish("bench-stream", cmd_usage(usage_text, true));
        default:
            return cmd_bad_option("bench-stream", argv, opts, usage_text);
        }
        if (end && *end) {
            cmd_error("bench-stream", "bad number '%s'", optarg);
            return EXIT_USAGE;
        }
    }
    if (argc - optind != 1) {
        cmd_error("bench-stream", "expected one DATASET");
        return cmd_usage(usage_text, false);
    }
    if (cmd_check_url("bench-stream", argv[optind]) ||
        cmd_check_url("bench-stream", o->baseline))
        return EXIT_USAGE;
    if (o->epochs < 1 || o->epochs > 1000000 || !(o->step_ms >= 0 && o->step_ms <= 60000)) {
        cmd_error("bench-stream", "--epochs must be 1-1000000 and --step-ms "
                  "0-60000");
        return EXIT_USAGE;
    }
    /* rank and world from the flags, else from the launcher */
    dlk_launch launch;
    dlk_error lerr;
    if (dlk_launch_env(&launch, &lerr)) {
        cmd_error("bench-stream", "%s", lerr.msg);
        return EXIT_USAGE;
    }
    if (o->rank < 0)
        o->rank = launch.rank;
    if (o->world < 0)
        o->world = launch.world_size;
    if (o->world < 1 || o->rank < 0 || o->rank >= o->world) {
        cmd_error("bench-stream", "rank %ld is not in a world of %ld", o->rank,
                  o->world);
        return EXIT_USAGE;
    }
    o->lo.rank = (uint32_t)o->rank;
    o->lo.world_size = (uint32_t)o->world;
    o->lo.local_world_size = launch.local_world_size;
    o->lo.epochs = (uint64_t)o->epochs; /* nothing read ahead after the last */
    if (strcmp(o->device, "auto") == 0) {
        char why[160];
        int ngpus = dlk_cuda_available(why, sizeof why);
        if (ngpus > 0) {
            snprintf(o->devbuf, sizeof o->devbuf, "cuda:%d",
                     dlk_launch_gpu(&launch, ngpus));
            o->device = o->devbuf;
        } else {
            fprintf(stderr, "dlk bench-stream: no usable GPU (%s); running "
                    "on the cpu\n", why);
            o->device = "cpu";
        }
    }
    o->lo.device = o->device;
    o->tlist = o->tensors ? strdup(o->tensors) : NULL;
    if (o->tlist) {
        size_t n = 0;
        for (char *tok = strtok(o->tlist, ","); tok && n < 256;
             tok = strtok(NULL, ","))
            o->names[n++] = tok;
        o->lo.tensors = (const char *const *)o->names;
        o->lo.ntensors = n;
    }
    /* debugging knobs of the loader, documented in dlk(1) */
    o->lo.no_map = getenv("DLK_NO_MMAP") != NULL;
    o->lo.cuda_trace = getenv("DLK_CUDA_TRACE");
    o->dataset = argv[optind];
    o->argc = argc;
    o->argv = argv;
    return -1;

}

int cmd_bench_stream(int argc, char **argv)
{
    struct bench_opts o;
    int code = bench_parse(argc, argv, &o);
    if (code >= 0) {
        free(o.tlist);
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
        free(o.tlist);
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
    /* after the report, as before: a warning and the checksum verdict */
    if (code == EXIT_OK)
        code = bench_verdict(&o, &r);
    bench_result_free(&r);
    if (o.report_f) { /* the run failed: no empty page left behind */
        fclose(o.report_f);
        unlink(o.report_path);
    }
    free(o.report_path);
    free(o.tlist);
    return cmd_finish("bench-stream", code);
}
