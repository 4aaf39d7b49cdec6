/* novideo.c - the video decoder in a build with the image decoders only
 * (make VIDEO=0): no libavformat or libavcodec, which with the codec
 * libraries they pull in are most of a media build's weight. */
#ifdef DLK_NO_VIDEO
#include "media/decode.h"

dlk_status Dlk_decode_video(const uint8_t *p, size_t n, const char *name,
                            const Dlk_video_opts *o, Dlk_decoded *out,
                            dlk_error *err)
{
    (void)p; (void)n; (void)o; (void)out;
    return Dlk_fail(err, DLK_EUNSUPPORTED, "'%s': this dlk was built "
                    "without the video decoder (make VIDEO=1)", name);
}
#endif
