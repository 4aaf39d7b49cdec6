/* augment.c - the augmentation spec: presets and fields. */
#include "augment.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float imnet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imnet_std[3] = {0.229f, 0.224f, 0.225f};

static void defaults(Dlk_aug_spec *s)
{
    memset(s, 0, sizeof *s);
    s->mode = DLK_AUG_RESIZE;
    s->scale_lo = 0.08;
    s->scale_hi = 1.0;
    s->ratio_lo = 3.0 / 4.0;
    s->ratio_hi = 4.0 / 3.0;
    s->dtype = DLK_AUG_U8;
    s->layout = DLK_AUG_NHWC;
    for (int k = 0; k < 3; k++)
        s->std[k] = 1.0f;
}

static void imagenet(Dlk_aug_spec *s, bool train)
{
    s->mode = train ? DLK_AUG_RANDOM_CROP : DLK_AUG_CENTER;
    s->out_h = s->out_w = 224;
    s->resize = 256;
    s->hflip = train;
    s->normalize = 1;
    memcpy(s->mean, imnet_mean, sizeof s->mean);
    memcpy(s->std, imnet_std, sizeof s->std);
    s->dtype = DLK_AUG_BF16;
    s->layout = DLK_AUG_NCHW;
}

/* n numbers separated by sep, each finite. */
static bool numbers(const char *v, char sep, double *out, int n)
{
    const char *p = v;
    for (int i = 0; i < n; i++) {
        char *e;
        out[i] = strtod(p, &e);
        if (e == p || !isfinite(out[i]))
            return false;
        if (i + 1 < n) {
            if (*e != sep)
                return false;
            p = e + 1;
        } else if (*e) {
            return false;
        }
    }
    return true;
}

static bool size_field(const char *v, uint32_t *h, uint32_t *w)
{
    char *e;
    unsigned long a = strtoul(v, &e, 10), b = a;
    if (e == v)
        return false;
    if (*e == 'x') {
        const char *q = e + 1;
        b = strtoul(q, &e, 10);
        if (e == q)
            return false;
    }
    if (*e || a < 1 || b < 1 || a > 16384 || b > 16384)
        return false;
    *h = (uint32_t)a;
    *w = (uint32_t)b;
    return true;
}

/* flip=none|h|v|hv */
static bool flip_field(Dlk_aug_spec *s, const char *v)
{
    if (!strcmp(v, "none"))
        s->hflip = s->vflip = 0;
    else if (!strcmp(v, "h"))
        s->hflip = 1, s->vflip = 0;
    else if (!strcmp(v, "v"))
        s->hflip = 0, s->vflip = 1;
    else if (!strcmp(v, "hv") || !strcmp(v, "vh"))
        s->hflip = s->vflip = 1;
    else
        return false;
    return true;
}

/* normalize=none|imagenet|M:M:M/S:S:S (a mean and a positive std per
 * channel).  A bad value may leave some channels set: the spec is then
 * not used. */
static bool normalize_field(Dlk_aug_spec *s, const char *v)
{
    if (!strcmp(v, "none")) {
        s->normalize = 0;
        return true;
    }
    if (!strcmp(v, "imagenet")) {
        s->normalize = 1;
        memcpy(s->mean, imnet_mean, sizeof s->mean);
        memcpy(s->std, imnet_std, sizeof s->std);
        return true;
    }
    double d[6];
    char m[128];
    const char *sl = strchr(v, '/');
    if (!sl || (size_t)(sl - v) >= sizeof m)
        return false;
    memcpy(m, v, (size_t)(sl - v));
    m[sl - v] = 0;
    if (!numbers(m, ':', d, 3) || !numbers(sl + 1, ':', d + 3, 3))
        return false;
    for (int i = 0; i < 3; i++) {
        if (d[3 + i] <= 0)
            return false;
        s->mean[i] = (float)d[i];
        s->std[i] = (float)d[3 + i];
    }
    s->normalize = 1;
    return true;
}

static dlk_status field(Dlk_aug_spec *s, const char *k, const char *v,
                        bool *crop_set, dlk_error *err)
{
    double d[6];
    if (!strcmp(k, "crop")) {
        if (!size_field(v, &s->out_h, &s->out_w))
            goto bad;
        *crop_set = true;
        if (s->mode == DLK_AUG_RESIZE)
            s->mode = DLK_AUG_RANDOM_CROP;
    } else if (!strcmp(k, "size")) {
        if (!size_field(v, &s->out_h, &s->out_w))
            goto bad;
        *crop_set = true;
        s->mode = DLK_AUG_RESIZE;
    } else if (!strcmp(k, "resize")) {
        uint32_t h, w;
        if (!size_field(v, &h, &w) || h != w)
            goto bad;
        s->resize = h;
        s->mode = DLK_AUG_CENTER;
    } else if (!strcmp(k, "scale")) {
        if (!numbers(v, ':', d, 2) || d[0] <= 0 || d[0] > d[1] || d[1] > 1)
            goto bad;
        s->scale_lo = d[0];
        s->scale_hi = d[1];
    } else if (!strcmp(k, "ratio")) {
        if (!numbers(v, ':', d, 2) || d[0] <= 0 || d[0] > d[1])
            goto bad;
        s->ratio_lo = d[0];
        s->ratio_hi = d[1];
    } else if (!strcmp(k, "flip")) {
        if (!flip_field(s, v))
            goto bad;
    } else if (!strcmp(k, "jitter")) {
        if (!numbers(v, ':', d, 3) || d[0] < 0 || d[1] < 0 || d[2] < 0)
            goto bad;
        memcpy(s->jitter, d, sizeof s->jitter);
    } else if (!strcmp(k, "normalize")) {
        if (!normalize_field(s, v))
            goto bad;
    } else if (!strcmp(k, "dtype")) {
        if (!strcmp(v, "u8")) s->dtype = DLK_AUG_U8;
        else if (!strcmp(v, "f16")) s->dtype = DLK_AUG_F16;
        else if (!strcmp(v, "bf16")) s->dtype = DLK_AUG_BF16;
        else if (!strcmp(v, "f32")) s->dtype = DLK_AUG_F32;
        else goto bad;
    } else if (!strcmp(k, "layout")) {
        if (!strcmp(v, "nhwc")) s->layout = DLK_AUG_NHWC;
        else if (!strcmp(v, "nchw")) s->layout = DLK_AUG_NCHW;
        else goto bad;
    } else {
        return Dlk_fail(err, DLK_EINVAL, "augment: unknown field '%s'", k);
    }
    return DLK_OK;
bad:
    return Dlk_fail(err, DLK_EINVAL, "augment: bad value '%s' for field '%s'",
                    v, k);
}

dlk_status Dlk_aug_parse(const char *text, Dlk_aug_spec *out, dlk_error *err)
{
    Dlk_aug_spec s;
    defaults(&s);
    if (!text || !*text)
        return Dlk_fail(err, DLK_EINVAL, "augment: empty spec");
    char buf[1024];
    if (strlen(text) >= sizeof buf)
        return Dlk_fail(err, DLK_EINVAL, "augment: spec longer than %zu",
                        sizeof buf - 1);
    strcpy(buf, text);
    bool crop_set = false;
    char *save = NULL;
    int i = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save), i++) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            if (i == 0 && !strcmp(tok, "imagenet-train")) {
                imagenet(&s, true);
                crop_set = true;
                continue;
            }
            if (i == 0 && !strcmp(tok, "imagenet-eval")) {
                imagenet(&s, false);
                crop_set = true;
                continue;
            }
            return Dlk_fail(err, DLK_EINVAL,
                            "augment: '%s' is neither field=value nor a "
                            "preset (imagenet-train, imagenet-eval) first",
                            tok);
        }
        *eq = 0;
        dlk_status st = field(&s, tok, eq + 1, &crop_set, err);
        if (st)
            return st;
    }
    if (!crop_set)
        return Dlk_fail(err, DLK_EINVAL,
                        "augment: field 'crop' (or 'size') is required");
    if (s.mode == DLK_AUG_CENTER &&
        (s.resize < s.out_h || s.resize < s.out_w))
        return Dlk_fail(err, DLK_EINVAL,
                        "augment: field 'resize' (%u) smaller than the crop",
                        s.resize);
    if (s.normalize && s.dtype == DLK_AUG_U8)
        return Dlk_fail(err, DLK_EINVAL,
                        "augment: field 'normalize' needs dtype f16, bf16 "
                        "or f32");
    *out = s;
    return DLK_OK;
}

uint64_t Dlk_aug_out_bytes(const Dlk_aug_spec *sp, uint32_t c)
{
    static const unsigned el[] = {1, 2, 2, 4};
    return (uint64_t)sp->out_h * sp->out_w * c * el[sp->dtype];
}
