/* augment_cpu.c - one sample's augmentation on the host: separable
 * antialiased bilinear resample (width pass, then height, in float on
 * the 0..255 scale, as ATen's separable kernel), flips, jitter on the
 * 0..1 scale (brightness, contrast, saturation in that fixed order),
 * normalisation and the output dtype. */
#include "augment.h"

#include <stdlib.h>
#include <string.h>

#define WCAP 4096 /* weights per output index: a 2048x downscale */

static float clamp01(float x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

static void store(const Dlk_aug_spec *sp, void *dst, size_t i, float v)
{
    switch (sp->dtype) {
    case DLK_AUG_U8: {
        float r = rintf(v * 255.0f);
        ((uint8_t *)dst)[i] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
        break;
    }
    case DLK_AUG_F16: ((uint16_t *)dst)[i] = Dlk_aug_f16(v); break;
    case DLK_AUG_BF16: ((uint16_t *)dst)[i] = Dlk_aug_bf16(v); break;
    default: ((float *)dst)[i] = v; break;
    }
}

/* Jitter of the image of `plane` pixels of C channels on the 0..1
 * scale: torchvision's blends, each clamped. */
static void jitter(const Dlk_aug_params *p, float *img, size_t plane,
                   int32_t C)
{
    size_t nv = plane * C;
    if (p->bright != 1.0f)
        for (size_t i = 0; i < nv; i++)
            img[i] = clamp01(img[i] * p->bright);
    if (p->contrast != 1.0f) {
        double m = 0;
        for (size_t i = 0; i < plane; i++)
            m += C == 3 ? 0.299f * img[i * 3] + 0.587f * img[i * 3 + 1] +
                              0.114f * img[i * 3 + 2]
                        : img[i * C];
        float mean = (float)(m / (double)plane);
        for (size_t i = 0; i < nv; i++)
            img[i] = clamp01(p->contrast * img[i] +
                             (1.0f - p->contrast) * mean);
    }
    if (p->satur != 1.0f && C == 3)
        for (size_t i = 0; i < plane; i++) {
            float g = 0.299f * img[i * 3] + 0.587f * img[i * 3 + 1] +
                      0.114f * img[i * 3 + 2];
            for (int c = 0; c < 3; c++)
                img[i * 3 + c] = clamp01(p->satur * img[i * 3 + c] +
                                         (1.0f - p->satur) * g);
        }
}

/* The OH x OW image into dst: flips, normalisation, dtype and
 * layout. */
static void write_out(const Dlk_aug_spec *sp, const Dlk_aug_params *p,
                      const float *img, int32_t OH, int32_t OW, int32_t C,
                      void *dst)
{
    size_t plane = (size_t)OH * OW;
    for (int32_t oy = 0; oy < OH; oy++) {
        int32_t sy = p->vflip ? OH - 1 - oy : oy;
        for (int32_t ox = 0; ox < OW; ox++) {
            int32_t sx = p->hflip ? OW - 1 - ox : ox;
            const float *px = img + ((size_t)sy * OW + sx) * C;
            for (int32_t c = 0; c < C; c++) {
                float v = px[c];
                if (sp->normalize)
                    v = (v - sp->mean[c % 3]) / sp->std[c % 3];
                size_t at = sp->layout == DLK_AUG_NCHW
                                ? (size_t)c * plane + (size_t)oy * OW + ox
                                : ((size_t)oy * OW + ox) * C + c;
                store(sp, dst, at, v);
            }
        }
    }
}

void Dlk_aug_image_cpu(const Dlk_aug_spec *sp, const Dlk_aug_params *p,
                       const uint8_t *src, int32_t H, int32_t W, int32_t C,
                       void *dst)
{
    (void)H;
    int32_t OH = (int32_t)sp->out_h, OW = (int32_t)sp->out_w;
    size_t plane = (size_t)OH * OW;
    float *wt = malloc(sizeof(float) * WCAP);
    float *tmp = malloc(sizeof(float) * (size_t)p->h * OW * C);
    float *img = malloc(sizeof(float) * plane * C);
    if (!wt || !tmp || !img) {
        /* no memory for scratch: a zero image (the caller checked the
         * sizes; this is the host out of memory) */
        memset(dst, 0, (size_t)Dlk_aug_out_bytes(sp, (uint32_t)C));
        free(wt), free(tmp), free(img);
        return;
    }
    /* width pass over the crop's rows, for the kept columns */
    for (int32_t ox = 0; ox < OW; ox++) {
        int32_t x0;
        int n = Dlk_aug_weights(p->w, p->rw, p->ox + ox, wt, WCAP, &x0);
        for (int32_t y = 0; y < p->h; y++) {
            const uint8_t *row =
                src + ((size_t)(p->top + y) * W + p->left + x0) * C;
            for (int32_t c = 0; c < C; c++) {
                float a = 0;
                for (int j = 0; j < n; j++)
                    a += wt[j] * row[(size_t)j * C + c];
                tmp[((size_t)y * OW + ox) * C + c] = a;
            }
        }
    }
    /* height pass, onto the 0..1 scale */
    for (int32_t oy = 0; oy < OH; oy++) {
        int32_t y0;
        int n = Dlk_aug_weights(p->h, p->rh, p->oy + oy, wt, WCAP, &y0);
        for (int32_t ox = 0; ox < OW; ox++)
            for (int32_t c = 0; c < C; c++) {
                float a = 0;
                for (int j = 0; j < n; j++)
                    a += wt[j] * tmp[((size_t)(y0 + j) * OW + ox) * C + c];
                img[((size_t)oy * OW + ox) * C + c] = a / 255.0f;
            }
    }
    jitter(p, img, plane, C);
    write_out(sp, p, img, OH, OW, C, dst);
    free(wt), free(tmp), free(img);
}
