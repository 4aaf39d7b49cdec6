/* types.c - names of dtypes, kinds and codecs as the format spells them. */
#include "dlk.h"

#include <string.h>

static const struct { const char *name; size_t size; } dtypes[] = {
    [DLK_U8] = {"u8", 1},    [DLK_I8] = {"i8", 1},
    [DLK_U16] = {"u16", 2},  [DLK_I16] = {"i16", 2},
    [DLK_U32] = {"u32", 4},  [DLK_I32] = {"i32", 4},
    [DLK_U64] = {"u64", 8},  [DLK_I64] = {"i64", 8},
    [DLK_F16] = {"f16", 2},  [DLK_BF16] = {"bf16", 2},
    [DLK_F32] = {"f32", 4},  [DLK_F64] = {"f64", 8},
    [DLK_BOOL] = {"bool", 1},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

static const char *const kinds[] = {
    [DLK_KIND_GENERIC] = "generic", [DLK_KIND_IMAGE] = "image",
    [DLK_KIND_VIDEO] = "video", [DLK_KIND_CLASS_LABEL] = "class_label",
    [DLK_KIND_BBOX] = "bbox", [DLK_KIND_TEXT] = "text",
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

static const char *const codecs[] = {
    [DLK_CODEC_NONE] = "none", [DLK_CODEC_ZSTD] = "zstd",
};
#define N_CODECS (sizeof codecs / sizeof codecs[0])

const char *dlk_dtype_name(dlk_dtype t)
{
    return (unsigned)t < N_DTYPES ? dtypes[t].name : NULL;
}

size_t dlk_dtype_size(dlk_dtype t)
{
    return (unsigned)t < N_DTYPES ? dtypes[t].size : 0;
}

int dlk_dtype_parse(const char *name, dlk_dtype *out)
{
    for (unsigned i = 1; name && i < N_DTYPES; i++)
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (dlk_dtype)i;
            return 0;
        }
    return -1;
}

const char *dlk_kind_name(dlk_kind k)
{
    return (unsigned)k < N_KINDS ? kinds[k] : NULL;
}

int dlk_kind_parse(const char *name, dlk_kind *out)
{
    for (unsigned i = 0; name && i < N_KINDS; i++)
        if (strcmp(name, kinds[i]) == 0) {
            *out = (dlk_kind)i;
            return 0;
        }
    return -1;
}

const char *dlk_codec_name(dlk_codec c)
{
    return (unsigned)c < N_CODECS ? codecs[c] : NULL;
}

int dlk_codec_parse(const char *name, dlk_codec *out)
{
    for (unsigned i = 0; name && i < N_CODECS; i++)
        if (strcmp(name, codecs[i]) == 0) {
            *out = (dlk_codec)i;
            return 0;
        }
    return -1;
}
