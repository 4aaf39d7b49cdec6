/* key_lookup.c - the cost of incremental ingest by key at N keys (default
 * 1,000,000), against the cost of the listing it follows, measured in the
 * same run by the same code:
 *
 *   listing  N + N/10 keys as an S3 listing gives them: ListObjectsV2
 *            pages of 1,000 keys with ETags parsed (s3_xml_list_etags),
 *            each key added to the ingest's source and the source sorted
 *            and grouped into rows (ing_source_add, ing_source_finish).
 *            No network: a real listing adds a round trip a page, so this
 *            is the least a listing costs.
 *   lookup   what an ingest does before it reads anything: the key index
 *            of a dataset of N rows read and checked (ing_keyset_load),
 *            then every listed row's key and version hashed and looked up
 *            (N present, N/10 new): time, and the peak RSS it adds.
 *   no index the same from the key chunks alone (a head without index).
 *
 *   build/tests/key_lookup [N] [DIR]   (DIR: where the dataset is made)
 */
#include "ingest/pipeline.h"
#include "store/s3_internal.h"
#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE 1000

static void die(const char *what, const dlk_error *e)
{
    fprintf(stderr, "key_lookup: %s: %s\n", what, e ? e->msg : "");
    exit(1);
}

/* kB of a /proc/self/status field (VmRSS, VmHWM). */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

/* Reset the peak RSS to the current RSS (Linux: clear_refs 5). */
static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static void key_of(size_t i, char *out, size_t cap)
{
    snprintf(out, cap, "train/n%05zu/%08zu.jpg", i % 1000, i);
}

static void etag_of(size_t i, char *out, size_t cap)
{
    snprintf(out, cap, "%016llx%016llx", (unsigned long long)(i * 2654435761u),
             (unsigned long long)i);
}

typedef struct strip_ud {
    ing_source *src;
    size_t strip;
} strip_ud;

static int on_item(void *ud, const char *key, uint64_t size, const char *etag)
{
    strip_ud *u = ud;
    return ing_source_add(u->src, key + u->strip, size, etag);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    const char *dir = argc > 2 ? argv[2] : NULL;
    char tmpl[] = "/tmp/dlk-keylookup.XXXXXX";
    if (!dir && !(dir = mkdtemp(tmpl)))
        die("mkdtemp", NULL);
    char url[512];
    snprintf(url, sizeof url, "%s/ds", dir);
    size_t listed = n + n / 10;
    dlk_error e;

    /* the dataset: N rows of key and key_version, then its key index */
    dlk_tensor_spec specs[2];
    ing_key_specs(specs);
    dlk_dataset *ds;
    if (dlk_dataset_create(url, specs, 2, &ds, &e))
        die("create", &e);
    char key[128], ver[64];
    double t0 = Dlk_now_s();
    for (size_t i = 0; i < n; i++) {
        key_of(i, key, sizeof key);
        etag_of(i, ver, sizeof ver);
        int64_t a = (int64_t)strlen(key), b = (int64_t)strlen(ver);
        if (dlk_append(ds, 0, key, (size_t)a, &a, 1, &e) ||
            dlk_append(ds, 1, ver, (size_t)b, &b, 1, &e))
            die("append", &e);
    }
    if (dlk_dataset_flush(ds, &e))
        die("flush", &e);
    dlk_dataset_free(ds);
    if (dlk_dataset_open(url, NULL, &ds, &e) || ing_keyidx_update(ds, &e) ||
        Dlk_write_head(ds, &e))
        die("key index", &e);
    dlk_dataset_free(ds);
    double make_s = Dlk_now_s() - t0;

    /* the listing: pages of ListObjectsV2 with ETags, parsed and grouped */
    Dlk_buf page;
    Dlk_buf_init(&page);
    ing_source src;
    memset(&src, 0, sizeof src);
    strip_ud su = {&src, strlen("raw/")};
    double list_s = 0;
    for (size_t p0 = 0; p0 < listed; p0 += PAGE) {
        page.len = 0;
        char line[256];
        int m = snprintf(line, sizeof line, "<?xml version=\"1.0\" encoding="
                         "\"UTF-8\"?><ListBucketResult><Name>b</Name><Prefix>"
                         "raw/</Prefix><KeyCount>%d</KeyCount><IsTruncated>"
                         "%s</IsTruncated>", PAGE,
                         p0 + PAGE < listed ? "true" : "false");
        Dlk_buf_append(&page, line, (size_t)m, &e);
        if (p0 + PAGE < listed) {
            m = snprintf(line, sizeof line, "<NextContinuationToken>t%zu"
                         "</NextContinuationToken>", p0);
            Dlk_buf_append(&page, line, (size_t)m, &e);
        }
        for (size_t i = p0; i < p0 + PAGE && i < listed; i++) {
            key_of(i, key, sizeof key);
            etag_of(i, ver, sizeof ver);
            m = snprintf(line, sizeof line, "<Contents><Key>raw/%s</Key>"
                         "<LastModified>2026-11-28T00:00:00.000Z</LastModified>"
                         "<ETag>&quot;%s&quot;</ETag><Size>1234</Size>"
                         "<StorageClass>STANDARD</StorageClass></Contents>",
                         key, ver);
            if (Dlk_buf_append(&page, line, (size_t)m, &e))
                die("page", &e);
        }
        Dlk_buf_append(&page, "</ListBucketResult>", 19, &e);
        s3_list_page pg;
        double t = Dlk_now_s();
        if (s3_xml_list_etags(page.data, page.len, on_item, &su, &pg, "raw",
                              &e))
            die("parse", &e);
        list_s += Dlk_now_s() - t;
        s3_list_page_fini(&pg);
    }
    Dlk_buf_free(&page);
    double t = Dlk_now_s();
    if (ing_source_finish(&src, "raw", &e))
        die("group", &e);
    list_s += Dlk_now_s() - t;

    /* the lookup, with the index and without */
    double look_s[2], load_s[2];
    long peak_kb[2];
    size_t counts[2][4];
    for (int pass = 0; pass < 2; pass++) {
        if (dlk_dataset_open(url, NULL, &ds, &e))
            die("open", &e);
        if (pass == 1) { /* as a head without the index */
            ds->m.key_index[0] = '\0';
            ds->m.nkey_runs = 0;
        }
        int tk, tv;
        if (!ing_key_tensors(&ds->m, &tk, &tv))
            die("no key tensors", NULL);
        reset_peak();
        long rss0 = status_kb("VmRSS");
        t = Dlk_now_s();
        ing_keyset ks;
        if (ing_keyset_load(ds, tk, tv, &ks, &e))
            die("load keys", &e);
        load_s[pass] = Dlk_now_s() - t;
        Dlk_buf tmp;
        Dlk_buf_init(&tmp);
        memset(counts[pass], 0, sizeof counts[pass]);
        for (size_t r = 0; r < src.nrows; r++) {
            ing_row_hashes h;
            if (ing_row_key_hashes(&src, r, NULL, &tmp, &h, &e))
                die("hash", &e);
            counts[pass][ing_key_classify(&ks, &h, false)]++;
        }
        look_s[pass] = Dlk_now_s() - t;
        peak_kb[pass] = status_kb("VmHWM") - rss0;
        Dlk_buf_free(&tmp);
        ing_keyset_free(&ks);
        dlk_dataset_free(ds);
    }
    printf("key_lookup: %zu keys in the dataset, %zu listed (made in %.1f s)\n",
           n, listed, make_s);
    printf("  listing (parse %zu pages + group)   %8.3f s   the baseline\n",
           (listed + PAGE - 1) / PAGE, list_s);
    const char *what[2] = {"key index", "key chunks (no index)"};
    for (int i = 0; i < 2; i++)
        printf("  lookup, %-21s       %8.3f s   %.2fx the listing (keys read "
               "%.3f s, %zu rows looked up %.3f s), peak RSS +%.1f MB\n",
               what[i], look_s[i], look_s[i] / list_s, load_s[i], src.nrows,
               look_s[i] - load_s[i], (double)peak_kb[i] / 1024);
    printf("  found: %zu present, %zu new, %zu changed (want %zu, %zu, 0)\n",
           counts[0][ING_KEY_PRESENT], counts[0][ING_KEY_NEW],
           counts[0][ING_KEY_CHANGED], n, listed - n);
    bool right = counts[0][ING_KEY_PRESENT] == n &&
                 counts[0][ING_KEY_NEW] == listed - n &&
                 !memcmp(counts[0], counts[1], sizeof counts[0]);
    ing_source_free(&src);
    if (argc <= 2) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "key_lookup: cannot remove %s\n", dir);
    }
    return right ? 0 : 1;
}
