/* nomedia.c - the media decoders in a build without them (make MEDIA=0):
 * a streaming-only dlk for GPU nodes, which need none of FFmpeg,
 * libjpeg-turbo or libpng.  Every entry point says so clearly. */
#ifdef DLK_NO_MEDIA
#include "media/decode.h"

static dlk_status no_media(const char *name, dlk_error *err)
{
    return Dlk_fail(err, DLK_EUNSUPPORTED, "'%s': this dlk was built "
                    "without media decoders (make MEDIA=1)", name);
}

Dlk_media Dlk_media_sniff(const uint8_t *p, size_t n)
{
    (void)p;
    (void)n;
    return DLK_MEDIA_UNKNOWN;
}

dlk_status Dlk_decode_image(const uint8_t *p, size_t n, const char *name,
                            const Dlk_image_opts *o, Dlk_decoded *out,
                            dlk_error *err)
{
    (void)p; (void)n; (void)o; (void)out;
    return no_media(name, err);
}

dlk_status Dlk_decode_image_reuse(const uint8_t *p, size_t n,
                                  const char *name, const Dlk_image_opts *o,
                                  Dlk_decoded *out, dlk_error *err)
{
    (void)p; (void)n; (void)o; (void)out;
    return no_media(name, err);
}

dlk_status Dlk_decode_video(const uint8_t *p, size_t n, const char *name,
                            const Dlk_video_opts *o, Dlk_decoded *out,
                            dlk_error *err)
{
    (void)p; (void)n; (void)o; (void)out;
    return no_media(name, err);
}

dlk_status Dlk_png_encode(const uint8_t *pixels, int w, int h, int c,
                          Dlk_buf *out, dlk_error *err)
{
    (void)pixels; (void)w; (void)h; (void)c; (void)out;
    return no_media("png", err);
}

dlk_status dlk_png_from_sample(const dlk_sample *s, int frame, int chw,
                               void **png, size_t *len, dlk_error *err)
{
    (void)s; (void)frame; (void)chw;
    *png = NULL;
    *len = 0;
    return no_media("png", err);
}
#endif
