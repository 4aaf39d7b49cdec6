/* bench_stream.h - dlk bench-stream in three parts: the options parsed
 * (bench_stream.c), the run (bench_stream_run.c) and its report as text
 * or JSON (bench_stream_report.c); the HTML page is report_html.c. */
#ifndef DLK_BENCH_STREAM_H
#define DLK_BENCH_STREAM_H

#include "cmd.h"
#include "label_mix.h"

#include <stdint.h>

/* What the command line asked for. */
struct bench_opts {
    dlk_loader_opts lo;
    const char *dataset, *device, *at, *tensors, *baseline, *order_out,
               *report;
    double baseline_s, step_ms;
    double price_get, price_gb;  /* dollars per 1000 GETs, per GB */
    bool price_given, json;
    long epochs, rank, world;
    char devbuf[32];
    char *tlist;                 /* --tensors, split into names */
    char *names[256];
    /* --mix URL=W,...: the sources (no DATASET) and their weights */
#define BENCH_MIX_MAX 64
    const char *mix_url[BENCH_MIX_MAX];
    double mix_w[BENCH_MIX_MAX];
    size_t nmix;
    char *mix_text[BENCH_MIX_MAX]; /* the flags' copies the urls point in */
    size_t nmix_text;
    char *report_path;           /* --report's, for this rank */
    FILE *report_f;
    int argc;                    /* the command line, for the report */
    char **argv;
};

/* Memory and storage requests over the run, sampled by time in a fixed
 * number of points (every other one dropped when full). */
#define BENCH_SERIES_MAX 256
struct bench_point {
    double t;                    /* seconds since the run began */
    uint64_t rss, requests, bytes_read;
};

/* A mix's source, as the run saw it. */
struct bench_source {
    dlk_dataset *ds;
    label_mix *mix;              /* its rows' label mix, or NULL */
    json_t *mix_epochs;
    double mix_worst;
    uint64_t samples;            /* its rows delivered (padding not) */
};

/* What a run measured. */
struct bench_result {
    dlk_dataset *ds;             /* the dataset (a mix: its first source) */
    struct bench_source *src;    /* a mix's sources (nsrc), else NULL */
    size_t nsrc;
    dlk_loader *l;
    double t_open, t0, wall, first_batch;
    uint64_t samples, bytes, batches;
    json_t *per_epoch, *mix_epochs;
    double mix_worst, best_steady, steady_busy;
    double run_s, run_busy_s;    /* the epochs together, device's clock */
    double mean_disp, corr;
    label_mix *mix;
    dlk_loader_stats st;
    uint64_t dev_sum, host_sum, rss;
    dlk_io_counters io;
    bool on_device, check_ok;
    dlk_baseline_result br;
    bool have_baseline;
    double link_rate;            /* the GPU's pinned copy, bytes/s, after
                                    the run (0: not measured) */
    dlk_trace_bucket *trace;     /* the loader's timeline */
    size_t ntrace;
    struct bench_point series[BENCH_SERIES_MAX];
    size_t nseries;
    double series_every;         /* seconds between points */
};

/* The stages' times per thread doing them, largest first of the names
 * BENCH_STAGES lists; `bench_bottleneck` is the largest's index. */
#define BENCH_NSTAGES 5
extern const char *const bench_stage_names[BENCH_NSTAGES];
void bench_stage_times(const dlk_loader_stats *st, double out[BENCH_NSTAGES]);
size_t bench_bottleneck(const dlk_loader_stats *st);

/* Open the dataset and loader, stream, measure: an exit code (errors
 * printed).  The result's arrays are freed by bench_result_free. */
int bench_run(struct bench_opts *o, struct bench_result *r);
void bench_result_free(struct bench_result *r);

/* The report: the JSON object (--json, --report FILE.json and the HTML
 * page are drawn from it) and the text. */
json_t *bench_json(const struct bench_opts *o, const struct bench_result *r);
void bench_print_text(const struct bench_opts *o,
                      const struct bench_result *r);
/* After the report: the label-mix warning, and EXIT_PROBLEMS when the
 * device's checksum differs from the cpu's. */
int bench_verdict(const struct bench_opts *o, const struct bench_result *r);
/* --report's file, under this rank's name (%r, or .rankR in a world of
 * several), opened before the run; then written (HTML, or JSON for a
 * name ending in .json) and closed.  Exit codes, errors printed. */
int bench_open_report(struct bench_opts *o);
int bench_write_report(struct bench_opts *o, json_t *report);

#endif
