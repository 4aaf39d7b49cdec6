/*
 * dlk_bench.h - measuring and tracing hooks of libdlk: what `dlk
 * bench-stream` and the benchmarks use to time the loader, check the
 * bytes it delivers and compare it with reading the raw files.
 *
 * Not part of the stable API of dlk.h: these functions may change between
 * minor versions.  A training program needs none of them.  The
 * conventions of dlk.h (statuses, `err`, handles) hold here too.
 */
#ifndef DLK_BENCH_H
#define DLK_BENCH_H

#include "dlk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Loader checks and timing                                            */

/* The fold of every batch's bytes as the device saw them, and as the CPU
 * computed them from the chunks (with dlk_loader_opts.check); equal when
 * the right bytes arrived.
 * @param device, host  receive the two folds (0 without check).
 * Thread-safety: as the loader (one thread at a time). */
DLK_API void dlk_loader_checksums(const dlk_loader *l, uint64_t *device,
                                  uint64_t *host);

/* A point on the device's clock after all the work queued so far (an
 * epoch's end, say), numbered in *id.  It does not wait for the device,
 * so measuring epochs does not drain the device between them.  On cpu
 * the clock is the host's.
 * @return DLK_OK; DLK_ENOMEM or DLK_EGPU when the point cannot be
 *         recorded. */
DLK_API dlk_status dlk_loader_mark(dlk_loader *l, size_t *id, dlk_error *err);

/* The device seconds between two marks (from < to) and how many of them
 * gather and step kept the device busy.  Waits for the device to reach
 * mark `to`.
 * @return DLK_OK; DLK_EINVAL for a mark that does not exist; DLK_EGPU. */
DLK_API dlk_status dlk_loader_span(dlk_loader *l, size_t from, size_t to,
                                   double *seconds, double *busy_s,
                                   dlk_error *err);

/* Where each batch's time went, for a timeline of the run.
 * dlk_loader_next keeps it in at most DLK_TRACE_BUCKETS buckets of
 * consecutive batches: when they are full, neighbours merge and each then
 * covers twice as many, so a run of any length costs the same memory.
 * Times are seconds on the monotonic clock (CLOCK_MONOTONIC).  A wait is
 * split by what the chunk waited for was doing meanwhile: queued (no I/O
 * thread free to start it), storage (being read, and decompressed when
 * the tensor is compressed) or host_to_device (read, its copy to the
 * device not done). */
#define DLK_TRACE_BUCKETS 512
enum { DLK_LATE_QUEUED, DLK_LATE_STORAGE, DLK_LATE_H2D, DLK_LATE_N };
typedef struct dlk_trace_bucket {
    uint64_t first_batch, batches; /* batches counted from the open */
    uint64_t samples;              /* padding included */
    uint64_t epoch, last_epoch;    /* of its first and last batch */
    double t0;                     /* dlk_loader_next called for the first */
    double t1;                     /* ... and called again after the last
                                      (its return, until then) */
    double next_s;                 /* inside dlk_loader_next: waiting,
                                      planning an epoch, queuing gathers */
    double wait_s;                 /* of which waiting for chunks */
    double late_s[DLK_LATE_N];     /* wait_s by the stage waited for */
    uint64_t buffer_bytes;         /* most chunk-buffer bytes resident */
} dlk_trace_bucket;
/* Copies up to `cap` buckets, oldest first, into out.
 * @return how many buckets the loader holds (may exceed cap).
 * Safe to call from the thread that calls dlk_loader_next. */
DLK_API size_t dlk_loader_trace(const dlk_loader *l, dlk_trace_bucket *out,
                                size_t cap);

/* A simulated training step on the current batch: reads every byte
 * (folded into the device checksum) and, with step_ms > 0, keeps the
 * device busy that long.  On cpu it reads the bytes on the calling
 * thread.
 * @return DLK_OK; DLK_EINVAL when no batch is current; DLK_EGPU. */
DLK_API dlk_status dlk_loader_step(dlk_loader *l, double step_ms,
                                   dlk_error *err);

/* The pinned host-to-device copy rate of CUDA device `device`, the line
 * rate that a loader's rate is set beside: 16 MiB copies from pinned
 * host memory on four streams, 1 GiB a trial after an untimed round, the
 * best of three trials.  Takes 64 MiB of pinned host memory and 64 MiB
 * on the device while it runs (about 0.1 s); the calling thread's
 * current device is kept.
 * @return DLK_OK with *bytes_per_s; DLK_EGPU without CUDA or the device,
 *         or when a CUDA call fails (named in err). */
DLK_API dlk_status dlk_cuda_copy_rate(int device, double *bytes_per_s,
                                      dlk_error *err);

/* ------------------------------------------------------------------ */
/* The per-file baseline                                               */

/* Training without dlk, for comparison: one GET per raw source file (JPEG
 * or PNG), decoded and resized on `workers` threads at every step,
 * assembled into batches in pinned host memory, each copied to `device`
 * and a simulated step of `step_ms` run on it, as dlk_loader_step does.
 * Runs until every file was read or `seconds` passed. */
typedef struct dlk_baseline_opts {
    const char *source;          /* s3://bucket/prefix or a directory */
    uint32_t batch_size, workers;
    int width, height;           /* resize to; 0x0 keeps each image's size */
    double seconds;              /* time limit (0: 60 s) */
    uint64_t seed;               /* file order is shuffled with it */
    const char *device;          /* "cpu" (NULL) or "cuda:N" */
    double step_ms;              /* a step per batch on the device, 0-60000 */
    const dlk_store_options *store; /* the source's store; NULL: defaults */
} dlk_baseline_opts;

typedef struct dlk_baseline_result {
    uint64_t files, samples, batches, errors, bytes_read;
    double seconds, first_batch_s;
    uint64_t files_listed;       /* objects in the source: one epoch's GETs */
    uint64_t bytes_listed;       /* their bytes: one epoch's reads */
    double busy_pct;             /* the device busy with batches and steps,
                                    % of the time from start to the last */
} dlk_baseline_result;

/* @return DLK_OK with *res filled (files that failed to decode are
 *         counted in res->errors); DLK_ENOTFOUND for a source with no
 *         objects; DLK_EINVAL for bad options; a store's status when the
 *         source cannot be listed.
 * Thread-safety: any thread; it starts and joins its own workers. */
DLK_API dlk_status dlk_source_baseline(const dlk_baseline_opts *o,
                                       dlk_baseline_result *res,
                                       dlk_error *err);

/* ------------------------------------------------------------------ */
/* Requests made to storage by this process (all stores, all threads)  */

typedef struct dlk_io_counters {
    uint64_t gets, heads, puts, lists, deletes;
    uint64_t bytes_read, bytes_written;
    uint64_t hedges;  /* S3 GETs/HEADs sent again because the first was
                         slow (the first answer wins; not in gets) */
} dlk_io_counters;

/* The counts since the process started (retries not counted).
 * Thread-safety: any thread, at any time (the counters are atomic). */
DLK_API void dlk_io_counters_get(dlk_io_counters *out);

#ifdef __cplusplus
}
#endif
#endif /* DLK_BENCH_H */
