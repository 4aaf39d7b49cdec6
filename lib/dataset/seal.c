/* seal.c - writing chunks: encode, name by content hash and store a full
 * builder, either at once or on a few writer threads, so that the thread
 * that appends (ingest's, in sorted order) never waits for encoding,
 * hashing, fsync or an upload.
 *
 * A chunk handed to a writer gets its manifest entry at once, in append
 * order, with an empty key; the writer fills in the key and size when the
 * object is stored, and the appending thread copies them into the entry
 * (dlk_seal_reap) the next time it appends, seals or waits.  Nothing reads
 * or publishes the manifest before dlk_seal_wait has seen every writer
 * finish: a failed write fails that wait, and the manifest, with its
 * empty keys, is never written. */
#include "dataset.h"

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
    dlk_chunk_enc enc;             /* raw and shapes point into the job */
    int64_t shape[DLK_MAX_NDIM];
    dlk_buf raw;
    uint32_t *shapes;
    size_t shapes_cap;
    dlk_buf out;                   /* the encoded object */
    char key[33];
    uint64_t stored;
    dlk_status rc;
    dlk_error err;
} seal_job;

struct dlk_sealer {
    dlk_store *store;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pthread_t th[DLK_SEAL_THREADS];
    int nthreads;                  /* started (main thread only) */
    seal_job jobs[DLK_SEAL_THREADS];
    int busy;                      /* jobs not FREE */
    bool stop;
    dlk_status failed;             /* first writer error, kept */
    dlk_error failed_err;
    double submit_wait_s;          /* dlk_seal_submit waiting for a job */
};

double dlk_seal_wait_seconds(const dlk_dataset *ds)
{
    return ds->sealer ? ds->sealer->submit_wait_s : 0;
}

/* Encode enc, name it by its hash (key_hex) and store it under
 * chunks/<tensor>/ (refreshing an old object of the same name); *stored
 * is its size.  An uncompressed payload is written from where it is,
 * after the header and index that `out` receives, not copied first. */
static dlk_status seal_store(dlk_store *store, const char *tensor,
                             const dlk_chunk_enc *enc, dlk_buf *out,
                             char key_hex[33], uint64_t *stored,
                             dlk_error *err)
{
    bool follows;
    dlk_status rc = dlk_chunk_encode_head(enc, out, &follows, err);
    if (rc)
        return dlk_fail_wrap(err, "tensor '%s'", tensor);
    struct iovec v[2] = {{out->data, out->len},
                         {(void *)enc->raw, follows ? enc->raw_bytes : 0}};
    dlk_hash128_hex_2(v[0].iov_base, v[0].iov_len, v[1].iov_base,
                      v[1].iov_len, key_hex);
    *stored = v[0].iov_len + v[1].iov_len;
    char key[DLK_CHUNK_KEY_MAX];
    dlk_chunk_key(key, tensor, key_hex);
    /* Content-addressed: an existing object of this name has these bytes.
     * But an old one may be unreferenced and about to be collected by gc,
     * which spares only young chunks: refresh it by writing it again. */
    rc = dlk_store_putv(store, key, v, 2, DLK_PUT_IF_ABSENT, NULL, NULL, err);
    if (rc == DLK_EEXIST) {
        dlk_obj_info info;
        dlk_error_clear(err);
        rc = dlk_store_head(store, key, &info, err);
        if (!rc && (info.mtime == 0 || time(NULL) - info.mtime > 600))
            rc = dlk_store_putv(store, key, v, 2, DLK_PUT_ALWAYS, NULL, NULL,
                                err);
    }
    return rc;
}

static void *writer(void *arg)
{
    dlk_sealer *s = arg;
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
        dlk_error_clear(&j->err);
        j->rc = seal_store(s->store, j->name, &j->enc, &j->out, j->key,
                           &j->stored, &j->err);
        /* keep the buffers for the next chunk, not an encoded copy */
        j->out.len = 0;
        pthread_mutex_lock(&s->mu);
        j->state = JOB_DONE;
        pthread_cond_broadcast(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Start ds->sealer and its writer threads (at least one). */
static dlk_status sealer_start(dlk_dataset *ds, dlk_error *err)
{
    dlk_sealer *s = calloc(1, sizeof *s);
    if (!s)
        return dlk_fail(err, DLK_ENOMEM, "out of memory");
    s->store = ds->store;
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
        dlk_sealer_free(s);
        return dlk_fail(err, DLK_EIO, "cannot start a chunk writer thread");
    }
    ds->sealer = s;
    return DLK_OK;
}

void dlk_sealer_free(dlk_sealer *s)
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
        dlk_buf_free(&s->jobs[i].raw);
        dlk_buf_free(&s->jobs[i].out);
        free(s->jobs[i].shapes);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    free(s);
}

/* Copy finished jobs into their entries (under s->mu). */
static void reap_locked(dlk_dataset *ds, dlk_sealer *s)
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
            dlk_tensor *t = &ds->m.tensors[j->tensor];
            dlk_chunk_entry *e = &t->chunks[j->entry];
            memcpy(e->key, j->key, sizeof j->key);
            e->stored_bytes = j->stored;
            t->stored_bytes += j->stored;
        }
        j->state = JOB_FREE;
        s->busy--;
    }
}

static dlk_status failed(dlk_sealer *s, dlk_error *err)
{
    if (err)
        *err = s->failed_err;
    return s->failed;
}

dlk_status dlk_seal_wait(dlk_dataset *ds, dlk_error *err)
{
    dlk_sealer *s = ds->sealer;
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

dlk_status dlk_seal_submit(dlk_dataset *ds, size_t ti, dlk_error *err)
{
    dlk_status rc = ds->sealer ? DLK_OK : sealer_start(ds, err);
    if (rc)
        return rc;
    dlk_sealer *s = ds->sealer;
    dlk_tensor *t = &ds->m.tensors[ti];
    dlk_builder *b = &ds->builders[ti];
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
        double w0 = dlk_now_s();
        pthread_cond_wait(&s->cv_done, &s->mu);
        s->submit_wait_s += dlk_now_s() - w0;
    }
    pthread_mutex_unlock(&s->mu);
    if (s->failed)
        return failed(s, err);
    /* The entry now, in append order; its key when written. */
    dlk_chunk_entry e;
    memset(&e, 0, sizeof e);
    e.samples = b->samples;
    e.raw_bytes = b->raw.len;
    rc = dlk_tensor_add_chunk(t, &e, b->smin, b->smax, err);
    if (rc)
        return rc;
    /* The builder's buffers go to the writer; it gets the job's back. */
    dlk_buf raw = j->raw;
    uint32_t *shapes = j->shapes;
    size_t shapes_cap = j->shapes_cap;
    j->raw = b->raw;
    j->shapes = b->shapes;
    j->shapes_cap = b->shapes_cap;
    b->raw = raw;
    b->raw.len = 0;
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
    j->enc = (dlk_chunk_enc){
        .dtype = t->spec.dtype, .codec = t->spec.codec,
        .level = t->spec.level, .ndim = t->spec.ndim, .variable = variable,
        .shape = j->shape, .shapes = j->shapes, .samples = b->samples,
        .raw = j->raw.data, .raw_bytes = j->raw.len,
    };
    ds->dirty = true;
    b->samples = 0;
    pthread_mutex_lock(&s->mu);
    j->state = JOB_QUEUED;
    s->busy++;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return DLK_OK;
}
