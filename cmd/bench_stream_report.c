/* bench_stream_report.c - what dlk bench-stream measured, as text or as
 * JSON (the JSON also feeds --report's page and dlk bench-report): the
 * rates, where the time went, when the stalls happened, and the flag or
 * resource most likely to help. */
#include "bench_stream.h"
#include "report_html.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Above this label-mix ratio batches are dominated by a few classes
 * (a class-sorted dataset read in order scores 3-10). */
#define MIX_WARN 1.5

/* Figures the text and the JSON share. */
struct derived {
    double busy_pct, stall_pct;
    size_t worst;
    double base_rate, ep_cost, base_cost;
    uint64_t ep_reqs, ep_bytes;
    bool show_cost;
};

static void derive(const struct bench_opts *o, const struct bench_result *r,
                   struct derived *d)
{
    /* starvation: on a GPU, the share of the time the device had nothing
     * to run (the consumer may wait for chunks while the device still has
     * batches queued: that is not a stall); on the CPU, the consumer's
     * waits for chunks */
    /* on a GPU, over the epochs on its clock: from the loader's start to
     * the end of the last epoch's work on the device, not the host's time
     * after it reading the run's timings back (~1,400 events: 6.4 ms of
     * a 0.234 s run on an H200 host).  On the CPU the wall time, which the
     * parts of time_split add up to. */
    d->busy_pct = r->on_device && r->run_s > 0
                      ? 100.0 * r->run_busy_s / r->run_s
                      : 100.0 * r->st.gpu_busy_s / r->wall;
    d->stall_pct = r->on_device ? (d->busy_pct < 100 ? 100 - d->busy_pct : 0)
                                : 100.0 * r->st.wait_s / r->wall;
    d->worst = bench_bottleneck(&r->st);
    d->base_rate = r->have_baseline && r->br.seconds > 0
                       ? r->br.samples / r->br.seconds : 0;
    /* an epoch's cost: the run's requests and bytes over its epochs.  Not
     * the last epoch's: reads ahead count in the epoch they are made in,
     * so the last one's own data was partly read in the one before (it
     * came out 25% low from S3 at 50 ms) */
    size_t ne = json_array_size(r->per_epoch);
    uint64_t reqs = 0, bytes = 0;
    for (size_t e = 0; e < ne; e++) {
        json_t *ep = json_array_get(r->per_epoch, e);
        reqs += (uint64_t)json_integer_value(json_object_get(ep, "requests"));
        bytes += (uint64_t)json_integer_value(json_object_get(ep, "bytes_read"));
    }
    d->ep_reqs = ne ? (reqs + ne / 2) / ne : 0;
    d->ep_bytes = ne ? (bytes + ne / 2) / ne : 0;
    d->ep_cost = d->ep_reqs / 1000.0 * o->price_get +
                 d->ep_bytes / 1e9 * o->price_gb;
    d->base_cost = r->br.files_listed / 1000.0 * o->price_get +
                   r->br.bytes_listed / 1e9 * o->price_gb;
    d->show_cost = o->price_given || strncmp(o->dataset, "s3://", 5) == 0;
}

/* Where the wall time went, in % of it.  On the CPU the parts add up to
 * 100: busy (gather and step), stalled (waiting for chunks), the rest of
 * the loader's calls (planning epochs, releasing chunks, queuing work),
 * the consumer's own work between calls (bench-stream's checksums and
 * statistics), and outside (before the first call, after the last).  On a
 * GPU busy and idle are the device's; the host parts say why it idled. */
struct split {
    double busy, stalled, loader, consumer, outside;
    double late[DLK_LATE_N];     /* waiting by stage, % of all waiting */
    double wait_first_epoch;     /* % of all waiting in the first epoch */
    double wait_epoch_starts;    /* ... in later epochs' first tenth */
    double wait_s;
};

static double clamp_pct(double v)
{
    return v < 0 ? 0 : v > 100 ? 100 : v;
}

static void time_split(const struct bench_opts *o,
                       const struct bench_result *r, const struct derived *d,
                       struct split *s)
{
    memset(s, 0, sizeof *s);
    double covered = 0, next = 0, wait = 0, late[DLK_LATE_N] = {0};
    double first = 0, starts = 0;
    uint64_t per_epoch = r->batches / (o->epochs ? o->epochs : 1);
    uint64_t tenth = per_epoch / 10 ? per_epoch / 10 : 1;
    for (size_t i = 0; i < r->ntrace; i++) {
        const dlk_trace_bucket *b = &r->trace[i];
        covered += b->t1 - b->t0;
        next += b->next_s;
        wait += b->wait_s;
        for (int k = 0; k < DLK_LATE_N; k++)
            late[k] += b->late_s[k];
        if (b->epoch == 0)
            first += b->wait_s;
        else if (per_epoch && b->first_batch % per_epoch < tenth)
            starts += b->wait_s;
    }
    double w = r->wall > 0 ? r->wall : 1;
    s->wait_s = wait;
    s->outside = clamp_pct(100 * (w - covered) / w);
    if (r->on_device) {
        s->busy = clamp_pct(d->busy_pct);
        s->stalled = clamp_pct(d->stall_pct);
        /* the host's side: waiting, the loader's other work, the consumer */
        s->loader = clamp_pct(100 * (next - wait) / w);
        s->consumer = clamp_pct(100 * (covered - next) / w);
    } else {
        s->busy = clamp_pct(d->busy_pct);
        s->stalled = clamp_pct(100 * wait / w);
        s->loader = clamp_pct(100 * (next - wait - r->st.gather_s) / w);
        s->consumer = clamp_pct(100 * (covered - next - r->st.step_s) / w);
    }
    for (int k = 0; k < DLK_LATE_N; k++)
        s->late[k] = wait > 0 ? 100 * late[k] / wait : 0;
    s->wait_first_epoch = wait > 0 ? 100 * first / wait : 0;
    s->wait_epoch_starts = wait > 0 ? 100 * starts / wait : 0;
}

/* Where hint writes: the flag alone (or the resource), and the
 * measurements behind it. */
struct hint_out {
    char *flag;
    size_t fcap;
    char *why;
    size_t wcap;
};

/* What the hints about the I/O threads and the link weigh. */
struct hint_facts {
    const char *name;  /* the stage to look at */
    double stalled;    /* % of the time the device idled or consumer waited */
    double w;          /* the wall time, never 0 */
    uint32_t threads;  /* I/O threads, at least 1 */
    uint32_t share;    /* this rank's cores, at least 1 */
    double io_busy;    /* % of the I/O threads' time busy */
    double per_thread; /* bytes/s of one busy I/O thread */
    char cores_s[96];  /* the cores, in words */
};

/* Why no flag would help, in out->why: the waiting was the pipeline
 * filling, a one-time pinning, the link's line rate, or too little to
 * matter.  False when none of these holds. */
static bool hint_none(const struct bench_opts *o, const struct bench_result *r,
                      const struct derived *d, const struct split *s,
                      double stalled, struct hint_out *out)
{
    const dlk_loader_stats *st = &r->st;
    char *why = out->why;
    size_t wcap = out->wcap;
    /* the waiting for the first batch: the pipeline filling once */
    double first = r->ntrace ? r->trace[0].wait_s : 0;
    if (stalled >= 5 && s->wait_s > 0 && first >= 0.5 * s->wait_s) {
        snprintf(why, wcap, "none: %.0f%% of the waiting was for the first "
                 "batch (%.3f s, the first chunks' read), a start-up cost "
                 "rather than a steady bottleneck; a longer run shows the "
                 "steady state", 100 * first / s->wait_s, first);
        return true;
    }
    /* --pin-cache maps and pins each chunk in the first epoch (the
     * pinnings of a process take turns, and hold up its other mappings
     * and page faults meanwhile): waiting then is a one-time cost */
    if (stalled >= 5 && r->on_device && o->lo.pin_cache && st->pin_s > 0 &&
        s->wait_first_epoch >= 50) {
        snprintf(why, wcap, "none: %.0f%% of the waiting was in the first "
                 "epoch, where the I/O threads map and pin the page cache "
                 "(--pin-cache: %.3f s of pinning, once a chunk), a "
                 "one-time cost; the later epochs read it in place",
                 s->wait_first_epoch, st->pin_s);
        return true;
    }
    if (stalled >= 5 && r->link_rate > 0 &&
        r->best_steady >= 0.9 * r->link_rate) {
        snprintf(why, wcap, "none: the %s moved %.0f%% of this GPU's "
                 "pinned host-to-device copy (%.2f GB/s), the line rate; "
                 "the device waited for the link, and a step longer than "
                 "a batch's copy hides it", o->epochs > 1 ? "best epoch "
                 "after the first" : "run",
                 100 * r->best_steady / r->link_rate, r->link_rate / 1e9);
        return true;
    }
    if (stalled < 5) {
        snprintf(why, wcap, "none needed: %s is the busiest stage but the "
                 "%s only %.1f%% of the time", bench_stage_names[d->worst],
                 r->on_device ? "device idled" : "consumer waited", stalled);
        return true;
    }
    return false;
}

static void hint_facts_init(const struct bench_opts *o,
                            const struct bench_result *r,
                            const struct derived *d, const struct split *s,
                            double stalled, struct hint_facts *f)
{
    const dlk_loader_stats *st = &r->st;
    const char *name = bench_stage_names[d->worst];
    /* gather or step the busiest, and the consumer waited all the same:
     * what the chunks it waited for were in says where to look */
    if (strcmp(name, "storage") && strcmp(name, "decompress") &&
        strcmp(name, "host_to_device"))
        name = s->late[DLK_LATE_H2D] > s->late[DLK_LATE_STORAGE] +
                                       s->late[DLK_LATE_QUEUED]
                   ? "host_to_device" : "storage";
    f->name = name;
    f->stalled = stalled;
    f->threads = st->io_threads ? st->io_threads : 1;
    int cores = dlk_cpu_count();
    /* the ranks of a host share its cores, as the loader's threads do */
    uint32_t ranks = o->lo.local_world_size ? o->lo.local_world_size : 1;
    f->share = (uint32_t)cores / ranks ? (uint32_t)cores / ranks : 1;
    if (ranks > 1)
        snprintf(f->cores_s, sizeof f->cores_s, "this rank's share of the "
                 "host's %d cores is %u (%u ranks)", cores, f->share, ranks);
    else
        snprintf(f->cores_s, sizeof f->cores_s, "this machine has %d cores",
                 cores);
    f->w = r->wall > 0 ? r->wall : 1;
    f->io_busy = 100 * st->io_busy_s / (f->threads * f->w);
    f->per_thread = st->storage_s + st->decompress_s > 0
        ? st->bytes_loaded / (st->storage_s + st->decompress_s) : 0;
}

/* Every I/O thread kept reading and there is room for more of them:
 * more read more at once (on S3 latency, not cores, limits a thread). */
static void hint_more_workers(const struct hint_facts *f, bool s3,
                              uint32_t room, struct hint_out *out)
{
    char b1[32];
    uint32_t more = f->threads * 2 > 64 ? 64 : f->threads * 2;
    if (!s3 && more > room)
        more = room;
    snprintf(out->flag, out->fcap, "--workers %u", more);
    snprintf(out->why, out->wcap, "the %u I/O thread%s %s %.0f%% of the "
             "time at %s/s each; %s", f->threads,
             f->threads == 1 ? " was" : "s were",
             !strcmp(f->name, "decompress") ? "reading and decompressing"
                                            : "reading",
             f->io_busy > 100 ? 100 : f->io_busy,
             cmd_bytes((unsigned long long)f->per_thread, b1), f->cores_s);
}

/* Every I/O thread kept reading and the cores are taken: the threads'
 * CPU time within their busy time tells a store they waited on from work
 * they did (from the page cache a read is a copy, and more cores, not a
 * faster disk, help). */
static void hint_busy_threads(const struct bench_opts *o,
                              const struct bench_result *r,
                              const struct hint_facts *f,
                              struct hint_out *out)
{
    const dlk_loader_stats *st = &r->st;
    char b1[32];
    double on_cpu = st->io_busy_s > 0 ? 100 * st->io_cpu_s / st->io_busy_s
                                      : 0;
    bool cpu = !strcmp(f->name, "decompress") || on_cpu >= 60;
    snprintf(out->flag, out->fcap, "%s", !strcmp(f->name, "decompress")
             ? "CPU for decompression (or a lower --codec level at "
               "ingest)" : cpu ? "more cores" : "a faster store");
    char who[48], work[80];
    snprintf(work, sizeof work, "reading from memory%s%s",
             st->chunks_verified || o->lo.check ? ", checking" : "",
             st->decompress_s > 0 ? ", decompressing" : "");
    if (f->threads == 1)
        snprintf(who, sizeof who, "the one I/O thread was");
    else
        snprintf(who, sizeof who, "all %u I/O threads were", f->threads);
    snprintf(out->why, out->wcap, "%s busy %.0f%% of the time at %s/s each, "
             "%.0f%% of it on or waiting for a CPU (%s), and %s: "
             "more threads would compete for the same cores", who,
             f->io_busy > 100 ? 100 : f->io_busy,
             cmd_bytes((unsigned long long)f->per_thread, b1), on_cpu,
             cpu ? work : "the rest waiting on the store", f->cores_s);
}

/* Storage or decompression the bottleneck: more I/O threads, more CPU or
 * a faster store, a larger chunk-buffer budget, or reading further
 * ahead. */
static void hint_reading(const struct bench_opts *o,
                         const struct bench_result *r, const struct split *s,
                         const struct hint_facts *f, struct hint_out *out)
{
    const dlk_loader_stats *st = &r->st;
    char b1[32];
    bool s3 = strncmp(o->dataset, "s3://", 5) == 0 ||
              strncmp(o->dataset, "gs://", 5) == 0;
    /* from local files on a GPU a quarter of the cores is left to
     * the thread that queues the copies (the loader's default:
     * more threads starved it; docs/benchmarks.md#line-rate) */
    uint32_t room = !s3 && r->on_device ? f->share - f->share / 4 : f->share;
    if (f->io_busy >= 70 && (s3 || room > f->threads)) {
        hint_more_workers(f, s3, room, out);
    } else if (f->io_busy >= 70) {
        hint_busy_threads(o, r, f, out);
    } else if (s->late[DLK_LATE_QUEUED] > 50 ||
               (o->lo.memory_limit &&
                st->peak_buffer_bytes * 10 >= o->lo.memory_limit * 9)) {
        snprintf(out->flag, out->fcap, "--memory");
        snprintf(out->why, out->wcap, "the I/O threads were idle %.0f%% of "
                 "the time while %.0f%% of the waiting was for chunks not "
                 "yet started: the chunk-buffer budget held them back "
                 "(peak %s)", 100 - f->io_busy, s->late[DLK_LATE_QUEUED],
                 cmd_bytes(st->peak_buffer_bytes, b1));
    } else {
        uint32_t p = st->prefetch_chunks;
        snprintf(out->flag, out->fcap, "--prefetch %u", p * 2);
        snprintf(out->why, out->wcap, "the I/O threads were idle %.0f%% of "
                 "the time, yet the consumer waited %.1f%%: chunks are "
                 "asked for too late to be ready", 100 - f->io_busy,
                 f->stalled);
    }
}

/* The copy to the device the bottleneck: a pinned page cache read in
 * place, or else fewer bytes or a faster link. */
static void hint_link(const struct bench_opts *o, const struct bench_result *r,
                      const struct hint_facts *f, struct hint_out *out)
{
    const dlk_loader_stats *st = &r->st;
    char b1[32];
    double rate = st->h2d_s > 0 ? st->bytes_loaded / st->h2d_s : 0;
    bool local = strncmp(o->dataset, "s3://", 5) != 0 &&
                 strncmp(o->dataset, "gs://", 5) != 0;
    bool pin = r->on_device && local && o->lo.pin_cache == 0;
    snprintf(out->flag, out->fcap, "%s",
             pin ? "--pin-cache auto" : "the host-to-device link");
    snprintf(out->why, out->wcap, "copies to the device took %.0f%% of "
             "the run at %s/s%s", 100 * st->h2d_s / f->w,
             cmd_bytes((unsigned long long)rate, b1),
             pin ? " through pinned buffers; a pinned page cache is read "
                   "by the device in place"
                 : "; fewer bytes (--tensors) or a faster link (the GPU's "
                   "PCIe slot, its NUMA node)");
}

/* The flag or resource most likely to help, from what was measured, when
 * the consumer waited and storage or the copy to the device was the
 * bottleneck; "" otherwise.  `flag` gets the flag alone (or the
 * resource), `why` the measurements behind it. */
static void hint(const struct bench_opts *o, const struct bench_result *r,
                 const struct derived *d, const struct split *s,
                 char *flag, size_t fcap, char *why, size_t wcap)
{
    struct hint_out out = {flag, fcap, why, wcap};
    flag[0] = why[0] = 0;
    double stalled = r->on_device ? d->stall_pct : s->stalled;
    if (hint_none(o, r, d, s, stalled, &out))
        return;
    struct hint_facts f;
    hint_facts_init(o, r, d, s, stalled, &f);
    if (!strcmp(f.name, "storage") || !strcmp(f.name, "decompress"))
        hint_reading(o, r, s, &f, &out);
    else if (!strcmp(f.name, "host_to_device"))
        hint_link(o, r, &f, &out);
}

/* The CPU's model, from /proc/cpuinfo ("" when not found). */
static void cpu_model(char *buf, size_t cap)
{
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p += 1 + strspn(p + 1, " \t");
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, cap, "%s", p);
            }
            break;
        }
    }
    if (f)
        fclose(f);
}

/* The NVIDIA GPU's model from the driver's /proc entries, the N-th in bus
 * order for cuda:N ("" when not found: no driver entry, or not a GPU). */
static void gpu_model(const char *device, char *buf, size_t cap)
{
    buf[0] = 0;
    unsigned n = 0;
    if (strncmp(device, "cuda", 4) != 0)
        return;
    sscanf(device, "cuda:%u", &n);
    struct dirent **names;
    int k = scandir("/proc/driver/nvidia/gpus", &names, NULL, alphasort);
    unsigned seen = 0;
    for (int i = 0; i < k; i++) {
        if (names[i]->d_name[0] != '.' && seen++ == n) {
            char path[300], line[512];
            snprintf(path, sizeof path,
                     "/proc/driver/nvidia/gpus/%s/information",
                     names[i]->d_name);
            FILE *f = fopen(path, "r");
            while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "Model:", 6) == 0) {
                    char *v = line + 6 + strspn(line + 6, " \t");
                    v[strcspn(v, "\n")] = 0;
                    snprintf(buf, cap, "%s", v);
                    break;
                }
            if (f)
                fclose(f);
        }
        free(names[i]);
    }
    if (k >= 0)
        free(names);
}

static json_t *settings_json(const struct bench_opts *o,
                             const struct bench_result *r)
{
    /* the command line as given, secrets aside (URLs carry none: keys
     * come from the environment) */
    size_t len = 16;
    for (int i = 0; i < o->argc; i++)
        len += strlen(o->argv[i]) + 1;
    char *cmdline = malloc(len);
    if (cmdline) {
        strcpy(cmdline, "dlk");
        for (int i = 0; i < o->argc; i++) {
            strcat(cmdline, " ");
            strcat(cmdline, o->argv[i]);
        }
    }
    const dlk_loader_opts *lo = &o->lo;
    uint32_t window = r->st.window_chunks;
    json_t *s = json_pack(
        "{s:s,s:I,s:I,s:I,s:I,s:b,s:I,s:I,s:f,s:I,s:b,s:b,s:s?,s:s?,s:s?}",
        "command", cmdline ? cmdline : "", "batch_size",
        (json_int_t)(lo->batch_size ? lo->batch_size : 256), "workers",
        (json_int_t)r->st.io_threads, "window", (json_int_t)window,
        "prefetch", (json_int_t)r->st.prefetch_chunks,
        "shuffle", lo->shuffle, "seed", (json_int_t)lo->seed, "epochs",
        (json_int_t)o->epochs, "step_ms", o->step_ms, "memory",
        (json_int_t)lo->memory_limit, "check", lo->check, "verify",
        !lo->no_verify, "tensors", o->tensors, "at", o->at, "pin_cache",
        lo->pin_cache == DLK_PIN_CACHE_AUTO ? "auto" : NULL);
    if (s && lo->pin_cache != DLK_PIN_CACHE_AUTO)
        json_object_set_new(s, "pin_cache", json_integer((json_int_t)lo->pin_cache));
    if (s)
        json_object_set_new(s, "augment", o->lo.augment
                                ? json_string(o->lo.augment) : json_null());
    /* the folder may come from DLK_CACHE_DIR, not the command line */
    if (s)
        json_object_set_new(s, "cache_dir", lo->cache_dir && *lo->cache_dir
                                ? json_string(lo->cache_dir) : json_null());
    free(cmdline);
    return s;
}

static json_t *machine_json(const struct bench_opts *o)
{
    char cpu[256], gpu[256], host[256] = "";
    cpu_model(cpu, sizeof cpu);
    gpu_model(o->device, gpu, sizeof gpu);
    gethostname(host, sizeof host - 1);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return json_pack("{s:s,s:s,s:i,s:I,s:s,s:s}", "host", host, "cpu", cpu,
                     "cores", dlk_cpu_count(), "memory_bytes",
                     (json_int_t)(pages > 0 && psz > 0 ? (long long)pages * psz : 0),
                     "gpu", gpu, "library", dlk_version_string());
}

static json_t *dataset_json(const struct bench_result *r)
{
    json_t *ts = json_array();
    uint64_t rows = 0, stored = 0;
    for (size_t i = 0; i < dlk_dataset_ntensors(r->ds); i++) {
        dlk_tensor_info ti;
        char shape[128];
        if (dlk_tensor_info_get(r->ds, i, &ti, NULL))
            continue;
        if (ti.samples > rows)
            rows = ti.samples;
        stored += ti.stored_bytes;
        json_array_append_new(ts, json_pack(
            "{s:s,s:s,s:s,s:s,s:I,s:I}", "name", ti.name, "dtype",
            dlk_dtype_name(ti.dtype), "shape", cmd_shape(ti.shape, ti.ndim, shape),
            "codec", dlk_codec_name(ti.codec), "chunks", (json_int_t)ti.chunks,
            "stored_bytes", (json_int_t)ti.stored_bytes));
    }
    return json_pack("{s:s,s:I,s:I,s:o}", "url", dlk_dataset_url(r->ds),
                     "rows", (json_int_t)rows, "stored_bytes",
                     (json_int_t)stored, "tensors", ts);
}

/* The loader's buckets, times from the run's start, as rows of numbers
 * under named columns (a long run's JSON stays small). */
static json_t *timeline_json(const struct bench_result *r)
{
    json_t *rows = json_array();
    uint64_t per = 1;
    for (size_t i = 0; i < r->ntrace; i++) {
        const dlk_trace_bucket *b = &r->trace[i];
        if (b->batches > per)
            per = b->batches;
        json_array_append_new(rows, json_pack(
            "[I,I,I,I,I,f,f,f,f,f,f,f,I]", (json_int_t)b->first_batch,
            (json_int_t)b->batches, (json_int_t)b->samples,
            (json_int_t)b->epoch, (json_int_t)b->last_epoch, b->t0 - r->t0,
            b->t1 - r->t0, b->next_s, b->wait_s, b->late_s[DLK_LATE_QUEUED],
            b->late_s[DLK_LATE_STORAGE], b->late_s[DLK_LATE_H2D],
            (json_int_t)b->buffer_bytes));
    }
    json_t *series = json_array();
    for (size_t i = 0; i < r->nseries; i++) {
        const struct bench_point *p = &r->series[i];
        json_array_append_new(series, json_pack(
            "[f,I,I,I]", p->t, (json_int_t)p->rss, (json_int_t)p->requests,
            (json_int_t)p->bytes_read));
    }
    return json_pack(
        "{s:f,s:I,s:[s,s,s,s,s,s,s,s,s,s,s,s,s],s:o,s:[s,s,s,s],s:o}",
        "start_monotonic_s", r->t0, "batches_per_bucket", (json_int_t)per,
        "columns", "first_batch",
        "batches", "samples", "epoch", "last_epoch", "t0", "t1", "loader_s",
        "wait_s", "late_queued_s", "late_storage_s", "late_host_to_device_s",
        "buffer_bytes", "buckets", rows, "series_columns", "t", "rss",
        "requests", "bytes_read", "series", series);
}

/* A mix's sources: each one's weight (of one), the samples it gave and
 * their share of all, and the label mix of its rows. */
static json_t *sources_json(const struct bench_opts *o,
                            const struct bench_result *r)
{
    json_t *a = json_array();
    double sum = 0;
    for (size_t i = 0; i < r->nsrc; i++)
        sum += o->mix_w[i];
    for (size_t i = 0; a && i < r->nsrc; i++) {
        const struct bench_source *s = &r->src[i];
        char url[1024];
        json_array_append_new(a, json_pack(
            "{s:s,s:f,s:I,s:f,s:o}", "dataset",
            cmd_redact_url(o->mix_url[i], url, sizeof url), "weight",
            o->mix_w[i] / sum, "samples", (json_int_t)s->samples, "share",
            r->samples ? (double)s->samples / r->samples : 0, "label_mix",
            s->mix ? json_pack("{s:f,s:O}", "ratio", s->mix_worst,
                               "per_epoch", s->mix_epochs)
                   : json_null()));
    }
    return a;
}

/* The text lines of a mix's sources. */
static void sources_text(const struct bench_opts *o,
                         const struct bench_result *r)
{
    double sum = 0;
    for (size_t i = 0; i < r->nsrc; i++)
        sum += o->mix_w[i];
    for (size_t i = 0; i < r->nsrc; i++) {
        const struct bench_source *s = &r->src[i];
        char url[1024];
        printf("  source %zu %s: weight %.3f, %llu samples (%.3f of all)",
               i, cmd_safe_url(o->mix_url[i], url, sizeof url),
               o->mix_w[i] / sum, (unsigned long long)s->samples,
               r->samples ? (double)s->samples / r->samples : 0);
        if (s->mix)
            printf(", label mix %.2f", s->mix_worst);
        printf("\n");
    }
}

/* The run's figures: rates, busy and stalled time, the stages, the
 * loader's counters and its epochs; NULL when out of memory. */
static json_t *run_json(const struct bench_opts *o,
                        const struct bench_result *r, const struct derived *d)
{
    const dlk_loader_stats *st = &r->st;
    double wall = r->wall;
    char url[1024];
    json_t *o_ = json_pack(
        "{s:s,s:s,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:s,"
        "s:{s:f,s:f,s:f,s:f,s:f},s:f,s:f,s:o,s:I,s:I}",
        "dataset", cmd_redact_url(o->dataset, url, sizeof url),
        "device", o->device,
        "samples", (json_int_t)r->samples, "batches", (json_int_t)r->batches,
        "seconds", wall, "samples_per_s", r->samples / wall,
        "bytes_per_s", r->bytes / wall,
        "gpu_busy_pct", d->busy_pct,
        "stall_pct", d->stall_pct,
        "first_batch_s", r->first_batch,
        "requests", (json_int_t)(r->io.gets + r->io.heads + r->io.lists),
        "bytes_read", (json_int_t)r->io.bytes_read,
        "peak_rss_bytes", (json_int_t)r->rss,
        "peak_buffer_bytes", (json_int_t)st->peak_buffer_bytes,
        "bottleneck", bench_stage_names[d->worst],
        "stages", "storage", st->storage_s, "decompress", st->decompress_s,
        "host_to_device", st->h2d_s, "gather", st->gather_s,
        "step", st->step_s,
        "shuffle_displacement", r->mean_disp, "shuffle_neighbour_corr", r->corr,
        "checksum_ok", o->lo.check ? json_boolean(r->check_ok) : json_null(),
        "rank", (json_int_t)o->rank, "world", (json_int_t)o->world);
    if (!o_)
        return NULL;
    json_object_set_new(o_, "chunks_loaded", json_integer((json_int_t)st->chunks_loaded));
    json_object_set_new(o_, "chunks_verified",
                        json_integer((json_int_t)st->chunks_verified));
    json_object_set_new(o_, "reads_bad", json_integer((json_int_t)st->reads_bad));
    json_object_set_new(o_, "rows_replaced",
                        json_integer((json_int_t)st->rows_replaced));
    json_object_set(o_, "epochs", r->per_epoch);
    json_object_set_new(o_, "hedged_requests", json_integer((json_int_t)r->io.hedges));
    json_object_set_new(o_, "steady_bytes_per_s", json_real(r->best_steady));
    json_object_set_new(o_, "steady_busy_pct", json_real(r->steady_busy));
    json_object_set_new(o_, "pinned_copy_bytes_per_s", json_real(r->link_rate));
    return o_;
}

/* The label mix and the sources of a mixed run. */
static void mix_json(json_t *o_, const struct bench_opts *o,
                     const struct bench_result *r)
{
    json_object_set_new(o_, "label_mix", !r->mix ? json_null() : json_pack(
        "{s:s,s:f,s:O,s:f}", "tensor", label_mix_tensor(r->mix),
        "ratio", r->mix_worst, "per_epoch", r->mix_epochs, "random_tvd",
        label_mix_random_tvd(r->mix)));
    if (r->src)
        json_object_set_new(o_, "sources", sources_json(o, r));
}

/* An epoch's cost on S3, and the per-file baseline's figures beside. */
static void cost_json(json_t *o_, const struct bench_opts *o,
                      const struct bench_result *r, const struct derived *d)
{
    json_object_set_new(o_, "epoch_cost", json_pack(
        "{s:f,s:f,s:I,s:I,s:f}", "get_per_1000", o->price_get,
        "per_gb", o->price_gb, "requests", (json_int_t)d->ep_reqs,
        "bytes_read", (json_int_t)d->ep_bytes, "usd", d->ep_cost));
    if (r->have_baseline) {
        const dlk_baseline_result *br = &r->br;
        json_object_set_new(o_, "baseline", json_pack(
            "{s:s,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:{s:I,s:I,s:f}}", "source",
            o->baseline, "samples", (json_int_t)br->samples, "errors",
            (json_int_t)br->errors, "seconds", br->seconds,
            "samples_per_s", d->base_rate, "first_batch_s",
            br->first_batch_s, "gpu_busy_pct", br->busy_pct, "step_ms",
            o->step_ms, "epoch_cost", "requests",
            (json_int_t)br->files_listed, "bytes_read",
            (json_int_t)br->bytes_listed, "usd", d->base_cost));
        json_object_set_new(o_, "ratio_to_baseline",
                            json_real(d->base_rate > 0
                                      ? r->samples / r->wall / d->base_rate
                                      : 0));
    }
}

/* What the page draws: where the time went, and the flag most likely to
 * help. */
static void split_json(json_t *o_, const struct bench_opts *o,
                       const struct bench_result *r, const struct derived *d)
{
    /* what the page draws: where the time went, and the run's context */
    struct split s;
    time_split(o, r, d, &s);
    char flag[128], why[512];
    hint(o, r, d, &s, flag, sizeof flag, why, sizeof why);
    json_object_set_new(o_, "time_split", json_pack(
        "{s:f,s:f,s:f,s:f,s:f,s:{s:f,s:f,s:f},s:f,s:f}", "busy_pct", s.busy,
        "stalled_pct", s.stalled, "loader_pct", s.loader, "consumer_pct",
        s.consumer, "outside_pct", s.outside, "late_pct", "queued",
        s.late[DLK_LATE_QUEUED], "storage", s.late[DLK_LATE_STORAGE],
        "host_to_device", s.late[DLK_LATE_H2D], "wait_first_epoch_pct",
        s.wait_first_epoch, "wait_epoch_starts_pct", s.wait_epoch_starts));
    json_object_set_new(o_, "hint", json_pack("{s:s,s:s}", "flag", flag,
                                              "why", why));
}

/* The run's context: settings, machine, dataset, I/O threads, the chunk
 * cache and the timeline. */
static void context_json(json_t *o_, const struct bench_opts *o,
                         const struct bench_result *r)
{
    const dlk_loader_stats *st = &r->st;
    json_object_set_new(o_, "settings", settings_json(o, r));
    json_object_set_new(o_, "machine", machine_json(o));
    json_object_set_new(o_, "dataset_info", dataset_json(r));
    json_object_set_new(o_, "io_threads", json_integer(st->io_threads));
    json_object_set_new(o_, "bytes_loaded", json_integer((json_int_t)st->bytes_loaded));
    json_object_set_new(o_, "io_busy_s", json_real(st->io_busy_s));
    json_object_set_new(o_, "io_cpu_s", json_real(st->io_cpu_s));
    json_object_set_new(o_, "pin_s", json_real(st->pin_s));
    json_object_set_new(o_, "chunks_pinned",
                        json_integer((json_int_t)st->chunks_pinned));
    json_object_set_new(o_, "cache", !st->cache_on ? json_null() : json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:s?}", "hits", (json_int_t)st->cache_hits,
        "fetched", (json_int_t)st->cache_fetched, "evicted",
        (json_int_t)st->cache_evicted, "dropped",
        (json_int_t)st->cache_dropped, "limit", (json_int_t)st->cache_limit,
        "warning", st->cache_warning[0] ? st->cache_warning : NULL));
    json_object_set_new(o_, "timeline", timeline_json(r));
}

json_t *bench_json(const struct bench_opts *o, const struct bench_result *r)
{
    struct derived d;
    derive(o, r, &d);
    json_t *o_ = run_json(o, r, &d);
    if (!o_)
        return NULL;
    mix_json(o_, o, r);
    cost_json(o_, o, r, &d);
    split_json(o_, o, r, &d);
    context_json(o_, o, r);
    return o_;
}

/* The run's first lines: what ran where, its rates, each epoch's, the
 * line rate, the first batch and the busy time. */
static void print_run(const struct bench_opts *o, const struct bench_result *r,
                      const struct derived *d)
{
    double wall = r->wall;
    long epochs = o->epochs;
    char url[1024];
    printf("dlk bench-stream %s on %s (rank %ld of %ld)\n",
           cmd_safe_url(o->dataset, url, sizeof url),
           o->device, o->rank, o->world);
    if (o->lo.augment)
        printf("  augment %s\n", o->lo.augment);
    printf("  %llu samples in %llu batches, %.3f s: %.0f samples/s, "
           "%.2f GB/s\n", (unsigned long long)r->samples,
           (unsigned long long)r->batches, wall, r->samples / wall,
           r->bytes / wall / 1e9);
    if (r->st.reads_bad)
        printf("  unreadable (--on-bad skip): %llu failed read%s, %llu "
               "batch positions given other rows\n",
               (unsigned long long)r->st.reads_bad,
               r->st.reads_bad == 1 ? "" : "s",
               (unsigned long long)r->st.rows_replaced);
    for (size_t i = 0; epochs > 1 && i < json_array_size(r->per_epoch); i++) {
        json_t *ep = json_array_get(r->per_epoch, i);
        printf("  epoch %zu: %.3f s, %.0f samples/s, %.2f GB/s, busy "
               "%.1f%%, first batch %.4f s\n", i + 1,
               json_real_value(json_object_get(ep, "seconds")),
               json_real_value(json_object_get(ep, "samples_per_s")),
               json_real_value(json_object_get(ep, "bytes_per_s")) / 1e9,
               json_real_value(json_object_get(ep, "busy_pct")),
               json_real_value(json_object_get(ep, "first_batch_s")));
    }
    if (r->link_rate > 0)
        printf("  line rate: this GPU's pinned host-to-device copy %.2f GB/s "
               "(measured after the run); the %s moved %.0f%% of it\n",
               r->link_rate / 1e9, epochs > 1 ? "best epoch after the "
               "first" : "run", 100 * r->best_steady / r->link_rate);
    printf("  first batch %.3f s; %s busy %.1f%%, stalled %.1f%%\n",
           r->first_batch, r->on_device ? "GPU" : "consumer",
           d->busy_pct, d->stall_pct);
}

/* Where the time went, and where the waiting for chunks was. */
static void print_time_split(const struct bench_result *r,
                             const struct split *s)
{
    double wall = r->wall;
    if (r->on_device)
        printf("  time: GPU busy %.1f%% (gather and step kernels), idle "
               "%.1f%%; on the host: waiting for chunks %.1f%%, in the "
               "loader otherwise %.1f%% (planning epochs, queuing copies "
               "and gathers), the training loop %.1f%% (launching steps, "
               "this command's statistics), outside %.1f%% (before the "
               "first batch, after the last)\n", s->busy, s->stalled,
               100 * s->wait_s / wall, s->loader, s->consumer, s->outside);
    else
        printf("  time: busy %.1f%% (gathering batches and the step), "
               "stalled %.1f%% (waiting for chunks), the other %.1f%%: "
               "%.1f%% in the loader otherwise (planning epochs, releasing "
               "chunks), %.1f%% this command's own work per batch "
               "(checksums, statistics), %.1f%% outside (before the first "
               "batch, after the last)\n", s->busy, s->stalled,
               clamp_pct(100 - s->busy - s->stalled), s->loader, s->consumer,
               s->outside);
    if (s->wait_s > 0)
        printf("  stalls: %.0f%% of the waiting in the first epoch, %.0f%% "
               "at later epochs' starts (their first tenth), %.0f%% along "
               "the rest; waiting for chunks queued %.0f%%, in storage "
               "%.0f%%, in the copy to the device %.0f%%\n",
               s->wait_first_epoch, s->wait_epoch_starts,
               clamp_pct(100 - s->wait_first_epoch - s->wait_epoch_starts),
               s->late[DLK_LATE_QUEUED], s->late[DLK_LATE_STORAGE],
               s->late[DLK_LATE_H2D]);
}

/* The time in each stage and the flag most likely to help. */
static void print_stages(const struct bench_opts *o,
                         const struct bench_result *r,
                         const struct derived *d, const struct split *s)
{
    const dlk_loader_stats *st = &r->st;
    printf("  stages (s): storage %.3f, decompress %.3f, host-to-device "
           "%.3f, gather %.3f, step %.3f; bottleneck: %s\n", st->storage_s,
           st->decompress_s, st->h2d_s, st->gather_s, st->step_s,
           bench_stage_names[d->worst]);
    char flag[128], why[512];
    hint(o, r, d, s, flag, sizeof flag, why, sizeof why);
    if (flag[0])
        printf("  most likely to help: %s (%s)\n", flag, why);
    else if (why[0])
        printf("  most likely to help: %s\n", why);
}

/* Storage requests and memory, the chunk cache, the sources. */
static void print_storage(const struct bench_opts *o,
                          const struct bench_result *r)
{
    const dlk_loader_stats *st = &r->st;
    char b1[32], b2[32], b3[32];
    printf("  storage: %llu requests, %s read; peak RSS %s; chunk "
           "buffers peak %s\n",
           (unsigned long long)(r->io.gets + r->io.heads + r->io.lists),
           cmd_bytes(r->io.bytes_read, b1), cmd_bytes(r->rss, b2),
           cmd_bytes(st->peak_buffer_bytes, b3));
    if (st->cache_on)
        printf("  chunk cache: %llu reads from copies, %llu chunks fetched, "
               "%llu evicted, %llu damaged and fetched again (limit %s)\n",
               (unsigned long long)st->cache_hits,
               (unsigned long long)st->cache_fetched,
               (unsigned long long)st->cache_evicted,
               (unsigned long long)st->cache_dropped,
               cmd_bytes(st->cache_limit, b1));
    if (r->src)
        sources_text(o, r);
}

/* How well the order was shuffled, and the label mix. */
static void print_shuffle(const struct bench_opts *o,
                          const struct bench_result *r)
{
    long epochs = o->epochs;
    printf("  shuffle: mean displacement %.2f of a random permutation's, "
           "neighbour correlation %.3f%s\n", r->mean_disp, r->corr,
           r->src ? " (the first source's rows)" : "");
    if (r->mix) {
        printf("  label mix (%s): %.2f of a random permutation's in the "
               "worst epoch (1.0 is ideal", label_mix_tensor(r->mix),
               r->mix_worst);
        for (size_t i = 0; epochs > 1 && i < json_array_size(r->mix_epochs); i++)
            printf("%s%.2f", i ? " " : "; epochs ",
                   json_real_value(json_array_get(r->mix_epochs, i)));
        printf(")\n");
    }
}

/* The per-file baseline beside dlk, and an epoch's cost on S3. */
static void print_baseline(const struct bench_opts *o,
                           const struct bench_result *r,
                           const struct derived *d)
{
    double wall = r->wall;
    char b1[32], b2[32];
    const dlk_baseline_result *br = &r->br;
    if (r->have_baseline)
        printf("  per-file baseline (%s): %llu samples in %.2f s: %.0f "
               "samples/s, first batch %.3f s, %llu errors; dlk is %.1fx\n",
               o->baseline, (unsigned long long)br->samples, br->seconds,
               d->base_rate, br->first_batch_s, (unsigned long long)br->errors,
               d->base_rate > 0 ? r->samples / wall / d->base_rate : 0);
    if (r->have_baseline)
        printf("  %s busy with a %g ms step: dlk %.1f%%, per-file %.1f%% "
               "(%.0f against %.0f samples/s)\n",
               r->on_device ? "GPU" : "consumer", o->step_ms, d->busy_pct,
               br->busy_pct, r->samples / wall, d->base_rate);
    if (d->show_cost) {
        printf("  an epoch on S3 at $%g per 1000 GETs and $%g per GB: "
               "$%.6f (%llu requests, %s)", o->price_get, o->price_gb,
               d->ep_cost, (unsigned long long)d->ep_reqs,
               cmd_bytes(d->ep_bytes, b1));
        if (r->have_baseline)
            printf("; per-file $%.6f (%llu GETs, %s)", d->base_cost,
                   (unsigned long long)br->files_listed,
                   cmd_bytes(br->bytes_listed, b2));
        printf("\n");
    }
}

void bench_print_text(const struct bench_opts *o, const struct bench_result *r)
{
    struct derived d;
    derive(o, r, &d);
    print_run(o, r, &d);
    struct split s;
    time_split(o, r, &d, &s);
    print_time_split(r, &s);
    print_stages(o, r, &d, &s);
    print_storage(o, r);
    print_shuffle(o, r);
    print_baseline(o, r, &d);
    if (o->lo.check)
        printf("  checksum: device %016llx, cpu %016llx: %s\n",
               (unsigned long long)r->dev_sum, (unsigned long long)r->host_sum,
               r->check_ok ? "equal" : "DIFFERENT");
}

int bench_verdict(const struct bench_opts *o, const struct bench_result *r)
{
    (void)o;
    if (r->st.cache_warning[0])
        fprintf(stderr, "dlk bench-stream: warning: %s\n",
                r->st.cache_warning);
    if (r->mix && r->mix_worst > MIX_WARN)
        fprintf(stderr, "dlk bench-stream: warning: batches mix the classes "
                "of '%s' %.1fx worse than a random permutation: the rows are "
                "likely stored in class order (re-ingest with --order "
                "shuffled, or stream with --shuffle and a larger --window)\n",
                label_mix_tensor(r->mix), r->mix_worst);
    if (!r->check_ok) {
        cmd_error("bench-stream", "the device's checksum differs from the "
                  "cpu's: wrong bytes arrived");
        return EXIT_PROBLEMS;
    }
    return EXIT_OK;
}

/* --report's name for this rank: %r is the rank; in a world of several
 * without %r, ranks above 0 add .rankR before the extension so that ranks
 * on a shared file system do not write over each other. */
static char *report_path(const struct bench_opts *o)
{
    const char *f = o->report;
    size_t cap = strlen(f) + 64;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    if (strstr(f, "%r")) {
        size_t n = 0;
        for (const char *p = f; *p && n + 24 < cap; p++) {
            if (p[0] == '%' && p[1] == 'r') {
                n += (size_t)snprintf(out + n, cap - n, "%ld", o->rank);
                p++;
            } else {
                out[n++] = *p;
            }
        }
        out[n] = 0;
        return out;
    }
    if (o->world > 1 && o->rank > 0) {
        const char *slash = strrchr(f, '/');
        const char *dot = strrchr(f, '.');
        if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : f))
            dot = f + strlen(f);
        snprintf(out, cap, "%.*s.rank%ld%s", (int)(dot - f), f, o->rank, dot);
        return out;
    }
    snprintf(out, cap, "%s", f);
    return out;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

int bench_open_report(struct bench_opts *o)
{
    if (!o->report)
        return EXIT_OK;
    if (!(o->report_path = report_path(o))) {
        cmd_error("bench-stream", "out of memory");
        return EXIT_ERROR;
    }
    /* opened before the run: a bad path fails at once, not after it */
    if (!(o->report_f = fopen(o->report_path, "w"))) {
        cmd_error("bench-stream", "cannot write '%s': %s", o->report_path,
                  strerror(errno));
        return EXIT_ERROR;
    }
    return EXIT_OK;
}

int bench_write_report(struct bench_opts *o, json_t *report)
{
    FILE *f = o->report_f;
    o->report_f = NULL;
    errno = 0;
    int rc;
    if (ends_with(o->report_path, ".json"))
        rc = json_dumpf(report, f, JSON_PRESERVE_ORDER | JSON_INDENT(1));
    else
        rc = report_html_write(f, &report, 1);
    if ((rc | ferror(f) | fclose(f)) != 0) {
        cmd_error("bench-stream", "cannot write '%s': %s", o->report_path,
                  errno ? strerror(errno) : "write failed");
        return EXIT_ERROR;
    }
    return EXIT_OK;
}
