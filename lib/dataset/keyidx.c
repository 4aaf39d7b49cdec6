/* keyidx.c - the key index of a dataset with key tensors
 * (formats/dlk-v1.md 6.9): which (key, version) hashes its rows hold, so
 * that an ingest knows the objects ingested before without reading every
 * key chunk.
 *
 * The index is a list of sorted runs, as in an LSM tree: each covers the
 * rows after the runs before it, each merge of an ingest adds one run of
 * just its new rows, and the newest runs are merged when they come within
 * a size ratio of each other, so that a dataset of N rows has O(log N)
 * runs and a row is rewritten O(log N) times in all.  A run's entries are
 * in blocks with a table of each block's first key and checksum, so that
 * looking up k keys reads the table and at most k blocks, each checked,
 * not the run.  A run that is missing or fails a check only repeats what
 * the key chunks hold: its rows are read from those instead.  Heads of
 * earlier writers name one sorted object of every row (key_index), read
 * whole and folded into a run by the next merge. */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEGACY_MAGIC "DLKI"
#define LEGACY_HEADER 24
#define RUN_MAGIC "DLKR"
#define RUN_HEADER 48
#define RUN_BLOCK 4096              /* entries a block, as libdlk writes */
#define RUN_BLOCK_MAX (1u << 20)
#define RUN_TABLE_MAX ((uint64_t)256 << 20)
/* merge the newest runs while the one before is at most this many times
 * their size (formats/dlk-v1.md 6.9) */
#define RUN_RATIO 2
/* blocks between two needed ones read with them rather than apart */
#define RUN_GAP 2
/* bytes of blocks read in one round of ranged reads */
#define RUN_BATCH ((uint64_t)64 << 20)
/* the legacy object read whole, as earlier writers made it */
#define LEGACY_MAX ((uint64_t)1 << 36)

/* ---- entries ------------------------------------------------------- */

void Dlk_key_ents_free(Dlk_key_ents *k)
{
    free(k->e);
    memset(k, 0, sizeof *k);
}

dlk_status Dlk_key_ents_add(Dlk_key_ents *k, uint64_t kh, uint64_t vh,
                            dlk_error *err)
{
    if (!DLK_GROW(k->e, k->n, k->cap, 1024))
        return Dlk_fail(err, DLK_ENOMEM, "out of memory for the keys");
    k->e[k->n].key = kh;
    k->e[k->n++].version = vh;
    return DLK_OK;
}

static int ent_cmp(const Dlk_key_ent *a, const Dlk_key_ent *b)
{
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->version > b->version) - (a->version < b->version);
}

static int cmp_ent(const void *a, const void *b)
{
    return ent_cmp(a, b);
}

void Dlk_key_ents_sort(Dlk_key_ents *k)
{
    if (k->n > 1)
        qsort(k->e, k->n, sizeof *k->e, cmp_ent);
}

/* a and b (each sorted) into one sorted array, in a (b emptied). */
static dlk_status ents_merge(Dlk_key_ents *a, Dlk_key_ents *b,
                             dlk_error *err)
{
    if (!b->n) {
        Dlk_key_ents_free(b);
        return DLK_OK;
    }
    if (!a->n) {
        Dlk_key_ents_free(a);
        *a = *b;
        memset(b, 0, sizeof *b);
        return DLK_OK;
    }
    size_t n = a->n + b->n;
    Dlk_key_ent *v = malloc(n * sizeof *v);
    if (!v)
        return Dlk_fail(err, DLK_ENOMEM, "out of memory for the keys");
    size_t i = 0, j = 0, o = 0;
    while (i < a->n && j < b->n)
        v[o++] = ent_cmp(&a->e[i], &b->e[j]) <= 0 ? a->e[i++] : b->e[j++];
    while (i < a->n)
        v[o++] = a->e[i++];
    while (j < b->n)
        v[o++] = b->e[j++];
    Dlk_key_ents_free(a);
    Dlk_key_ents_free(b);
    a->e = v;
    a->n = a->cap = n;
    return DLK_OK;
}

/* Whether q[0..nq) (sorted; NULL: every key) holds kh. */
static bool wanted(const uint64_t *q, size_t nq, uint64_t kh)
{
    if (!q)
        return true;
    size_t lo = 0, hi = nq;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (q[mid] < kh)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nq && q[lo] == kh;
}

/* ---- the key tensors ------------------------------------------------ */

static bool is_key_tensor(const Dlk_tensor *t, const char *name)
{
    const dlk_tensor_spec *s = &t->spec;
    return strcmp(s->name, name) == 0 && s->kind == DLK_KIND_TEXT &&
           s->dtype == DLK_U8 && s->ndim == 1 &&
           s->shape[0] == DLK_DIM_VARIABLE;
}

bool Dlk_key_tensors(const Dlk_manifest *m, int *t_key, int *t_ver)
{
    *t_key = *t_ver = -1;
    for (size_t i = 0; i < m->ntensors; i++) {
        if (is_key_tensor(&m->tensors[i], DLK_KEY_TENSOR))
            *t_key = (int)i;
        else if (is_key_tensor(&m->tensors[i], DLK_KEY_VERSION_TENSOR))
            *t_ver = (int)i;
    }
    if (*t_key < 0 || *t_ver < 0) {
        *t_key = *t_ver = -1;
        return false;
    }
    return true;
}

uint64_t Dlk_key_version_hash(const void *p, size_t n)
{
    /* empty or all spaces: unknown (0); a real version never hashes to 0 */
    const uint8_t *b = p;
    bool known = false;
    for (size_t i = 0; i < n && !known; i++)
        known = b[i] != ' ';
    if (!known)
        return 0;
    uint64_t h = Dlk_hash64(p, n);
    return h ? h : 1;
}

/* The samples [from, to) of variable-shape u8 tensor ti, each given to fn
 * with its bytes. */
typedef dlk_status (*sample_fn)(void *ud, uint64_t i, const uint8_t *p,
                                size_t n, dlk_error *err);

static dlk_status each_sample(dlk_dataset *ds, size_t ti, uint64_t from,
                              uint64_t to, sample_fn fn, void *ud,
                              dlk_error *err)
{
    const Dlk_tensor *t = &ds->m.tensors[ti];
    if (from >= to)
        return DLK_OK;
    ssize_t c0 = Dlk_tensor_find_chunk(t, from);
    dlk_status rc = DLK_OK;
    /* rows before a pending tail (Dlk_dataset_open_writer): from the
     * whole list */
    if (c0 < 0 && t->segs_pending) {
        if ((rc = Dlk_tensor_load(ds, ti, err)))
            return rc;
        c0 = Dlk_tensor_find_chunk(t, from);
    }
    if (c0 < 0)
        return Dlk_fail(err, DLK_ECORRUPT, "tensor '%s' has no sample %llu",
                        t->spec.name, (unsigned long long)from);
    for (size_t c = (size_t)c0; !rc && c < t->nchunks; c++) {
        const Dlk_chunk_entry *e = &t->chunks[c];
        if (e->first >= to)
            break;
        dlk_chunk *ch;
        rc = Dlk_chunk_load(ds, t, e, DLK_DECODE_VERIFY, NULL, 0, &ch, err);
        if (rc)
            break;
        for (uint32_t s = 0; !rc && s < e->samples; s++) {
            uint64_t i = e->first + s;
            if (i < from || i >= to)
                continue;
            rc = fn(ud, i, ch->payload + ch->offsets[s],
                    (size_t)(ch->offsets[s + 1] - ch->offsets[s]), err);
        }
        dlk_chunk_free(ch);
    }
    return rc;
}

typedef struct rows_ud {
    Dlk_key_ents *k;
    uint64_t from;
    uint64_t *keyh;      /* the key hashes of rows [from, to) */
    const uint64_t *q;
    size_t nq;
} rows_ud;

static dlk_status on_key(void *ud, uint64_t i, const uint8_t *p, size_t n,
                         dlk_error *err)
{
    rows_ud *t = ud;
    DLK_UNUSED(err);
    t->keyh[i - t->from] = Dlk_hash64(p, n);
    return DLK_OK;
}

static dlk_status on_version(void *ud, uint64_t i, const uint8_t *p,
                             size_t n, dlk_error *err)
{
    rows_ud *t = ud;
    uint64_t kh = t->keyh[i - t->from];
    if (!wanted(t->q, t->nq, kh))
        return DLK_OK;
    return Dlk_key_ents_add(t->k, kh, Dlk_key_version_hash(p, n), err);
}

dlk_status Dlk_key_rows(dlk_dataset *ds, int t_key, int t_ver, uint64_t from,
                        uint64_t to, const uint64_t *q, size_t nq,
                        Dlk_key_ents *out, Dlk_keyidx_stats *st,
                        dlk_error *err)
{
    if (from >= to)
        return DLK_OK;
    if (to - from > SIZE_MAX / sizeof(uint64_t))
        return Dlk_oom(err);
    rows_ud t = {out, from, malloc((size_t)(to - from) * sizeof *t.keyh), q,
                 nq};
    if (!t.keyh)
        return Dlk_fail(err, DLK_ENOMEM, "out of memory for the keys");
    dlk_status rc = each_sample(ds, (size_t)t_key, from, to, on_key, &t, err);
    if (!rc)
        rc = each_sample(ds, (size_t)t_ver, from, to, on_version, &t, err);
    free(t.keyh);
    if (!rc && st)
        st->chunk_rows += to - from;
    return rc;
}

/* ---- the legacy object (one of every row) -------------------------- */

static dlk_status legacy_load(dlk_dataset *ds, const Dlk_manifest *m,
                              const uint64_t *q, size_t nq,
                              Dlk_key_ents *out, Dlk_keyidx_stats *st,
                              dlk_error *err)
{
    const char *key = m->key_index;
    uint64_t rows = m->key_index_rows;
    uint64_t want;
    if (!Dlk_mul_u64(rows, 16, &want) || want > LEGACY_MAX)
        return Dlk_fail(err, DLK_ELIMIT, "key index '%s': %llu rows", key,
                        (unsigned long long)rows);
    want += LEGACY_HEADER;
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = Dlk_store_get(ds->store, key, want, &b, NULL, err);
    char hex[33];
    if (!rc) {
        if (st)
            st->bytes += b.len;
        Dlk_hash128_hex(b.data, b.len, hex);
        if (b.len != want || memcmp(b.data, LEGACY_MAGIC, 4) ||
            Dlk_get_le16(b.data + 4) != 1 || Dlk_get_le16(b.data + 6) ||
            Dlk_get_le64(b.data + 8) != rows ||
            strcmp(hex, key + strlen(DLK_KEY_INDEX_PREFIX)) ||
            Dlk_hash64(b.data + LEGACY_HEADER, b.len - LEGACY_HEADER) !=
                Dlk_get_le64(b.data + 16))
            rc = Dlk_fail(err, DLK_ECORRUPT, "key index '%s': not the %llu "
                          "rows the head names, or corrupt", key,
                          (unsigned long long)rows);
    }
    for (uint64_t i = 0; !rc && i < rows; i++) {
        const uint8_t *p = b.data + LEGACY_HEADER + 16 * i;
        uint64_t kh = Dlk_get_le64(p);
        if (wanted(q, nq, kh))
            rc = Dlk_key_ents_add(out, kh, Dlk_get_le64(p + 8), err);
    }
    Dlk_buf_free(&b);
    return rc;
}

/* ---- run objects --------------------------------------------------- */

typedef struct run_info {
    const char *key;
    uint64_t first, rows;   /* as the head names it */
    uint32_t block;         /* entries a block */
    uint64_t nblocks;
    uint64_t size;          /* of the whole object */
    uint64_t table_hash;
    Dlk_buf table;          /* nblocks x (first key, block hash) */
} run_info;

static dlk_status run_bad(const run_info *r, dlk_error *err, const char *why)
{
    return Dlk_fail(err, DLK_ECORRUPT, "key index run '%s': %s", r->key,
                    why);
}

/* Check the 48-byte header h against what the head says of the run. */
static dlk_status run_header(run_info *r, const uint8_t *h, dlk_error *err)
{
    if (memcmp(h, RUN_MAGIC, 4) || Dlk_get_le16(h + 4) != 1 ||
        Dlk_get_le16(h + 6) || Dlk_get_le32(h + 28) ||
        Dlk_hash64(h, 40) != Dlk_get_le64(h + 40))
        return run_bad(r, err, "not a run object of version 1, or its "
                       "header is corrupt");
    if (Dlk_get_le64(h + 8) != r->first || Dlk_get_le64(h + 16) != r->rows)
        return run_bad(r, err, "not the rows the head names");
    uint32_t b = Dlk_get_le32(h + 24);
    if (b < 1 || b > RUN_BLOCK_MAX)
        return run_bad(r, err, "a block size out of range");
    r->block = b;
    r->nblocks = r->rows / b + (r->rows % b != 0);
    r->table_hash = Dlk_get_le64(h + 32);
    uint64_t tb, eb;
    if (!Dlk_mul_u64(r->nblocks, 16, &tb) || tb > RUN_TABLE_MAX ||
        !Dlk_mul_u64(r->rows, 16, &eb) || eb > UINT64_MAX / 2)
        return Dlk_fail(err, DLK_ELIMIT, "key index run '%s': %llu rows in "
                        "blocks of %u", r->key, (unsigned long long)r->rows,
                        b);
    r->size = RUN_HEADER + tb + eb;
    return DLK_OK;
}

static dlk_status run_table(run_info *r, dlk_error *err)
{
    const uint8_t *t = r->table.data;
    if (r->table.len != r->nblocks * 16 ||
        Dlk_hash64(t, r->table.len) != r->table_hash)
        return run_bad(r, err, "its block table is corrupt");
    for (uint64_t j = 1; j < r->nblocks; j++)
        if (Dlk_get_le64(t + 16 * j) < Dlk_get_le64(t + 16 * (j - 1)))
            return run_bad(r, err, "its block table is not sorted");
    return DLK_OK;
}

/* Read and check the run's header and block table: one ranged read when
 * its blocks are of libdlk's size, two otherwise. */
static dlk_status run_open(dlk_dataset *ds, run_info *r, Dlk_keyidx_stats *st,
                           dlk_error *err)
{
    /* a larger table (over 16 M rows) is read once its size is known */
    uint64_t guess = RUN_HEADER +
                     16 * (r->rows / RUN_BLOCK + (r->rows % RUN_BLOCK != 0));
    if (guess > RUN_HEADER + 65536)
        guess = RUN_HEADER + 65536;
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status rc = Dlk_store_get_range(ds->store, r->key, 0, guess, &b, err);
    if (!rc && st)
        st->bytes += b.len;
    if (!rc && b.len < RUN_HEADER)
        rc = run_bad(r, err, "shorter than its header");
    if (!rc)
        rc = run_header(r, b.data, err);
    if (!rc && b.len >= RUN_HEADER + 16 * r->nblocks) {
        rc = Dlk_buf_append(&r->table, b.data + RUN_HEADER, 16 * r->nblocks,
                            err);
    } else if (!rc) {
        rc = Dlk_store_get_range(ds->store, r->key, RUN_HEADER,
                                 16 * r->nblocks, &r->table, err);
        if (!rc && st)
            st->bytes += r->table.len;
    }
    Dlk_buf_free(&b);
    if (!rc)
        rc = run_table(r, err);
    if (rc == DLK_ECORRUPT && err && strstr(err->msg, "short read"))
        rc = run_bad(r, err, "shorter than its header says");
    return rc;
}

static uint64_t block_entries(const run_info *r, uint64_t j)
{
    return j + 1 < r->nblocks ? r->block : r->rows - j * r->block;
}

static uint64_t block_off(const run_info *r, uint64_t j)
{
    return RUN_HEADER + 16 * r->nblocks + 16 * j * (uint64_t)r->block;
}

/* Check block j's bytes p (its entries) against the table; add the
 * wanted entries to out. */
static dlk_status run_block(const run_info *r, uint64_t j, const uint8_t *p,
                            const uint64_t *q, size_t nq, Dlk_key_ents *out,
                            dlk_error *err)
{
    uint64_t n = block_entries(r, j);
    const uint8_t *t = r->table.data + 16 * j;
    if (Dlk_hash64(p, 16 * n) != Dlk_get_le64(t + 8) ||
        Dlk_get_le64(p) != Dlk_get_le64(t))
        return run_bad(r, err, "a block does not match its checksum");
    Dlk_key_ent prev = {0, 0};
    for (uint64_t i = 0; i < n; i++) {
        Dlk_key_ent e = {Dlk_get_le64(p + 16 * i), Dlk_get_le64(p + 16 * i + 8)};
        if (i && ent_cmp(&prev, &e) > 0)
            return run_bad(r, err, "a block is not sorted");
        prev = e;
        if (j + 1 < r->nblocks && i + 1 == n &&
            e.key > Dlk_get_le64(t + 16))
            return run_bad(r, err, "a block is not sorted");
        if (wanted(q, nq, e.key)) {
            dlk_status rc = Dlk_key_ents_add(out, e.key, e.version, err);
            if (rc)
                return rc;
        }
    }
    return DLK_OK;
}

/* Blocks [j0, j1) read in one range and checked. */
typedef struct span { uint64_t j0, j1; } span;

static dlk_status run_read_spans(dlk_dataset *ds, run_info *r,
                                 const span *sp, size_t ns,
                                 const uint64_t *q, size_t nq,
                                 Dlk_key_ents *out, Dlk_keyidx_stats *st,
                                 dlk_error *err)
{
    dlk_status rc = DLK_OK;
    for (size_t s0 = 0; !rc && s0 < ns;) {
        /* a round of spans of at most RUN_BATCH bytes (one at least) */
        size_t s1 = s0;
        uint64_t bytes = 0;
        while (s1 < ns && (s1 == s0 ||
                           bytes + (block_off(r, sp[s1].j1) -
                                    block_off(r, sp[s1].j0)) <= RUN_BATCH)) {
            uint64_t end = sp[s1].j1 == r->nblocks ? r->size
                                                   : block_off(r, sp[s1].j1);
            bytes += end - block_off(r, sp[s1].j0);
            s1++;
        }
        size_t n = s1 - s0;
        uint64_t *off = malloc(n * sizeof *off), *len = malloc(n * sizeof *len);
        Dlk_buf *bufs = calloc(n, sizeof *bufs);
        Dlk_buf **outs = malloc(n * sizeof *outs);
        if (!off || !len || !bufs || !outs)
            rc = Dlk_oom(err);
        for (size_t i = 0; !rc && i < n; i++) {
            const span *x = &sp[s0 + i];
            off[i] = block_off(r, x->j0);
            len[i] = (x->j1 == r->nblocks ? r->size : block_off(r, x->j1)) -
                     off[i];
            Dlk_buf_init(&bufs[i]);
            outs[i] = &bufs[i];
        }
        if (!rc)
            rc = Dlk_store_get_spans(ds->store, r->key, r->size, n, off, len,
                                     outs, err);
        if (rc == DLK_ECORRUPT && err && strstr(err->msg, "short read"))
            rc = run_bad(r, err, "shorter than its header says");
        for (size_t i = 0; !rc && i < n; i++) {
            const span *x = &sp[s0 + i];
            if (bufs[i].len != len[i]) {
                rc = run_bad(r, err, "a block read short");
                break;
            }
            if (st) {
                st->bytes += bufs[i].len;
                st->blocks += x->j1 - x->j0;
            }
            const uint8_t *p = bufs[i].data;
            for (uint64_t j = x->j0; !rc && j < x->j1; j++) {
                rc = run_block(r, j, p, q, nq, out, err);
                p += 16 * block_entries(r, j);
            }
        }
        for (size_t i = 0; bufs && i < n; i++)
            Dlk_buf_free(&bufs[i]);
        free(off);
        free(len);
        free(bufs);
        free(outs);
        s0 = s1;
    }
    return rc;
}

/* The entries of run r whose key is among q (NULL: all of them), added
 * to out: the blocks that may hold them, by ranged reads. */
static dlk_status run_lookup(dlk_dataset *ds, run_info *r, const uint64_t *q,
                             size_t nq, Dlk_key_ents *out,
                             Dlk_keyidx_stats *st, dlk_error *err)
{
    dlk_status rc = run_open(ds, r, st, err);
    if (rc)
        return rc;
    span *sp = NULL;
    size_t ns = 0, cap = 0;
    const uint8_t *t = r->table.data;
    if (!q) {
        if (!(sp = malloc(sizeof *sp)))
            return Dlk_oom(err);
        sp[ns++] = (span){0, r->nblocks};
    }
    /* the blocks a key may be in: from the last that starts below it
     * (its entries may begin there) to the last that starts at it */
    uint64_t j = 0;
    for (size_t i = 0; q && i < nq; i++) {
        uint64_t lo = 0, hi = r->nblocks;
        while (lo < hi) { /* the first block starting at q[i] or above */
            uint64_t mid = lo + (hi - lo) / 2;
            if (Dlk_get_le64(t + 16 * mid) < q[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        uint64_t b0 = lo ? lo - 1 : 0, b1 = lo;
        while (b1 < r->nblocks && Dlk_get_le64(t + 16 * b1) == q[i])
            b1++;
        if (b1 == 0)
            continue; /* below every key of the run */
        if (b0 < j)
            b0 = j;
        if (b0 >= b1)
            continue;
        if (ns && b0 <= sp[ns - 1].j1 + RUN_GAP) {
            sp[ns - 1].j1 = b1;
        } else {
            if (!DLK_GROW(sp, ns, cap, 64)) {
                free(sp);
                return Dlk_oom(err);
            }
            sp[ns++] = (span){b0, b1};
        }
        j = b1;
    }
    /* spans of at most RUN_BATCH bytes, so that a round's buffers stay
     * bounded however much of the run is wanted */
    uint64_t most = RUN_BATCH / (16 * (uint64_t)r->block);
    most = most ? most : 1;
    size_t extra = 0;
    for (size_t i = 0; i < ns; i++)
        extra += (size_t)((sp[i].j1 - sp[i].j0 - 1) / most);
    if (extra) {
        span *v = malloc((ns + extra) * sizeof *v);
        if (!v) {
            free(sp);
            return Dlk_oom(err);
        }
        size_t o = 0;
        for (size_t i = 0; i < ns; i++)
            for (uint64_t a = sp[i].j0; a < sp[i].j1; a += most)
                v[o++] = (span){a, a + most < sp[i].j1 ? a + most : sp[i].j1};
        free(sp);
        sp = v;
        ns = o;
    }
    rc = run_read_spans(ds, r, sp, ns, q, nq, out, st, err);
    free(sp);
    return rc;
}

/* The whole run object, read in one GET and checked in full (its name
 * too), its entries added to out. */
static dlk_status run_read_all(dlk_dataset *ds, run_info *r,
                               Dlk_key_ents *out, Dlk_keyidx_stats *st,
                               dlk_error *err)
{
    Dlk_buf h;
    Dlk_buf_init(&h);
    dlk_status rc = Dlk_store_get_range(ds->store, r->key, 0, RUN_HEADER, &h,
                                        err);
    if (rc == DLK_ECORRUPT)
        rc = run_bad(r, err, "shorter than its header");
    if (!rc)
        rc = run_header(r, h.data, err);
    Dlk_buf_free(&h);
    if (rc)
        return rc;
    if (r->size > SIZE_MAX / 2)
        return Dlk_oom(err);
    Dlk_buf b;
    Dlk_buf_init(&b);
    rc = Dlk_store_get(ds->store, r->key, r->size, &b, NULL, err);
    if (rc == DLK_ELIMIT)
        rc = run_bad(r, err, "longer than its header says");
    if (!rc && st)
        st->bytes += b.len;
    char hex[33];
    if (!rc && b.len != r->size)
        rc = run_bad(r, err, "shorter than its header says");
    if (!rc) {
        Dlk_hash128_hex(b.data, b.len, hex);
        if (strcmp(hex, r->key + strlen(DLK_KEY_INDEX_PREFIX)))
            rc = run_bad(r, err, "content does not match its name (XXH3-128 "
                         "checksum mismatch)");
    }
    if (!rc)
        rc = Dlk_buf_append(&r->table, b.data + RUN_HEADER, 16 * r->nblocks,
                            err);
    if (!rc)
        rc = run_table(r, err);
    const uint8_t *p = b.data + RUN_HEADER + 16 * r->nblocks;
    for (uint64_t j = 0; !rc && j < r->nblocks; j++) {
        rc = run_block(r, j, p, NULL, 0, out, err);
        p += 16 * block_entries(r, j);
    }
    Dlk_buf_free(&b);
    return rc;
}

/* Whether rc says the index object is unusable (missing, corrupt, past
 * a limit): its rows are then read from the key chunks. */
static bool unusable(dlk_status rc)
{
    return rc == DLK_ENOTFOUND || rc == DLK_ECORRUPT || rc == DLK_ELIMIT;
}

/* The rows the head's runs cover, or UINT64_MAX when it has none. */
static uint64_t runs_rows(const Dlk_manifest *m)
{
    if (!m->nkey_runs)
        return UINT64_MAX;
    uint64_t n = 0;
    for (size_t i = 0; i < m->nkey_runs; i++)
        n += m->key_runs[i].rows;
    return n;
}

/* The key tensor's samples that are rows of both key tensors. */
static uint64_t key_samples(const Dlk_manifest *m, int tk, int tv)
{
    uint64_t n = m->tensors[tk].samples;
    return m->tensors[tv].samples < n ? m->tensors[tv].samples : n;
}

/* Run i's entries (of rows [first, first + rows)) added to out: the
 * blocks needed for q (all: NULL; whole: read in one GET, name checked)
 * or, when the run is unusable, the rows from the key chunks. */
static dlk_status run_entries(dlk_dataset *ds, int tk, int tv,
                              const Dlk_key_run *kr, uint64_t first,
                              const uint64_t *q, size_t nq, bool whole,
                              Dlk_key_ents *out, Dlk_keyidx_stats *st,
                              dlk_error *err)
{
    run_info r = {kr->object, first, kr->rows, 0, 0, 0, 0, {0}};
    Dlk_buf_init(&r.table);
    size_t n0 = out->n;
    dlk_status rc = whole ? run_read_all(ds, &r, out, st, err)
                          : run_lookup(ds, &r, q, nq, out, st, err);
    Dlk_buf_free(&r.table);
    if (st)
        st->runs++;
    if (unusable(rc)) {
        /* it only repeats the key chunks: read those (its entries that
         * were added before the fault go, or they would count twice) */
        Dlk_error_clear(err);
        out->n = n0;
        if (st)
            st->runs_bad++;
        rc = Dlk_key_rows(ds, tk, tv, first, first + kr->rows, q, nq, out,
                          st, err);
    }
    return rc;
}

dlk_status Dlk_keyidx_lookup(dlk_dataset *ds, int t_key, int t_ver,
                             const uint64_t *q, size_t nq, Dlk_key_ents *out,
                             Dlk_keyidx_stats *st, dlk_error *err)
{
    memset(out, 0, sizeof *out);
    const Dlk_manifest *m = &ds->m;
    uint64_t samples = key_samples(m, t_key, t_ver), covered = 0;
    uint64_t rr = runs_rows(m);
    dlk_status rc = DLK_OK;
    if (rr != UINT64_MAX && rr <= samples) {
        /* runs of more rows than the tensor has are not this head's */
        uint64_t first = 0;
        for (size_t i = 0; !rc && i < m->nkey_runs; i++) {
            rc = run_entries(ds, t_key, t_ver, &m->key_runs[i], first, q, nq,
                             false, out, st, err);
            first += m->key_runs[i].rows;
        }
        covered = rr;
    } else if (m->key_index[0] && m->key_index_rows <= samples) {
        size_t n0 = out->n;
        rc = legacy_load(ds, m, q, nq, out, st, err);
        if (unusable(rc)) {
            Dlk_error_clear(err);
            out->n = n0;
            rc = DLK_OK;
            if (st)
                st->runs_bad++;
        } else if (!rc) {
            covered = m->key_index_rows;
        }
    }
    /* rows past the index (appended by a writer that keeps none) */
    if (!rc)
        rc = Dlk_key_rows(ds, t_key, t_ver, covered, samples, q, nq, out, st,
                          err);
    if (rc) {
        Dlk_key_ents_free(out);
        return rc;
    }
    Dlk_key_ents_sort(out);
    return DLK_OK;
}

/* Write k (sorted) as the run of rows [first, first + k->n), its key
 * into object. */
static dlk_status run_write(dlk_dataset *ds, const Dlk_key_ents *k,
                            uint64_t first, char object[DLK_KEY_INDEX_MAX],
                            Dlk_keyidx_stats *st, dlk_error *err)
{
    uint64_t rows = k->n, nb = rows / RUN_BLOCK + (rows % RUN_BLOCK != 0);
    size_t len = RUN_HEADER + 16 * (size_t)nb + 16 * (size_t)rows;
    uint8_t *p = malloc(len);
    if (!p)
        return Dlk_fail(err, DLK_ENOMEM, "out of memory for the key index");
    uint8_t *tab = p + RUN_HEADER, *ent = tab + 16 * nb;
    for (size_t i = 0; i < k->n; i++) {
        Dlk_put_le64(ent + 16 * i, k->e[i].key);
        Dlk_put_le64(ent + 16 * i + 8, k->e[i].version);
    }
    for (uint64_t j = 0; j < nb; j++) {
        uint64_t n = j + 1 < nb ? RUN_BLOCK : rows - j * RUN_BLOCK;
        const uint8_t *b = ent + 16 * j * RUN_BLOCK;
        Dlk_put_le64(tab + 16 * j, Dlk_get_le64(b));
        Dlk_put_le64(tab + 16 * j + 8, Dlk_hash64(b, 16 * n));
    }
    memset(p, 0, RUN_HEADER);
    memcpy(p, RUN_MAGIC, 4);
    Dlk_put_le16(p + 4, 1);
    Dlk_put_le64(p + 8, first);
    Dlk_put_le64(p + 16, rows);
    Dlk_put_le32(p + 24, RUN_BLOCK);
    Dlk_put_le64(p + 32, Dlk_hash64(tab, 16 * nb));
    Dlk_put_le64(p + 40, Dlk_hash64(p, 40));
    char hex[33];
    struct iovec v = {p, len};
    dlk_status rc = Dlk_store_putv_hashed(ds->store, DLK_KEY_INDEX_PREFIX,
                                          &v, 1, DLK_PUT_IF_ABSENT, hex, err);
    if (rc == DLK_EEXIST) { /* the same entries: the same bytes */
        Dlk_error_clear(err);
        rc = DLK_OK;
    }
    free(p);
    if (rc)
        return Dlk_fail_wrap(err, "cannot write the key index");
    if (st)
        st->written += len;
    snprintf(object, DLK_KEY_INDEX_MAX, "%s%s", DLK_KEY_INDEX_PREFIX, hex);
    return DLK_OK;
}

/* Make runs[0..n) the head's key index (the legacy object dropped: its
 * rows are in them). */
static void set_runs(dlk_dataset *ds, Dlk_key_run *runs, size_t n)
{
    free(ds->m.key_runs);
    ds->m.key_runs = runs;
    ds->m.nkey_runs = n;
    ds->m.key_index[0] = '\0';
    ds->m.key_index_rows = 0;
    ds->dirty = true;
}

/* A head of an earlier writer: its one object becomes the first run,
 * runs[0] (read whole, as every lookup of it was); *n and *covered its
 * count and rows.  Where the object is unusable, no run. */
static dlk_status legacy_run(dlk_dataset *ds, Dlk_key_run *runs, size_t *n,
                             uint64_t *covered, Dlk_keyidx_stats *st,
                             dlk_error *err)
{
    const Dlk_manifest *m = &ds->m;
    Dlk_key_ents old = {0};
    dlk_status rc = legacy_load(ds, m, NULL, 0, &old, st, err);
    if (!rc)
        rc = run_write(ds, &old, 0, runs[0].object, st, err);
    if (!rc) {
        runs[0].rows = m->key_index_rows;
        *n = 1;
        *covered = m->key_index_rows;
    } else if (unusable(rc)) {
        Dlk_error_clear(err);
        rc = DLK_OK;
    }
    Dlk_key_ents_free(&old);
    return rc;
}

/* The run of rows [covered, rows) added to runs[0, *n), merged with the
 * newest runs while the one before them is at most RUN_RATIO times what
 * is merged; *n the runs after. */
static dlk_status add_run(dlk_dataset *ds, int tk, int tv, Dlk_key_run *runs,
                          size_t *n, uint64_t covered, uint64_t rows,
                          Dlk_keyidx_stats *st, dlk_error *err)
{
    Dlk_key_ents add = {0};
    dlk_status rc = Dlk_key_rows(ds, tk, tv, covered, rows, NULL, 0, &add,
                                 st, err);
    Dlk_key_ents_sort(&add);
    uint64_t acc = rows - covered, first = covered;
    size_t i = *n;
    while (i > 0 && (runs[i - 1].rows <= RUN_RATIO * acc ||
                     i >= DLK_KEY_RUNS_MAX)) {
        i--;
        acc += runs[i].rows;
        first -= runs[i].rows;
    }
    /* the runs merged, newest first (each read whole and checked;
     * one unusable is read from the key chunks) */
    uint64_t end = covered;
    for (size_t j = *n; !rc && j > i; j--) {
        Dlk_key_ents older = {0};
        end -= runs[j - 1].rows;
        rc = run_entries(ds, tk, tv, &runs[j - 1], end, NULL, 0, true,
                         &older, st, err);
        Dlk_key_ents_sort(&older);
        if (!rc)
            rc = ents_merge(&add, &older, err);
        Dlk_key_ents_free(&older);
        if (st && !rc)
            st->runs_merged++;
    }
    if (!rc && add.n != acc)
        rc = Dlk_fail(err, DLK_EINTERNAL, "key index: %zu entries for "
                      "%llu rows", add.n, (unsigned long long)acc);
    if (!rc)
        rc = run_write(ds, &add, first, runs[i].object, st, err);
    if (!rc) {
        runs[i].rows = acc;
        *n = i + 1;
    }
    Dlk_key_ents_free(&add);
    return rc;
}

dlk_status Dlk_keyidx_update(dlk_dataset *ds, Dlk_keyidx_stats *st,
                             dlk_error *err)
{
    int tk, tv;
    Dlk_manifest *m = &ds->m;
    if (!Dlk_key_tensors(m, &tk, &tv))
        return DLK_OK;
    uint64_t rows = m->tensors[tk].samples;
    if (m->tensors[tv].samples != rows || !rows)
        return DLK_OK; /* not rows of one ingest: leave it to the next */
    uint64_t rr = runs_rows(m), covered = 0;
    size_t n = 0;
    Dlk_key_run *runs = calloc(m->nkey_runs + 2, sizeof *runs);
    if (!runs)
        return Dlk_oom(err);
    dlk_status rc = DLK_OK;
    if (rr != UINT64_MAX && rr <= rows) {
        if (rr == rows) {
            free(runs);
            return DLK_OK;
        }
        memcpy(runs, m->key_runs, m->nkey_runs * sizeof *runs);
        n = m->nkey_runs;
        covered = rr;
    } else if (m->key_index[0] && m->key_index_rows <= rows &&
               m->key_index_rows) {
        rc = legacy_run(ds, runs, &n, &covered, st, err);
    }
    if (!rc && covered < rows)
        rc = add_run(ds, tk, tv, runs, &n, covered, rows, st, err);
    if (rc) {
        free(runs);
        return rc;
    }
    set_runs(ds, runs, n);
    return DLK_OK;
}

dlk_status Dlk_keyidx_fold(dlk_dataset *ds, size_t *before, size_t *after,
                           Dlk_keyidx_stats *st, dlk_error *err)
{
    Dlk_manifest *m = &ds->m;
    *before = *after = m->nkey_runs ? m->nkey_runs : m->key_index[0] != 0;
    int tk, tv;
    if (!Dlk_key_tensors(m, &tk, &tv))
        return DLK_OK;
    uint64_t rows = m->tensors[tk].samples;
    if (m->tensors[tv].samples != rows || !rows ||
        (m->nkey_runs == 1 && runs_rows(m) == rows))
        return DLK_OK;
    Dlk_key_ents all;
    dlk_status rc = Dlk_keyidx_lookup(ds, tk, tv, NULL, 0, &all, st, err);
    if (!rc && all.n != rows)
        rc = Dlk_fail(err, DLK_EINTERNAL, "key index: %zu entries for %llu "
                      "rows", all.n, (unsigned long long)rows);
    Dlk_key_run *run = rc ? NULL : calloc(1, sizeof *run);
    if (!rc && !run)
        rc = Dlk_oom(err);
    if (!rc)
        rc = run_write(ds, &all, 0, run->object, st, err);
    Dlk_key_ents_free(&all);
    if (rc) {
        free(run);
        return rc;
    }
    run->rows = rows;
    set_runs(ds, run, 1);
    *after = 1;
    return DLK_OK;
}

dlk_status Dlk_keyidx_check(dlk_dataset *ds, const Dlk_manifest *m,
                            const char *key, Dlk_keyidx_problem_fn problem,
                            void *ud, dlk_error *err)
{
    dlk_error cerr;
    Dlk_error_clear(&cerr);
    Dlk_key_ents scratch = {0};
    dlk_status rc = DLK_OK;
    uint64_t first = 0;
    for (size_t i = 0; i < m->nkey_runs; i++) {
        const Dlk_key_run *kr = &m->key_runs[i];
        uint64_t at = first;
        first += kr->rows;
        if (key && strcmp(key, kr->object) != 0)
            continue;
        run_info r = {kr->object, at, kr->rows, 0, 0, 0, 0, {0}};
        Dlk_buf_init(&r.table);
        rc = run_read_all(ds, &r, &scratch, NULL, &cerr);
        Dlk_buf_free(&r.table);
        Dlk_key_ents_free(&scratch);
        if (unusable(rc)) {
            problem(ud, kr->object, cerr.msg);
            Dlk_error_clear(&cerr);
            rc = DLK_OK;
        } else if (rc) {
            return Dlk_fail(err, rc, "%s", cerr.msg);
        }
    }
    int tk, tv;
    if (m->nkey_runs && (!key || strcmp(key, m->key_runs[0].object) == 0) &&
        Dlk_key_tensors(m, &tk, &tv) &&
        runs_rows(m) > key_samples(m, tk, tv)) {
        char why[160];
        snprintf(why, sizeof why, "the key index covers %llu rows, the key "
                 "tensors have %llu (it is not used)",
                 (unsigned long long)runs_rows(m),
                 (unsigned long long)key_samples(m, tk, tv));
        problem(ud, m->key_runs[0].object, why);
    }
    if (m->key_index[0] && (!key || strcmp(key, m->key_index) == 0)) {
        rc = legacy_load(ds, m, NULL, 0, &scratch, NULL, &cerr);
        Dlk_key_ents_free(&scratch);
        if (unusable(rc)) {
            problem(ud, m->key_index, cerr.msg);
            rc = DLK_OK;
        } else if (rc) {
            return Dlk_fail(err, rc, "%s", cerr.msg);
        }
    }
    return rc;
}

bool Dlk_keyidx_names(const Dlk_manifest *m, const char *key)
{
    if (strcmp(m->key_index, key) == 0)
        return true;
    for (size_t i = 0; i < m->nkey_runs; i++)
        if (strcmp(m->key_runs[i].object, key) == 0)
            return true;
    return false;
}
