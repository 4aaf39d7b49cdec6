/* loader_span.c - reading a chunk in spans: runs of its parts, each part
 * with its own checksum (formats/dlk-v1.md, "Parts").  A shuffle window
 * of spans from many chunks mixes a dataset stored in class order where
 * the same bytes in whole chunks hold a few classes
 * (docs/benchmarks.md#label-mix).  The chunk's header and index are read
 * once (one small ranged read) and kept; each span is one ranged read of
 * its bytes, verified part by part the first time this loader reads it. */
#include "loader_int.h"
#include "util/xxh3_blocks.h"
#include "util/clock.h"

#include <stdlib.h>
#include <string.h>

uint32_t Dlk_span_nparts(const Dlk_loader_tensor *lt, size_t chunk)
{
    const Dlk_chunk_entry *e = &lt->tensor->chunks[chunk];
    return Dlk_parts_count(e->samples, e->raw_bytes,
                           lt->tensor->spec.part_bytes);
}

/* The part holding sample s: the largest p with first(p) <= s. */
uint32_t Dlk_span_part_of(const Dlk_loader_tensor *lt, size_t chunk,
                          uint32_t s)
{
    uint32_t n = Dlk_span_nparts(lt, chunk);
    uint32_t samples = lt->tensor->chunks[chunk].samples;
    uint32_t p = (uint32_t)((uint64_t)s * n / samples);
    while (p + 1 < n && Dlk_part_first(p + 1, samples, n) <= s)
        p++;
    while (p > 0 && Dlk_part_first(p, samples, n) > s)
        p--;
    return p;
}

uint64_t Dlk_span_cost(const dlk_loader *l, const Dlk_slot *s)
{
    const Dlk_loader_tensor *lt = &l->t[s->tensor];
    const Dlk_chunk_entry *e = &lt->tensor->chunks[s->chunk];
    uint32_t n = Dlk_span_nparts(lt, s->chunk);
    uint32_t a = Dlk_part_first(s->p0, e->samples, n);
    uint32_t b = Dlk_part_first(s->p1, e->samples, n);
    /* the samples' share of the payload, rounded up: exact for a fixed
     * shape, an estimate for variable ones until the index is read; and
     * in check mode the samples' folds, which the budget holds as it
     * does the samples (8 bytes a sample: twice a 4-byte label) */
    return (e->raw_bytes * (b - a) + e->samples - 1) / e->samples +
           (l->o.check ? (uint64_t)(b - a) * sizeof(uint64_t) : 0);
}

static struct Dlk_map *kept(dlk_loader *l, const Dlk_slot *s)
{
    return &l->maps[s->tensor][s->chunk];
}

/* Where parts [p0, p1) of a chunk of a fixed-shape tensor are, by the
 * manifest alone: the header and index's bytes *hb, the span's raw
 * offset and length.  False for variable shapes (their offsets are in
 * the index). */
static bool fixed_span(const Dlk_loader_tensor *lt, size_t chunk,
                       uint32_t p0, uint32_t p1, uint64_t *hb, uint64_t *off,
                       uint64_t *len)
{
    const Dlk_tensor *t = lt->tensor;
    const Dlk_chunk_entry *e = &t->chunks[chunk];
    uint64_t ss = dlk_dtype_size(t->spec.dtype);
    for (int d = 0; d < t->spec.ndim; d++) {
        if (t->spec.shape[d] < 0)
            return false;
        if (!Dlk_mul_u64(ss, (uint64_t)t->spec.shape[d], &ss))
            return false;
    }
    uint32_t n = Dlk_span_nparts(lt, chunk);
    uint64_t a = Dlk_part_first(p0, e->samples, n);
    uint64_t z = Dlk_part_first(p1, e->samples, n);
    *hb = Dlk_chunk_expected_head(t, e);
    *off = a * ss;
    *len = (z - a) * ss;
    return *hb && *hb <= e->stored_bytes &&
           *off + *len <= e->stored_bytes - *hb;
}

/* The chunk's header and index: kept, or read, checked (header hash,
 * every length, and against the manifest) and kept.  With span (its
 * buffer, of the length fixed_span gave, at object offset span_at), the
 * span is read in the same round trip. */
static dlk_status get_head(dlk_loader *l, Dlk_slot *s, const char *key,
                           Dlk_buf *span, uint64_t span_at,
                           const dlk_chunk **out, dlk_error *err)
{
    struct Dlk_map *m = kept(l, s);
    dlk_chunk *h = __atomic_load_n(&m->head, __ATOMIC_ACQUIRE);
    if (h && !span) {
        *out = h;
        return DLK_OK;
    }
    const Dlk_tensor *t = l->t[s->tensor].tensor;
    const Dlk_chunk_entry *e = &t->chunks[s->chunk];
    uint64_t hb = Dlk_chunk_expected_head(t, e);
    if (!hb || hb > e->stored_bytes)
        return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': its manifest entry "
                        "gives no header size", key);
    uint8_t *ps = calloc(Dlk_span_nparts(&l->t[s->tensor], s->chunk), 1);
    h = calloc(1, sizeof *h);
    if (!h || !ps) {
        free(h);
        free(ps);
        return Dlk_oom(err);
    }
    uint64_t offs[2] = {0, span_at};
    uint64_t lens[2] = {hb, span ? span->cap : 0};
    Dlk_buf *outs[2] = {&h->object, span};
    dlk_status rc = Dlk_store_get_spans(l->store, key, e->stored_bytes,
                                        span ? 2 : 1, offs, lens, outs, err);
    if (!rc)
        rc = Dlk_chunk_open(h, t, e, key, DLK_DECODE_HEADER_ONLY, NULL, 0,
                            err);
    if (!rc && h->nparts != Dlk_span_nparts(&l->t[s->tensor], s->chunk))
        rc = Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': %u parts, its tensor's "
                      "part size gives %u", key, h->nparts,
                      Dlk_span_nparts(&l->t[s->tensor], s->chunk));
    if (rc) {
        dlk_chunk_free(h);
        free(ps);
        return rc;
    }
    /* part states first: a thread that sees the head sees them */
    uint8_t *none8 = NULL;
    if (!__atomic_compare_exchange_n(&m->part_state, &none8, ps, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        free(ps);
    dlk_chunk *none = NULL;
    if (!__atomic_compare_exchange_n(&m->head, &none, h, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        dlk_chunk_free(h); /* another thread was faster */
        h = none;
    }
    *out = h;
    return DLK_OK;
}

/* The chunk's part states: set once by get_head (a compare-and-swap
 * that may race a reader), so read atomically too. */
static uint8_t *part_states(struct Dlk_map *m)
{
    return __atomic_load_n(&m->part_state, __ATOMIC_ACQUIRE);
}

static bool parts_have(struct Dlk_map *m, uint32_t p0, uint32_t p1,
                       uint8_t bit)
{
    uint8_t *ps = part_states(m);
    for (uint32_t p = p0; p < p1; p++)
        if (!(__atomic_load_n(&ps[p], __ATOMIC_ACQUIRE) & bit))
            return false;
    return true;
}

static void parts_set(struct Dlk_map *m, uint32_t p0, uint32_t p1,
                      uint8_t bit)
{
    uint8_t *ps = part_states(m);
    for (uint32_t p = p0; p < p1; p++)
        __atomic_fetch_or(&ps[p], bit, __ATOMIC_RELEASE);
}

/* The span's samples' folds (check mode) go into the chunk's kept array
 * of every sample's fold (within folds_max) or one of the slot's.
 * fold_begin finds that array: *todo false when the kept one already
 * holds the span's folds. */
static dlk_status fold_begin(dlk_loader *l, Dlk_slot *s, bool *todo,
                             dlk_error *err)
{
    struct Dlk_map *m = kept(l, s);
    uint32_t samples = s->head->h.samples;
    uint64_t *f = __atomic_load_n(&m->fold, __ATOMIC_ACQUIRE);
    *todo = false;
    if (f && parts_have(m, s->p0, s->p1, PART_FOLDED)) {
        s->fold = f;
        s->fold_kept = true;
        return DLK_OK;
    }
    bool keep = false;
    if (!f) {
        uint64_t bytes = (uint64_t)samples * sizeof *f;
        if (__atomic_add_fetch(&l->folds_kept, bytes, __ATOMIC_RELAXED) <=
            l->folds_max) {
            uint64_t *nf = calloc(samples ? samples : 1, sizeof *nf);
            uint64_t *none = NULL;
            if (nf && __atomic_compare_exchange_n(&m->fold, &none, nf, false,
                                                  __ATOMIC_ACQ_REL,
                                                  __ATOMIC_ACQUIRE)) {
                f = nf;
            } else {
                free(nf);
                __atomic_sub_fetch(&l->folds_kept, bytes, __ATOMIC_RELAXED);
                f = none;
            }
        } else {
            __atomic_sub_fetch(&l->folds_kept, bytes, __ATOMIC_RELAXED);
        }
    }
    uint32_t from = 0;
    if (f) {
        keep = true;
    } else {
        /* the span's own: its samples only (the chunk's every sample,
         * for each of its spans, is 8 bytes a row more than the span
         * holds of small rows) */
        from = Dlk_part_first(s->p0, samples, s->head->nparts);
        uint32_t to = Dlk_part_first(s->p1, samples, s->head->nparts);
        if (!(f = calloc(to > from ? to - from : 1, sizeof *f)))
            return Dlk_oom(err);
    }
    s->fold = f;
    s->fold_first = from;
    s->fold_kept = keep;
    *todo = true;
    return DLK_OK;
}

/* The folds of samples [a, b), which are in the span. */
static void fold_samples(Dlk_slot *s, uint32_t a, uint32_t b)
{
    for (uint32_t i = a; i < b; i++) {
        size_t nb;
        const uint8_t *p = Dlk_slot_sample(s, i, &nb, NULL, NULL);
        /* slots of one span in two epochs may fold it at once: the same
         * values, stored atomically */
        __atomic_store_n(&s->fold[i - s->fold_first], Dlk_fold64(p, nb),
                         __ATOMIC_RELAXED);
    }
}

/* Parts [p0, p1) checked: counted, and the chunk once all are. */
static void mark_verified(dlk_loader *l, Dlk_slot *s, uint32_t p0,
                          uint32_t p1)
{
    struct Dlk_map *m = kept(l, s);
    uint8_t *ps = part_states(m);
    uint32_t fresh = 0;
    for (uint32_t p = p0; p < p1; p++)
        if (!(__atomic_fetch_or(&ps[p], PART_VERIFIED,
                                __ATOMIC_ACQ_REL) & PART_VERIFIED))
            fresh++;
    if (fresh && __atomic_add_fetch(&m->parts_verified, fresh,
                                    __ATOMIC_ACQ_REL) == s->head->nparts)
        __atomic_add_fetch(&l->chunks_verified, 1, __ATOMIC_RELAXED);
}

/* Whether the device checks the span's parts after their copy instead
 * of the loading thread hashing every byte: a GPU (ops->check), and
 * parts longer than XXH3's short inputs, which hash another way (a
 * chunk of a few hundred bytes is hashed here). */
static bool check_on_device(const dlk_loader *l, const Dlk_slot *s)
{
    /* with on_bad skip a mismatch must fail only its own span: the
     * device's record of one covers every check after it */
    if (!l->dev->ops->check || l->o.on_bad == DLK_ON_BAD_SKIP)
        return false;
    for (uint32_t p = s->p0; p < s->p1; p++) {
        uint64_t off, len;
        if (Dlk_chunk_part_span(s->head, p, p + 1, &off, &len) ||
            len < DLK_XXH3_MIN_LONG)
            return false;
    }
    return true;
}

/* Whether the loading thread checks the span's parts: a first read of
 * them by this loader, unless asked not to, and unless the device checks
 * them after their copy (then s->dev_check is set). */
static bool verify_here(dlk_loader *l, Dlk_slot *s)
{
    if (l->o.no_verify ||
        parts_have(kept(l, s), s->p0, s->p1, PART_VERIFIED))
        return false;
    s->dev_check = check_on_device(l, s);
    return !s->dev_check;
}

/* A check's tag: which chunk, for the message when a part differs. */
static uint64_t check_tag(const Dlk_slot *s)
{
    return (uint64_t)s->tensor << 40 | (uint64_t)s->chunk;
}

dlk_status Dlk_span_check_upload(dlk_loader *l, Dlk_slot *s, dlk_error *err)
{
    const dlk_chunk *c = s->head;
    uint32_t n = s->p1 - s->p0;
    Dlk_vpart few[16] = {{0}};
    Dlk_vpart *parts = n <= 16 ? few : malloc(n * sizeof *parts);
    if (!parts)
        return Dlk_oom(err);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = s->p0 + i;
        uint64_t off = 0, len = 0; /* in range: check_on_device said so */
        Dlk_chunk_part_span(c, p, p + 1, &off, &len);
        parts[i] = (Dlk_vpart){off - s->span_off, len,
                               Dlk_get_le64(c->part_hash + 8 * (size_t)p),
                               p, 0};
    }
    dlk_status rc = l->dev->ops->check(l->dev, s->dev_handle, s->dev_ptr,
                                       parts, n, check_tag(s), err);
    if (parts != few)
        free(parts);
    return rc;
}

dlk_status Dlk_span_confirm(dlk_loader *l, Dlk_slot *s, dlk_error *err)
{
    Dlk_vbad bad;
    dlk_status rc = l->dev->ops->checked(l->dev, s->dev_handle, &bad, err);
    if (rc == DLK_ECORRUPT) {
        /* a part of this span or of any other checked before it */
        size_t t = (size_t)(bad.tag >> 40);
        size_t ch = (size_t)(bad.tag & ((1ull << 40) - 1));
        const Dlk_tensor *tt = l->t[t].tensor;
        char key[DLK_CHUNK_KEY_MAX];
        Dlk_chunk_key(key, tt->spec.name, tt->chunks[ch].key);
        const dlk_chunk *h = __atomic_load_n(&l->maps[t][ch].head,
                                             __ATOMIC_ACQUIRE);
        rc = Dlk_chunk_part_check(h, bad.part, bad.got, key, err);
        if (!rc) /* cannot be: the device said the hashes differ */
            rc = Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': part %u checksum "
                          "mismatch", key, bad.part);
        return rc;
    }
    if (rc)
        return rc;
    s->dev_check = false;
    mark_verified(l, s, s->p0, s->p1);
    return DLK_OK;
}

/* Bytes a first read takes at a time: whole samples (one at least), few
 * enough that they are still in the core's cache when hashed and folded
 * right after.  With a whole span read, then checked, then folded, the
 * first epoch over 80,000 images ran at 61-67% of the steady rate on an
 * H200 host; read in these pieces, 68-74%. */
#define FIRST_READ_PIECE ((uint64_t)256 << 10)

/* A span that is read for the first time from local files: in pieces of
 * whole samples, each checked (its part's hash carried over the pieces)
 * and folded right after its read, instead of two more passes over the
 * whole span from memory (docs/benchmarks.md#line-rate). */
static dlk_status read_in_pieces(dlk_loader *l, Dlk_slot *s,
                                 const char *key, uint64_t stored,
                                 uint64_t at, bool verify, bool fold,
                                 double *storage_s, dlk_error *err)
{
    const dlk_chunk *c = s->head;
    Dlk_hash64_stream *h = verify ? Dlk_hash64_stream_new() : NULL;
    if (verify && !h)
        return Dlk_oom(err);
    dlk_status rc = DLK_OK;
    for (uint32_t p = s->p0; p < s->p1 && !rc; p++) {
        uint32_t i = Dlk_part_first(p, c->h.samples, c->nparts);
        uint32_t end = Dlk_part_first(p + 1, c->h.samples, c->nparts);
        if (h)
            Dlk_hash64_stream_reset(h);
        while (i < end && !rc) {
            uint64_t a = Dlk_chunk_sample_offset(c, i);
            uint32_t j = i + 1;
            while (j < end &&
                   Dlk_chunk_sample_offset(c, j + 1) - a <= FIRST_READ_PIECE)
                j++;
            uint64_t n = Dlk_chunk_sample_offset(c, j) - a;
            uint8_t *dst = s->host + (a - s->span_off);
            Dlk_buf b;
            Dlk_buf_wrap(&b, dst, (size_t)n);
            double t0 = Dlk_now_s();
            if (n)
                rc = Dlk_store_get_span(l->store, key, stored,
                                        at + (a - s->span_off), n, &b, err);
            *storage_s += Dlk_now_s() - t0;
            if (!rc && b.len != n)
                rc = Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': %zu of %llu "
                              "bytes of part %u read", key, b.len,
                              (unsigned long long)n, p);
            if (rc)
                break;
            if (h)
                Dlk_hash64_stream_update(h, dst, (size_t)n);
            if (fold)
                fold_samples(s, i, j);
            i = j;
        }
        if (!rc && h) {
            rc = Dlk_chunk_part_check(c, p, Dlk_hash64_stream_digest(h), key,
                                      err);
            rc = Dlk_bad_part(l, s, p, rc, err);
        }
    }
    Dlk_hash64_stream_free(h);
    return rc;
}

/* The span in place in the page cache where a GPU loader keeps chunks
 * mapped and registered for DMA (--pin-cache).  s->span stays NULL
 * otherwise: a span is read into a buffer, as a mapping of each span
 * (a map and an unmap a MiB, from many threads) costs more than the copy
 * (docs/benchmarks.md#label-mix). */
static dlk_status map_span(dlk_loader *l, Dlk_slot *s, const char *key,
                           uint64_t at, uint64_t len, dlk_error *err)
{
    if (!l->use_maps || !l->dev->ops->on_device)
        return DLK_OK;
    struct Dlk_map m;
    dlk_status rc = Dlk_loader_get_map(l, s, key, &m, err);
    if (rc || !m.p)
        return rc;
    if (at > m.n || len > m.n - at)
        return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': %zu bytes, parts "
                        "%u..%u end at %llu", key, m.n, s->p0, s->p1,
                        (unsigned long long)(at + len));
    s->span = (const uint8_t *)m.p + at;
    return DLK_OK;
}

/* The span's parts checked one by one (on_bad skip: a part that does
 * not match is marked bad, the others still used), or together. */
static dlk_status verify_span(dlk_loader *l, Dlk_slot *s, const char *key,
                              dlk_error *err)
{
    if (l->o.on_bad != DLK_ON_BAD_SKIP)
        return Dlk_chunk_verify_parts(s->head, s->p0, s->p1, s->span,
                                      s->span_len, key, err);
    for (uint32_t p = s->p0; p < s->p1; p++) {
        uint64_t off, len;
        dlk_status rc = Dlk_chunk_part_span(s->head, p, p + 1, &off, &len);
        if (!rc)
            rc = Dlk_chunk_verify_parts(s->head, p, p + 1,
                                        s->span + (off - s->span_off), len,
                                        key, err);
        if ((rc = Dlk_bad_part(l, s, p, rc, err)))
            return rc;
    }
    return DLK_OK;
}

/* After a span's parts were checked (verify) and folded (fold): the
 * chunk's record of both (a bad part is not verified: it is checked,
 * and fails, again at its next read). */
static void span_checked(dlk_loader *l, Dlk_slot *s, bool verify, bool fold)
{
    for (uint32_t p = s->p0; verify && s->bad_parts && p < s->p1; p++)
        if (p - s->p0 >= 64 || !(s->bad_parts >> (p - s->p0) & 1))
            mark_verified(l, s, p, p + 1);
    if (verify && !s->bad_parts)
        mark_verified(l, s, s->p0, s->p1);
    if (fold && s->fold_kept)
        parts_set(kept(l, s), s->p0, s->p1, PART_FOLDED);
}

/* The buffer a span of `len` bytes is read into. */
static dlk_status alloc_span(dlk_loader *l, Dlk_slot *s, const char *key,
                             uint64_t len, dlk_error *err)
{
    s->host = l->dev->ops->host_alloc(l->dev, len ? (size_t)len : 64);
    if (!s->host)
        return Dlk_fail(err, DLK_ENOMEM, "cannot allocate %llu bytes for a "
                        "span of chunk '%s'", (unsigned long long)len, key);
    s->t_buffer = Dlk_now_s();
    return DLK_OK;
}

/* A span read whole into s->host (b): all of its bytes came. */
static dlk_status got_span(Dlk_slot *s, const char *key, const Dlk_buf *b,
                           uint64_t len, dlk_error *err)
{
    if (b->len != len)
        return Dlk_fail(err, DLK_ECORRUPT, "chunk '%s': %zu of %llu bytes "
                        "of parts %u..%u read", key, b->len,
                        (unsigned long long)len, s->p0, s->p1);
    s->span = s->host;
    return DLK_OK;
}

/* A span not in place, read into a buffer: its `len` bytes at `at` in
 * the chunk's object.  Read for the first time from local files it is
 * read in pieces, checked and folded as they come (*done: nothing is
 * left to do); else read whole. */
static dlk_status read_span(dlk_loader *l, Dlk_slot *s, const char *key,
                            uint64_t at, uint64_t off, uint64_t len,
                            double t0, double *storage_s, bool *done,
                            dlk_error *err)
{
    uint64_t stored = l->t[s->tensor].tensor->chunks[s->chunk].stored_bytes;
    dlk_status rc = alloc_span(l, s, key, len, err);
    if (rc)
        return rc;
    s->span_off = off;
    s->span_len = len;
    if (!Dlk_store_is_remote(l->store)) {
        bool verify = verify_here(l, s);
        bool fold = false;
        if (l->o.check && (rc = fold_begin(l, s, &fold, err)))
            return rc;
        if (verify || fold) {
            *storage_s += Dlk_now_s() - t0;
            s->span = s->host;
            if ((rc = read_in_pieces(l, s, key, stored, at, verify, fold,
                                     storage_s, err)))
                return rc;
            span_checked(l, s, verify, fold);
            *done = true;
            return DLK_OK;
        }
    }
    Dlk_buf b;
    Dlk_buf_wrap(&b, s->host, (size_t)len);
    if (len && (rc = Dlk_store_get_span(l->store, key, stored, at, len, &b,
                                        err)))
        return rc;
    return got_span(s, key, &b, len, err);
}

/* A span in s->span, whole: its parts checked and folded where that is
 * due. */
static dlk_status check_span(dlk_loader *l, Dlk_slot *s, const char *key,
                             dlk_error *err)
{
    dlk_status rc;
    bool verify = verify_here(l, s);
    if (verify && (rc = verify_span(l, s, key, err)))
        return rc;
    bool fold = false;
    if (l->o.check && !s->fold && (rc = fold_begin(l, s, &fold, err)))
        return rc;
    if (fold)
        fold_samples(s, Dlk_part_first(s->p0, s->head->h.samples,
                                       s->head->nparts),
                     Dlk_part_first(s->p1, s->head->h.samples,
                                    s->head->nparts));
    span_checked(l, s, verify, fold);
    return DLK_OK;
}

dlk_status Dlk_span_load(dlk_loader *l, Dlk_slot *s, double *storage_s,
                         dlk_error *err)
{
    const Dlk_tensor *t = l->t[s->tensor].tensor;
    const Dlk_chunk_entry *e = &t->chunks[s->chunk];
    char key[DLK_CHUNK_KEY_MAX];
    Dlk_chunk_key(key, t->spec.name, e->key);
    double t0 = Dlk_now_s();
    const Dlk_loader_tensor *lt = &l->t[s->tensor];
    uint64_t hb = 0, off = 0, len = 0;
    /* the chunk's first span from a remote store: its header and index
     * in the same round trip where the manifest places the span (a fixed
     * shape), so that a span costs one round trip, not two */
    bool joint = !__atomic_load_n(&kept(l, s)->head, __ATOMIC_ACQUIRE) &&
                 Dlk_store_is_remote(l->store) &&
                 fixed_span(lt, s->chunk, s->p0, s->p1, &hb, &off, &len);
    Dlk_buf b;
    dlk_status rc;
    if (joint) {
        if ((rc = alloc_span(l, s, key, len, err)))
            return rc;
        Dlk_buf_wrap(&b, s->host, (size_t)len);
        if ((rc = get_head(l, s, key, &b, hb + off, &s->head, err)))
            return rc;
    } else if ((rc = get_head(l, s, key, NULL, 0, &s->head, err))) {
        return rc;
    }
    uint64_t hoff, hlen;
    if ((rc = Dlk_chunk_part_span(s->head, s->p0, s->p1, &hoff, &hlen)))
        return Dlk_fail(err, rc, "chunk '%s': parts %u..%u are not in it", key,
                        s->p0, s->p1);
    uint64_t at = DLK_CHUNK_HEADER_BYTES + s->head->h.index_bytes + hoff;
    if (joint) {
        /* the header agrees with the manifest (checked), so this holds;
         * kept as a check on the arithmetic */
        if (hoff != off || hlen != len || at != hb + off)
            return Dlk_fail(err, DLK_EINTERNAL, "chunk '%s': parts %u..%u "
                            "are not where the manifest puts them", key,
                            s->p0, s->p1);
        rc = got_span(s, key, &b, len, err);
    } else {
        off = hoff;
        len = hlen;
        bool done = false;
        rc = map_span(l, s, key, at, len, err);
        if (!rc && !s->span)
            rc = read_span(l, s, key, at, off, len, t0, storage_s, &done,
                           err);
        if (done)
            return DLK_OK;
    }
    if (rc)
        return rc;
    s->span_off = off;
    s->span_len = len;
    *storage_s += Dlk_now_s() - t0;
    return check_span(l, s, key, err);
}

bool Dlk_slot_place(const Dlk_slot *s, uint32_t i, size_t *nbytes,
                    size_t *up_off, int64_t *shape)
{
    if (!s->head) {
        const uint8_t *hp = dlk_chunk_sample(s->ch, i, nbytes, shape);
        if (hp && up_off)
            *up_off = (size_t)(hp - (const uint8_t *)s->ch->payload);
        return hp != NULL;
    }
    uint64_t a = Dlk_chunk_sample_offset(s->head, i);
    uint64_t b = Dlk_chunk_sample_offset(s->head, i + 1);
    if (i >= s->head->h.samples || a < s->span_off ||
        b > s->span_off + s->span_len)
        return false;
    *nbytes = (size_t)(b - a);
    if (up_off)
        *up_off = (size_t)(a - s->span_off);
    if (shape && (s->head->h.flags & DLK_CHUNK_FLAG_VARIABLE)) {
        for (int d = 0; d < s->head->h.ndim; d++)
            shape[d] = s->head->shapes[(size_t)i * s->head->h.ndim + d];
    } else if (shape) {
        memcpy(shape, s->head->shape, sizeof s->head->shape);
    }
    return true;
}

const uint8_t *Dlk_slot_sample(const Dlk_slot *s, uint32_t i, size_t *nbytes,
                               size_t *up_off, int64_t *shape)
{
    size_t off;
    if ((s->head && !s->span) || !Dlk_slot_place(s, i, nbytes, &off, shape))
        return NULL;
    if (up_off)
        *up_off = off;
    return (s->head ? s->span : (const uint8_t *)s->ch->payload) + off;
}

void Dlk_span_free_kept(dlk_loader *l, struct Dlk_map *m)
{
    (void)l;
    dlk_chunk_free(m->head);
    free(m->part_state);
    m->head = NULL;
    m->part_state = NULL;
}
