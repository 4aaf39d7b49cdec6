/* fuzz_video.c - libFuzzer target for the video decoder: any bytes
 * through Dlk_decode_video (custom AVIOContext, every demuxer and decoder
 * it allows, frame sampling, resize) must give DLK_OK with [T,H,W,C] of
 * exactly the buffer's size, or an error status with a message, never a
 * crash, leak, hang or sanitizer report. */
#include "media/decode.h"

#include <stdlib.h>

static void one(const uint8_t *p, size_t n, const Dlk_video_opts *o)
{
    Dlk_decoded d;
    dlk_error err = {0};
    dlk_status st = Dlk_decode_video(p, n, "fuzz", o, &d, &err);
    if (st) {
        if (!err.msg[0])
            abort();
        return;
    }
    if (d.ndim != 4 || d.shape[0] < 1 ||
        (size_t)(d.shape[0] * d.shape[1] * d.shape[2] * d.shape[3]) !=
            d.data.len)
        abort();
    Dlk_buf_free(&d.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Dlk_video_opts o = {0};
    o.image.max_pixels = 1 << 20;
    o.image.width = 32, o.image.height = 24;
    o.max_frames = 64;
    o.frames = 3;
    one(data, size, &o);
    o.frames = 0, o.fps = 4, o.clip_seconds = 1;
    o.image.fit = DLK_FIT_PAD, o.image.channels = 1;
    one(data, size, &o);
    return 0;
}
