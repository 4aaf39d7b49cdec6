/* ingest.h - shared by the sources and decoders of lib/ingest/. */
#ifndef DLK_INGEST_H
#define DLK_INGEST_H

#include "store/store.h"

typedef struct dlk_npy_header {
    dlk_dtype dtype;
    int ndim;
    int64_t shape[DLK_MAX_NDIM + 1];
    bool swap;           /* big-endian data: swap to little-endian */
    size_t data_off;     /* where the array's bytes start */
    size_t data_bytes;
} dlk_npy_info;

/* Parse the header of the .npy file in p[0..len); checks that the data
 * that follows is exactly what the shape needs.  Errors are DLK_EDECODE
 * naming `name`. */
dlk_status dlk_npy_parse(const uint8_t *p, size_t len, const char *name,
                         dlk_npy_info *h, dlk_error *err);

/* The same from the first len bytes of a .npy file of size bytes (its
 * header, at least): the data is checked against size, not read. */
dlk_status dlk_npy_parse_head(const uint8_t *p, size_t len, uint64_t size,
                              const char *name, dlk_npy_info *h,
                              dlk_error *err);

typedef struct ing_npy_stats {
    uint64_t ingested;   /* samples appended, over all tensors */
    uint64_t skipped;    /* files skipped */
    uint64_t bytes_in;   /* bytes of source files read */
    uint64_t rows;       /* rows appended: the most samples one tensor got */
    uint64_t bytes_out;  /* raw sample bytes appended */
} ing_npy_stats;

/* Append the .npy files `keys` (nkeys, in the order given: path order)
 * of the local store src, each read through it (no link followed, no
 * special file read).  A file belongs to the tensor whose name is its
 * stem's suffix after the last '.' or '_' ("0001.labels.npy",
 * "0001_images.npy") or, failing that, the name of a folder on its path
 * ("images/0001.npy"); a file of no tensor is skipped, counted and told
 * to o->on_bad (o may be NULL) with its key and why.  A file holds one
 * sample, or N samples when its first dimension is N and the rest match
 * the schema's fixed rank + 1.  The head is flushed at the end only when
 * `flush` (from_dir.c). */
dlk_status ing_npy_dir(dlk_dataset *ds, dlk_store *src,
                       const char *const *keys, size_t nkeys,
                       const dlk_ingest_opts *o, ing_npy_stats *stats,
                       bool flush, dlk_error *err);

#endif
