/* dataset.h - the dataset handle, shared by the files of lib/dataset/. */
#ifndef DLK_DATASET_H
#define DLK_DATASET_H

#include "internal.h"

/* Object keys below the dataset root (formats/dlk-v1.md, "Layout"). */
#define DLK_KEY_DATASET "dlk.json"
#define DLK_KEY_HEAD "staging/manifest.json"
#define DLK_KEY_CHUNKS "chunks/"

/* Samples appended to a tensor and not yet written as a chunk. */
typedef struct dlk_builder {
    dlk_buf raw;
    uint32_t *shapes;          /* samples*ndim dims (variable shapes) */
    size_t shapes_cap;
    uint32_t samples;
    int64_t smin[DLK_MAX_NDIM], smax[DLK_MAX_NDIM];
} dlk_builder;

/* The most recently read chunk of a tensor, kept for sequential reads. */
typedef struct dlk_chunk_cache {
    dlk_chunk *chunk;
    size_t index;
} dlk_chunk_cache;

struct dlk_dataset {
    char *url;
    dlk_store *store;
    char id[64];
    char *head;                /* head commit id, or NULL */
    dlk_manifest m;
    char etag[DLK_ETAG_MAX];   /* of the head manifest as read */
    bool have_etag;
    bool dirty;                /* manifest changed since read */
    bool read_only;            /* opened at a commit */
    dlk_builder *builders;     /* one per tensor */
    dlk_chunk_cache *cache;    /* one per tensor */
    dlk_buf enc;               /* scratch for encoding chunks */
};

/* "chunks/<tensor>/<hash>" for chunk `c` of tensor `t`, in a buffer owned
 * by the tensor. */
const char *dlk_chunk_key(dlk_tensor *t, const char *hash);

/* Read chunk `chunk` of `tensor`, checked against its manifest entry. */
dlk_status dlk_chunk_load(dlk_dataset *ds, size_t tensor, size_t chunk,
                          unsigned mode, void *buf, size_t cap,
                          dlk_chunk **out, dlk_error *err);

/* Publish ds->m as the head manifest (conditional on the version read). */
dlk_status dlk_write_head(dlk_dataset *ds, dlk_error *err);

#endif
