/* ingest.h - shared by the sources and decoders of lib/ingest/. */
#ifndef DLK_INGEST_H
#define DLK_INGEST_H

#include "format/npy.h"
#include "store/store.h"

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
dlk_status ing_npy_dir(dlk_dataset *ds, Dlk_store *src,
                       const char *const *keys, size_t nkeys,
                       const dlk_ingest_opts *o, ing_npy_stats *stats,
                       bool flush, dlk_error *err);

#endif
