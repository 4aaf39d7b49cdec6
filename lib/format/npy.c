/* npy.c - reading and writing NumPy .npy headers.  The header is a short
 * Python dict literal; only what numpy.save writes is accepted, bounded
 * in length, and every size is checked against the file. */
#include "util/error.h"
#include "util/bytes.h"
#include "format/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *descr; dlk_dtype dtype; } descrs[] = {
    {"u1", DLK_U8}, {"i1", DLK_I8}, {"u2", DLK_U16}, {"i2", DLK_I16},
    {"u4", DLK_U32}, {"i4", DLK_I32}, {"u8", DLK_U64}, {"i8", DLK_I64},
    {"f2", DLK_F16}, {"f4", DLK_F32}, {"f8", DLK_F64}, {"b1", DLK_BOOL},
};

#define BAD(...) Dlk_fail(err, DLK_EDECODE, __VA_ARGS__)

/* Find the value after 'key': in the dict text; NULL if absent. */
static const char *dict_value(const char *dict, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s':", key);
    const char *p = strstr(dict, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    return p;
}

dlk_status Dlk_npy_parse(const uint8_t *p, size_t len, const char *name,
                         Dlk_npy_info *h, dlk_error *err)
{
    return Dlk_npy_parse_head(p, len, len, name, h, err);
}

dlk_status Dlk_npy_parse_head(const uint8_t *p, size_t len, uint64_t size,
                              const char *name, Dlk_npy_info *h,
                              dlk_error *err)
{
    memset(h, 0, sizeof *h);
    if (len > size)
        len = (size_t)size;
    if (len < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
        return BAD("'%s': not a .npy file", name);
    unsigned major = p[6];
    size_t hlen, start;
    if (major == 1) {
        hlen = Dlk_get_le16(p + 8);
        start = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return BAD("'%s': truncated .npy header", name);
        hlen = Dlk_get_le32(p + 8);
        start = 12;
    } else {
        return BAD("'%s': unsupported .npy version %u", name, major);
    }
    if (hlen > 65536 || start + hlen > len)
        return BAD("'%s': .npy header of %zu bytes does not fit the file",
                   name, hlen);
    char dict[65537];
    memcpy(dict, p + start, hlen);
    dict[hlen] = '\0';
    if (strlen(dict) != hlen)
        return BAD("'%s': NUL byte in .npy header", name);

    const char *d = dict_value(dict, "descr");
    if (!d || (d[0] != '\'' && d[0] != '"'))
        return BAD("'%s': .npy header without 'descr'", name);
    char order = d[1];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return BAD("'%s': unsupported .npy descr", name);
    h->swap = order == '>';
    bool found = false;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++) {
        size_t n = strlen(descrs[i].descr);
        if (strncmp(d + 2, descrs[i].descr, n) == 0 && d[2 + n] == d[0]) {
            h->dtype = descrs[i].dtype;
            found = true;
        }
    }
    if (!found)
        return BAD("'%s': unsupported .npy dtype %.12s", name, d);
    if (dlk_dtype_size(h->dtype) == 1)
        h->swap = false;
    const char *f = dict_value(dict, "fortran_order");
    if (!f || strncmp(f, "False", 5) != 0)
        return BAD("'%s': only C-order .npy arrays are supported", name);
    const char *s = dict_value(dict, "shape");
    if (!s || *s != '(')
        return BAD("'%s': .npy header without 'shape'", name);
    s++;
    uint64_t count = 1;
    for (;;) {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        if (*s < '0' || *s > '9' || h->ndim == DLK_MAX_NDIM + 1)
            return BAD("'%s': bad .npy shape", name);
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (v > UINT32_MAX || !Dlk_mul_u64(count, v, &count))
            return BAD("'%s': .npy shape overflows", name);
        h->shape[h->ndim++] = (int64_t)v;
        s = end;
    }
    uint64_t bytes;
    if (!Dlk_mul_u64(count, dlk_dtype_size(h->dtype), &bytes) ||
        bytes != size - start - hlen)
        return BAD("'%s': .npy data is %llu bytes, its shape needs %llu",
                   name, (unsigned long long)(size - start - hlen),
                   (unsigned long long)bytes);
    h->data_off = start + hlen;
    h->data_bytes = (size_t)bytes;
    return DLK_OK;
}

dlk_status dlk_npy_header(dlk_dtype dtype, int ndim, const int64_t *shape,
                          char *out, size_t cap, size_t *len, dlk_error *err)
{
    const char *descr = NULL;
    dlk_dtype lookup = dtype == DLK_BF16 ? DLK_U16 : dtype;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
        if (descrs[i].dtype == lookup)
            descr = descrs[i].descr;
    if (!descr || ndim < 0 || ndim > DLK_MAX_NDIM + 1)
        return Dlk_fail(err, DLK_EINVAL, "no .npy form for this array");
    char dict[400];
    int n = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': "
                     "False, 'shape': (", dlk_dtype_size(dtype) == 1 ? '|' : '<',
                     descr);
    for (int i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld%s",
                      (long long)shape[i], ndim == 1 ? "," :
                      i + 1 < ndim ? ", " : "");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* pad with spaces so that the data starts 64-byte aligned */
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    if (padded > cap)
        return Dlk_fail(err, DLK_ELIMIT, ".npy header does not fit %zu bytes",
                        cap);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    Dlk_put_le16((uint8_t *)out + 8, (uint16_t)(padded - 10));
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', padded - total);
    out[padded - 1] = '\n';
    *len = padded;
    return DLK_OK;
}
