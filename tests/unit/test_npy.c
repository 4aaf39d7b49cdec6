/* test_npy.c - the .npy header parser: valid headers of several dtypes,
 * shapes and versions; big-endian data flagged for swapping; and hostile
 * files, each a clean DLK_EDECODE naming the file. */
#include "util/bytes.h"
#include "format/npy.h"
#include "unit.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define NAME "in/0001.images.npy"

static uint8_t file[1 << 18];
static size_t flen;

/* A .npy file: magic, version, header length, dict (padded with spaces
 * and a newline to 64 bytes as numpy does unless raw), data_len zeros. */
static void make(int major, const char *dict, size_t data_len, bool pad)
{
    size_t pre = major == 1 ? 10 : 12, n = strlen(dict);
    size_t hlen = n + 1;
    if (pad)
        hlen = (pre + n + 1 + 63) / 64 * 64 - pre;
    memcpy(file, "\x93NUMPY", 6);
    file[6] = (uint8_t)major;
    file[7] = 0;
    if (major == 1)
        Dlk_put_le16(file + 8, (uint16_t)hlen);
    else
        Dlk_put_le32(file + 8, (uint32_t)hlen);
    memcpy(file + pre, dict, n);
    memset(file + pre + n, ' ', hlen - n - 1);
    file[pre + hlen - 1] = '\n';
    memset(file + pre + hlen, 0, data_len);
    flen = pre + hlen + data_len;
}

static Dlk_npy_info info;
static dlk_error last;

static dlk_status parse_len(size_t len)
{
    memset(&last, 0, sizeof last);
    return Dlk_npy_parse(file, len, NAME, &info, &last);
}

static bool bad_len(size_t len)
{
    dlk_status rc = parse_len(len);
    if (rc != DLK_EDECODE || last.code != rc || !strstr(last.msg, NAME)) {
        printf("# status %d: %s\n", rc, last.msg);
        return false;
    }
    return true;
}
#define BAD() bad_len(flen)

static bool good(dlk_dtype dt, int ndim, size_t bytes)
{
    dlk_status rc = parse_len(flen);
    if (rc) {
        printf("# %s\n", last.msg);
        return false;
    }
    return info.dtype == dt && info.ndim == ndim &&
           info.data_bytes == bytes && info.data_off + bytes == flen &&
           info.data_off % 64 == 0;
}

#define DICT(descr, shape) \
    "{'descr': '" descr "', 'fortran_order': False, 'shape': " shape ", }"

static void valid(void)
{
    make(1, DICT("|u1", "(3,)"), 3, true);
    UNIT_CHECK("u1 (3,)", good(DLK_U8, 1, 3) && info.shape[0] == 3 &&
               !info.swap);
    make(1, DICT("<i4", "(2, 3)"), 24, true);
    UNIT_CHECK("<i4 (2, 3)", good(DLK_I32, 2, 24) && info.shape[1] == 3 &&
               !info.swap);
    make(1, DICT("<f8", "()"), 8, true);
    UNIT_CHECK("<f8 scalar ()", good(DLK_F64, 0, 8));
    make(1, DICT("|b1", "(4,)"), 4, true);
    UNIT_CHECK("|b1 (4,)", good(DLK_BOOL, 1, 4));
    make(1, DICT("<f2", "(2, 2)"), 8, true);
    UNIT_CHECK("<f2 (2, 2)", good(DLK_F16, 2, 8));
    make(1, DICT("<u2", "(0, 5)"), 0, true);
    UNIT_CHECK("<u2 (0, 5): empty", good(DLK_U16, 2, 0));
    make(1, DICT("<i8", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 8, true);
    UNIT_CHECK("<i8 of 9 dimensions (a batch of 8-d samples)",
               good(DLK_I64, 9, 8));
    make(1, DICT("<u8", "(5,)"), 40, true);
    UNIT_CHECK("<u8", good(DLK_U64, 1, 40));
    make(1, DICT("<i2", "(5,)"), 10, true);
    UNIT_CHECK("<i2", good(DLK_I16, 1, 10));
    make(1, DICT("|i1", "(5,)"), 5, true);
    UNIT_CHECK("|i1", good(DLK_I8, 1, 5));
    make(1, DICT("<u4", "(5,)"), 20, true);
    UNIT_CHECK("<u4", good(DLK_U32, 1, 20));
    make(1, DICT("<f4", "(3,)"), 12, true);
    UNIT_CHECK("<f4", good(DLK_F32, 1, 12));
    make(1, "{\"descr\": \"<f4\", 'fortran_order': False, 'shape': (3,), }",
         12, true);
    /* dict_value looks for 'descr': with single quotes only */
    dlk_status rc = parse_len(flen);
    UNIT_CHECK("double-quoted keys: a clean verdict",
               rc == DLK_OK || (rc == DLK_EDECODE && strstr(last.msg, NAME)));
    make(2, DICT("<i4", "(7,)"), 28, true);
    UNIT_CHECK("version 2 header", good(DLK_I32, 1, 28));
    make(3, DICT("<i4", "(7,)"), 28, true);
    UNIT_CHECK("version 3 header", good(DLK_I32, 1, 28));
    make(1, "{'shape': (2,), 'fortran_order': False, 'descr': '<u2'}", 4,
         false);
    UNIT_CHECK("keys in another order, no padding",
               parse_len(flen) == DLK_OK && info.dtype == DLK_U16 &&
               info.shape[0] == 2 && info.data_bytes == 4);

    make(1, DICT(">i4", "(6, 4)"), 96, true);
    UNIT_CHECK("big-endian >i4 accepted with the swap flag",
               good(DLK_I32, 2, 96) && info.swap);
    make(1, DICT(">f8", "(3,)"), 24, true);
    UNIT_CHECK("big-endian >f8: swap", good(DLK_F64, 1, 24) && info.swap);
    make(1, DICT(">u1", "(3,)"), 3, true);
    UNIT_CHECK("'>u1': one byte, no swap", good(DLK_U8, 1, 3) && !info.swap);
    make(1, DICT("=i2", "(3,)"), 6, true);
    UNIT_CHECK("'=i2': native (little-endian), no swap",
               good(DLK_I16, 1, 6) && !info.swap);

    /* dlk's own writer */
    int64_t shape[3] = {2, 3, 4};
    char hdr[512];
    size_t hl;
    bool ok = dlk_npy_header(DLK_F32, 3, shape, hdr, sizeof hdr, &hl, NULL) ==
              DLK_OK;
    memcpy(file, hdr, hl);
    memset(file + hl, 0, 96);
    flen = hl + 96;
    UNIT_CHECK("dlk_npy_header output parses", ok && good(DLK_F32, 3, 96) &&
               info.shape[2] == 4);
}

static void hostile(void)
{
    make(1, DICT("<i4", "(2,)"), 8, true);
    memcpy(file, "\x93NUMPZ", 6);
    UNIT_CHECK("bad magic", BAD() && strstr(last.msg, "not a .npy"));
    make(1, DICT("<i4", "(2,)"), 8, true);
    UNIT_CHECK("empty file", bad_len(0));
    UNIT_CHECK("9 bytes", bad_len(9));
    UNIT_CHECK("magic and version only (10 bytes)", bad_len(10));
    UNIT_CHECK("truncated in the header", bad_len(40));
    UNIT_CHECK("truncated in the data", bad_len(flen - 1));
    UNIT_CHECK("data one byte too long", bad_len(flen + 1));
    make(2, DICT("<i4", "(2,)"), 8, true);
    UNIT_CHECK("version 2 file of 11 bytes", bad_len(11));
    Dlk_put_le32(file + 8, 0xffffffffu);
    UNIT_CHECK("version 2 header length 2^32-1", BAD());
    Dlk_put_le32(file + 8, 70000);
    memset(file + 12, ' ', 70000);
    flen = 12 + 70000;
    UNIT_CHECK("header of 70000 bytes (over 64 KiB)", BAD());
    make(1, DICT("<i4", "(2,)"), 8, true);
    Dlk_put_le16(file + 8, 0xffff);
    UNIT_CHECK("header length past the end", BAD() &&
               strstr(last.msg, "does not fit"));
    make(1, DICT("<i4", "(2,)"), 8, true);
    file[6] = 4;
    UNIT_CHECK("version 4", BAD() && strstr(last.msg, "version 4"));
    file[6] = 0;
    UNIT_CHECK("version 0", BAD());
    make(1, DICT("<i4", "(2,)"), 8, true);
    file[20] = '\0';
    UNIT_CHECK("NUL in the header", BAD());

    static const char *const dicts[] = {
        "{'fortran_order': False, 'shape': (2,), }",
        "{'descr': <i4, 'fortran_order': False, 'shape': (2,), }",
        DICT("<c8", "(1,)"), DICT("<U4", "(2,)"), DICT("|O", "(1,)"),
        DICT("<i3", "(2,)"), DICT("<i", "(2,)"), DICT("", "(2,)"),
        "{'descr': '<i4, 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<i4\", 'fortran_order': False, 'shape': (2,), }",
        DICT("<i44", "(2,)"), DICT("i4", "(2,)"), DICT("!i4", "(2,)"),
        "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }",
        "{'descr': '<i4', 'shape': (2,), }",
        "{'descr': '<i4', 'fortran_order': 0, 'shape': (2,), }",
        "{'descr': '<i4', 'fortran_order': False, }",
        DICT("<i4", "[2]"), DICT("<i4", "2"), DICT("<i4", "(-2,)"),
        DICT("<i4", "(+2,)"), DICT("<i4", "(2x,)"), DICT("<i4", "(2"),
        DICT("<i4", "(2.0,)"), DICT("<i4", "(None,)"),
        DICT("<i4", "(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)"),
        DICT("<i4", "(4294967296,)"),
        DICT("<i4", "(99999999999999999999999,)"),
        DICT("<i4", "(4294967295, 4294967295, 4294967295)"),
        DICT("<u8", "(4294967295, 4294967295)"),
        DICT("<i4", "(3,)"),   /* 8 data bytes, the shape needs 12 */
        DICT("<i4", "(0,)"),
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "header %.80s: decode error", dicts[i]);
        make(1, dicts[i], 8, true);
        UNIT_CHECK(name, BAD());
    }
    /* a header that is all 'shape' digits: bounded, no overflow */
    char big[4000];
    strcpy(big, "{'descr': '<i4', 'fortran_order': False, 'shape': (");
    size_t k = strlen(big);
    memset(big + k, '9', 3000);
    strcpy(big + k + 3000, ",), }");
    make(1, big, 8, true);
    UNIT_CHECK("a dimension of 3000 digits", BAD());
    /* header text without a terminating brace or newline: bounded */
    make(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (", 0, false);
    UNIT_CHECK("header ending inside the shape", BAD());
}

static bool replay_npy(const uint8_t *p, size_t len)
{
    memset(&last, 0, sizeof last);
    dlk_status rc = Dlk_npy_parse(p ? p : (const uint8_t *)"", len, NAME,
                                  &info, &last);
    bool ok = rc == DLK_EDECODE && last.code == rc &&
              strstr(last.msg, NAME) != NULL;
    if (!ok)
        printf("# status %d: %s\n", rc, last.msg);
    return ok;
}

/* Dlk_npy_parse_head: the header from the first bytes of a file of a
 * given size, its data checked against that size, not read. */
static void head_only(void)
{
    make(1, DICT("<f4", "(8,)"), 32, true);
    size_t full = flen, hdr = flen - 32;
    memset(&last, 0, sizeof last);
    UNIT_CHECK("the header alone of an f4 (8,) file",
               Dlk_npy_parse_head(file, hdr, full, NAME, &info, &last) == DLK_OK &&
               info.dtype == DLK_F32 && info.ndim == 1 && info.shape[0] == 8 &&
               info.data_off == hdr && info.data_bytes == 32);
    UNIT_CHECK("more bytes than the size are not read past it",
               Dlk_npy_parse_head(file, full + 100, full, NAME, &info, &last) == DLK_OK);
    memset(&last, 0, sizeof last);
    UNIT_CHECK("a size short of the shape's data is an error naming the file",
               Dlk_npy_parse_head(file, hdr, full - 4, NAME, &info, &last) == DLK_EDECODE &&
               strstr(last.msg, NAME) && strstr(last.msg, "28 bytes"));
    memset(&last, 0, sizeof last);
    UNIT_CHECK("bytes that stop inside the header are an error",
               Dlk_npy_parse_head(file, hdr - 10, full, NAME, &info, &last) == DLK_EDECODE &&
               strstr(last.msg, NAME));
}

int main(void)
{
    valid();
    head_only();
    hostile();
    unit_replay("npy", replay_npy, true);
    unit_replay("fuzz_npy", replay_npy, false);
    return unit_done();
}
