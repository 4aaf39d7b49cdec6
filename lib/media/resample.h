/* resample.h - one 8-bit plane to another size: area averaging along an
 * axis that shrinks, linear interpolation along one that grows (the
 * filters of swscale's SWS_AREA / SWS_BILINEAR and Pillow's reduce), in
 * 16-bit fixed point, with SSE2, AVX2 or AVX-512 on x86-64 and the same
 * arithmetic in plain C elsewhere.  Results are Q8 (value x 256) so that
 * colour conversion after it rounds only once.  Pure C: no media library
 * needed. */
#ifndef DLK_RESAMPLE_H
#define DLK_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* The filters of one axis, n_in samples to n_out: for output i, `taps`
 * weights (Q16, summing to 65536 less rounding) from input start[i]. */
typedef struct Dlk_rs_filter {
    int n_in, n_out, n_out8, taps; /* n_out8: n_out rounded up to 8 */
    int32_t *start;                /* n_out8 entries */
    uint16_t (*w)[8];              /* n_out8 * taps, each weight 8 times */
    /* For the AVX-512 path: runs of up to 32 outputs whose inputs all
     * lie within 64 from `base` (n_groups 0 where the filter has none:
     * fewer than 64 inputs or more than 64 taps), start[] as u16 and the
     * weights by tap (weight k of output i at wt[k * wt_stride + i]),
     * both padded by 32 entries so that a group loads them whole. */
    int n_groups, wt_stride;
    struct Dlk_rs_group { int32_t first, n, base; } *groups;
    uint16_t *start16, *wt;
} Dlk_rs_filter;

/* Bytes Dlk_rs_filter_build needs for n_in -> n_out (0 on overflow). */
size_t Dlk_rs_filter_size(int n_in, int n_out);
/* Build the filter for n_in -> n_out (both > 0) in mem (of
 * Dlk_rs_filter_size bytes, 16-byte aligned). */
void Dlk_rs_filter_build(int n_in, int n_out, void *mem, Dlk_rs_filter *f);

/* The Q8 elements of the output of Dlk_rs_plane for dw x dh: its row
 * stride (dw rounded up to 8) times its rows (dh rounded up to 8). */
size_t Dlk_rs_out_stride(int dw);
size_t Dlk_rs_out_elems(int dw, int dh);
/* The u16 scratch elements Dlk_rs_plane needs for sw x sh -> dw x dh. */
size_t Dlk_rs_tmp_elems(int sw, int dh);

/* Scale the sw x sh plane at src (row stride ss bytes) to dw x dh Q8
 * values at out (row stride Dlk_rs_out_stride(dw)); fy: sh -> dh, fx:
 * sw -> dw; tmp of Dlk_rs_tmp_elems.  Rows and columns of out past dh
 * and dw hold padding.  src is read only within its sw x sh pixels. */
void Dlk_rs_plane(const uint8_t *src, size_t ss, const Dlk_rs_filter *fy,
                  const Dlk_rs_filter *fx, uint16_t *tmp, uint16_t *out);

/* Q8 rows back to u8, rounded: n values. */
void Dlk_rs_to_u8(const uint16_t *in, uint8_t *out, int n);

/* Three Q8 planes of full-range YCbCr (JFIF, ITU-T T.871) to RGB: row y
 * of w pixels, to r/g/b planes (each its own pointer) or, when rgb is
 * set, to packed RGB at rgb. */
void Dlk_rs_ycc_row(const uint16_t *Y, const uint16_t *Cb, const uint16_t *Cr,
                    int w, uint8_t *r, uint8_t *g, uint8_t *b, uint8_t *rgb);

/* Whether the x86 AVX2 and AVX-512 code runs: -1 (the default) asks the
 * CPU; tests set 0 to check the code below it on a machine that has it. */
extern int Dlk_rs_avx2, Dlk_rs_avx512;

#endif
