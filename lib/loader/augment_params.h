/* augment_params.h - one sample's augmentation parameters as a pure
 * function of (seed, epoch, row): the same crop and flip on the cpu and
 * on a CUDA device, in a first run, a re-run and a resumed epoch.  Plain
 * C, also compiled by nvcc (then every function is __host__ __device__).
 *
 * The draws: a splitmix64 stream started at
 *   s0 = seed ^ (epoch + 1) * 0x9E3779B97F4A7C15 ^ (row + 1) * 0xD1B54A32D192ED03
 * each draw advances s by 0x9E3779B97F4A7C15 and mixes it (splitmix64);
 * a uniform u in [0,1) is the draw's top 53 bits * 2^-53.  In order:
 * the RandomResizedCrop tries (area fraction, log-ratio, top, left per
 * try, as torchvision), then hflip (u < 0.5), vflip, then brightness,
 * contrast, saturation factors (each uniform in [max(0,1-f), 1+f]). */
#ifndef DLK_AUGMENT_PARAMS_H
#define DLK_AUGMENT_PARAMS_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DLK_AUG_HD __host__ __device__
#else
#define DLK_AUG_HD
#endif

enum { DLK_AUG_RANDOM_CROP = 0, DLK_AUG_CENTER = 1, DLK_AUG_RESIZE = 2 };
enum { DLK_AUG_U8 = 0, DLK_AUG_F16 = 1, DLK_AUG_BF16 = 2, DLK_AUG_F32 = 3 };
enum { DLK_AUG_NHWC = 0, DLK_AUG_NCHW = 1 };

/* A parsed spec (augment.c). */
typedef struct Dlk_aug_spec {
    int mode;                 /* DLK_AUG_RANDOM_CROP, _CENTER, _RESIZE */
    uint32_t out_h, out_w;    /* output size */
    uint32_t resize;          /* _CENTER: shorter side resized to this */
    double scale_lo, scale_hi, ratio_lo, ratio_hi;
    int hflip, vflip;
    double jitter[3];         /* brightness, contrast, saturation */
    int normalize;
    float mean[3], std[3];    /* on the 0..1 scale */
    int dtype, layout;
} Dlk_aug_spec;

/* One sample's parameters: the source box (top, left, h, w) is resampled
 * to rh x rw, of which the out_h x out_w window at (oy, ox) is kept. */
typedef struct Dlk_aug_params {
    int32_t top, left, h, w;
    int32_t rh, rw, oy, ox;
    int32_t hflip, vflip;
    float bright, contrast, satur;
} Dlk_aug_params;

DLK_AUG_HD static inline uint64_t Dlk_aug_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

DLK_AUG_HD static inline double Dlk_aug_unif(uint64_t *s)
{
    return (double)(Dlk_aug_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

DLK_AUG_HD static inline double Dlk_aug_range(uint64_t *s, double lo,
                                              double hi)
{
    return lo + (hi - lo) * Dlk_aug_unif(s);
}

/* torchvision's RandomResizedCrop.get_params, with round() as Python's
 * (half to even: rint in the default rounding mode). */
DLK_AUG_HD static inline void Dlk_aug_crop(const Dlk_aug_spec *sp,
                                           uint64_t *s, int32_t H,
                                           int32_t W, Dlk_aug_params *p)
{
    double area = (double)H * (double)W;
    double lr0 = log(sp->ratio_lo), lr1 = log(sp->ratio_hi);
    for (int t = 0; t < 10; t++) {
        double ta = area * Dlk_aug_range(s, sp->scale_lo, sp->scale_hi);
        double ar = exp(Dlk_aug_range(s, lr0, lr1));
        int32_t w = (int32_t)rint(sqrt(ta * ar));
        int32_t h = (int32_t)rint(sqrt(ta / ar));
        double ut = Dlk_aug_unif(s), ul = Dlk_aug_unif(s);
        if (w > 0 && w <= W && h > 0 && h <= H) {
            p->top = (int32_t)(ut * (double)(H - h + 1));
            p->left = (int32_t)(ul * (double)(W - w + 1));
            p->h = h;
            p->w = w;
            return;
        }
    }
    double in_ratio = (double)W / (double)H;
    int32_t w = W, h = H;
    if (in_ratio < sp->ratio_lo)
        h = (int32_t)rint((double)w / sp->ratio_lo);
    else if (in_ratio > sp->ratio_hi)
        w = (int32_t)rint((double)h * sp->ratio_hi);
    if (h > H) h = H;
    if (w > W) w = W;
    if (h < 1) h = 1;
    if (w < 1) w = 1;
    p->top = (H - h) / 2;
    p->left = (W - w) / 2;
    p->h = h;
    p->w = w;
}

/* The parameters of the sample at `row` of `epoch` (source H x W). */
DLK_AUG_HD static inline void Dlk_aug_params_for(const Dlk_aug_spec *sp,
                                                 uint64_t seed,
                                                 uint64_t epoch, uint64_t row,
                                                 int32_t H, int32_t W,
                                                 Dlk_aug_params *p)
{
    uint64_t s = seed ^ (epoch + 1) * 0x9E3779B97F4A7C15ull ^
                 (row + 1) * 0xD1B54A32D192ED03ull;
    p->top = 0;
    p->left = 0;
    p->h = H;
    p->w = W;
    p->rh = (int32_t)sp->out_h;
    p->rw = (int32_t)sp->out_w;
    p->oy = 0;
    p->ox = 0;
    if (sp->mode == DLK_AUG_RANDOM_CROP) {
        Dlk_aug_crop(sp, &s, H, W, p);
    } else if (sp->mode == DLK_AUG_CENTER) {
        /* torchvision Resize(r): the shorter side to r, the longer
         * truncated; CenterCrop: offsets rounded */
        int32_t r = (int32_t)sp->resize;
        if (H <= W) {
            p->rh = r;
            p->rw = (int32_t)((double)r * W / H);
        } else {
            p->rw = r;
            p->rh = (int32_t)((double)r * H / W);
        }
        p->oy = (int32_t)rint((p->rh - (int32_t)sp->out_h) / 2.0);
        p->ox = (int32_t)rint((p->rw - (int32_t)sp->out_w) / 2.0);
    }
    p->hflip = sp->hflip ? Dlk_aug_unif(&s) < 0.5 : 0;
    p->vflip = sp->vflip ? Dlk_aug_unif(&s) < 0.5 : 0;
    float f[3];
    for (int k = 0; k < 3; k++) {
        double j = sp->jitter[k];
        double lo = 1.0 - j < 0 ? 0 : 1.0 - j;
        f[k] = j > 0 ? (float)Dlk_aug_range(&s, lo, 1.0 + j) : 1.0f;
    }
    p->bright = f[0];
    p->contrast = f[1];
    p->satur = f[2];
}

/* The antialiased bilinear weights of output index i along a dimension
 * (ATen's _upsample_bilinear2d_aa, align_corners=False): a triangle
 * filter whose support widens by the downscale factor.  Writes at most
 * `cap` weights (normalised) and returns their count; *first is the
 * first source index. */
DLK_AUG_HD static inline int Dlk_aug_weights(int32_t in, int32_t out,
                                             int32_t i, float *wt, int cap,
                                             int32_t *first)
{
    double scale = (double)in / (double)out;
    double support = scale >= 1.0 ? scale : 1.0;
    double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
    double center = scale * (i + 0.5);
    int32_t xmin = (int32_t)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int32_t xmax = (int32_t)(center + support + 0.5);
    if (xmax > in) xmax = in;
    int n = xmax - xmin;
    if (n > cap) n = cap;
    double tot = 0;
    for (int j = 0; j < n; j++) {
        double x = ((double)(j + xmin) - center + 0.5) * inv;
        double w = x < 0 ? 1.0 + x : 1.0 - x;
        if (w < 0) w = 0;
        wt[j] = (float)w;
        tot += w;
    }
    for (int j = 0; j < n; j++)
        wt[j] = tot > 0 ? (float)(wt[j] / tot) : 0.0f;
    *first = xmin;
    return n;
}

/* float to bfloat16 / float16 bits, rounding to nearest even. */
DLK_AUG_HD static inline uint16_t Dlk_aug_bf16(float f)
{
    union { float f; uint32_t u; } v;
    v.f = f;
    if ((v.u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((v.u >> 16) | 0x40);
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

DLK_AUG_HD static inline uint16_t Dlk_aug_f16(float f)
{
    union { float f; uint32_t u; } v;
    v.f = f;
    uint32_t sign = (v.u >> 16) & 0x8000u;
    uint32_t a = v.u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) /* rounds to 65520 or more: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* subnormal half: a multiple of 2^-24 */
        union { float f; uint32_t u; } m;
        m.u = a;
        float q = m.f * 16777216.0f; /* exact */
        return (uint16_t)(sign | (uint32_t)rintf(q));
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

#endif
