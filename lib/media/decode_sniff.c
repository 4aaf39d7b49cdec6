/* decode_sniff.c - what a source object is, from its first bytes (never
 * from its key's extension), and the image entry point that dispatches on
 * it. */
#include "media/decode.h"
#include "util/bytes.h"

#include <string.h>

static bool has(const uint8_t *p, size_t n, size_t off, const char *sig,
                size_t len)
{
    return n >= off + len && memcmp(p + off, sig, len) == 0;
}

/* MPEG transport stream: a 0x47 sync byte every `pkt` bytes from `off`,
 * three times (or as often as the object is long, at least twice). */
static bool ts_sync(const uint8_t *p, size_t n, size_t off, size_t pkt)
{
    int seen = 0;
    for (size_t i = off; i < n && seen < 3; i += pkt, seen++)
        if (p[i] != 0x47)
            return false;
    return seen >= 2;
}

/* ISO BMFF ("ftyp" at 4): video unless the major brand is a still-image
 * one (HEIF, AVIF), which FFmpeg does not decode as images. */
static bool bmff_video(const uint8_t *p, size_t n)
{
    static const char *const still[] = {"heic", "heix", "mif1", "msf1",
                                        "avif", "heim", "heis"};
    if (n < 12)
        return true;
    for (size_t i = 0; i < sizeof still / sizeof *still; i++)
        if (memcmp(p + 8, still[i], 4) == 0)
            return false;
    return true;
}

Dlk_media Dlk_media_sniff(const uint8_t *p, size_t n)
{
    if (!p || n < 3)
        return DLK_MEDIA_UNKNOWN;
    if (p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
        return DLK_MEDIA_JPEG;
    if (has(p, n, 0, "\x89PNG\r\n\x1a\n", 8))
        return DLK_MEDIA_PNG;
    if (has(p, n, 4, "ftyp", 4))
        return bmff_video(p, n) ? DLK_MEDIA_VIDEO : DLK_MEDIA_UNKNOWN;
    /* QuickTime files from before "ftyp": a top-level atom first. */
    if (n >= 8 && Dlk_get_le32(p) != 0 &&
        (has(p, n, 4, "moov", 4) || has(p, n, 4, "mdat", 4) ||
         has(p, n, 4, "wide", 4) || has(p, n, 4, "free", 4)))
        return DLK_MEDIA_VIDEO;
    if (has(p, n, 0, "\x1a\x45\xdf\xa3", 4) ||          /* Matroska, WebM */
        (has(p, n, 0, "RIFF", 4) && has(p, n, 8, "AVI ", 4)) ||
        has(p, n, 0, "OggS", 4) ||                       /* Ogg (Theora) */
        has(p, n, 0, "FLV\x01", 4) ||
        has(p, n, 0, "\x30\x26\xb2\x75\x8e\x66\xcf\x11", 8) || /* ASF/WMV */
        has(p, n, 0, "\x00\x00\x01\xba", 4) ||           /* MPEG-PS */
        has(p, n, 0, "\x00\x00\x01\xb3", 4) ||           /* MPEG-1/2 video */
        has(p, n, 0, "DKIF", 4) ||                       /* IVF: VP8/9, AV1 */
        has(p, n, 0, "YUV4MPEG2 ", 10) ||
        has(p, n, 0, "GIF87a", 6) || has(p, n, 0, "GIF89a", 6))
        return DLK_MEDIA_VIDEO;
    /* H.264 Annex B starting with an SPS, HEVC with a VPS. */
    if (has(p, n, 0, "\x00\x00\x00\x01", 4) && n > 5 &&
        ((p[4] & 0x1f) == 7 || (p[4] == 0x40 && p[5] == 0x01)))
        return DLK_MEDIA_VIDEO;
    if (n > 188 && ts_sync(p, n, 0, 188))
        return DLK_MEDIA_VIDEO;
    if (n > 196 && ts_sync(p, n, 4, 192))                /* M2TS */
        return DLK_MEDIA_VIDEO;
    return DLK_MEDIA_UNKNOWN;
}

dlk_status Dlk_decode_image(const uint8_t *p, size_t n, const char *name,
                            const Dlk_image_opts *o, Dlk_decoded *out,
                            dlk_error *err)
{
    memset(out, 0, sizeof *out);
    Dlk_buf_init(&out->data);
    dlk_status st = Dlk_decode_image_reuse(p, n, name, o, out, err);
    if (st)
        Dlk_buf_free(&out->data);
    return st;
}

dlk_status Dlk_decode_image_reuse(const uint8_t *p, size_t n,
                                  const char *name, const Dlk_image_opts *o,
                                  Dlk_decoded *out, dlk_error *err)
{
    static const Dlk_image_opts defaults;
    if (!o)
        o = &defaults;
    Dlk_buf keep = out->data;
    memset(out, 0, sizeof *out);
    out->data = keep;
    out->data.len = 0;
    if (!name)
        name = "(image)";
    int dw, dh;
    dlk_status st = Dlk_resize_dims(1, 1, o, &dw, &dh, err);
    if (st) {
        Dlk_fail_wrap(err, "cannot decode image '%s'", name);
        return st;
    }
    Dlk_image im = {0};
    switch (Dlk_media_sniff(p, n)) {
    case DLK_MEDIA_JPEG:
        st = Dlk_jpeg_decode(p, n, name, o, &im, err);
        break;
    case DLK_MEDIA_PNG:
        st = Dlk_png_decode(p, n, name, o, &im, err);
        break;
    case DLK_MEDIA_VIDEO:
        return Dlk_fail(err, DLK_EDECODE,
                        "cannot decode image '%s': it is a video", name);
    default:
        return Dlk_fail(err, DLK_EDECODE,
                        "cannot decode image '%s': %s", name,
                        n ? "not a JPEG or PNG file" : "empty object");
    }
    if (st)
        return st;
    st = Dlk_image_finish_reuse(&im, o, out, err);
    if (st)
        Dlk_fail_wrap(err, "cannot decode image '%s'", name);
    Dlk_image_free(&im);
    return st;
}
