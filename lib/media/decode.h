/* decode.h - raw media to tensors of their final shape: the decoders that
 * ingest runs once per object (JPEG through TurboJPEG, PNG through libpng,
 * video through libavformat/libavcodec, resizing in resample.c), and
 * the PNG writer behind `dlk cat --png`.  Pure functions of their input
 * bytes: thread-safe, no I/O, every size checked before it is allocated. */
#ifndef DLK_DECODE_H
#define DLK_DECODE_H

#include "util/error.h"
#include "util/buf.h"
#include "media/resample.h"

/* dlk_fit: how an image reaches its final size (dlk.h). */

typedef struct Dlk_image_opts {
    int width, height;    /* target size; 0x0 keeps each image's own */
    dlk_fit fit;
    int channels;         /* 1 (gray), 3 (RGB) or 4 (RGBA); 0 = 3 */
    bool chw;             /* layout [C,H,W] instead of [H,W,C] */
    uint64_t max_pixels;  /* refuse sources with more pixels (0: 2^28) */
} Dlk_image_opts;

typedef struct Dlk_video_opts {
    Dlk_image_opts image; /* per frame */
    int frames;           /* sample this many frames uniformly (0: use fps) */
    double fps;           /* or sample at this rate ... */
    double clip_seconds;  /* ... for this long from the start (0: whole) */
    int max_frames;       /* refuse clips longer than this (0: 4096) */
} Dlk_video_opts;

/* A decoded sample: u8 elements in data (owned; free with Dlk_buf_free). */
typedef struct Dlk_decoded {
    dlk_dtype dtype;
    int ndim;
    int64_t shape[DLK_MAX_NDIM];
    Dlk_buf data;
} Dlk_decoded;

/* What the bytes are, from their first bytes (not the key's extension). */
typedef enum Dlk_media {
    DLK_MEDIA_UNKNOWN = 0, DLK_MEDIA_JPEG, DLK_MEDIA_PNG, DLK_MEDIA_VIDEO
} Dlk_media;
Dlk_media Dlk_media_sniff(const uint8_t *p, size_t n);

/* JPEG or PNG (sniffed) to [H,W,C] (or [C,H,W]) u8.  JPEG: baseline,
 * progressive, grayscale and CMYK converted to `channels`, EXIF orientation
 * applied.  PNG: palette, gray, 16-bit, alpha, interlaced.  Errors are
 * DLK_EDECODE (or DLK_ELIMIT past max_pixels) naming `name`. */
dlk_status Dlk_decode_image(const uint8_t *p, size_t n, const char *name,
                            const Dlk_image_opts *o, Dlk_decoded *out,
                            dlk_error *err);
/* The same into out->data's memory (see Dlk_image_finish_reuse): ingest
 * keeps one buffer for each row in flight instead of one per image. */
dlk_status Dlk_decode_image_reuse(const uint8_t *p, size_t n,
                                  const char *name, const Dlk_image_opts *o,
                                  Dlk_decoded *out, dlk_error *err);

/* A video container's first video stream to [T,H,W,C] u8 frames. */
dlk_status Dlk_decode_video(const uint8_t *p, size_t n, const char *name,
                            const Dlk_video_opts *o, Dlk_decoded *out,
                            dlk_error *err);

/* Encode WxH pixels of c channels (1, 3 or 4; u8, [H,W,C]) as PNG. */
dlk_status Dlk_png_encode(const uint8_t *pixels, int w, int h, int c,
                          Dlk_buf *out, dlk_error *err);

/* ---- shared by the decoders (lib/media/decode_*.c, resize.c) ------- */

#define DLK_DEFAULT_MAX_PIXELS (UINT64_C(1) << 28)
#define DLK_DEFAULT_MAX_FRAMES 4096

/* A packed image: h rows of w pixels of c (1..4) u8 channels (c 2 is
 * gray+alpha), no padding.  px is malloc'd and owned (or borrowed); free with
 * Dlk_image_free (which accepts a zeroed struct). */
typedef struct Dlk_image {
    int w, h, c;
    uint8_t *px;
    bool borrowed;  /* px is the thread's scratch: not freed */
    /* Or (ycc set, c 3): a JPEG's Y, Cb and Cr planes as decoded, before
     * chroma upsampling and colour conversion, which then happen once at
     * the target size.  plane[i] points into px; pw x ph pixels, stride
     * ps.  Only made when the image will be scaled (see Dlk_jpeg_decode). */
    bool ycc;
    uint8_t *plane[3];
    int pw[3], ph[3], ps[3];
} Dlk_image;
void Dlk_image_free(Dlk_image *im);

/* DLK_ELIMIT naming `name` when w*h is over o->max_pixels (0: 2^28). */
dlk_status Dlk_check_pixels(uint64_t w, uint64_t h, const Dlk_image_opts *o,
                            const char *name, dlk_error *err);

/* The decoders proper: to a Dlk_image at the source size (JPEG: or a
 * TurboJPEG scaled size no smaller than the target needs), orientation
 * applied, with 1, 2, 3 or 4 channels (what is cheapest on the way to
 * o->channels).  DLK_EDECODE / DLK_ELIMIT naming `name`.  A JPEG's pixels
 * may be the thread's scratch (im->borrowed): use them before the next
 * decode on the same thread. */
dlk_status Dlk_jpeg_decode(const uint8_t *p, size_t n, const char *name,
                           const Dlk_image_opts *o, Dlk_image *out,
                           dlk_error *err);
dlk_status Dlk_png_decode(const uint8_t *p, size_t n, const char *name,
                          const Dlk_image_opts *o, Dlk_image *out,
                          dlk_error *err);

/* decode_exif.c.  The EXIF Orientation (1..8; 1 when absent or invalid)
 * of a TIFF block of n bytes ("II*\0" or "MM\0*", optionally after
 * "Exif\0\0"): a JPEG's APP1 payload, a PNG's eXIf chunk. */
int Dlk_exif_orientation(const uint8_t *tiff, size_t n);
/* Turn im (packed, not ycc) upright for orientation o (2..8; others do
 * nothing) into a new buffer. */
dlk_status Dlk_image_orient(Dlk_image *im, int o, dlk_error *err);

/* resize.c.  The output size for an sw x sh source: the target, or the
 * source's own without one.  DLK_EINVAL if only one of width and height
 * is set or the channels are not 0, 1, 3 or 4. */
dlk_status Dlk_resize_dims(int sw, int sh, const Dlk_image_opts *o, int *dw,
                           int *dh, dlk_error *err);
/* The smallest uniform scale of an sw x sh source that still gives the
 * resizer every pixel it needs (1 or more: no reduction possible). */
double Dlk_resize_min_scale(int sw, int sh, const Dlk_image_opts *o);
/* 1 when an sw x sh source is scaled (not only placed) on its way to
 * the target of o. */
bool Dlk_resize_scales(int sw, int sh, const Dlk_image_opts *o);
/* Convert src's channels to o->channels, fit it into dw x dh as o->fit
 * says (resample.c), and write it at dst (dw*dh*channels bytes) as [H,W,C]
 * or, with o->chw, [C,H,W]. */
dlk_status Dlk_resize_into(const Dlk_image *src, const Dlk_image_opts *o,
                           int dw, int dh, uint8_t *dst, dlk_error *err);
/* Dlk_resize_into a freshly allocated out of its final shape. */
dlk_status Dlk_image_finish(const Dlk_image *src, const Dlk_image_opts *o,
                            Dlk_decoded *out, dlk_error *err);
/* The same into out->data's memory (zeroed, or kept from an earlier call;
 * grown when short, and the caller's to free even on error). */
dlk_status Dlk_image_finish_reuse(const Dlk_image *src,
                                  const Dlk_image_opts *o, Dlk_decoded *out,
                                  dlk_error *err);
/* Gray from RGB as Pillow's convert('L') does (ITU-R 601-2 luma). */
static inline uint8_t Dlk_luma(unsigned r, unsigned g, unsigned b)
{
    return (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}
/* What a decoding thread keeps between images (decode_scratch.c). */
#define DLK_SCRATCH_ALIGN 64
typedef struct Dlk_scratch_mem {
    uint8_t *mem;
    size_t cap;
} Dlk_scratch_mem;
/* A resize filter kept while the sizes repeat. */
typedef struct Dlk_scratch_filter {
    Dlk_scratch_mem mem;
    Dlk_rs_filter f; /* f.n_in 0: none */
} Dlk_scratch_filter;
#define DLK_SCRATCH_FILTERS 4 /* a JPEG's luma and chroma, two axes each */
typedef struct Dlk_scratch {
    void *tj;                 /* tjhandle; destroyed after an error */
    Dlk_scratch_mem pixels; /* a decoded image (Dlk_image.px) */
    Dlk_scratch_mem planes; /* resize input and output planes */
    Dlk_scratch_filter filters[DLK_SCRATCH_FILTERS];
    unsigned next_filter;   /* the one replaced next */
} Dlk_scratch;
/* This thread's scratch, or NULL when there is no memory. */
Dlk_scratch *Dlk_scratch_get(void);
/* b's memory, grown to at least bytes (aligned); NULL past 32 MiB (blocks
 * that large are not kept: allocate them on their own) or without
 * memory. */
uint8_t *Dlk_scratch_block(Dlk_scratch_mem *b, size_t bytes);

#endif
