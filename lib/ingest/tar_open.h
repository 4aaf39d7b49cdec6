/* tar_open.h - a tar shard opened for libarchive to read (tar.c): mapped
 * when the store can map it, else read through the store in ranges; a
 * compressed shard (ing_shard.gz) through libarchive's gzip filter.
 * Shared by the listing (tar.c) and the stream reader of compressed
 * shards (tgz.c). */
#ifndef DLK_INGEST_TAR_OPEN_H
#define DLK_INGEST_TAR_OPEN_H

#include "pipeline.h"

#include <archive.h>
#include <archive_entry.h>

typedef struct tar_in {
    Dlk_store *store;
    const ing_shard *sh;
    uint64_t pos;       /* next byte to read */
    size_t range;
    Dlk_buf buf;
    dlk_status rc;      /* a read's failure, kept for the message */
    dlk_error err;
} tar_in;

typedef struct ing_tar_reader {
    struct archive *a;
    Dlk_store *store;
    const void *map;    /* the shard mapped, or NULL: read in ranges */
    size_t len;
    tar_in in;          /* the ranges' state; at a fixed address while
                           open (libarchive holds it) */
} ing_tar_reader;

/* Open shard sh of store into *t (DLK_EDECODE naming the shard when it
 * is no tar); ing_tar_close frees it, failed or not. */
dlk_status ing_tar_open(Dlk_store *store, const ing_shard *sh,
                        ing_tar_reader *t, dlk_error *err);
void ing_tar_close(ing_tar_reader *t);
/* Why a read of t failed, and its status in *rc. */
const char *ing_tar_read_error(ing_tar_reader *t, dlk_status *rc);
/* A member's name as a key's tail ("./a.jpg" is "a.jpg"), or NULL. */
const char *ing_tar_member_path(struct archive_entry *e);

#endif
