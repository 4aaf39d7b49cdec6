/* augment_batch.c - one batch tensor through the device's augment op. */
#include "augment_batch.h"
#include "util/error.h"

uint64_t Dlk_aug_sample_bytes(const Dlk_aug_spec *sp, const int64_t *shape,
                              int ndim)
{
    uint64_t frames = ndim == 4 ? (uint64_t)shape[0] : 1;
    return frames * Dlk_aug_out_bytes(sp, (uint32_t)shape[ndim - 1]);
}

dlk_status Dlk_augment_batch(Dlk_dev *d, const Dlk_aug_spec *sp,
                             Dlk_gather *g, const uint64_t *rows,
                             const int64_t *shapes, int ndim, size_t n,
                             uint64_t epoch, uint64_t seed, void *dst,
                             dlk_error *err)
{
    if (!d->ops->augment)
        return Dlk_fail(err, DLK_EUNSUPPORTED,
                        "augment: not available on this device");
    for (size_t i = 0; i < n; i++) {
        const int64_t *s = shapes + i * (size_t)ndim;
        int64_t frames = ndim == 4 ? s[0] : 1;
        int64_t h = s[ndim - 3], w = s[ndim - 2], c = s[ndim - 1];
        if (frames < 1 || h < 1 || w < 1 || (c != 1 && c != 3) ||
            (uint64_t)(frames * h * w * c) != g[i].nbytes)
            return Dlk_fail(err, DLK_EINVAL,
                            "augment: sample of row %llu is not T x H x W x "
                            "C u8 with C 1 or 3",
                            (unsigned long long)rows[i]);
        uint64_t ob = Dlk_aug_sample_bytes(sp, s, ndim);
        g[i].dst_off = ob * i;
        g[i].nbytes = ob;
    }
    return d->ops->augment(d, sp, g, rows, shapes, ndim, n, epoch, seed,
                           dst, err);
}
