/*
 * docs.h - the dataset description and commit documents (format/docs.c); not
 * installed.
 */
#ifndef DLK_FORMAT_DOCS_H
#define DLK_FORMAT_DOCS_H

#include "dlk.h"
#include "format/manifest.h"

#include <stddef.h>
#include <stdint.h>

/* dlk.json: the dataset's id into id (cap bytes), checked. */
dlk_status Dlk_dataset_doc_parse(const char *json, size_t len,
                                 const char *name, char *id, size_t cap,
                                 dlk_error *err);
/* A commit document: its manifest, and (meta not NULL) what else it
 * records; everything freed again on an error. */
typedef struct Dlk_commit_meta {
    char *time, *message;
    uint64_t bytes_added, chunks_added;
} Dlk_commit_meta;
dlk_status Dlk_commit_parse(const char *json, size_t len, const char *name,
                            Dlk_manifest *m, Dlk_commit_meta *meta,
                            dlk_error *err);
void Dlk_commit_meta_free(Dlk_commit_meta *meta);

#endif /* DLK_FORMAT_DOCS_H */
