/* fuzz_image.c - libFuzzer target for the image decoders: any bytes
 * through Dlk_decode_image (sniff, JPEG, PNG, resize) must give DLK_OK
 * with a buffer of exactly the shape's size, or an error status with a
 * message, never a crash, leak or sanitizer report.  A decoded image is
 * written back as PNG and must decode to the same pixels. */
#include "media/decode.h"

#include <stdlib.h>
#include <string.h>

static void check(bool cond)
{
    if (!cond)
        abort();
}

static void one(const uint8_t *p, size_t n, const Dlk_image_opts *o)
{
    Dlk_decoded d;
    dlk_error err = {0};
    dlk_status st = Dlk_decode_image(p, n, "fuzz", o, &d, &err);
    if (st) {
        check(err.msg[0] != '\0');
        return;
    }
    check(d.ndim == 3 && d.dtype == DLK_U8);
    check((size_t)(d.shape[0] * d.shape[1] * d.shape[2]) == d.data.len);
    if (!o->chw && d.data.len <= 1 << 20) {
        Dlk_buf png;
        Dlk_buf_init(&png);
        check(Dlk_png_encode(d.data.data, (int)d.shape[1], (int)d.shape[0],
                             (int)d.shape[2], &png, &err) == DLK_OK);
        Dlk_image_opts same = {0};
        same.channels = (int)d.shape[2];
        Dlk_decoded back;
        check(Dlk_decode_image(png.data, png.len, "png", &same, &back,
                               &err) == DLK_OK);
        check(back.data.len == d.data.len &&
              memcmp(back.data.data, d.data.data, d.data.len) == 0);
        Dlk_buf_free(&back.data);
        Dlk_buf_free(&png);
    }
    Dlk_buf_free(&d.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Dlk_image_opts o = {0};
    o.max_pixels = 1 << 22;
    one(data, size, &o);
    o.width = 33, o.height = 17, o.channels = 1, o.fit = DLK_FIT_CROP;
    one(data, size, &o);
    o.width = 8, o.height = 40, o.channels = 4, o.fit = DLK_FIT_PAD;
    o.chw = true;
    one(data, size, &o);
    /* RGB: a colour JPEG goes through its YCbCr planes (resample.c) */
    o.width = 57, o.height = 23, o.channels = 3, o.fit = DLK_FIT_STRETCH;
    o.chw = false;
    one(data, size, &o);
    return 0;
}
