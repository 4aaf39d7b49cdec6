/* test_keyidx.c - the key index as runs (formats/dlk-v1.md 6.9): each
 * merge writes a run of its new rows only (the object's size says so),
 * the newest runs are merged by the size rule so that many small
 * ingests leave few runs, a lookup of a few keys reads a few blocks and
 * finds exactly what the key chunks hold (present, changed, new) across
 * every run and the rows past them, a corrupt run is not used and the
 * answer stays right, verify names it, compact folds every run into one,
 * a head of an earlier writer's single object is read and folded into
 * the first run, gc keeps the runs that the head and a commit name. */
#include "dataset/dataset.h"
#include "unit.h"

#include <sys/stat.h>
#include <unistd.h>

#define BASE 200000

static char root[256], url[300];

static void key_of(uint64_t i, char *out, size_t cap)
{
    snprintf(out, cap, "s3://raw/train/%07llu.jpg", (unsigned long long)i);
}

/* Rows [a, b) appended (version "v<i>", or "w<i>" when alt), then, with
 * index, the merge's index update; the head written. */
static bool add_rows(uint64_t a, uint64_t b, bool alt, bool index,
                     Dlk_keyidx_stats *st)
{
    dlk_dataset *ds;
    if (dlk_dataset_open(url, NULL, &ds, NULL))
        return false;
    bool ok = true;
    for (uint64_t i = a; ok && i < b; i++) {
        char k[64], v[32];
        key_of(i, k, sizeof k);
        snprintf(v, sizeof v, "%s%llu", alt ? "w" : "v", (unsigned long long)i);
        int64_t kn = (int64_t)strlen(k), vn = (int64_t)strlen(v);
        ok = !dlk_append(ds, 0, k, (size_t)kn, &kn, 1, NULL) &&
             !dlk_append(ds, 1, v, (size_t)vn, &vn, 1, NULL);
    }
    if (st)
        memset(st, 0, sizeof *st);
    dlk_error e;
    ok = ok && !Dlk_dataset_seal(ds, &e) && !Dlk_seal_wait(ds, &e) &&
         (!index || !Dlk_keyidx_update(ds, st, &e)) &&
         !Dlk_write_head(ds, &e);
    if (!ok)
        printf("# add_rows: %s\n", e.msg);
    dlk_dataset_free(ds);
    return ok;
}

static dlk_dataset *open_ds(void)
{
    dlk_dataset *ds = NULL;
    dlk_dataset_open(url, NULL, &ds, NULL);
    return ds;
}

static uint64_t file_size(const char *key)
{
    char p[600];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", url, key);
    return stat(p, &sb) ? 0 : (uint64_t)sb.st_size;
}

static uint64_t run_size(uint64_t rows)
{
    return 48 + 16 * ((rows + 4095) / 4096) + 16 * rows;
}

/* The head's run sizes as text: "10000 7". */
static void runs_of(char *out, size_t cap)
{
    dlk_dataset *ds = open_ds();
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; ds && i < ds->m.nkey_runs; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%llu", i ? " " : "",
                              (unsigned long long)ds->m.key_runs[i].rows);
    dlk_dataset_free(ds);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The lookup of q (NULL: all) equals the key chunks' answer. */
static bool lookup_right(const uint64_t *q, size_t nq, Dlk_keyidx_stats *st)
{
    dlk_dataset *ds = open_ds();
    int tk, tv;
    if (!ds || !Dlk_key_tensors(&ds->m, &tk, &tv))
        return false;
    Dlk_key_ents got = {0}, want = {0};
    dlk_error e;
    memset(st, 0, sizeof *st);
    bool ok = !Dlk_keyidx_lookup(ds, tk, tv, q, nq, &got, st, &e) &&
              !Dlk_key_rows(ds, tk, tv, 0, ds->m.tensors[tk].samples, q, nq,
                            &want, NULL, &e);
    Dlk_key_ents_sort(&want);
    ok = ok && got.n == want.n &&
         (!got.n || memcmp(got.e, want.e, got.n * sizeof *got.e) == 0);
    if (!ok)
        printf("# lookup: %zu entries, %zu from the chunks\n", got.n, want.n);
    Dlk_key_ents_free(&got);
    Dlk_key_ents_free(&want);
    dlk_dataset_free(ds);
    return ok;
}

/* The hashes of the keys of rows rows[0..n), sorted. */
static size_t queries(const uint64_t *rows, size_t n, uint64_t *q)
{
    for (size_t i = 0; i < n; i++) {
        char k[64];
        key_of(rows[i], k, sizeof k);
        q[i] = Dlk_hash64(k, strlen(k));
    }
    qsort(q, n, sizeof *q, cmp_u64);
    return n;
}

static void flip(const char *key, uint64_t off)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", url, key);
    chmod(p, 0644);
    FILE *f = fopen(p, "r+b");
    if (!f)
        return;
    fseek(f, (long)off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)off, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static void problem(void *ud, const char *object, const char *why)
{
    char *seen = ud;
    DLK_UNUSED(why);
    snprintf(seen, 200, "%.199s", object);
}

/* An earlier writer's single key_index object of every row, made the
 * head's index in place of its runs. */
static bool make_legacy(void)
{
    dlk_dataset *ds = open_ds();
    int tk, tv;
    if (!ds || !Dlk_key_tensors(&ds->m, &tk, &tv))
        return false;
    Dlk_key_ents all = {0};
    uint64_t rows = ds->m.tensors[tk].samples;
    bool ok = !Dlk_key_rows(ds, tk, tv, 0, rows, NULL, 0, &all, NULL, NULL);
    Dlk_key_ents_sort(&all);
    size_t len = 24 + 16 * all.n;
    uint8_t *p = calloc(1, len);
    ok = ok && p;
    if (ok) {
        memcpy(p, "DLKI", 4);
        Dlk_put_le16(p + 4, 1);
        Dlk_put_le64(p + 8, all.n);
        for (size_t i = 0; i < all.n; i++) {
            Dlk_put_le64(p + 24 + 16 * i, all.e[i].key);
            Dlk_put_le64(p + 32 + 16 * i, all.e[i].version);
        }
        Dlk_put_le64(p + 16, Dlk_hash64(p + 24, len - 24));
        char hex[33];
        struct iovec v = {p, len};
        ok = !Dlk_store_putv_hashed(ds->store, DLK_KEY_INDEX_PREFIX, &v, 1,
                                    DLK_PUT_IF_ABSENT, hex, NULL);
        snprintf(ds->m.key_index, sizeof ds->m.key_index, "%s%s",
                 DLK_KEY_INDEX_PREFIX, hex);
        ds->m.key_index_rows = rows;
        free(ds->m.key_runs);
        ds->m.key_runs = NULL;
        ds->m.nkey_runs = 0;
        ds->dirty = true;
        ok = ok && !Dlk_write_head(ds, NULL);
    }
    free(p);
    Dlk_key_ents_free(&all);
    dlk_dataset_free(ds);
    return ok;
}

static int count_index_objects(void)
{
    char p[600];
    snprintf(p, sizeof p, "%s/index/keys", url);
    DIR *d = opendir(p);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static bool index_object_exists(const char *key)
{
    return file_size(key) > 0;
}

int main(void)
{
    char cmd[700], runs[256];
    snprintf(root, sizeof root, "/tmp/dlk-test-keyidx-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", root, root);
    if (system(cmd) != 0)
        return 1;
    snprintf(url, sizeof url, "%s/ds", root);
    dlk_tensor_spec s[2];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 2; i++) {
        snprintf(s[i].name, sizeof s[i].name, "%s",
                 i ? DLK_KEY_VERSION_TENSOR : DLK_KEY_TENSOR);
        s[i].dtype = DLK_U8;
        s[i].kind = DLK_KIND_TEXT;
        s[i].ndim = 1;
        s[i].shape[0] = DLK_DIM_VARIABLE;
        s[i].codec = DLK_CODEC_ZSTD;
    }
    dlk_dataset *ds;
    UNIT_CHECK("create", !dlk_dataset_create(url, s, 2, &ds, NULL) &&
                             !dlk_dataset_close(ds, NULL));

    Dlk_keyidx_stats st;
    UNIT_CHECK("200000 rows: one run", add_rows(0, BASE, false, true, &st));
    runs_of(runs, sizeof runs);
    UNIT_CHECK("... of 200000 rows", strcmp(runs, "200000") == 0);
    UNIT_CHECK("... its object the header, 49 blocks' table and the entries",
               st.written == run_size(BASE));
    ds = open_ds();
    UNIT_CHECK("... of that size in the store",
               ds && file_size(ds->m.key_runs[0].object) == run_size(BASE));
    dlk_dataset_free(ds);

    UNIT_CHECK("7 rows more", add_rows(BASE, BASE + 7, false, true, &st));
    runs_of(runs, sizeof runs);
    UNIT_CHECK("... a second run of 7 rows", strcmp(runs, "200000 7") == 0);
    UNIT_CHECK("... writing those 7 rows only, reading no run",
               st.written == run_size(7) && st.runs_merged == 0 &&
                   st.bytes == 0 && st.chunk_rows == 7);
    ds = open_ds();
    UNIT_CHECK("... its object 48 + 16 + 7 x 16 bytes",
               ds && ds->m.nkey_runs == 2 &&
                   file_size(ds->m.key_runs[1].object) == run_size(7));
    dlk_dataset_free(ds);
    UNIT_CHECK("7 more (within twice the last run): merged with it",
               add_rows(BASE + 7, BASE + 14, false, true, &st));
    runs_of(runs, sizeof runs);
    UNIT_CHECK("... runs 200000 and 14",
               strcmp(runs, "200000 14") == 0 && st.runs_merged == 1 &&
                   st.written == run_size(14));
    UNIT_CHECK("3 more", add_rows(BASE + 14, BASE + 17, false, true, &st));
    runs_of(runs, sizeof runs);
    UNIT_CHECK("... a run of their own", strcmp(runs, "200000 14 3") == 0);
    UNIT_CHECK("20 more: the newest two merged with them",
               add_rows(BASE + 17, BASE + 37, false, true, &st));
    runs_of(runs, sizeof runs);
    UNIT_CHECK("... runs 200000 and 37",
               strcmp(runs, "200000 37") == 0 && st.runs_merged == 2);

    /* 50 ingests of 5 rows: few runs, few bytes written a row */
    uint64_t written = 0, next = BASE + 37;
    bool ok = true;
    for (int i = 0; ok && i < 50; i++, next += 5) {
        ok = add_rows(next, next + 5, false, true, &st);
        written += st.written;
    }
    ds = open_ds();
    size_t nruns = ds ? ds->m.nkey_runs : 0;
    dlk_dataset_free(ds);
    printf("# 50 ingests of 5 rows: %zu runs, %llu bytes written\n", nruns,
           (unsigned long long)written);
    UNIT_CHECK("50 ingests of 5 rows", ok);
    UNIT_CHECK("... leave at most log2 of the rows + 1 runs",
               nruns >= 2 && nruns <= 10);
    /* a row rewritten at most ~log2(250 / 5) times, plus its first write */
    UNIT_CHECK("... and wrote less than 16 x 8 bytes a row (not the 200000)",
               written < 250 * 16 * 8 + 50 * 2 * 100 && written > 250 * 16);

    /* lookups across the runs: present in the large run, in small ones,
     * new; changed (another version) */
    UNIT_CHECK("a row of another version (changed)",
               add_rows(3, 4, true, true, &st));
    uint64_t rows[] = {3, 150000, 99999, BASE + 3, BASE + 20, next - 1,
                      5000000};
    uint64_t q[16];
    size_t nq = queries(rows, 7, q);
    UNIT_CHECK("7 keys looked up: exactly the key chunks' entries",
               lookup_right(q, nq, &st));
    UNIT_CHECK("... the changed key's two versions found",
               st.runs >= 2 && st.chunk_rows == 0);
    printf("# lookup of 7: %llu runs, %llu blocks, %llu bytes\n",
           (unsigned long long)st.runs, (unsigned long long)st.blocks,
           (unsigned long long)st.bytes);
    UNIT_CHECK("... reading at most 2 blocks a key and the tables, not "
               "the runs",
               st.blocks <= 2 * nq + st.runs &&
                   st.bytes < run_size(BASE) / 3);
    UNIT_CHECK("every key: the key chunks' entries", lookup_right(NULL, 0, &st));

    /* rows past the index (a writer that keeps none) */
    UNIT_CHECK("4 rows without the index", add_rows(next, next + 4, false,
                                                    false, NULL));
    uint64_t tail[] = {next + 2, 17};
    nq = queries(tail, 2, q);
    UNIT_CHECK("... found from the key chunks",
               lookup_right(q, nq, &st) && st.chunk_rows == 4);
    UNIT_CHECK("... and the next merge's run holds them",
               add_rows(next + 4, next + 5, false, true, &st) &&
                   st.chunk_rows == 5);
    next += 5;

    /* a corrupt run is not used: its rows come from the key chunks */
    ds = open_ds();
    char big[DLK_KEY_INDEX_MAX] = "";
    if (ds && ds->m.nkey_runs)
        snprintf(big, sizeof big, "%s", ds->m.key_runs[0].object);
    dlk_dataset_free(ds);
    flip(big, 48 + 16 * 49 + 16 * 5000 + 3); /* an entry of block 1 */
    UNIT_CHECK("a run with a corrupt block: the answer still right",
               lookup_right(NULL, 0, &st));
    UNIT_CHECK("... the run not used", st.runs_bad == 1 &&
                                           st.chunk_rows >= BASE);
    uint64_t inblock0[] = {12};
    nq = queries(inblock0, 1, q);
    UNIT_CHECK("... (a key of a sound block of it read by itself)",
               lookup_right(q, nq, &st) && st.runs_bad == 0);
    char seen[256] = "";
    dlk_verify_opts vo = {.size = sizeof vo, .on_problem = problem, .ud = seen};
    dlk_verify_result vr = DLK_VERIFY_RESULT_INIT;
    ds = open_ds();
    UNIT_CHECK("verify: the corrupt run is a problem",
               ds && !dlk_verify(ds, &vo, &vr, NULL) && vr.problems == 1 &&
                   strcmp(seen, big) == 0);
    dlk_dataset_free(ds);
    flip(big, 20); /* and its header */
    UNIT_CHECK("a run with a corrupt header: the answer still right",
               lookup_right(q, nq, &st) && st.runs_bad == 1);

    /* a commit, then more rows; gc keeps what the head and the commit
     * name, removes the runs merged away */
    ds = open_ds();
    int committed = 0;
    char id[DLK_ID_MAX];
    UNIT_CHECK("commit", ds && !dlk_commit(ds, "k",
                                          DLK_COMMIT_UNSAFE_SINGLE_WRITER, id,
                                          &committed, NULL));
    dlk_dataset_free(ds);
    UNIT_CHECK("more rows", add_rows(next, next + 300, false, true, &st));
    next += 300;
    ds = open_ds();
    dlk_gc_opts go = {.size = sizeof go, .grace_seconds = 0};
    dlk_gc_result gr = DLK_GC_RESULT_INIT;
    UNIT_CHECK("gc", ds && !dlk_gc(ds, &go, &gr, NULL));
    bool kept = ds != NULL;
    for (size_t i = 0; ds && i < ds->m.nkey_runs; i++)
        kept = kept && index_object_exists(ds->m.key_runs[i].object);
    UNIT_CHECK("... keeps the head's runs", kept);
    UNIT_CHECK("... and the commit's (the corrupt one too)",
               index_object_exists(big));
    dlk_dataset_free(ds);
    int objs = count_index_objects();
    UNIT_CHECK("... and removed runs that were merged", objs <= 24);

    /* compact: one run of every row, the corrupt one rebuilt */
    ds = open_ds();
    dlk_compact_result cr = DLK_COMPACT_RESULT_INIT;
    UNIT_CHECK("compact", ds && !dlk_compact(ds, NULL, &cr, NULL));
    printf("# compact: key index %llu -> %llu runs\n",
           (unsigned long long)cr.key_runs_before,
           (unsigned long long)cr.key_runs_after);
    UNIT_CHECK("... folds the runs into one",
               cr.key_runs_before > 1 && cr.key_runs_after == 1);
    dlk_dataset_free(ds);
    runs_of(runs, sizeof runs);
    char want[32];
    uint64_t total = next + 1; /* and the row of another version */
    snprintf(want, sizeof want, "%llu", (unsigned long long)total);
    UNIT_CHECK("... of every row", strcmp(runs, want) == 0);
    UNIT_CHECK("... its answers those of the key chunks",
               lookup_right(NULL, 0, &st) && st.runs_bad == 0 &&
                   lookup_right(q, nq, &st) && st.runs_bad == 0);

    /* an earlier writer's head: one key_index object */
    UNIT_CHECK("a head with a single key_index object", make_legacy());
    UNIT_CHECK("... read (whole), the answer right",
               lookup_right(q, nq, &st) && st.runs_bad == 0 &&
                   st.chunk_rows == 0 && st.bytes == 24 + 16 * total);
    UNIT_CHECK("... 2 rows more", add_rows(next, next + 2, false, true, &st));
    ds = open_ds();
    UNIT_CHECK("... folded into the first run, the new rows a second",
               ds && !ds->m.key_index[0] && ds->m.nkey_runs == 2 &&
                   ds->m.key_runs[0].rows == total &&
                   ds->m.key_runs[1].rows == 2);
    dlk_dataset_free(ds);
    UNIT_CHECK("... answers right", lookup_right(NULL, 0, &st));

    /* the member */
    static const char *bad[] = {
        "[]", "{}", "[{\"object\":\"index/keys/abc\",\"rows\":1}]",
        "[{\"object\":\"index/keys/0123456789abcdef0123456789abcdef\","
        "\"rows\":0}]",
        "[{\"object\":\"index/keys/0123456789abcdef0123456789abcdef\"}]",
        "[{\"object\":\"index/keys/0123456789abcdef0123456789abcdef\","
        "\"rows\":9223372036854775807},{\"object\":\"index/keys/"
        "0123456789abcdef0123456789abcdef\",\"rows\":1}]",
    };
    bool refused = true;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[512];
        snprintf(doc, sizeof doc, "{\"format\":\"dlk\",\"version\":1,"
                 "\"tensors\":[],\"key_runs\":%s}", bad[i]);
        Dlk_manifest m;
        refused = refused && Dlk_manifest_parse(doc, strlen(doc), "m", &m,
                                                NULL) == DLK_ECORRUPT;
    }
    UNIT_CHECK("malformed key_runs refused", refused);

    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0)
        return 1;
    return unit_done();
}
