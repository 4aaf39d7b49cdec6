/* label_mix.c - the label-mix ratio of bench-stream.
 *
 * A batch's class histogram is compared with the dataset's by total
 * variation distance (half the L1 distance of the two distributions).
 * Even a perfect shuffle leaves some distance (a batch is a sample), so
 * the mean over an epoch's batches is divided by the mean that uniformly
 * random permutations of the same rows give at the same batch size,
 * simulated with the run's seed: 1.0 mixes as well as a random
 * permutation; a loader that hands out one class at a time scores
 * several times that.
 *
 * What it keeps is a row's class in as few bytes as the classes need (1
 * up to 255 classes, 2 up to 65,535, else 4): the loader's own memory is
 * a few bytes a row, and a measure of it should not cost more. */
#include "label_mix.h"

#include "values.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CLASSES (1u << 20)
/* random permutations simulated for the denominator: enough batches for
 * a stable mean, bounded for huge datasets */
#define SIM_BATCHES 4096
#define SIM_PERMS 16
/* above this many rows the random batches are drawn without a whole
 * permutation: each batch's rows uniform without repeats, as a batch of
 * a permutation is (a permutation of every row costs 8 bytes a row) */
#define SIM_PERM_ROWS (1u << 22)

struct label_mix {
    const char *tensor;
    void *cls;              /* per row: class, or nclass - 1 for "other",
                               in cls_bytes bytes */
    unsigned cls_bytes;
    uint64_t rows;
    uint32_t nclass;        /* classes + 1 ("other": out of range) */
    double *p;              /* the dataset's distribution */
    uint32_t *count;        /* a batch's histogram (zeroed after use) */
    uint32_t batch;
    double random_tvd;
    double sum;             /* this epoch: sum of distances, batches */
    uint64_t n;
};

static dlk_status oom(dlk_error *err)
{
    err->code = DLK_ENOMEM;
    snprintf(err->msg, sizeof err->msg, "out of memory reading the class "
             "labels");
    return DLK_ENOMEM;
}

static uint32_t cls_of(const label_mix *m, uint64_t row)
{
    switch (m->cls_bytes) {
    case 1: return ((const uint8_t *)m->cls)[row];
    case 2: return ((const uint16_t *)m->cls)[row];
    default: return ((const uint32_t *)m->cls)[row];
    }
}

static void cls_set(label_mix *m, uint64_t row, uint32_t c)
{
    switch (m->cls_bytes) {
    case 1: ((uint8_t *)m->cls)[row] = (uint8_t)c; break;
    case 2: ((uint16_t *)m->cls)[row] = (uint16_t)c; break;
    default: ((uint32_t *)m->cls)[row] = c; break;
    }
}

/* The value of the current width that stands for "other" while the
 * labels are read. */
static uint32_t cls_other(const label_mix *m)
{
    return m->cls_bytes == 1 ? 0xff : m->cls_bytes == 2 ? 0xffff
                                                        : UINT32_MAX;
}

/* Widen the classes read so far to hold class c. */
static dlk_status cls_widen(label_mix *m, uint32_t c, dlk_error *err)
{
    unsigned to = c < 0xffff ? 2 : 4;
    if (to <= m->cls_bytes)
        to = 4;
    void *v = realloc(m->cls, (m->rows ? m->rows : 1) * to);
    if (!v)
        return oom(err);
    m->cls = v;
    uint32_t other = cls_other(m);
    unsigned from = m->cls_bytes;
    for (uint64_t i = m->rows; i-- > 0;) {
        m->cls_bytes = from;
        uint32_t x = cls_of(m, i);
        m->cls_bytes = to;
        cls_set(m, i, x == other ? (to == 2 ? 0xffff : UINT32_MAX) : x);
    }
    m->cls_bytes = to;
    return DLK_OK;
}

static double batch_tvd(label_mix *m, const uint64_t *rows,
                        const uint8_t *pad, uint32_t n, uint32_t *used)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if ((!pad || !pad[i]) && rows[i] < m->rows) {
            m->count[cls_of(m, rows[i])]++;
            k++;
        }
    /* over the classes in the batch, then the mass of those not in it */
    double d = 0, seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((pad && pad[i]) || rows[i] >= m->rows)
            continue;
        uint32_t c = cls_of(m, rows[i]);
        if (!m->count[c])
            continue;
        double q = (double)m->count[c] / k, p = m->p[c];
        d += q > p ? q - p : p - q;
        seen += p;
        m->count[c] = 0;
    }
    *used = k;
    return k ? 0.5 * (d + (1 - seen > 0 ? 1 - seen : 0)) : 0;
}

static uint64_t mix(uint64_t x) /* splitmix64 */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rng_next(uint64_t *s)
{
    return mix((*s)++);
}

/* Uniform in [0, n) (n > 0); the bias of a 64-bit modulus is nil at any
 * row count. */
static uint64_t below(uint64_t *s, uint64_t n)
{
    return rng_next(s) % n;
}

static double simulate(label_mix *m, uint64_t seed)
{
    uint64_t s = mix(seed ^ 0x6c6162656c6d6978ull), full = 0;
    double sum = 0;
    if (m->rows > SIM_PERM_ROWS) {
        /* SIM_BATCHES batches of distinct rows (a repeat drawn again:
         * rare, a batch being a sliver of the rows) */
        uint64_t *b = malloc((size_t)m->batch * sizeof *b);
        if (!b)
            return 0;
        for (; full < SIM_BATCHES; full++) {
            for (uint32_t i = 0; i < m->batch; i++) {
                uint64_t r;
                bool again;
                do {
                    r = below(&s, m->rows);
                    again = false;
                    for (uint32_t j = 0; j < i && !again; j++)
                        again = b[j] == r;
                } while (again);
                b[i] = r;
            }
            uint32_t used;
            sum += batch_tvd(m, b, NULL, m->batch, &used);
        }
        free(b);
        return sum / full;
    }
    uint64_t *perm = malloc(m->rows * sizeof *perm);
    if (!perm)
        return 0;
    for (int r = 0; r < SIM_PERMS && full < SIM_BATCHES; r++) {
        for (uint64_t i = 0; i < m->rows; i++)
            perm[i] = i;
        for (uint64_t i = m->rows; i > 1; i--) {
            uint64_t j = rng_next(&s) % i;
            uint64_t t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
        for (uint64_t b = 0; b + m->batch <= m->rows; b += m->batch) {
            uint32_t used;
            sum += batch_tvd(m, perm + b, NULL, m->batch, &used);
            full++;
        }
    }
    free(perm);
    return full ? sum / full : 0;
}

static bool class_tensor(dlk_dataset *ds, size_t *out, dlk_tensor_info *ti)
{
    for (size_t t = 0; t < dlk_dataset_ntensors(ds); t++) {
        if (dlk_tensor_info_get(ds, t, ti, NULL) ||
            ti->kind != DLK_KIND_CLASS_LABEL)
            continue;
        bool one = ti->ndim == 0 || (ti->ndim == 1 && ti->shape[0] == 1);
        bool integer = ti->dtype != DLK_F16 && ti->dtype != DLK_BF16 &&
                       ti->dtype != DLK_F32 && ti->dtype != DLK_F64;
        if (one && integer) {
            *out = t;
            return true;
        }
    }
    return false;
}

/* Each row's class from tensor t's chunks into m->cls (widened as its
 * values need); *top the largest value seen. */
static dlk_status read_classes(dlk_dataset *ds, size_t t,
                               const dlk_tensor_info *ti, label_mix *m,
                               int64_t *top, dlk_error *err)
{
    dlk_status rc = DLK_OK;
    size_t nchunks = dlk_tensor_nchunks(ds, t);
    for (size_t c = 0; !rc && c < nchunks; c++) {
        dlk_chunk_ref ref;
        dlk_chunk *ch;
        if (dlk_tensor_chunk(ds, t, c, &ref) ||
            (rc = dlk_chunk_read(ds, t, c, DLK_READ_VERIFY, NULL, 0, &ch,
                                 err)))
            break;
        size_t nb;
        const void *pl = dlk_chunk_payload(ch, &nb);
        uint32_t ns = dlk_chunk_samples(ch);
        for (uint32_t i = 0; !rc && i < ns && ref.first_sample + i < m->rows;
             i++) {
            value v = value_at(ti->dtype, pl, i);
            int64_t x = v.kind == V_INT ? v.i
                        : v.u > INT64_MAX ? -1 : (int64_t)v.u;
            /* the width's top value is "other" (below zero, or past
             * MAX_CLASSES) */
            uint32_t c32 = x < 0 ? UINT32_MAX
                           : x > MAX_CLASSES ? MAX_CLASSES : (uint32_t)x;
            if (c32 != UINT32_MAX && c32 >= cls_other(m) &&
                (rc = cls_widen(m, c32, err)))
                break;
            cls_set(m, ref.first_sample + i,
                    c32 == UINT32_MAX ? cls_other(m) : c32);
            if (x > *top)
                *top = x;
        }
        dlk_chunk_free(ch);
    }
    return rc;
}

/* The classes counted: the names, or the largest value seen, capped, and
 * one for "other"; each row's share of its class in m->p. */
static dlk_status count_classes(label_mix *m, const dlk_tensor_info *ti,
                                int64_t top, dlk_error *err)
{
    uint64_t named = ti->n_class_names;
    uint64_t k = named ? named : (uint64_t)(top + 1);
    if (k > MAX_CLASSES)
        k = MAX_CLASSES;
    m->nclass = (uint32_t)k + 1;
    m->p = calloc(m->nclass, sizeof *m->p);
    m->count = calloc(m->nclass, sizeof *m->count);
    if (!m->p || !m->count)
        return oom(err);
    if (m->nclass - 1 > cls_other(m)) {
        dlk_status rc = cls_widen(m, m->nclass - 1, err); /* "other" fits */
        if (rc)
            return rc;
    }
    /* classes from nclass - 1 on, and the width's "other", are
     * "other" */
    uint32_t other = cls_other(m);
    for (uint64_t i = 0; i < m->rows; i++) {
        uint32_t x = cls_of(m, i);
        uint32_t c = x != other && x < m->nclass - 1 ? x : m->nclass - 1;
        cls_set(m, i, c);
        m->p[c] += 1.0 / (double)m->rows;
    }
    return DLK_OK;
}

dlk_status label_mix_open(dlk_dataset *ds, uint32_t batch, uint64_t seed,
                          label_mix **out, dlk_error *err)
{
    *out = NULL;
    size_t t;
    dlk_tensor_info ti;
    if (!class_tensor(ds, &t, &ti) || !ti.samples || !batch)
        return DLK_OK;
    label_mix *m = calloc(1, sizeof *m);
    if (!m)
        return oom(err);
    m->tensor = ti.name;
    m->rows = ti.samples;
    m->batch = batch;
    /* classes: the names, or the largest value seen, capped.  Read in 1
     * byte a row, widened to 2 or 4 (in place, back to front) the first
     * time a value does not fit: as wide as the classes need, never an
     * array of every row's raw value (8 bytes a row) */
    m->cls_bytes = 1;
    m->cls = malloc(m->rows ? m->rows : 1);
    dlk_status rc = m->cls ? DLK_OK : oom(err);
    int64_t top = -1;
    if (!rc)
        memset(m->cls, 0xff, m->rows); /* rows no chunk holds: "other" */
    if (!rc)
        rc = read_classes(ds, t, &ti, m, &top, err);
    if (!rc)
        rc = count_classes(m, &ti, top, err);
    if (rc) {
        label_mix_free(m);
        return rc;
    }
    m->random_tvd = simulate(m, seed);
    *out = m;
    return DLK_OK;
}

const char *label_mix_tensor(const label_mix *m) { return m->tensor; }
double label_mix_random_tvd(const label_mix *m) { return m->random_tvd; }

void label_mix_batch(label_mix *m, const uint64_t *rows, const uint8_t *pad,
                     uint32_t n)
{
    uint32_t used;
    double d = batch_tvd(m, rows, pad, n, &used);
    if (used == m->batch) {
        m->sum += d;
        m->n++;
    }
}

double label_mix_epoch_end(label_mix *m)
{
    double r = m->n && m->random_tvd > 0 ? m->sum / m->n / m->random_tvd : 0;
    m->sum = 0;
    m->n = 0;
    return r;
}

void label_mix_free(label_mix *m)
{
    if (!m)
        return;
    free(m->cls);
    free(m->p);
    free(m->count);
    free(m);
}
