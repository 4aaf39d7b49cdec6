/* kernels.c - the loops over a chunk's values that evaluation is made
 * of: element conversion, a scalar tensor's column, LIKE, and a scalar
 * compared with a constant in its own dtype. */
#include "query.h"

#include <math.h>
#include <string.h>

/* The hot loops: vectorized at -O3 (the build's -O2 vectorizes only
 * loops of a known trip count). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

static double f16_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24)
             : e == 31 ? (m ? NAN : INFINITY)
             : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element i of little-endian data of dtype t (the hosts dlk builds on
 * are little-endian, as the format). */
double q_elem(dlk_dtype t, const uint8_t *p, size_t i)
{
    switch (t) {
    case DLK_U8: case DLK_BOOL: return p[i];
    case DLK_I8: return ((const int8_t *)p)[i];
    case DLK_U16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case DLK_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case DLK_U32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case DLK_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case DLK_U64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case DLK_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case DLK_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return f16_to_double(v); }
    case DLK_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bf16_to_double(v); }
    case DLK_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case DLK_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    }
    return NAN;
}

/* The scalar of each row: one loop per dtype, so that the common ones
 * compile to a plain load and convert. */
#define GATHER(type)                                                        \
    if (contig) {                                                           \
        const uint8_t *p = base + (rows[0] - first) * sizeof(type);        \
        for (size_t i = 0; i < n; i++) {                                    \
            type v;                                                         \
            memcpy(&v, p + i * sizeof(type), sizeof v);                     \
            out[i] = (double)v;                                             \
        }                                                                   \
        break;                                                              \
    }                                                                       \
    for (size_t i = 0; i < n; i++) {                                        \
        type v;                                                             \
        memcpy(&v, base + (rows[i] - first) * sizeof(type), sizeof v);     \
        out[i] = (double)v;                                                 \
    }                                                                       \
    break
/* rows consecutive (contig): a plain sequential loop the compiler
 * vectorizes */
void q_load_scalar(dlk_dtype t, const uint8_t *base, uint64_t first,
                        const uint64_t *rows, size_t n, bool contig,
                        double *out)
{
    switch (t) {
    case DLK_U8: case DLK_BOOL: GATHER(uint8_t);
    case DLK_I8: GATHER(int8_t);
    case DLK_U16: GATHER(uint16_t);
    case DLK_I16: GATHER(int16_t);
    case DLK_U32: GATHER(uint32_t);
    case DLK_I32: GATHER(int32_t);
    case DLK_U64: GATHER(uint64_t);
    case DLK_I64: GATHER(int64_t);
    case DLK_F32: GATHER(float);
    case DLK_F64: GATHER(double);
    default:
        for (size_t i = 0; i < n; i++)
            out[i] = q_elem(t, base, (size_t)(rows[i] - first));
    }
}
#undef GATHER


/* SQL LIKE: '%' any run of bytes, '_' any one byte. */
bool q_like(const uint8_t *s, size_t n, const char *pat, size_t m)
{
    size_t si = 0, pi = 0, star_p = (size_t)-1, star_s = 0;
    while (si < n) {
        if (pi < m && (pat[pi] == '_' || (uint8_t)pat[pi] == s[si])) {
            si++;
            pi++;
        } else if (pi < m && pat[pi] == '%') {
            star_p = pi++;
            star_s = si;
        } else if (star_p != (size_t)-1) {
            pi = star_p + 1;
            si = ++star_s;
        } else {
            return false;
        }
    }
    while (pi < m && pat[pi] == '%')
        pi++;
    return pi == m;
}


/* `T op c` over consecutive rows, read straight from the payload (64-byte
 * aligned, §3.3 of the format) in its dtype: no column of doubles, no
 * row list.  Returns the rows kept, written from out[m] on (out NULL:
 * counted only). */
#define CMP_LOOP(CV, OP)                                                    \
    do {                                                                    \
        if (out)                                                            \
            for (size_t k = 0; k < n; k++) {                                \
                out[m] = r0 + k;                                            \
                m += p[k] OP CV;                                            \
            }                                                               \
        else                                                                \
            for (size_t k = 0; k < n; k++)                                  \
                m += p[k] OP CV;                                            \
    } while (0)
#define CMP_OPS(CV)                                                         \
    switch (op) {                                                           \
    case '=': CMP_LOOP(CV, ==); break;                                      \
    case '!': CMP_LOOP(CV, !=); break;                                      \
    case '<': CMP_LOOP(CV, <); break;                                       \
    case 'l': CMP_LOOP(CV, <=); break;                                      \
    case '>': CMP_LOOP(CV, >); break;                                       \
    default: CMP_LOOP(CV, >=); break;                                       \
    }
/* In the dtype itself when the constant is one of its values (the loop
 * then vectorizes), else as doubles. */
#define CMP_TYPE(type, lo, hi)                                              \
    {                                                                       \
        const type *p = (const type *)base + off;                           \
        if (c >= (lo) && c <= (hi) && (double)(type)c == c) {               \
            type cv = (type)c;                                              \
            CMP_OPS(cv);                                                    \
        } else {                                                            \
            const double cd = c;                                            \
            CMP_OPS(cd);                                                    \
        }                                                                   \
        return m;                                                           \
    }
uint64_t q_cmp_const(dlk_dtype t, char op, const void *base, size_t off,
                          double c, uint64_t r0, size_t n, uint64_t *out,
                          uint64_t m)
{
    switch (t) {
    case DLK_U8: case DLK_BOOL: CMP_TYPE(uint8_t, 0, 255)
    case DLK_I8: CMP_TYPE(int8_t, -128, 127)
    case DLK_U16: CMP_TYPE(uint16_t, 0, 65535)
    case DLK_I16: CMP_TYPE(int16_t, -32768, 32767)
    case DLK_U32: CMP_TYPE(uint32_t, 0, 4294967295.0)
    case DLK_I32: CMP_TYPE(int32_t, -2147483648.0, 2147483647.0)
    case DLK_I64: CMP_TYPE(int64_t, -9223372036854775808.0, 9223372036854774784.0)
    case DLK_U64: CMP_TYPE(uint64_t, 0, 18446744073709549568.0)
    case DLK_F32: CMP_TYPE(float, -3.4028234663852886e38, 3.4028234663852886e38)
    default: CMP_TYPE(double, -INFINITY, INFINITY) /* f16/bf16: general path */
    }
}
#undef CMP_TYPE
#undef CMP_OPS
#undef CMP_LOOP
