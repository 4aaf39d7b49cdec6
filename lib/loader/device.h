/* device.h - where batches are built: host memory ("cpu") or a CUDA
 * device.  The loader moves whole chunks into the device's memory and
 * gathers each batch there; this interface hides which. */
#ifndef DLK_DEVICE_H
#define DLK_DEVICE_H

#include "dlk.h"
#include "augment_params.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Dlk_dev Dlk_dev;

/* One sample's bytes to place in a batch. */
typedef struct Dlk_gather {
    const void *src;   /* in device memory (a chunk's copy) */
    uint64_t dst_off;  /* offset in the batch buffer */
    uint64_t nbytes;
    void *handle;      /* the chunk's upload handle (to wait for it) */
} Dlk_gather;

typedef struct Dlk_dev_times {
    double gather_s, step_s, copy_s; /* device time in each */
    uint64_t checksum;               /* fold of every stepped batch */
} Dlk_dev_times;

/* A part of bytes just uploaded, to check on the device: at off, len
 * (more than 240) bytes whose XXH3-64 must be want; part is its index in
 * its chunk (verify.cu mirrors this). */
typedef struct Dlk_vpart {
    uint64_t off, len, want;
    uint32_t part, pad;
} Dlk_vpart;

/* The first part found not to match: its index, the tag its check was
 * queued with, and its hash (verify.cu mirrors this). */
typedef struct Dlk_vbad {
    unsigned int count;
    uint32_t part;
    uint64_t tag, got;
} Dlk_vbad;

typedef struct Dlk_dev_ops {
    bool on_device;
    /* Memory for chunks as read from storage (pinned for DMA on CUDA). */
    void *(*host_alloc)(Dlk_dev *d, size_t n);
    void (*host_free)(Dlk_dev *d, void *p);
    /* Make a chunk's payload available on the device: returns the device
     * pointer (the host pointer itself on cpu) and an opaque handle to
     * release.  Asynchronous on CUDA: later device work is ordered after
     * it; `host_done` reports when the host buffer may be reused. */
    dlk_status (*upload)(Dlk_dev *d, const void *host, size_t n,
                         void **dev_ptr, void **handle, dlk_error *err);
    bool (*host_done)(Dlk_dev *d, void *handle);
    void (*release)(Dlk_dev *d, void *handle, void *dev_ptr);
    /* Let the device read this host memory directly (pin it: a mapping of
     * the page cache), kept until unregister; cpu: nothing to do. */
    dlk_status (*register_host)(Dlk_dev *d, const void *p, size_t n,
                                dlk_error *err);
    void (*unregister_host)(Dlk_dev *d, const void *p);
    /* Batch buffers (device memory), reused across batches. */
    void *(*batch_alloc)(Dlk_dev *d, size_t n);
    void (*batch_free)(Dlk_dev *d, void *p);
    /* Copy the samples into dst. */
    dlk_status (*gather)(Dlk_dev *d, const Dlk_gather *g, size_t n, void *dst,
                         dlk_error *err);
    /* Read every byte of buf (each sample's fold, g[i] placed it, added
     * to the running checksum) and keep the device busy for step_ms.
     * `g` is the list the batch was gathered with. */
    dlk_status (*step)(Dlk_dev *d, const void *buf, const Dlk_gather *g,
                       size_t n, double step_ms, dlk_error *err);
    /* Wait for all device work and report the device's times so far and
     * its checksum. */
    dlk_status (*sync)(Dlk_dev *d, Dlk_dev_times *out, dlk_error *err);
    void (*close)(Dlk_dev *d);
    /* Device memory the chunks may hold at once (the loader's budget). */
    void (*set_budget)(Dlk_dev *d, uint64_t bytes);
    /* A point in the device's timeline after all work queued so far
     * (its number in *id), and later, after the work is done, the device
     * time between two points and how much of it gather and step kept
     * the device busy (the loader checks that both marks exist).  No
     * waiting at the mark: a consumer that measures epochs does not
     * drain the device at each one. */
    dlk_status (*mark)(Dlk_dev *d, size_t *id, dlk_error *err);
    dlk_status (*span)(Dlk_dev *d, size_t from, size_t to, double *wall_s,
                       double *busy_s, dlk_error *err);
    /* A consumer's stream (cudaStream_t; NULL: the legacy default) waits
     * for the device work queued so far (the batches gathered), and the
     * device's later work waits for what is queued on that stream (before
     * a buffer it read is written again).  No host wait; cpu: nothing. */
    dlk_status (*consumer_waits)(Dlk_dev *d, void *stream, dlk_error *err);
    dlk_status (*wait_consumer)(Dlk_dev *d, void *stream, dlk_error *err);
    /* Waits until the device has started (an async open), or says why it
     * could not. */
    dlk_status (*ready)(Dlk_dev *d, dlk_error *err);
    /* Check parts of what `upload` just copied (its handle and device
     * pointer) on the device, after the copy; `checked` waits for them
     * and says DLK_ECORRUPT with *bad when one did not match (any part
     * of any check so far: one is enough to stop).  NULL on the cpu. */
    dlk_status (*check)(Dlk_dev *d, void *handle, const void *dev_ptr,
                        const Dlk_vpart *parts, uint32_t n, uint64_t tag,
                        dlk_error *err);
    dlk_status (*checked)(Dlk_dev *d, void *handle, Dlk_vbad *bad,
                          dlk_error *err);
    /* A load on a loading thread (host clock, Dlk_now_s): when it began,
     * when its host buffer was in hand (0: none), when it ended; written
     * to the trace where there is one.  NULL on the cpu. */
    void (*trace_load)(Dlk_dev *d, double begin, double buffer, double end);
    /* Host buffers to make ready ahead of the loads, `bytes` in all
     * (Dlk_dev_opts' host_ahead, raised later: a mix's sources' sum,
     * known once they are open).  NULL on the cpu. */
    void (*host_ahead)(Dlk_dev *d, uint64_t bytes);
    /* Augment the samples g[i].src (u8, shape shapes[i*ndim..]: HWC or
     * THWC) of rows[i] into dst at g[i].dst_off (augment_batch.c checked
     * and placed them); the parameters: augment_params.h.  Counted as
     * gather time.  NULL: not on this device. */
    dlk_status (*augment)(Dlk_dev *d, const Dlk_aug_spec *sp,
                          const Dlk_gather *g, const uint64_t *rows,
                          const int64_t *shapes, int ndim, size_t n,
                          uint64_t epoch, uint64_t seed, void *dst,
                          dlk_error *err);
} Dlk_dev_ops;

struct Dlk_dev {
    const Dlk_dev_ops *ops;
};

/* How a device opens (NULL: the defaults). */
typedef struct Dlk_dev_opts {
    const char *trace;   /* DLK_CUDA_TRACE's file, or NULL */
    uint64_t host_ahead; /* host buffer bytes to make ready from the open */
    /* return once the device is known to exist; it starts meanwhile and
     * ops->ready waits for it (host_alloc may be used before) */
    bool async;
    bool checks;         /* parts will be checked on the device: what
                          * that needs is made while it starts */
} Dlk_dev_opts;

dlk_status Dlk_dev_open_cpu(Dlk_dev **out, dlk_error *err);
/* CUDA device `index`; DLK_EGPU with a reason when unavailable. */
dlk_status Dlk_dev_open_cuda(int index, const Dlk_dev_opts *o, Dlk_dev **out,
                             dlk_error *err);
/* The device a name says: "cpu" (or NULL, ""), "cuda", "cuda:N", or
 * "auto" (cuda:0 when it opens, else the cpu) (loader_open.c). */
dlk_status Dlk_dev_open(const char *name, const Dlk_dev_opts *o,
                        Dlk_dev **out, dlk_error *err);

/* The fold both sides compute for a sample: the sum of its 64-bit
 * little-endian words (a zero-padded tail as one more word), mod 2^64.
 * A batch's fold is the sum of its samples' folds, in any order. */
uint64_t Dlk_fold64(const void *p, size_t n);

#endif
