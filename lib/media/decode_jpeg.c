/* decode_jpeg.c - JPEG through the TurboJPEG 2.x API: baseline and
 * progressive, gray, YCbCr, CMYK and YCCK; EXIF orientation applied; the
 * size checked from the header before anything is allocated.  A libjpeg
 * warning is an error (a truncated file decodes to grey with only a
 * warning; a bad Huffman code or a marker inside the data garbles it),
 * except extraneous bytes before a marker, which cameras and editors
 * write and libjpeg skips, losing nothing: between the header's segments
 * (the file is decoded again without them, since TurboJPEG reports only
 * the first warning of a call and a later one must not hide behind
 * them) or right before EOI. */
#include "media/decode.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

typedef struct jpeg_meta {
    int orientation; /* EXIF 1..8; 1 when absent or invalid */
    bool adobe;      /* an Adobe APP14 marker: CMYK stored inverted */
} jpeg_meta;

/* Walk the marker segments before the first SOS (bounded by n). */
static jpeg_meta scan_markers(const uint8_t *p, size_t n)
{
    jpeg_meta m = {1, false};
    size_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xFF) { /* extraneous bytes: skipped, as libjpeg does */
            i++;
            continue;
        }
        uint8_t mk = p[i + 1];
        if (mk == 0xFF || mk == 0x00) { /* fill byte; a stuffed 0xFF */
            i += mk ? 1 : 2;
            continue;
        }
        if (mk == 0xDA || mk == 0xD9)
            break;
        size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
        if (len < 2 || i + 2 + len > n)
            break;
        const uint8_t *s = p + i + 4;
        size_t sn = len - 2;
        if (mk == 0xE1 && sn >= 6 && memcmp(s, "Exif\0\0", 6) == 0)
            m.orientation = Dlk_exif_orientation(s + 6, sn - 6);
        else if (mk == 0xEE && sn >= 5 && memcmp(s, "Adobe", 5) == 0)
            m.adobe = true;
        i += 2 + len;
    }
    return m;
}

/* The smallest TurboJPEG scaling factor of 1/2 or less that keeps at
 * least `min` of the size; {1,1} when none does.  Only 1/2, 1/4 and 1/8
 * have SIMD IDCTs: the others (7/8 ... 3/8) measured slower than a full
 * decode (500x375 at 5/8: 0.45 ms against 0.32 ms). */
static tjscalingfactor pick_scale(double min)
{
    tjscalingfactor best = {1, 1};
    int n = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&n);
    for (int i = 0; sf && i < n; i++) {
        double f = (double)sf[i].num / sf[i].denom;
        if (f <= 0.5 && f >= min && (sf[i].num == 1) &&
            f < (double)best.num / best.denom)
            best = sf[i];
    }
    return best;
}

/* CMYK (inverted when Adobe wrote it) to RGB, as Pillow converts it:
 * R = (255-C)(255-K)/255 rounded, in place to 3 channels. */
static void cmyk_to_rgb(Dlk_image *im, bool inverted)
{
    size_t n = (size_t)im->w * im->h;
    uint8_t *s = im->px, *d = im->px;
    for (size_t i = 0; i < n; i++, s += 4, d += 3) {
        unsigned k = inverted ? s[3] : 255u - s[3];
        for (int j = 0; j < 3; j++) {
            unsigned c = inverted ? s[j] : 255u - s[j];
            unsigned t = c * k + 128;
            d[j] = (uint8_t)(((t >> 8) + t) >> 8);
        }
    }
    im->c = 3;
}

/* Extraneous bytes before a marker: libjpeg skips them and loses
 * nothing.  TurboJPEG reports only the first warning of a call, so one
 * of these may hide a later one that does lose data; see junk_ok. */
static bool junk_warning(tjhandle tj)
{
    return tjGetErrorCode(tj) == TJERR_WARNING &&
           strstr(tjGetErrorStr2(tj), "extraneous bytes before marker");
}

/* p without the extraneous bytes between its marker segments before the
 * first SOS, where cameras and editors leave them (in *out_n bytes); NULL
 * when there are none there (or no memory). */
static uint8_t *strip_header_junk(const uint8_t *p, size_t n, size_t *out_n)
{
    uint8_t *q = malloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, 2);
    size_t i = 2, k = 2;
    bool stripped = false;
    while (i + 4 <= n) {
        if (p[i] != 0xFF || p[i + 1] == 0x00) { /* junk, as libjpeg sees it */
            i += p[i] == 0xFF ? 2 : 1;
            stripped = true;
            continue;
        }
        uint8_t mk = p[i + 1];
        size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
        if (mk == 0xFF) {
            q[k++] = p[i++];
            continue;
        }
        if (mk == 0xDA || mk == 0xD9 || len < 2 || i + 2 + len > n)
            break;
        memcpy(q + k, p + i, 2 + len);
        k += 2 + len;
        i += 2 + len;
    }
    if (!stripped) {
        free(q);
        return NULL;
    }
    memcpy(q + k, p + i, n - i);
    *out_n = k + n - i;
    return q;
}

/* Junk that libjpeg reported after the header is stripped: accepted only
 * right before EOI, where no image data follows that a hidden warning
 * could concern. */
static bool junk_ok(tjhandle tj)
{
    return junk_warning(tj) &&
           strstr(tjGetErrorStr2(tj), "before marker 0xd9") != NULL;
}

static dlk_status jpeg_decode(const uint8_t *p, size_t n, const char *name,
                              const Dlk_image_opts *o, Dlk_image *out,
                              dlk_error *err, bool stripped);

/* Decode p again without the junk of its header (once). */
static dlk_status decode_stripped(const uint8_t *p, size_t n,
                                  const char *name, const Dlk_image_opts *o,
                                  Dlk_image *out, dlk_error *err)
{
    size_t m;
    uint8_t *q = strip_header_junk(p, n, &m);
    if (!q)
        return Dlk_fail(err, DLK_EDECODE, "cannot decode JPEG '%s': "
                        "corrupt data: extraneous bytes between image data",
                        name);
    dlk_status st = jpeg_decode(q, m, name, o, out, err, true);
    free(q);
    return st;
}

dlk_status Dlk_jpeg_decode(const uint8_t *p, size_t n, const char *name,
                           const Dlk_image_opts *o, Dlk_image *out,
                           dlk_error *err)
{
    return jpeg_decode(p, n, name, o, out, err, false);
}

/* How one JPEG is decoded: what its header says, and the output's
 * format and size. */
typedef struct jpeg_plan {
    int w, h, subsamp, cs; /* from the header */
    jpeg_meta m;
    bool cmyk;
    bool ycc;    /* planes as stored, for the resizer to convert */
    int pf;      /* TurboJPEG pixel format when not ycc */
    int sw, sh;  /* the decoded (scaled) size */
    size_t bytes; /* the pixel buffer */
} jpeg_plan;

/* The thread's decompressor, taken while in use, or a new one. */
static dlk_status take_decompressor(Dlk_scratch *scr, const char *name,
                                    tjhandle *out, dlk_error *err)
{
    tjhandle tj = scr ? scr->tj : NULL;
    if (scr)
        scr->tj = NULL;
    if (!tj && !(tj = tjInitDecompress()))
        return Dlk_fail(err, DLK_ENOMEM, "cannot decode JPEG '%s': %s", name,
                        tjGetErrorStr2(NULL));
    *out = tj;
    return DLK_OK;
}

/* Given back only after a clean decode, so an error never leaves a
 * handle in an odd state for the next image. */
static void give_back_decompressor(Dlk_scratch *scr, tjhandle tj, bool clean)
{
    if (clean && scr && !scr->tj)
        scr->tj = tj;
    else
        tjDestroy(tj);
}

/* The Y, Cb and Cr planes of a ycc decode in out (pw, ph, ps) and their
 * bytes in *bytes; false when TurboJPEG's planes would not hold the
 * image's extent. */
static bool lay_out_planes(Dlk_image *out, int sw, int sh, int subsamp,
                           size_t *bytes)
{
    bool ok = true;
    *bytes = 0;
    /* planes are padded to whole MCUs: allocate that much, but keep
     * the image's own extent (the chroma of an odd width rounded up) */
    int sx = tjMCUWidth[subsamp] / 8, sy = tjMCUHeight[subsamp] / 8;
    for (int i = 0; i < 3; i++) {
        int aw = tjPlaneWidth(i, sw, subsamp),
            ah = tjPlaneHeight(i, sh, subsamp);
        out->pw[i] = i ? (sw + sx - 1) / sx : sw;
        out->ph[i] = i ? (sh + sy - 1) / sy : sh;
        out->ps[i] = (aw + 63) & ~63;
        *bytes += (size_t)out->ps[i] * (size_t)(ah > 0 ? ah : 0);
        ok &= aw >= out->pw[i] && ah >= out->ph[i] && out->pw[i] > 0 &&
              out->ph[i] > 0;
    }
    return ok;
}

/* The output's format and size from the header (pl->w .. pl->cs) and the
 * target; sets out->c (and out's plane layout for ycc). */
static void plan_decode(const uint8_t *p, size_t n, const Dlk_image_opts *o,
                        jpeg_plan *pl, Dlk_image *out)
{
    int cs = pl->cs, subsamp = pl->subsamp;
    pl->m = scan_markers(p, n);
    pl->cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    /* Gray only from a gray JPEG: from colour, Pillow's luma of the
     * (clipped) RGB is what users compare with, not the JPEG's Y. */
    int want = o->channels ? o->channels : 3;
    pl->pf = pl->cmyk ? TJPF_CMYK
             : want == 1 && cs == TJCS_GRAY ? TJPF_GRAY : TJPF_RGB;
    /* Decode at 1/2, 1/4 or 1/8 size when the target needs no more:
     * the scaled IDCT is cheaper than decoding all and resizing, and
     * keeps what the area resizer would keep. */
    bool swap = pl->m.orientation >= 5;
    double min = Dlk_resize_min_scale(swap ? pl->h : pl->w,
                                      swap ? pl->w : pl->h, o);
    tjscalingfactor sf = pick_scale(min);
    pl->sw = TJSCALED(pl->w, sf);
    pl->sh = TJSCALED(pl->h, sf);
    /* A colour JPEG on its way to a smaller RGB image: keep the planes as
     * they are stored and let the resizer upsample chroma and convert to
     * RGB at the target size (about a third of the time of RGB decode +
     * split + resize for 500x375 -> 224x224). */
    pl->ycc = !pl->cmyk && cs == TJCS_YCbCr && want == 3 &&
              pl->m.orientation == 1 && subsamp >= 0 &&
              subsamp < TJ_NUMSAMP && subsamp != TJSAMP_GRAY &&
              Dlk_resize_scales(pl->sw, pl->sh, o) &&
              /* a scaled RGB decode gets chroma from IDCT scaling at
               * the luma's size, sharper than these planes would give */
              (sf.num == sf.denom || subsamp == TJSAMP_444);
    if (pl->ycc)
        pl->ycc = lay_out_planes(out, pl->sw, pl->sh, subsamp, &pl->bytes);
    if (!pl->ycc)
        pl->bytes = (size_t)pl->sw * pl->sh * tjPixelSize[pl->pf];
    out->c = pl->ycc ? 3 : tjPixelSize[pl->pf];
}

/* out->px: the thread's pixel scratch when it fits (nothing rotates
 * them), else a buffer of its own. */
static dlk_status alloc_pixels(Dlk_scratch *scr, const jpeg_plan *pl,
                               const char *name, Dlk_image *out,
                               dlk_error *err)
{
    out->px = scr && pl->m.orientation == 1
                  ? Dlk_scratch_block(&scr->pixels, pl->bytes) : NULL;
    out->borrowed = out->px != NULL;
    if (!out->px)
        out->px = malloc(pl->bytes);
    if (!out->px)
        return Dlk_fail(err, DLK_ENOMEM, "cannot decode JPEG '%s': cannot "
                        "allocate %dx%d pixels", name, pl->sw, pl->sh);
    out->w = pl->sw;
    out->h = pl->sh;
    return DLK_OK;
}

/* TurboJPEG's decode into out->px, as planes or packed pixels; its
 * status (non-zero on an error or a warning). */
static int decompress(tjhandle tj, const uint8_t *p, size_t n,
                      const jpeg_plan *pl, Dlk_image *out)
{
    int sw = pl->sw, sh = pl->sh, subsamp = pl->subsamp;
    if (!pl->ycc)
        return tjDecompress2(tj, p, (unsigned long)n, out->px, sw, 0, sh,
                             pl->pf, 0);
    out->ycc = true;
    out->plane[0] = out->px;
    out->plane[1] = out->plane[0] +
                    (size_t)out->ps[0] * tjPlaneHeight(0, sh, subsamp);
    out->plane[2] = out->plane[1] +
                    (size_t)out->ps[1] * tjPlaneHeight(1, sh, subsamp);
    return tjDecompressToYUVPlanes(tj, p, (unsigned long)n, out->plane, sw,
                                   out->ps, sh, 0);
}

static dlk_status jpeg_decode(const uint8_t *p, size_t n, const char *name,
                              const Dlk_image_opts *o, Dlk_image *out,
                              dlk_error *err, bool stripped)
{
    memset(out, 0, sizeof *out);
    if (n > ULONG_MAX || n > INT_MAX)
        return Dlk_fail(err, DLK_ELIMIT, "cannot decode JPEG '%s': %zu bytes "
                        "is too large", name, n);
    Dlk_scratch *scr = Dlk_scratch_get();
    tjhandle tj = NULL;
    dlk_status st = take_decompressor(scr, name, &tj, err);
    if (st)
        return st;
    bool tj_clean = false, strip = false;
    jpeg_plan pl = {0}; /* a tables-only JPEG sets none of the header's */
    int rc;
    /* a warning fails the header call too: junk between the header's
     * segments, decoded again without it so that a warning about the
     * image data cannot hide behind it */
    if (tjDecompressHeader3(tj, p, (unsigned long)n, &pl.w, &pl.h,
                            &pl.subsamp, &pl.cs)) {
        if (junk_warning(tj) && !stripped) {
            strip = true;
            goto done;
        }
        st = Dlk_fail(err, DLK_EDECODE, "cannot decode JPEG '%s': %s", name,
                      tjGetErrorStr2(tj));
        goto done;
    }
    if ((st = Dlk_check_pixels((uint64_t)pl.w, (uint64_t)pl.h, o, name, err)))
        goto done;
    plan_decode(p, n, o, &pl, out);
    if ((st = alloc_pixels(scr, &pl, name, out, err)))
        goto done;
    rc = decompress(tj, p, n, &pl, out);
    if (rc && !junk_ok(tj)) {
        st = Dlk_fail(err, DLK_EDECODE, "cannot decode JPEG '%s': %s%s", name,
                      tjGetErrorCode(tj) == TJERR_WARNING ? "corrupt data: "
                                                          : "",
                      tjGetErrorStr2(tj));
        goto done;
    }
    tj_clean = rc == 0;
    if (pl.cmyk)
        cmyk_to_rgb(out, pl.m.adobe);
    if (pl.m.orientation > 1)
        st = Dlk_image_orient(out, pl.m.orientation, err);
done:
    give_back_decompressor(scr, tj, tj_clean);
    if (st)
        Dlk_image_free(out);
    if (strip)
        st = decode_stripped(p, n, name, o, out, err);
    return st;
}
