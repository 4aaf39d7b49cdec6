/* test_decode.c - the media decoders (lib/media/decode_*.c, resize.c,
 * resample.c, png_write.c).  Hand-made inputs always; with DLK_MEDIA_DIR (set by
 * tests/t/t200-decode.sh after tests/fixtures/make_media.sh and Pillow's
 * reference decodes, NAME.MODE.ref: u32 LE width, height, then pixels)
 * the generated fixtures too. */
#include "media/decode.h"
#include "unit.h"
#include "util/bytes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *media;
static char name[1024];

/* cond is evaluated before the name's arguments (which may show what
 * the call in cond set). */
#define CHECKF(cond, ...)                                                  \
    do {                                                                   \
        bool cond_ = (cond);                                               \
        snprintf(name, sizeof name, __VA_ARGS__);                          \
        UNIT_CHECK(name, cond_);                                           \
    } while (0)

static uint8_t *slurp(const char *file, size_t *n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", media, file);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(p, 1, (size_t)len, f);
    fclose(f);
    return p;
}

static Dlk_image_opts img_opts(int c)
{
    Dlk_image_opts o = {0};
    o.channels = c;
    return o;
}

static int px_at(const Dlk_decoded *d, int y, int x, int c)
{
    int64_t w = d->shape[1], ch = d->shape[2];
    return d->data.data[((size_t)y * w + x) * ch + c];
}

/* ---- against Pillow -------------------------------------------------- */

static void vs_pillow(const char *file, const char *mode, int c, int tol)
{
    char ref[256];
    size_t n, rn;
    snprintf(ref, sizeof ref, "%s.%s.ref", file, mode);
    uint8_t *p = slurp(file, &n), *r = slurp(ref, &rn);
    if (!p || !r || rn < 8) {
        CHECKF(false, "pillow %s %s: fixture and reference present", file, mode);
        free(p), free(r);
        return;
    }
    uint32_t rw = Dlk_get_le32(r), rh = Dlk_get_le32(r + 4);
    Dlk_image_opts o = img_opts(c);
    Dlk_decoded d;
    dlk_error err = {0};
    dlk_status st = Dlk_decode_image(p, n, file, &o, &d, &err);
    CHECKF(st == DLK_OK, "decode %s to %d channels (%s)", file, c,
           st ? err.msg : "ok");
    if (!st) {
        bool shape = d.shape[0] == rh && d.shape[1] == rw && d.shape[2] == c &&
                     rn == 8 + (size_t)rw * rh * c;
        CHECKF(shape, "%s %s: shape %lldx%lldx%lld is Pillow's %ux%ux%d",
               file, mode, (long long)d.shape[0], (long long)d.shape[1],
               (long long)d.shape[2], rh, rw, c);
        if (shape) {
            int maxd = 0;
            size_t over = 0;
            for (size_t i = 0; i < d.data.len; i++) {
                int e = abs((int)d.data.data[i] - (int)r[8 + i]);
                if (e > maxd)
                    maxd = e;
                over += e > tol;
            }
            CHECKF(maxd <= tol, "%s %s: pixels equal Pillow's within %d "
                   "(max diff %d, %zu over)", file, mode, tol, maxd, over);
        }
        Dlk_buf_free(&d.data);
    }
    free(p), free(r);
}

static void pillow_tests(void)
{
    static const struct { const char *f, *mode; int c, tol; } t[] = {
        {"base500.jpg", "RGB", 3, 1}, {"base320_444.jpg", "RGB", 3, 1},
        {"base101.jpg", "RGB", 3, 1}, {"prog500.jpg", "RGB", 3, 1},
        {"gray320.jpg", "L", 1, 1},   {"gray320.jpg", "RGB", 3, 1},
        {"cmyk320.jpg", "RGB", 3, 1}, {"base500.jpg", "L", 1, 2},
        {"exif6.jpg", "RGB", 3, 1},   {"exif3.jpg", "RGB", 3, 1},
        {"exif8.jpg", "RGB", 3, 1},   {"exif5.jpg", "RGB", 3, 1},
        {"base101.jpg", "RGBA", 4, 1},
        {"src320.png", "RGB", 3, 0},  {"src500.png", "RGB", 3, 0},
        {"pal.png", "RGB", 3, 0},     {"pal_trns.png", "RGB", 3, 0},
        {"pal_trns.png", "RGBA", 4, 0}, {"gray.png", "L", 1, 0},
        {"gray.png", "RGB", 3, 0},    {"gray1.png", "L", 1, 0},
        {"gray16.png", "L", 1, 0},    {"gray_alpha.png", "L", 1, 0},
        {"gray_alpha.png", "RGB", 3, 0}, {"gray_alpha.png", "RGBA", 4, 0},
        {"rgb16.png", "RGB", 3, 0},   {"rgba8.png", "RGBA", 4, 0},
        {"rgba8.png", "RGB", 3, 0},   {"rgba8.png", "L", 1, 0},
        {"interlaced.png", "RGB", 3, 0}, {"src320.png", "L", 1, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        vs_pillow(t[i].f, t[i].mode, t[i].c, t[i].tol);
}

/* ---- errors on broken images ------------------------------------------ */

static void expect_fail(const uint8_t *p, size_t n, const char *nm,
                        const Dlk_image_opts *o, dlk_status want,
                        const char *what)
{
    Dlk_decoded d;
    dlk_error err = {0};
    dlk_status st = Dlk_decode_image(p, n, nm, o, &d, &err);
    CHECKF(st == want && strstr(err.msg, nm), "%s: status %d (want %d), "
           "names it: %s", what, st, want, err.msg);
    if (!st)
        Dlk_buf_free(&d.data);
}

static void crafted_errors(void)
{
    Dlk_image_opts o = img_opts(3);
    /* A JPEG header claiming 60000x60000: SOI, SOF0, SOS, EOI. */
    static const uint8_t huge[] = {
        0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0xEA, 0x60, 0xEA, 0x60,
        0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01,
        0xFF, 0xDA, 0x00, 0x0C, 0x03, 0x01, 0x00, 0x02, 0x11, 0x03, 0x11,
        0x00, 0x3F, 0x00, 0xFF, 0xD9};
    expect_fail(huge, sizeof huge, "huge.jpg", &o, DLK_ELIMIT,
                "60000x60000 JPEG header refused before decoding");
    /* A valid PNG (CRCs right) whose IHDR claims 100000x100000 RGB. */
    static const uint8_t huge_png[] = {
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00,
        0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x01, 0x86, 0xA0, 0x00, 0x01,
        0x86, 0xA0, 0x08, 0x02, 0x00, 0x00, 0x00, 0x27, 0x30, 0x9C, 0x9F,
        0x00, 0x00, 0x00, 0x0C, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63,
        0x60, 0xA0, 0x0C, 0x00, 0x00, 0x00, 0x40, 0x00, 0x01, 0xB7, 0x34,
        0x7C, 0xEF, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
        0x42, 0x60, 0x82};
    expect_fail(huge_png, sizeof huge_png, "huge.png", &o, DLK_ELIMIT,
                "100000x100000 PNG header refused before decoding");
    expect_fail((const uint8_t *)"", 0, "zero.jpg", &o, DLK_EDECODE,
                "zero bytes");
    expect_fail((const uint8_t *)"hello, world\n", 13, "hello.jpg", &o,
                DLK_EDECODE, "text named .jpg");
    expect_fail((const uint8_t *)"\xff\xd8\xff", 3, "soi.jpg", &o,
                DLK_EDECODE, "just a JPEG signature");
    expect_fail((const uint8_t *)"\x89PNG\r\n\x1a\n", 8, "sig.png", &o,
                DLK_EDECODE, "just a PNG signature");
    Dlk_image_opts bad = img_opts(2);
    expect_fail(huge, sizeof huge, "huge.jpg", &bad, DLK_EINVAL,
                "2 channels is a bad option");
    bad = img_opts(3);
    bad.width = 10;
    Dlk_decoded d;
    dlk_error err = {0};
    CHECKF(Dlk_decode_image(huge, sizeof huge, "x", &bad, &d, &err) ==
               DLK_EINVAL, "width without height is a bad option");
}

static void fixture_errors(void)
{
    size_t n;
    uint8_t *p = slurp("base500.jpg", &n);
    Dlk_image_opts o = img_opts(3);
    if (!p)
        return;
    expect_fail(p, n / 2, "half.jpg", &o, DLK_EDECODE, "truncated JPEG");
    expect_fail(p, n - 2, "noeoi.jpg", &o, DLK_EDECODE,
                "JPEG without its last two bytes");
    /* Junk before EOI (cameras write it): a warning that loses nothing. */
    uint8_t *junk = malloc(n + 3);
    memcpy(junk, p, n - 2);
    memcpy(junk + n - 2, "abc\xff\xd9", 5);
    Dlk_decoded a, b;
    dlk_error err = {0};
    dlk_status st = Dlk_decode_image(p, n, "base500.jpg", &o, &a, &err);
    st |= Dlk_decode_image(junk, n + 3, "junk.jpg", &o, &b, &err);
    CHECKF(!st && a.data.len == b.data.len &&
               !memcmp(a.data.data, b.data.data, a.data.len),
           "extraneous bytes before EOI: decoded, same pixels (%s)",
           st ? err.msg : "ok");
    Dlk_buf_free(&b.data);
    free(junk);
    /* Junk before DHT and before SOS (editors write it): the header call
     * warns too, and the pixels are the clean file's. */
    static const uint8_t markers[][2] = {{0xFF, 0xC4}, {0xFF, 0xDA}};
    for (int k = 0; k < 2; k++) {
        uint8_t *at = memmem(p, n, markers[k], 2);
        if (!at)
            continue;
        size_t off = (size_t)(at - p);
        junk = malloc(n + 4);
        memcpy(junk, p, off);
        memcpy(junk + off, "\x00\x12\x34\x56", 4);
        memcpy(junk + off + 4, p + off, n - off);
        err = (dlk_error){0};
        st = Dlk_decode_image(junk, n + 4, "junk.jpg", &o, &b, &err);
        CHECKF(!st && a.data.len == b.data.len &&
                   !memcmp(a.data.data, b.data.data, a.data.len),
               "extraneous bytes before marker 0x%02X: decoded, same "
               "pixels (%s)", markers[k][1], st ? err.msg : "ok");
        Dlk_buf_free(&b.data);
        /* the same, truncated: still an error */
        expect_fail(junk, (n + 4) * 2 / 3, "junk-cut.jpg", &o, DLK_EDECODE,
                    "extraneous bytes and truncated: an error");
        free(junk);
    }
    Dlk_buf_free(&a.data); /* zeroed on failure */
    Dlk_image_opts small = img_opts(3);
    small.max_pixels = 500 * 375 - 1;
    expect_fail(p, n, "base500.jpg", &small, DLK_ELIMIT,
                "one pixel over max_pixels");
    free(p);
    uint8_t *t = slurp("text.jpg", &n);
    expect_fail(t, n, "text.jpg", &o, DLK_EDECODE, "text file named .jpg");
    free(t);
    p = slurp("src320.png", &n);
    uint8_t *idat = p ? memmem(p, n, "IDAT", 4) : NULL;
    if (idat) {
        expect_fail(p, n / 2, "half.png", &o, DLK_EDECODE, "truncated PNG");
        /* an eXIf chunk after the image data that claims 2 GB: refused
         * before libpng allocates what it claims */
        uint8_t *iend = memmem(p, n, "IEND", 4);
        size_t at = iend ? (size_t)(iend - 4 - p) : 0;
        uint8_t *big = iend ? malloc(n + 20) : NULL;
        if (big) {
            static const uint8_t hdr[8] = {0x7f, 0xff, 0xff, 0xf0,
                                           'e', 'X', 'I', 'f'};
            memcpy(big, p, at);
            memcpy(big + at, hdr, 8);
            memset(big + at + 8, 'M', 12);
            memcpy(big + at + 20, p + at, n - at);
            Dlk_decoded bd;
            dlk_error berr = {0};
            dlk_status bst = Dlk_decode_image(big, n + 20, "bigexif.png", &o,
                                              &bd, &berr);
            CHECKF(bst == DLK_EDECODE && strstr(berr.msg, "bigexif.png") &&
                       strstr(berr.msg, "'eXIf'") &&
                       strstr(berr.msg, "claims 2147483632 bytes"),
                   "a 2 GB eXIf claim in a small PNG: refused, named: %s",
                   berr.msg);
            if (!bst)
                Dlk_buf_free(&bd.data);
            free(big);
        }
        idat[4 + 20] ^= 0x01;
        expect_fail(p, n, "badcrc.png", &o, DLK_EDECODE,
                    "PNG with a flipped byte in IDAT (bad CRC)");
    }
    free(p);
    p = slurp("pal.png", &n);
    uint8_t *plte = p ? memmem(p, n, "PLTE", 4) : NULL;
    if (plte) {
        plte[4] ^= 0x40;
        expect_fail(p, n, "badplte.png", &o, DLK_EDECODE,
                    "PNG with a bad PLTE CRC");
    }
    free(p);
}

/* ---- resize --------------------------------------------------------- */

/* 400x200: 100 green columns each side; the middle 200 red | blue. */
static Dlk_image bars(void)
{
    Dlk_image im = {400, 200, 3, malloc(400 * 200 * 3)};
    for (int y = 0; y < 200; y++)
        for (int x = 0; x < 400; x++) {
            uint8_t *q = im.px + ((size_t)y * 400 + x) * 3;
            bool side = x < 100 || x >= 300;
            q[0] = !side && x < 200 ? 200 : 0;
            q[1] = side ? 200 : 0;
            q[2] = !side && x >= 200 ? 200 : 0;
        }
    return im;
}

static bool near(int a, int b)
{
    return abs(a - b) <= 2;
}

static void resize_tests(void)
{
    Dlk_image im = bars();
    Dlk_image_opts o = img_opts(3);
    o.width = o.height = 100;
    Dlk_decoded d;
    dlk_error err = {0};

    o.fit = DLK_FIT_CROP;
    dlk_status st = Dlk_image_finish(&im, &o, &d, &err);
    CHECKF(!st && d.shape[0] == 100 && d.shape[1] == 100 && d.shape[2] == 3,
           "crop: shape 100x100x3");
    if (!st) {
        CHECKF(near(px_at(&d, 50, 2, 0), 200) && px_at(&d, 50, 2, 1) == 0 &&
                   near(px_at(&d, 50, 97, 2), 200) &&
                   px_at(&d, 50, 97, 1) == 0,
               "crop keeps the centre: red left, blue right, no green");
        Dlk_buf_free(&d.data);
    }
    o.fit = DLK_FIT_PAD;
    st = Dlk_image_finish(&im, &o, &d, &err);
    CHECKF(!st && d.shape[0] == 100 && d.shape[1] == 100, "pad: shape");
    if (!st) {
        bool zero = true;
        for (int x = 0; x < 100; x++)
            for (int c = 0; c < 3; c++)
                zero &= px_at(&d, 0, x, c) == 0 && px_at(&d, 24, x, c) == 0 &&
                        px_at(&d, 75, x, c) == 0 && px_at(&d, 99, x, c) == 0;
        CHECKF(zero, "pad: zero borders above and below");
        CHECKF(near(px_at(&d, 50, 10, 1), 200) &&
                   near(px_at(&d, 50, 40, 0), 200) &&
                   near(px_at(&d, 50, 60, 2), 200),
               "pad: whole image inside (green, red, blue)");
        Dlk_buf_free(&d.data);
    }
    o.fit = DLK_FIT_STRETCH;
    o.width = 64, o.height = 300;
    st = Dlk_image_finish(&im, &o, &d, &err);
    CHECKF(!st && d.shape[0] == 300 && d.shape[1] == 64,
           "stretch: 64x300 (up and down at once)");
    if (!st) {
        CHECKF(near(px_at(&d, 150, 1, 1), 200) &&
                   near(px_at(&d, 150, 62, 1), 200) &&
                   near(px_at(&d, 150, 24, 0), 200),
               "stretch: all of it, in order");
        Dlk_buf_free(&d.data);
    }
    /* CHW equals HWC transposed; 4 channels get opaque alpha. */
    o = img_opts(4);
    o.width = 50, o.height = 40;
    Dlk_decoded a, b;
    st = Dlk_image_finish(&im, &o, &a, &err);
    o.chw = true;
    st |= Dlk_image_finish(&im, &o, &b, &err);
    CHECKF(!st && b.shape[0] == 4 && b.shape[1] == 40 && b.shape[2] == 50,
           "chw: shape [4,40,50]");
    if (!st) {
        bool same = true, opaque = true;
        for (int y = 0; y < 40; y++)
            for (int x = 0; x < 50; x++)
                for (int c = 0; c < 4; c++)
                    same &= a.data.data[(y * 50 + x) * 4 + c] ==
                            b.data.data[(c * 40 + y) * 50 + x];
        for (int i = 0; i < 40 * 50; i++)
            opaque &= a.data.data[i * 4 + 3] == 255;
        CHECKF(same, "chw: the same pixels as hwc, transposed");
        CHECKF(opaque, "4 channels from RGB: alpha 255");
    }
    Dlk_buf_free(&a.data);
    Dlk_buf_free(&b.data);
    Dlk_image_free(&im);
}

/* ---- resample ------------------------------------------------------- */

/* The fixed-point arithmetic that resample.h defines, one output at a
 * time from the filter's own weights: the SIMD paths (SSE2, AVX2) must
 * give exactly these values. */
static void rs_reference(const uint8_t *src, size_t ss, const Dlk_rs_filter *fy,
                         const Dlk_rs_filter *fx, uint16_t *out, size_t os)
{
    int sw = fx->n_in;
    uint16_t *t = malloc((size_t)sw * fy->n_out * 2);
    for (int y = 0; y < fy->n_out; y++)
        for (int x = 0; x < sw; x++) {
            uint16_t acc = 0;
            for (int k = 0; k < fy->taps; k++)
                acc = (uint16_t)(acc +
                    (((uint32_t)src[(size_t)(fy->start[y] + k) * ss + x] << 8) *
                     fy->w[(size_t)y * fy->taps + k][0] >> 16));
            t[(size_t)y * sw + x] = acc;
        }
    for (int y = 0; y < fy->n_out; y++)
        for (int x = 0; x < fx->n_out; x++) {
            uint16_t acc = 0;
            for (int k = 0; k < fx->taps; k++)
                acc = (uint16_t)(acc +
                    ((uint32_t)t[(size_t)y * sw + fx->start[x] + k] *
                     fx->w[(size_t)x * fx->taps + k][0] >> 16));
            out[(size_t)y * os + x] = acc;
        }
    free(t);
}

static void resample_tests(void)
{
    static const int sz[][4] = {
        {500, 375, 224, 224}, {250, 188, 224, 224}, {37, 29, 16, 8},
        {9, 7, 31, 45}, {1, 1, 8, 3}, {640, 3, 5, 17}, {17, 17, 17, 17},
        {1000, 20, 3, 20}, {33, 65, 32, 64},
        /* four taps and one down the columns (each a case of its own in
         * the AVX2 passes) */
        {45, 90, 30, 40}, {48, 16, 40, 16},
        /* the AVX-512 path's windows of 64 inputs: exactly one, runs of
         * outputs that end at the input's end, upscaling, 64 taps */
        {64, 10, 64, 10}, {130, 41, 61, 40}, {100, 50, 300, 61},
        {4100, 9, 66, 9}, {333, 300, 224, 224},
    };
    unsigned seed = 12345;
    for (size_t c = 0; c < sizeof sz / sizeof sz[0]; c++) {
        int sw = sz[c][0], sh = sz[c][1], dw = sz[c][2], dh = sz[c][3];
        size_t ss = (size_t)sw + 3; /* a stride past the width */
        uint8_t *src = malloc(ss * sh), *flat = malloc(ss * sh);
        for (size_t i = 0; i < ss * sh; i++) {
            seed = seed * 1103515245u + 12345u;
            src[i] = (uint8_t)(seed >> 16);
            flat[i] = 77;
        }
        void *my = aligned_alloc(16, (Dlk_rs_filter_size(sh, dh) + 15) & ~15u),
             *mx = aligned_alloc(16, (Dlk_rs_filter_size(sw, dw) + 15) & ~15u);
        Dlk_rs_filter fy, fx;
        Dlk_rs_filter_build(sh, dh, my, &fy);
        Dlk_rs_filter_build(sw, dw, mx, &fx);
        bool sums = true;
        for (int pass = 0; pass < 2; pass++) {
            const Dlk_rs_filter *f = pass ? &fx : &fy;
            for (int i = 0; i < f->n_out8; i++) {
                uint32_t s = 0;
                for (int k = 0; k < f->taps; k++)
                    s += f->w[(size_t)i * f->taps + k][0];
                sums &= (s == 65536 || s == 65535) &&
                        f->start[i] >= 0 && f->start[i] + f->taps <= f->n_in;
            }
        }
        CHECKF(sums, "resample %dx%d -> %dx%d: weights sum to one, taps "
               "inside the source", sw, sh, dw, dh);
        size_t os = Dlk_rs_out_stride(dw);
        uint16_t *tmp = aligned_alloc(64, (Dlk_rs_tmp_elems(sw, dh) * 2 + 63) & ~(size_t)63),
                 *out = aligned_alloc(64, (Dlk_rs_out_elems(dw, dh) * 2 + 63) & ~(size_t)63),
                 *ref = malloc(os * dh * 2);
        rs_reference(src, ss, &fy, &fx, ref, os);
        bool same = true;
        /* SSE2, AVX2 and AVX-512 where the CPU has them */
        for (int isa = 0; isa < 3; isa++) {
            Dlk_rs_avx2 = isa ? -1 : 0;
            Dlk_rs_avx512 = isa == 2 ? -1 : 0;
            memset(out, 0, Dlk_rs_out_elems(dw, dh) * 2);
            Dlk_rs_plane(src, ss, &fy, &fx, tmp, out);
            for (int y = 0; y < dh; y++)
                for (int x = 0; x < dw; x++)
                    same &= out[(size_t)y * os + x] == ref[(size_t)y * os + x];
        }
        CHECKF(same, "resample %dx%d -> %dx%d: the vector code gives the "
               "reference arithmetic's values", sw, sh, dw, dh);
        if (c == 0) /* which paths this CPU checked (-1: not x86) */
            printf("# resample: AVX-512 %s\n", Dlk_rs_avx512 == 1
                   ? "checked" : "not on this CPU");
        Dlk_rs_plane(flat, ss, &fy, &fx, tmp, out);
        uint8_t row[64];
        bool kept = true;
        for (int y = 0; y < dh; y++)
            for (int x0 = 0; x0 < dw; x0 += 64) {
                int n = dw - x0 < 64 ? dw - x0 : 64;
                Dlk_rs_to_u8(out + (size_t)y * os + x0, row, n);
                for (int x = 0; x < n; x++)
                    kept &= row[x] == 77;
            }
        CHECKF(kept, "resample %dx%d -> %dx%d: a flat plane stays flat", sw,
               sh, dw, dh);
        free(src), free(flat), free(my), free(mx), free(tmp), free(out),
            free(ref);
    }
    /* colour: the vector rows equal the per-pixel ones, and grey is grey */
    uint16_t Y[37], Cb[37], Cr[37];
    for (int i = 0; i < 37; i++) {
        seed = seed * 1103515245u + 12345u;
        Y[i] = (uint16_t)((seed >> 8) % 65281);
        Cb[i] = (uint16_t)((seed >> 3) % 65281);
        Cr[i] = (uint16_t)((seed >> 13) % 65281);
    }
    /* widths that end in each path: 16-pixel blocks (AVX2), 8-pixel
     * blocks (SSE2), single pixels; with and without AVX2 */
    static const int widths[] = {37, 16, 24, 8, 5};
    bool same = true;
    for (int avx2 = 0; avx2 < 2; avx2++) {
        Dlk_rs_avx2 = avx2 ? -1 : 0;
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            int w = widths[wi];
            uint8_t rgb[37 * 3 + 1], r[38], g[38], b[38];
            memset(rgb, 0xA5, sizeof rgb), memset(r, 0xA5, sizeof r);
            Dlk_rs_ycc_row(Y, Cb, Cr, w, NULL, NULL, NULL, rgb);
            Dlk_rs_ycc_row(Y, Cb, Cr, w, r, g, b, NULL);
            same &= rgb[w * 3] == 0xA5 && r[w] == 0xA5;
            for (int i = 0; i < w; i++) {
                uint8_t one[3];
                Dlk_rs_ycc_row(Y + i, Cb + i, Cr + i, 1, NULL, NULL, NULL, one);
                same &= memcmp(one, rgb + 3 * i, 3) == 0 && r[i] == one[0] &&
                        g[i] == one[1] && b[i] == one[2];
                double yy = Y[i] / 256.0, cb = Cb[i] / 256.0 - 128,
                       cr = Cr[i] / 256.0 - 128;
                double e[3] = {yy + 1.402 * cr,
                               yy - 0.34414 * cb - 0.71414 * cr,
                               yy + 1.772 * cb};
                for (int k = 0; k < 3; k++) {
                    double v = e[k] < 0 ? 0 : e[k] > 255 ? 255 : e[k];
                    same &= fabs(v - one[k]) <= 1.5;
                }
            }
        }
    }
    CHECKF(same, "YCbCr to RGB: packed and planar rows agree with each "
           "pixel alone, within 1.5 of the exact values, nothing written "
           "past the row");
}

/* A colour JPEG scaled to RGB goes through its YCbCr planes (chroma
 * upsampled and converted at the target size): close to decoding to RGB
 * first and resizing that, for every fit and both layouts, and the same
 * pixels in HWC and CHW. */
static void ycc_path(const char *file)
{
    size_t n;
    uint8_t *p = slurp(file, &n);
    if (!p)
        return;
    static const struct { int w, h; dlk_fit fit; } g[] = {
        {224, 224, DLK_FIT_STRETCH}, {224, 224, DLK_FIT_CROP},
        {150, 200, DLK_FIT_PAD}, {97, 61, DLK_FIT_CROP},
        {640, 480, DLK_FIT_STRETCH}, /* upscaling */
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        /* the reference: RGB at the same (TurboJPEG-scaled) size, which
         * asking for 4 channels gets, resized to 3 */
        Dlk_image_opts rgb = img_opts(4), o = img_opts(3);
        o.width = rgb.width = g[i].w, o.height = rgb.height = g[i].h;
        o.fit = rgb.fit = g[i].fit;
        Dlk_image im, planes;
        Dlk_decoded a, b, c;
        dlk_error err = {0};
        dlk_status st = Dlk_jpeg_decode(p, n, file, &rgb, &im, &err);
        st |= im.ycc;
        st |= Dlk_image_finish(&im, &o, &a, &err);
        Dlk_image_free(&im);
        st |= Dlk_jpeg_decode(p, n, file, &o, &planes, &err);
        bool ycc = !st && planes.ycc;
        Dlk_image_free(&planes);
        st |= Dlk_decode_image(p, n, file, &o, &b, &err);
        o.chw = true;
        st |= Dlk_decode_image(p, n, file, &o, &c, &err);
        /* not when TurboJPEG's scaled decode has sharper chroma */
        bool want = strcmp(file, "base500.jpg") || g[i].w > 160;
        CHECKF(!st && ycc == want, "%s to %dx%d fit %d: %s", file, g[i].w,
               g[i].h, (int)g[i].fit,
               want ? "decoded through its YCbCr planes"
                    : "scaled RGB decode (4:2:0 at 1/2 or less)");
        if (st)
            continue;
        /* the fixtures are test cards with saturated colour edges: the
         * worst case for chroma upsampled by another filter, which is all
         * that may differ; a shifted or mis-scaled plane fails both */
        double sum = 0;
        size_t far = 0;
        for (size_t k = 0; k < a.data.len; k++) {
            int d = abs((int)a.data.data[k] - (int)b.data.data[k]);
            sum += d;
            far += d > 16;
        }
        double mad = sum / (double)a.data.len,
               farp = 100.0 * (double)far / (double)a.data.len;
        CHECKF(a.data.len == b.data.len && mad < 2.5 && farp < 5,
               "%s to %dx%d fit %d: within %.2f on average (%.1f%% off by "
               "more than 16) of RGB decode + resize", file, g[i].w, g[i].h,
               (int)g[i].fit, mad, farp);
        bool same = true;
        int H = g[i].h, W = g[i].w;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int ch = 0; ch < 3; ch++)
                    same &= b.data.data[((size_t)y * W + x) * 3 + ch] ==
                            c.data.data[((size_t)ch * H + y) * W + x];
        CHECKF(same, "%s to %dx%d: CHW holds the HWC pixels", file, W, H);
        Dlk_buf_free(&a.data);
        Dlk_buf_free(&b.data);
        Dlk_buf_free(&c.data);
    }
    /* not for a target it only places (no scaling), nor for gray output */
    Dlk_image_opts o = img_opts(3);
    Dlk_image im;
    dlk_error err = {0};
    dlk_status st = Dlk_jpeg_decode(p, n, file, &o, &im, &err);
    CHECKF(!st && !im.ycc, "%s at its own size: RGB, not planes", file);
    Dlk_image_free(&im);
    o = img_opts(1);
    o.width = o.height = 64;
    st = Dlk_jpeg_decode(p, n, file, &o, &im, &err);
    CHECKF(!st && !im.ycc, "%s to gray: not planes", file);
    Dlk_image_free(&im);
    free(p);
}

/* Scaled JPEG decode against full decode + resize: close. */
static void scaled_jpeg(void)
{
    size_t n;
    uint8_t *p = slurp("base500.jpg", &n);
    if (!p)
        return;
    Dlk_image_opts full = img_opts(3), o = img_opts(3);
    o.width = 112, o.height = 112;
    o.fit = DLK_FIT_CROP;
    Dlk_image im;
    Dlk_decoded a, b;
    dlk_error err = {0};
    dlk_status st = Dlk_jpeg_decode(p, n, "base500.jpg", &full, &im, &err);
    st |= Dlk_image_finish(&im, &o, &a, &err);
    Dlk_image_free(&im);
    st |= Dlk_jpeg_decode(p, n, "base500.jpg", &o, &im, &err);
    CHECKF(!st && im.w < 500 && im.w >= 112 && im.h >= 112,
           "112x112 target: scaled JPEG decode (%dx%d)", im.w, im.h);
    Dlk_image_free(&im);
    /* RGB at the scaled size (4 channels asked: no YCbCr planes) */
    Dlk_image_opts o4 = o;
    o4.channels = 4;
    st |= Dlk_jpeg_decode(p, n, "base500.jpg", &o4, &im, &err);
    st |= Dlk_image_finish(&im, &o, &b, &err);
    Dlk_image_free(&im);
    if (!st) {
        double sum = 0;
        for (size_t i = 0; i < a.data.len; i++)
            sum += abs((int)a.data.data[i] - (int)b.data.data[i]);
        double mad = sum / a.data.len;
        CHECKF(mad < 4.0, "scaled decode close to full decode + resize "
               "(mean abs diff %.2f)", mad);
        Dlk_buf_free(&a.data);
        Dlk_buf_free(&b.data);
    }
    free(p);
}

/* ---- video -------------------------------------------------------- */

/* The frame index encoded in the top-left block (luma 16+2N). */
static int frame_index(const Dlk_decoded *d, int t)
{
    int64_t h = d->shape[1], w = d->shape[2], c = d->shape[3];
    const uint8_t *f = d->data.data + (size_t)t * h * w * c;
    double s = 0;
    for (int y = 8; y < 56; y++)
        for (int x = 8; x < 56; x++)
            s += f[((size_t)y * w + x) * c];
    return (int)lround(s / (48 * 48) * 219.0 / 255.0 / 2.0);
}

static void video_case(const char *file, int frames, double fps,
                       double clip, const int *want, int nwant, int h, int w)
{
    size_t n;
    uint8_t *p = slurp(file, &n);
    if (!p) {
        CHECKF(false, "fixture %s", file);
        return;
    }
    Dlk_video_opts o = {0};
    o.frames = frames, o.fps = fps, o.clip_seconds = clip;
    Dlk_decoded d;
    dlk_error err = {0};
    dlk_status st = Dlk_decode_video(p, n, file, &o, &d, &err);
    CHECKF(st == DLK_OK, "video %s frames %d fps %g clip %g (%s)", file,
           frames, fps, clip, st ? err.msg : "ok");
    if (!st) {
        CHECKF(d.ndim == 4 && d.shape[0] == nwant && d.shape[1] == h &&
                   d.shape[2] == w && d.shape[3] == 3,
               "%s: shape [%d,%d,%d,3] (got [%lld,%lld,%lld,%lld])", file,
               nwant, h, w, (long long)d.shape[0], (long long)d.shape[1],
               (long long)d.shape[2], (long long)d.shape[3]);
        char got[512] = "";
        bool same = d.shape[0] == nwant;
        for (int t = 0; t < d.shape[0] && t < 64; t++) {
            int k = frame_index(&d, t);
            same &= t < nwant && k == want[t];
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", k);
        }
        CHECKF(same, "%s: sampled frames are the expected ones (got%s)",
               file, got);
        Dlk_buf_free(&d.data);
    }
    free(p);
}

static void video_fail(const char *file, const Dlk_video_opts *o,
                       dlk_status want, const char *what)
{
    size_t n;
    uint8_t *p = slurp(file, &n);
    if (!p) {
        CHECKF(false, "fixture %s", file);
        return;
    }
    Dlk_decoded d;
    dlk_error err = {0};
    dlk_status st = Dlk_decode_video(p, n, file, o, &d, &err);
    CHECKF(st == want && strstr(err.msg, file), "%s (%s): status %d (want "
           "%d): %s", what, file, st, want, err.msg);
    if (!st)
        Dlk_buf_free(&d.data);
    free(p);
}

static void video_tests(void)
{
    int every5[15], every1[20];
    for (int i = 0; i < 15; i++)
        every5[i] = 5 * i;
    for (int i = 0; i < 20; i++)
        every1[i] = i;
    video_case("h264.mp4", 5, 0, 0, (int[]){10, 30, 50, 70, 90}, 5, 240, 320);
    video_case("h264_fast.mp4", 5, 0, 0, (int[]){10, 30, 50, 70, 90}, 5, 240,
               320);
    video_case("h264.mp4", 0, 5, 3, every5, 15, 240, 320);
    video_case("h264.mp4", 2, 0, 2.4, (int[]){15, 45}, 2, 240, 320);
    video_case("vp9.webm", 4, 0, 0, (int[]){6, 19, 31, 44}, 4, 120, 160);
    video_case("mpeg4.avi", 4, 0, 0, (int[]){6, 19, 31, 44}, 4, 120, 160);
    video_case("mjpeg.avi", 5, 0, 0, (int[]){2, 6, 10, 14, 18}, 5, 120, 160);
    video_case("mjpeg.avi", 0, 0, 0, every1, 20, 120, 160);

    /* Resized, gray, channels first. */
    size_t n;
    uint8_t *p = slurp("vp9.webm", &n);
    if (p) {
        Dlk_video_opts o = {0};
        o.frames = 3;
        o.image.width = 64, o.image.height = 48, o.image.channels = 1;
        o.image.chw = true, o.image.fit = DLK_FIT_CROP;
        Dlk_decoded d;
        dlk_error err = {0};
        dlk_status st = Dlk_decode_video(p, n, "vp9.webm", &o, &d, &err);
        CHECKF(!st && d.shape[0] == 3 && d.shape[1] == 1 && d.shape[2] == 48 &&
                   d.shape[3] == 64 && d.data.len == 3 * 48 * 64,
               "vp9 cropped to 64x48 gray CHW: [3,1,48,64] (%s)",
               st ? err.msg : "ok");
        if (!st)
            Dlk_buf_free(&d.data);
        free(p);
    }

    Dlk_video_opts o = {0};
    o.frames = 4;
    video_fail("audio.m4a", &o, DLK_EDECODE, "no video stream");
    video_fail("trunc.mp4", &o, DLK_EDECODE, "truncated mp4 (moov first)");
    video_fail("trunc_nomoov.mp4", &o, DLK_EDECODE, "truncated mp4 (no moov)");
    video_fail("text.jpg", &o, DLK_EDECODE, "text as a video");
    video_fail("empty.jpg", &o, DLK_EDECODE, "zero bytes as a video");
    video_fail("base500.jpg", &o, DLK_EDECODE, "a JPEG as a video");
    Dlk_video_opts big = o;
    big.image.max_pixels = 1000000;
    video_fail("big.avi", &big, DLK_ELIMIT, "1920x1080 frames over max_pixels");
    Dlk_video_opts many = o;
    many.frames = 10, many.max_frames = 5;
    video_fail("h264.mp4", &many, DLK_ELIMIT, "more frames than max_frames");
    many.frames = 0, many.fps = 0;
    video_fail("h264.mp4", &many, DLK_ELIMIT, "every frame over max_frames");

    /* A corrupted stream: decoded or refused, cleanly. */
    p = slurp("garbled.webm", &n);
    if (p) {
        Dlk_decoded d;
        dlk_error err = {0};
        dlk_status st = Dlk_decode_video(p, n, "garbled.webm", &o, &d, &err);
        CHECKF(st == DLK_OK || ((st == DLK_EDECODE || st == DLK_ELIMIT) &&
                                strstr(err.msg, "garbled.webm")),
               "garbled webm: clean result (%d: %s)", st, err.msg);
        if (!st)
            Dlk_buf_free(&d.data);
        free(p);
    }
}

/* ---- sniff and the PNG writer ------------------------------------- */

static void sniff_tests(void)
{
    static const struct { const char *p; size_t n; Dlk_media m; } t[] = {
        {"\xff\xd8\xff\xe0", 4, DLK_MEDIA_JPEG},
        {"\x89PNG\r\n\x1a\n", 8, DLK_MEDIA_PNG},
        {"\0\0\0\x20" "ftypisom", 12, DLK_MEDIA_VIDEO},
        {"\0\0\0\x20" "ftypheic", 12, DLK_MEDIA_UNKNOWN},
        {"\x1a\x45\xdf\xa3\x01", 5, DLK_MEDIA_VIDEO},
        {"RIFF\0\0\0\0AVI LIST", 16, DLK_MEDIA_VIDEO},
        {"RIFF\0\0\0\0WEBPVP8 ", 16, DLK_MEDIA_UNKNOWN},
        {"OggS\0", 5, DLK_MEDIA_VIDEO},
        {"FLV\x01\x05", 5, DLK_MEDIA_VIDEO},
        {"GIF89a", 6, DLK_MEDIA_VIDEO},
        {"hello", 5, DLK_MEDIA_UNKNOWN},
        {"", 0, DLK_MEDIA_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        CHECKF(Dlk_media_sniff((const uint8_t *)t[i].p, t[i].n) == t[i].m,
               "sniff case %zu", i);
    uint8_t ts[188 * 3] = {0};
    ts[0] = ts[188] = ts[376] = 0x47;
    CHECKF(Dlk_media_sniff(ts, sizeof ts) == DLK_MEDIA_VIDEO, "sniff MPEG-TS");
    ts[188] = 0;
    CHECKF(Dlk_media_sniff(ts, sizeof ts) == DLK_MEDIA_UNKNOWN,
           "sniff: one 0x47 is not MPEG-TS");
}

static void png_write_tests(void)
{
    enum { H = 7, W = 5, C = 3, T = 2 };
    uint8_t px[T * H * W * C];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37 + 11);
    dlk_sample s = {DLK_U8, 3, {H, W, C}, px, H * W * C};
    void *png;
    size_t len;
    dlk_error err = {0};
    dlk_status st = dlk_png_from_sample(&s, -1, -1, &png, &len, &err);
    CHECKF(!st, "png from [7,5,3] (%s)", st ? err.msg : "ok");
    if (!st) {
        Dlk_image_opts o = img_opts(3);
        Dlk_decoded d;
        st = Dlk_decode_image(png, len, "w.png", &o, &d, &err);
        CHECKF(!st && d.data.len == sizeof px / T &&
                   !memcmp(d.data.data, px, sizeof px / T),
               "png round trip is exact");
        if (!st)
            Dlk_buf_free(&d.data);
        free(png);
    }
    dlk_sample chw = {DLK_U8, 3, {C, H, W}, px, H * W * C};
    st = dlk_png_from_sample(&chw, -1, -1, &png, &len, &err);
    if (!st) {
        Dlk_image_opts o = img_opts(3);
        Dlk_decoded d;
        st = Dlk_decode_image(png, len, "chw.png", &o, &d, &err);
        CHECKF(!st && d.shape[0] == H && d.shape[1] == W &&
                   d.data.data[(2 * W + 3) * 3 + 1] == px[(1 * H + 2) * W + 3],
               "png from [3,7,5]: CHW detected");
        if (!st)
            Dlk_buf_free(&d.data);
        free(png);
    } else {
        CHECKF(false, "png from [3,7,5] (%s)", err.msg);
    }
    dlk_sample clip = {DLK_U8, 4, {T, H, W, C}, px, sizeof px};
    st = dlk_png_from_sample(&clip, 1, -1, &png, &len, &err);
    if (!st) {
        Dlk_image_opts o = img_opts(3);
        Dlk_decoded d;
        st = Dlk_decode_image(png, len, "f1.png", &o, &d, &err);
        CHECKF(!st && !memcmp(d.data.data, px + H * W * C, H * W * C),
               "png of frame 1 of a clip");
        if (!st)
            Dlk_buf_free(&d.data);
        free(png);
    } else {
        CHECKF(false, "png of frame 1 (%s)", err.msg);
    }
    CHECKF(dlk_png_from_sample(&clip, -1, -1, &png, &len, &err) == DLK_EINVAL,
           "a clip needs a frame: %s", err.msg);
    CHECKF(dlk_png_from_sample(&clip, 2, -1, &png, &len, &err) == DLK_EINVAL,
           "frame past the end: %s", err.msg);
    dlk_sample f32 = {DLK_F32, 1, {4}, px, 16};
    CHECKF(dlk_png_from_sample(&f32, -1, -1, &png, &len, &err) == DLK_EINVAL,
           "f32 is not an image: %s", err.msg);
    dlk_sample cube = {DLK_U8, 3, {5, 5, 5}, px, 125};
    CHECKF(dlk_png_from_sample(&cube, -1, -1, &png, &len, &err) == DLK_EINVAL,
           "[5,5,5] is not an image: %s", err.msg);
}

int main(void)
{
    media = getenv("DLK_MEDIA_DIR");
    sniff_tests();
    crafted_errors();
    resize_tests();
    resample_tests();
    png_write_tests();
    if (!media || !*media) {
        UNIT_SKIP("media fixtures", "run by tests/t/t200-decode.sh");
        return unit_done();
    }
    pillow_tests();
    fixture_errors();
    scaled_jpeg();
    ycc_path("base500.jpg");
    ycc_path("base320_444.jpg");
    ycc_path("prog500.jpg");
    video_tests();
    return unit_done();
}
