/* docs.c - the small JSON documents of a dataset besides the manifest:
 * dlk.json (the dataset's description) and commits/<id>.json (a manifest
 * with its time, message and stats).  Pure functions of their bytes, so
 * that the readers in lib/dataset/ only fetch, and the fuzzer reaches the
 * parsing directly (tests/fuzz/fuzz_docs.c). */
#include "util/error.h"
#include "format/manifest.h"
#include "format/docs.h"
#include "format/json.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

dlk_status Dlk_dataset_doc_parse(const char *json, size_t len,
                                 const char *name, char *id, size_t cap,
                                 dlk_error *err)
{
    json_t *o = Dlk_json_load(json, len, name, "dataset description", err);
    if (!o)
        return err ? err->code : DLK_ECORRUPT;
    const char *s = json_string_value(json_object_get(o, "id"));
    dlk_status rc = DLK_OK;
    if (!s || !*s || strlen(s) >= cap)
        rc = Dlk_fail(err, DLK_ECORRUPT, "%s: missing or bad 'id'", name);
    else
        strcpy(id, s);
    json_decref(o);
    return rc;
}

/* "YYYY-MM-DDTHH:MM:SSZ" naming a real day and time of day (UTC, which
 * has no leap second in the times a writer takes from the clock). */
static bool utc_time_valid(const char *s)
{
    static const char form[] = "dddd-dd-ddTdd:dd:ddZ";
    if (strlen(s) != sizeof form - 1)
        return false;
    for (size_t i = 0; form[i]; i++)
        if (form[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != form[i])
            return false;
    int v[6];
    static const int at[6] = {0, 5, 8, 11, 14, 17};
    static const int len[6] = {4, 2, 2, 2, 2, 2};
    for (int k = 0; k < 6; k++) {
        v[k] = 0;
        for (int d = 0; d < len[k]; d++)
            v[k] = v[k] * 10 + (s[at[k] + d] - '0');
    }
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31,
                                  30, 31};
    int y = v[0], mo = v[1], d = v[2];
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return mo >= 1 && mo <= 12 && d >= 1 && d <= mdays[mo - 1] &&
           !(mo == 2 && d == 29 && !leap) && v[3] <= 23 && v[4] <= 59 &&
           v[5] <= 59;
}

static bool is_commit_id(const char *s)
{
    return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

/* The members a commit adds to a manifest (formats/dlk-v1.md 6.1), each
 * required with its type and form, whoever reads the commit: a history
 * walk that took a bad one for the end of the history would let gc
 * remove what older commits hold. */
static dlk_status commit_fields(json_t *doc, const char *name,
                                dlk_error *err)
{
    json_t *parent = json_object_get(doc, "parent");
    json_t *time = json_object_get(doc, "time");
    json_t *message = json_object_get(doc, "message");
    json_t *stats = json_object_get(doc, "stats");
    if (!parent)
        return Dlk_fail(err, DLK_ECORRUPT, "%s: no 'parent' (null or a "
                        "commit id)", name);
    if (!json_is_null(parent) && !(json_is_string(parent) &&
                                   is_commit_id(json_string_value(parent))))
        return Dlk_fail(err, DLK_ECORRUPT, "%s: 'parent' is neither null nor "
                        "a commit id (32 lower-case hex digits)", name);
    if (!json_is_string(time) || !utc_time_valid(json_string_value(time)))
        return Dlk_fail(err, DLK_ECORRUPT, "%s: %s 'time' (want a UTC time "
                        "YYYY-MM-DDTHH:MM:SSZ)", name,
                        time ? "bad" : "no");
    if (!json_is_string(message))
        return Dlk_fail(err, DLK_ECORRUPT, "%s: %s 'message' (want a string)",
                        name, message ? "bad" : "no");
    static const char *const counts[2] = {"bytes_added", "chunks_added"};
    if (!json_is_object(stats))
        return Dlk_fail(err, DLK_ECORRUPT, "%s: %s 'stats' (want {\"%s\": "
                        "N, \"%s\": N})", name, stats ? "bad" : "no",
                        counts[0], counts[1]);
    for (int k = 0; k < 2; k++) {
        json_t *c = json_object_get(stats, counts[k]);
        if (!json_is_integer(c) || json_integer_value(c) < 0)
            return Dlk_fail(err, DLK_ECORRUPT, "%s: %s 'stats.%s' (want an "
                            "integer >= 0)", name, c ? "bad" : "no",
                            counts[k]);
    }
    return DLK_OK;
}

dlk_status Dlk_commit_parse(const char *json, size_t len, const char *name,
                            Dlk_manifest *m, Dlk_commit_meta *meta,
                            dlk_error *err)
{
    memset(m, 0, sizeof *m);
    if (meta)
        memset(meta, 0, sizeof *meta);
    json_t *doc = Dlk_json_load(json, len, name, "commit", err);
    if (!doc)
        return err ? err->code : DLK_ECORRUPT;
    dlk_status rc = commit_fields(doc, name, err);
    if (!rc)
        rc = Dlk_manifest_from_json(doc, name, m, err);
    if (!rc && meta) {
        json_t *stats = json_object_get(doc, "stats");
        if (!(meta->time = strdup(json_string_value(
                  json_object_get(doc, "time")))) ||
            !(meta->message = strdup(json_string_value(
                  json_object_get(doc, "message"))))) {
            rc = Dlk_oom(err);
        } else {
            meta->bytes_added = (uint64_t)json_integer_value(
                json_object_get(stats, "bytes_added"));
            meta->chunks_added = (uint64_t)json_integer_value(
                json_object_get(stats, "chunks_added"));
        }
    }
    json_decref(doc);
    if (rc) {
        Dlk_commit_meta_free(meta);
        Dlk_manifest_free(m);
    }
    return rc;
}

void Dlk_commit_meta_free(Dlk_commit_meta *meta)
{
    if (meta) {
        free(meta->time);
        free(meta->message);
        memset(meta, 0, sizeof *meta);
    }
}
