/* decode.h - raw media to tensors of their final shape: the decoders that
 * ingest runs once per object (JPEG through TurboJPEG, PNG through libpng,
 * video through libavformat/libavcodec, resizing through libswscale), and
 * the PNG writer behind `dlk cat --png`.  Pure functions of their input
 * bytes: thread-safe, no I/O, every size checked before it is allocated. */
#ifndef DLK_DECODE_H
#define DLK_DECODE_H

#include "internal.h"

typedef enum dlk_fit {
    DLK_FIT_STRETCH = 0, /* scale to WxH, ignoring the aspect ratio */
    DLK_FIT_CROP = 1,    /* scale to cover WxH, cut the centre */
    DLK_FIT_PAD = 2      /* scale to fit inside WxH, pad with zeros */
} dlk_fit;

typedef struct dlk_image_opts {
    int width, height;    /* target size; 0x0 keeps each image's own */
    dlk_fit fit;
    int channels;         /* 1 (gray), 3 (RGB) or 4 (RGBA); 0 = 3 */
    bool chw;             /* layout [C,H,W] instead of [H,W,C] */
    uint64_t max_pixels;  /* refuse sources with more pixels (0: 2^28) */
} dlk_image_opts;

typedef struct dlk_video_opts {
    dlk_image_opts image; /* per frame */
    int frames;           /* sample this many frames uniformly (0: use fps) */
    double fps;           /* or sample at this rate ... */
    double clip_seconds;  /* ... for this long from the start (0: whole) */
    int max_frames;       /* refuse clips longer than this (0: 4096) */
} dlk_video_opts;

/* A decoded sample: u8 elements in data (owned; free with dlk_buf_free). */
typedef struct dlk_decoded {
    dlk_dtype dtype;
    int ndim;
    int64_t shape[DLK_MAX_NDIM];
    dlk_buf data;
} dlk_decoded;

/* What the bytes are, from their first bytes (not the key's extension). */
typedef enum dlk_media {
    DLK_MEDIA_UNKNOWN = 0, DLK_MEDIA_JPEG, DLK_MEDIA_PNG, DLK_MEDIA_VIDEO
} dlk_media;
dlk_media dlk_media_sniff(const uint8_t *p, size_t n);

/* JPEG or PNG (sniffed) to [H,W,C] (or [C,H,W]) u8.  JPEG: baseline,
 * progressive, grayscale and CMYK converted to `channels`, EXIF orientation
 * applied.  PNG: palette, gray, 16-bit, alpha, interlaced.  Errors are
 * DLK_EDECODE (or DLK_ELIMIT past max_pixels) naming `name`. */
dlk_status dlk_decode_image(const uint8_t *p, size_t n, const char *name,
                            const dlk_image_opts *o, dlk_decoded *out,
                            dlk_error *err);

/* A video container's first video stream to [T,H,W,C] u8 frames. */
dlk_status dlk_decode_video(const uint8_t *p, size_t n, const char *name,
                            const dlk_video_opts *o, dlk_decoded *out,
                            dlk_error *err);

/* Encode WxH pixels of c channels (1, 3 or 4; u8, [H,W,C]) as PNG. */
dlk_status dlk_png_encode(const uint8_t *pixels, int w, int h, int c,
                          dlk_buf *out, dlk_error *err);

#endif
