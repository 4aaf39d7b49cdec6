/* decode_exif.c - EXIF orientation, shared by the JPEG (APP1) and PNG
 * (eXIf) decoders: read from a TIFF block, applied to decoded pixels. */
#include "media/decode.h"
#include "util/bytes.h"

#include <stdlib.h>
#include <string.h>

static unsigned get16(const uint8_t *p, bool le)
{
    return le ? (unsigned)(p[0] | p[1] << 8) : (unsigned)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p, bool le)
{
    return le ? Dlk_get_le32(p)
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                    (uint32_t)p[2] << 8 | p[3];
}

int Dlk_exif_orientation(const uint8_t *t, size_t n)
{
    /* PNG writers differ: some keep the JPEG APP1 prefix in eXIf */
    if (n >= 6 && memcmp(t, "Exif\0\0", 6) == 0) {
        t += 6;
        n -= 6;
    }
    if (n < 8)
        return 1;
    bool le;
    if (memcmp(t, "II*\0", 4) == 0)
        le = true;
    else if (memcmp(t, "MM\0*", 4) == 0)
        le = false;
    else
        return 1;
    uint32_t ifd = get32(t + 4, le);
    if (ifd > n - 2)
        return 1;
    unsigned count = get16(t + ifd, le);
    for (unsigned i = 0; i < count; i++) {
        size_t e = ifd + 2 + (size_t)i * 12;
        if (e + 12 > n)
            break;
        if (get16(t + e, le) == 0x0112 && get16(t + e + 2, le) == 3) {
            unsigned v = get16(t + e + 8, le);
            return v >= 1 && v <= 8 ? (int)v : 1;
        }
    }
    return 1;
}

dlk_status Dlk_image_orient(Dlk_image *im, int o, dlk_error *err)
{
    if (o < 2 || o > 8)
        return DLK_OK;
    int w = im->w, h = im->h, c = im->c;
    bool swap = o >= 5;
    int dw = swap ? h : w, dh = swap ? w : h;
    uint8_t *out = malloc((size_t)w * h * c);
    if (!out)
        return Dlk_fail(err, DLK_ENOMEM, "cannot allocate %dx%d pixels", w, h);
    for (int y = 0; y < dh; y++) {
        uint8_t *d = out + (size_t)y * dw * c;
        for (int x = 0; x < dw; x++, d += c) {
            int sx, sy;
            switch (o) {
            case 2: sx = w - 1 - x; sy = y; break;
            case 3: sx = w - 1 - x; sy = h - 1 - y; break;
            case 4: sx = x; sy = h - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = h - 1 - x; break;
            case 7: sx = w - 1 - y; sy = h - 1 - x; break;
            default: sx = w - 1 - y; sy = x; break; /* 8 */
            }
            memcpy(d, im->px + ((size_t)sy * w + sx) * c, (size_t)c);
        }
    }
    if (!im->borrowed)
        free(im->px);
    im->borrowed = false;
    im->px = out;
    im->w = dw;
    im->h = dh;
    return DLK_OK;
}
