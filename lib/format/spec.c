/* spec.c - the command-line form of a tensor schema,
 * NAME:DTYPE[:SHAPE[:CODEC]], e.g. images:u8:224x224x3:zstd. */
#include "util/error.h"
#include "format/manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool is_label_name(const char *n)
{
    return strcmp(n, "label") == 0 || strcmp(n, "labels") == 0 ||
           strcmp(n, "class") == 0 || strcmp(n, "classes") == 0 ||
           strcmp(n, "target") == 0 || strcmp(n, "targets") == 0;
}

static bool is_int_dtype(dlk_dtype t)
{
    return t == DLK_U8 || t == DLK_I8 || t == DLK_U16 || t == DLK_I16 ||
           t == DLK_U32 || t == DLK_I32 || t == DLK_U64 || t == DLK_I64;
}

/* Guess a kind from the name and shape: what ingest and ls show until the
 * user says otherwise. */
static dlk_kind guess_kind(const dlk_tensor_spec *s)
{
    if (s->ndim == 0 && is_int_dtype(s->dtype) && is_label_name(s->name))
        return DLK_KIND_CLASS_LABEL;
    if (s->dtype == DLK_U8 && s->ndim == 3 &&
        (s->shape[2] == 1 || s->shape[2] == 3 || s->shape[2] == 4))
        return DLK_KIND_IMAGE;
    if (s->dtype == DLK_U8 && s->ndim == 4 &&
        (s->shape[3] == 1 || s->shape[3] == 3))
        return DLK_KIND_VIDEO;
    if (strcmp(s->name, "text") == 0 && s->ndim == 1)
        return DLK_KIND_TEXT;
    if (strcmp(s->name, "bbox") == 0 || strcmp(s->name, "boxes") == 0)
        return DLK_KIND_BBOX;
    return DLK_KIND_GENERIC;
}

static dlk_status parse_shape(const char *text, dlk_tensor_spec *s,
                              const char *all, dlk_error *err)
{
    s->ndim = 0;
    if (!*text || strcmp(text, "scalar") == 0)
        return DLK_OK;
    const char *p = text;
    for (;;) {
        if (s->ndim == DLK_MAX_NDIM)
            return Dlk_fail(err, DLK_EINVAL, "tensor '%s': more than %d "
                            "dimensions", all, DLK_MAX_NDIM);
        if (*p == '?') {
            s->shape[s->ndim++] = DLK_DIM_VARIABLE;
            p++;
        } else {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p || *p == '-' || *p == '+' || errno || v > UINT32_MAX)
                return Dlk_fail(err, DLK_EINVAL, "tensor '%s': bad shape "
                                "'%s' (dims like 224x224x3, '?' for variable)",
                                all, text);
            s->shape[s->ndim++] = (int64_t)v;
            p = end;
        }
        if (!*p)
            return DLK_OK;
        if (*p != 'x')
            return Dlk_fail(err, DLK_EINVAL, "tensor '%s': bad shape '%s' "
                            "(dims like 224x224x3, '?' for variable)", all,
                            text);
        p++;
    }
}

dlk_status dlk_tensor_spec_parse(const char *text, dlk_tensor_spec *out,
                                 dlk_error *err)
{
    memset(out, 0, sizeof *out);
    char buf[256];
    if (!text || strlen(text) >= sizeof buf)
        return Dlk_fail(err, DLK_EINVAL, "tensor spec too long");
    strcpy(buf, text);
    char *parts[5] = {0};
    int n = 0;
    for (char *p = buf; n < 5;) {
        parts[n++] = p;
        char *c = strchr(p, ':');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    if (n < 2 || n > 4)
        return Dlk_fail(err, DLK_EINVAL, "bad tensor spec '%s' (want "
                        "NAME:DTYPE[:SHAPE[:CODEC]])", text);
    if (strlen(parts[0]) > DLK_NAME_MAX)
        return Dlk_fail(err, DLK_EINVAL, "tensor name too long in '%s'", text);
    strcpy(out->name, parts[0]);
    if (dlk_dtype_parse(parts[1], &out->dtype))
        return Dlk_fail(err, DLK_EINVAL, "tensor '%s': unknown dtype '%s' "
                        "(u8 i8 u16 i16 u32 i32 u64 i64 f16 bf16 f32 f64 "
                        "bool)", text, parts[1]);
    dlk_status rc = parse_shape(n > 2 ? parts[2] : "", out, text, err);
    if (rc)
        return rc;
    if (n > 3) {
        const char *c = parts[3];
        if (strncmp(c, "zstd", 4) == 0) {
            out->codec = DLK_CODEC_ZSTD;
            if (c[4]) {
                char *end;
                long lv = strtol(c + 4, &end, 10);
                if (*end || lv < 1 || lv > 22)
                    return Dlk_fail(err, DLK_EINVAL, "tensor '%s': bad zstd "
                                    "level in '%s' (zstd1 to zstd22)", text,
                                    c);
                out->level = (int)lv;
            }
        } else if (dlk_codec_parse(c, &out->codec)) {
            return Dlk_fail(err, DLK_EINVAL, "tensor '%s': unknown codec "
                            "'%s' (none, zstd, zstdN)", text, c);
        }
    }
    out->kind = guess_kind(out);
    return Dlk_spec_check(out, err);
}
