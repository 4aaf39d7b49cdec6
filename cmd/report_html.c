/* report_html.c - bench-stream's reports (one per rank) drawn as one
 * self-contained HTML page: inline SVG charts and CSS, no script and no
 * URL, so the file opens offline and anywhere.  Everything drawn comes
 * from the JSON report (bench_stream_report.c), so `dlk bench-report`
 * draws what ranks wrote earlier the same way.  Each chart's plot area
 * has its own near-white background (PLOT_BG) so that a test can find it
 * in a screenshot and check something was drawn on it. */
#include "report_html.h"
#include "cmd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 960                      /* chart width, px */
#define ML 78                      /* margins of the plot area */
#define MR 16
#define MT 12
#define MB 38

/* Colours: one per rank, and one per kind of time. */
static const char *const rank_colour[] = {
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd",
    "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
};
#define NRANK_COLOURS (sizeof rank_colour / sizeof rank_colour[0])
#define C_CONSUMER "#4caf50"
#define C_LOADER "#9e9e9e"
#define C_QUEUED "#ff9800"
#define C_STORAGE "#e53935"
#define C_H2D "#8e24aa"
#define C_OUTSIDE "#cfd8dc"
#define C_BASELINE "#455a64"

/* The plot areas' backgrounds, one per chart (see the file's comment). */
enum { BG_TIMELINE, BG_RATE, BG_SPLIT, BG_STAGES, BG_MEMORY, BG_REQUESTS,
       BG_BYTES, BG_BASELINE, BG_N };
static const char *const plot_bg[BG_N] = {
    "#f4f6fb", "#f6f4fb", "#f4fbf6", "#fbf6f4",
    "#f4fafb", "#fbf4f8", "#f8fbf4", "#f7f7f2",
};

/* One rank's report and where its arrays' columns are. */
struct rank {
    json_t *j;
    long rank;
    const char *colour;
    json_t *buckets, *series;
    int c_first, c_batches, c_samples, c_epoch, c_last_epoch, c_t0, c_t1,
        c_loader, c_wait, c_queued, c_storage, c_h2d, c_buffer;
    int s_t, s_rss, s_requests, s_bytes;
    double wall;
};

static double num(json_t *v)
{
    return json_is_integer(v) ? (double)json_integer_value(v)
                              : json_real_value(v);
}

static double get(json_t *o, const char *key)
{
    return num(json_object_get(o, key));
}

static double get2(json_t *o, const char *a, const char *b)
{
    return num(json_object_get(json_object_get(o, a), b));
}

static const char *str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* a bucket's or a point's column; 0 for a missing one */
static double cell(json_t *rows, size_t i, int col)
{
    return col < 0 ? 0 : num(json_array_get(json_array_get(rows, i),
                                            (size_t)col));
}

static int column(json_t *names, const char *name)
{
    for (size_t i = 0; i < json_array_size(names); i++)
        if (!strcmp(json_string_value(json_array_get(names, i)) ?: "", name))
            return (int)i;
    return -1;
}

/* Text in HTML or SVG: the five XML escapes only (SVG is XML: no HTML
 * entity names). */
static void esc(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            /* control characters are not XML */
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, f);
        }
}

/* A round number at least v (an axis' end), so that its fifths read
 * well. */
static double nice(double v)
{
    if (!(v > 0) || !isfinite(v))
        return 1;
    static const double steps[] = {1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8};
    double p = pow(10, floor(log10(v)));
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (steps[i] * p >= v * 0.9999)
            return steps[i] * p;
    return 10 * p;
}

enum unit { U_PLAIN, U_BYTES, U_PCT, U_SECONDS };

static void fmt(char *buf, size_t cap, double v, enum unit u)
{
    static const char *const si[] = {"", "k", "M", "G", "T", "P"};
    static const char *const bi[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int k = 0;
    switch (u) {
    case U_BYTES:
        while (fabs(v) >= 1024 && k < 5) {
            v /= 1024;
            k++;
        }
        snprintf(buf, cap, v < 10 && k ? "%.1f %s" : "%.0f %s", v, bi[k]);
        return;
    case U_PCT:
        snprintf(buf, cap, "%.0f%%", v);
        return;
    case U_SECONDS:
        snprintf(buf, cap, v < 10 ? "%.2g s" : "%.0f s", v);
        return;
    default:
        while (fabs(v) >= 1000 && k < 5) {
            v /= 1000;
            k++;
        }
        snprintf(buf, cap, v < 10 && k ? "%.1f%s" : "%.0f%s", v, si[k]);
    }
}

/* A plot area and its scales. */
struct plot {
    double x0, y0, w, h, xmax, ymax;
};

static double px(const struct plot *p, double x)
{
    return p->x0 + p->w * (x < 0 ? 0 : x > p->xmax ? p->xmax : x) / p->xmax;
}

static double py(const struct plot *p, double y)
{
    return p->y0 + p->h - p->h * (y < 0 ? 0 : y > p->ymax ? p->ymax : y) /
                              p->ymax;
}

static void svg_open(FILE *f, const char *id, int height, const char *title)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" "
            "id=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "role=\"img\" aria-label=\"", id, W, height, W, height);
    esc(f, title);
    fputs("\">\n", f);
}

/* The frame, ticks and labels of a plot with a numeric x and y axis. */
static void axes(FILE *f, const struct plot *p, int bg, const char *xlabel,
                 enum unit xu, const char *ylabel, enum unit yu)
{
    char b[64];
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
            "fill=\"%s\"/>\n", p->x0, p->y0, p->w, p->h, plot_bg[bg]);
    for (int i = 0; i <= 5; i++) {
        double y = p->ymax * i / 5, yy = py(p, y);
        fmt(b, sizeof b, y, yu);
        /* lanes and bars (no y label) have no y scale */
        if (*ylabel)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                    "y2=\"%.1f\" class=\"grid\"/><text x=\"%.1f\" "
                    "y=\"%.1f\" class=\"yt\">%s</text>\n", p->x0, yy,
                    p->x0 + p->w, yy, p->x0 - 4, yy + 4, b);
        double x = p->xmax * i / 5, xx = px(p, x);
        fmt(b, sizeof b, x, xu);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "class=\"tick\"/><text x=\"%.1f\" y=\"%.1f\" "
                "class=\"xt\">%s</text>\n", xx, p->y0 + p->h, xx,
                p->y0 + p->h + 4, xx, p->y0 + p->h + 16, b);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
            "class=\"frame\"/>\n", p->x0, p->y0, p->w, p->h);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"xl\">", p->x0 + p->w / 2,
            p->y0 + p->h + 32);
    esc(f, xlabel);
    fprintf(f, "</text><text transform=\"translate(14 %.1f) rotate(-90)\" "
            "class=\"yl\">", p->y0 + p->h / 2);
    esc(f, ylabel);
    fputs("</text>\n", f);
}

/* The times at which an epoch begins, from the buckets (a bucket that
 * spans a boundary puts it at its middle); returns how many. */
static size_t epoch_marks(const struct rank *r, double *out, size_t cap)
{
    size_t n = 0;
    size_t nb = json_array_size(r->buckets);
    for (size_t i = 0; i < nb && n < cap; i++) {
        double e = cell(r->buckets, i, r->c_epoch),
               le = cell(r->buckets, i, r->c_last_epoch);
        double t0 = cell(r->buckets, i, r->c_t0), t1 = cell(r->buckets, i, r->c_t1);
        if (i && e != cell(r->buckets, i - 1, r->c_last_epoch))
            out[n++] = t0;
        if (le != e && n < cap)
            out[n++] = (t0 + t1) / 2;
    }
    return n;
}

static void draw_epochs(FILE *f, const struct plot *p, const struct rank *r,
                        double y0, double y1)
{
    double marks[64];
    size_t n = epoch_marks(r, marks, 64);
    for (size_t i = 0; i < n; i++) {
        double x = px(p, marks[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "class=\"epoch\"/>", x, y0, x, y1);
        if (n <= 20)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"el\">epoch "
                    "%zu</text>", x + 3, y0 + 10, i + 2);
    }
    fputc('\n', f);
}

/* The longest time any rank's run (or the baseline) covers. */
static double time_span(const struct rank *rk, size_t n, bool baseline)
{
    double t = 0;
    for (size_t i = 0; i < n; i++) {
        if (rk[i].wall > t)
            t = rk[i].wall;
        size_t nb = json_array_size(rk[i].buckets);
        if (nb && cell(rk[i].buckets, nb - 1, rk[i].c_t1) > t)
            t = cell(rk[i].buckets, nb - 1, rk[i].c_t1);
        json_t *b = json_object_get(rk[i].j, "baseline");
        if (baseline && b && get(b, "seconds") > t)
            t = get(b, "seconds");
    }
    return t > 0 ? t : 1;
}

static void legend_item(FILE *f, const char *colour, const char *text)
{
    fprintf(f, "<span class=\"key\"><i style=\"background:%s\"></i>", colour);
    esc(f, text);
    fputs("</span>", f);
}

/* 1. Per rank a lane: each bucket of batches as wide as its time, split
 * into the consumer's time, the loader's and the waits by late stage. */
static void chart_timeline(FILE *f, const struct rank *rk, size_t n)
{
    /* lanes sit inside the plot area with a gap around each, so that
     * its background shows however full they are */
    const int lane = 64, gap = 10;
    int height = MT + (int)n * (lane + gap) + gap + MB;
    struct plot p = {ML, MT, W - ML - MR, (double)n * (lane + gap) + gap,
                     nice(time_span(rk, n, false)), 1};
    svg_open(f, "timeline", height, "timeline of the batches per rank");
    axes(f, &p, BG_TIMELINE, "seconds since the run began", U_SECONDS, "",
         U_PLAIN);
    for (size_t r = 0; r < n; r++) {
        const struct rank *k = &rk[r];
        double y0 = MT + gap + (double)r * (lane + gap);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"lane\">rank %ld</text>\n",
                ML - 6, y0 + lane / 2.0 + 4, k->rank);
        size_t nb = json_array_size(k->buckets);
        for (size_t i = 0; i < nb; i++) {
            double t0 = cell(k->buckets, i, k->c_t0),
                   t1 = cell(k->buckets, i, k->c_t1);
            double dur = t1 - t0;
            if (!(dur > 0))
                continue;
            double x0 = px(&p, t0), x1 = px(&p, t1);
            double wdt = x1 - x0 < 0.6 ? 0.6 : x1 - x0;
            double loader = cell(k->buckets, i, k->c_loader),
                   wait = cell(k->buckets, i, k->c_wait);
            double part[5] = {
                dur - loader, loader - wait,
                cell(k->buckets, i, k->c_queued),
                cell(k->buckets, i, k->c_storage),
                cell(k->buckets, i, k->c_h2d),
            };
            static const char *const colour[5] = {C_CONSUMER, C_LOADER,
                                                  C_QUEUED, C_STORAGE, C_H2D};
            double y = y0 + lane;
            for (int c = 0; c < 5; c++) {
                double hgt = part[c] > 0 ? lane * part[c] / dur : 0;
                if (hgt > y - y0)
                    hgt = y - y0;
                if (hgt < 0.05)
                    continue;
                y -= hgt;
                fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                        "height=\"%.2f\" fill=\"%s\"/>", x0, y, wdt, hgt,
                        colour[c]);
            }
            /* the bucket's figures on hover */
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                    "height=\"%d\" class=\"hover\"><title>rank %ld, batches "
                    "%.0f-%.0f (epoch %.0f), %.3f-%.3f s: consumer %.1f ms, "
                    "loader %.1f ms, waiting %.1f ms (queued %.1f, storage "
                    "%.1f, host-to-device %.1f)</title></rect>\n", x0, y0,
                    wdt, lane, k->rank, cell(k->buckets, i, k->c_first),
                    cell(k->buckets, i, k->c_first) +
                        cell(k->buckets, i, k->c_batches) - 1,
                    cell(k->buckets, i, k->c_epoch) + 1, t0, t1,
                    1e3 * part[0], 1e3 * part[1], 1e3 * wait, 1e3 * part[2],
                    1e3 * part[3], 1e3 * part[4]);
        }
        draw_epochs(f, &p, k, y0, y0 + lane);
    }
    fputs("</svg>\n<div class=\"keys\">", f);
    legend_item(f, C_CONSUMER, "consumer (between batches: the step)");
    legend_item(f, C_LOADER, "in the loader, not waiting");
    legend_item(f, C_QUEUED, "waiting: chunk queued");
    legend_item(f, C_STORAGE, "waiting: chunk in storage");
    legend_item(f, C_H2D, "waiting: chunk's copy to the device");
    fputs("</div>\n", f);
}

/* Samples per second in `nbins` equal bins of [0, span): each bucket's
 * samples spread evenly over its time (a bucket of one batch that was
 * ready at once would otherwise read as a spike). */
#define RATE_BINS 120
static void rate_bins(const struct rank *k, double span, double *out)
{
    double bw = span / RATE_BINS;
    memset(out, 0, RATE_BINS * sizeof *out);
    for (size_t i = 0; i < json_array_size(k->buckets); i++) {
        double t0 = cell(k->buckets, i, k->c_t0),
               t1 = cell(k->buckets, i, k->c_t1),
               s = cell(k->buckets, i, k->c_samples);
        if (!(t1 > t0))
            continue;
        for (int b = (int)(t0 / bw); b < RATE_BINS && b * bw < t1; b++) {
            double lo = fmax(t0, b * bw), hi = fmin(t1, (b + 1) * bw);
            if (b >= 0 && hi > lo)
                out[b] += s * (hi - lo) / (t1 - t0) / bw;
        }
    }
}

/* The rate's end: where the last batch of a rank came, the bin there is
 * partly empty; drop bins after it. */
static int rate_last_bin(const struct rank *k, double span)
{
    size_t nb = json_array_size(k->buckets);
    double t = nb ? cell(k->buckets, nb - 1, k->c_t1) : 0;
    int b = (int)(t / (span / RATE_BINS));
    return b >= RATE_BINS ? RATE_BINS - 1 : b;
}

/* 2. Samples per second over time, per rank; the baseline's average. */
static void chart_rate(FILE *f, const struct rank *rk, size_t n)
{
    double span = nice(time_span(rk, n, true)), ymax = 0;
    double (*bins)[RATE_BINS] = calloc(n ? n : 1, sizeof *bins);
    if (!bins)
        return;
    for (size_t r = 0; r < n; r++) {
        rate_bins(&rk[r], span, bins[r]);
        for (int b = 0; b < rate_last_bin(&rk[r], span); b++)
            if (bins[r][b] > ymax)
                ymax = bins[r][b];
        json_t *base = json_object_get(rk[r].j, "baseline");
        if (base && get(base, "samples_per_s") > ymax)
            ymax = get(base, "samples_per_s");
    }
    int height = 260;
    struct plot p = {ML, MT, W - ML - MR, height - MT - MB, span,
                     nice(ymax * 1.05)};
    svg_open(f, "rate", height, "samples per second over time");
    axes(f, &p, BG_RATE, "seconds since the run began", U_SECONDS,
         "samples/s", U_PLAIN);
    draw_epochs(f, &p, &rk[0], p.y0, p.y0 + p.h);
    for (size_t r = 0; r < n; r++) {
        const struct rank *k = &rk[r];
        fprintf(f, "<polyline class=\"line\" stroke=\"%s\" points=\"",
                k->colour);
        double bw = span / RATE_BINS;
        for (int b = 0; b <= rate_last_bin(k, span); b++)
            fprintf(f, "%.1f,%.1f %.1f,%.1f ", px(&p, b * bw),
                    py(&p, bins[r][b]), px(&p, (b + 1) * bw),
                    py(&p, bins[r][b]));
        fputs("\"/>\n", f);
        json_t *b = json_object_get(k->j, "baseline");
        if (b) {
            double v = get(b, "samples_per_s");
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                    "class=\"base\"><title>per-file baseline, rank %ld: "
                    "%.0f samples/s on average</title></line><text x=\"%.1f\" "
                    "y=\"%.1f\" class=\"bl\">per-file baseline (rank %ld)"
                    "</text>\n", px(&p, get(b, "first_batch_s")), py(&p, v),
                    px(&p, get(b, "seconds")), py(&p, v), k->rank, v,
                    px(&p, get(b, "first_batch_s")) + 4, py(&p, v) - 4,
                    k->rank);
        }
    }
    fputs("</svg>\n<div class=\"keys\">", f);
    for (size_t r = 0; r < n && r < 16; r++) {
        char b[32];
        snprintf(b, sizeof b, "rank %ld", rk[r].rank);
        legend_item(f, rk[r].colour, b);
    }
    for (size_t r = 0; r < n; r++)
        if (json_object_get(rk[r].j, "baseline")) {
            legend_item(f, C_BASELINE, "per-file baseline's average "
                        "(dashed), from its first batch to its end");
            break;
        }
    fputs("</div>\n", f);
    free(bins);
}

/* Horizontal stacked bars, one per rank, of parts in `unit`. */
static void stacked_bars(FILE *f, const char *id, int bg, const char *title,
                         const struct rank *rk, size_t n, int nparts,
                         double (*part)(const struct rank *, int),
                         const char *const *colour,
                         const char *const *name, enum unit u, double xmax)
{
    const int bar = 26, gap = 8;
    int height = MT + (int)n * (bar + gap) + gap + MB;
    if (xmax <= 0) {
        for (size_t r = 0; r < n; r++) {
            double s = 0;
            for (int c = 0; c < nparts; c++)
                s += part(&rk[r], c) > 0 ? part(&rk[r], c) : 0;
            if (s > xmax)
                xmax = s;
        }
        xmax = nice(xmax);
    }
    struct plot p = {ML, MT, W - ML - MR, (double)n * (bar + gap) + gap,
                     xmax, 1};
    svg_open(f, id, height, title);
    axes(f, &p, bg, u == U_PCT ? "% of the run's wall time"
                               : "seconds (per thread doing it)", u, "",
         U_PLAIN);
    for (size_t r = 0; r < n; r++) {
        double y = MT + gap + (double)r * (bar + gap), x = 0;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"lane\">rank %ld</text>\n",
                ML - 6, y + bar / 2.0 + 4, rk[r].rank);
        for (int c = 0; c < nparts; c++) {
            double v = part(&rk[r], c);
            if (!(v > 0))
                continue;
            double x0 = px(&p, x), x1 = px(&p, x + v);
            char b[32];
            fmt(b, sizeof b, v, u);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                    "height=\"%d\" fill=\"%s\"><title>rank %ld, ", x0, y,
                    x1 - x0 < 0.5 ? 0.5 : x1 - x0, bar, colour[c], rk[r].rank);
            esc(f, name[c]);
            fprintf(f, ": %s</title></rect>", b);
            if (x1 - x0 > 44)
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"in\">%s"
                        "</text>", (x0 + x1) / 2, y + bar / 2.0 + 4, b);
            fputc('\n', f);
            x += v;
        }
    }
    fputs("</svg>\n<div class=\"keys\">", f);
    for (int c = 0; c < nparts; c++)
        legend_item(f, colour[c], name[c]);
    fputs("</div>\n", f);
}

static double split_part(const struct rank *r, int c)
{
    static const char *const key[] = {"busy_pct", "stalled_pct", "loader_pct",
                                      "consumer_pct", "outside_pct"};
    json_t *s = json_object_get(r->j, "time_split");
    /* on a GPU busy and idle are the device's: the host's parts are
     * another view of the same time, drawn in the text instead */
    if (strncmp(str(r->j, "device"), "cuda", 4) == 0 && c >= 2)
        return 0;
    return get(s, key[c]);
}

static double stage_part(const struct rank *r, int c)
{
    static const char *const key[] = {"storage", "decompress",
                                      "host_to_device", "gather", "step"};
    double v = get2(r->j, "stages", key[c]);
    double threads = get(r->j, "io_threads");
    if (c < 2 && threads > 1)
        v /= threads; /* shared by the I/O threads */
    return v;
}

/* Lines over time of one column of the buckets or the series. */
static void series_line(FILE *f, const struct plot *p, json_t *rows,
                        int tcol, int vcol, const char *colour,
                        const char *dash)
{
    fprintf(f, "<polyline class=\"line\" stroke=\"%s\"%s points=\"", colour,
            dash);
    for (size_t i = 0; i < json_array_size(rows); i++)
        fprintf(f, "%.1f,%.1f ", px(p, cell(rows, i, tcol)),
                py(p, cell(rows, i, vcol)));
    fputs("\"/>\n", f);
}

static double column_max(json_t *rows, int col)
{
    double m = 0;
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (cell(rows, i, col) > m)
            m = cell(rows, i, col);
    return m;
}

/* 4.-6. Memory, requests and bytes read over time. */
static void chart_over_time(FILE *f, const char *id, int bg,
                            const char *title, const char *ylabel,
                            enum unit u, const struct rank *rk, size_t n,
                            int what)
{
    double ymax = 0;
    for (size_t r = 0; r < n; r++) {
        const struct rank *k = &rk[r];
        double m = what == 0 ? fmax(column_max(k->series, k->s_rss),
                                    column_max(k->buckets, k->c_buffer))
                 : column_max(k->series, what == 1 ? k->s_requests
                                                   : k->s_bytes);
        if (m > ymax)
            ymax = m;
    }
    int height = 230;
    struct plot p = {ML, MT, W - ML - MR, height - MT - MB,
                     nice(time_span(rk, n, false)), nice(ymax * 1.05)};
    svg_open(f, id, height, title);
    axes(f, &p, bg, "seconds since the run began", U_SECONDS, ylabel, u);
    draw_epochs(f, &p, &rk[0], p.y0, p.y0 + p.h);
    for (size_t r = 0; r < n; r++) {
        const struct rank *k = &rk[r];
        if (what == 0) {
            series_line(f, &p, k->series, k->s_t, k->s_rss, k->colour, "");
            series_line(f, &p, k->buckets, k->c_t1, k->c_buffer, k->colour,
                        " stroke-dasharray=\"5 3\"");
        } else {
            series_line(f, &p, k->series, k->s_t,
                        what == 1 ? k->s_requests : k->s_bytes, k->colour,
                        "");
        }
    }
    fputs("</svg>\n", f);
}

/* 7. dlk against the per-file baseline, per rank that ran one. */
static void chart_baseline(FILE *f, const struct rank *rk, size_t n)
{
    size_t nb = 0;
    for (size_t r = 0; r < n; r++)
        nb += json_object_get(rk[r].j, "baseline") != NULL;
    if (!nb)
        return;
    fputs("<h2>dlk beside the per-file baseline</h2>\n", f);
    static const char *const what[] = {"samples/s", "busy %",
                                       "first batch (s)"};
    int height = MT + 3 * 2 * 22 + 3 * 14 + MB;
    svg_open(f, "baseline", height, "dlk against the per-file baseline");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
            "fill=\"%s\"/>\n", ML + 90, MT, W - ML - MR - 90,
            height - MT - MB, plot_bg[BG_BASELINE]);
    const struct rank *k = &rk[0];
    for (size_t r = 0; r < n; r++)
        if (json_object_get(rk[r].j, "baseline")) {
            k = &rk[r];
            break;
        }
    json_t *b = json_object_get(k->j, "baseline");
    double v[3][2] = {
        {get(k->j, "samples_per_s"), get(b, "samples_per_s")},
        {get(k->j, "gpu_busy_pct"), get(b, "gpu_busy_pct")},
        {get(k->j, "first_batch_s"), get(b, "first_batch_s")},
    };
    double y = MT + 4;
    for (int m = 0; m < 3; m++) {
        double mx = nice(fmax(v[m][0], v[m][1]) * 1.05);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"lane\">%s</text>\n",
                ML + 84, y + 24, what[m]);
        for (int s = 0; s < 2; s++) {
            double wdt = (W - ML - MR - 90 - 120) * (mx > 0 ? v[m][s] / mx : 0);
            char val[32];
            snprintf(val, sizeof val, m == 2 ? "%.3f" : "%.1f", v[m][s]);
            fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"18\" "
                    "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\" class=\"val\">"
                    "%s %s</text>\n", ML + 92, y, wdt < 0.5 ? 0.5 : wdt,
                    s ? C_BASELINE : k->colour, ML + 96 + wdt, y + 14,
                    s ? "per-file" : "dlk", val);
            y += 22;
        }
        y += 14;
    }
    fprintf(f, "</svg>\n<p class=\"how\">Rank %ld's run beside the same "
            "rank's per-file baseline: one GET and one decode per sample "
            "from <code>", k->rank);
    esc(f, str(b, "source"));
    fputs("</code>, same batch size, workers and step. Longer is better "
          "for samples/s and busy, shorter for the first batch. The "
          "baseline's rate is also the dashed line on the samples/s "
          "chart.</p>\n", f);
}

static void row(FILE *f, const char *k, const char *v)
{
    fputs("<tr><th>", f);
    esc(f, k);
    fputs("</th><td>", f);
    esc(f, v);
    fputs("</td></tr>\n", f);
}

/* Settings, machine and dataset of each rank. */
static void tables(FILE *f, const struct rank *rk, size_t n)
{
    fputs("<h2>Settings, machine and dataset</h2>\n<div class=\"tables\">",
          f);
    for (size_t r = 0; r < n; r++) {
        json_t *j = rk[r].j, *s = json_object_get(j, "settings"),
               *m = json_object_get(j, "machine"),
               *d = json_object_get(j, "dataset_info");
        char b[256], b2[32];
        fprintf(f, "<table><caption>rank %ld</caption>\n", rk[r].rank);
        row(f, "command", str(s, "command"));
        row(f, "device", str(j, "device"));
        snprintf(b, sizeof b, "%s", *str(m, "gpu") ? str(m, "gpu") : "-");
        row(f, "GPU", b);
        double link = get(j, "pinned_copy_bytes_per_s");
        if (link > 0) {
            snprintf(b, sizeof b, "pinned host-to-device copy %.2f GB/s "
                     "(after the run); the steady rate %.0f%% of it",
                     link / 1e9, 100 * get(j, "steady_bytes_per_s") / link);
            row(f, "line rate", b);
        }
        row(f, "CPU", str(m, "cpu"));
        snprintf(b, sizeof b, "%.0f usable, %s memory", get(m, "cores"),
                 cmd_bytes((unsigned long long)get(m, "memory_bytes"), b2));
        row(f, "cores", b);
        row(f, "host", str(m, "host"));
        row(f, "dataset", str(j, "dataset"));
        snprintf(b, sizeof b, "%.0f rows, %s stored", get(d, "rows"),
                 cmd_bytes((unsigned long long)get(d, "stored_bytes"), b2));
        row(f, "rows", b);
        json_t *ts = json_object_get(d, "tensors");
        for (size_t i = 0; i < json_array_size(ts); i++) {
            json_t *t = json_array_get(ts, i);
            snprintf(b, sizeof b, "%s %s, %s, %.0f chunks", str(t, "dtype"),
                     str(t, "shape"), str(t, "codec"), get(t, "chunks"));
            char k[160];
            snprintf(k, sizeof k, "tensor %s", str(t, "name"));
            row(f, k, b);
        }
        snprintf(b, sizeof b, "batch %.0f, %.0f workers, window %.0f, "
                 "prefetch %.0f chunks, %s, %.0f epochs, step %g ms",
                 get(s, "batch_size"), get(s, "workers"), get(s, "window"),
                 get(s, "prefetch"), json_is_true(json_object_get(s, "shuffle"))
                 ? "shuffled" : "in order", get(s, "epochs"),
                 get(s, "step_ms"));
        row(f, "flags", b);
        snprintf(b, sizeof b, "%s", get(s, "memory") > 0
                 ? cmd_bytes((unsigned long long)get(s, "memory"), b2)
                 : "derived");
        row(f, "--memory", b);
        row(f, "library", str(m, "library"));
        fputs("</table>\n", f);
    }
    fputs("</div>\n", f);
}

static int load_rank(json_t *j, size_t i, struct rank *r)
{
    memset(r, 0, sizeof *r);
    r->j = j;
    r->rank = (long)get(j, "rank");
    r->colour = rank_colour[i % NRANK_COLOURS];
    r->wall = get(j, "seconds");
    json_t *tl = json_object_get(j, "timeline");
    if (!json_is_object(tl))
        return -1;
    r->buckets = json_object_get(tl, "buckets");
    r->series = json_object_get(tl, "series");
    json_t *c = json_object_get(tl, "columns"),
           *sc = json_object_get(tl, "series_columns");
    r->c_first = column(c, "first_batch");
    r->c_batches = column(c, "batches");
    r->c_samples = column(c, "samples");
    r->c_epoch = column(c, "epoch");
    r->c_last_epoch = column(c, "last_epoch");
    r->c_t0 = column(c, "t0");
    r->c_t1 = column(c, "t1");
    r->c_loader = column(c, "loader_s");
    r->c_wait = column(c, "wait_s");
    r->c_queued = column(c, "late_queued_s");
    r->c_storage = column(c, "late_storage_s");
    r->c_h2d = column(c, "late_host_to_device_s");
    r->c_buffer = column(c, "buffer_bytes");
    r->s_t = column(sc, "t");
    r->s_rss = column(sc, "rss");
    r->s_requests = column(sc, "requests");
    r->s_bytes = column(sc, "bytes_read");
    if (!json_is_array(r->buckets) || !json_is_array(r->series) ||
        r->c_t0 < 0 || r->c_t1 < 0 || r->s_t < 0)
        return -1;
    return 0;
}

static int by_rank(const void *a, const void *b)
{
    const struct rank *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

void report_totals(json_t *const *ranks, size_t n, struct report_totals *t)
{
    *t = (struct report_totals){0, 0, 0, 0, 0, -1};
    for (size_t r = 0; r < n; r++) {
        json_t *j = ranks[r];
        double busy = get(j, "gpu_busy_pct");
        t->samples_per_s += get(j, "samples_per_s");
        t->bytes_per_s += get(j, "bytes_per_s");
        t->steady_bytes_per_s += get(j, "steady_bytes_per_s");
        if (get(j, "seconds") > t->longest_s)
            t->longest_s = get(j, "seconds");
        if (t->least_busy_rank < 0 || busy < t->least_busy_pct) {
            t->least_busy_pct = busy;
            t->least_busy_rank = (long)json_integer_value(
                json_object_get(j, "rank"));
        }
    }
}

/* The summary: a row per rank, the straggler named, and with several
 * ranks a row of them together. */
static void summary(FILE *f, const struct rank *rk, size_t n,
                    const struct report_totals *t)
{
    double sum = 0, worst = 0;
    size_t wi = 0;
    for (size_t r = 0; r < n; r++) {
        sum += rk[r].wall;
        if (rk[r].wall > worst) {
            worst = rk[r].wall;
            wi = r;
        }
    }
    double others = n > 1 ? (sum - worst) / (double)(n - 1) : worst;
    if (n > 1 && others > 0 && worst > 1.1 * others)
        fprintf(f, "<p class=\"alert\">Rank %ld is the straggler: %.2f s "
                "against %.2f s on average for the other ranks (%.0f%% "
                "longer); every rank waits for it at each step of a "
                "synchronous training job.</p>\n", rk[wi].rank, worst,
                others, 100 * (worst / others - 1));
    fputs("<table class=\"sum\"><tr><th>rank</th><th>samples/s</th>"
          "<th>seconds</th><th>first batch</th><th>busy</th><th>stalled</th>"
          "<th>bottleneck</th><th>most likely to help</th></tr>\n", f);
    for (size_t r = 0; r < n; r++) {
        json_t *j = rk[r].j, *h = json_object_get(j, "hint");
        fprintf(f, "<tr%s><td><b style=\"color:%s\">%ld</b></td><td>%.0f</td>"
                "<td>%.3f</td><td>%.3f s</td><td>%.1f%%</td><td>%.1f%%</td>"
                "<td>", n > 1 && r == wi && worst > 1.1 * others
                ? " class=\"slow\"" : "", rk[r].colour, rk[r].rank,
                get(j, "samples_per_s"), rk[r].wall, get(j, "first_batch_s"),
                get(j, "gpu_busy_pct"), get(j, "stall_pct"));
        esc(f, str(j, "bottleneck"));
        fputs("</td><td>", f);
        if (*str(h, "flag")) {
            fputs("<code>", f);
            esc(f, str(h, "flag"));
            fputs("</code>: ", f);
        }
        esc(f, *str(h, "why") ? str(h, "why") : "-");
        fputs("</td></tr>\n", f);
    }
    if (n > 1)
        fprintf(f, "<tr><td><b>all</b></td><td><b>%.0f</b></td>"
                "<td>%.3f</td><td></td><td>%.1f%%</td><td></td>"
                "<td colspan=\"2\">the ranks' rates summed: %.2f GB/s "
                "(steady epochs %.2f GB/s); seconds: the longest run; "
                "busy: the least busy rank's (%ld)</td></tr>\n",
                t->samples_per_s, t->longest_s, t->least_busy_pct,
                t->bytes_per_s / 1e9, t->steady_bytes_per_s / 1e9,
                t->least_busy_rank);
    fputs("</table>\n", f);
}

static const char css[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;"
    "max-width:1000px}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px}\n"
    "p.how{color:#444;margin:4px 0 8px;max-width:960px}\n"
    "p.alert{background:#fdecea;border-left:4px solid #d62728;padding:6px 10px}\n"
    "table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 8px;"
    "text-align:left;vertical-align:top;border-bottom:1px solid #eee}\n"
    "table.sum td{text-align:right}table.sum td:last-child{text-align:left}\n"
    "tr.slow{background:#fdecea}caption{text-align:left;font-weight:bold}\n"
    ".tables{display:flex;flex-wrap:wrap;gap:18px}.tables table{max-width:470px}\n"
    "code{background:#f3f3f3;padding:0 3px}\n"
    ".keys{margin:2px 0 4px " "78px}.key{margin-right:14px;white-space:nowrap}"
    ".key i{display:inline-block;width:11px;height:11px;margin-right:4px;"
    "vertical-align:-1px}\n"
    "svg.chart{display:block;font:11px system-ui,sans-serif}\n"
    "svg .grid{stroke:#e3e3e3}svg .tick{stroke:#888}"
    "svg .frame{fill:none;stroke:#999}\n"
    "svg .yt{text-anchor:end}svg .xt,svg .xl{text-anchor:middle}"
    "svg .yl{text-anchor:middle}\n"
    "svg .lane{text-anchor:end;font-weight:bold}"
    "svg .line{fill:none;stroke-width:1.6}\n"
    "svg .epoch{stroke:#555;stroke-dasharray:3 3}svg .el{fill:#555}\n"
    "svg .base{stroke:" C_BASELINE ";stroke-width:2;stroke-dasharray:7 4}"
    "svg .bl{fill:" C_BASELINE "}\n"
    "svg .hover{fill:transparent}svg .in{fill:#fff;text-anchor:middle}\n";

/* The ranks' documents, in rank order, each with its colour; NULL when
 * one is not a bench-stream report (or out of memory). */
static struct rank *load_ranks(json_t *const *ranks, size_t n)
{
    struct rank *rk = calloc(n, sizeof *rk);
    if (!rk)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (load_rank(ranks[i], i, &rk[i])) {
            free(rk);
            return NULL;
        }
    qsort(rk, n, sizeof *rk, by_rank);
    for (size_t i = 0; i < n; i++)
        rk[i].colour = rank_colour[i % NRANK_COLOURS];
    return rk;
}

/* The document's head and its first lines: the dataset, the ranks and
 * the device, the run's batches and epochs (rank 0's j0). */
static void page_head(FILE *f, json_t *j0, size_t n)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>dlk bench-stream: ", f);
    esc(f, str(j0, "dataset"));
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", css);
    fputs("<h1>dlk bench-stream: ", f);
    esc(f, str(j0, "dataset"));
    fprintf(f, "</h1>\n<p>%zu rank%s on ", n, n == 1 ? "" : "s");
    esc(f, str(j0, "device"));
    if (*str(json_object_get(j0, "machine"), "gpu")) {
        fputs(" (", f);
        esc(f, str(json_object_get(j0, "machine"), "gpu"));
        fputs(")", f);
    }
    fprintf(f, ", %.0f batches of %.0f samples, %.0f epoch%s.</p>\n",
            get(j0, "batches"), get2(j0, "settings", "batch_size"),
            get2(j0, "settings", "epochs"),
            get2(j0, "settings", "epochs") == 1 ? "" : "s");
}

/* The timeline of the batches, with how to read it (gpu: rank 0's
 * device is a GPU). */
static void section_timeline(FILE *f, const struct rank *rk, size_t n,
                             json_t *j0, bool gpu)
{
    fputs("<h2>Timeline of the batches</h2>\n", f);
    chart_timeline(f, rk, n);
    fprintf(f, "<p class=\"how\">Each column is a run of consecutive batches "
            "(%.0f a column here; the loader keeps at most 512 columns, "
            "merging neighbours), as wide as the time they took and split "
            "by where that time went. <b>Green</b>: the consumer between "
            "batches (the step, <code>--step-ms</code>; %s). <b>Grey</b>: "
            "inside the loader but not waiting (planning an epoch, "
            "releasing chunks, queuing the gather). The rest is waiting for "
            "a chunk, coloured by what that chunk was doing: <b>orange</b> "
            "queued, no I/O thread free to start it (<code>--workers</code>); "
            "<b>red</b> being read from storage and decompressed "
            "(<code>--workers</code> when the threads are all busy, "
            "<code>--prefetch</code> when they idle, a faster store); "
            "<b>purple</b> read but not yet copied to the device "
            "(<code>--pin-cache auto</code>). Dashed lines: epoch "
            "boundaries. A rank whose lane is longer or redder than the "
            "others is the straggler. Hover a column for its figures.</p>\n",
            get2(j0, "timeline", "batches_per_bucket"),
            gpu ? "on a GPU, launching it: the device works meanwhile"
                : "on the cpu, reading every byte of the batch");
}

static void section_rate(FILE *f, const struct rank *rk, size_t n)
{
    fputs("<h2>Samples per second</h2>\n", f);
    chart_rate(f, rk, n);
    fputs("<p class=\"how\">Samples delivered per second, in 120 equal slices "
          "of the time axis (each run of batches spread over its time). "
          "A dip at "
          "each epoch's start is the pipeline refilling (the next epoch's "
          "first chunks are read while one ends; <code>--prefetch</code> "
          "and <code>--memory</code> set how far ahead). "
          "<code>--batch-size</code>, <code>--workers</code> and "
          "<code>--step-ms</code> move the line.</p>\n", f);
}

/* Where the wall time went, and the time in each stage. */
static void section_time_split(FILE *f, const struct rank *rk, size_t n,
                               bool gpu)
{
    fputs("<h2>Where the time went</h2>\n", f);
    static const char *const split_colour[] = {C_CONSUMER, C_STORAGE,
                                               C_LOADER, "#aed581", C_OUTSIDE};
    static const char *const split_name[] = {
        "busy (gather and step)", "stalled (waiting for chunks)",
        "loader, not waiting", "consumer's own work", "outside the batches"};
    stacked_bars(f, "split", BG_SPLIT, "where the wall time went", rk, n, 5,
                 split_part, split_colour, split_name, U_PCT, 100);
    fprintf(f, "<p class=\"how\">%s The rest is not idle time: <b>loader, "
            "not waiting</b> is planning each epoch's order and slots, "
            "releasing chunks and queuing work inside the loader's calls; "
            "<b>consumer's own work</b> is what the training loop does "
            "between batches besides the step (here bench-stream's "
            "checksums, shuffle and label-mix statistics; "
            "<code>--no-check</code> removes the checksum); <b>outside</b> is "
            "before the first call and after the last.</p>\n",
            gpu ? "On a GPU, <b>busy</b> is the device running gather and "
                  "step kernels and <b>stalled</b> the rest of the time "
                  "(the device had nothing to run); the host's side of the "
                  "same time is in the text report."
                : "<b>Busy</b> is gathering batches and the step, "
                  "<b>stalled</b> the consumer waiting for chunks.");
    static const char *const stage_colour[] = {C_STORAGE, "#fb8c00", C_H2D,
                                               "#1e88e5", C_CONSUMER};
    static const char *const stage_name[] = {
        "storage", "decompress", "host-to-device", "gather", "step"};
    stacked_bars(f, "stages", BG_STAGES, "time in each stage", rk, n, 5,
                 stage_part, stage_colour, stage_name, U_SECONDS, 0);
    fputs("<p class=\"how\">Seconds in each stage, storage and "
          "decompression divided over the I/O threads that share them: the "
          "longest is the bottleneck the text report names. "
          "<code>--workers</code> shortens storage and decompress, "
          "<code>--pin-cache auto</code> host-to-device (on a GPU, local "
          "datasets), <code>--tensors</code> all of them (fewer bytes), "
          "<code>--step-ms</code> sets the step.</p>\n", f);
}

static void section_memory(FILE *f, const struct rank *rk, size_t n)
{
    fputs("<h2>Memory</h2>\n", f);
    chart_over_time(f, "memory", BG_MEMORY, "memory over time", "bytes",
                    U_BYTES, rk, n, 0);
    fputs("<p class=\"how\">Solid: the process's resident set (RSS; a "
          "pinned page cache, <code>--pin-cache</code>, counts in it). "
          "Dashed: the loader's chunk buffers, bounded by "
          "<code>--memory</code> and filled as far as "
          "<code>--prefetch</code> and <code>--window</code> read "
          "ahead.</p>\n", f);
}

/* Storage requests and bytes over time, then each rank's epochs. */
static void section_storage(FILE *f, const struct rank *rk, size_t n)
{
    fputs("<h2>Storage requests and bytes</h2>\n", f);
    chart_over_time(f, "requests", BG_REQUESTS, "storage requests over time",
                    "requests", U_PLAIN, rk, n, 1);
    chart_over_time(f, "bytes", BG_BYTES, "bytes read over time", "bytes read",
                    U_BYTES, rk, n, 2);
    fputs("<p class=\"how\">Requests (GET, HEAD, LIST) and bytes read so "
          "far, per rank. dlk reads a chunk in one request: bigger chunks "
          "at ingest mean fewer; an epoch's requests priced by "
          "<code>--s3-price</code> are in the text report.</p>\n", f);
    fputs("<table><tr><th>rank</th><th>epoch</th><th>seconds</th>"
          "<th>samples/s</th><th>busy</th><th>requests</th><th>read</th>"
          "</tr>\n", f);
    for (size_t r = 0; r < n; r++) {
        json_t *eps = json_object_get(rk[r].j, "epochs");
        for (size_t e = 0; e < json_array_size(eps); e++) {
            json_t *ep = json_array_get(eps, e);
            char b[32];
            fprintf(f, "<tr><td>%ld</td><td>%zu</td><td>%.3f</td><td>%.0f</td>"
                    "<td>%.1f%%</td><td>%.0f</td><td>%s</td></tr>\n",
                    rk[r].rank, e + 1, get(ep, "seconds"),
                    get(ep, "samples_per_s"), get(ep, "busy_pct"),
                    get(ep, "requests"),
                    cmd_bytes((unsigned long long)get(ep, "bytes_read"), b));
        }
    }
    fputs("</table>\n", f);
}

int report_html_write(FILE *f, json_t *const *ranks, size_t n)
{
    if (!n)
        return -1;
    struct rank *rk = load_ranks(ranks, n);
    if (!rk)
        return -1;
    json_t *j0 = rk[0].j;
    bool gpu = strncmp(str(j0, "device"), "cuda", 4) == 0;
    page_head(f, j0, n);
    struct report_totals tot;
    report_totals(ranks, n, &tot);
    summary(f, rk, n, &tot);
    section_timeline(f, rk, n, j0, gpu);
    section_rate(f, rk, n);
    section_time_split(f, rk, n, gpu);
    section_memory(f, rk, n);
    section_storage(f, rk, n);
    chart_baseline(f, rk, n);
    tables(f, rk, n);
    fputs("</body>\n</html>\n", f);
    free(rk);
    return 0;
}
