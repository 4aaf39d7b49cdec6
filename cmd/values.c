/* values.c - element values of any dtype as text or JSON, for dlk cat. */
#include "values.h"

#include <math.h>
#include <string.h>

static float half_to_float(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0)
        v = ldexpf((float)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexpf((float)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

static float bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Elements are little-endian; this host is too (x86-64, aarch64). */
value value_at(dlk_dtype t, const void *data, size_t i)
{
    const uint8_t *p = data;
    value v = {0};
    switch (t) {
    case DLK_U8: v.kind = V_UINT; v.u = p[i]; break;
    case DLK_BOOL: v.kind = V_BOOL; v.u = p[i] != 0; break;
    case DLK_I8: v.kind = V_INT; v.i = (int8_t)p[i]; break;
    case DLK_U16: { uint16_t x; memcpy(&x, p + 2 * i, 2); v.kind = V_UINT; v.u = x; break; }
    case DLK_I16: { int16_t x; memcpy(&x, p + 2 * i, 2); v.kind = V_INT; v.i = x; break; }
    case DLK_U32: { uint32_t x; memcpy(&x, p + 4 * i, 4); v.kind = V_UINT; v.u = x; break; }
    case DLK_I32: { int32_t x; memcpy(&x, p + 4 * i, 4); v.kind = V_INT; v.i = x; break; }
    case DLK_U64: { uint64_t x; memcpy(&x, p + 8 * i, 8); v.kind = V_UINT; v.u = x; break; }
    case DLK_I64: { int64_t x; memcpy(&x, p + 8 * i, 8); v.kind = V_INT; v.i = x; break; }
    case DLK_F16: { uint16_t x; memcpy(&x, p + 2 * i, 2); v.kind = V_FLOAT; v.f = half_to_float(x); break; }
    case DLK_BF16: { uint16_t x; memcpy(&x, p + 2 * i, 2); v.kind = V_FLOAT; v.f = bf16_to_float(x); break; }
    case DLK_F32: { float x; memcpy(&x, p + 4 * i, 4); v.kind = V_FLOAT; v.f = x; break; }
    case DLK_F64: { double x; memcpy(&x, p + 8 * i, 8); v.kind = V_FLOAT; v.f = x; break; }
    }
    return v;
}

void value_print(FILE *f, value v)
{
    switch (v.kind) {
    case V_UINT: fprintf(f, "%llu", (unsigned long long)v.u); break;
    case V_INT: fprintf(f, "%lld", (long long)v.i); break;
    case V_BOOL: fputs(v.u ? "true" : "false", f); break;
    case V_FLOAT: fprintf(f, "%.9g", v.f); break;
    }
}

json_t *value_json(value v)
{
    switch (v.kind) {
    case V_UINT:
        return v.u > (uint64_t)INT64_MAX ? json_real((double)v.u)
                                         : json_integer((json_int_t)v.u);
    case V_INT: return json_integer(v.i);
    case V_BOOL: return json_boolean(v.u);
    case V_FLOAT:
        /* JSON has no NaN or infinity */
        return isfinite(v.f) ? json_real(v.f) : json_null();
    }
    return json_null();
}
