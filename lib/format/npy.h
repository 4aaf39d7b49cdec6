/* npy.h - NumPy's .npy format: parsing a file's header (ingest's .npy
 * sources, query's vectors) and writing one (cat --npy); the public
 * dlk_npy_header and dlk_npy_vectors are in dlk.h. */
#ifndef DLK_FORMAT_NPY_H
#define DLK_FORMAT_NPY_H

#include "dlk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dlk_npy_header {
    dlk_dtype dtype;
    int ndim;
    int64_t shape[DLK_MAX_NDIM + 1];
    bool swap;           /* big-endian data: swap to little-endian */
    size_t data_off;     /* where the array's bytes start */
    size_t data_bytes;
} Dlk_npy_info;

/* Parse the header of the .npy file in p[0..len); checks that the data
 * that follows is exactly what the shape needs.  Errors are DLK_EDECODE
 * naming `name`. */
dlk_status Dlk_npy_parse(const uint8_t *p, size_t len, const char *name,
                         Dlk_npy_info *h, dlk_error *err);

/* The same from the first len bytes of a .npy file of size bytes (its
 * header, at least): the data is checked against size, not read. */
dlk_status Dlk_npy_parse_head(const uint8_t *p, size_t len, uint64_t size,
                              const char *name, Dlk_npy_info *h,
                              dlk_error *err);

#endif
