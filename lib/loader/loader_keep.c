/* loader_keep.c - batches a consumer keeps past the next one.
 *
 * A kept batch takes the tensors' batch buffers with it; the next batch is
 * gathered into spares (buffers given back earlier) or new ones.  So a
 * consumer holding N batches costs N buffers, and one that holds none
 * costs nothing beyond the loader's own buffer per tensor. */
#include "loader_int.h"

#include <stdlib.h>

struct dlk_kept {
    struct dlk_kept *prev, *next;   /* the loader's list of kept batches */
    size_t n;
    struct Dlk_spare buf[];         /* per tensor */
};

dlk_status dlk_loader_keep(dlk_loader *l, dlk_kept **out, dlk_error *err)
{
    *out = NULL;
    if (!l->have_batch || l->batch_kept)
        return Dlk_fail(err, DLK_EINVAL, l->have_batch
                        ? "the current batch is kept already"
                        : "no current batch to keep");
    dlk_kept *k = malloc(sizeof *k + l->nt * sizeof k->buf[0]);
    if (!k)
        return Dlk_oom(err);
    k->n = l->nt;
    for (size_t t = 0; t < l->nt; t++) {
        k->buf[t].p = l->t[t].buf;
        k->buf[t].cap = l->t[t].cap;
        l->t[t].buf = NULL;
        l->t[t].cap = 0;
    }
    k->prev = NULL;
    k->next = l->kept;
    if (l->kept)
        l->kept->prev = k;
    l->kept = k;
    l->batch_kept = true;
    *out = k;
    return DLK_OK;
}

void dlk_loader_release(dlk_loader *l, dlk_kept *k, void *cuda_stream)
{
    if (!k)
        return;
    if (k->prev)
        k->prev->next = k->next;
    else
        l->kept = k->next;
    if (k->next)
        k->next->prev = k->prev;
    /* later gathers into these buffers wait for the consumer's reads; if
     * that cannot be ordered, the buffers are freed instead (the free
     * waits for the device) */
    bool ordered = l->dev->ops->wait_consumer(l->dev, cuda_stream, NULL) ==
                   DLK_OK;
    for (size_t t = 0; t < k->n; t++) {
        Dlk_loader_tensor *lt = &l->t[t];
        if (!k->buf[t].p)
            continue;
        if (ordered && lt->nspare < DLK_SPARES)
            lt->spare[lt->nspare++] = k->buf[t];
        else
            l->dev->ops->batch_free(l->dev, k->buf[t].p);
    }
    free(k);
}

dlk_status dlk_loader_stream_wait(dlk_loader *l, void *cuda_stream,
                                  dlk_error *err)
{
    return l->dev->ops->consumer_waits(l->dev, cuda_stream, err);
}

void Dlk_loader_take_spare(dlk_loader *l, Dlk_loader_tensor *lt,
                           uint64_t need)
{
    (void)l;
    if (!lt->nspare)
        return;
    /* the smallest that fits, else the largest (assemble grows it) */
    size_t best = 0;
    for (size_t i = 1; i < lt->nspare; i++) {
        bool fits = lt->spare[i].cap >= need,
             best_fits = lt->spare[best].cap >= need;
        if (fits ? !best_fits || lt->spare[i].cap < lt->spare[best].cap
                 : !best_fits && lt->spare[i].cap > lt->spare[best].cap)
            best = i;
    }
    lt->buf = lt->spare[best].p;
    lt->cap = lt->spare[best].cap;
    lt->spare[best] = lt->spare[--lt->nspare];
}

void Dlk_loader_free_kept(dlk_loader *l)
{
    while (l->kept) {
        dlk_kept *k = l->kept;
        l->kept = k->next;
        for (size_t t = 0; t < k->n; t++)
            if (k->buf[t].p)
                l->dev->ops->batch_free(l->dev, k->buf[t].p);
        free(k);
    }
    for (size_t t = 0; l->t && t < l->nt; t++) {
        for (size_t i = 0; i < l->t[t].nspare; i++)
            l->dev->ops->batch_free(l->dev, l->t[t].spare[i].p);
        l->t[t].nspare = 0;
    }
}
