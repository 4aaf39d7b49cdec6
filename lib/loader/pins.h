/* pins.h - chunk files mapped and pinned for the devices, shared by the
 * loaders of a process that read through one store (pins.c). */
#ifndef DLK_PINS_H
#define DLK_PINS_H

#include "device.h"
#include "store/store.h"

/* Chunk object `key` of `store` mapped and registered for the devices of
 * the process: the mapping another loader made, or a new one made with
 * `dev` (then *pinned is true).  Each get is paired with a put.
 * @return DLK_OK with *p, *n; the store's or the device's status. */
dlk_status Dlk_pins_get(Dlk_store *store, const char *key, Dlk_dev *dev,
                        const void **p, size_t *n, bool *pinned,
                        dlk_error *err);

/* A reference to chunk `key` if a loader of the process has it mapped
 * and registered already (no waiting, no mapping): true with *p, *n. */
bool Dlk_pins_take(Dlk_store *store, const char *key, const void **p,
                   size_t *n);

/* The loader is done with it: the last one unregisters (with `dev`) and
 * unmaps it. */
void Dlk_pins_put(Dlk_store *store, const char *key, Dlk_dev *dev);

#endif
