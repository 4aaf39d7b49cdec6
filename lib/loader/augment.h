/* augment.h - per-sample image augmentation in the loader: a spec
 * string parsed once, then each sample cropped, resized (antialiased
 * bilinear), flipped, jittered, normalised and converted as it is
 * gathered.  The parameters of a sample: augment_params.h. */
#ifndef DLK_AUGMENT_H
#define DLK_AUGMENT_H

#include "augment_params.h"
#include "dlk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse a spec: a preset ("imagenet-train", "imagenet-eval") or
 * comma-separated fields, later fields overriding a leading preset:
 *   crop=N[xM]  scale=LO:HI  ratio=LO:HI  resize=N (center crop mode)
 *   flip=h|v|hv|none  jitter=B:C:S  normalize=imagenet|none|M0:M1:M2/S0:S1:S2
 *   dtype=u8|f16|bf16|f32  layout=nhwc|nchw
 * DLK_EINVAL naming the field at fault. */
dlk_status Dlk_aug_parse(const char *text, Dlk_aug_spec *out, dlk_error *err);

/* Bytes of one output image of c channels (one frame). */
uint64_t Dlk_aug_out_bytes(const Dlk_aug_spec *sp, uint32_t c);

/* Augment one image (H x W x C u8, HWC) with parameters p into dst
 * (spec's dtype and layout).  C is 1 or 3 (saturation needs 3). */
void Dlk_aug_image_cpu(const Dlk_aug_spec *sp, const Dlk_aug_params *p,
                       const uint8_t *src, int32_t H, int32_t W, int32_t C,
                       void *dst);

#endif
