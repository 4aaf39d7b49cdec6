/* resample.c - separable plane scaling in 16-bit fixed point.
 *
 * Why not libswscale: ingest scales every image, and through swscale the
 * scaling and colour conversion of a 500x375 JPEG to 224x224 took a
 * quarter of the decoder's time (its horizontal filter gathers every
 * tap).  Here each pass filters down the columns, where eight
 * neighbouring outputs share their weights and their loads are
 * contiguous, and writes its result transposed (an 8x8 register
 * transpose per block), so the second pass, again down the columns,
 * does the rows, and its transposed output is the right way round.
 * With AVX-512 the transposes go: each output row is filtered down into
 * a row buffer that stays in L1, and across it by gathering each tap of
 * up to 32 neighbouring outputs from a window of 64 inputs with one
 * two-source permute (vpermt2w), storing in place (500x375 JPEG planes
 * to 224x224 on a 2-core x86-64 host: 92-102 us -> 64-66 us with the
 * colour conversion; docs/benchmarks.md#ingest).
 *
 * Arithmetic (the same with SSE2, AVX2, AVX-512 and in C: all give equal
 * bits): values are Q8 in u16 lanes; a tap adds (v * w) >> 16 with w the
 * Q16 weight; weights are non-negative and sum to at most 65536, so no
 * sum can pass 65280. */
#include "media/resample.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define RS_SSE2 1
#endif

int Dlk_rs_avx2 = -1, Dlk_rs_avx512 = -1;

static int round8(int n)
{
    return (n + 7) & ~7;
}

static size_t align16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* The most inputs one output can take: an area of n_in/n_out pixels
 * touches at most ceil of that plus one; interpolation two. */
static int max_taps(int n_in, int n_out)
{
    int64_t t;
    if (n_out < n_in)
        t = ((int64_t)n_in + n_out - 1) / n_out + 1;
    else
        t = n_out == n_in ? 1 : 2;
    return t < n_in ? (int)t : n_in;
}

/* The AVX-512 path's tables after the weights (see resample.h). */
static size_t extra_size(size_t n8, size_t taps)
{
    return align16(n8 * sizeof(struct Dlk_rs_group)) +
           align16((n8 + 32) * 2) + taps * (n8 + 32) * 2;
}

size_t Dlk_rs_filter_size(int n_in, int n_out)
{
    if (n_in <= 0 || n_out <= 0 || n_out > INT32_MAX - 8)
        return 0;
    size_t n8 = (size_t)round8(n_out), taps = (size_t)max_taps(n_in, n_out);
    if (taps > SIZE_MAX / 32 / (n8 + 32))
        return 0;
    return align16(n8 * sizeof(int32_t)) + n8 * taps * 16 + extra_size(n8, taps);
}

/* The inputs output i takes: the first, and how many. */
static int span(int n_in, int n_out, int i, int *first)
{
    if (n_out == n_in) {
        *first = i;
        return 1;
    }
    if (n_out > n_in) { /* linear between the two nearest centres */
        double c = (i + 0.5) * n_in / n_out - 0.5;
        c = c < 0 ? 0 : c > n_in - 1 ? n_in - 1 : c;
        *first = (int)c;
        return *first + 1 < n_in ? 2 : 1;
    }
    /* the area [a, b) of the input that output i covers */
    double s = (double)n_in / n_out, a = i * s;
    int j1 = (int)ceil(a + s);
    *first = (int)a;
    return (j1 < n_in ? j1 : n_in) - *first;
}

/* The Q16 weight of input j (within the span) for output i. */
static uint32_t weight(int n_in, int n_out, int i, int j)
{
    double w;
    if (n_out == n_in) {
        w = 1;
    } else if (n_out > n_in) {
        double c = (i + 0.5) * n_in / n_out - 0.5;
        c = c < 0 ? 0 : c > n_in - 1 ? n_in - 1 : c;
        double fr = c - (int)c;
        w = j == (int)c ? 1 - fr : fr;
    } else {
        double s = (double)n_in / n_out, a = i * s, b = a + s;
        double lo = a > j ? a : j, hi = b < j + 1 ? b : j + 1;
        w = (hi > lo ? hi - lo : 0) / s;
    }
    return (uint32_t)lround(w * 65536.0);
}

/* The AVX-512 path's tables (after f's weights in its memory): runs of
 * outputs whose taps fall in one window of 64 inputs, so that one
 * two-source permute a tap gathers them from a row. */
static void build_groups(Dlk_rs_filter *f)
{
    int n8 = f->n_out8, taps = f->taps, ws = n8 + 32;
    uint8_t *m = (uint8_t *)f->w + (size_t)n8 * taps * 16;
    f->groups = (struct Dlk_rs_group *)m;
    m += align16((size_t)n8 * sizeof *f->groups);
    f->start16 = (uint16_t *)m;
    f->wt = (uint16_t *)(m + align16((size_t)ws * 2));
    f->wt_stride = ws;
    f->n_groups = 0;
    if (f->n_in < 64 || f->n_in > 65535 || taps > 64)
        return;
    for (int i = 0; i < ws; i++) {
        int o = i < n8 ? i : n8 - 1;
        f->start16[i] = (uint16_t)f->start[o];
        for (int k = 0; k < taps; k++)
            f->wt[(size_t)k * ws + i] =
                i < n8 ? f->w[(size_t)o * taps + k][0] : 0;
    }
    for (int i0 = 0; i0 < n8;) {
        /* starts never fall as i grows; a window ends at the input's end */
        int base = f->start[i0] < f->n_in - 64 ? f->start[i0] : f->n_in - 64;
        int n = 1;
        while (n < 32 && i0 + n < n8 && f->start[i0 + n] + taps - base <= 64)
            n++;
        f->groups[f->n_groups++] = (struct Dlk_rs_group){i0, n, base};
        i0 += n;
    }
}

void Dlk_rs_filter_build(int n_in, int n_out, void *mem, Dlk_rs_filter *f)
{
    int taps = max_taps(n_in, n_out), n8 = round8(n_out);
    f->n_in = n_in, f->n_out = n_out, f->n_out8 = n8, f->taps = taps;
    f->start = mem;
    f->w = (uint16_t (*)[8])((uint8_t *)mem +
                             align16((size_t)n8 * sizeof(int32_t)));
    for (int i = 0; i < n8; i++) {
        int o = i < n_out ? i : n_out - 1; /* padding repeats the last */
        int first, n = span(n_in, n_out, o, &first);
        /* every output takes `taps` inputs: start early near the end */
        int start = first + taps > n_in ? n_in - taps : first;
        uint32_t sum = 0, top = 0;
        int big = 0;
        for (int k = 0; k < n; k++) {
            uint32_t q = weight(n_in, n_out, o, first + k);
            sum += q;
            if (q > top)
                top = q, big = k;
        }
        f->start[i] = start;
        uint16_t (*w)[8] = f->w + (size_t)i * taps;
        memset(w, 0, (size_t)taps * sizeof *w);
        for (int k = 0; k < n; k++) {
            uint32_t q = weight(n_in, n_out, o, first + k);
            if (k == big) /* an exact sum, so flat areas stay flat */
                q += 65536 - sum;
            for (int l = 0; l < 8; l++)
                w[first - start + k][l] = q > 65535 ? 65535 : (uint16_t)q;
        }
    }
    build_groups(f);
}

static size_t round8z(int n) /* n >= 0, without int overflow */
{
    return ((size_t)n + 7) & ~(size_t)7;
}

size_t Dlk_rs_out_stride(int dw)
{
    return round8z(dw);
}

size_t Dlk_rs_out_elems(int dw, int dh)
{
    return round8z(dw) * round8z(dh);
}

size_t Dlk_rs_tmp_elems(int sw, int dh)
{
    return (size_t)sw * round8z(dh);
}

/* One output of f (index i) from column x of rows of u8 or u16 values. */
static uint16_t tap_u8(const uint8_t *in, size_t is, const Dlk_rs_filter *f,
                       int i, int x)
{
    const uint8_t *p = in + (size_t)f->start[i] * is + x;
    uint16_t acc = 0;
    for (int k = 0; k < f->taps; k++, p += is)
        acc = (uint16_t)(acc + (((uint32_t)*p << 8) *
                                f->w[(size_t)i * f->taps + k][0] >> 16));
    return acc;
}

#ifndef RS_SSE2
static uint16_t tap_u16(const uint16_t *in, size_t is,
                        const Dlk_rs_filter *f, int i, int x)
{
    const uint16_t *p = in + (size_t)f->start[i] * is + x;
    uint16_t acc = 0;
    for (int k = 0; k < f->taps; k++, p += is)
        acc = (uint16_t)(acc + ((uint32_t)*p *
                                f->w[(size_t)i * f->taps + k][0] >> 16));
    return acc;
}
#endif

#ifdef RS_SSE2
#if defined(__GNUC__)
#define RS_INLINE static inline __attribute__((always_inline))
#else
#define RS_INLINE static inline
#endif

/* b[c] = column c of the 8x8 block of u16 rows a[r], within each
 * 128-bit lane; P is _mm (SSE2) or _mm256 (AVX2), V the vector type. */
#define RS_TRANSPOSE8(P, V, a, b)                                          \
    do {                                                                   \
        V t_[8], u_[8];                                                    \
        for (int i_ = 0; i_ < 4; i_++) {                                   \
            t_[2 * i_] = P##_unpacklo_epi16(a[2 * i_], a[2 * i_ + 1]);     \
            t_[2 * i_ + 1] = P##_unpackhi_epi16(a[2 * i_], a[2 * i_ + 1]); \
        }                                                                  \
        for (int i_ = 0; i_ < 2; i_++) {                                   \
            V *t4_ = t_ + 4 * i_, *u4_ = u_ + 4 * i_;                      \
            u4_[0] = P##_unpacklo_epi32(t4_[0], t4_[2]);                   \
            u4_[1] = P##_unpackhi_epi32(t4_[0], t4_[2]);                   \
            u4_[2] = P##_unpacklo_epi32(t4_[1], t4_[3]);                   \
            u4_[3] = P##_unpackhi_epi32(t4_[1], t4_[3]);                   \
        }                                                                  \
        for (int i_ = 0; i_ < 4; i_++) {                                   \
            b[2 * i_] = P##_unpacklo_epi64(u_[i_], u_[i_ + 4]);            \
            b[2 * i_ + 1] = P##_unpackhi_epi64(u_[i_], u_[i_ + 4]);        \
        }                                                                  \
    } while (0)

/* 8 bytes at p as Q8 lanes (each byte in a lane's high half). */
RS_INLINE __m128i load8_u8(const uint8_t *p)
{
    return _mm_unpacklo_epi8(_mm_setzero_si128(),
                             _mm_loadl_epi64((const __m128i *)p));
}

/* Output i of f at 8 columns from x of u8 rows.  Two to four taps (the
 * common reductions) unrolled: the loop's own work was most of it. */
RS_INLINE __m128i taps8_u8(const uint8_t *in, size_t is,
                           const Dlk_rs_filter *f, int i, int x)
{
    const uint8_t *p = in + (size_t)f->start[i] * is + x;
    const __m128i *w = (const __m128i *)f->w[(size_t)i * f->taps];
    __m128i acc = _mm_mulhi_epu16(load8_u8(p), w[0]);
    switch (f->taps) {
    case 4:
        acc = _mm_add_epi16(acc, _mm_mulhi_epu16(load8_u8(p + 3 * is), w[3]));
        /* fall through */
    case 3:
        acc = _mm_add_epi16(acc, _mm_mulhi_epu16(load8_u8(p + 2 * is), w[2]));
        /* fall through */
    case 2:
        acc = _mm_add_epi16(acc, _mm_mulhi_epu16(load8_u8(p + is), w[1]));
        /* fall through */
    case 1:
        return acc;
    }
    for (int k = 1; k < f->taps; k++)
        acc = _mm_add_epi16(acc, _mm_mulhi_epu16(load8_u8(p + k * is), w[k]));
    return acc;
}

/* Output i of f from 8-lane rows (stride 8) of a panel. */
RS_INLINE __m128i taps8_panel(const uint16_t *panel, const Dlk_rs_filter *f,
                              int i)
{
    const __m128i *p = (const __m128i *)(panel + (size_t)f->start[i] * 8);
    const __m128i *w = (const __m128i *)f->w[(size_t)i * f->taps];
    __m128i acc = _mm_mulhi_epu16(_mm_load_si128(p), w[0]);
    switch (f->taps) {
    case 4:
        acc = _mm_add_epi16(acc, _mm_mulhi_epu16(_mm_load_si128(p + 3), w[3]));
        /* fall through */
    case 3:
        acc = _mm_add_epi16(acc, _mm_mulhi_epu16(_mm_load_si128(p + 2), w[2]));
        /* fall through */
    case 2:
        acc = _mm_add_epi16(acc, _mm_mulhi_epu16(_mm_load_si128(p + 1), w[1]));
        /* fall through */
    case 1:
        return acc;
    }
    for (int k = 1; k < f->taps; k++)
        acc = _mm_add_epi16(acc, _mm_mulhi_epu16(_mm_load_si128(p + k), w[k]));
    return acc;
}
#endif

#if defined(RS_SSE2) && defined(__GNUC__) && \
    (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define RS_AVX2 1
#define RS_AVX2_FN __attribute__((target("avx2")))

/* 16 bytes at p as Q8 lanes (each byte in a lane's high half): the
 * load broadcast to both 128-bit lanes, then one shuffle (bytes 0-7 to
 * the low lane, 8-15 to the high one) instead of a widening and a
 * shift. */
RS_AVX2_FN RS_INLINE __m256i load16_q8(const uint8_t *p)
{
    const __m256i spread = _mm256_setr_epi8(
        -1, 0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1, 7,
        -1, 8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15);
    return _mm256_shuffle_epi8(
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p)),
        spread);
}

/* pass_down's blocks of 16 columns with AVX2 (half the instructions):
 * each 128-bit lane transposes its own 8x8 block; the last block ends at
 * the last column (overlapping its neighbour, which it writes again with
 * the same values).  `taps` is a constant where the callers below pass
 * one, so that the tap loop unrolls (the three planes of a 500x375
 * JPEG: 80 -> 69 us on a 2-core x86-64 host). */
RS_AVX2_FN RS_INLINE void down_avx2(const uint8_t *src, size_t ss, int sw,
                                    const Dlk_rs_filter *fy, uint16_t *tmp,
                                    int taps)
{
    for (int i0 = 0; i0 < fy->n_out8; i0 += 8) {
        uint16_t *panel = tmp + (size_t)i0 * sw;
        const uint8_t *row[8];
        const __m128i *wr[8];
        for (int r = 0; r < 8; r++) {
            row[r] = src + (size_t)fy->start[i0 + r] * ss;
            wr[r] = (const __m128i *)fy->w[(size_t)(i0 + r) * taps];
        }
        for (int x0 = 0; x0 < sw; x0 += 16) {
            int x = x0 + 16 <= sw ? x0 : sw - 16;
            __m256i a[8], b[8];
            for (int r = 0; r < 8; r++) {
                const uint8_t *p = row[r] + x;
                __m256i acc = _mm256_mulhi_epu16(
                    load16_q8(p), _mm256_broadcastsi128_si256(wr[r][0]));
                for (int k = 1; k < taps; k++)
                    acc = _mm256_add_epi16(
                        acc, _mm256_mulhi_epu16(
                                 load16_q8(p + k * ss),
                                 _mm256_broadcastsi128_si256(wr[r][k])));
                a[r] = acc;
            }
            RS_TRANSPOSE8(_mm256, __m256i, a, b);
            /* b[c]: column x+c in the low lane, x+8+c in the high one */
            for (int c = 0; c < 8; c += 2) {
                _mm256_storeu_si256(
                    (__m256i *)(panel + (size_t)(x + c) * 8),
                    _mm256_permute2x128_si256(b[c], b[c + 1], 0x20));
                _mm256_storeu_si256(
                    (__m256i *)(panel + (size_t)(x + 8 + c) * 8),
                    _mm256_permute2x128_si256(b[c], b[c + 1], 0x31));
            }
        }
    }
}

/* Returns the columns done: all, or none when fewer than 16. */
RS_AVX2_FN static int pass_down_avx2(const uint8_t *src, size_t ss, int sw,
                                     const Dlk_rs_filter *fy, uint16_t *tmp)
{
    if (sw < 16)
        return 0;
    switch (fy->taps) { /* 500x375 -> 224: 3 (luma), 2 (chroma) */
    case 1: down_avx2(src, ss, sw, fy, tmp, 1); break;
    case 2: down_avx2(src, ss, sw, fy, tmp, 2); break;
    case 3: down_avx2(src, ss, sw, fy, tmp, 3); break;
    case 4: down_avx2(src, ss, sw, fy, tmp, 4); break;
    default: down_avx2(src, ss, sw, fy, tmp, fy->taps); break;
    }
    return sw;
}

/* pass_across with AVX2: two panels at once, one in each 128-bit lane;
 * `taps` as in down_avx2. */
RS_AVX2_FN RS_INLINE void across_avx2(const uint16_t *tmp, int sw, int rows16,
                                      const Dlk_rs_filter *fx, uint16_t *out,
                                      size_t os, int taps)
{
    for (int y0 = 0; y0 < rows16; y0 += 16) {
        const uint16_t *lo = tmp + (size_t)y0 * sw, *hi = lo + (size_t)8 * sw;
        for (int i0 = 0; i0 < fx->n_out8; i0 += 8) {
            __m256i a[8], b[8];
            for (int c = 0; c < 8; c++) {
                int i = i0 + c;
                size_t at = (size_t)fx->start[i] * 8;
                const __m128i *w = (const __m128i *)fx->w[(size_t)i * taps];
                __m256i acc = _mm256_setzero_si256();
                for (int k = 0; k < taps; k++, at += 8) {
                    __m256i v = _mm256_inserti128_si256(
                        _mm256_castsi128_si256(
                            _mm_load_si128((const __m128i *)(lo + at))),
                        _mm_load_si128((const __m128i *)(hi + at)), 1);
                    acc = _mm256_add_epi16(
                        acc, _mm256_mulhi_epu16(
                                 v, _mm256_broadcastsi128_si256(w[k])));
                }
                a[c] = acc;
            }
            RS_TRANSPOSE8(_mm256, __m256i, a, b);
            for (int r = 0; r < 8; r++) {
                _mm_storeu_si128((__m128i *)(out + (size_t)(y0 + r) * os + i0),
                                 _mm256_castsi256_si128(b[r]));
                _mm_storeu_si128(
                    (__m128i *)(out + (size_t)(y0 + 8 + r) * os + i0),
                    _mm256_extracti128_si256(b[r], 1));
            }
        }
    }
}

/* Returns the rows done (a multiple of 16). */
RS_AVX2_FN static int pass_across_avx2(const uint16_t *tmp, int sw,
                                       int rows8, const Dlk_rs_filter *fx,
                                       uint16_t *out, size_t os)
{
    int rows16 = rows8 & ~15;
    switch (fx->taps) { /* 500x375 -> 224: 4 (luma), 3 (chroma) */
    case 1: across_avx2(tmp, sw, rows16, fx, out, os, 1); break;
    case 2: across_avx2(tmp, sw, rows16, fx, out, os, 2); break;
    case 3: across_avx2(tmp, sw, rows16, fx, out, os, 3); break;
    case 4: across_avx2(tmp, sw, rows16, fx, out, os, 4); break;
    default: across_avx2(tmp, sw, rows16, fx, out, os, fx->taps); break;
    }
    return rows16;
}

static bool have_avx2(void)
{
    /* every thread that asks stores the same answer */
    int v = __atomic_load_n(&Dlk_rs_avx2, __ATOMIC_RELAXED);
    if (v < 0) {
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&Dlk_rs_avx2, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

#ifdef RS_AVX2
#define RS_AVX512 1
#define RS_AVX512_FN __attribute__((target("avx512f,avx512bw")))

/* AVX-512BW, on a CPU that also has VBMI: Ice Lake, Sapphire Rapids,
 * Zen 4 and later.  On Skylake-SP and Cascade Lake (BW, no VBMI) 512-bit
 * multiplies lower the core's clock and keep it lower for milliseconds
 * after them, so TurboJPEG's next image would run slower: those keep the
 * AVX2 path (not measured here: no such host).  The code itself needs
 * only F and BW. */
static bool have_avx512(void)
{
    int v = __atomic_load_n(&Dlk_rs_avx512, __ATOMIC_RELAXED);
    if (v < 0) {
        v = __builtin_cpu_supports("avx512f") &&
                    __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vbmi") ? 1 : 0;
        __atomic_store_n(&Dlk_rs_avx512, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* Output row i of fy, all sw columns, into row (u16, in order): 32
 * columns a step, the last step ending at the last column; `taps` a
 * constant where the caller passes one. */
RS_AVX512_FN RS_INLINE void down_row_avx512(const uint8_t *src, size_t ss,
                                            int sw, const Dlk_rs_filter *fy,
                                            int i, uint16_t *row, int taps)
{
    const uint8_t *p = src + (size_t)fy->start[i] * ss;
    __m512i w[64];
    for (int k = 0; k < taps; k++)
        w[k] = _mm512_set1_epi16((short)fy->w[(size_t)i * taps + k][0]);
    for (int x0 = 0; x0 < sw; x0 += 32) {
        int x = x0 + 32 <= sw ? x0 : sw - 32;
        __m512i acc = _mm512_setzero_si512();
        for (int k = 0; k < taps; k++) {
            __m512i v = _mm512_slli_epi16(
                _mm512_cvtepu8_epi16(
                    _mm256_loadu_si256((const __m256i *)(p + k * ss + x))),
                8);
            acc = _mm512_add_epi16(acc, _mm512_mulhi_epu16(v, w[k]));
        }
        _mm512_storeu_si512(row + x, acc);
    }
}

/* One row across: each group's taps gathered from its 64-input window
 * by a two-source permute, its outputs stored in place (no transpose). */
RS_AVX512_FN RS_INLINE void across_row_avx512(const uint16_t *row,
                                              const Dlk_rs_filter *fx,
                                              uint16_t *out, int taps)
{
    const __m512i one = _mm512_set1_epi16(1);
    for (int g = 0; g < fx->n_groups; g++) {
        const struct Dlk_rs_group *gr = &fx->groups[g];
        __m512i lo = _mm512_loadu_si512(row + gr->base),
                hi = _mm512_loadu_si512(row + gr->base + 32),
                idx = _mm512_sub_epi16(
                    _mm512_loadu_si512(fx->start16 + gr->first),
                    _mm512_set1_epi16((short)gr->base)),
                acc = _mm512_setzero_si512();
        const uint16_t *w = fx->wt + gr->first;
        for (int k = 0; k < taps; k++, w += fx->wt_stride) {
            acc = _mm512_add_epi16(
                acc, _mm512_mulhi_epu16(
                         _mm512_permutex2var_epi16(lo, idx, hi),
                         _mm512_loadu_si512(w)));
            idx = _mm512_add_epi16(idx, one);
        }
        _mm512_mask_storeu_epi16(out + gr->first,
                                 (__mmask32)(0xFFFFFFFFu >> (32 - gr->n)), acc);
    }
}

/* Both passes a row at a time (the down pass's row stays in L1 for the
 * across pass); fx must have groups (sw >= 64). */
RS_AVX512_FN static void plane_avx512(const uint8_t *src, size_t ss,
                                      const Dlk_rs_filter *fy,
                                      const Dlk_rs_filter *fx, uint16_t *row,
                                      uint16_t *out, size_t os)
{
    int sw = fx->n_in;
    for (int i = 0; i < fy->n_out8; i++) {
        switch (fy->taps) { /* 500x375 -> 224: 3 (luma), 2 (chroma) */
        case 1: down_row_avx512(src, ss, sw, fy, i, row, 1); break;
        case 2: down_row_avx512(src, ss, sw, fy, i, row, 2); break;
        case 3: down_row_avx512(src, ss, sw, fy, i, row, 3); break;
        case 4: down_row_avx512(src, ss, sw, fy, i, row, 4); break;
        default: down_row_avx512(src, ss, sw, fy, i, row, fy->taps); break;
        }
        uint16_t *o = out + (size_t)i * os;
        switch (fx->taps) { /* 4 (luma), 3 (chroma) */
        case 1: across_row_avx512(row, fx, o, 1); break;
        case 2: across_row_avx512(row, fx, o, 2); break;
        case 3: across_row_avx512(row, fx, o, 3); break;
        case 4: across_row_avx512(row, fx, o, 4); break;
        default: across_row_avx512(row, fx, o, fx->taps); break;
        }
    }
}
#endif

/* The first pass: the sw x fy->n_in plane at src (stride ss) filtered
 * down its columns by fy into panels of 8 outputs: the value of output
 * row i at column x is tmp[(i / 8) * sw * 8 + x * 8 + i % 8], so each
 * panel is sw rows of 8 lanes, written in order. */
static void pass_down(const uint8_t *src, size_t ss, int sw,
                      const Dlk_rs_filter *fy, uint16_t *tmp)
{
    int done = 0; /* columns done by the vector code */
#ifdef RS_SSE2
#ifdef RS_AVX2
    if (have_avx2())
        done = pass_down_avx2(src, ss, sw, fy, tmp);
#endif
    /* blocks of 8, the last one ending at the last column */
    for (int i0 = 0; done < sw && sw >= 8 && i0 < fy->n_out8; i0 += 8) {
        uint16_t *panel = tmp + (size_t)i0 * sw;
        for (int x0 = 0; x0 < sw; x0 += 8) {
            int x = x0 + 8 <= sw ? x0 : sw - 8;
            __m128i a[8], b[8];
            for (int r = 0; r < 8; r++)
                a[r] = taps8_u8(src, ss, fy, i0 + r, x);
            RS_TRANSPOSE8(_mm, __m128i, a, b);
            for (int c = 0; c < 8; c++)
                _mm_store_si128((__m128i *)(panel + (size_t)(x + c) * 8), b[c]);
        }
    }
    if (sw >= 8)
        done = sw;
#endif
    for (int i = 0; i < fy->n_out8; i++)
        for (int x = done; x < sw; x++)
            tmp[(size_t)(i / 8) * sw * 8 + (size_t)x * 8 + i % 8] =
                tap_u8(src, ss, fy, i, x);
}

/* The second pass: each panel's rows filtered by fx (over the source's
 * columns), transposed back into rows of out (stride os). */
static void pass_across(const uint16_t *tmp, int sw, int rows8,
                        const Dlk_rs_filter *fx, uint16_t *out, size_t os)
{
    int done = 0;
#ifdef RS_AVX2
    if (have_avx2())
        done = pass_across_avx2(tmp, sw, rows8, fx, out, os);
#endif
    for (int y0 = done; y0 < rows8; y0 += 8) {
        const uint16_t *panel = tmp + (size_t)y0 * sw;
#ifdef RS_SSE2
        for (int i0 = 0; i0 < fx->n_out8; i0 += 8) {
            __m128i a[8], b[8];
            for (int c = 0; c < 8; c++)
                a[c] = taps8_panel(panel, fx, i0 + c);
            RS_TRANSPOSE8(_mm, __m128i, a, b);
            for (int r = 0; r < 8; r++)
                _mm_storeu_si128((__m128i *)(out + (size_t)(y0 + r) * os + i0),
                                 b[r]);
        }
#else
        for (int r = 0; r < 8; r++)
            for (int i = 0; i < fx->n_out8; i++)
                out[(size_t)(y0 + r) * os + i] = tap_u16(panel + r, 8, fx, i, 0);
#endif
    }
}

void Dlk_rs_plane(const uint8_t *src, size_t ss, const Dlk_rs_filter *fy,
                  const Dlk_rs_filter *fx, uint16_t *tmp, uint16_t *out)
{
#ifdef RS_AVX512
    if (fx->n_groups > 0 && fy->taps <= 64 && have_avx512()) {
        plane_avx512(src, ss, fy, fx, tmp, out, (size_t)fx->n_out8);
        return;
    }
#endif
    pass_down(src, ss, fx->n_in, fy, tmp);
    pass_across(tmp, fx->n_in, fy->n_out8, fx, out, (size_t)fx->n_out8);
}

void Dlk_rs_to_u8(const uint16_t *in, uint8_t *out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = (uint8_t)((in[i] + 128u) >> 8);
}

/* YCbCr to RGB in Q4: R = Y + 1.402 Cr', G = Y - 0.34414 Cb' - 0.71414 Cr',
 * B = Y + 1.772 Cb' (Cb' = Cb - 128), each product (a * 8 * c13) >> 16
 * with c13 the factor in Q13; within 1 of the exact value. */
enum { K_RCR = 11485, K_GCB = 2819, K_GCR = 5850, K_BCB = 14516 };

static int16_t mulhi16(int16_t a, int16_t b)
{
    return (int16_t)(((int32_t)a * b) >> 16);
}

static uint8_t sat_q4(int v)
{
    v = (v + 8) >> 4;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static void ycc_px(uint16_t Y, uint16_t Cb, uint16_t Cr, uint8_t *r,
                   uint8_t *g, uint8_t *b)
{
    int16_t y = (int16_t)(Y >> 4), cb = (int16_t)(((Cb >> 4) - 2048) * 8),
            cr = (int16_t)(((Cr >> 4) - 2048) * 8);
    *r = sat_q4(y + mulhi16(cr, K_RCR));
    *g = sat_q4(y - mulhi16(cb, K_GCB) - mulhi16(cr, K_GCR));
    *b = sat_q4(y + mulhi16(cb, K_BCB));
}

#ifdef RS_SSE2
/* ycc_px on vectors of Q8 Y, Cb and Cr (P _mm or _mm256, V the type):
 * R, G and B rounded in 16-bit lanes, not yet clamped (the caller's
 * saturating pack clamps them to 0..255). */
#define RS_YCC(P, V, Yq, Cbq, Crq, R, G, B)                                \
    do {                                                                   \
        V half_ = P##_set1_epi16(2048), eight_ = P##_set1_epi16(8);        \
        V y_ = P##_srli_epi16(Yq, 4),                                      \
          cb_ = P##_slli_epi16(                                            \
              P##_sub_epi16(P##_srli_epi16(Cbq, 4), half_), 3),            \
          cr_ = P##_slli_epi16(                                            \
              P##_sub_epi16(P##_srli_epi16(Crq, 4), half_), 3);            \
        R = P##_add_epi16(y_, P##_mulhi_epi16(cr_, P##_set1_epi16(K_RCR)));\
        G = P##_sub_epi16(                                                 \
            P##_sub_epi16(y_, P##_mulhi_epi16(cb_, P##_set1_epi16(K_GCB))),\
            P##_mulhi_epi16(cr_, P##_set1_epi16(K_GCR)));                  \
        B = P##_add_epi16(y_, P##_mulhi_epi16(cb_, P##_set1_epi16(K_BCB)));\
        R = P##_srai_epi16(P##_add_epi16(R, eight_), 4);                   \
        G = P##_srai_epi16(P##_add_epi16(G, eight_), 4);                   \
        B = P##_srai_epi16(P##_add_epi16(B, eight_), 4);                   \
    } while (0)
#endif

#ifdef RS_AVX2
/* Dlk_rs_ycc_row's 16-pixel blocks with AVX2; returns the pixels done. */
RS_AVX2_FN static int ycc_row_avx2(const uint16_t *Y, const uint16_t *Cb,
                                   const uint16_t *Cr, int w, uint8_t *r,
                                   uint8_t *g, uint8_t *b, uint8_t *rgb)
{
    /* four RGB0 pixels to their twelve bytes */
    const __m128i pack3 = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13,
                                        14, -1, -1, -1, -1);
    const __m128i zero = _mm_setzero_si128();
    int x = 0;
    for (; x + 16 <= w; x += 16) {
        __m256i R, G, B;
        RS_YCC(_mm256, __m256i,
               _mm256_loadu_si256((const __m256i *)(Y + x)),
               _mm256_loadu_si256((const __m256i *)(Cb + x)),
               _mm256_loadu_si256((const __m256i *)(Cr + x)), R, G, B);
        /* 16 bytes of each, in order (packus works within lanes) */
        __m128i r8 = _mm256_castsi256_si128(
                    _mm256_permute4x64_epi64(_mm256_packus_epi16(R, R), 0xD8)),
                g8 = _mm256_castsi256_si128(
                    _mm256_permute4x64_epi64(_mm256_packus_epi16(G, G), 0xD8)),
                b8 = _mm256_castsi256_si128(
                    _mm256_permute4x64_epi64(_mm256_packus_epi16(B, B), 0xD8));
        if (!rgb) {
            _mm_storeu_si128((__m128i *)(r + x), r8);
            _mm_storeu_si128((__m128i *)(g + x), g8);
            _mm_storeu_si128((__m128i *)(b + x), b8);
            continue;
        }
        __m128i rg[2] = {_mm_unpacklo_epi8(r8, g8), _mm_unpackhi_epi8(r8, g8)},
                bz[2] = {_mm_unpacklo_epi8(b8, zero), _mm_unpackhi_epi8(b8, zero)};
        uint8_t *d = rgb + (size_t)x * 3;
        for (int j = 0; j < 4; j++) {
            __m128i q = _mm_shuffle_epi8(
                j & 1 ? _mm_unpackhi_epi16(rg[j / 2], bz[j / 2])
                      : _mm_unpacklo_epi16(rg[j / 2], bz[j / 2]),
                pack3);
            if (j < 3 || x + 16 < w) { /* 16 bytes, 4 past the twelve */
                _mm_storeu_si128((__m128i *)(d + 12 * j), q);
            } else {
                uint8_t t[16];
                _mm_storeu_si128((__m128i *)t, q);
                memcpy(d + 12 * j, t, 12);
            }
        }
    }
    return x;
}
#endif

void Dlk_rs_ycc_row(const uint16_t *Y, const uint16_t *Cb, const uint16_t *Cr,
                    int w, uint8_t *r, uint8_t *g, uint8_t *b, uint8_t *rgb)
{
    int x = 0;
#ifdef RS_AVX2
    if (have_avx2())
        x = ycc_row_avx2(Y, Cb, Cr, w, r, g, b, rgb);
#endif
#ifdef RS_SSE2
    const __m128i zero = _mm_setzero_si128();
    for (; x + 8 <= w; x += 8) {
        __m128i R, G, B;
        RS_YCC(_mm, __m128i, _mm_loadu_si128((const __m128i *)(Y + x)),
               _mm_loadu_si128((const __m128i *)(Cb + x)),
               _mm_loadu_si128((const __m128i *)(Cr + x)), R, G, B);
        __m128i r8 = _mm_packus_epi16(R, R), g8 = _mm_packus_epi16(G, G),
                b8 = _mm_packus_epi16(B, B);
        if (!rgb) {
            _mm_storel_epi64((__m128i *)(r + x), r8);
            _mm_storel_epi64((__m128i *)(g + x), g8);
            _mm_storel_epi64((__m128i *)(b + x), b8);
            continue;
        }
        __m128i rg = _mm_unpacklo_epi8(r8, g8), bz = _mm_unpacklo_epi8(b8, zero);
        uint8_t q[32];
        _mm_storeu_si128((__m128i *)q, _mm_unpacklo_epi16(rg, bz));
        _mm_storeu_si128((__m128i *)(q + 16), _mm_unpackhi_epi16(rg, bz));
        uint8_t *d = rgb + (size_t)x * 3;
        /* four bytes a pixel, the fourth overwritten by the next; the
         * row's last pixel gets only its three */
        int n = x + 8 < w ? 8 : 7;
        for (int c = 0; c < n; c++)
            memcpy(d + 3 * c, q + 4 * c, 4);
        if (n == 7)
            memcpy(d + 21, q + 28, 3);
    }
#endif
    for (; x < w; x++) {
        if (rgb)
            ycc_px(Y[x], Cb[x], Cr[x], rgb + (size_t)x * 3,
                   rgb + (size_t)x * 3 + 1, rgb + (size_t)x * 3 + 2);
        else
            ycc_px(Y[x], Cb[x], Cr[x], r + x, g + x, b + x);
    }
}
