/* docs.c - the small JSON documents of a dataset besides the manifest:
 * dlk.json (the dataset's description) and commits/<id>.json (a manifest
 * with its time, message and stats).  Pure functions of their bytes, so
 * that the readers in lib/dataset/ only fetch, and the fuzzer reaches the
 * parsing directly (tests/fuzz/fuzz_docs.c). */
#include "internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

dlk_status dlk_dataset_doc_parse(const char *json, size_t len,
                                 const char *name, char *id, size_t cap,
                                 dlk_error *err)
{
    json_t *o = dlk_json_load(json, len, name, "dataset description", err);
    if (!o)
        return err ? err->code : DLK_ECORRUPT;
    const char *s = json_string_value(json_object_get(o, "id"));
    dlk_status rc = DLK_OK;
    if (!s || !*s || strlen(s) >= cap)
        rc = dlk_fail(err, DLK_ECORRUPT, "%s: missing or bad 'id'", name);
    else
        strcpy(id, s);
    json_decref(o);
    return rc;
}

dlk_status dlk_commit_parse(const char *json, size_t len, const char *name,
                            dlk_manifest *m, dlk_commit_meta *meta,
                            dlk_error *err)
{
    if (meta)
        memset(meta, 0, sizeof *meta);
    dlk_status rc = dlk_manifest_parse(json, len, name, m, err);
    if (rc || !meta)
        return rc;
    json_t *doc = json_loadb(json, len, 0, NULL);
    const char *t = json_string_value(json_object_get(doc, "time"));
    const char *msg = json_string_value(json_object_get(doc, "message"));
    json_t *stats = json_object_get(doc, "stats");
    json_t *ba = json_object_get(stats, "bytes_added");
    json_t *ca = json_object_get(stats, "chunks_added");
    if (!doc || !t || !msg || !json_is_integer(ba) || !json_is_integer(ca) ||
        json_integer_value(ba) < 0 || json_integer_value(ca) < 0) {
        rc = dlk_fail(err, DLK_ECORRUPT, "%s: missing or bad 'time', "
                      "'message' or 'stats'", name);
    } else if (!(meta->time = strdup(t)) || !(meta->message = strdup(msg))) {
        rc = dlk_oom(err);
    } else {
        meta->bytes_added = (uint64_t)json_integer_value(ba);
        meta->chunks_added = (uint64_t)json_integer_value(ca);
    }
    json_decref(doc);
    if (rc) {
        dlk_commit_meta_free(meta);
        dlk_manifest_free(m);
    }
    return rc;
}

void dlk_commit_meta_free(dlk_commit_meta *meta)
{
    if (meta) {
        free(meta->time);
        free(meta->message);
        memset(meta, 0, sizeof *meta);
    }
}
