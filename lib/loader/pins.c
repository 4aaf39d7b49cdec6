/* pins.c - chunk files mapped and pinned for the devices, shared by the
 * loaders of a process that read through one store (the loaders of one
 * dataset handle: dlk.jax's, one a GPU, or a training and a validation
 * loader).  The registration is portable, so every device of the process
 * reads the same pinned pages: a chunk is mapped and registered once, not
 * once a loader (registrations take turns within a process, and each
 * costs about as much as copying the chunk), and kept while any loader
 * holds it. */
#include "pins.h"
#include "util/error.h"
#include "util/hash.h"
#include "store/store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct pin {
    struct pin *next;
    const Dlk_store *store;
    char *key;
    const void *p;
    size_t n;
    uint32_t refs;
    bool mapping;               /* its first loader maps and registers it */
} pin;

#define BUCKETS 1024

static struct {
    pthread_mutex_t mu;
    pthread_cond_t mapped;
    pin *bucket[BUCKETS];
} pins = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}};

static pin **slot(const Dlk_store *store, const char *key)
{
    uint64_t h = Dlk_hash64_2(&store, sizeof store, key, strlen(key));
    pin **pp = &pins.bucket[h % BUCKETS];
    while (*pp && ((*pp)->store != store || strcmp((*pp)->key, key)))
        pp = &(*pp)->next;
    return pp;
}

dlk_status Dlk_pins_get(Dlk_store *store, const char *key, Dlk_dev *dev,
                        const void **p, size_t *n, bool *pinned,
                        dlk_error *err)
{
    *pinned = false;
    pthread_mutex_lock(&pins.mu);
    pin **pp, *e;
    /* another loader mapping it: wait for its mapping (or its failure,
     * which removes the entry: then this one tries) */
    while ((e = *(pp = slot(store, key))) && e->mapping)
        pthread_cond_wait(&pins.mapped, &pins.mu);
    if (e) {
        e->refs++;
        *p = e->p;
        *n = e->n;
        pthread_mutex_unlock(&pins.mu);
        return DLK_OK;
    }
    if (!(e = calloc(1, sizeof *e)) || !(e->key = strdup(key))) {
        free(e);
        pthread_mutex_unlock(&pins.mu);
        return Dlk_oom(err);
    }
    e->store = store;
    e->refs = 1;
    e->mapping = true;
    *pp = e;
    pthread_mutex_unlock(&pins.mu);
    const void *q = NULL;
    size_t m = 0;
    dlk_status rc = Dlk_store_map(store, key, &q, &m, err);
    if (!rc && (rc = dev->ops->register_host(dev, q, m, err)))
        Dlk_store_unmap(store, q, m);
    pthread_mutex_lock(&pins.mu);
    if (rc) {
        *slot(store, key) = e->next;
        free(e->key);
        free(e);
    } else {
        e->p = *p = q;
        e->n = *n = m;
        e->mapping = false;
        *pinned = true;
    }
    pthread_cond_broadcast(&pins.mapped);
    pthread_mutex_unlock(&pins.mu);
    return rc;
}

bool Dlk_pins_take(Dlk_store *store, const char *key, const void **p,
                   size_t *n)
{
    pthread_mutex_lock(&pins.mu);
    pin *e = *slot(store, key);
    bool ready = e && !e->mapping;
    if (ready) {
        e->refs++;
        *p = e->p;
        *n = e->n;
    }
    pthread_mutex_unlock(&pins.mu);
    return ready;
}

void Dlk_pins_put(Dlk_store *store, const char *key, Dlk_dev *dev)
{
    pthread_mutex_lock(&pins.mu);
    pin **pp = slot(store, key), *e = *pp;
    if (e && --e->refs == 0)
        *pp = e->next;
    else
        e = NULL;
    pthread_mutex_unlock(&pins.mu);
    if (e) {
        dev->ops->unregister_host(dev, e->p);
        Dlk_store_unmap(store, e->p, e->n);
        free(e->key);
        free(e);
    }
}
