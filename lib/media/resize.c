/* resize.c - a decoded image to its final shape: channel conversion,
 * stretch / crop / pad to the target size (resample.c), and the [H,W,C]
 * or [C,H,W] layout.  Channels are scaled one plane at a time, so no
 * colour conversion ever touches the values: an image that needs no
 * scaling comes out bit-exact. */
#include "media/decode.h"
#include "util/bytes.h"

#include <stdlib.h>
#include <string.h>

#define PLANE_ALIGN 64

void Dlk_image_free(Dlk_image *im)
{
    if (im) {
        if (!im->borrowed)
            free(im->px);
        memset(im, 0, sizeof *im);
    }
}

dlk_status Dlk_check_pixels(uint64_t w, uint64_t h, const Dlk_image_opts *o,
                            const char *name, dlk_error *err)
{
    uint64_t max = o && o->max_pixels ? o->max_pixels : DLK_DEFAULT_MAX_PIXELS;
    uint64_t px;
    if (!w || !h)
        return Dlk_fail(err, DLK_EDECODE, "cannot decode '%s': empty image",
                        name);
    if (!Dlk_mul_u64(w, h, &px) || px > max)
        return Dlk_fail(err, DLK_ELIMIT,
                        "cannot decode '%s': %llux%llu pixels are over the "
                        "limit of %llu", name, (unsigned long long)w,
                        (unsigned long long)h, (unsigned long long)max);
    return DLK_OK;
}

static int out_channels(const Dlk_image_opts *o)
{
    return o->channels ? o->channels : 3;
}

dlk_status Dlk_resize_dims(int sw, int sh, const Dlk_image_opts *o, int *dw,
                           int *dh, dlk_error *err)
{
    int c = out_channels(o);
    if (c != 1 && c != 3 && c != 4)
        return Dlk_fail(err, DLK_EINVAL, "channels %d: expected 1, 3 or 4",
                        o->channels);
    if (o->width < 0 || o->height < 0 || (!o->width != !o->height))
        return Dlk_fail(err, DLK_EINVAL,
                        "target size %dx%d: give both width and height, or "
                        "neither", o->width, o->height);
    if (o->fit != DLK_FIT_STRETCH && o->fit != DLK_FIT_CROP &&
        o->fit != DLK_FIT_PAD)
        return Dlk_fail(err, DLK_EINVAL, "unknown fit mode %d", (int)o->fit);
    *dw = o->width ? o->width : sw;
    *dh = o->height ? o->height : sh;
    return DLK_OK;
}

double Dlk_resize_min_scale(int sw, int sh, const Dlk_image_opts *o)
{
    if (!o->width || !o->height || sw <= 0 || sh <= 0)
        return 1.0;
    double sx = (double)o->width / sw, sy = (double)o->height / sh;
    if (o->fit == DLK_FIT_PAD)
        return sx < sy ? sx : sy;
    return sx > sy ? sx : sy;
}

/* Where the source goes: the source rectangle (x0,y0,cw,ch) is scaled to
 * the destination rectangle (ox,oy,nw,nh) of the dw x dh output. */
typedef struct geom {
    int x0, y0, cw, ch;
    int ox, oy, nw, nh;
} geom;

static int rdiv(int64_t a, int64_t b) /* a/b rounded, a,b > 0 */
{
    return (int)((2 * a + b) / (2 * b));
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static geom fit_geom(int sw, int sh, int dw, int dh, dlk_fit fit)
{
    geom g = {0, 0, sw, sh, 0, 0, dw, dh};
    int64_t a = (int64_t)sw * dh, b = (int64_t)sh * dw; /* a > b: wider */
    if (fit == DLK_FIT_CROP && a != b) {
        if (a > b) {
            g.cw = clampi(rdiv((int64_t)sh * dw, dh), 1, sw);
            g.x0 = (sw - g.cw) / 2;
        } else {
            g.ch = clampi(rdiv((int64_t)sw * dh, dw), 1, sh);
            g.y0 = (sh - g.ch) / 2;
        }
    } else if (fit == DLK_FIT_PAD && a != b) {
        if (a > b) {
            g.nh = clampi(rdiv((int64_t)sh * dw, sw), 1, dh);
            g.oy = (dh - g.nh) / 2;
        } else {
            g.nw = clampi(rdiv((int64_t)sw * dh, sh), 1, dw);
            g.ox = (dw - g.nw) / 2;
        }
    }
    return g;
}

/* One pixel of sc channels to dc channels, as Pillow's convert() does:
 * gray replicated, alpha dropped (not composited) or set opaque, RGB to
 * gray by ITU-R 601-2 luma. */
static inline void convert_px(const uint8_t *s, int sc, uint8_t *d, int dc)
{
    uint8_t r, g, b, a;
    if (sc <= 2) {
        r = g = b = s[0];
        a = sc == 2 ? s[1] : 255;
    } else {
        r = s[0], g = s[1], b = s[2];
        a = sc == 4 ? s[3] : 255;
    }
    if (dc == 1) {
        d[0] = sc <= 2 ? r : Dlk_luma(r, g, b);
    } else {
        d[0] = r, d[1] = g, d[2] = b;
        if (dc == 4)
            d[3] = a;
    }
}

/* One row of n pixels of sc channels into dc planes at offset off. */
static void split_row(const uint8_t *s, int sc, int n, uint8_t *const *pl,
                      size_t off, int dc)
{
    uint8_t *p0 = pl[0] + off;
    if (sc == dc && dc >= 3) {
        uint8_t *p1 = pl[1] + off, *p2 = pl[2] + off;
        uint8_t *p3 = dc == 4 ? pl[3] + off : NULL;
        for (int x = 0; x < n; x++, s += sc) {
            p0[x] = s[0], p1[x] = s[1], p2[x] = s[2];
            if (p3)
                p3[x] = s[3];
        }
    } else if (sc == 1 && dc == 1) {
        memcpy(p0, s, (size_t)n);
    } else if (sc >= 3 && dc == 1) {
        for (int x = 0; x < n; x++, s += sc)
            p0[x] = Dlk_luma(s[0], s[1], s[2]);
    } else {
        uint8_t px[4];
        for (int x = 0; x < n; x++, s += sc) {
            convert_px(s, sc, px, dc);
            for (int c = 0; c < dc; c++)
                pl[c][off + x] = px[c];
        }
    }
}

/* Write the nw x nh pixels of planes (dc planes, stride ps) or of packed
 * rows into dst at (ox, oy). */
static void put_planes(uint8_t *const *pl, int ps, const geom *g, int dw,
                       int dh, int dc, bool chw, uint8_t *dst)
{
    for (int y = 0; y < g->nh; y++) {
        size_t oy = (size_t)(g->oy + y);
        if (chw) {
            for (int c = 0; c < dc; c++)
                memcpy(dst + ((size_t)c * dh + oy) * dw + g->ox,
                       pl[c] + (size_t)y * ps, (size_t)g->nw);
        } else {
            uint8_t *d = dst + (oy * dw + g->ox) * dc;
            const uint8_t *p0 = pl[0] + (size_t)y * ps;
            if (dc == 1) {
                memcpy(d, p0, (size_t)g->nw);
            } else if (dc == 3) {
                const uint8_t *p1 = pl[1] + (size_t)y * ps,
                              *p2 = pl[2] + (size_t)y * ps;
                for (int x = 0; x < g->nw; x++, d += 3)
                    d[0] = p0[x], d[1] = p1[x], d[2] = p2[x];
            } else {
                for (int x = 0; x < g->nw; x++)
                    for (int c = 0; c < dc; c++)
                        *d++ = pl[c][(size_t)y * ps + x];
            }
        }
    }
}

/* No scaling: convert and place directly (exact). */
static void copy_direct(const Dlk_image *src, const geom *g, int dw, int dh,
                        int dc, bool chw, uint8_t *dst)
{
    uint8_t px[4];
    for (int y = 0; y < g->nh; y++) {
        const uint8_t *s = src->px +
            ((size_t)(g->y0 + y) * src->w + g->x0) * src->c;
        size_t oy = (size_t)(g->oy + y);
        if (!chw && src->c == dc) {
            memcpy(dst + (oy * dw + g->ox) * dc, s, (size_t)g->nw * dc);
            continue;
        }
        for (int x = 0; x < g->nw; x++, s += src->c) {
            if (chw) {
                convert_px(s, src->c, px, dc);
                for (int c = 0; c < dc; c++)
                    dst[((size_t)c * dh + oy) * dw + g->ox + x] = px[c];
            } else {
                convert_px(s, src->c, dst + (oy * dw + g->ox + x) * dc, dc);
            }
        }
    }
}

static size_t align_up(size_t v)
{
    return (v + PLANE_ALIGN - 1) & ~(size_t)(PLANE_ALIGN - 1);
}

bool Dlk_resize_scales(int sw, int sh, const Dlk_image_opts *o)
{
    int dw, dh;
    if (!o->width || !o->height || Dlk_resize_dims(sw, sh, o, &dw, &dh, NULL))
        return false;
    geom g = fit_geom(sw, sh, dw, dh, o->fit);
    return g.cw != g.nw || g.ch != g.nh;
}

/* bytes of plane memory: the thread's scratch, or, past what it keeps, a
 * block of its own in *own for the caller to free.  *scr NULL (and NULL
 * returned) when there is no memory at all. */
static uint8_t *plane_mem(size_t bytes, Dlk_scratch **scr, uint8_t **own)
{
    *own = NULL;
    if (!(*scr = Dlk_scratch_get()))
        return NULL;
    uint8_t *m = Dlk_scratch_block(&(*scr)->planes, bytes);
    if (m)
        return m;
    return *own = aligned_alloc(PLANE_ALIGN, align_up(bytes));
}

/* The thread's n_in -> n_out filter, built when it has none; never in
 * the slot of `keep` (a filter the caller still holds).  NULL without
 * memory. */
static const Dlk_rs_filter *filter_for(Dlk_scratch *scr, int n_in, int n_out,
                                       const Dlk_rs_filter *keep)
{
    for (int i = 0; i < DLK_SCRATCH_FILTERS; i++) {
        Dlk_scratch_filter *c = &scr->filters[i];
        if (c->f.n_in == n_in && c->f.n_out == n_out)
            return &c->f;
    }
    Dlk_scratch_filter *c;
    do
        c = &scr->filters[scr->next_filter++ % DLK_SCRATCH_FILTERS];
    while (&c->f == keep);
    c->f.n_in = 0;
    size_t bytes = Dlk_rs_filter_size(n_in, n_out);
    void *m = bytes ? Dlk_scratch_block(&c->mem, bytes) : NULL;
    if (!m)
        return NULL;
    Dlk_rs_filter_build(n_in, n_out, m, &c->f);
    return &c->f;
}

/* Both filters for cw x ch -> nw x nh, or DLK_ENOMEM. */
static dlk_status filters_for(Dlk_scratch *scr, int cw, int ch, int nw,
                              int nh, const Dlk_rs_filter **fx,
                              const Dlk_rs_filter **fy, dlk_error *err)
{
    *fy = filter_for(scr, ch, nh, NULL);
    *fx = *fy ? filter_for(scr, cw, nw, *fy) : NULL;
    if (!*fx)
        return Dlk_fail(err, DLK_ENOMEM, "cannot allocate the filters to "
                        "resize %dx%d to %dx%d", cw, ch, nw, nh);
    return DLK_OK;
}

static dlk_status scale(const Dlk_image *src, const geom *g, int dw, int dh,
                        int dc, bool chw, uint8_t *dst, dlk_error *err)
{
    size_t is = align_up((size_t)g->cw), os = align_up((size_t)g->nw);
    size_t in_sz = align_up(is * (size_t)g->ch),
           out_sz = align_up(os * (size_t)g->nh),
           tmp_sz = align_up(Dlk_rs_tmp_elems(g->cw, g->nh) * 2),
           q_sz = align_up(Dlk_rs_out_elems(g->nw, g->nh) * 2);
    size_t bytes = (in_sz + out_sz) * dc + tmp_sz + q_sz;
    Dlk_scratch *scr;
    uint8_t *own, *mem = plane_mem(bytes, &scr, &own);
    if (!mem)
        return Dlk_fail(err, DLK_ENOMEM, "cannot allocate resize planes");
    const Dlk_rs_filter *fx, *fy;
    dlk_status st = filters_for(scr, g->cw, g->ch, g->nw, g->nh, &fx, &fy,
                                err);
    if (st) {
        free(own);
        return st;
    }
    uint8_t *in[4], *outp[4];
    for (int c = 0; c < dc; c++) {
        in[c] = mem + (size_t)c * in_sz;
        outp[c] = mem + (size_t)dc * in_sz + (size_t)c * out_sz;
    }
    uint16_t *tmp = (uint16_t *)(mem + (in_sz + out_sz) * dc),
             *q = (uint16_t *)((uint8_t *)tmp + tmp_sz);
    for (int y = 0; y < g->ch; y++)
        split_row(src->px + ((size_t)(g->y0 + y) * src->w + g->x0) * src->c,
                  src->c, g->cw, in, (size_t)y * is, dc);
    size_t qs = Dlk_rs_out_stride(g->nw);
    for (int c = 0; c < dc; c++) {
        Dlk_rs_plane(in[c], is, fy, fx, tmp, q);
        for (int y = 0; y < g->nh; y++)
            Dlk_rs_to_u8(q + (size_t)y * qs, outp[c] + (size_t)y * os, g->nw);
    }
    put_planes(outp, (int)os, g, dw, dh, dc, chw, dst);
    free(own);
    return DLK_OK;
}

/* The crop rectangle of g in the coordinates of a pw x ph plane of a
 * w x h image (chroma planes are subsampled): edges rounded to the
 * nearest plane pixel, so a centred crop stays centred. */
static void plane_rect(const geom *g, int w, int h, int pw, int ph, int *x0,
                       int *y0, int *cw, int *ch)
{
    int64_t a = ((int64_t)g->x0 * pw * 2 + w) / (2 * w),
            b = ((int64_t)g->y0 * ph * 2 + h) / (2 * h),
            e = ((int64_t)(g->x0 + g->cw) * pw * 2 + w) / (2 * w),
            f = ((int64_t)(g->y0 + g->ch) * ph * 2 + h) / (2 * h);
    if (e > pw)
        e = pw;
    if (f > ph)
        f = ph;
    if (a > e - 1)
        a = e - 1;
    if (b > f - 1)
        b = f - 1;
    *x0 = (int)a, *y0 = (int)b, *cw = (int)(e - a), *ch = (int)(f - b);
}

/* A JPEG's planes to RGB at the target: each plane scaled on its own
 * (chroma from its subsampled size, so it is upsampled only once), then
 * converted at the target size: a quarter of the colour conversions of
 * decoding to RGB first for 500x375 -> 224x224, and no split into
 * planes. */
static dlk_status scale_ycc(const Dlk_image *src, const geom *g, int dw,
                            int dh, bool chw, uint8_t *dst, dlk_error *err)
{
    int x0[3], y0[3], cw[3], ch[3];
    size_t tmp_sz = 0, q_sz = align_up(Dlk_rs_out_elems(g->nw, g->nh) * 2);
    for (int i = 0; i < 3; i++) {
        plane_rect(g, src->w, src->h, src->pw[i], src->ph[i], &x0[i], &y0[i],
                   &cw[i], &ch[i]);
        size_t t = align_up(Dlk_rs_tmp_elems(cw[i], g->nh) * 2);
        tmp_sz = t > tmp_sz ? t : tmp_sz;
    }
    Dlk_scratch *scr;
    uint8_t *own, *mem = plane_mem(tmp_sz + 3 * q_sz, &scr, &own);
    if (!mem)
        return Dlk_fail(err, DLK_ENOMEM, "cannot allocate resize planes");
    uint16_t *tmp = (uint16_t *)mem, *q[3];
    for (int i = 0; i < 3; i++) {
        q[i] = (uint16_t *)(mem + tmp_sz + (size_t)i * q_sz);
        const Dlk_rs_filter *fx, *fy;
        dlk_status st = filters_for(scr, cw[i], ch[i], g->nw, g->nh, &fx,
                                    &fy, err);
        if (st) {
            free(own);
            return st;
        }
        Dlk_rs_plane(src->plane[i] + (size_t)y0[i] * src->ps[i] + x0[i],
                     (size_t)src->ps[i], fy, fx, tmp, q[i]);
    }
    size_t qs = Dlk_rs_out_stride(g->nw), plane = (size_t)dw * dh;
    for (int y = 0; y < g->nh; y++) {
        size_t at = (size_t)(g->oy + y) * dw + g->ox, in = (size_t)y * qs;
        if (chw)
            Dlk_rs_ycc_row(q[0] + in, q[1] + in, q[2] + in, g->nw, dst + at,
                           dst + plane + at, dst + 2 * plane + at, NULL);
        else
            Dlk_rs_ycc_row(q[0] + in, q[1] + in, q[2] + in, g->nw, NULL,
                           NULL, NULL, dst + at * 3);
    }
    free(own);
    return DLK_OK;
}

dlk_status Dlk_resize_into(const Dlk_image *src, const Dlk_image_opts *o,
                           int dw, int dh, uint8_t *dst, dlk_error *err)
{
    int dc = out_channels(o);
    if (src->w <= 0 || src->h <= 0 || src->c < 1 || src->c > 4 || dw <= 0 ||
        dh <= 0 || (dc != 1 && dc != 3 && dc != 4))
        return Dlk_fail(err, DLK_EINVAL, "cannot resize %dx%dx%d to %dx%dx%d",
                        src->w, src->h, src->c, dw, dh, dc);
    geom g = fit_geom(src->w, src->h, dw, dh, o->fit);
    if (g.nw != dw || g.nh != dh)
        memset(dst, 0, (size_t)dw * dh * dc);
    if (src->ycc) {
        if (dc != 3 || (g.cw == g.nw && g.ch == g.nh))
            return Dlk_fail(err, DLK_EINTERNAL, "YCbCr planes need scaling "
                            "to 3 channels");
        return scale_ycc(src, &g, dw, dh, o->chw, dst, err);
    }
    if (g.cw == g.nw && g.ch == g.nh) {
        copy_direct(src, &g, dw, dh, dc, o->chw, dst);
        return DLK_OK;
    }
    return scale(src, &g, dw, dh, dc, o->chw, dst, err);
}

dlk_status Dlk_image_finish(const Dlk_image *src, const Dlk_image_opts *o,
                            Dlk_decoded *out, dlk_error *err)
{
    memset(out, 0, sizeof *out);
    Dlk_buf_init(&out->data);
    dlk_status st = Dlk_image_finish_reuse(src, o, out, err);
    if (st)
        Dlk_buf_free(&out->data);
    return st;
}

dlk_status Dlk_image_finish_reuse(const Dlk_image *src,
                                  const Dlk_image_opts *o, Dlk_decoded *out,
                                  dlk_error *err)
{
    int dw, dh, dc = out_channels(o);
    dlk_status st = Dlk_resize_dims(src->w, src->h, o, &dw, &dh, err);
    if (st)
        return st;
    out->data.len = 0;
    size_t bytes = (size_t)dw * dh * dc;
    if ((st = Dlk_buf_reserve(&out->data, bytes, err)))
        return st;
    if ((st = Dlk_resize_into(src, o, dw, dh, out->data.data, err)))
        return st;
    out->data.len = bytes;
    out->dtype = DLK_U8;
    out->ndim = 3;
    int64_t hwc[3] = {dh, dw, dc}, chw[3] = {dc, dh, dw};
    memcpy(out->shape, o->chw ? chw : hwc, sizeof hwc);
    return DLK_OK;
}
