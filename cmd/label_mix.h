/* label_mix.h - how well the batches of an epoch mix the classes. */
#ifndef DLK_CMD_LABEL_MIX_H
#define DLK_CMD_LABEL_MIX_H

#include "cmd.h"

typedef struct label_mix label_mix;

/* Read the class labels of every row of ds's class-label tensor (the first
 * of kind class_label holding one integer a sample).  *out is NULL, with
 * success, when the dataset has none. */
dlk_status label_mix_open(dlk_dataset *ds, uint32_t batch, uint64_t seed,
                          label_mix **out, dlk_error *err);
/* The class-label tensor's name. */
const char *label_mix_tensor(const label_mix *m);
/* One delivered batch (rows, and 1 where a row is padding). */
void label_mix_batch(label_mix *m, const uint64_t *rows, const uint8_t *pad,
                     uint32_t n);
/* Close the epoch: its label-mix ratio, the mean total variation distance
 * between a full batch's class histogram and the dataset's, over the same
 * mean for batches of a uniformly random permutation of the rows (0 when
 * the epoch had no batch to measure). */
double label_mix_epoch_end(label_mix *m);
/* The random permutation's mean distance (the ratio's denominator). */
double label_mix_random_tvd(const label_mix *m);
void label_mix_free(label_mix *m);

#endif
