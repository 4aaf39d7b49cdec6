/* png_write.c - pixels to a PNG in memory (libpng), and the public
 * dlk_png_from_sample behind `dlk cat --png`. */
#include "media/decode.h"

#include "media/png_jump.h"

#include <stdlib.h>
#include <string.h>

void Dlk_png_on_error(png_structp png, png_const_charp msg)
{
    Dlk_png_jump *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    longjmp(j->jb, 1);
}

void Dlk_png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

typedef struct wjob {
    Dlk_png_jump jump; /* first: libpng's error pointer */
    Dlk_buf *out;
    dlk_error oom;
} wjob;

static void on_write(png_structp png, png_bytep d, size_t len)
{
    wjob *j = png_get_io_ptr(png);
    if (Dlk_buf_append(j->out, d, len, &j->oom))
        png_error(png, j->oom.msg);
}

static void on_flush(png_structp png)
{
    (void)png;
}

static void write_png(wjob *j, png_structp png, png_infop info,
                      const uint8_t *px, int w, int h, int c)
{
    static const int types[] = {0, PNG_COLOR_TYPE_GRAY,
                                PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                PNG_COLOR_TYPE_RGB_ALPHA};
    png_set_write_fn(png, j, on_write, on_flush);
    png_set_compression_level(png, 6);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, types[c],
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++)
        png_write_row(png, px + (size_t)y * w * c);
    png_write_end(png, info);
}

dlk_status Dlk_png_encode(const uint8_t *pixels, int w, int h, int c,
                          Dlk_buf *out, dlk_error *err)
{
    if (w <= 0 || h <= 0 || w > 0x7fffffff / 4 || c < 1 || c > 4)
        return Dlk_fail(err, DLK_EINVAL, "cannot write PNG of %dx%d pixels "
                        "of %d channels", w, h, c);
    wjob *j = calloc(1, sizeof *j);
    if (!j)
        return Dlk_oom(err);
    j->out = out;
    dlk_status st = DLK_OK;
    png_structp png = png_create_write_struct(
        PNG_LIBPNG_VER_STRING, j, Dlk_png_on_error, Dlk_png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        st = Dlk_fail(err, DLK_ENOMEM, "cannot write PNG: out of memory");
    } else if (setjmp(j->jump.jb)) {
        st = Dlk_fail(err, j->oom.code ? j->oom.code : DLK_EINTERNAL,
                      "cannot write PNG: %s", j->jump.msg);
    } else {
        write_png(j, png, info, pixels, w, h, c);
    }
    png_destroy_write_struct(png ? &png : NULL, info ? &info : NULL);
    free(j);
    return st;
}

static bool is_channels(int64_t c)
{
    return c == 1 || c == 3 || c == 4;
}

dlk_status dlk_png_from_sample(const dlk_sample *s, int frame, int chw,
                               void **png, size_t *len, dlk_error *err)
{
    *png = NULL;
    *len = 0;
    if (s->dtype != DLK_U8)
        return Dlk_fail(err, DLK_EINVAL, "not an image: dtype %s (PNG needs "
                        "u8)", dlk_dtype_name(s->dtype));
    int nd = s->ndim;
    const int64_t *sh = s->shape;
    int64_t t = 1;
    if (nd == 4) {
        t = sh[0];
        sh++, nd--;
        if (frame < 0)
            return Dlk_fail(err, DLK_EINVAL, "a clip of %lld frames: choose "
                            "one (frame 0 to %lld)", (long long)t,
                            (long long)t - 1);
        if (frame >= t)
            return Dlk_fail(err, DLK_EINVAL, "no frame %d: the clip has %lld "
                            "(0 to %lld)", frame, (long long)t,
                            (long long)t - 1);
    } else if (frame > 0) {
        return Dlk_fail(err, DLK_EINVAL, "no frame %d: not a clip (shape of "
                        "%d dimensions)", frame, s->ndim);
    }
    int64_t h, w, c;
    bool planar;
    if (nd == 2) {
        h = sh[0], w = sh[1], c = 1, planar = false;
    } else if (nd == 3) {
        planar = chw > 0 || (chw < 0 && !is_channels(sh[2]) &&
                             is_channels(sh[0]));
        c = planar ? sh[0] : sh[2];
        h = planar ? sh[1] : sh[0];
        w = planar ? sh[2] : sh[1];
    } else {
        return Dlk_fail(err, DLK_EINVAL, "not an image: %d dimensions "
                        "(expected [H,W,C], [C,H,W] or [T,H,W,C])", s->ndim);
    }
    if (!is_channels(c) || h <= 0 || w <= 0 || h > 1 << 24 || w > 1 << 24)
        return Dlk_fail(err, DLK_EINVAL, "not an image: %lldx%lld pixels of "
                        "%lld channels (expected 1, 3 or 4)", (long long)h,
                        (long long)w, (long long)c);
    size_t fbytes = (size_t)(h * w * c);
    if (s->nbytes != fbytes * (size_t)t || !s->data)
        return Dlk_fail(err, DLK_EINVAL, "sample of %zu bytes does not match "
                        "its shape", s->nbytes);
    const uint8_t *src = (const uint8_t *)s->data +
                         fbytes * (size_t)(frame > 0 ? frame : 0);
    uint8_t *tmp = NULL;
    if (planar) {
        if (!(tmp = malloc(fbytes)))
            return Dlk_oom(err);
        size_t plane = (size_t)(h * w);
        for (size_t i = 0; i < plane; i++)
            for (int64_t k = 0; k < c; k++)
                tmp[i * c + k] = src[k * plane + i];
        src = tmp;
    }
    Dlk_buf b;
    Dlk_buf_init(&b);
    dlk_status st = Dlk_png_encode(src, (int)w, (int)h, (int)c, &b, err);
    free(tmp);
    if (st) {
        Dlk_buf_free(&b);
        return st;
    }
    *png = b.data;
    *len = b.len;
    return DLK_OK;
}
