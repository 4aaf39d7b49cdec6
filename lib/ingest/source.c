/* source.c - listing a source (an S3 prefix or a local tree, both through
 * the store interface: paginated on S3) and grouping its objects by key
 * stem into rows, in sorted stem order. */
#include "pipeline.h"
#include "util/abi.h"
#include "util/clock.h"
#include "util/grow.h"
#include "util/keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <time.h>

static const struct {
    const char *ext;
    ing_role role;
} roles[] = {
    {"jpg", ING_IMAGE}, {"jpeg", ING_IMAGE}, {"png", ING_IMAGE},
    {"mp4", ING_VIDEO}, {"m4v", ING_VIDEO}, {"mov", ING_VIDEO},
    {"mkv", ING_VIDEO}, {"webm", ING_VIDEO}, {"avi", ING_VIDEO},
    {"cls", ING_CLS}, {"txt", ING_TXT}, {"json", ING_JSON},
    {"npy", ING_NPY},
};

static bool hidden(const char *key)
{
    for (const char *p = key; p; p = strchr(p, '/')) {
        if (*p == '/')
            p++;
        if (*p == '.')
            return true;
    }
    return false;
}

/* A key that cannot be used safely: "a/../b" would be read as "b" by a
 * path normaliser, a NUL would cut it short, and control bytes or bad
 * UTF-8 cannot be printed or put in JSON.  Kept (escaped) to be reported
 * as skipped; a "." segment is only a hidden name. */
#define UNSAFE_KEPT 100000
static int add_unsafe(ing_source *s, const char *key, const char *why)
{
    if (s->nunsafe >= UNSAFE_KEPT)
        return 0;
    if (!DLK_GROW(s->unsafe, s->nunsafe, s->capunsafe, 64))
        return s->oom = true;
    char safe[512];
    Dlk_key_escape(key, safe, sizeof safe);
    if (!(s->unsafe[s->nunsafe].key = strdup(safe)))
        return s->oom = true;
    s->unsafe[s->nunsafe].whole = false;
    s->unsafe[s->nunsafe++].why = why;
    return 0;
}

void ing_unsafe_reason(const struct ing_unsafe *u, char *out, size_t cap)
{
    if (u->whole)
        snprintf(out, cap, "%s", u->why);
    else
        snprintf(out, cap, "not read: the key has %s", u->why);
}

void ing_source_unused(ing_source *s, const char *key, const char *why)
{
    s->unused_total++;
    if (s->nunused >= ING_UNUSED_KEPT)
        return;
    if (!DLK_GROW(s->unused, s->nunused, s->capunused, 64)) {
        s->oom = true;
        return;
    }
    char safe[512];
    Dlk_key_escape(key, safe, sizeof safe);
    if (!(s->unused[s->nunused].key = strdup(safe))) {
        s->oom = true;
        return;
    }
    s->unused[s->nunused++].why = why;
}

/* Files that tools and people leave beside data, whatever their
 * extension: never a sample, so never a tensor of an inferred schema
 * nor a bad row.  Media files are exempt (README.jpg is an image). */
static const char *not_sample_name(const char *base, size_t stem_len)
{
    static const char *const notes[] = {
        "README", "LICENSE", "LICENCE", "COPYING", "NOTICE", "CHANGELOG",
        "CHANGES", "AUTHORS", "CITATION",
    };
    for (size_t i = 0; i < sizeof notes / sizeof notes[0]; i++)
        if (stem_len == strlen(notes[i]) &&
            strncasecmp(base, notes[i], stem_len) == 0)
            return "not a sample: a README, licence or notes file";
    /* job markers of Hadoop, Spark and Databricks */
    static const char *const markers[] = {
        "_SUCCESS", "_FAILED", "_committed_", "_started_", "_metadata",
        "_common_metadata",
    };
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++)
        if (strncmp(base, markers[i], strlen(markers[i])) == 0)
            return "not a sample: a job marker file";
    if (strcasecmp(base, "Thumbs.db") == 0 ||
        strcasecmp(base, "desktop.ini") == 0)
        return "not a sample: a file manager's file";
    return NULL;
}

/* A tar shard, compressed or not, is listed whole: its members become
 * objects once the listing ends (ing_tar_list). */
static int add_shard(ing_source *s, const char *key, uint64_t size,
                     const char *version, bool gz)
{
    if (s->nshards >= UINT32_MAX - 1 ||
        !DLK_GROW(s->shards, s->nshards, s->shards_cap, 64))
        return s->oom = true;
    ing_shard *sh = &s->shards[s->nshards];
    sh->size = size;
    sh->gz = gz;
    sh->key = strdup(key);
    sh->version = strdup(version);
    if (!sh->key || !sh->version) {
        free(sh->key);
        free(sh->version);
        return s->oom = true;
    }
    s->nshards++;
    return 0;
}

int ing_source_add(void *ud, const char *key, uint64_t size,
                   const char *version)
{
    return ing_source_add_obj(ud, key, size, version, 0, 0, 0);
}

/* A metadata file: its rows name the samples; whether it is used is the
 * run's choice (--labels or --no-metadata: not). */
static int add_meta(ing_source *s, const char *key)
{
    if (!DLK_GROW(s->meta, s->nmeta, s->capmeta, 4) ||
        !(s->meta[s->nmeta] = strdup(key)))
        return s->oom = true;
    s->nmeta++;
    ing_source_unused(s, key, "not a sample: a metadata file");
    return s->oom;
}

/* The kind of object the extension at dot (the file name base's last
 * '.', or NULL) says; a name that is only an extension is none. */
static ing_role role_of(const char *base, const char *dot)
{
    ing_role role = ING_NONE;
    for (size_t i = 0; dot && i < sizeof roles / sizeof roles[0]; i++)
        if (strcasecmp(dot + 1, roles[i].ext) == 0)
            role = roles[i].role;
    if (dot == base)
        role = ING_NONE;
    return role;
}

int ing_source_add_obj(ing_source *s, const char *key, uint64_t size,
                       const char *version, uint32_t shard, uint32_t member,
                       uint64_t off)
{
    const char *why = Dlk_key_problem(key);
    if (why)
        return add_unsafe(s, key, why);
    if (hidden(key)) {
        ing_source_unused(s, key, "not a sample: a hidden file");
        return s->oom;
    }
    if (ing_meta_name(key))
        return add_meta(s, key);
    if (s->labels_key && strcmp(key, s->labels_key) == 0) {
        ing_source_unused(s, key, s->labels_coco
                                      ? "not a sample: the --coco file"
                                      : "not a sample: the --labels manifest");
        return s->oom;
    }
    if (!shard && (ing_tar_key(key) || ing_tgz_key(key)))
        return add_shard(s, key, size, version, ing_tgz_key(key));
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    const char *dot = strrchr(base, '.');
    ing_role role = role_of(base, dot);
    if (role != ING_IMAGE && role != ING_VIDEO &&
        (why = not_sample_name(base, dot ? (size_t)(dot - base)
                                         : strlen(base)))) {
        ing_source_unused(s, key, why);
        return s->oom;
    }
    if (role == ING_NONE) {
        s->ignored++;
        ing_source_unused(s, key, "not a sample: a file of no known kind");
        return s->oom;
    }
    if (!DLK_GROW(s->objs, s->nobjs, s->cap, 1024))
        return s->oom = true;
    ing_obj *o = &s->objs[s->nobjs];
    memset(o, 0, sizeof *o);
    if (!(o->key = strdup(key)))
        return s->oom = true;
    if (!(o->version = strdup(version))) {
        free(o->key);
        return s->oom = true;
    }
    o->size = size;
    o->role = role;
    o->shard = shard;
    o->member = member;
    o->off = off;
    o->stem_len = (uint32_t)(dot - key);
    if (role == ING_NPY) {
        /* "0001.images.npy": stem "0001", tensor "images" */
        s->npy++;
        const char *d2 = dot;
        while (d2 > base && d2[-1] != '.')
            d2--;
        if (d2 > base + 1 && (size_t)(dot - d2) <= DLK_NAME_MAX) {
            memcpy(o->tensor, d2, (size_t)(dot - d2));
            o->tensor[dot - d2] = '\0';
            o->stem_len = (uint32_t)(d2 - 1 - key);
        }
    }
    s->nobjs++;
    return 0;
}

static int stem_cmp(const ing_obj *a, const ing_obj *b)
{
    size_t n = a->stem_len < b->stem_len ? a->stem_len : b->stem_len;
    int c = memcmp(a->key, b->key, n);
    if (c)
        return c;
    return (a->stem_len > b->stem_len) - (a->stem_len < b->stem_len);
}

static int obj_cmp(const void *pa, const void *pb)
{
    const ing_obj *a = pa, *b = pb;
    int c = stem_cmp(a, b);
    return c ? c : strcmp(a->key, b->key);
}

static int unsafe_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ing_unsafe *)a)->key,
                  ((const struct ing_unsafe *)b)->key);
}

int ing_source_missing(ing_source *s, const char *const *keys, size_t n,
                       const char *why)
{
    for (size_t i = 0; i < n; i++) {
        size_t at = s->nunsafe;
        if (add_unsafe(s, keys[i], why))
            return -1;
        if (s->nunsafe > at)
            s->unsafe[at].whole = true;
    }
    if (s->nunsafe)
        qsort(s->unsafe, s->nunsafe, sizeof *s->unsafe, unsafe_cmp);
    return 0;
}

/* "file://DIR", "DIR/" and "./DIR" name one local directory. */
static char *local_path(const char *p)
{
    if (strncmp(p, "file://", 7) == 0)
        p += 7;
    char *r = realpath(p, NULL);
    return r ? r : strdup(p);
}

/* The key of `labels` below the source `url`, or NULL. */
static char *key_below(const char *url, const char *labels)
{
    /* a remote url ("s3://", "gs://") is compared as written */
    bool s3 = strncmp(url, "s3://", 5) == 0 || strncmp(url, "gs://", 5) == 0;
    if (s3 != (strncmp(labels, "s3://", 5) == 0 ||
               strncmp(labels, "gs://", 5) == 0))
        return NULL;
    char *root = s3 ? strdup(url) : local_path(url);
    char *file = s3 ? strdup(labels) : local_path(labels);
    char *key = NULL;
    if (root && file) {
        size_t n = strlen(root);
        while (n && root[n - 1] == '/')
            n--;
        if (strncmp(file, root, n) == 0 && file[n] == '/')
            key = strdup(file + n + 1);
    }
    free(root);
    free(file);
    return key;
}

/* While a listing runs: the keys found so far to o->progress, and
 * o->stop polled, every 100 ms (the listing itself runs in the store's
 * threads and the caller's, and gives nothing back until it is done). */
typedef struct list_watch {
    const dlk_ingest_opts *o;
    Dlk_store *store;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, stop;
    double t0;
} list_watch;

static void *watch_listing(void *arg)
{
    list_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        Dlk_cond_wait_ms(&w->cv, &w->mu, 100);
        if (w->done)
            break;
        pthread_mutex_unlock(&w->mu);
        if (w->o->progress) {
            dlk_ingest_progress pg = {
                .listing = 1, .seconds = Dlk_now_s() - w->t0,
                .keys_listed = __atomic_load_n(&w->store->listed,
                                               __ATOMIC_RELAXED)};
            w->o->progress(w->o->ud, &pg);
        }
        bool stop = w->o->stop && w->o->stop(w->o->ud);
        pthread_mutex_lock(&w->mu);
        w->stop |= stop;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static dlk_status list_watched(const dlk_ingest_opts *o, ing_source *s,
                               dlk_error *err)
{
    if (!o || (!o->progress && !o->stop))
        return Dlk_store_list_versions(s->store, "", ing_source_add, s, err);
    list_watch w = {.o = o, .store = s->store, .t0 = Dlk_now_s()};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t th;
    bool started = pthread_create(&th, NULL, watch_listing, &w) == 0;
    dlk_status rc = Dlk_store_list_versions(s->store, "", ing_source_add, s, err);
    pthread_mutex_lock(&w.mu);
    w.done = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    if (started)
        pthread_join(th, NULL);
    s->stopped = w.stop || (o->stop && o->stop(o->ud));
    if (rc == DLK_ECANCELED && s->stopped)
        rc = DLK_OK; /* the store ended the listing as asked: a stop */
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

dlk_status ing_source_base(const char *url, char **out, dlk_error *err)
{
    *out = NULL;
    bool remote = strncmp(url, "s3://", 5) == 0 || strncmp(url, "gs://", 5) == 0;
    char *r;
    if (remote) {
        /* as the stores read it: the bucket, then the prefix without
         * leading or trailing '/' ("s3://b//p/" is "s3://b/p/") */
        const char *b = url + 5, *slash = strchr(b, '/');
        size_t bn = slash ? (size_t)(slash - b) : strlen(b);
        const char *p = slash ? slash : "";
        while (*p == '/')
            p++;
        size_t pn = strlen(p);
        while (pn && p[pn - 1] == '/')
            pn--;
        if (asprintf(&r, "%.5s%.*s/%.*s%s", url, (int)bn, b, (int)pn, p,
                     pn ? "/" : "") < 0)
            return Dlk_oom(err);
    } else {
        const char *path = strncmp(url, "file://", 7) == 0 ? url + 7 : url;
        /* the directory's absolute path, links resolved: "train/",
         * "./train" and "/data/train" are one source */
        char *abs = realpath(path, NULL);
        if (!abs && path[0] != '/')
            return Dlk_fail(err, DLK_ENOTFOUND, "cannot resolve the "
                            "directory '%s' to an absolute path", path);
        const char *a = abs ? abs : path;
        size_t an = strlen(a);
        while (an > 1 && a[an - 1] == '/')
            an--;
        int n = asprintf(&r, "%.*s%s", (int)an, a,
                         an == 1 && a[0] == '/' ? "" : "/");
        free(abs);
        if (n < 0)
            return Dlk_oom(err);
    }
    if (!Dlk_key_base_valid(r)) {
        free(r);
        return Dlk_fail(err, DLK_EINVAL, "'%.200s' is not a source url "
                        "(s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or a "
                        "directory)", url);
    }
    *out = r;
    return DLK_OK;
}

struct ing_cancel {
    const dlk_ingest_opts *o;
    int (*cancel)(void *ud);   /* the caller's store option */
    void *cancel_ud;
};

static int source_cancel(void *ud)
{
    const struct ing_cancel *c = ud;
    return (c->o->stop && c->o->stop(c->o->ud)) ||
           (c->cancel && c->cancel(c->cancel_ud));
}

dlk_status ing_source_open(const char *url, const char *labels,
                           const dlk_store_options *so,
                           const dlk_ingest_opts *o,
                           ing_source *s, dlk_error *err)
{
    memset(s, 0, sizeof *s);
    dlk_store_options with; /* the caller's layout, read once */
    dlk_status orc = abi_opts_in(&with, sizeof with, so, "dlk_store_options",
                                 err);
    if (orc)
        return orc;
    if (!labels && o && o->coco) {
        labels = o->coco; /* no sample either */
        s->labels_coco = true;
    }
    if (labels)
        s->labels_key = key_below(url, labels);
    if (o && o->stop) {
        if (!(s->cancel = malloc(sizeof *s->cancel))) {
            free(s->labels_key);
            s->labels_key = NULL;
            return Dlk_oom(err);
        }
        *s->cancel = (struct ing_cancel){o, with.cancel, with.cancel_ud};
        with.cancel = source_cancel;
        with.cancel_ud = s->cancel;
        so = &with;
    }
    /* objects the caller read from a table: listed and read in memory,
     * their keys relative to url all the same */
    dlk_status rc = o && o->objects
                        ? Dlk_store_open_mem(url, o->objects, o->n_objects,
                                             o->read_object, o->read_object_ud,
                                             &s->store, err)
                        : Dlk_store_open(url, false, so, &s->store, err);
    if (!rc)
        ing_source_watch_passed(s);
    if (rc == DLK_ENOTFOUND)
        rc = Dlk_fail(err, DLK_ENOTFOUND, "no source at '%s'", url);
    else if (rc)
        rc = Dlk_fail_wrap(err, "source");
    if (rc) {
        free(s->labels_key);
        s->labels_key = NULL;
        free(s->cancel);
        s->cancel = NULL;
        return rc;
    }
    rc = ing_source_base(url, &s->base, err);
    if (!rc)
        rc = list_watched(o, s, err);
    if (!rc && !s->stopped && s->nshards)
        rc = ing_tar_list(s, o, err);
    if (!rc)
        rc = ing_source_finish(s, url, err);
    if (rc)
        ing_source_free(s);
    return rc;
}

dlk_status ing_source_finish(ing_source *s, const char *url, dlk_error *err)
{
    if (s->oom)
        return Dlk_fail(err, DLK_ENOMEM, "out of memory listing '%s'", url);
    /* in stem order already, unless a stem is followed by a byte below
     * '.' ("a.jpg" before "a-b.jpg" by stem, after it by key) */
    bool sorted = true;
    for (size_t i = 1; sorted && i < s->nobjs; i++)
        sorted = obj_cmp(&s->objs[i - 1], &s->objs[i]) <= 0;
    if (!sorted)
        qsort(s->objs, s->nobjs, sizeof *s->objs, obj_cmp);
    if (s->nunsafe)
        qsort(s->unsafe, s->nunsafe, sizeof *s->unsafe, unsafe_cmp);
    size_t nrows = 0;
    for (size_t i = 0; i < s->nobjs; i++)
        nrows += i == 0 || stem_cmp(&s->objs[i - 1], &s->objs[i]) != 0;
    s->rows = calloc(nrows ? nrows : 1, sizeof *s->rows);
    if (!s->rows)
        return Dlk_oom(err);
    for (size_t i = 0; i < s->nobjs; i++) {
        if (i == 0 || stem_cmp(&s->objs[i - 1], &s->objs[i]) != 0)
            s->rows[s->nrows++].first = i;
        s->rows[s->nrows - 1].n++;
    }
    return DLK_OK;
}

void ing_source_free(ing_source *s)
{
    for (size_t i = 0; i < s->nobjs; i++) {
        free(s->objs[i].key);
        free(s->objs[i].version);
        free(s->objs[i].inl);
    }
    free(s->objs);
    free(s->rows);
    for (size_t i = 0; i < s->nshards; i++) {
        free(s->shards[i].key);
        free(s->shards[i].version);
    }
    free(s->shards);
    ing_tgz_free(s->tgz);
    for (size_t i = 0; i < s->nunsafe; i++)
        free(s->unsafe[i].key);
    free(s->unsafe);
    for (size_t i = 0; i < s->nunused; i++)
        free(s->unused[i].key);
    free(s->unused);
    free(s->labels_key);
    if (s->manifest)
        ing_labels_free(s->manifest);
    free(s->manifest);
    for (size_t i = 0; i < s->nmeta; i++)
        free(s->meta[i]);
    free(s->meta);
    free(s->base);
    Dlk_store_free(s->store);
    free(s->cancel);  /* after the store, which asks it */
    memset(s, 0, sizeof *s);
}

const char *ing_row_stem(const ing_source *s, size_t row, size_t *len)
{
    const ing_obj *o = &s->objs[s->rows[row].first];
    *len = o->stem_len;
    return o->key;
}

int ing_row_cmp(const ing_source *s, size_t row, const char *stem)
{
    size_t len;
    const char *p = ing_row_stem(s, row, &len);
    size_t sl = strlen(stem);
    int c = memcmp(p, stem, len < sl ? len : sl);
    if (c)
        return c;
    return (len > sl) - (len < sl);
}

int ing_parent_folder(const char *key, char *out, size_t cap)
{
    const char *slash = strrchr(key, '/');
    if (!slash)
        return -1;
    const char *start = slash;
    while (start > key && start[-1] != '/')
        start--;
    size_t n = (size_t)(slash - start);
    if (n == 0 || n >= cap)
        return -1;
    memcpy(out, start, n);
    out[n] = '\0';
    return 0;
}
