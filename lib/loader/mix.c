/* mix.c - a loader over several datasets mixed by weight: each source a
 * loader of one dataset (batches of one position, on this loader's
 * device), every batch drawn from them in the weights' proportions and
 * gathered once, straight from the sources' chunks into its buffers. */
#include "loader_int.h"
#include "augment_batch.h"
#include "util/abi.h"
#include "util/clock.h"
#include "dlk_bench.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIX_MAX_SOURCES 1024

struct Dlk_mix {
    size_t n;
    dlk_loader **src;
    double *w;                  /* weights, summing to 1 */
    /* rows each source gave this rank over the run, and batches taken:
     * a batch's counts keep every source within a sample of its share */
    uint64_t *taken;
    uint64_t steps;
    uint32_t *count;            /* this batch's, a source */
    uint16_t *bsrc;             /* the batch's positions' sources */
    uint32_t *where;            /* the current source's positions */
    uint32_t fill;              /* of them, filled by its take */
    uint64_t epoch_size;        /* samples a mix's epoch deals, all ranks */
};

/* ---- the draw ------------------------------------------------------ */

static uint64_t mix_hash(uint64_t x) /* splitmix64 */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Each source's count in the batch after `steps` batches of b, the run's
 * counts in taken: the cumulative target w * b * (steps + 1) less what
 * was taken, rounded down, and the rest of the batch to those furthest
 * below their target (the lowest index first on ties). */
static void draw_counts(const struct Dlk_mix *m, uint32_t b, uint32_t *c)
{
    double *need = malloc(m->n * sizeof *need);
    uint64_t sum = 0;
    for (size_t i = 0; i < m->n; i++) {
        double v = m->w[i] * (double)b * (double)(m->steps + 1) -
                   (double)m->taken[i];
        double f = v > 0 ? floor(v) : 0;
        c[i] = f > b ? b : (uint32_t)f;
        if (need)
            need[i] = v;
        sum += c[i];
    }
    while (sum > b) { /* rounding past the batch: take from the most over */
        size_t best = m->n;
        for (size_t i = 0; i < m->n; i++)
            if (c[i] && (best == m->n || !need ||
                         c[i] - need[i] > c[best] - need[best]))
                best = i;
        c[best]--;
        sum--;
    }
    while (sum < b) {
        size_t best = 0;
        for (size_t i = 1; need && i < m->n; i++)
            if (need[i] - c[i] > need[best] - c[best])
                best = i;
        c[best]++;
        sum++;
    }
    free(need);
}

/* The batch's positions dealt to the sources by their counts, spread
 * evenly (each position to the source furthest behind its even pace),
 * then shuffled with the seed, the epoch and the step when the loader
 * shuffles: a batch split in micro-batches keeps the mix in each. */
static void draw_places(const dlk_loader *l, uint32_t b, uint64_t step)
{
    struct Dlk_mix *m = l->mix;
    uint32_t *placed = m->where; /* as a counter, before the takes */
    memset(placed, 0, m->n * sizeof *placed);
    for (uint32_t p = 0; p < b; p++) {
        size_t best = m->n;
        double best_gap = 0;
        for (size_t i = 0; i < m->n; i++) {
            if (placed[i] >= m->count[i])
                continue;
            double gap = (double)m->count[i] * (p + 1) / b - placed[i];
            if (best == m->n || gap > best_gap) {
                best = i;
                best_gap = gap;
            }
        }
        m->bsrc[p] = (uint16_t)best;
        placed[best]++;
    }
    if (!l->o.shuffle)
        return;
    uint64_t key = mix_hash(l->o.seed ^ mix_hash(l->st.epoch ^
                                                 mix_hash(step)));
    for (uint32_t p = b - 1; p > 0; p--) {
        key = mix_hash(key);
        uint32_t q = (uint32_t)(key % (p + 1));
        uint16_t t = m->bsrc[p];
        m->bsrc[p] = m->bsrc[q];
        m->bsrc[q] = t;
    }
}

/* ---- a batch ------------------------------------------------------- */

/* A piece of source `cur`'s take: its entries into the batch's positions
 * dealt to it (mix.where), in order. */
struct take_ctx {
    dlk_loader *l;
    size_t cur;
};

static void take_piece(void *ud, const dlk_loader *src, uint32_t n)
{
    struct take_ctx *c = ud;
    dlk_loader *l = c->l;
    struct Dlk_mix *m = l->mix;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t p = m->where[m->fill + j];
        l->bidx[p] = src->bidx[j];
        l->bpad[p] = src->bpad[j];
        if (l->aug_t >= 0) {
            /* the augmented tensor's stored shape, and the row its
             * parameters are drawn for: each source's rows apart */
            int nd = l->t[l->aug_t].tensor->spec.ndim;
            memcpy(&l->aug_shapes[(size_t)p * nd],
                   &src->aug_shapes[(size_t)j * nd],
                   (size_t)nd * sizeof *l->aug_shapes);
            l->aug_rows[p] = src->bidx[j] + ((uint64_t)c->cur << 48);
        }
        for (size_t t = 0; t < l->nt; t++) {
            l->gather[t * l->cap + p] = src->gather[t * src->cap + j];
            Dlk_loader_tensor *lt = &l->t[t];
            if (lt->variable)
                memcpy(&lt->shapes[(size_t)p * lt->out.ndim],
                       &src->t[t].shapes[(size_t)j * lt->out.ndim],
                       (size_t)lt->out.ndim * sizeof *lt->shapes);
        }
    }
    m->fill += n;
}

/* Batches a rank takes in the epoch's last segment: what the segments
 * before it left of the epoch's samples, in whole batches of its
 * layout. */
static uint64_t segment_batches(const dlk_loader *l)
{
    const dlk_loader_state *st = &l->st;
    uint64_t used = 0;
    for (uint32_t i = 0; i + 1 < st->nseg; i++)
        used += st->seg[i].steps * st->seg[i].batch * st->seg[i].world;
    uint64_t rest = l->mix->epoch_size > used ? l->mix->epoch_size - used : 0;
    uint64_t per = (uint64_t)l->o.batch_size * l->o.world_size;
    return l->o.drop_last ? rest / per : (rest + per - 1) / per;
}

uint64_t Dlk_mix_batches(const dlk_loader *l)
{
    return segment_batches(l);
}

/* The epoch's end, reached at t: the next call starts the following
 * one. */
static void end_epoch(dlk_loader *l, double t)
{
    l->st.epoch++;
    l->st.nseg = 1;
    l->st.seg[0].world = l->o.world_size;
    l->st.seg[0].batch = l->o.batch_size;
    l->st.seg[0].steps = 0;
    l->pos = 0;
    l->first_batch_pending = true;
    l->epoch_t0 = t;
}

/* Each source's count of the batch of b, taken into the positions dealt
 * to it; the time the sources waited, and what they hold, counted as
 * this loader's. */
static dlk_status take_sources(dlk_loader *l, uint32_t b, dlk_error *err)
{
    struct Dlk_mix *m = l->mix;
    double wait0 = 0;
    for (size_t i = 0; i < m->n; i++)
        wait0 += m->src[i]->stats.wait_s;
    for (size_t i = 0; i < m->n; i++) {
        if (!m->count[i])
            continue;
        /* the positions dealt to this source, in order */
        uint32_t k = 0;
        for (uint32_t p = 0; p < b; p++)
            if (m->bsrc[p] == i)
                m->where[k++] = p;
        m->fill = 0;
        struct take_ctx c = {l, i};
        dlk_loader *s = m->src[i];
        memset(s->cur_late, 0, sizeof s->cur_late);
        dlk_status rc = Dlk_loader_take(s, m->count[i], take_piece, &c, err);
        if (rc)
            return Dlk_fail_wrap(err, "source %zu ('%s')", i, s->ds->url);
        for (int w = 0; w < DLK_LATE_N; w++)
            l->cur_late[w] += s->cur_late[w];
    }
    double waited = -wait0;
    uint64_t resident = 0;
    for (size_t i = 0; i < m->n; i++) {
        waited += m->src[i]->stats.wait_s;
        resident += m->src[i]->resident;
    }
    l->stats.wait_s += waited;
    l->cur_wait += waited;
    l->cur_resident = resident;
    return DLK_OK;
}

/* The batch of b gathered into its buffers, each tensor's samples
 * placed in position order. */
static dlk_status gather_batch(dlk_loader *l, uint32_t b, dlk_error *err)
{
    for (size_t t = 0; t < l->nt; t++) {
        Dlk_loader_tensor *lt = &l->t[t];
        uint64_t total = 0;
        for (uint32_t p = 0; p < b; p++) {
            Dlk_gather *g = &l->gather[t * l->cap + p];
            g->dst_off = total;
            if (lt->variable)
                lt->offsets[p] = total;
            /* an augmented sample's room is its output's (the entries
             * hold its stored size; Dlk_augment_batch places them) */
            if ((long)t == l->aug_t) {
                int nd = lt->tensor->spec.ndim;
                total += Dlk_aug_sample_bytes(
                    &l->aug, &l->aug_shapes[(size_t)p * nd], nd);
            } else {
                total += g->nbytes;
            }
        }
        if (lt->variable)
            lt->offsets[b] = total;
        dlk_status rc = Dlk_loader_gather(l, t, b, total, err);
        if (rc)
            return rc;
    }
    return DLK_OK;
}

dlk_status Dlk_mix_next(dlk_loader *l, const dlk_batch **out,
                        dlk_error *err)
{
    struct Dlk_mix *m = l->mix;
    double t_in = Dlk_now_s();
    Dlk_trace_enter(l, t_in);
    if (l->pos >= segment_batches(l)) {
        end_epoch(l, t_in);
        return DLK_OK;
    }
    uint32_t b = l->o.batch_size;
    draw_counts(m, b, m->count);
    draw_places(l, b, l->pos);
    dlk_status rc = take_sources(l, b, err);
    if (!rc)
        rc = gather_batch(l, b, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < m->n; i++)
        m->taken[i] += m->count[i];
    m->steps++;
    dlk_batch *bt = &l->batch;
    bt->size = b;
    bt->epoch = l->st.epoch;
    bt->step = l->pos;
    bt->indices = l->bidx;
    bt->pad = l->bpad;
    bt->sources = m->bsrc;
    if (l->first_batch_pending) {
        l->stats.first_batch_s = Dlk_now_s() - l->epoch_t0;
        l->first_batch_pending = false;
    }
    l->pos++;
    Dlk_loader_batch_done(l, t_in, b);
    *out = bt;
    return DLK_OK;
}

/* ---- stats, state -------------------------------------------------- */

void Dlk_mix_stats(const dlk_loader *l, dlk_loader_stats *out)
{
    const struct Dlk_mix *m = l->mix;
    dlk_loader_stats s = DLK_LOADER_STATS_INIT;
    for (size_t i = 0; i < m->n; i++) {
        Dlk_loader_stats_one(m->src[i], &s);
        out->storage_s += s.storage_s;
        out->decompress_s += s.decompress_s;
        out->chunks_loaded += s.chunks_loaded;
        out->bytes_loaded += s.bytes_loaded;
        out->peak_buffer_bytes += s.peak_buffer_bytes;
        out->io_threads += s.io_threads;
        out->chunks_verified += s.chunks_verified;
        out->io_busy_s += s.io_busy_s;
        out->io_cpu_s += s.io_cpu_s;
        out->pin_s += s.pin_s;
        out->chunks_pinned += s.chunks_pinned;
        out->chunks_shared += s.chunks_shared;
        out->reads_bad += s.reads_bad;
        out->rows_replaced += s.rows_replaced;
        out->cache_on |= s.cache_on;
        out->cache_hits += s.cache_hits;
        out->cache_fetched += s.cache_fetched;
        out->cache_evicted += s.cache_evicted;
        out->cache_dropped += s.cache_dropped;
        out->cache_limit += s.cache_limit;
        if (!out->cache_warning[0])
            memcpy(out->cache_warning, s.cache_warning,
                   sizeof out->cache_warning);
        if (s.window_chunks > out->window_chunks)
            out->window_chunks = s.window_chunks;
        if (s.prefetch_chunks > out->prefetch_chunks)
            out->prefetch_chunks = s.prefetch_chunks;
        if (s.span_bytes > out->span_bytes)
            out->span_bytes = s.span_bytes;
        /* the device is shared: its times are the mix's */
        out->gather_s = s.gather_s;
        out->step_s = s.step_s;
        out->gpu_busy_s = s.gpu_busy_s;
        if (l->dev->ops->on_device)
            out->h2d_s = s.h2d_s;
    }
    out->wait_s = l->stats.wait_s;
    out->first_batch_s = l->stats.first_batch_s;
    out->samples = l->stats.samples;
    out->batches = l->stats.batches;
}

uint64_t Dlk_mix_host_fold(const dlk_loader *l)
{
    uint64_t f = 0;
    for (size_t i = 0; i < l->mix->n; i++)
        f += l->mix->src[i]->host_fold;
    return f;
}

char *Dlk_mix_save(const dlk_loader *l)
{
    const struct Dlk_mix *m = l->mix;
    dlk_loader_state st;
    dlk_loader_state_get(l, &st);
    char *own = dlk_loader_state_json(&st);
    json_t *srcs = json_array();
    json_t *o = json_object();
    json_t *mine = own ? json_loads(own, 0, NULL) : NULL;
    free(own);
    bool ok = srcs && o && mine;
    for (size_t i = 0; ok && i < m->n; i++) {
        char *s = dlk_loader_save(m->src[i]);
        json_t *sj = s ? json_loads(s, 0, NULL) : NULL;
        free(s);
        ok = sj && !json_array_append_new(
                       srcs, json_pack("{s:I,s:o}", "taken",
                                       (json_int_t)m->taken[i], "state", sj));
    }
    char *out = NULL;
    if (ok && !json_object_set_new(o, "mix", mine) &&
        !json_object_set_new(o, "batches", json_integer((json_int_t)m->steps)) &&
        !json_object_set_new(o, "sources", srcs)) {
        out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        mine = srcs = NULL; /* owned by o */
    } else {
        json_decref(mine);
        json_decref(srcs);
    }
    json_decref(o);
    return out;
}

dlk_status Dlk_mix_load(dlk_loader *l, const char *json, dlk_error *err)
{
    struct Dlk_mix *m = l->mix;
    json_t *o = json_loads(json, 0, NULL);
    json_t *mine = json_object_get(o, "mix"),
           *batches = json_object_get(o, "batches"),
           *srcs = json_object_get(o, "sources");
    dlk_status rc = DLK_OK;
    if (!o || !json_is_object(mine) || !json_is_integer(batches) ||
        json_integer_value(batches) < 0 || !json_is_array(srcs)) {
        rc = Dlk_fail(err, DLK_EINVAL, "not a mixing loader's state (no "
                      "'mix', 'batches' and 'sources')");
    } else if (json_array_size(srcs) != m->n) {
        rc = Dlk_fail(err, DLK_EINVAL, "the state is of a mix of %zu "
                      "sources, this loader mixes %zu",
                      json_array_size(srcs), m->n);
    }
    dlk_loader_state st;
    char *text = rc ? NULL : json_dumps(mine, JSON_COMPACT);
    if (!rc && !text)
        rc = Dlk_oom(err);
    if (!rc && (rc = dlk_loader_state_parse(text, &st, err)) == DLK_OK &&
        st.seed != l->o.seed)
        rc = Dlk_fail(err, DLK_EINVAL, "loader state is for seed %llu, "
                      "this loader uses %llu", (unsigned long long)st.seed,
                      (unsigned long long)l->o.seed);
    free(text);
    uint64_t *taken = rc ? NULL : calloc(m->n, sizeof *taken);
    if (!rc && !taken)
        rc = Dlk_oom(err);
    for (size_t i = 0; !rc && i < m->n; i++) {
        json_t *s = json_array_get(srcs, i);
        json_t *k = json_object_get(s, "taken"),
               *ss = json_object_get(s, "state");
        char *t = json_is_object(ss) ? json_dumps(ss, JSON_COMPACT) : NULL;
        if (!json_is_integer(k) || json_integer_value(k) < 0 || !t)
            rc = Dlk_fail(err, DLK_EINVAL, "malformed state of source %zu",
                          i);
        else if ((rc = dlk_loader_load(m->src[i], t, err)))
            Dlk_fail_wrap(err, "source %zu ('%s')", i, m->src[i]->ds->url);
        else
            taken[i] = (uint64_t)json_integer_value(k);
        free(t);
    }
    if (!rc) {
        uint32_t last = st.nseg - 1;
        if (st.seg[last].world != l->o.world_size ||
            st.seg[last].batch != l->o.batch_size) {
            if (st.nseg == DLK_LOADER_MAX_SEGMENTS)
                rc = Dlk_fail(err, DLK_ELIMIT, "an epoch resumed with new "
                              "layouts more than %d times",
                              DLK_LOADER_MAX_SEGMENTS - 1);
            st.seg[st.nseg].world = l->o.world_size;
            st.seg[st.nseg].batch = l->o.batch_size;
            st.seg[st.nseg].steps = 0;
            st.nseg++;
        }
    }
    if (!rc) {
        l->st = st;
        l->pos = st.seg[st.nseg - 1].steps;
        memcpy(m->taken, taken, m->n * sizeof *taken);
        m->steps = (uint64_t)json_integer_value(batches);
        l->first_batch_pending = true;
        l->epoch_t0 = Dlk_now_s();
        /* the layouts of the batches before this state are not kept:
         * the sources run on */
        for (size_t i = 0; i < m->n; i++) {
            m->src[i]->o.epochs = 0;
            m->src[i]->tail_pos = 0;
        }
    }
    free(taken);
    json_decref(o);
    return rc;
}

/* ---- open, close --------------------------------------------------- */

void Dlk_mix_close(dlk_loader *l)
{
    struct Dlk_mix *m = l->mix;
    for (size_t i = 0; i < m->n; i++)
        dlk_loader_close(m->src[i]);
    free(m->src);
    free(m->w);
    free(m->taken);
    free(m->count);
    free(m->bsrc);
    free(m->where);
    free(m);
    l->mix = NULL;
}

/* Whether two class-label tensors' names agree where both name a class
 * (a list that grew is the same list). */
static bool same_classes(const dlk_tensor_spec *a, const dlk_tensor_spec *b,
                         size_t *at)
{
    size_t n = a->n_class_names < b->n_class_names ? a->n_class_names
                                                   : b->n_class_names;
    for (size_t i = 0; i < n; i++)
        if (strcmp(a->class_names[i], b->class_names[i]) != 0) {
            *at = i;
            return false;
        }
    return true;
}

static void shape_text(const dlk_tensor_spec *s, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "%s", s->ndim ? "" : "scalar");
    for (int d = 0; d < s->ndim && len < cap; d++) {
        if (s->shape[d] == DLK_DIM_VARIABLE)
            len += (size_t)snprintf(buf + len, cap - len, "%s?", d ? "x" : "");
        else
            len += (size_t)snprintf(buf + len, cap - len, "%s%lld",
                                    d ? "x" : "", (long long)s->shape[d]);
    }
}

/* Source i's tensors as the first's: a batch is one array a tensor. */
static dlk_status same_schema(const dlk_loader *first, const dlk_loader *s,
                              size_t i, dlk_error *err)
{
    for (size_t t = 0; t < first->nt; t++) {
        const dlk_tensor_spec *a = &first->t[t].tensor->spec,
                              *b = &s->t[t].tensor->spec;
        char sa[128], sb[128];
        bool same = a->dtype == b->dtype && a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++)
            same = a->shape[d] == b->shape[d];
        if (!same) {
            shape_text(a, sa, sizeof sa);
            shape_text(b, sb, sizeof sb);
            return Dlk_fail(err, DLK_EINVAL, "tensor '%s' is %s %s in '%s' "
                            "but %s %s in '%s' (source %zu): mixed sources "
                            "need the same dtype and shape", a->name,
                            dlk_dtype_name(a->dtype), sa, first->ds->url,
                            dlk_dtype_name(b->dtype), sb, s->ds->url, i);
        }
        size_t at;
        if (a->kind == DLK_KIND_CLASS_LABEL && !same_classes(a, b, &at))
            return Dlk_fail(err, DLK_EINVAL, "tensor '%s': class %zu is "
                            "'%s' in '%s' but '%s' in '%s' (source %zu): "
                            "mixed labels would mean different classes",
                            a->name, at, a->class_names[at], first->ds->url,
                            b->class_names[at], s->ds->url, i);
    }
    return DLK_OK;
}

static dlk_status check_weights(const double *w, size_t n, double *sum,
                                dlk_error *err)
{
    if (n < 1 || n > MIX_MAX_SOURCES)
        return Dlk_fail(err, DLK_EINVAL, "a mix of %zu sources (1 to %d)",
                        n, MIX_MAX_SOURCES);
    *sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(w[i]) || w[i] < 0)
            return Dlk_fail(err, DLK_EINVAL, "weight %g of source %zu is "
                            "not a finite number >= 0", w[i], i);
        *sum += w[i];
    }
    if (!(*sum > 0))
        return Dlk_fail(err, DLK_EINVAL, "every weight is 0");
    return DLK_OK;
}

/* The mix's own arrays and batch, its tensors as the first source's. */
static dlk_status mix_arrays(dlk_loader *l, dlk_error *err)
{
    struct Dlk_mix *m = l->mix;
    const dlk_loader *first = m->src[0];
    uint32_t b = l->o.batch_size;
    size_t nt = first->nt;
    l->cap = b;
    l->t = calloc(nt, sizeof *l->t);
    l->bt_out = calloc(nt, sizeof *l->bt_out);
    l->gather = malloc(nt * b * sizeof *l->gather);
    l->bidx = malloc(b * sizeof *l->bidx);
    l->bpad = malloc(b);
    m->bsrc = malloc(b * sizeof *m->bsrc);
    m->where = malloc((b > m->n ? b : m->n) * sizeof *m->where);
    m->count = calloc(m->n, sizeof *m->count);
    m->taken = calloc(m->n, sizeof *m->taken);
    if (!l->t || !l->bt_out || !l->gather || !l->bidx || !l->bpad ||
        !m->bsrc || !m->where || !m->count || !m->taken)
        return Dlk_oom(err);
    l->nt = nt;
    for (size_t t = 0; t < l->nt; t++) {
        Dlk_loader_tensor *lt = &l->t[t];
        lt->tensor = first->t[t].tensor;
        lt->index = first->t[t].index;
        /* an augmented tensor has the fixed shape of its output */
        lt->variable = first->t[t].variable && (long)t != first->aug_t;
        lt->out = first->t[t].out;
        lt->out.data = NULL;
        lt->out.nbytes = 0;
        if (lt->variable) {
            int nd = lt->out.ndim ? lt->out.ndim : 1;
            lt->offsets = calloc((size_t)b + 1, sizeof *lt->offsets);
            lt->shapes = calloc((size_t)b * nd, sizeof *lt->shapes);
            if (!lt->offsets || !lt->shapes)
                return Dlk_oom(err);
            lt->out.offsets = lt->offsets;
            lt->out.shapes = lt->shapes;
        }
        l->bt_out[t] = lt->out;
    }
    l->batch.ntensors = l->nt;
    l->batch.tensors = l->bt_out;
    l->batch.on_device = l->dev->ops->on_device;
    l->batch.sources = m->bsrc;
    /* augmented as the sources are (their gather entries hold its output
     * sizes): the same spec and tensor */
    l->aug = first->aug;
    l->aug_t = first->aug_t;
    if (l->aug_t >= 0 &&
        (!(l->aug_shapes = calloc((size_t)b * 4, sizeof *l->aug_shapes)) ||
         !(l->aug_rows = malloc(b * sizeof *l->aug_rows))))
        return Dlk_oom(err);
    return DLK_OK;
}

/* Source i's options: the mix's, for batches of one position, its view,
 * its seed, its share of the memory and threads given. */
static dlk_loader_opts source_opts(const dlk_loader *l, dlk_dataset *ds,
                                   const char *const *names, size_t nnames,
                                   const char *view, size_t i)
{
    dlk_loader_opts so = l->o;
    so.tensors = names;
    so.ntensors = nnames;
    so.batch_size = 1;
    so.seed = mix_hash(l->o.seed + i + 1);
    so.drop_last = 0;
    so.epochs = 0; /* a source runs on (bound_sources may bound it) */
    so.start = NULL;
    so.view = view;
    so.rows = NULL;
    so.nrows = 0;
    so.cancel = l->o.cancel;
    double w = l->mix->w[i];
    if (l->o.memory_limit)
        so.memory_limit = (uint64_t)((double)l->o.memory_limit * w) + 1;
    /* Threads that copy out of local files are CPU work: the sources
     * share what one loader would run (one each at full count
     * oversubscribe the cores; on a 16-core H200 host two sources of
     * 12 streamed at 0.54 of one loader's rate, of 6 each at 0.8).  From
     * a remote store a source keeps its own default, threads that wait
     * on requests in flight. */
    uint32_t total = l->o.io_threads;
    if (!total && !Dlk_store_is_remote(ds->store)) {
        int n = dlk_cpu_count() / (int)l->o.local_world_size;
        n = n < 1 ? 1 : n > 32 ? 32 : n;
        if (l->dev->ops->on_device && n >= 4)
            n -= n / 4; /* as loader_open.c leaves the copy a core */
        total = (uint32_t)n;
    }
    if (total) {
        double t = ceil((double)total * w);
        so.io_threads = t < 1 ? 1 : (uint32_t)t;
    }
    return so;
}

/* What each source reads ahead over the mix's opts.epochs: the run's
 * batches take of it at most ceil(weight x samples) + 1 positions (each
 * count stays within a sample of its share), its epochs whole and the
 * positions of the next that those leave, so that, as a loader after
 * its last epoch, it reads nothing ahead past the run's end.  The mix's
 * epochs not known (0): the sources run on. */
static void bound_sources(dlk_loader *l)
{
    struct Dlk_mix *m = l->mix;
    double steps = (double)segment_batches(l) * (double)l->o.epochs;
    for (size_t i = 0; i < m->n; i++) {
        dlk_loader *s = m->src[i];
        uint64_t n = s->plan.order.n; /* a source epoch's, this rank's */
        double want = ceil(m->w[i] * l->o.batch_size * steps) + 1;
        s->o.epochs = 0;
        s->tail_pos = 0;
        if (!l->o.epochs || !n || !(want < 1e18))
            continue;
        uint64_t t = (uint64_t)want;
        s->o.epochs = t / n ? t / n : 1;
        s->tail_pos = t / n ? t % n : 0;
    }
}

static dlk_status mix_open(dlk_dataset *const *ds, const double *weights,
                           const char *const *views, size_t n,
                           dlk_loader *l, dlk_error *err)
{
    struct Dlk_mix *m = l->mix;
    double sum = 0;
    dlk_status rc = check_weights(weights, n, &sum, err);
    if (rc)
        return rc;
    if (l->o.rows)
        return Dlk_fail(err, DLK_EINVAL, "a mixing loader takes each "
                        "source's rows by its view, not opts.rows");
    if (l->o.start)
        return Dlk_fail(err, DLK_EINVAL, "a mixing loader continues from "
                        "its whole state (dlk_loader_load), not opts.start");
    if (!(m->src = calloc(n, sizeof *m->src)) ||
        !(m->w = malloc(n * sizeof *m->w)))
        return Dlk_oom(err);
    for (size_t i = 0; i < n; i++)
        m->w[i] = weights[i] / sum;
    m->n = n;
    Dlk_dev_opts dopts = {l->o.cuda_trace, 0, true,
                          !l->o.no_verify && l->o.on_bad != DLK_ON_BAD_SKIP};
    if ((rc = Dlk_dev_open(l->o.device, &dopts, &l->dev, err)))
        return rc;
    /* the tensors: those asked for, or the first source's */
    const char *const *names = l->o.tensors;
    size_t nnames = l->o.ntensors;
    const char **own = NULL;
    if (!names) {
        nnames = dlk_dataset_ntensors(ds[0]);
        own = calloc(nnames ? nnames : 1, sizeof *own);
        if (!own)
            return Dlk_oom(err);
        for (size_t t = 0; t < nnames; t++)
            own[t] = ds[0]->m.tensors[t].spec.name;
        names = own;
    }
    uint64_t rows = 0, budget = 0, ahead = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        dlk_loader_opts so = source_opts(l, ds[i], names, nnames,
                                         views ? views[i] : NULL, i);
        rc = Dlk_loader_open_source(ds[i], &so, l->dev, l->o.batch_size,
                                    &m->src[i], err);
        if (rc) {
            Dlk_fail_wrap(err, "source %zu ('%s')", i, ds[i]->url);
            break;
        }
        dlk_loader *s = m->src[i];
        rc = i ? same_schema(m->src[0], s, i, err) : DLK_OK;
        rows += s->o.rows || s->rows_owned ? s->o.nrows
                                           : s->t[0].tensor->samples;
        budget += s->limit + s->limit / 4;
        ahead += s->host_ahead;
    }
    free(own);
    if (rc)
        return rc;
    l->dev->ops->set_budget(l->dev, budget);
    /* the pinned buffers a loader of each would have had from its open:
     * the first epoch's loads make none of their own */
    if (l->dev->ops->host_ahead)
        l->dev->ops->host_ahead(l->dev, ahead);
    m->epoch_size = l->o.epoch_size ? l->o.epoch_size : rows;
    if (!m->epoch_size)
        return Dlk_fail(err, DLK_EINVAL, "the mix's sources have no rows");
    if ((rc = mix_arrays(l, err)))
        return rc;
    l->st.seed = l->o.seed;
    l->st.nseg = 1;
    l->st.seg[0].world = l->o.world_size;
    l->st.seg[0].batch = l->o.batch_size;
    l->epoch_t0 = Dlk_now_s();
    l->first_batch_pending = true;
    bound_sources(l);
    return l->dev->ops->ready(l->dev, err);
}

dlk_status dlk_loader_open_mix(dlk_dataset *const *ds, const double *weights,
                               const char *const *views, size_t n,
                               const dlk_loader_opts *opts, dlk_loader **out,
                               dlk_error *err)
{
    *out = NULL;
    dlk_loader *l = calloc(1, sizeof *l);
    if (!l || !(l->mix = calloc(1, sizeof *l->mix))) {
        free(l);
        return Dlk_oom(err);
    }
    l->aug_t = -1; /* none until the sources say */
    Dlk_loader_init_sync(l);
    dlk_status rc = abi_copy_in(&l->o, sizeof l->o, opts, "dlk_loader_opts",
                                err);
    if (!rc) {
        l->ds = ds && n ? ds[0] : NULL;
        l->o.cache_dir = opts->cache_dir; /* the sources read it at open */
        if (!l->o.batch_size)
            l->o.batch_size = 256;
        if (!l->o.world_size)
            l->o.world_size = 1;
        if (!l->o.local_world_size)
            l->o.local_world_size = 1;
        if (l->o.rank >= l->o.world_size)
            rc = Dlk_fail(err, DLK_EINVAL, "rank %u is not below world "
                          "size %u", l->o.rank, l->o.world_size);
        else if (l->o.batch_size > (1u << 24))
            rc = Dlk_fail(err, DLK_EINVAL, "batch size %u out of range",
                          l->o.batch_size);
        else if (!ds || !weights)
            rc = Dlk_fail(err, DLK_EINVAL, "no sources to mix");
    }
    if (!rc)
        rc = mix_open(ds, weights, views, n, l, err);
    l->o.cache_dir = NULL;
    l->o.start = NULL;
    if (rc) {
        dlk_loader_close(l);
        return rc;
    }
    *out = l;
    return DLK_OK;
}
