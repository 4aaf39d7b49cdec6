/* test_keys_legacy.c - a dataset whose key tensor holds keys relative to
 * the source prefix, as dlk wrote them before keys named whole objects
 * (formats/dlk-v1.md 6.9, relative keys), ingested by this one.  The
 * dataset is made here in that form, row for row what the earlier dlk
 * wrote for `create from-dir raw/train` then `ingest from-dir
 * raw/new-batch` (its new-batch/cat/0003 dropped as "changed" because
 * train/ has a cat/0003), key index included.  Then: an ingest of
 * new-batch/ that cannot tell a replaced object from another of the same
 * relative name writes nothing and says so; --keys-relative-to records
 * the source and the dropped object is ingested, nothing twice; train/
 * again is all present; a replaced and a new object of train/ are changed
 * and new; the record outlives later merges. */
#include "dataset/dataset.h"
#include "ingest/pipeline.h"
#include "unit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define T1 1764547200 /* train/'s files' mtime, + 0.5 s */
#define T2 1764633600 /* new-batch/'s */

static char root[256];

static bool put_file(const char *rel, const char *text, time_t mtime)
{
    char path[512];
    snprintf(path, sizeof path, "%s/raw/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    if (system(cmd) != 0)
        return false;
    *slash = '/';
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        return false;
    struct timespec ts[2] = {{mtime, 500000000}, {mtime, 500000000}};
    return utimensat(AT_FDCWD, path, ts, 0) == 0;
}

/* The legacy dataset: labels, then key and key_version last. */
static bool make_legacy(const char *url)
{
    static const struct { const char *key; time_t t; int32_t label; } rows[] = {
        {"cat/0001", T1, 1}, {"cat/0003", T1, 3}, {"dog/0004", T1, 4},
        {"cat/0005", T2, 5},
    };
    dlk_tensor_spec s[3];
    if (dlk_tensor_spec_parse("labels:i32", &s[0], NULL))
        return false;
    s[0].kind = DLK_KIND_CLASS_LABEL;
    ing_key_specs(s + 1);
    dlk_dataset *ds;
    if (dlk_dataset_create(url, s, 3, &ds, NULL))
        return false;
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof rows / sizeof rows[0]; i++) {
        char ver[64];
        snprintf(ver, sizeof ver, "2-%lld.500000000", (long long)rows[i].t);
        int64_t kn = (int64_t)strlen(rows[i].key), vn = (int64_t)strlen(ver);
        ok = !dlk_append(ds, 0, &rows[i].label, 4, NULL, 0, NULL) &&
             !dlk_append(ds, 1, rows[i].key, (size_t)kn, &kn, 1, NULL) &&
             !dlk_append(ds, 2, ver, (size_t)vn, &vn, 1, NULL);
    }
    /* the index its merge wrote with the head */
    ok = ok && !dlk_dataset_flush(ds, NULL) && !ing_keyidx_update(ds, NULL) &&
         !Dlk_write_head(ds, NULL);
    return !dlk_dataset_close(ds, NULL) && ok;
}

static dlk_status ingest(const char *url, const char *src, const char *rel_to,
                         int dry, dlk_ingest_result *res, dlk_error *err)
{
    char path[512], base[512];
    snprintf(path, sizeof path, "%s/raw/%s", root, src);
    if (rel_to)
        snprintf(base, sizeof base, "%s/raw/%s", root, rel_to);
    dlk_ingest_opts o = {.size = sizeof o, .source = path, .keys_relative_to = rel_to ? base
                                                                  : NULL,
                         .dry_run = dry, .jobs = 1};
    return dlk_ingest(url, &o, res, err);
}

static uint64_t rows_of(const char *url)
{
    dlk_dataset *ds;
    if (dlk_dataset_open(url, NULL, &ds, NULL))
        return 0;
    uint64_t n = Dlk_manifest_rows(&ds->m);
    dlk_dataset_free(ds);
    return n;
}

/* The head's key_base, or "" (into out). */
static void key_base_of(const char *url, char *out, size_t cap)
{
    dlk_dataset *ds;
    out[0] = '\0';
    if (dlk_dataset_open(url, NULL, &ds, NULL))
        return;
    snprintf(out, cap, "%s", ds->m.key_base ? ds->m.key_base : "");
    dlk_dataset_free(ds);
}

/* Every row's key sample, sorted, joined by '\n'. */
static void keys_of(const char *url, char *out, size_t cap)
{
    dlk_dataset *ds;
    out[0] = '\0';
    if (dlk_dataset_open(url, NULL, &ds, NULL))
        return;
    int tk, tv;
    char *k[64];
    size_t n = 0;
    if (ing_key_tensors(&ds->m, &tk, &tv))
        for (uint64_t i = 0; n < 64 && i < ds->m.tensors[tk].samples; i++) {
            dlk_sample s;
            if (dlk_read_sample(ds, (size_t)tk, i, &s, NULL))
                break;
            k[n++] = strndup(s.data, s.nbytes);
            dlk_sample_free(&s);
        }
    dlk_dataset_free(ds);
    qsort(k, n, sizeof *k, unit_by_name);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s",
                                i ? "\n" : "", k[i]);
        free(k[i]);
    }
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/dlk-test-keys-legacy-%d", (int)getpid());
    char cmd[300], url[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        return 1;
    snprintf(url, sizeof url, "%s/ds", root);
    bool files = put_file("train/cat/0001.cls", "1\n", T1) &&
                 put_file("train/cat/0003.cls", "3\n", T1) &&
                 put_file("train/dog/0004.cls", "4\n", T1) &&
                 put_file("new-batch/cat/0003.cls", "7\n", T2) &&
                 put_file("new-batch/cat/0005.cls", "5\n", T2);
    UNIT_CHECK("the sources", files);
    UNIT_CHECK("a dataset of relative keys, with its key index",
               make_legacy(url) && rows_of(url) == 4);
    char *real = realpath(root, NULL);
    char train[600], batch[600];
    snprintf(train, sizeof train, "%s/raw/train/", real ? real : root);
    snprintf(batch, sizeof batch, "%s/raw/new-batch/", real ? real : root);
    free(real);

    dlk_ingest_result r = DLK_INGEST_RESULT_INIT;
    dlk_error e = {0};
    dlk_status rc = ingest(url, "new-batch", NULL, 0, &r, &e);
    UNIT_CHECK("new-batch/ without knowing the rows' source: refused",
               rc == DLK_EINVAL);
    UNIT_CHECK("... naming the object and the way out",
               strstr(e.msg, "'cat/0003'") && !strstr(e.msg, "0005") &&
               strstr(e.msg, "--keys-relative-to"));
    UNIT_CHECK("... and writing nothing", rows_of(url) == 4);

    rc = ingest(url, "new-batch", "train", 1, &r, &e);
    UNIT_CHECK("a dry run naming train/: 1 new, 1 present",
               rc == DLK_OK && r.new_rows == 1 && r.present == 1 &&
               r.changed == 0 && r.planned == 1);
    char kb[600];
    key_base_of(url, kb, sizeof kb);
    UNIT_CHECK("... records nothing", rows_of(url) == 4 && !kb[0]);

    rc = ingest(url, "new-batch", "train", 0, &r, &e);
    UNIT_CHECK("new-batch/ with --keys-relative-to train/",
               rc == DLK_OK && r.ingested == 1 && r.new_rows == 1 &&
               r.present == 1 && r.changed == 0);
    key_base_of(url, kb, sizeof kb);
    UNIT_CHECK("... records train/'s absolute path as key_base",
               strcmp(kb, train) == 0);

    rc = ingest(url, "train", NULL, 0, &r, &e);
    UNIT_CHECK("train/ again: its 3 objects present, nothing new",
               rc == DLK_OK && r.ingested == 0 && r.new_rows == 0 &&
               r.present == 3 && r.changed == 0);
    rc = ingest(url, "new-batch", NULL, 0, &r, &e);
    UNIT_CHECK("new-batch/ again: its 2 objects present",
               rc == DLK_OK && r.ingested == 0 && r.present == 2 &&
               r.changed == 0);

    /* train/ grows and one of its objects is replaced */
    put_file("train/cat/0006.cls", "6\n", T1);
    put_file("train/cat/0001.cls", "8\n", T2);
    rc = ingest(url, "train", NULL, 0, &r, &e);
    UNIT_CHECK("train/ with one new and one replaced object",
               rc == DLK_OK && r.ingested == 1 && r.new_rows == 1 &&
               r.present == 2 && r.changed == 1);
    key_base_of(url, kb, sizeof kb);
    UNIT_CHECK("key_base outlives the merges", strcmp(kb, train) == 0);

    char want[4096], got[4096];
    snprintf(want, sizeof want, "%scat/0003\n%scat/0006\ncat/0001\ncat/0003\n"
             "cat/0005\ndog/0004", batch, train);
    keys_of(url, got, sizeof got);
    UNIT_CHECK("every object once: the old rows as they were, the new by "
               "their paths", strcmp(got, want) == 0 && rows_of(url) == 6);
    if (strcmp(got, want))
        printf("# got:\n%s\n# want:\n%s\n", got, want);

    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        return 1;
    return unit_done();
}
