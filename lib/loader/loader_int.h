/* loader_int.h - the loader's state, shared by the files of lib/loader/. */
#ifndef DLK_LOADER_INT_H
#define DLK_LOADER_INT_H

#include "dataset/dataset.h"
#include "device.h"
#include "order.h"
#include "augment.h"
#include "dlk_bench.h"

#include <pthread.h>

/* Batch buffers a tensor keeps for reuse once kept batches come back;
 * more are freed (a consumer holding many batches is rare). */
#define DLK_SPARES 8
#define RAMP_START 4
#define FOLDS_KEPT_MAX (64u << 20)

enum { SLOT_WAITING = 0, SLOT_LOADING, SLOT_READY, SLOT_FAILED, SLOT_DONE };

/* A chunk of a tensor needed over positions [first_pos, last_pos]. */
typedef struct Dlk_slot {
    size_t tensor;              /* index into the loader's tensors */
    size_t chunk;
    /* a span: parts [p0, p1) of the chunk, read and verified on their
     * own (p1 0: the whole chunk) */
    uint32_t p0, p1;
    uint64_t first_pos, last_pos;
    uint32_t next_same;         /* the next slot of its chunk or unit
                                 * (a later run of positions), or
                                 * UINT32_MAX */
    int state;
    /* from here on: what a load fills (cleared on release) */
    dlk_chunk *ch;              /* header, index, payload (host) */
    const dlk_chunk *head;      /* span: the chunk's kept header and index */
    const uint8_t *span;        /* span: its raw bytes (host) */
    uint64_t span_off, span_len; /* span: where they are in the payload */
    bool uploading;             /* read; queued for or in its copy */
    bool dev_check;             /* span: its parts are checked on the
                                 * device after its copy, not yet
                                 * confirmed (Dlk_span_confirm) */
    void *host;                 /* buffer the payload lives in, if pooled */
    const void *map_p;          /* a mapping of the object this slot owns */
    size_t map_n;
    void *dev_ptr, *dev_handle; /* payload on the device */
    uint64_t *fold;             /* per-sample folds (check mode): of the
                                 * chunk's samples from fold_first on */
    uint32_t fold_first;        /* 0 for the chunk's kept folds; a span's
                                 * own hold only its samples' */
    bool fold_kept;             /* fold is the chunk's kept one, not ours */
    uint64_t bytes;             /* counted against the budget */
    double t_buffer;            /* when the load had its host buffer */
    dlk_error *err;             /* a failed load's (or part's) error,
                                 * allocated when there is one: a plan
                                 * holds a slot a chunk a tensor, and
                                 * its 516 bytes in each were most of
                                 * the loader's cost a chunk */
    /* on_bad skip: the parts of the span (bit i: part p0 + i, the first
     * 64) whose checksum failed, the rest read and checked; err names
     * the first */
    uint64_t bad_parts;
    bool bad_told;              /* failed, and passed to on_bad_read */
    struct Dlk_slot *up_next;   /* in the upload queue */
    /* in the list of spans whose copy may still read their host buffer
     * (loader_io.c) */
    struct Dlk_slot *copy_prev, *copy_next;
    bool in_copy;
} Dlk_slot;

typedef struct Dlk_loader_tensor {
    const Dlk_tensor *tensor;
    size_t index;               /* in the dataset */
    bool variable;
    dlk_batch_tensor out;
    void *buf;                  /* batch buffer on the device */
    uint64_t cap;
    uint64_t *offsets;          /* variable: batch+1 */
    int64_t *shapes;            /* variable: batch*ndim */
    /* Read in spans of unit_parts parts of a chunk (0: whole chunks):
     * the tensor's chunks carry part checksums.  unit_base[c]: the
     * units of the chunks before c (nchunks + 1 entries). */
    uint32_t unit_parts;
    uint64_t *unit_base;
    /* Over some rows only (a view), what is read of a chunk in spans:
     * the parts that hold a row, a bit a part in `need` (the chunks'
     * parts one after another, chunk c's from part_base[c]), each run of
     * needed parts within a unit one span; NULL for every row.  The
     * units still deal the rows, so the order is as without them. */
    uint64_t *part_base;
    uint64_t *need;
    /* batch buffers given back after dlk_loader_keep, for reuse */
    struct Dlk_spare { void *p; uint64_t cap; } spare[DLK_SPARES];
    size_t nspare;
} Dlk_loader_tensor;

/* One epoch's plan: the rank's order and the slots it needs. */
typedef struct Dlk_plan {
    Dlk_order order;
    Dlk_slot *slots;
    size_t nslots;
    uint32_t *sched;            /* slots in load order */
    size_t next_sched;          /* next slot a worker takes */
    size_t release_from;
    /* per tensor, per chunk (or unit of a chunk read in spans): its
     * first slot, the others after it through next_same; a position's
     * slot is found from its sample, not kept for every position (4
     * bytes a row a tensor) */
    uint32_t **key_slot;
    /* read ahead: only the slots that start before this position, the
     * rest when the consumer needs them (0: all) */
    uint64_t upto;
} Dlk_plan;

struct dlk_loader {
    dlk_dataset *ds;
    /* a loader over several datasets (mix.c): its sources, each a loader
     * of one on this one's device; NULL for a loader over one */
    struct Dlk_mix *mix;
    bool dev_shared;            /* the device is a mix's: not closed here,
                                 * its budget set by the mix */
    uint64_t host_ahead;        /* host buffers its device made ready
                                 * from the open (or, a mix's source,
                                 * would have) */
    uint32_t cap;               /* batch positions the arrays below hold:
                                 * the batch size, or a mix's batch (a
                                 * source's batch is one position) */
    /* a mix's source: plans of epochs that ended within a take, their
     * slots held until the batch that read them is gathered */
    Dlk_plan *retired;
    size_t nretired, capretired;
    /* what chunks are read through: the dataset's store, or the chunk
     * cache in front of it (opts' cache_dir, a remote store) */
    Dlk_store *store, *cache;
    dlk_loader_opts o;
    Dlk_dev *dev;
    /* opts.augment parsed: the tensor it applies to (aug_t, -1 none),
     * each sample's stored shape (batch * 4) */
    Dlk_aug_spec aug;
    long aug_t;
    int64_t *aug_shapes;
    uint64_t *aug_rows;         /* a mix's: the rows its parameters are
                                 * drawn for (each source's apart); NULL:
                                 * the batch's rows */
    Dlk_loader_tensor *t;
    dlk_batch_tensor *bt_out;   /* the batch's tensor array */
    size_t nt;
    /* blocks: chunks of the main tensor */
    uint64_t *rows_owned;       /* opts' rows or the view's, copied */
    uint64_t *block_first;
    uint32_t *block_count;
    size_t nblocks;
    uint64_t avg_block;         /* samples a block holds, on average */
    uint64_t window_blocks;     /* blocks a shuffle window holds */
    uint64_t chunk_blocks;      /* blocks a chunk makes, on average */
    bool spans;                 /* some tensor is read in spans */
    uint64_t span_bytes;        /* the main tensor's span, nominal; 0 */

    dlk_loader_state st;
    bool planned;
    Dlk_plan plan;              /* the epoch being read */
    /* The next epoch's plan, made once every slot of `plan` is taken:
     * workers read its first chunks, within the budget, while the
     * consumer finishes the epoch, so that the next one starts without
     * a pipeline to refill (on S3, a quarter of each epoch otherwise). */
    Dlk_plan ahead;
    bool have_ahead;
    /* positions of epoch o.epochs read ahead all the same (a mix's
     * source: those of its epoch the mix's last batches take; 0: none) */
    uint64_t tail_pos;
    uint64_t pos;               /* next position the consumer takes */
    uint64_t want_pos;          /* consumer needs everything before this */

    Dlk_gather *gather;         /* per tensor: batch entries */
    uint32_t *bslot;            /* per tensor: the batch's slots */
    uint64_t *btotal;           /* per tensor: the batch's bytes */
    uint64_t *bidx;             /* the batch's samples (its indices) */
    uint8_t *bpad;              /* and padding flags */
    uint8_t *bbad;              /* and whether their read failed (skip) */
    uint64_t bad_epoch;         /* positions replaced in this epoch */
    uint64_t max_bad;           /* opts' max_bad, or its default */
    dlk_batch batch;
    bool have_batch;
    bool batch_kept;            /* its buffers were taken by dlk_loader_keep */
    struct dlk_kept *kept;      /* kept batches not given back (close frees) */
    uint64_t host_fold;
    size_t nmarks;               /* dlk_loader_mark calls that succeeded */

    /* budget */
    uint64_t limit, resident, peak_resident;

    /* workers */
    pthread_mutex_t mu;
    pthread_cond_t work, ready, idle, upq;
    pthread_cond_t mapped;      /* a chunk's mapping ended */
    pthread_t up_thread;        /* the uploader (GPU only) */
    bool have_up_thread;
    Dlk_slot *up_head, *up_tail; /* loaded, waiting for their copy */
    Dlk_slot *copy_head, *copy_tail; /* copied or being copied, their
                                      * host buffers still held */
    pthread_t *threads;
    uint32_t nthreads;
    uint32_t busy;              /* loads not finished (their copies too) */
    uint32_t reading;           /* of those, still reading */
    /* Reads that may run at once for chunks no batch waits for yet: from
     * RAMP_START chunks' worth (as many spans as make that many chunks)
     * up by one a read done (doubling each round), so that the first
     * batch's chunks are not one in many sharing the store's bandwidth.
     * A read done, not a copy: reads go on while a GPU starts */
    uint32_t ramp;
    bool paused, stopping;

    /* What the loader keeps of each chunk until close: a mapping of it
     * used in place from the page cache (file stores, codec none; mapped
     * and registered with the device once); whether its stored checksum
     * was verified (a chunk is verified once per loader, not every
     * epoch: a pass over its bytes each time otherwise); its samples'
     * folds (check mode), within folds_max bytes in all */
    struct Dlk_map {
        const void *p;
        size_t n;
        bool verified;          /* atomic */
        bool mapping;           /* a thread maps it (under mu) */
        uint64_t *fold;         /* atomic pointer */
        /* spans: the header and index, read once (atomic pointer), and
         * per part PART_VERIFIED / PART_FOLDED (atomic bytes) */
        dlk_chunk *head;
        uint8_t *part_state;
        uint32_t parts_verified; /* atomic */
    } **maps;
    uint64_t folds_kept;        /* bytes of kept folds (atomic), counted
                                 * in the budget with the chunks */
    uint64_t folds_max;         /* a sixteenth of the budget, at most
                                 * FOLDS_KEPT_MAX: kept folds spare
                                 * epochs 2+ a pass over every sample
                                 * but must not crowd the chunks out */
    uint64_t mapped_bytes, map_limit;
    bool use_maps;

    dlk_loader_stats stats;
    double cpu_sampled_s, busy_sampled_s; /* loads whose CPU time was
                                   read (one in CPU_SAMPLE): io_cpu_s is
                                   io_busy_s in their proportion */
    uint64_t chunks_verified;   /* atomic: counted outside the lock */
    /* the timeline (loader_trace.c): buckets of `trace_per` batches, and
     * the batch being read's waits, filled by wait_ready */
    dlk_trace_bucket trace[DLK_TRACE_BUCKETS];
    size_t ntrace;
    uint64_t trace_per, trace_batches;
    double cur_wait, cur_late[DLK_LATE_N];
    uint64_t cur_resident;
    double epoch_t0;
    bool first_batch_pending;
};

void Dlk_loader_release_slot(dlk_loader *l, Dlk_slot *s);
/* Record err as s's (kept until the slot's release); s's error, or a
 * generic one if none could be recorded. */
void Dlk_slot_set_err(Dlk_slot *s, const dlk_error *err);
const dlk_error *Dlk_slot_err(const Dlk_slot *s);
void Dlk_slot_free_err(Dlk_slot *s);
/* The timeline (loader_trace.c): dlk_loader_next entered at `now` (ends
 * the previous batch's consumer time), and a batch of `samples` returned
 * after entering at t_in. */
void Dlk_trace_enter(dlk_loader *l, double now);
void Dlk_trace_batch(dlk_loader *l, double t_in, double t_out,
                     uint32_t samples);
/* Batch buffers (loader_keep.c): a spare of lt for a batch of `need`
 * bytes into lt->buf, when lt has none; free the spares and what is
 * still kept, at close. */
void Dlk_loader_take_spare(dlk_loader *l, Dlk_loader_tensor *lt,
                           uint64_t need);
void Dlk_loader_free_kept(dlk_loader *l);
/* Release what a plan's slots hold (after the workers stopped: also those
 * failed or waiting for their upload) and free the plan. */
void Dlk_plan_free(dlk_loader *l, Dlk_plan *pl, bool stopped);
/* A slot left for a worker to take in the current plan, or, after it,
 * the plan read ahead (locked). */
bool Dlk_loader_more_to_take(const dlk_loader *l);
void Dlk_sort_slots_by_first(uint32_t *idx, size_t n, const Dlk_slot *slots);
/* Workers (loader_io.c). */
/* A slot given back before its copy's buffer was (loader_io.c). */
void Dlk_loader_copy_forget(dlk_loader *l, Dlk_slot *s);
dlk_status Dlk_loader_start_workers(dlk_loader *l, dlk_error *err);
/* Plan the first epoch (st, or the loader's own) and set the workers on
 * it, at open (loader.c). */
dlk_status Dlk_loader_begin(dlk_loader *l, const dlk_loader_state *st,
                            dlk_error *err);
void Dlk_loader_stop_workers(dlk_loader *l);
void Dlk_loader_pause_workers(dlk_loader *l);
void Dlk_loader_resume_workers(dlk_loader *l);

/* The chunk's object mapped and registered for DMA, kept for the
 * loader's life (loader_io.c); out->p NULL when the budget for mappings
 * is spent. */
dlk_status Dlk_loader_get_map(dlk_loader *l, Dlk_slot *s, const char *key,
                              struct Dlk_map *out, dlk_error *err);
/* Bytes a load of tensor t's chunk c holds while resident: its payload,
 * and the object read before decompression. */
static inline uint64_t Dlk_chunk_cost(const Dlk_tensor *t, size_t c)
{
    return t->chunks[c].raw_bytes + (t->spec.codec == DLK_CODEC_NONE
                                         ? 0 : t->chunks[c].stored_bytes);
}

/* Spans (loader_span.c): the chunk's parts and units, the slot's bytes
 * by an estimate before its load, and its load (read, verify, fold). */
enum { PART_VERIFIED = 1, PART_FOLDED = 2 };
uint32_t Dlk_span_nparts(const Dlk_loader_tensor *lt, size_t chunk);
uint32_t Dlk_span_part_of(const Dlk_loader_tensor *lt, size_t chunk,
                          uint32_t sample);
uint64_t Dlk_span_cost(const dlk_loader *l, const Dlk_slot *s);
dlk_status Dlk_span_load(dlk_loader *l, Dlk_slot *s, double *storage_s,
                         dlk_error *err);
/* Sample i of the chunk (chunk-relative) in a loaded slot: its size,
 * its offset in what was uploaded, and its shape (false: not in it).
 * Dlk_slot_sample: its bytes in host memory too, while the slot holds
 * them (a load's). */
bool Dlk_slot_place(const Dlk_slot *s, uint32_t i, size_t *nbytes,
                    size_t *up_off, int64_t *shape);
const uint8_t *Dlk_slot_sample(const Dlk_slot *s, uint32_t i, size_t *nbytes,
                               size_t *up_off, int64_t *shape);
void Dlk_span_free_kept(dlk_loader *l, struct Dlk_map *m);
/* A span checked on the device (dev_check): the check queued after its
 * upload (on the copy thread), and confirmed, or its mismatch reported
 * naming the chunk and part, before a batch uses it (the consumer). */
dlk_status Dlk_span_check_upload(dlk_loader *l, Dlk_slot *s, dlk_error *err);
dlk_status Dlk_span_confirm(dlk_loader *l, Dlk_slot *s, dlk_error *err);

/* The slot of tensor t that position pos of plan pl reads, its sample
 * being `sample` (loader.c). */
dlk_status Dlk_pos_slot(const dlk_loader *l, const Dlk_plan *pl, size_t t,
                        uint64_t pos, uint64_t sample, uint32_t *out,
                        dlk_error *err);
/* Wait (locked) until slot s is ready or failed; DLK_ECANCELED when
 * opts.cancel asks to stop. */
dlk_status Dlk_loader_wait_slot(dlk_loader *l, Dlk_slot *s, dlk_error *err);

/* Reads that fail (loader_bad.c): whether on_bad skip replaces the rows
 * of a read that failed with `code`; and the batch's positions
 * [p0, p1) flagged in bbad given other rows, each failed read reported,
 * within max_bad (its error past it). */
bool Dlk_bad_skips(const dlk_loader *l, dlk_status code);
/* Whether the row `sample` of a slot ready or failed cannot be used: the
 * slot failed, or the row is in one of its bad_parts. */
bool Dlk_bad_row(const dlk_loader *l, const Dlk_slot *s, uint64_t sample);
/* A span's part p checked with status rc (loader_span.c): with on_bad
 * skip a checksum mismatch marks the part bad and the load goes on
 * (DLK_OK); else rc. */
dlk_status Dlk_bad_part(const dlk_loader *l, Dlk_slot *s, uint32_t p,
                        dlk_status rc, const dlk_error *err);
dlk_status Dlk_bad_replace(dlk_loader *l, uint64_t p0, uint64_t p1,
                           dlk_error *err);
/* max_bad's default, at open. */
void Dlk_bad_defaults(dlk_loader *l);

/* A mix's source (loader_open.c, loader.c): a loader of one dataset on
 * the mix's device `dev`, its arrays for `cap` positions; the next n
 * positions of its stream, across its epochs, each piece's gather
 * entries (the source's gather, bidx, bpad, shapes of variable tensors,
 * from 0) handed to fn before the next piece is read; device gather of
 * tensor t's b entries of l->gather into its batch buffer (loader.c). */
dlk_status Dlk_loader_open_source(dlk_dataset *ds, const dlk_loader_opts *o,
                                  Dlk_dev *dev, uint32_t cap,
                                  dlk_loader **out, dlk_error *err);
typedef void (*Dlk_take_fn)(void *ud, const dlk_loader *src, uint32_t n);
dlk_status Dlk_loader_take(dlk_loader *l, uint32_t n, Dlk_take_fn fn,
                           void *ud, dlk_error *err);
dlk_status Dlk_loader_gather(dlk_loader *l, size_t t, uint32_t b,
                             uint64_t total, dlk_error *err);
/* The lock and conditions every loader has, a mix's too (loader_open.c);
 * dlk_loader_close destroys them. */
void Dlk_loader_init_sync(dlk_loader *l);
/* A batch of b handed out, asked for at t_in: the step counted, the
 * stats and the timeline (loader.c; a mix's too). */
void Dlk_loader_batch_done(dlk_loader *l, double t_in, uint32_t b);
/* A loader's own stats (not a mix's sum) (loader.c). */
void Dlk_loader_stats_one(const dlk_loader *l, dlk_loader_stats *out);
/* The mix's side of the public calls (mix.c). */
dlk_status Dlk_mix_next(dlk_loader *l, const dlk_batch **out,
                        dlk_error *err);
uint64_t Dlk_mix_batches(const dlk_loader *l);
void Dlk_mix_stats(const dlk_loader *l, dlk_loader_stats *out);
uint64_t Dlk_mix_host_fold(const dlk_loader *l);
char *Dlk_mix_save(const dlk_loader *l);
dlk_status Dlk_mix_load(dlk_loader *l, const char *json, dlk_error *err);
void Dlk_mix_close(dlk_loader *l);

/* Copy and check opts' rows, or read the view's (loader_rows.c). */
dlk_status Dlk_loader_pick_rows(dlk_loader *l, dlk_error *err);
/* Over some rows, the parts of each tensor read in spans that hold them
 * (lt->need), after Dlk_loader_pick_rows. */
dlk_status Dlk_loader_mark_parts(dlk_loader *l, dlk_error *err);
/* The span that reads part p of the chunk (lt->need set): the run of
 * needed parts [*p0, *p1) in p's unit around it, and its key, the run's
 * first part among the tensor's (part_base). */
uint64_t Dlk_view_run(const Dlk_loader_tensor *lt, size_t chunk, uint32_t p,
                      uint32_t *p0, uint32_t *p1);

#endif
