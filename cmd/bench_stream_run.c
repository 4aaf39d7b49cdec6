/* bench_stream_run.c - the run of dlk bench-stream: stream the epochs
 * as a training loop would, and collect what the report shows. */
#include "bench_stream.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

const char *const bench_stage_names[BENCH_NSTAGES] = {
    "storage", "decompress", "host_to_device", "gather", "step",
};

/* per thread doing it: the I/O threads share storage and decompression */
void bench_stage_times(const dlk_loader_stats *st, double out[BENCH_NSTAGES])
{
    double io_threads = st->io_threads ? st->io_threads : 1;
    out[0] = st->storage_s / io_threads;
    out[1] = st->decompress_s / io_threads;
    out[2] = st->h2d_s;
    out[3] = st->gather_s;
    out[4] = st->step_s;
}

/* the bottleneck: the stage with the most time per thread doing it */
size_t bench_bottleneck(const dlk_loader_stats *st)
{
    double s[BENCH_NSTAGES];
    bench_stage_times(st, s);
    size_t worst = 0;
    for (size_t i = 1; i < BENCH_NSTAGES; i++)
        if (s[i] > s[worst])
            worst = i;
    return worst;
}

/* Shuffle quality of one rank's epoch: how far each sample lands from
 * its place in sorted order (relative to a random permutation's n/3), and
 * the correlation of neighbours.  The displacement is measured on the
 * samples whose hashed index has its `level` low bits zero, at most
 * QUALITY_KEEP of them (the level rises when they are more; exact, every
 * sample, below that): a sample's sorted place is then its rank among
 * those kept times n/kept, its delivered place known exactly, and the
 * run keeps 16 bytes a sample of at most QUALITY_KEEP, not 8 of every
 * one. */
#define QUALITY_KEEP (1u << 18)
struct quality {
    double sum_disp, n;
    double sx, sy, sxx, syy, sxy, pairs;
    double prev;
    struct qpoint { uint64_t idx, at; } *kept; /* in delivery order */
    size_t nkept, capkept;
    unsigned level;
};

static uint64_t quality_hash(uint64_t x) /* splitmix64 */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static bool quality_keeps(const struct quality *q, uint64_t idx)
{
    return (quality_hash(idx) & ((1ull << q->level) - 1)) == 0;
}

static int cmp_qpoint(const void *a, const void *b)
{
    uint64_t x = ((const struct qpoint *)a)->idx,
             y = ((const struct qpoint *)b)->idx;
    return x < y ? -1 : x > y;
}

/* Mean |delivered position - sorted position|: indices of a rank need not
 * start at 0, so compare with the rank's own sorted order. */
static double quality_displacement(struct quality *q)
{
    if (q->n < 2 || q->nkept < 1)
        return 0;
    qsort(q->kept, q->nkept, sizeof *q->kept, cmp_qpoint);
    double scale = q->n / (double)q->nkept, sum = 0;
    for (size_t j = 0; j < q->nkept; j++)
        sum += fabs((double)q->kept[j].at - (double)j * scale);
    return sum / q->nkept / (q->n / 3.0);
}

static void quality_add(struct quality *q, double pos, double idx)
{
    uint64_t x = (uint64_t)idx;
    if (quality_keeps(q, x)) {
        if (q->nkept == q->capkept && q->capkept < QUALITY_KEEP) {
            size_t cap = q->capkept ? q->capkept * 2 : 4096;
            struct qpoint *v = realloc(q->kept, cap * sizeof *v);
            if (v) {
                q->kept = v;
                q->capkept = cap;
            }
        }
        while (q->nkept == q->capkept && q->level < 63) {
            /* full: keep the half whose next bit is zero too */
            q->level++;
            size_t k = 0;
            for (size_t i = 0; i < q->nkept; i++)
                if (quality_keeps(q, q->kept[i].idx))
                    q->kept[k++] = q->kept[i];
            q->nkept = k;
        }
        if (q->nkept < q->capkept && quality_keeps(q, x))
            q->kept[q->nkept++] = (struct qpoint){x, (uint64_t)pos};
    }
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

/* The resident set now, from /proc (0 where there is none). */
static uint64_t rss_now(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size, res = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A point of memory and requests, when `series_every` passed since the
 * last: when the points are full, every other goes and the spacing
 * doubles, so a long run keeps BENCH_SERIES_MAX spread over all of it. */
static void series_sample(struct bench_result *r, double t, bool force)
{
    if (!force && r->nseries &&
        t - r->series[r->nseries - 1].t < r->series_every)
        return;
    if (r->nseries == BENCH_SERIES_MAX) {
        for (size_t i = 0; i < BENCH_SERIES_MAX / 2; i++)
            r->series[i] = r->series[2 * i];
        r->nseries = BENCH_SERIES_MAX / 2;
        r->series_every *= 2;
    }
    dlk_io_counters io;
    dlk_io_counters_get(&io);
    struct bench_point *p = &r->series[r->nseries++];
    p->t = t;
    p->rss = rss_now();
    p->requests = io.gets + io.heads + io.lists;
    p->bytes_read = io.bytes_read;
}

void bench_result_free(struct bench_result *r)
{
    json_decref(r->per_epoch);
    json_decref(r->mix_epochs);
    if (!r->src)
        label_mix_free(r->mix);
    free(r->trace);
    dlk_loader_close(r->l);
    if (!r->src)
        dlk_dataset_free(r->ds);
    for (size_t i = 0; i < r->nsrc; i++) {
        label_mix_free(r->src[i].mix);
        json_decref(r->src[i].mix_epochs);
        dlk_dataset_free(r->src[i].ds);
    }
    free(r->src);
    memset(r, 0, sizeof *r);
}

/* One epoch of the run (bench_run). */
struct epoch_run {
    size_t mark;                /* at the start of the epoch's work */
    uint64_t samples, bytes;
    double first_batch;
    dlk_io_counters io;         /* storage requests at its end */
};

/* Each epoch's rate and busy time on the device's clock, into
 * r->per_epoch; the first includes opening (and, on a GPU, pinning the
 * page cache), so later ones show the steady state. */
static int epoch_rates(const struct bench_opts *o, struct bench_result *r,
                       const struct epoch_run *runs, long ran,
                       const dlk_io_counters *io_open)
{
    dlk_error err;
    for (long e = 0; e < ran; e++) {
        double es = 0, busy_s = 0;
        if (dlk_loader_span(r->l, runs[e].mark, runs[e + 1].mark, &es,
                            &busy_s, &err))
            return cmd_fail("bench-stream", &err);
        double rate = es > 0 ? runs[e].bytes / es : 0;
        double busy = es > 0 ? 100.0 * busy_s / es : 0;
        r->run_s += es;
        r->run_busy_s += busy_s;
        /* requests between epoch ends: each epoch's reads ahead for the
         * next are counted in it, as they are made */
        const dlk_io_counters *a = e ? &runs[e - 1].io : io_open,
                              *z = &runs[e].io;
        uint64_t reqs = (z->gets + z->heads + z->lists) -
                        (a->gets + a->heads + a->lists);
        uint64_t rd = z->bytes_read - a->bytes_read;
        json_array_append_new(r->per_epoch, json_pack(
            "{s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:f}", "seconds", es,
            "samples_per_s", es > 0 ? runs[e].samples / es : 0,
            "bytes_per_s", rate, "busy_pct", busy, "first_batch_s",
            runs[e].first_batch, "requests", (json_int_t)reqs, "bytes_read",
            (json_int_t)rd, "cost_usd",
            reqs / 1000.0 * o->price_get + rd / 1e9 * o->price_gb));
        if ((e > 0 || ran == 1) && rate > r->best_steady) {
            r->best_steady = rate;
            r->steady_busy = busy;
        }
    }
    return EXIT_OK;
}

/* The per-file baseline, resized to the dataset's image shape, with as
 * many threads as the loader ran (given or its default). */
static int run_baseline(const struct bench_opts *o, struct bench_result *r)
{
    const dlk_loader_opts *lo = &o->lo;
    dlk_baseline_opts bo = {o->baseline, lo->batch_size ? lo->batch_size : 256,
                            r->st.io_threads ? r->st.io_threads : 1, 0, 0,
                            o->baseline_s, lo->seed, o->device, o->step_ms};
    for (size_t i = 0; i < dlk_dataset_ntensors(r->ds); i++) {
        dlk_tensor_info ti;
        if (!dlk_tensor_info_get(r->ds, i, &ti, NULL) &&
            ti.kind == DLK_KIND_IMAGE && ti.ndim == 3 && ti.shape[0] > 0 &&
            ti.shape[1] > 0) {
            bo.height = (int)ti.shape[0];
            bo.width = (int)ti.shape[1];
            break;
        }
    }
    dlk_error err;
    if (cmd_store(bo.source, &bo.store, &err) ||
        dlk_source_baseline(&bo, &r->br, &err))
        return cmd_fail("bench-stream", &err);
    r->have_baseline = true;
    return EXIT_OK;
}

/* The GPU's pinned copy rate, the line rate the run is set beside:
 * measured after the run (its RSS already read), and only by a process
 * alone on its host, since ranks still streaming would share the host's
 * memory with it. */
static void measure_link(const struct bench_opts *o, struct bench_result *r)
{
    int dev;
    if (!r->on_device || o->lo.local_world_size > 1 ||
        sscanf(o->device, "cuda:%d", &dev) != 1)
        return;
    dlk_error err = {0};
    if (dlk_cuda_copy_rate(dev, &r->link_rate, &err))
        fprintf(stderr, "dlk bench-stream: note: the pinned copy to %s was "
                "not measured: %s\n", o->device, err.msg);
}

/* A mix's datasets, each with its label mix (measured over its own rows
 * of each batch, in batches of its share of one), the first as r->ds. */
static dlk_status open_sources(const struct bench_opts *o,
                               struct bench_result *r, dlk_error *err)
{
    if (!(r->src = calloc(o->nmix, sizeof *r->src))) {
        err->code = DLK_ENOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return DLK_ENOMEM;
    }
    double sum = 0;
    for (size_t i = 0; i < o->nmix; i++)
        sum += o->mix_w[i];
    uint32_t batch = o->lo.batch_size ? o->lo.batch_size : 256;
    for (size_t i = 0; i < o->nmix; i++) {
        struct bench_source *s = &r->src[i];
        dlk_status rc = cmd_dataset_open(o->mix_url[i], NULL, &s->ds, err);
        if (rc)
            return rc;
        r->nsrc = i + 1;
        uint32_t share = sum > 0 ? (uint32_t)(batch * o->mix_w[i] / sum + 0.5)
                                 : 0;
        s->mix_epochs = json_array();
        if (share >= 2 &&
            (rc = label_mix_open(s->ds, share, o->lo.seed, &s->mix, err)))
            return rc;
    }
    r->ds = r->src[0].ds;
    r->mix = r->src[0].mix;
    return DLK_OK;
}

/* A mixed batch's rows, to each source's label mix. */
static void sources_batch(struct bench_result *r, const dlk_batch *b)
{
    uint64_t *rows = malloc(b->size * sizeof *rows);
    uint8_t *pad = malloc(b->size);
    for (size_t s = 0; rows && pad && s < r->nsrc; s++) {
        if (!r->src[s].mix)
            continue;
        uint32_t n = 0;
        for (uint32_t i = 0; i < b->size; i++)
            if (b->sources[i] == s) {
                rows[n] = b->indices[i];
                pad[n++] = b->pad[i];
            }
        label_mix_batch(r->src[s].mix, rows, pad, n);
    }
    free(rows);
    free(pad);
}

/* The epoch's label mix of every source; the run's worst is the worst
 * source's. */
static void sources_epoch_end(struct bench_result *r)
{
    double worst = 0;
    for (size_t s = 0; s < r->nsrc; s++) {
        if (!r->src[s].mix)
            continue;
        double m = label_mix_epoch_end(r->src[s].mix);
        json_array_append_new(r->src[s].mix_epochs, json_real(m));
        if (m > r->src[s].mix_worst)
            r->src[s].mix_worst = m;
        if (m > worst)
            worst = m;
    }
    json_array_append_new(r->mix_epochs, json_real(worst));
    if (worst > r->mix_worst)
        r->mix_worst = worst;
}

/* --order-out: a batch's rows on one line, padding left out; of a mix,
 * each as SOURCE:ROW. */
static void order_line(FILE *f, const dlk_batch *b)
{
    const char *sep = "";
    for (uint32_t i = 0; i < b->size; i++) {
        if (b->pad[i])
            continue;
        if (b->sources)
            fprintf(f, "%s%u:%llu", sep, (unsigned)b->sources[i],
                    (unsigned long long)b->indices[i]);
        else
            fprintf(f, "%s%llu", sep, (unsigned long long)b->indices[i]);
        sep = " ";
    }
    fputc('\n', f);
}

/* The dataset (or a mix's datasets) and its loader, into r->ds and r->l;
 * *io_open the request counters before the loader opened, as every
 * request of the loader counts in its epochs, those of its open
 * included. */
static int open_loader(const struct bench_opts *o, const dlk_loader_opts *lo,
                       struct bench_result *r, dlk_io_counters *io_open)
{
    dlk_error err;
    dlk_dataset *ds = NULL;
    if (o->nmix) {
        if (open_sources(o, r, &err))
            return cmd_fail("bench-stream", &err);
        ds = r->ds;
    } else {
        if (cmd_dataset_open(o->dataset, o->at, &ds, &err))
            return cmd_fail("bench-stream", &err);
        r->ds = ds; /* closed by bench_result_free: the report names
                     * tensors */
        /* how well batches mix the classes, when there is a class label
         * (not of a view, whose classes are what its query chose); read
         * before the loader opens, as the loader starts reading there:
         * the run is measured as a training loop that asks for its first
         * batch at once */
        if (!lo->view &&
            label_mix_open(ds, lo->batch_size ? lo->batch_size : 256,
                           lo->seed, &r->mix, &err))
            return cmd_fail("bench-stream", &err);
    }
    dlk_io_counters_get(io_open);
    dlk_loader *l;
    if (o->nmix) {
        dlk_dataset *dss[BENCH_MIX_MAX];
        for (size_t i = 0; i < r->nsrc; i++)
            dss[i] = r->src[i].ds;
        if (dlk_loader_open_mix(dss, o->mix_w, NULL, r->nsrc, lo, &l, &err))
            return cmd_fail("bench-stream", &err);
    } else if (dlk_loader_open(ds, lo, &l, &err)) {
        return cmd_fail("bench-stream", &err);
    }
    r->l = l;
    return EXIT_OK;
}

/* What the epochs of one run share. */
struct bench_loop {
    double step_ms;
    FILE *order_f;              /* --order-out, or NULL */
    bool tty;                   /* progress drawn on stderr */
    double last_draw;
    struct quality q;           /* of the first epoch's order */
    uint64_t pos;               /* in that order */
};

/* One batch counted: its samples, bytes and label mix, the order's
 * quality (of the first epoch) and its --order-out line. */
static void count_batch(struct bench_result *r, const dlk_batch *b,
                        struct bench_loop *k, bool first_epoch)
{
    r->batches++;
    /* padding repeats samples to even out the ranks' batches: it
     * is moved (bytes) but neither counted as samples delivered
     * nor part of the order */
    /* of a mix, the order's quality is that of its first
     * source's rows (each source is shuffled alike) */
    for (uint32_t i = 0; i < b->size; i++)
        if (!b->pad[i]) {
            r->samples++;
            if (b->sources)
                r->src[b->sources[i]].samples++;
            if (first_epoch && (!b->sources || !b->sources[i]))
                quality_add(&k->q, (double)k->pos++,
                            (double)b->indices[i]);
        }
    for (size_t t = 0; t < b->ntensors; t++)
        r->bytes += b->tensors[t].nbytes;
    if (b->sources)
        sources_batch(r, b);
    else if (r->mix)
        label_mix_batch(r->mix, b->indices, b->pad, b->size);
    if (k->order_f)
        order_line(k->order_f, b);
}

/* The epoch's label mix, of every source of a mix. */
static void mix_epoch_end(struct bench_result *r)
{
    if (r->src)
        sources_epoch_end(r);
    else if (r->mix) {
        double m = label_mix_epoch_end(r->mix);
        json_array_append_new(r->mix_epochs, json_real(m));
        if (m > r->mix_worst)
            r->mix_worst = m;
    }
}

/* What the run measured once it is over: the loader's stats and
 * checksums, the requests, the timeline, the peak RSS and the order's
 * quality. */
static void run_totals(const struct bench_opts *o, const dlk_loader_opts *lo,
                       struct bench_result *r, struct quality *q)
{
    dlk_loader *l = r->l;
    dlk_loader_stats_init(&r->st);
    dlk_loader_stats_get(l, &r->st);
    dlk_loader_checksums(l, &r->dev_sum, &r->host_sum);
    dlk_io_counters_get(&r->io);
    /* the timeline, in the loader's buckets */
    size_t n = dlk_loader_trace(l, NULL, 0);
    if (n && (r->trace = malloc(n * sizeof *r->trace)))
        r->ntrace = dlk_loader_trace(l, r->trace, n);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r->rss = (uint64_t)ru.ru_maxrss * 1024;
    r->on_device = strncmp(o->device, "cuda", 4) == 0;
    r->mean_disp = quality_displacement(q);
    free(q->kept);
    r->corr = q->pairs > 1 ? quality_corr(q) : 1;
    r->check_ok = !lo->check || r->dev_sum == r->host_sum;
}

/* Epoch e of the run: its batches read and counted, its end marked on
 * the device's clock into runs[e + 1]. */
static int run_epoch(struct bench_result *r, struct bench_loop *k,
                     struct epoch_run *runs, long e)
{
    dlk_loader *l = r->l;
    dlk_error err;
    int code = EXIT_OK;
    const dlk_batch *b;
    double e0 = cmd_now_s();
    uint64_t s0 = r->samples, b0 = r->bytes;
    runs[e].first_batch = -1;
    for (;;) {
        if (dlk_loader_next(l, &b, &err)) {
            code = cmd_fail("bench-stream", &err);
            break;
        }
        if (!b)
            break;
        if (r->first_batch < 0)
            r->first_batch = cmd_now_s() - r->t_open;
        if (runs[e].first_batch < 0)
            runs[e].first_batch = cmd_now_s() - e0;
        if (dlk_loader_step(l, k->step_ms, &err)) {
            code = cmd_fail("bench-stream", &err);
            break;
        }
        count_batch(r, b, k, e == 0);
        double now = cmd_now_s();
        series_sample(r, now - r->t0, false);
        if (k->tty && now - k->last_draw > 0.25) {
            k->last_draw = now;
            fprintf(stderr, "\r  epoch %ld  %llu batches  %.0f samples/s  "
                    "%.2f GB/s   ", e + 1, (unsigned long long)r->batches,
                    r->samples / (now - r->t0),
                    r->bytes / (now - r->t0) / 1e9);
        }
    }
    if (code == EXIT_OK && dlk_loader_mark(l, &runs[e + 1].mark, &err))
        code = cmd_fail("bench-stream", &err);
    runs[e].samples = r->samples - s0;
    runs[e].bytes = r->bytes - b0;
    dlk_io_counters_get(&runs[e].io);
    mix_epoch_end(r);
    return code;
}

int bench_run(struct bench_opts *o, struct bench_result *r)
{
    memset(r, 0, sizeof *r);
    r->series_every = 0.02;
    r->per_epoch = json_array();
    r->mix_epochs = json_array();
    dlk_loader_opts lo = o->lo;
    long epochs = o->epochs;
    dlk_error err;
    r->t_open = cmd_now_s();
    dlk_io_counters io_open;
    int code = open_loader(o, &lo, r, &io_open);
    if (code)
        return code;
    struct bench_loop k = {.step_ms = o->step_ms};
    if (o->order_out && !(k.order_f = fopen(o->order_out, "w"))) {
        cmd_error("bench-stream", "cannot write '%s': %s", o->order_out,
                  strerror(errno));
        return EXIT_ERROR;
    }
    /* the ranks of a host share its terminal: rank 0 draws for them */
    k.tty = isatty(2) && !o->json && o->rank == 0;
    r->t0 = cmd_now_s();
    r->first_batch = -1;
    series_sample(r, 0, true);
    /* epochs are measured between marks on the device's clock, read
     * after the run: waiting for the device at each epoch's end would
     * drain it there and show a gap no training loop has */
    struct epoch_run *runs = calloc((size_t)epochs + 1, sizeof *runs);
    long ran = 0;
    if (!runs) {
        cmd_error("bench-stream", "out of memory");
        code = EXIT_ERROR;
    } else if (dlk_loader_mark(r->l, &runs[0].mark, &err)) {
        code = cmd_fail("bench-stream", &err);
    }
    for (long e = 0; e < epochs && code == EXIT_OK; e++) {
        code = run_epoch(r, &k, runs, e);
        ran = e + 1;
    }
    if (code == EXIT_OK)
        code = epoch_rates(o, r, runs, ran, &io_open);
    free(runs);
    if (k.order_f && (ferror(k.order_f) | fclose(k.order_f)) &&
        code == EXIT_OK) {
        cmd_error("bench-stream", "cannot write '%s': %s", o->order_out,
                  strerror(errno));
        code = EXIT_ERROR;
    }
    if (k.tty)
        fputs("\r\033[K", stderr);
    r->wall = cmd_now_s() - r->t0;
    series_sample(r, r->wall, true);
    run_totals(o, &lo, r, &k.q);
    if (code == EXIT_OK && o->baseline)
        code = run_baseline(o, r);
    if (code == EXIT_OK)
        measure_link(o, r);
    return code;
}
