/* augment_batch.h - the augmentation of one batch tensor, as any
 * loader's assemble calls it in place of the device gather. */
#ifndef DLK_AUGMENT_BATCH_H
#define DLK_AUGMENT_BATCH_H

#include "augment.h"
#include "device.h"

/* One augmented tensor's batch: g[i].src the stored sample i (shape
 * shapes[i*ndim..], ndim 3 HWC or 4 THWC, u8), rows[i] its row; writes
 * sample i at i * Dlk_aug_sample_bytes(...) of dst and rewrites g[i]'s
 * dst_off and nbytes to that place (so a step folds the output). */
dlk_status Dlk_augment_batch(Dlk_dev *d, const Dlk_aug_spec *sp,
                             Dlk_gather *g, const uint64_t *rows,
                             const int64_t *shapes, int ndim, size_t n,
                             uint64_t epoch, uint64_t seed, void *dst,
                             dlk_error *err);

/* Bytes of one output sample (frames x image). */
uint64_t Dlk_aug_sample_bytes(const Dlk_aug_spec *sp, const int64_t *shape,
                              int ndim);

#endif
