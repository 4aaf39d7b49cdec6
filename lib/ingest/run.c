/* run.c - dlk_ingest: one run over a source, from its listing to the
 * merge into the head; resumes what an identical earlier run left. */
#include "ingest.h"
#include "pipeline.h"
#include "util/abi.h"
#include "util/clock.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The first tensor of kind k that is not a source key tensor. */
static int find_kind(const dlk_dataset *ds, dlk_kind k, int t_key,
                     int t_key_version)
{
    for (size_t i = 0; i < ds->m.ntensors; i++)
        if (ds->m.tensors[i].spec.kind == k && (int)i != t_key &&
            (int)i != t_key_version)
            return (int)i;
    return -1;
}

static bool is_chan(int64_t d) { return d == 1 || d == 3 || d == 4; }

/* Image options for a tensor whose last three dims are an image. */
static void image_opts(const dlk_ingest_opts *o, const dlk_tensor_spec *s,
                       int off, Dlk_image_opts *io)
{
    memset(io, 0, sizeof *io);
    io->fit = (dlk_fit)o->fit;
    io->max_pixels = o->max_pixels;
    const int64_t *d = s->shape + off;
    bool three = s->ndim - off == 3;
    io->chw = o->layout == DLK_LAYOUT_CHW ||
              (o->layout == DLK_LAYOUT_SCHEMA && three && is_chan(d[0]) && !is_chan(d[2]));
    int64_t h = three ? (io->chw ? d[1] : d[0]) : -1;
    int64_t w = three ? (io->chw ? d[2] : d[1]) : -1;
    int64_t ch = three ? (io->chw ? d[0] : d[2]) : -1;
    if (o->width > 0 && o->height > 0) {
        io->width = o->width;
        io->height = o->height;
    } else if (h > 0 && w > 0) {
        io->width = (int)w;
        io->height = (int)h;
    }
    io->channels = o->channels ? o->channels : (is_chan(ch) ? (int)ch : 3);
}

static dlk_status setup_ctx(ing_run *r, const ing_source *src,
                            const ing_labels *labels, dlk_error *err)
{
    dlk_dataset *ds = r->ds;
    ing_ctx *c = &r->ctx;
    memset(c, 0, sizeof *c);
    c->src = src;
    c->tensors = ds->m.tensors;
    c->ntensors = ds->m.ntensors;
    ing_key_tensors(&ds->m, &c->t_key, &c->t_key_version);
    c->t_image = find_kind(ds, DLK_KIND_IMAGE, c->t_key, c->t_key_version);
    c->t_video = find_kind(ds, DLK_KIND_VIDEO, c->t_key, c->t_key_version);
    c->t_label = find_kind(ds, DLK_KIND_CLASS_LABEL, c->t_key,
                           c->t_key_version);
    c->t_text = find_kind(ds, DLK_KIND_TEXT, c->t_key, c->t_key_version);
    c->labels = labels;
    /* a metadata file without a label column leaves the folders' */
    c->folder_labels = c->t_label >= 0 && (!labels || labels->label_col < 0);
    if (c->t_image >= 0)
        image_opts(r->o, &ds->m.tensors[c->t_image].spec, 0, &c->img);
    else
        image_opts(r->o, &(dlk_tensor_spec){.ndim = 0}, 0, &c->img);
    if (c->t_video >= 0) {
        const dlk_tensor_spec *s = &ds->m.tensors[c->t_video].spec;
        if (s->ndim != 4)
            return Dlk_fail(err, DLK_EINVAL, "video tensor '%s' must have 4 "
                            "dimensions [T,H,W,C]", s->name);
        image_opts(r->o, s, 1, &c->vid.image);
        c->vid.frames = r->o->frames ? r->o->frames
                        : (s->shape[0] > 0 && r->o->fps <= 0
                           ? (int)s->shape[0] : 0);
        c->vid.fps = r->o->fps;
        c->vid.clip_seconds = r->o->clip_seconds;
    }
    return DLK_OK;
}

/* keyed_rows: the head's key rows (a keyed run is one attempt at the
 * keys missing from that head: once merged, the next run is another), or
 * -1 for a dataset without keys. */
static void canonical_options(ing_run *r, const char *nonce,
                              long long keyed_rows)
{
    const dlk_ingest_opts *o = r->o;
    const ing_ctx *c = &r->ctx;
    /* a sorted run's name has no order field, as the run names of
     * writers without --order had, so that a run they left resumes */
    char order_text[48] = "";
    /* "/gz8": compressed shards' rows in groups of 8 (row_order.c), an
     * order that a run begun when each shard's rows stayed together
     * must not resume in */
    bool gz = c->src && ing_has_tgz(c->src);
    /* " tables": a table's rows by row number, which a run begun in
     * stem order must not resume in */
    if (r->order.shuffled)
        snprintf(order_text, sizeof order_text, " order=shuffled/%llu%s%s",
                 (unsigned long long)r->order.seed, gz ? "/gz8" : "",
                 r->order.tables ? "/tables" : "");
    else if (r->order.tables)
        snprintf(order_text, sizeof order_text, " order=sorted/tables");
    snprintf(r->options, sizeof r->options,
             "v1 shards=%u image=%dx%d/%d/%d/%s video=%dx%d/%d/%d frames=%d "
             "fps=%g clip=%g max_pixels=%llu labels=%s on_error=%d "
             "unordered=%d%s%s%s", r->nshards, c->img.width, c->img.height,
             c->img.fit, c->img.channels, c->img.chw ? "chw" : "hwc",
             c->vid.image.width, c->vid.image.height, c->vid.image.channels,
             c->vid.image.chw, c->vid.frames, c->vid.fps, c->vid.clip_seconds,
             (unsigned long long)o->max_pixels,
             o->labels ? o->labels : o->coco ? o->coco
             : c->labels ? "metadata" : "",
             (int)o->on_error, o->unordered, order_text,
             nonce ? " nonce=" : "", nonce ? nonce : "");
    if (keyed_rows >= 0) {
        size_t n = strlen(r->options);
        snprintf(r->options + n, sizeof r->options - n, " keyed=%lld",
                 keyed_rows);
    }
    char *text;
    if (asprintf(&text, "%s\n%s", r->source, r->options) < 0) {
        snprintf(r->run, sizeof r->run, "%s", "0");
        return;
    }
    Dlk_hash128_hex(text, strlen(text), r->run);
    free(text);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The rows of this shard (cand[0..n), in append order) not done by an
 * earlier attempt, in append order: keyed, those whose keys it staged;
 * else those up to its done_through and in its done_also. */
static dlk_status plan(ing_run *r, const size_t *cand, size_t n,
                       size_t **todo, size_t *ntodo, dlk_error *err)
{
    const ing_source *src = r->ctx.src;
    ing_progress *p = &r->prog;
    *ntodo = 0;
    *todo = malloc((n + 1) * sizeof **todo);
    if (!*todo)
        return Dlk_oom(err);
    if (r->keyed) {
        Dlk_buf tmp;
        Dlk_buf_init(&tmp);
        dlk_status rc = DLK_OK;
        for (size_t j = 0; !rc && j < n; j++) {
            ing_row_hashes h;
            r->res->planned++;
            rc = ing_row_key_hashes(src, cand[j], NULL, &tmp, &h, err);
            /* the staged rows are this run's, so of this source: by their
             * identity or, staged by a dlk that wrote relative keys
             * before an upgrade, by the key relative to it */
            if (!rc && r->staged.n &&
                (ing_keyset_find(&r->staged, h.key, h.version) !=
                     ING_KEY_NEW ||
                 ing_keyset_find(&r->staged, h.rel, h.version) !=
                     ING_KEY_NEW))
                r->res->resumed_rows++;
            else if (!rc)
                (*todo)[(*ntodo)++] = cand[j];
        }
        Dlk_buf_free(&tmp);
        return rc;
    }
    if (p->n_done_also)
        qsort(p->done_also, p->n_done_also, sizeof *p->done_also, cmp_str);
    for (size_t j = 0; j < n; j++) {
        size_t i = cand[j];
        r->res->planned++;
        if (p->done_through &&
            ing_order_cmp(src, &r->order, i, p->done_through) <= 0) {
            r->res->resumed_rows++;
            continue;
        }
        bool also = false;
        for (size_t d = 0; !also && d < p->n_done_also; d++)
            also = ing_row_cmp(src, i, p->done_also[d]) == 0;
        if (also) {
            r->res->resumed_rows++;
            continue;
        }
        (*todo)[(*ntodo)++] = i;
    }
    return DLK_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The head's keys that rows[0..n) of the listing may be classified by:
 * those of each row's identity, relative key and key less key_base
 * (ing_key_classify looks up no other), read from the index's blocks
 * that may hold them, so that the cost follows the listing, not the
 * dataset. */
static dlk_status lookup_keys(ing_run *r, const ing_source *src,
                              const size_t *rows, size_t n, Dlk_buf *tmp,
                              ing_keyset *k, dlk_error *err)
{
    memset(k, 0, sizeof *k);
    uint64_t *q = malloc((3 * n + 1) * sizeof *q);
    if (!q)
        return Dlk_oom(err);
    size_t nq = 0;
    dlk_status rc = DLK_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        ing_row_hashes h;
        rc = ing_row_key_hashes(src, rows[i], r->key_base, tmp, &h, err);
        q[nq++] = h.key;
        q[nq++] = h.rel;
        if (h.has_based)
            q[nq++] = h.based;
    }
    if (nq)
        qsort(q, nq, sizeof *q, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < nq; i++)
        if (!u || q[u - 1] != q[i])
            q[u++] = q[i];
    /* as many keys as a quarter of the rows of a large dataset: every
     * block is read anyway, and taking every entry costs less memory and
     * time than a search of each in q */
    uint64_t held = r->ds->m.tensors[r->ctx.t_key].samples;
    bool all = held >= 65536 && u >= held / 4;
    if (!rc)
        rc = ing_keyset_lookup(r->ds, r->ctx.t_key, r->ctx.t_key_version,
                               all ? NULL : q, all ? 0 : u, k, err);
    free(q);
    return rc;
}

/* The rows of src, in append order, that are samples, into out; their
 * count.  Rows of objects that feed no tensor are no samples (the key
 * tensors, fed by every row, do not count). */
static size_t sample_rows(ing_run *r, const ing_source *src, size_t *out)
{
    ing_feeds feeds = {0};
    for (size_t t = 0; t < r->ds->m.ntensors; t++)
        if ((int)t != r->ctx.t_key && (int)t != r->ctx.t_key_version)
            ing_feeds_add(&feeds, &r->ds->m.tensors[t].spec);
    size_t nsample = 0;
    for (size_t pos = 0; pos < src->nrows; pos++) {
        size_t row = r->rows[pos];
        /* the metadata names the rows: a file it does not is none */
        if (ing_meta_stray(r->ctx.labels, src, row, r->o, r->shard == 0,
                           &r->res->unused))
            continue;
        if (ing_row_is_sample(src, row, &feeds, r->o->on_unused,
                              r->o->ud, &r->res->unused))
            out[nsample++] = row;
    }
    return nsample;
}

/* The first rows whose keys the dataset holds with another version
 * (changed) or may (unsure), named for the message that stops the run. */
typedef struct {
    char named[512], unsure[512];
    size_t nl, ul;
    uint64_t nunsure;
} key_notes;

/* Row i's key may be that of a row ingested with another version. */
static void note_unsure(const ing_source *src, size_t i, key_notes *kn)
{
    size_t len;
    const char *key = ing_row_key(src, i, &len);
    if (++kn->nunsure <= 3 && kn->ul < sizeof kn->unsure)
        kn->ul += (size_t)snprintf(kn->unsure + kn->ul,
                                   sizeof kn->unsure - kn->ul, "%s'%.*s'",
                                   kn->ul ? ", " : "",
                                   (int)(len > 100 ? 100 : len), key);
}

/* Row i's object changed since it was ingested: counted, and named by
 * what identifies it, its url. */
static dlk_status note_changed(ing_run *r, const ing_source *src, size_t i,
                               Dlk_buf *tmp, key_notes *kn, dlk_error *err)
{
    r->res->changed++;
    dlk_status rc = ing_row_ident(src, i, tmp, err);
    if (rc)
        return rc;
    char *z = strndup((const char *)tmp->data, tmp->len);
    if (!z)
        return Dlk_oom(err);
    /* every shard lists the whole source */
    if (r->shard == 0 && r->o->on_changed_key)
        r->o->on_changed_key(r->o->ud, z);
    if (r->res->changed <= 3 && kn->nl < sizeof kn->named)
        kn->nl += (size_t)snprintf(kn->named + kn->nl,
                                   sizeof kn->named - kn->nl, "%s'%s'",
                                   kn->nl ? ", " : "", z);
    free(z);
    return DLK_OK;
}

/* Of the samples rows[0, nsample), those whose key the dataset lacks,
 * kept in rows[0, *n); the others counted as present or changed. */
static dlk_status keep_new(ing_run *r, const ing_source *src, size_t *rows,
                           size_t nsample, size_t *n, key_notes *kn,
                           dlk_error *err)
{
    const char *base = r->key_base;
    Dlk_buf tmp;
    Dlk_buf_init(&tmp);
    ing_keyset k;
    dlk_status rc = lookup_keys(r, src, rows, nsample, &tmp, &k, err);
    if (rc) {
        Dlk_buf_free(&tmp);
        return Dlk_fail_wrap(err, "cannot read the source keys of '%s'",
                             r->ds->url);
    }
    for (size_t pos = 0; !rc && pos < nsample; pos++) {
        size_t i = rows[pos];
        ing_row_hashes h;
        if ((rc = ing_row_key_hashes(src, i, base, &tmp, &h, err)))
            break;
        int f = ing_key_classify(&k, &h, base != NULL);
        if (f == ING_KEY_NEW) {
            rows[(*n)++] = i;
            r->res->new_rows++;
        } else if (f == ING_KEY_PRESENT) {
            r->res->present++;
        } else if (f == ING_KEY_UNSURE) {
            note_unsure(src, i, kn);
        } else {
            rc = note_changed(r, src, i, &tmp, kn, err);
        }
    }
    Dlk_buf_free(&tmp);
    ing_keyset_free(&k);
    return rc;
}

/* Whether the keyed run goes on: not with rows it cannot tell new or
 * changed, nor with changed rows under --on-changed fail. */
static dlk_status key_verdict(const ing_run *r, const key_notes *kn,
                              dlk_error *err)
{
    uint64_t nunsure = kn->nunsure;
    if (nunsure)
        /* this object changed, or another of the same relative name: to
         * guess either way would drop or duplicate a row */
        return Dlk_fail(err, DLK_EINVAL, "nothing was ingested: %llu "
                        "object%s of '%s' %s the relative key of a row an "
                        "earlier dlk ingested, with another version, and "
                        "the dataset does not record that row's source "
                        "(name it once with --keys-relative-to URL): %s%s",
                        (unsigned long long)nunsure, nunsure == 1 ? "" : "s",
                        r->source, nunsure == 1 ? "has" : "have",
                        kn->unsure, nunsure > 3 ? ", ..." : "");
    if (r->res->changed && r->o->on_changed == DLK_ON_CHANGED_FAIL)
        return Dlk_fail(err, DLK_EINVAL, "%llu object%s changed since %s "
                        "ingested (%s%s); nothing was ingested (--on-changed "
                        "skip ingests the new objects and skips these)",
                        (unsigned long long)r->res->changed,
                        r->res->changed == 1 ? "" : "s",
                        r->res->changed == 1 ? "it was" : "they were",
                        kn->named, r->res->changed > 3 ? ", ..." : "");
    return DLK_OK;
}

/* The listing's rows to ingest, in append order: every row or, keyed, those
 * whose key the dataset lacks (the others counted as present or changed,
 * changed ones reported). */
static dlk_status candidates(ing_run *r, const ing_source *src,
                             size_t **out, size_t *n, dlk_error *err)
{
    *n = 0;
    *out = malloc((src->nrows + 1) * sizeof **out);
    if (!*out)
        return Dlk_oom(err);
    size_t nsample = sample_rows(r, src, *out);
    if (!r->keyed) {
        *n = nsample;
        return DLK_OK;
    }
    key_notes kn = {0};
    dlk_status rc = keep_new(r, src, *out, nsample, n, &kn, err);
    if (!rc)
        rc = key_verdict(r, &kn, err);
    return rc;
}

static void replay_errors(const ing_run *r)
{
    size_t i;
    json_t *e;
    if (!r->o->on_bad)
        return;
    json_array_foreach(r->prog.errors, i, e)
        r->o->on_bad(r->o->ud, json_string_value(json_object_get(e, "key")),
                     json_string_value(json_object_get(e, "reason")));
}

/* Open the shard's staging document, or start one. */
static dlk_status begin_shard(ing_run *r, const size_t *cand, size_t n,
                              bool *resumed, dlk_error *err)
{
    const ing_source *src = r->ctx.src;
    bool exists = false;
    dlk_status rc = ing_stage_load(r->ds, r->stage_key, &r->prog, &exists,
                                   err);
    if (rc)
        return rc;
    *resumed = exists;
    size_t fl, ll;
    const char *fs = n ? ing_row_stem(src, cand[0], &fl) : "";
    const char *ls = n ? ing_row_stem(src, cand[n - 1], &ll) : "";
    char *first = n ? strndup(fs, fl) : strdup("");
    char *last = n ? strndup(ls, ll) : strdup("");
    if (!first || !last) {
        free(first);
        free(last);
        return Dlk_oom(err);
    }
    if (exists) {
        /* keyed, one process: what the source gained since is ingested
         * with the rest; shards must agree on their rows */
        bool same = (r->keyed && r->nshards == 1) ||
                    (r->prog.rows == n && r->prog.first && r->prog.last &&
                     strcmp(r->prog.first, first) == 0 &&
                     strcmp(r->prog.last, last) == 0);
        free(r->prog.first);
        free(r->prog.last);
        r->prog.first = first;
        r->prog.last = last;
        r->prog.rows = n;
        if (!same)
            return Dlk_fail(err, DLK_ECONFLICT, "the source '%s' changed "
                            "since the interrupted run (%s): its rows differ; "
                            "remove %s to start over, or use --no-resume",
                            r->source, r->stage_key, r->stage_key);
        if (r->keyed) {
            /* the rows it staged are known by their keys; bad rows are
             * tried again (so counted and reported afresh) */
            if (r->nshards == 1)
                r->prog.complete = false;
            r->prog.skipped = 0;
            json_array_clear(r->prog.errors);
            rc = ing_keyset_add_rows(r->ds, r->ctx.t_key,
                                     r->ctx.t_key_version, 0, &r->staged,
                                     err);
            ing_keyset_sort(&r->staged);
            return rc;
        }
        r->res->skipped += r->prog.skipped;
        replay_errors(r);
        return DLK_OK;
    }
    ing_stage_reset(r->ds);
    r->prog.rows = n;
    r->prog.first = first;
    r->prog.last = last;
    if (!(r->prog.errors = json_array()))
        return Dlk_oom(err);
    /* at once, not at the first checkpoint: a create killed before then
     * is told apart from a finished one (dlk_ingest_create) */
    return ing_stage_write(r->ds, r->stage_key, r->source, r->shard,
                           r->nshards, r->options, &r->prog, err);
}

/* A reason without the key it names ("cannot decode image 'a/1.jpg':
 * ..." -> "cannot decode image '*': ..."), so that rows skipped for one
 * cause count together. */
static void generic_reason(const char *why, const char *key, char *out,
                           size_t cap)
{
    const char *p = key && *key ? strstr(why, key) : NULL;
    if (!p)
        snprintf(out, cap, "%s", why);
    else
        snprintf(out, cap, "%.*s*%s", (int)(p - why), why, p + strlen(key));
}

/* The commonest reasons of errors ([{"key","reason"}]) and of the
 * source's unsafe keys (NULL: none), "N x reason; ..." into out. */
static void common_reasons(const json_t *errors, const ing_source *unsafe,
                           char *out, size_t cap)
{
    enum { TRACK = 32, SHOW = 3 };
    struct tally { char why[160]; uint64_t n; } t[TRACK];
    size_t nt = 0;
    size_t ne = json_array_size(errors);
    size_t nu = unsafe ? unsafe->nunsafe : 0;
    for (size_t i = 0; i < ne + nu; i++) {
        char why[160];
        if (i < ne) {
            const json_t *e = json_array_get(errors, i);
            const char *r = json_string_value(json_object_get(e, "reason"));
            if (!r)
                continue;
            generic_reason(r, json_string_value(json_object_get(e, "key")),
                           why, sizeof why);
        } else {
            ing_unsafe_reason(&unsafe->unsafe[i - ne], why, sizeof why);
        }
        size_t k = 0;
        while (k < nt && strcmp(t[k].why, why))
            k++;
        if (k == nt && nt < TRACK) {
            memcpy(t[nt].why, why, sizeof why);
            t[nt++].n = 0;
        }
        if (k < nt)
            t[k].n++;
    }
    size_t len = 0;
    out[0] = '\0';
    for (size_t shown = 0; shown < SHOW && len < cap; shown++) {
        size_t best = nt;
        for (size_t k = 0; k < nt; k++)
            if (t[k].n && (best == nt || t[k].n > t[best].n))
                best = k;
        if (best == nt)
            break;
        len += (size_t)snprintf(out + len, cap - len, "%s%llu x %s",
                                shown ? "; " : "",
                                (unsigned long long)t[best].n, t[best].why);
        t[best].n = 0;
    }
}

static dlk_status check_outcome(const dlk_ingest_opts *o, const char *source,
                                uint64_t ingested, uint64_t skipped,
                                uint64_t held, bool nonempty,
                                const json_t *errors,
                                const ing_source *unsafe,
                                dlk_ingest_result *res, dlk_error *err);

dlk_status ing_source_listed_any(const ing_source *src, const char *source,
                                 dlk_error *err)
{
    /* not a rerun with nothing new (its objects are listed, and found in
     * the dataset): a source that lists nothing at all is an empty or
     * misspelled prefix, which a scheduled run must not take for success */
    if (src->nobjs + src->unused_total + src->nunsafe > 0)
        return DLK_OK;
    return Dlk_fail(err, DLK_ENOTFOUND, "the source '%s' lists no objects "
                    "(an empty or misspelled prefix?); nothing was ingested",
                    source);
}

dlk_status ing_check_outcome(const dlk_ingest_opts *o, const char *source,
                             uint64_t ingested, uint64_t skipped,
                             bool nonempty, const json_t *errors,
                             dlk_ingest_result *res, dlk_error *err)
{
    return check_outcome(o, source, ingested, skipped, 0, nonempty, errors,
                         NULL, res, err);
}

/* What a run tried (rows ingested and skipped, over every run of it):
 * no row ingested from a source that is not empty, or a share skipped
 * over o->max_skip, fails (res->rejected) before the rows are merged.
 * held: rows of the source that the dataset holds already (by key): a
 * source ingested before is not empty of rows, and its skips are a share
 * of all its rows, so that an object that stays bad does not fail every
 * later run over a growing prefix. */
static dlk_status check_outcome(const dlk_ingest_opts *o, const char *source,
                                uint64_t ingested, uint64_t skipped,
                                uint64_t held, bool nonempty,
                                const json_t *errors,
                                const ing_source *unsafe,
                                dlk_ingest_result *res, dlk_error *err)
{
    double max = o->max_skip > 0 ? o->max_skip : o->max_skip < 0 ? 0 : 0.1;
    uint64_t tried = ingested + skipped;
    bool none = ingested == 0 && held == 0 && nonempty;
    /* a shard whose rows were all skipped, where skips are allowed
     * (--max-skip 1), completes: the run's rows are the other shards',
     * which would otherwise wait for it forever */
    if (none && tried && o->nshards > 1 && max >= 1)
        none = false;
    bool over = tried && (double)skipped > max * (double)(tried + held);
    if (!none && !over)
        return DLK_OK;
    res->rejected = 1;
    char why[DLK_ERRMSG_MAX / 2];
    common_reasons(errors, unsafe, why, sizeof why);
    if (none && !tried)
        return Dlk_fail(err, DLK_EDECODE, "no row to ingest in '%s': none "
                        "of its objects is an image, a video, a label or a "
                        ".npy file of a tensor", source);
    /* a shard's failure holds back the others' staged rows, which merge
     * when every shard is done: say so, and how to finish the merge */
    char then[160];
    if (o->nshards > 1)
        snprintf(then, sizeof then, "; the other shards' rows stay staged "
                 "and merge once shard %u/%u completes: run it again (with "
                 "--max-skip 1 to keep the rows it could read)", o->shard,
                 o->nshards);
    else
        snprintf(then, sizeof then, " (--max-skip 1 keeps the rows that "
                 "could be read)");
    if (none)
        return Dlk_fail(err, DLK_EDECODE, "ingested no row of '%s': all %llu "
                        "tried were skipped (%s); nothing was merged into the "
                        "head%s", source, (unsigned long long)tried, why,
                        o->nshards > 1 ? then : "");
    return Dlk_fail(err, DLK_EDECODE, "skipped %llu of %llu rows of '%s' "
                    "(%.0f%%, more than the %g%% allowed by --max-skip): %s; "
                    "nothing was merged into the head%s",
                    (unsigned long long)skipped, (unsigned long long)tried,
                    source, 100.0 * (double)skipped / (double)tried,
                    100 * max, why, then);
}

/* Keys of the listing that cannot be read safely: skipped and reported
 * by the first shard (every shard lists the whole source); with
 * --on-error fail, the end of the run before anything is written. */
dlk_status ing_report_unsafe(const dlk_ingest_opts *o,
                             dlk_ingest_result *res,
                             const ing_source *src, dlk_error *err)
{
    for (size_t i = 0; i < src->nunsafe; i++) {
        char why[160];
        ing_unsafe_reason(&src->unsafe[i], why, sizeof why);
        if (o->on_bad)
            o->on_bad(o->ud, src->unsafe[i].key, why);
        res->skipped++;
        if (o->on_error == DLK_ON_ERROR_FAIL)
            return Dlk_fail(err, DLK_EDECODE, "cannot ingest '%s': %s",
                            src->unsafe[i].key, why);
    }
    return DLK_OK;
}

/* Objects of the listing that cannot be samples (a README, .DS_Store,
 * _SUCCESS): reported by the first shard, as ing_report_unsafe does. */
void ing_report_unused(const dlk_ingest_opts *o, dlk_ingest_result *res,
                       const ing_source *src)
{
    for (size_t i = 0; o->on_unused && i < src->nunused; i++)
        o->on_unused(o->ud, src->unused[i].key, src->unused[i].why);
    res->unused += src->unused_total;
}

/* The dataset's schema to opts->on_schema, class names included. */
static dlk_status tell_schema(const ing_run *r, dlk_error *err)
{
    const dlk_dataset *ds = r->ds;
    if (!r->o->on_schema)
        return DLK_OK;
    size_t n = ds->m.ntensors;
    dlk_tensor_spec *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return Dlk_oom(err);
    for (size_t i = 0; i < n; i++) {
        v[i] = ds->m.tensors[i].spec;
        v[i].class_names = (const char *const *)ds->m.tensors[i].class_names;
        v[i].n_class_names = ds->m.tensors[i].n_class_names;
    }
    r->o->on_schema(r->o->ud, v, n);
    free(v);
    return DLK_OK;
}

static dlk_status check_opts(const dlk_ingest_opts *o, dlk_error *err)
{
    if (!o || !o->source || !*o->source)
        return Dlk_fail(err, DLK_EINVAL, "no source to ingest from");
    if (o->nshards > 1 && o->shard >= o->nshards)
        return Dlk_fail(err, DLK_EINVAL, "shard %u of %u: the shard must be "
                        "below the count", o->shard, o->nshards);
    if (o->nshards > 1 && o->no_resume)
        /* each process would name a run of its own: none would ever see
         * every shard complete, and nothing would be merged */
        return Dlk_fail(err, DLK_EINVAL, "--no-resume cannot be combined "
                        "with --shard %u/%u: the shards of one run must share "
                        "its name (remove the staging/ingest documents of an "
                        "earlier run instead)", o->shard, o->nshards);
    if (o->order != DLK_ORDER_SHUFFLED && o->order != DLK_ORDER_SORTED)
        return Dlk_fail(err, DLK_EINVAL, "unknown row order %d",
                        (int)o->order);
    if (o->channels && o->channels != 1 && o->channels != 3 &&
        o->channels != 4)
        return Dlk_fail(err, DLK_EINVAL, "channels must be 1, 3 or 4");
    if ((o->width > 0) != (o->height > 0) || o->width < 0 || o->height < 0)
        return Dlk_fail(err, DLK_EINVAL, "bad resize %dx%d", o->width,
                        o->height);
    if ((int)o->fit < 0 || o->fit > DLK_FIT_PAD || (int)o->layout < 0 ||
        o->layout > DLK_LAYOUT_CHW)
        return Dlk_fail(err, DLK_EINVAL, "bad fit or layout");
    if (o->frames < 0 || o->fps < 0 || o->clip_seconds < 0)
        return Dlk_fail(err, DLK_EINVAL, "negative frame count, rate or "
                        "length");
    return DLK_OK;
}

static dlk_status ingest_run(const char *url, const dlk_ingest_opts *o,
                             dlk_ingest_result *res, dlk_error *err)
{
    return ing_ingest_listed(url, o, NULL, Dlk_now_s(), 0, res, err);
}

ABI_RUN_WRAPPER(dlk_ingest, ingest_run, const char *, dlk_ingest_opts,
                dlk_ingest_result)

/* The listing to ingest into *src: the caller's (taken over, freed on a
 * bad option) or the source's own, opened now. */
static dlk_status take_source(const dlk_ingest_opts *o, ing_source *listed,
                              double t0, double list_s,
                              dlk_ingest_result *res, ing_source *src,
                              dlk_error *err)
{
    dlk_status rc = check_opts(o, err);
    if (rc) {
        if (listed)
            ing_source_free(listed);
        return rc;
    }
    if (listed) {
        *src = *listed;
        memset(listed, 0, sizeof *listed);
        res->list_seconds = list_s;
    } else {
        if ((rc = ing_source_open(o->source, o->labels, o->store, o, src,
                                  err)))
            return rc;
        res->list_seconds = Dlk_now_s() - t0;
    }
    return DLK_OK;
}

/* The run's options, row order and thread counts, before the head is
 * read. */
static void init_run(ing_run *r, const dlk_ingest_opts *o,
                     dlk_ingest_result *res, const ing_source *src,
                     bool local_dir)
{
    memset(r, 0, sizeof *r);
    r->o = o;
    r->res = res;
    r->source = o->source;
    r->nshards = o->nshards > 1 ? o->nshards : 1;
    r->shard = o->nshards > 1 ? o->shard : 0;
    r->order = ing_order_of(o);
    res->order = r->order.shuffled ? DLK_ORDER_SHUFFLED : DLK_ORDER_SORTED;
    res->order_seed = r->order.seed;
    /* From S3 on many cores, a core for each of the store's I/O threads,
     * which receive every GET: sharing all the cores with as many
     * decoders, the one I/O thread fell behind them (16-core H100 host,
     * ingest on 15 cores: 14 decode threads +5.3% over 15, mean of six
     * rotations, faster in each; 13 -2%; 14 with two I/O threads -1%) */
    int cores = dlk_cpu_count();
    int spare = !local_dir && cores >= 12 ? Dlk_store_io_threads(src->store)
                                          : 0;
    r->jobs = o->jobs > 0 ? o->jobs : cores - spare;
    res->jobs = r->jobs;
    /* A local tree with a decode thread on every core is read by the
     * decode threads themselves (on 16 cores, handing each row over cost
     * more than reading it); with cores to spare 16 fetch threads keep
     * reads off the decoders.  From an object store each GET waits tens
     * of milliseconds for its first byte while a decoder takes ~1 ms an
     * image: GETs in flight = rate x latency, 15 cores x 1 ms-images
     * through 20 ms = 300.  256 rows, and the store's in-flight limit may
     * grow to match where its answers are slow (s3_http.c, grow): through
     * 20 ms on a 16-core host 2,640 files/s with 64 in flight, 6,600 with
     * 256; through none, 256 in flight were 13% slower than 64
     * (docs/benchmarks.md#ingest). */
    r->fetchers = o->fetchers > 0          ? o->fetchers
                  : !local_dir                ? 256
                  : r->jobs >= dlk_cpu_count() ? 0
                                               : 16;
    if (!local_dir)
        Dlk_store_want_inflight(src->store, r->fetchers);
}

/* Reports the listing's unsafe keys, prepares the key base, grows the
 * class lists and opens the head for writing with the run's rows in
 * order.  *key_base is the caller's to free, whatever the outcome. */
static dlk_status open_head(const char *url, ing_run *r, ing_source *src,
                            const ing_labels *labels, char **key_base,
                            dlk_error *err)
{
    const dlk_ingest_opts *o = r->o;
    dlk_ingest_result *res = r->res;
    dlk_status rc = r->shard ? DLK_OK : ing_report_unsafe(o, res, src, err);
    if (!rc && !o->no_key && !o->dry_run)
        rc = ing_keys_prepare(url, o->store, err);
    if (!rc && o->keys_relative_to) {
        rc = ing_source_base(o->keys_relative_to, key_base, err);
        if (rc)
            rc = Dlk_fail_wrap(err, "--keys-relative-to");
        else if (!o->dry_run)
            rc = ing_keys_set_base(url, o->store, *key_base, err);
    }
    /* before the head is read for the run: its rows are built with the
     * class list that holds their classes */
    if (!rc)
        rc = ing_classes_grow(url, o, src, labels, res, err);
    if (!rc)
        rc = Dlk_dataset_open_writer(url, o->store, &r->ds, err);
    if (!rc)
        r->key_base = *key_base ? *key_base : r->ds->m.key_base;
    if (!rc)
        rc = setup_ctx(r, src, labels, err);
    if (!rc)
        rc = ing_order_rows(src, &r->order, &r->rows, err);
    if (!rc)
        rc = tell_schema(r, err);
    if (!rc && r->shard == 0)
        ing_report_unused(o, res, src);
    return rc;
}

/* The run's canonical options and staging key; with --no-resume a
 * random nonce names a run of its own. */
static void name_run(ing_run *r)
{
    char nonce[40] = "";
    if (r->o->no_resume) {
        uint64_t x = 0;
        if (getrandom(&x, sizeof x, 0) != sizeof x)
            x = (uint64_t)time(NULL) ^ (uint64_t)getpid();
        snprintf(nonce, sizeof nonce, "%016llx", (unsigned long long)x);
    }
    canonical_options(r, *nonce ? nonce : NULL,
                      r->keyed ? (long long)r->ds->m.tensors[r->ctx.t_key]
                                     .samples
                               : -1);
    ing_stage_key(r->stage_key, sizeof r->stage_key, r->run, r->shard,
                  r->nshards);
}

/* Whether this run was merged already (*done) or, keyed, has nothing new
 * and no attempt to finish (*idle). */
static dlk_status check_done_or_idle(ing_run *r, const ing_source *src,
                                     size_t ncand, bool *done, bool *idle,
                                     dlk_error *err)
{
    dlk_ingest_result *res = r->res;
    dlk_status rc = ing_merge_done(r->ds->store, r->run, done, err);
    if (!rc && *done && r->keyed) {
        /* merged without adding a key (the head's key rows are those it
         * was named after): the record says nothing of this run */
        char key[256];
        snprintf(key, sizeof key, "staging/ingest/%s/merge.json", r->run);
        rc = Dlk_store_del(r->ds->store, key, err);
        *done = false;
    }
    if (!rc && !*done && r->keyed && ncand == 0) {
        /* nothing new, and no attempt of this run to finish */
        Dlk_obj_info info;
        rc = Dlk_store_head(r->ds->store, r->stage_key, &info, err);
        if (rc == DLK_ENOTFOUND) {
            Dlk_error_clear(err);
            rc = DLK_OK;
            *idle = true;
        }
        /* nothing to do because the source has no row at all: the
         * outcome of an empty run (no row to ingest in a source that is
         * not empty fails) */
        if (!rc && *idle && !res->present && !res->changed)
            rc = check_outcome(r->o, r->source, 0,
                               r->shard == 0 ? src->nunsafe : 0, 0,
                               src->nobjs + src->unused_total + src->nunsafe > 0,
                               NULL, r->shard == 0 ? src : NULL, res, err);
    }
    return rc;
}

/* This shard's rows cand[0, n): begun or resumed, ingested, checked
 * against --max-skip and recorded complete in its staging document.
 * *todo is the caller's to free. */
static dlk_status ingest_shard(ing_run *r, const ing_source *src,
                               const size_t *cand, size_t n, size_t **todo,
                               size_t *ntodo, dlk_error *err)
{
    dlk_ingest_result *res = r->res;
    bool resumed = false;
    dlk_status rc = begin_shard(r, cand, n, &resumed, err);
    if (!rc && !r->prog.complete)
        rc = plan(r, cand, n, todo, ntodo, err);
    if (!rc && !r->prog.complete)
        rc = ing_pipeline_run(r, *todo, *ntodo, err);
    if (!rc && r->interrupted) {
        res->interrupted = 1;
        res->kept = r->prog.ingested;
    }
    if (!rc && !r->prog.complete && !r->interrupted) {
        /* the unsafe keys are shard 0's skips (ing_report_unsafe) */
        bool first = r->shard == 0;
        uint64_t unsafe = first ? src->nunsafe : 0;
        /* keyed: the rows tried are the new ones (those the dataset
         * holds were not tried) */
        bool nonempty = r->nshards == 1 && !r->keyed
                            ? src->nobjs + src->unused_total + src->nunsafe > 0
                            : n + unsafe > 0;
        rc = check_outcome(r->o, r->source, r->prog.ingested,
                           r->prog.skipped + unsafe,
                           res->present + res->changed, nonempty,
                           r->prog.errors, first ? src : NULL, res, err);
        if (rc)
            r->failed = true;
    }
    if (!rc && !r->prog.complete && !r->interrupted) {
        r->prog.complete = true;
        rc = ing_stage_write(r->ds, r->stage_key, r->source, r->shard,
                             r->nshards, r->options, &r->prog, err);
    }
    if (r->failed) {
        /* --on-error fail, or rejected: forget this run (its chunks
         * are left for gc); the head never saw it */
        dlk_error e2;
        Dlk_store_del(r->ds->store, r->stage_key, &e2);
    }
    return rc;
}

/* This shard's share cand[0, n) of the run's ncand rows, ingested unless
 * the run was merged already (*done) or has nothing to do (*idle).
 * *todo is the caller's to free. */
static dlk_status run_share(ing_run *r, const ing_source *src,
                            const size_t *cand, size_t n, size_t ncand,
                            bool *done, bool *idle, size_t **todo,
                            size_t *ntodo, dlk_error *err)
{
    name_run(r);
    dlk_status rc = check_done_or_idle(r, src, ncand, done, idle, err);
    if (!rc && !*done && !*idle)
        rc = ingest_shard(r, src, cand, n, todo, ntodo, err);
    if (*done) {
        r->res->already = 1;
        r->res->complete = 1;
    }
    if (*idle)
        r->res->complete = 1;
    return rc;
}

/* The plan of rows cand[0, n) without the staging document: nothing is
 * written. */
static dlk_status plan_only(ing_run *r, const size_t *cand, size_t n,
                            dlk_error *err)
{
    size_t *all = NULL, nall = 0;
    dlk_status rc = plan(r, cand, n, &all, &nall, err);
    free(all);
    return rc;
}

/* The run over the source's rows: the head opened, the rows to ingest
 * found, this shard's share of them ingested and the run merged once
 * every shard's is. */
static dlk_status ingest_rows(const char *url, const dlk_ingest_opts *o,
                              ing_source *src, const ing_labels *labels,
                              bool local_dir, dlk_ingest_result *res,
                              dlk_error *err)
{
    ing_run r;
    init_run(&r, o, res, src, local_dir);
    char *key_base = NULL;
    dlk_status rc = open_head(url, &r, src, labels, &key_base, err);
    r.keyed = !rc && r.ctx.t_key >= 0;
    res->keyed = r.keyed;
    /* the rows to ingest, in append order: the source's samples or, keyed,
     * those whose keys the head lacks; this shard's share [a, b) of them */
    size_t *cand = NULL, ncand = 0;
    if (!rc)
        rc = candidates(&r, src, &cand, &ncand, err);
    size_t a = (size_t)((unsigned __int128)ncand * r.shard / r.nshards);
    size_t b = (size_t)((unsigned __int128)ncand * (r.shard + 1) / r.nshards);
    if (!rc && o->dry_run) {
        rc = plan_only(&r, cand + a, b - a, err);
        free(cand);
        free(r.rows);
        ing_order_free(&r.order);
        dlk_dataset_free(r.ds);
        free(key_base);
        return rc;
    }
    bool done = false, idle = false;
    size_t *todo = NULL, ntodo = 0;
    if (!rc)
        rc = run_share(&r, src, cand + a, b - a, ncand, &done, &idle, &todo,
                       &ntodo, err);
    dlk_dataset_free(r.ds);
    r.ds = NULL;
    r.key_base = NULL;
    free(key_base);
    if (!rc && !done && !idle && !res->interrupted) {
        bool merged = false;
        rc = ing_merge(url, o->store, r.run, r.nshards, &merged, err);
        res->complete = merged;
    }
    free(cand);
    ing_keyset_free(&r.staged);
    free(todo);
    free(r.rows);
    ing_order_free(&r.order);
    ing_progress_free(&r.prog);
    return rc;
}

/* The source taken from its listing: nothing if the listing was
 * stopped, a tree of .npy files mapped file by file, or its rows
 * ingested with the labels its metadata gives them. */
static dlk_status ingest_source(const char *url, const dlk_ingest_opts *o,
                                ing_source *src, dlk_ingest_result *res,
                                dlk_error *err)
{
    if (src->stopped) {
        /* nothing appended yet: nothing to keep */
        res->interrupted = 1;
        return DLK_OK;
    }
    res->ignored = src->ignored;
    dlk_status rc = ing_source_listed_any(src, o->source, err);
    if (rc)
        return rc;
    bool local_dir = strncmp(o->source, "s3://", 5) != 0 &&
                     strncmp(o->source, "gs://", 5) != 0;
    bool meta = o->coco || (!o->labels && !o->no_metadata && src->nmeta);
    /* (a tree of .npy files only is mapped file by file: not the
     * caller's objects) */
    bool npy_only = local_dir && !o->objects && src->nobjs &&
                    src->npy == src->nobjs &&
                    !src->nshards && !o->labels && !meta && o->nshards <= 1 &&
                    !o->dry_run;
    bool as_rows = true;
    if (npy_only && (rc = ing_npy_tree_as_rows(url, o, src, &as_rows, err)))
        return rc;
    if (npy_only && !as_rows)
        return ing_npy_tree_ingest(url, o, src, res, err);
    ing_labels labels;
    bool have_labels = false;
    rc = ing_labels_for(o, src, &labels, &have_labels, err);
    /* files named and missing are skipped rows, told with the others */
    if (!rc && have_labels && labels.exact)
        rc = ing_meta_missing(src, &labels, err);
    if (!rc)
        rc = ingest_rows(url, o, src, have_labels ? &labels : NULL,
                         local_dir, res, err);
    if (have_labels)
        ing_labels_free(&labels);
    return rc;
}

dlk_status ing_ingest_listed(const char *url, const dlk_ingest_opts *o,
                             ing_source *listed, double t0, double list_s,
                             dlk_ingest_result *res, dlk_error *err)
{
    dlk_ingest_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    ing_source src;
    dlk_status rc = take_source(o, listed, t0, list_s, res, &src, err);
    if (rc)
        return rc;
    rc = ingest_source(url, o, &src, res, err);
    ing_source_free(&src);
    res->seconds = Dlk_now_s() - t0;
    return rc;
}
