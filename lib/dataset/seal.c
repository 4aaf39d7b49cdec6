/* seal.c - writing chunks: encode, name by content hash and store a full
 * builder, either at once or on a few writer threads, so that the thread
 * that appends (ingest's, in sorted order) never waits for encoding,
 * hashing, fsync or an upload.
 *
 * A chunk handed to a writer gets its manifest entry at once, in append
 * order, with an empty key; the writer fills in the key and size when the
 * object is stored, and the appending thread copies them into the entry
 * (Dlk_seal_reap) the next time it appends, seals or waits.  Nothing reads
 * or publishes the manifest before Dlk_seal_wait has seen every writer
 * finish: a failed write fails that wait, and the manifest, with its
 * empty keys, is never written. */
#include "dataset.h"
#include "util/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { JOB_FREE, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

typedef struct seal_job {
    int state;
    size_t tensor, entry;          /* where the result goes */
    char name[DLK_NAME_MAX + 1];   /* the tensor's */
    Dlk_chunk_enc enc;             /* raw and shapes point into the job */
    int64_t shape[DLK_MAX_NDIM];
    Dlk_buf raw;
    Dlk_buf *segs;                 /* or the payload in parts */
    size_t nsegs, segs_cap;
    struct iovec *iov;             /* header and payload, to write */
    size_t iov_cap;
    uint32_t *shapes;
    size_t shapes_cap;
    Dlk_buf out;                   /* the encoded object */
    char key[33];
    uint64_t stored;
    dlk_status rc;
    dlk_error err;
} seal_job;

struct Dlk_sealer {
    Dlk_store *store;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_t th[DLK_SEAL_THREADS];
    int nthreads;                  /* started (main thread only) */
    seal_job jobs[DLK_SEAL_THREADS];
    int busy;                      /* jobs not FREE */
    bool stop;
    dlk_status failed;             /* first writer error, kept */
    dlk_error failed_err;
    double submit_wait_s;          /* Dlk_seal_submit waiting for a job */
    Dlk_buf *pool;                 /* parts written, for new samples */
    size_t npool, pool_bytes;
};

/* The pool keeps at most this many bytes, in buffers up to POOL_BUF. */
#define POOL_BYTES ((size_t)256 << 20)
#define POOL_BUF ((size_t)4 << 20)

double Dlk_seal_wait_seconds(const dlk_dataset *ds)
{
    return ds->sealer ? ds->sealer->submit_wait_s : 0;
}

/* Encode j's chunk, name it by its hash (j->key) and store it under
 * chunks/<tensor>/ (refreshing an old object of the same name); j->stored
 * is its size.  An uncompressed payload is written from where it is (the
 * builder's buffer or the samples' own), after the header and index that
 * j->out receives, not copied first. */
static dlk_status seal_store(Dlk_store *store, seal_job *j, dlk_error *err)
{
    /* the payload's pieces after the head: read by the encoder for the
     * part hashes, then written */
    size_t npay = j->nsegs ? j->nsegs : 1;
    if (1 + npay > j->iov_cap) {
        struct iovec *v = realloc(j->iov, (1 + npay) * sizeof *v);
        if (!v)
            return Dlk_oom(err);
        j->iov = v;
        j->iov_cap = 1 + npay;
    }
    struct iovec *v = j->iov;
    for (size_t i = 1; i <= npay; i++)
        v[i] = j->nsegs ? (struct iovec){j->segs[i - 1].data,
                                         j->segs[i - 1].len}
                        : (struct iovec){j->raw.data, j->raw.len};
    j->enc.iov = v + 1;
    j->enc.niov = npay;
    bool follows;
    dlk_status rc = Dlk_chunk_encode_head(&j->enc, &j->out, &follows, err);
    if (rc)
        return Dlk_fail_wrap(err, "tensor '%s'", j->name);
    size_t n = 1 + (follows ? npay : 0);
    v[0] = (struct iovec){j->out.data, j->out.len};
    j->stored = 0;
    for (size_t i = 0; i < n; i++)
        j->stored += v[i].iov_len;
    /* named by the hash of its bytes, taken as they are written where the
     * store can (a local directory), so that they are read once */
    char prefix[DLK_CHUNK_KEY_MAX], key[DLK_CHUNK_KEY_MAX];
    Dlk_chunk_key(prefix, j->name, "");
    rc = Dlk_store_putv_hashed(store, prefix, v, (int)n, DLK_PUT_IF_ABSENT,
                               j->key, err);
    if (rc == DLK_EEXIST) {
        /* Content-addressed: an existing object of this name has these
         * bytes.  But an old one may be unreferenced and about to be
         * collected by gc, which spares only young chunks: refresh it by
         * writing it again. */
        Dlk_obj_info info;
        Dlk_error_clear(err);
        Dlk_chunk_key(key, j->name, j->key);
        rc = Dlk_store_head(store, key, &info, err);
        if (!rc && (info.mtime == 0 || time(NULL) - info.mtime > 600))
            rc = Dlk_store_putv(store, key, v, (int)n, DLK_PUT_ALWAYS, NULL,
                                NULL, err);
    }
    return rc;
}

/* A job's parts back to the pool, or freed past its bounds (s->mu). */
static void recycle(Dlk_sealer *s, seal_job *j)
{
    for (size_t i = 0; i < j->nsegs; i++) {
        Dlk_buf *b = &j->segs[i];
        if (b->cap <= POOL_BUF && s->pool_bytes + b->cap <= POOL_BYTES &&
            s->npool < DLK_SEAL_THREADS * DLK_SEGS_MAX) {
            b->len = 0;
            s->pool[s->npool++] = *b;
            s->pool_bytes += b->cap;
        } else {
            Dlk_buf_free(b);
        }
    }
    j->nsegs = 0;
}

Dlk_buf Dlk_seal_recycled(dlk_dataset *ds)
{
    Dlk_buf b;
    Dlk_buf_init(&b);
    Dlk_sealer *s = ds->sealer;
    if (!s)
        return b;
    pthread_mutex_lock(&s->mu);
    if (s->npool) {
        b = s->pool[--s->npool];
        s->pool_bytes -= b.cap;
    }
    pthread_mutex_unlock(&s->mu);
    return b;
}

static void *writer(void *arg)
{
    Dlk_sealer *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        seal_job *j = NULL;
        for (int i = 0; i < DLK_SEAL_THREADS && !j; i++)
            if (s->jobs[i].state == JOB_QUEUED)
                j = &s->jobs[i];
        if (!j && s->stop)
            break;
        if (!j) {
            pthread_cond_wait(&s->cv_work, &s->mu);
            continue;
        }
        j->state = JOB_RUNNING;
        pthread_mutex_unlock(&s->mu);
        Dlk_error_clear(&j->err);
        j->rc = seal_store(s->store, j, &j->err);
        /* keep the buffers for the next chunk, not an encoded copy */
        j->out.len = 0;
        pthread_mutex_lock(&s->mu);
        recycle(s, j);
        j->state = JOB_DONE;
        pthread_cond_broadcast(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Start ds->sealer and its writer threads (at least one). */
static dlk_status sealer_start(dlk_dataset *ds, dlk_error *err)
{
    Dlk_sealer *s = calloc(1, sizeof *s);
    if (!s)
        return Dlk_oom(err);
    s->store = ds->store;
    s->pool = calloc(DLK_SEAL_THREADS * DLK_SEGS_MAX, sizeof *s->pool);
    if (!s->pool) {
        free(s);
        return Dlk_oom(err);
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_done, NULL);
    for (int i = 0; i < DLK_SEAL_THREADS; i++) {
        if (pthread_create(&s->th[i], NULL, writer, s))
            break;
        pthread_setname_np(s->th[i], "dlk-write");
        s->nthreads++;
    }
    if (!s->nthreads) {
        Dlk_sealer_free(s);
        return Dlk_fail(err, DLK_EIO, "cannot start a chunk writer thread");
    }
    ds->sealer = s;
    return DLK_OK;
}

void Dlk_sealer_free(Dlk_sealer *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nthreads; i++)
        pthread_join(s->th[i], NULL);
    for (int i = 0; i < DLK_SEAL_THREADS; i++) {
        seal_job *j = &s->jobs[i];
        Dlk_buf_free(&j->raw);
        Dlk_buf_free(&j->out);
        for (size_t k = 0; k < j->nsegs; k++)
            Dlk_buf_free(&j->segs[k]);
        free(j->segs);
        free(j->iov);
        free(j->shapes);
    }
    for (size_t i = 0; i < s->npool; i++)
        Dlk_buf_free(&s->pool[i]);
    free(s->pool);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    free(s);
}

/* Copy finished jobs into their entries (under s->mu). */
static void reap_locked(dlk_dataset *ds, Dlk_sealer *s)
{
    for (int i = 0; i < DLK_SEAL_THREADS; i++) {
        seal_job *j = &s->jobs[i];
        if (j->state != JOB_DONE)
            continue;
        if (j->rc && !s->failed) {
            s->failed = j->rc;
            s->failed_err = j->err;
        }
        if (!j->rc) {
            Dlk_tensor *t = &ds->m.tensors[j->tensor];
            Dlk_chunk_entry *e = &t->chunks[j->entry];
            memcpy(e->key, j->key, sizeof j->key);
            e->stored_bytes = j->stored;
            t->stored_bytes += j->stored;
        }
        j->state = JOB_FREE;
        s->busy--;
    }
}

static dlk_status failed(Dlk_sealer *s, dlk_error *err)
{
    if (err)
        *err = s->failed_err;
    return s->failed;
}

dlk_status Dlk_seal_wait(dlk_dataset *ds, dlk_error *err)
{
    Dlk_sealer *s = ds->sealer;
    if (!s)
        return DLK_OK;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        reap_locked(ds, s);
        if (!s->busy)
            break;
        pthread_cond_wait(&s->cv_done, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return failed(s, err);
}

dlk_status Dlk_seal_submit(dlk_dataset *ds, size_t ti, dlk_error *err)
{
    dlk_status rc = ds->sealer ? DLK_OK : sealer_start(ds, err);
    if (rc)
        return rc;
    Dlk_sealer *s = ds->sealer;
    Dlk_tensor *t = &ds->m.tensors[ti];
    Dlk_builder *b = &ds->builders[ti];
    pthread_mutex_lock(&s->mu);
    seal_job *j = NULL;
    for (;;) {
        reap_locked(ds, s);
        if (s->failed)
            break;
        for (int i = 0; i < DLK_SEAL_THREADS && !j; i++)
            if (s->jobs[i].state == JOB_FREE)
                j = &s->jobs[i];
        if (j)
            break;
        double w0 = Dlk_now_s();
        pthread_cond_wait(&s->cv_done, &s->mu);
        s->submit_wait_s += Dlk_now_s() - w0;
    }
    pthread_mutex_unlock(&s->mu);
    if (s->failed)
        return failed(s, err);
    /* The entry now, in append order; its key when written. */
    Dlk_chunk_entry e;
    memset(&e, 0, sizeof e);
    e.samples = b->samples;
    e.raw_bytes = b->bytes;
    rc = Dlk_tensor_add_chunk(t, &e, b->smin, b->smax, err);
    if (rc)
        return rc;
    /* The builder's buffers go to the writer; it gets the job's back (the
     * job's parts went to the pool when it was written). */
    Dlk_buf raw = j->raw;
    Dlk_buf *segs = j->segs;
    size_t segs_cap = j->segs_cap;
    uint32_t *shapes = j->shapes;
    size_t shapes_cap = j->shapes_cap;
    j->raw = b->raw;
    j->segs = b->segs;
    j->nsegs = b->nsegs;
    j->segs_cap = b->segs_cap;
    j->shapes = b->shapes;
    j->shapes_cap = b->shapes_cap;
    b->raw = raw;
    b->raw.len = 0;
    b->segs = segs;
    b->nsegs = 0;
    b->segs_cap = segs_cap;
    b->shapes = shapes;
    b->shapes_cap = shapes_cap;
    j->tensor = ti;
    j->entry = t->nchunks - 1;
    snprintf(j->name, sizeof j->name, "%s", t->spec.name);
    bool variable = false;
    for (int d = 0; d < t->spec.ndim; d++) {
        variable |= t->spec.shape[d] == DLK_DIM_VARIABLE;
        j->shape[d] = t->spec.shape[d];
    }
    j->enc = (Dlk_chunk_enc){
        .dtype = t->spec.dtype, .codec = t->spec.codec,
        .level = t->spec.level, .ndim = t->spec.ndim, .variable = variable,
        .shape = j->shape, .shapes = j->shapes, .samples = b->samples,
        .raw = j->nsegs ? NULL : j->raw.data, .raw_bytes = e.raw_bytes,
        .have_raw_hash = true, .raw_hash = Dlk_hash64_stream_digest(b->hash),
        .part_bytes = t->spec.part_bytes,
    };
    ds->dirty = true;
    b->samples = 0;
    b->bytes = 0;
    Dlk_hash64_stream_reset(b->hash);
    pthread_mutex_lock(&s->mu);
    j->state = JOB_QUEUED;
    s->busy++;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return DLK_OK;
}
