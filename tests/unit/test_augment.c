/* test_augment.c - the loader's augmentation: specs (presets, fields, a
 * bad field named), each sample's parameters a pure function of (seed,
 * epoch, row) inside the image, other epochs other crops, the pixels
 * against a direct reference (the antialiased triangle filter written
 * out in double, torchvision's definition), flips, normalisation and the
 * half-precision roundings. */
#include "unit.h"
#include "loader/augment.h"

#include <math.h>

static bool parse_fails(const char *spec, const char *needle)
{
    Dlk_aug_spec s;
    dlk_error e = {0};
    dlk_status st = Dlk_aug_parse(spec, &s, &e);
    return st == DLK_EINVAL && strstr(e.msg, needle) != NULL;
}

static void test_specs(void)
{
    Dlk_aug_spec s;
    dlk_error e = {0};
    UNIT_CHECK("imagenet-train parses",
               Dlk_aug_parse("imagenet-train", &s, &e) == DLK_OK &&
                   s.mode == DLK_AUG_RANDOM_CROP && s.out_h == 224 &&
                   s.hflip && s.dtype == DLK_AUG_BF16 &&
                   s.layout == DLK_AUG_NCHW && s.normalize);
    UNIT_CHECK("imagenet-eval parses",
               Dlk_aug_parse("imagenet-eval", &s, &e) == DLK_OK &&
                   s.mode == DLK_AUG_CENTER && s.resize == 256 &&
                   !s.hflip);
    UNIT_CHECK("fields override a preset",
               Dlk_aug_parse("imagenet-train,dtype=f16,layout=nhwc,crop=96",
                             &s, &e) == DLK_OK &&
                   s.dtype == DLK_AUG_F16 && s.layout == DLK_AUG_NHWC &&
                   s.out_w == 96);
    UNIT_CHECK("the full field list parses",
               Dlk_aug_parse("crop=224,scale=0.08:1,ratio=0.75:1.3333,flip=hv,"
                             "jitter=0.4:0.4:0.4,normalize=0.5:0.5:0.5/0.2:0.2:"
                             "0.2,dtype=f32,layout=nchw",
                             &s, &e) == DLK_OK &&
                   s.vflip && s.jitter[2] == 0.4 && s.std[1] == 0.2f);
    UNIT_CHECK("bad scale names scale", parse_fails("crop=224,scale=0:2", "scale"));
    UNIT_CHECK("bad ratio names ratio", parse_fails("crop=224,ratio=2:1", "ratio"));
    UNIT_CHECK("bad dtype names dtype", parse_fails("crop=8,dtype=f64", "dtype"));
    UNIT_CHECK("bad layout names layout", parse_fails("crop=8,layout=chw", "layout"));
    UNIT_CHECK("bad flip names flip", parse_fails("crop=8,flip=x", "flip"));
    UNIT_CHECK("bad jitter names jitter", parse_fails("crop=8,jitter=1:2", "jitter"));
    UNIT_CHECK("bad normalize names normalize",
               parse_fails("crop=8,dtype=f32,normalize=1:2:3", "normalize"));
    UNIT_CHECK("u8 with normalize refused",
               parse_fails("crop=8,normalize=imagenet", "normalize"));
    UNIT_CHECK("unknown field named", parse_fails("crop=8,zoom=2", "zoom"));
    UNIT_CHECK("crop required", parse_fails("flip=h", "crop"));
    UNIT_CHECK("bad crop names crop", parse_fails("crop=0", "crop"));
    UNIT_CHECK("resize below the crop refused",
               parse_fails("crop=224,resize=200", "resize"));
    UNIT_CHECK("preset only first", parse_fails("crop=8,imagenet-train", "preset"));
}

static void test_params(void)
{
    Dlk_aug_spec s;
    dlk_error e = {0};
    Dlk_aug_parse("imagenet-train,jitter=0.4:0.4:0.4", &s, &e);
    bool inside = true, same = true, differ = false, flips[2] = {0};
    double area_sum = 0;
    int n = 20000;
    for (int r = 0; r < n; r++) {
        int32_t H = 100 + r % 300, W = 80 + (r * 7) % 400;
        Dlk_aug_params a, b, c;
        Dlk_aug_params_for(&s, 42, 3, (uint64_t)r, H, W, &a);
        Dlk_aug_params_for(&s, 42, 3, (uint64_t)r, H, W, &b);
        Dlk_aug_params_for(&s, 42, 4, (uint64_t)r, H, W, &c);
        inside &= a.top >= 0 && a.left >= 0 && a.h >= 1 && a.w >= 1 &&
                  a.top + a.h <= H && a.left + a.w <= W &&
                  a.bright >= 0.6f && a.bright <= 1.4f;
        same &= !memcmp(&a, &b, sizeof a);
        differ |= a.top != c.top || a.h != c.h || a.left != c.left;
        flips[a.hflip] = true;
        area_sum += (double)a.h * a.w / ((double)H * W);
    }
    UNIT_CHECK("crops lie inside the image", inside);
    UNIT_CHECK("same (seed, epoch, row): same parameters", same);
    UNIT_CHECK("another epoch: other crops", differ);
    UNIT_CHECK("both flips drawn", flips[0] && flips[1]);
    /* scale is U(0.08,1), but large areas at a ratio far from the
     * image's fall outside and are drawn again: torchvision's algorithm
     * gives a mean area fraction of 0.37 over these shapes (0.373 from
     * Python's random module), not 0.54 */
    double mean = area_sum / n;
    UNIT_CHECK("mean crop area near torchvision's 0.37",
               mean > 0.35 && mean < 0.40);
    Dlk_aug_parse("imagenet-eval", &s, &e);
    Dlk_aug_params p;
    Dlk_aug_params_for(&s, 1, 0, 0, 375, 500, &p);
    UNIT_CHECK("eval: shorter side 256, center crop",
               p.rh == 256 && p.rw == 341 && p.oy == 16 && p.ox == 58 &&
                   p.h == 375 && p.w == 500);
}

/* torchvision's antialiased bilinear weight of source index j for output
 * index i, written out (support = max(scale, 1)). */
static double ref_weight(int in, int out, int i, int j, double *norm)
{
    double scale = (double)in / out;
    double support = scale >= 1 ? scale : 1;
    double inv = scale >= 1 ? 1 / scale : 1;
    double center = scale * (i + 0.5);
    int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in) hi = in;
    double tot = 0, w = 0;
    for (int k = lo; k < hi; k++) {
        double t = 1 - fabs((k - center + 0.5) * inv);
        t = t > 0 ? t : 0;
        tot += t;
        if (k == j)
            w = t;
    }
    *norm = tot;
    return w;
}

static void test_pixels(void)
{
    int H = 37, W = 53, C = 3;
    uint8_t *src = malloc((size_t)H * W * C);
    for (int i = 0; i < H * W * C; i++)
        src[i] = (uint8_t)((i * 2654435761u) >> 24);
    Dlk_aug_spec s;
    dlk_error e = {0};
    Dlk_aug_parse("crop=16x20,dtype=f32,layout=nchw,flip=h", &s, &e);
    float *out = malloc(sizeof(float) * 16 * 20 * 3);
    double worst = 0;
    for (int row = 0; row < 40; row++) {
        Dlk_aug_params p;
        Dlk_aug_params_for(&s, 7, 0, (uint64_t)row, H, W, &p);
        Dlk_aug_image_cpu(&s, &p, src, H, W, C, out);
        for (int oy = 0; oy < 16; oy++)
            for (int ox = 0; ox < 20; ox++)
                for (int c = 0; c < 3; c++) {
                    int sx = p.hflip ? 19 - ox : ox;
                    double a = 0, ny, nx;
                    for (int y = 0; y < p.h; y++) {
                        double wy = ref_weight(p.h, 16, oy, y, &ny);
                        if (wy == 0)
                            continue;
                        for (int x = 0; x < p.w; x++) {
                            double wx = ref_weight(p.w, 20, sx, x, &nx);
                            a += wy / ny * wx / nx *
                                 src[((p.top + y) * W + p.left + x) * C + c];
                        }
                    }
                    double got = out[c * 320 + oy * 20 + ox] * 255.0;
                    if (fabs(got - a) > worst)
                        worst = fabs(got - a);
                }
    }
    UNIT_CHECK("resampled crops match the reference within 0.01/255",
               worst < 0.01);

    /* the whole image at its own size, no flip: the same bytes back */
    Dlk_aug_parse("size=37x53", &s, &e);
    uint8_t *id = malloc((size_t)H * W * C);
    Dlk_aug_params p;
    Dlk_aug_params_for(&s, 7, 0, 0, H, W, &p);
    Dlk_aug_image_cpu(&s, &p, src, H, W, C, id);
    UNIT_CHECK("identity resize returns the bytes",
               !memcmp(id, src, (size_t)H * W * C));
    /* normalisation on the 0..1 scale, bf16 */
    Dlk_aug_parse("size=37x53,dtype=f32,normalize=imagenet", &s, &e);
    float *nf = malloc(sizeof(float) * H * W * C);
    Dlk_aug_image_cpu(&s, &p, src, H, W, C, nf);
    bool norm_ok = true;
    for (int i = 0; i < H * W * C; i++) {
        float want = (src[i] / 255.0f - s.mean[i % 3]) / s.std[i % 3];
        norm_ok &= fabsf(nf[i] - want) < 1e-4f;
    }
    UNIT_CHECK("normalize: (x/255 - mean) / std", norm_ok);
    free(nf);
    free(id);
    free(out);
    free(src);
}

static void test_halves(void)
{
    UNIT_CHECK("bf16 of 1", Dlk_aug_bf16(1.0f) == 0x3f80);
    /* 1 + 2^-8 is halfway between bf16 1 and 1+2^-7: even is 1 */
    UNIT_CHECK("bf16 ties to even (down)", Dlk_aug_bf16(1.00390625f) == 0x3f80);
    UNIT_CHECK("bf16 ties to even (up)", Dlk_aug_bf16(1.01171875f) == 0x3f82);
    UNIT_CHECK("f16 of 1", Dlk_aug_f16(1.0f) == 0x3c00);
    UNIT_CHECK("f16 of -2", Dlk_aug_f16(-2.0f) == 0xc000);
    /* 1 + 2^-11 is halfway between f16 1 and 1+2^-10 */
    UNIT_CHECK("f16 ties to even", Dlk_aug_f16(1.00048828125f) == 0x3c00);
    UNIT_CHECK("f16 rounds up past half",
               Dlk_aug_f16(1.00048828125f + 1e-6f) == 0x3c01);
    UNIT_CHECK("f16 overflow is infinity", Dlk_aug_f16(70000.0f) == 0x7c00);
    UNIT_CHECK("f16 subnormal", Dlk_aug_f16(5.9604645e-8f) == 0x0001);
    UNIT_CHECK("f16 65504", Dlk_aug_f16(65504.0f) == 0x7bff);
}

int main(void)
{
    test_specs();
    test_params();
    test_pixels();
    test_halves();
    return unit_done();
}
