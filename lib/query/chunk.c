/* chunk.c - the chunks a query reads: mapped in place from the page
 * cache when the store can map (a local dataset), else read. */
#include "query.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void q_chunk_drop(dlk_dataset *ds, q_chunk *qc)
{
    dlk_chunk_free(qc->c);
    if (qc->map)
        Dlk_store_unmap(ds->store, qc->map, qc->maplen);
    memset(qc, 0, sizeof *qc);
    qc->index = -1;
}

dlk_status q_chunk_get(dlk_dataset *ds, size_t ti, size_t ci, unsigned mode,
                       q_chunk *qc, uint64_t *bytes, dlk_error *err)
{
    if (qc->c && qc->index == (ssize_t)ci)
        return DLK_OK;
    q_chunk_drop(ds, qc);
    const Dlk_tensor *t = &ds->m.tensors[ti];
    const Dlk_chunk_entry *e = &t->chunks[ci];
    dlk_status rc = DLK_EUNSUPPORTED;
    if (t->spec.codec == DLK_CODEC_NONE) {
        char key[DLK_CHUNK_KEY_MAX];
        Dlk_chunk_key(key, t->spec.name, e->key);
        const void *p;
        size_t n;
        dlk_error merr;
        if (!Dlk_store_map(ds->store, key, &p, &n, &merr)) {
#ifdef MADV_POPULATE_READ
            /* all of it is read (its checksum, or every row): one call maps every
             * page instead of a fault each */
            if (mode & (DLK_DECODE_VERIFY | Q_WHOLE))
                madvise((void *)p, n, MADV_POPULATE_READ);
#endif
            mode &= ~(unsigned)Q_WHOLE;
            dlk_chunk *c = calloc(1, sizeof *c);
            if (!c) {
                Dlk_store_unmap(ds->store, p, n);
                return Dlk_oom(err);
            }
            Dlk_buf_wrap(&c->object, (void *)p, n);
            c->object.len = n;
            qc->map = p;
            qc->maplen = n;
            rc = Dlk_chunk_open(c, t, e, key, mode, NULL, 0, err);
            qc->c = c;
            if (rc) {
                q_chunk_drop(ds, qc);
                return rc;
            }
        }
    }
    mode &= ~(unsigned)Q_WHOLE;
    if (rc == DLK_EUNSUPPORTED &&
        (rc = Dlk_chunk_load(ds, t, e, mode, NULL, 0, &qc->c, err)))
        return rc;
    qc->index = (ssize_t)ci;
    qc->first = e->first;
    qc->end = e->first + e->samples;
    if (bytes)
        *bytes += e->stored_bytes;
    return DLK_OK;
}
