/* bench_stream.c - dlk bench-stream: stream a dataset the way a training
 * job would and report what the GPU (or CPU) would see. */
#include "cmd.h"
#include "label_mix.h"

#include <getopt.h>
#include <jansson.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: dlk bench-stream DATASET [options]\n"
    "\n"
    "  --device DEV       cuda:N, cpu or auto (default auto: cuda:LOCAL_RANK\n"
    "                     when a GPU is there, else cpu with a notice)\n"
    "  --batch-size B     samples per batch (default 256)\n"
    "  --workers N        I/O threads (default: cores, at most 32)\n"
    "  --prefetch P       chunks read ahead of the shuffle window (default 2x)\n"
    "  --window K         shuffle window in chunks (default 8)\n"
    "  --shuffle          shuffle (else dataset order)\n"
    "  --seed S           shuffle seed (default 0)\n"
    "  --epochs E         epochs to stream (default 1)\n"
    "  --step-ms T        a simulated training step of T ms per batch\n"
    "  --rank R --world W this process's rank and the world size (default\n"
    "                     from RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*)\n"
    "  --tensors A,B      load only these tensors (default all)\n"
    "  --memory BYTES     budget for chunk buffers (suffix K M G)\n"
    "  --pin-cache BYTES  on a GPU, keep up to BYTES (or auto: half the\n"
    "                     memory) of a local dataset's page cache mapped\n"
    "                     and pinned across epochs: no copy, but counted in\n"
    "                     RSS (default 0: read into the pinned buffers)\n"
    "  --no-check         skip the CPU-side checksum of every batch\n"
    "  --no-verify        skip the check of each chunk's stored checksum on\n"
    "                     read (saves a CPU pass over every byte)\n"
    "  --at REF           stream a commit (main, main~N, an id or prefix)\n"
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
    "  -h, --help         this text\n";

/* Above this label-mix ratio batches are dominated by a few classes
 * (a class-sorted dataset read in order scores 3-10). */
#define MIX_WARN 1.5

static unsigned long long parse_bytes(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    }
    return *end ? 0 : v;
}

/* Shuffle quality of one rank's epoch: how far each sample lands from
 * its place in sorted order (relative to a random permutation's n/3), and
 * the correlation of neighbours. */
struct quality {
    double sum_disp, n;
    double sx, sy, sxx, syy, sxy, pairs;
    double prev;
    uint64_t *idx;       /* the epoch's indices, in delivery order */
    size_t nidx, capidx;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Mean |delivered position - sorted position|: indices of a rank need not
 * start at 0, so compare with the rank's own sorted order. */
static double quality_displacement(struct quality *q)
{
    if (q->nidx < 2)
        return 0;
    uint64_t *sorted = malloc(q->nidx * sizeof *sorted);
    if (!sorted)
        return 0;
    memcpy(sorted, q->idx, q->nidx * sizeof *sorted);
    qsort(sorted, q->nidx, sizeof *sorted, cmp_u64);
    double sum = 0;
    for (size_t i = 0; i < q->nidx; i++) {
        uint64_t *p = bsearch(&q->idx[i], sorted, q->nidx, sizeof *sorted,
                              cmp_u64);
        sum += fabs((double)i - (double)(p - sorted));
    }
    free(sorted);
    return sum / q->nidx / (q->nidx / 3.0);
}

static void quality_add(struct quality *q, double pos, double idx)
{
    (void)pos;
    if (q->nidx == q->capidx) {
        size_t cap = q->capidx ? q->capidx * 2 : 4096;
        uint64_t *v = realloc(q->idx, cap * sizeof *v);
        if (v) {
            q->idx = v;
            q->capidx = cap;
        }
    }
    if (q->nidx < q->capidx)
        q->idx[q->nidx++] = (uint64_t)idx;
    q->n++;
    if (q->n > 1) {
        q->sx += q->prev; q->sy += idx;
        q->sxx += q->prev * q->prev; q->syy += idx * idx;
        q->sxy += q->prev * idx;
        q->pairs++;
    }
    q->prev = idx;
}

static double quality_corr(const struct quality *q)
{
    double n = q->pairs;
    double cov = q->sxy / n - (q->sx / n) * (q->sy / n);
    double vx = q->sxx / n - (q->sx / n) * (q->sx / n);
    double vy = q->syy / n - (q->sy / n) * (q->sy / n);
    return vx > 0 && vy > 0 ? cov / sqrt(vx * vy) : 1.0;
}

int cmd_bench_stream(int argc, char **argv)
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
        {"at", required_argument, 0, 'a'},
        {"source-baseline", required_argument, 0, 'B'},
        {"baseline-seconds", required_argument, 0, 'L'},
        {"json", no_argument, 0, 'j'},
        {"order-out", required_argument, 0, 'O'},
        {"s3-price", required_argument, 0, 'Q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    dlk_loader_opts lo = {0};
    lo.check = 1;
    const char *device = "auto", *at = NULL, *tensors = NULL,
               *baseline = NULL, *order_out = NULL;
    double baseline_s = 20;
    /* AWS S3 Standard in us-east-1: GET $0.0004 per 1,000 requests, data
     * transfer out to the internet $0.09 per GB (the first 10 TB a month) */
    double price_get = 0.0004, price_gb = 0.09;
    bool price_given = false;
    long epochs = 1, rank = -1, world = -1;
    double step_ms = 0;
    bool json = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'd': device = optarg; break;
        case 'b': lo.batch_size = (uint32_t)strtoul(optarg, &end, 10); break;
        case 'w': lo.io_threads = (uint32_t)strtoul(optarg, &end, 10); break;
        case 'p': lo.prefetch_chunks = (uint32_t)strtoul(optarg, &end, 10); break;
        case 'K': lo.window_chunks = (uint32_t)strtoul(optarg, &end, 10); break;
        case 's': lo.shuffle = 1; break;
        case 'S': lo.seed = strtoull(optarg, &end, 10); break;
        case 'e': epochs = strtol(optarg, &end, 10); break;
        case 't': step_ms = strtod(optarg, &end); break;
        case 'r': rank = strtol(optarg, &end, 10); break;
        case 'W': world = strtol(optarg, &end, 10); break;
        case 'T': tensors = optarg; break;
        case 'm':
            if (!(lo.memory_limit = parse_bytes(optarg))) {
                cmd_error("bench-stream", "bad --memory '%s'", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'P':
            if (strcmp(optarg, "auto") == 0)
                lo.pin_cache = DLK_PIN_CACHE_AUTO;
            else if (strcmp(optarg, "0") != 0 &&
                     !(lo.pin_cache = parse_bytes(optarg))) {
                cmd_error("bench-stream", "bad --pin-cache '%s' (bytes with "
                          "an optional K, M or G, or auto)", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'C': lo.check = 0; break;
        case 'V': lo.no_verify = 1; break;
        case 'a': at = optarg; break;
        case 'B': baseline = optarg; break;
        case 'L':
            baseline_s = strtod(optarg, &end);
            if (!(baseline_s > 0 && baseline_s <= 86400)) { /* NaN too */
                cmd_error("bench-stream", "--baseline-seconds must be "
                          "above 0 and at most 86400");
                return EXIT_USAGE;
            }
            break;
        case 'j': json = true; break;
        case 'O': order_out = optarg; break;
        case 'Q': {
            int n = 0;
            if (sscanf(optarg, "%lf,%lf%n", &price_get, &price_gb, &n) != 2 ||
                optarg[n] || !(price_get >= 0 && price_get < 1e6) ||
                !(price_gb >= 0 && price_gb < 1e6)) {
                cmd_error("bench-stream", "bad --s3-price '%s' (dollars per "
                          "1000 GETs and per GB, e.g. 0.0004,0.09)", optarg);
                return EXIT_USAGE;
            }
            price_given = true;
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
        cmd_check_url("bench-stream", baseline))
        return EXIT_USAGE;
    if (epochs < 1 || epochs > 1000000 || !(step_ms >= 0 && step_ms <= 60000)) {
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
    if (rank < 0)
        rank = launch.rank;
    if (world < 0)
        world = launch.world_size;
    if (world < 1 || rank < 0 || rank >= world) {
        cmd_error("bench-stream", "rank %ld is not in a world of %ld", rank,
                  world);
        return EXIT_USAGE;
    }
    lo.rank = (uint32_t)rank;
    lo.world_size = (uint32_t)world;
    lo.epochs = (uint64_t)epochs; /* nothing read ahead after the last */
    char devbuf[32];
    if (strcmp(device, "auto") == 0) {
        char why[160];
        if (dlk_cuda_available(why, sizeof why)) {
            snprintf(devbuf, sizeof devbuf, "cuda:%u", launch.local_rank);
            device = devbuf;
        } else {
            fprintf(stderr, "dlk bench-stream: no usable GPU (%s); running "
                    "on the cpu\n", why);
            device = "cpu";
        }
    }
    lo.device = device;
    char *names[256];
    char *tlist = tensors ? strdup(tensors) : NULL;
    if (tlist) {
        size_t n = 0;
        for (char *tok = strtok(tlist, ","); tok && n < 256;
             tok = strtok(NULL, ","))
            names[n++] = tok;
        lo.tensors = (const char *const *)names;
        lo.ntensors = n;
    }

    dlk_error err;
    dlk_dataset *ds;
    double t_open = cmd_now_s();
    if (dlk_dataset_open(argv[optind], at, &ds, &err)) {
        free(tlist);
        return cmd_fail("bench-stream", &err);
    }
    dlk_loader *l;
    if (dlk_loader_open(ds, &lo, &l, &err)) {
        free(tlist);
        dlk_dataset_free(ds);
        return cmd_fail("bench-stream", &err);
    }
    /* how well batches mix the classes, when there is a class label */
    label_mix *mix = NULL;
    if (label_mix_open(ds, lo.batch_size ? lo.batch_size : 256, lo.seed,
                       &mix, &err)) {
        dlk_loader_close(l);
        dlk_dataset_free(ds);
        free(tlist);
        return cmd_fail("bench-stream", &err);
    }
    FILE *order_f = NULL;
    if (order_out && !(order_f = fopen(order_out, "w"))) {
        cmd_error("bench-stream", "cannot write '%s': %s", order_out,
                  strerror(errno));
        label_mix_free(mix);
        dlk_loader_close(l);
        dlk_dataset_free(ds);
        free(tlist);
        return cmd_finish("bench-stream", EXIT_ERROR);
    }
    json_t *mix_epochs = json_array();
    double mix_worst = 0;
    bool tty = isatty(2) && !json;
    double t0 = cmd_now_s(), last_draw = 0, first_batch = -1;
    uint64_t samples = 0, bytes = 0, batches = 0;
    struct quality q = {0};
    uint64_t pos = 0;
    int code = EXIT_OK;
    json_t *per_epoch = json_array();
    double best_steady = 0, steady_busy = 0;
    /* epochs are measured between marks on the device's clock, read
     * after the run: waiting for the device at each epoch's end would
     * drain it there and show a gap no training loop has */
    struct epoch_run {
        size_t mark;            /* at the start of the epoch's work */
        uint64_t samples, bytes;
        double first_batch;
        dlk_io_counters io;     /* storage requests at its end */
    } *runs = calloc((size_t)epochs + 1, sizeof *runs); /* +1: the last end */
    long ran = 0;
    if (!runs) {
        cmd_error("bench-stream", "out of memory");
        code = EXIT_ERROR;
    } else if (dlk_loader_mark(l, &runs[0].mark, &err)) {
        code = cmd_fail("bench-stream", &err);
    }
    dlk_io_counters io_open;
    dlk_io_counters_get(&io_open);
    for (long e = 0; e < epochs && code == EXIT_OK; e++) {
        const dlk_batch *b;
        double e0 = cmd_now_s();
        uint64_t s0 = samples, b0 = bytes;
        runs[e].first_batch = -1;
        for (;;) {
            if (dlk_loader_next(l, &b, &err)) {
                code = cmd_fail("bench-stream", &err);
                break;
            }
            if (!b)
                break;
            if (first_batch < 0)
                first_batch = cmd_now_s() - t_open;
            if (runs[e].first_batch < 0)
                runs[e].first_batch = cmd_now_s() - e0;
            if (dlk_loader_step(l, step_ms, &err)) {
                code = cmd_fail("bench-stream", &err);
                break;
            }
            batches++;
            /* padding repeats samples to even out the ranks' batches: it
             * is moved (bytes) but neither counted as samples delivered
             * nor part of the order */
            for (uint32_t i = 0; i < b->size; i++)
                if (!b->pad[i]) {
                    samples++;
                    if (e == 0)
                        quality_add(&q, (double)pos++, (double)b->indices[i]);
                }
            for (size_t t = 0; t < b->ntensors; t++)
                bytes += b->tensors[t].nbytes;
            if (mix)
                label_mix_batch(mix, b->indices, b->pad, b->size);
            if (order_f) {
                const char *sep = "";
                for (uint32_t i = 0; i < b->size; i++)
                    if (!b->pad[i]) {
                        fprintf(order_f, "%s%llu", sep,
                                (unsigned long long)b->indices[i]);
                        sep = " ";
                    }
                fputc('\n', order_f);
            }
            double now = cmd_now_s();
            if (tty && now - last_draw > 0.25) {
                last_draw = now;
                fprintf(stderr, "\r  epoch %ld  %llu batches  %.0f samples/s  "
                        "%.2f GB/s   ", e + 1, (unsigned long long)batches,
                        samples / (now - t0), bytes / (now - t0) / 1e9);
            }
        }
        if (code == EXIT_OK && dlk_loader_mark(l, &runs[e + 1].mark, &err))
            code = cmd_fail("bench-stream", &err);
        runs[e].samples = samples - s0;
        runs[e].bytes = bytes - b0;
        dlk_io_counters_get(&runs[e].io);
        ran = e + 1;
        if (mix) {
            double r = label_mix_epoch_end(mix);
            json_array_append_new(mix_epochs, json_real(r));
            if (r > mix_worst)
                mix_worst = r;
        }
    }
    /* each epoch's rate and busy time on the device's clock; the first
     * includes opening (and, on a GPU, pinning the page cache), so later
     * ones show the steady state */
    for (long e = 0; e < ran && code == EXIT_OK; e++) {
        double es = 0, busy_s = 0;
        if (dlk_loader_span(l, runs[e].mark, runs[e + 1].mark, &es, &busy_s,
                            &err)) {
            code = cmd_fail("bench-stream", &err);
            break;
        }
        double rate = es > 0 ? runs[e].bytes / es : 0;
        double busy = es > 0 ? 100.0 * busy_s / es : 0;
        /* requests between epoch ends: each epoch's reads ahead for the
         * next are counted in it, as they are made */
        const dlk_io_counters *a = e ? &runs[e - 1].io : &io_open,
                              *z = &runs[e].io;
        uint64_t reqs = (z->gets + z->heads + z->lists) -
                        (a->gets + a->heads + a->lists);
        uint64_t rd = z->bytes_read - a->bytes_read;
        json_array_append_new(per_epoch, json_pack(
            "{s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:f}", "seconds", es,
            "samples_per_s", es > 0 ? runs[e].samples / es : 0,
            "bytes_per_s", rate, "busy_pct", busy, "first_batch_s",
            runs[e].first_batch, "requests", (json_int_t)reqs, "bytes_read",
            (json_int_t)rd, "cost_usd",
            reqs / 1000.0 * price_get + rd / 1e9 * price_gb));
        if ((e > 0 || ran == 1) && rate > best_steady) {
            best_steady = rate;
            steady_busy = busy;
        }
    }
    free(runs);
    if (order_f && (ferror(order_f) | fclose(order_f)) && code == EXIT_OK) {
        cmd_error("bench-stream", "cannot write '%s': %s", order_out,
                  strerror(errno));
        code = EXIT_ERROR;
    }
    if (tty)
        fputs("\r\033[K", stderr);
    double wall = cmd_now_s() - t0;
    dlk_loader_stats st;
    dlk_loader_stats_get(l, &st);
    uint64_t dev_sum, host_sum;
    dlk_loader_checksums(l, &dev_sum, &host_sum);
    dlk_io_counters io;
    dlk_io_counters_get(&io);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t rss = (uint64_t)ru.ru_maxrss * 1024;
    bool on_device = strncmp(device, "cuda", 4) == 0;
    /* starvation: on a GPU, the share of the time the device had nothing
     * to run (the consumer may wait for chunks while the device still has
     * batches queued: that is not a stall); on the CPU, the consumer's
     * waits for chunks */
    double busy_pct = 100.0 * st.gpu_busy_s / wall;
    double stall_pct = on_device ? (busy_pct < 100 ? 100 - busy_pct : 0)
                                 : 100.0 * st.wait_s / wall;
    /* the bottleneck: the stage with the most time per thread doing it */
    double io_threads = st.io_threads ? st.io_threads : 1;
    struct { const char *name; double s; } stages[] = {
        {"storage", st.storage_s / io_threads},
        {"decompress", st.decompress_s / io_threads},
        {"host_to_device", st.h2d_s},
        {"gather", st.gather_s},
        {"step", st.step_s},
    };
    size_t worst = 0;
    for (size_t i = 1; i < sizeof stages / sizeof stages[0]; i++)
        if (stages[i].s > stages[worst].s)
            worst = i;
    double mean_disp = quality_displacement(&q);
    free(q.idx);
    double corr = q.pairs > 1 ? quality_corr(&q) : 1;
    bool check_ok = !lo.check || dev_sum == host_sum;
    /* the per-file baseline, resized to the dataset's image shape */
    dlk_baseline_result br = {0};
    bool have_baseline = false;
    if (code == EXIT_OK && baseline) {
        /* as many threads as the loader ran (given or its default) */
        dlk_baseline_opts bo = {baseline, lo.batch_size ? lo.batch_size : 256,
                                st.io_threads ? st.io_threads : 1, 0, 0,
                                baseline_s, lo.seed, device, step_ms};
        for (size_t i = 0; i < dlk_dataset_ntensors(ds); i++) {
            dlk_tensor_info ti;
            if (!dlk_tensor_info_get(ds, i, &ti, NULL) && ti.kind == DLK_KIND_IMAGE &&
                ti.ndim == 3 && ti.shape[0] > 0 && ti.shape[1] > 0) {
                bo.height = (int)ti.shape[0];
                bo.width = (int)ti.shape[1];
                break;
            }
        }
        if (dlk_source_baseline(&bo, &br, &err))
            code = cmd_fail("bench-stream", &err);
        else
            have_baseline = true;
    }
    double base_rate = have_baseline && br.seconds > 0 ? br.samples / br.seconds : 0;
    /* an epoch's cost: the last epoch's requests and bytes (the first also
     * opens the dataset); the per-file way, one GET of every object */
    json_t *last_ep = json_array_get(per_epoch, json_array_size(per_epoch) - 1);
    uint64_t ep_reqs = (uint64_t)json_integer_value(json_object_get(last_ep, "requests"));
    uint64_t ep_bytes = (uint64_t)json_integer_value(json_object_get(last_ep, "bytes_read"));
    double ep_cost = json_real_value(json_object_get(last_ep, "cost_usd"));
    double base_cost = br.files_listed / 1000.0 * price_get +
                       br.bytes_listed / 1e9 * price_gb;
    bool show_cost = price_given || strncmp(argv[optind], "s3://", 5) == 0;
    if (code == EXIT_OK && json) {
        json_t *o = json_pack(
            "{s:s,s:s,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:s,"
            "s:{s:f,s:f,s:f,s:f,s:f},s:f,s:f,s:o,s:I,s:I}",
            "dataset", argv[optind], "device", device,
            "samples", (json_int_t)samples, "batches", (json_int_t)batches,
            "seconds", wall, "samples_per_s", samples / wall,
            "bytes_per_s", bytes / wall,
            "gpu_busy_pct", busy_pct,
            "stall_pct", stall_pct,
            "first_batch_s", first_batch,
            "requests", (json_int_t)(io.gets + io.heads + io.lists),
            "bytes_read", (json_int_t)io.bytes_read,
            "peak_rss_bytes", (json_int_t)rss,
            "peak_buffer_bytes", (json_int_t)st.peak_buffer_bytes,
            "bottleneck", stages[worst].name,
            "stages", "storage", st.storage_s, "decompress", st.decompress_s,
            "host_to_device", st.h2d_s, "gather", st.gather_s,
            "step", st.step_s,
            "shuffle_displacement", mean_disp, "shuffle_neighbour_corr", corr,
            "checksum_ok", lo.check ? json_boolean(check_ok) : json_null(),
            "rank", (json_int_t)rank, "world", (json_int_t)world);
        json_object_set(o, "epochs", per_epoch);
        json_object_set_new(o, "steady_bytes_per_s", json_real(best_steady));
        json_object_set_new(o, "hedged_requests", json_integer((json_int_t)io.hedges));
        json_object_set_new(o, "steady_busy_pct", json_real(steady_busy));
        json_object_set_new(o, "label_mix", !mix ? json_null() : json_pack(
            "{s:s,s:f,s:O,s:f}", "tensor", label_mix_tensor(mix),
            "ratio", mix_worst, "per_epoch", mix_epochs, "random_tvd",
            label_mix_random_tvd(mix)));
        json_object_set_new(o, "epoch_cost", json_pack(
            "{s:f,s:f,s:I,s:I,s:f}", "get_per_1000", price_get,
            "per_gb", price_gb, "requests", (json_int_t)ep_reqs,
            "bytes_read", (json_int_t)ep_bytes, "usd", ep_cost));
        if (have_baseline) {
            json_object_set_new(o, "baseline", json_pack(
                "{s:s,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:{s:I,s:I,s:f}}", "source",
                baseline, "samples", (json_int_t)br.samples, "errors",
                (json_int_t)br.errors, "seconds", br.seconds,
                "samples_per_s", base_rate, "first_batch_s",
                br.first_batch_s, "gpu_busy_pct", br.busy_pct, "step_ms",
                step_ms, "epoch_cost", "requests",
                (json_int_t)br.files_listed, "bytes_read",
                (json_int_t)br.bytes_listed, "usd", base_cost));
            json_object_set_new(o, "ratio_to_baseline",
                                json_real(base_rate > 0 ? samples / wall / base_rate
                                                        : 0));
        }
        cmd_json_print(o, JSON_PRESERVE_ORDER | JSON_INDENT(2));
        json_decref(o);
    } else if (code == EXIT_OK) {
        char b1[32], b2[32], b3[32];
        printf("dlk bench-stream %s on %s (rank %ld of %ld)\n", argv[optind],
               device, rank, world);
        printf("  %llu samples in %llu batches, %.3f s: %.0f samples/s, "
               "%.2f GB/s\n", (unsigned long long)samples,
               (unsigned long long)batches, wall, samples / wall,
               bytes / wall / 1e9);
        for (size_t i = 0; epochs > 1 && i < json_array_size(per_epoch); i++) {
            json_t *ep = json_array_get(per_epoch, i);
            printf("  epoch %zu: %.3f s, %.0f samples/s, %.2f GB/s, busy "
                   "%.1f%%, first batch %.4f s\n", i + 1,
                   json_real_value(json_object_get(ep, "seconds")),
                   json_real_value(json_object_get(ep, "samples_per_s")),
                   json_real_value(json_object_get(ep, "bytes_per_s")) / 1e9,
                   json_real_value(json_object_get(ep, "busy_pct")),
                   json_real_value(json_object_get(ep, "first_batch_s")));
        }
        printf("  first batch %.3f s; %s busy %.1f%%, stalled %.1f%%\n",
               first_batch, on_device ? "GPU" : "consumer",
               busy_pct, stall_pct);
        printf("  stages (s): storage %.3f, decompress %.3f, host-to-device "
               "%.3f, gather %.3f, step %.3f; bottleneck: %s\n", st.storage_s,
               st.decompress_s, st.h2d_s, st.gather_s, st.step_s,
               stages[worst].name);
        printf("  storage: %llu requests, %s read; peak RSS %s; chunk "
               "buffers peak %s\n",
               (unsigned long long)(io.gets + io.heads + io.lists),
               cmd_bytes(io.bytes_read, b1), cmd_bytes(rss, b2),
               cmd_bytes(st.peak_buffer_bytes, b3));
        printf("  shuffle: mean displacement %.2f of a random permutation's, "
               "neighbour correlation %.3f\n", mean_disp, corr);
        if (mix) {
            printf("  label mix (%s): %.2f of a random permutation's in the "
                   "worst epoch (1.0 is ideal", label_mix_tensor(mix),
                   mix_worst);
            for (size_t i = 0; epochs > 1 && i < json_array_size(mix_epochs); i++)
                printf("%s%.2f", i ? " " : "; epochs ",
                       json_real_value(json_array_get(mix_epochs, i)));
            printf(")\n");
        }
        if (have_baseline)
            printf("  per-file baseline (%s): %llu samples in %.2f s: %.0f "
                   "samples/s, first batch %.3f s, %llu errors; dlk is %.1fx\n",
                   baseline, (unsigned long long)br.samples, br.seconds,
                   base_rate, br.first_batch_s, (unsigned long long)br.errors,
                   base_rate > 0 ? samples / wall / base_rate : 0);
        if (have_baseline)
            printf("  %s busy with a %g ms step: dlk %.1f%%, per-file %.1f%% "
                   "(%.0f against %.0f samples/s)\n",
                   on_device ? "GPU" : "consumer", step_ms, busy_pct,
                   br.busy_pct, samples / wall, base_rate);
        if (show_cost) {
            printf("  an epoch on S3 at $%g per 1000 GETs and $%g per GB: "
                   "$%.6f (%llu requests, %s)", price_get, price_gb, ep_cost,
                   (unsigned long long)ep_reqs, cmd_bytes(ep_bytes, b1));
            if (have_baseline)
                printf("; per-file $%.6f (%llu GETs, %s)", base_cost,
                       (unsigned long long)br.files_listed,
                       cmd_bytes(br.bytes_listed, b2));
            printf("\n");
        }
        if (lo.check)
            printf("  checksum: device %016llx, cpu %016llx: %s\n",
                   (unsigned long long)dev_sum, (unsigned long long)host_sum,
                   check_ok ? "equal" : "DIFFERENT");
    }
    if (code == EXIT_OK && mix && mix_worst > MIX_WARN)
        fprintf(stderr, "dlk bench-stream: warning: batches mix the classes "
                "of '%s' %.1fx worse than a random permutation: the rows are "
                "likely stored in class order (re-ingest with --order "
                "shuffled, or stream with --shuffle and a larger --window)\n",
                label_mix_tensor(mix), mix_worst);
    if (code == EXIT_OK && !check_ok) {
        cmd_error("bench-stream", "the device's checksum differs from the "
                  "cpu's: wrong bytes arrived");
        code = EXIT_PROBLEMS;
    }
    json_decref(per_epoch);
    json_decref(mix_epochs);
    label_mix_free(mix);
    dlk_loader_close(l);
    dlk_dataset_free(ds);
    free(tlist);
    return cmd_finish("bench-stream", code);
}
