/* ingest.h - shared by the sources and decoders of lib/ingest/. */
#ifndef DLK_INGEST_H
#define DLK_INGEST_H

#include "internal.h"

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

/* dlk_ingest_npy_dir, the head flushed only when `flush` (from_dir.c). */
dlk_status ing_npy_dir(dlk_dataset *ds, const char *dir,
                       dlk_ingest_stats *stats, bool flush, dlk_error *err);

#endif
