/* decode_png.c - PNG through libpng's progressive-free low-level API, so
 * that the values are the file's own (no gamma or background applied),
 * as Pillow reads them: palette and tRNS expanded, gray of 1/2/4 bits
 * scaled to 8, 16 bits reduced to their high byte, interlacing undone.
 * EXIF orientation (an eXIf chunk) is applied as for JPEG.
 * Every CRC error, in critical and ancillary chunks alike, is an error;
 * so is a truncated file.  libpng reports errors by longjmp: everything
 * that must survive one lives in a heap job, never in locals. */
#include "media/decode.h"

#include "media/png_jump.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct png_job {
    Dlk_png_jump jump; /* first: libpng's error pointer */
    const uint8_t *p;
    size_t n, off;
    png_structp png;
    png_infop info;
    uint8_t *px;
    png_bytep *rows;
} png_job;

static void on_read(png_structp png, png_bytep d, size_t len)
{
    png_job *j = png_get_io_ptr(png);
    if (len > j->n - j->off)
        png_error(png, "truncated file");
    memcpy(d, j->p + j->off, len);
    j->off += len;
}

/* Every chunk's length against the bytes that follow it, before libpng
 * sees any: libpng allocates some chunks' claimed length before reading
 * them (an eXIf chunk after the image data, past png_set_chunk_malloc_max:
 * a 715-byte file claiming 2 GB), so a length the file cannot hold is
 * refused here.  0, or the offset of the first chunk that does not fit
 * (*len its claim).  A file that ends early passes: libpng says so. */
static size_t chunk_overrun(const uint8_t *p, size_t n, uint32_t *len)
{
    size_t off = 8;
    while (n - off >= 12) {
        uint32_t l = (uint32_t)p[off] << 24 | (uint32_t)p[off + 1] << 16 |
                     (uint32_t)p[off + 2] << 8 | p[off + 3];
        if (l > n - off - 12) {
            *len = l;
            return off;
        }
        if (!memcmp(p + off + 4, "IEND", 4))
            return 0;
        off += 12 + (size_t)l;
    }
    return 0;
}

/* The body, after setjmp: returns a status for the checks of its own,
 * longjmps for libpng's. */
static dlk_status read_png(png_job *j, const char *name,
                           const Dlk_image_opts *o, Dlk_image *out,
                           dlk_error *err)
{
    png_structp png = j->png;
    png_set_read_fn(png, j, on_read);
    png_set_crc_action(png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
    png_set_chunk_malloc_max(png, 8u << 20);
    png_read_info(png, j->info);
    png_uint_32 w = png_get_image_width(png, j->info),
                h = png_get_image_height(png, j->info);
    dlk_status st = Dlk_check_pixels(w, h, o, name, err);
    if (st)
        return st;
    png_set_expand(png);
    if (png_get_bit_depth(png, j->info) == 16)
        png_set_strip_16(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, j->info);
    int c = png_get_channels(png, j->info);
    size_t rowbytes = png_get_rowbytes(png, j->info);
    if (c < 1 || c > 4 || png_get_bit_depth(png, j->info) != 8 ||
        rowbytes != (size_t)w * c)
        return Dlk_fail(err, DLK_EDECODE, "cannot decode PNG '%s': "
                        "unexpected layout after expansion", name);
    j->px = malloc(rowbytes * h);
    j->rows = malloc(sizeof *j->rows * h);
    if (!j->px || !j->rows)
        return Dlk_fail(err, DLK_ENOMEM, "cannot decode PNG '%s': cannot "
                        "allocate %ux%u pixels", name, (unsigned)w,
                        (unsigned)h);
    for (png_uint_32 y = 0; y < h; y++)
        j->rows[y] = j->px + rowbytes * y;
    png_read_image(png, j->rows);
    /* into info: an eXIf chunk may come after the image data too */
    png_read_end(png, j->info);
    out->w = (int)w;
    out->h = (int)h;
    out->c = c;
    out->px = j->px;
    j->px = NULL;
    return DLK_OK;
}

/* EXIF orientation from the eXIf chunk (PNG 1.5 extensions), as for
 * JPEG's APP1: cameras and phones that save PNG keep the sensor's
 * orientation and record the turn there. */
static int png_orientation(png_job *j)
{
#ifdef PNG_eXIf_SUPPORTED
    png_uint_32 n = 0;
    png_bytep exif = NULL;
    if (png_get_eXIf_1(j->png, j->info, &n, &exif) && exif && n)
        return Dlk_exif_orientation(exif, n);
#else
    (void)j;
#endif
    return 1;
}

dlk_status Dlk_png_decode(const uint8_t *p, size_t n, const char *name,
                          const Dlk_image_opts *o, Dlk_image *out,
                          dlk_error *err)
{
    memset(out, 0, sizeof *out);
    if (n < 8 || png_sig_cmp(p, 0, 8))
        return Dlk_fail(err, DLK_EDECODE, "cannot decode PNG '%s': not a "
                        "PNG file", name);
    uint32_t claim = 0;
    size_t at = chunk_overrun(p, n, &claim);
    if (at) {
        char type[5] = {0};
        for (int i = 0; i < 4; i++) /* a damaged type is not printed raw */
            type[i] = isalpha(p[at + 4 + i]) ? (char)p[at + 4 + i] : '?';
        return Dlk_fail(err, DLK_EDECODE, "cannot decode PNG '%s': chunk "
                        "'%s' at byte %zu claims %u bytes, the file has "
                        "%zu after its header", name, type, at,
                        (unsigned)claim, n - at - 12);
    }
    png_job *j = calloc(1, sizeof *j);
    if (!j)
        return Dlk_oom(err);
    j->p = p;
    j->n = n;
    dlk_status st = DLK_OK;
    j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j,
                                    Dlk_png_on_error, Dlk_png_on_warning);
    if (!j->png || !(j->info = png_create_info_struct(j->png))) {
        st = Dlk_fail(err, DLK_ENOMEM, "cannot decode PNG '%s': out of "
                      "memory", name);
        goto done;
    }
    if (setjmp(j->jump.jb)) {
        st = Dlk_fail(err, DLK_EDECODE, "cannot decode PNG '%s': %s", name,
                      j->jump.msg);
        Dlk_image_free(out);
        goto done;
    }
    st = read_png(j, name, o, out, err);
    if (!st)
        st = Dlk_image_orient(out, png_orientation(j), err);
    if (st)
        Dlk_image_free(out);
done:
    png_destroy_read_struct(j->png ? &j->png : NULL,
                            j->info ? &j->info : NULL, NULL);
    free(j->px);
    free(j->rows);
    free(j);
    return st;
}
