/* test_manifest.c - the manifest JSON reader and writer: a round trip, and
 * hostile documents (malformed, deep, huge numbers, wrong types, missing
 * fields, bad chunk entries, over the size limit), each a clean error that
 * names the document; a replay of tests/corrupt/fuzz_manifest/. */
#include "util/error.h"
#include "util/hash.h"
#include "format/manifest.h"
#include "format/docs.h"
#include "format/json.h"
#include "unit.h"

#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define DOC "staging/manifest.json"
#define K1 "0123456789abcdef0123456789abcdef"
#define K2 "fedcba9876543210fedcba9876543210"

/* The fields of a valid tensor; a test replaces or drops one of them. */
static const char *const fields[][2] = {
    {"name", "\"images\""},
    {"dtype", "\"u8\""},
    {"kind", "\"image\""},
    {"shape", "[-1, -1, 3]"},
    {"codec", "\"zstd\""},
    {"level", "5"},
    {"chunk_bytes", "1048576"},
    {"class_names", "[\"cat\", \"dog\"]"},
    {"samples", "5"},
    {"shape_min", "[1, 2, 3]"},
    {"shape_max", "[9, 8, 3]"},
    {"chunks", "[[\"" K1 "\", 2, 100, 54], [\"" K2 "\", 3, 120, 81]]"},
};
#define NFIELDS (sizeof fields / sizeof fields[0])

static char text[1 << 20];

/* A manifest with one tensor whose field `field` has value `value` (NULL:
 * the field is left out). */
static const char *doc_with(const char *field, const char *value)
{
    size_t n = (size_t)snprintf(text, sizeof text, "{\"format\": \"dlk\", "
                                "\"version\": 1, \"parent\": null, "
                                "\"tensors\": [{");
    bool first = true;
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *v = fields[i][1];
        if (field && strcmp(field, fields[i][0]) == 0)
            v = value;
        if (!v)
            continue;
        n += (size_t)snprintf(text + n, sizeof text - n, "%s\"%s\": %s",
                              first ? "" : ", ", fields[i][0], v);
        first = false;
    }
    snprintf(text + n, sizeof text - n, "}]}");
    return text;
}

static dlk_error last;

static dlk_status parse(const char *json, size_t len, Dlk_manifest *m)
{
    memset(&last, 0, sizeof last);
    return Dlk_manifest_parse(json, len, DOC, m, &last);
}

/* The document fails with `code`, a message naming it, nothing kept. */
static bool fails(const char *json, size_t len, dlk_status code)
{
    Dlk_manifest m;
    dlk_status rc = parse(json, len, &m);
    bool ok = rc == code && last.code == code && strstr(last.msg, DOC) &&
              m.ntensors == 0 && m.tensors == NULL && m.parent == NULL;
    if (!ok)
        printf("# status %d, want %d: %s\n", rc, code, last.msg);
    if (rc == DLK_OK)
        Dlk_manifest_free(&m);
    return ok;
}
#define CORRUPT(json) fails((json), strlen(json), DLK_ECORRUPT)

static bool parses(const char *json)
{
    Dlk_manifest m;
    dlk_status rc = parse(json, strlen(json), &m);
    if (rc)
        printf("# %s\n", last.msg);
    else
        Dlk_manifest_free(&m);
    return rc == DLK_OK;
}

static void round_trip(void)
{
    Dlk_manifest m, m2;
    const char *j = doc_with(NULL, NULL);
    bool ok = parse(j, strlen(j), &m) == DLK_OK;
    UNIT_CHECK("valid manifest parses", ok);
    if (!ok) {
        printf("# %s\n", last.msg);
        return;
    }
    const Dlk_tensor *t = &m.tensors[0];
    UNIT_CHECK("parsed fields",
               m.ntensors == 1 && m.parent == NULL &&
               strcmp(t->spec.name, "images") == 0 &&
               t->spec.dtype == DLK_U8 && t->spec.kind == DLK_KIND_IMAGE &&
               t->spec.ndim == 3 && t->spec.shape[0] == DLK_DIM_VARIABLE &&
               t->spec.shape[2] == 3 && t->spec.codec == DLK_CODEC_ZSTD &&
               t->spec.level == 5 && t->spec.chunk_bytes == 1048576 &&
               t->n_class_names == 2 && strcmp(t->class_names[1], "dog") == 0 &&
               t->samples == 5 && t->nchunks == 2 && t->have_minmax &&
               t->shape_min[1] == 2 && t->shape_max[0] == 9);
    UNIT_CHECK("chunk entries and their first samples",
               strcmp(t->chunks[1].key, K2) == 0 && t->chunks[1].first == 2 &&
               t->chunks[1].samples == 3 && t->chunks[1].stored_bytes == 120 &&
               t->chunks[1].raw_bytes == 81 && t->stored_bytes == 220 &&
               t->raw_bytes == 135);
    UNIT_CHECK("find_chunk", Dlk_tensor_find_chunk(t, 0) == 0 &&
               Dlk_tensor_find_chunk(t, 1) == 0 &&
               Dlk_tensor_find_chunk(t, 2) == 1 &&
               Dlk_tensor_find_chunk(t, 4) == 1 &&
               Dlk_tensor_find_chunk(t, 5) == -1);

    char *out = NULL, *out2 = NULL;
    size_t len = 0, len2 = 0;
    ok = Dlk_manifest_dump(&m, &out, &len, NULL) == DLK_OK &&
         parse(out, len, &m2) == DLK_OK;
    UNIT_CHECK("dump parses again", ok);
    if (ok) {
        const Dlk_tensor *u = &m2.tensors[0];
        UNIT_CHECK("round trip keeps every field",
                   m2.ntensors == 1 && u->samples == 5 && u->nchunks == 2 &&
                   u->spec.level == 5 && u->n_class_names == 2 &&
                   u->have_minmax && u->shape_max[1] == 8 &&
                   strcmp(u->chunks[0].key, K1) == 0 &&
                   memcmp(u->spec.shape, t->spec.shape,
                          sizeof u->spec.shape) == 0);
        UNIT_CHECK("dump of the dump is the same text",
                   Dlk_manifest_dump(&m2, &out2, &len2, NULL) == DLK_OK &&
                   len2 == len && memcmp(out, out2, len) == 0);
        Dlk_manifest_free(&m2);
    }
    free(out);
    free(out2);
    Dlk_manifest_free(&m);

    /* a parent, optional fields left out, an empty tensor */
    const char *j2 =
        "{\"format\":\"dlk\",\"version\":1,\"parent\":\"" K1 "\",\"tensors\":"
        "[{\"name\":\"x\",\"dtype\":\"f32\",\"kind\":\"generic\",\"shape\":[],"
        "\"codec\":\"none\",\"chunk_bytes\":0,\"samples\":0,\"chunks\":[]},"
        "{\"name\":\"y\",\"dtype\":\"bool\",\"kind\":\"generic\",\"shape\":[2],"
        "\"codec\":\"none\",\"chunk_bytes\":64,\"samples\":2,\"chunks\":"
        "[[\"" K1 "\",2,68,4]]}]}";
    ok = parse(j2, strlen(j2), &m) == DLK_OK;
    UNIT_CHECK("parent, no optional fields, empty tensor",
               ok && m.parent && strcmp(m.parent, K1) == 0 &&
               m.ntensors == 2 && !m.tensors[0].have_minmax &&
               m.tensors[0].spec.chunk_bytes == DLK_DEFAULT_CHUNK_BYTES &&
               m.tensors[1].samples == 2);
    if (!ok)
        printf("# %s\n", last.msg);
    ok = ok && Dlk_manifest_dump(&m, &out, &len, NULL) == DLK_OK &&
         parse(out, len, &m2) == DLK_OK;
    UNIT_CHECK("its round trip", ok && m2.parent &&
               strcmp(m2.parent, K1) == 0 && m2.ntensors == 2 &&
               m2.tensors[1].nchunks == 1);
    if (ok) {
        free(out);
        Dlk_manifest_free(&m2);
    }
    Dlk_manifest_free(&m);
    UNIT_CHECK("no tensors at all parses",
               parses("{\"format\":\"dlk\",\"version\":1,\"tensors\":[]}"));
    UNIT_CHECK("missing optional level, class_names, shape_min/max parse",
               parses(doc_with("level", NULL)) &&
               parses(doc_with("class_names", NULL)) &&
               parses(doc_with("shape_min", NULL)) &&
               parses(doc_with("shape_max", NULL)));
}

static void malformed(void)
{
    static const char *const bad[] = {
        "", " ", "{", "}", "nul", "[]", "1", "\"dlk\"", "null",
        "{\"format\":\"dlk\",}",
        "{\"format\":\"dlk\",\"version\":1,\"tensors\":[]",
        "{\"format\":\"dlk\",\"version\":1,\"tensors\":[]}}",
        "{\"format\":\"dlk\",\"version\":1,\"tensors\":[]} x",
        "{'format':'dlk'}",
        "{\"format\":\"dl\\u0000k\",\"version\":1,\"tensors\":[]}",
        "{\"format\":\"dlk\",\"version\":1,\"tensors\":[],\"x\":\"\\ud800\"}",
        "{\"format\":\"dlk\",\"version\":1,\"tensors\":[],\"x\":\"\xff\"}",
        "{\"format\":\"dlk\",\"format\":\"dlk\",\"version\":1,\"tensors\":[]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "malformed document %zu: corrupt", i);
        UNIT_CHECK(name, CORRUPT(bad[i]));
    }
    /* embedded NUL: the length given, not strlen, is the document */
    static const char nul[] = "{\"format\":\"dlk\",\"version\":1,"
                              "\"tensors\":[]}\0garbage";
    UNIT_CHECK("NUL byte inside the document: corrupt",
               fails(nul, sizeof nul - 1, DLK_ECORRUPT));
}

static void deep(void)
{
    size_t n = 100000;
    const char *pre = "{\"format\":\"dlk\",\"version\":1,\"tensors\":";
    char *p = malloc(strlen(pre) + 2 * n + 2);
    strcpy(p, pre);
    char *q = p + strlen(pre);
    memset(q, '[', n);
    memset(q + n, ']', n);
    strcpy(q + 2 * n, "}");
    UNIT_CHECK("100000 nested arrays: corrupt, no stack overflow",
               fails(p, strlen(p), DLK_ECORRUPT));
    UNIT_CHECK("100000 '[' alone: corrupt", fails(q, n, DLK_ECORRUPT));
    for (size_t i = 0; i < n; i++)
        q[i] = (i % 5 == 4) ? '[' : ' ';
    UNIT_CHECK("'[' spread among spaces: corrupt", fails(q, n, DLK_ECORRUPT));
    char *o = malloc(6 * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(o + 5 * i, "{\"a\":", 5);
    o[5 * n] = '\0';
    UNIT_CHECK("100000 nested objects: corrupt",
               fails(o, 5 * n, DLK_ECORRUPT));
    free(o);
    free(p);
}

static void numbers(void)
{
    UNIT_CHECK("version 1e400: corrupt",
               CORRUPT("{\"format\":\"dlk\",\"version\":1e400,\"tensors\":[]}"));
    UNIT_CHECK("version 99999999999999999999999: corrupt",
               CORRUPT("{\"format\":\"dlk\",\"version\":"
                       "99999999999999999999999,\"tensors\":[]}"));
    UNIT_CHECK("version 1.0: corrupt",
               CORRUPT("{\"format\":\"dlk\",\"version\":1.0,\"tensors\":[]}"));
    UNIT_CHECK("samples 1e400: corrupt", CORRUPT(doc_with("samples", "1e400")));
    UNIT_CHECK("samples 99999999999999999999999: corrupt",
               CORRUPT(doc_with("samples", "99999999999999999999999")));
    UNIT_CHECK("samples 2^63-1: corrupt",
               CORRUPT(doc_with("samples", "9223372036854775807")));
    UNIT_CHECK("samples -2^63: corrupt",
               CORRUPT(doc_with("samples", "-9223372036854775808")));
    UNIT_CHECK("chunk_bytes 1e400: corrupt",
               CORRUPT(doc_with("chunk_bytes", "1e400")));
    UNIT_CHECK("a dimension of 1e400: corrupt",
               CORRUPT(doc_with("shape", "[1e400, 1, 3]")));
    UNIT_CHECK("a dimension of 99999999999999999999999: corrupt",
               CORRUPT(doc_with("shape", "[99999999999999999999999, 1, 3]")));
    UNIT_CHECK("a chunk of 1e400 samples: corrupt",
               CORRUPT(doc_with("chunks", "[[\"" K1 "\", 1e400, 100, 54]]")));
    UNIT_CHECK("a chunk of 2^64 raw bytes: corrupt",
               CORRUPT(doc_with("chunks", "[[\"" K1 "\", 5, 100, "
                                "18446744073709551616]]")));
}

/* Every field given a value of a wrong type or out of range. */
static void wrong_values(void)
{
    static const char *const bad[][2] = {
        {"name", "5"}, {"name", "null"}, {"name", "\"\""}, {"name", "[]"},
        {"name", "\"a/b\""}, {"name", "\".hidden\""}, {"name", "\"a b\""},
        {"name", "\"x123456789012345678901234567890123456789012345678901234"
                 "5678901234\""},   /* 65 characters */
        {"name", "\"x1234567890123456789012345678901234567890123456789012345"
                 "6789012345678901234567890\""},
        {"dtype", "1"}, {"dtype", "\"u9\""}, {"dtype", "\"U8\""},
        {"dtype", "null"}, {"dtype", "\"\""},
        {"kind", "2"}, {"kind", "\"picture\""}, {"kind", "{}"},
        {"shape", "\"3\""}, {"shape", "3"}, {"shape", "{}"}, {"shape", "null"},
        {"shape", "[1, 2, 3, 4, 5, 6, 7, 8, 9]"}, {"shape", "[-2, 1, 3]"},
        {"shape", "[4294967296, 1, 3]"}, {"shape", "[1.5, 1, 3]"},
        {"shape", "[\"1\", 1, 3]"}, {"shape", "[null, 1, 3]"},
        {"shape", "[[1], 1, 3]"},
        {"codec", "1"}, {"codec", "\"lz4\""}, {"codec", "null"},
        {"level", "\"5\""}, {"level", "-1"}, {"level", "23"},
        {"level", "1.0"}, {"level", "null"}, {"level", "true"},
        {"chunk_bytes", "\"1M\""}, {"chunk_bytes", "-1"},
        {"chunk_bytes", "1073741825"}, {"chunk_bytes", "1e3"},
        {"chunk_bytes", "null"},
        {"class_names", "\"cat\""}, {"class_names", "[1]"},
        {"class_names", "[\"cat\", null]"}, {"class_names", "{}"},
        {"samples", "\"5\""}, {"samples", "-5"}, {"samples", "5.0"},
        {"samples", "null"}, {"samples", "4"}, {"samples", "6"},
        {"samples", "0"},
        {"shape_min", "[1, 2]"}, {"shape_min", "[-1, 2, 3]"},
        {"shape_min", "\"x\""}, {"shape_min", "[1, 2, 3, 4]"},
        {"shape_max", "[1, 2, 4294967296]"}, {"shape_max", "{}"},
        {"chunks", "{}"}, {"chunks", "\"x\""}, {"chunks", "null"},
        {"chunks", "[[\"" K1 "\", 5, 100, 54], 7]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "'%s': %.40s: corrupt", bad[i][0],
                 bad[i][1]);
        UNIT_CHECK(name, CORRUPT(doc_with(bad[i][0], bad[i][1])));
    }
    /* the same dimension count where shape_min and shape_max are parsed */
    UNIT_CHECK("a level with codec none: corrupt",
               CORRUPT(doc_with("codec", "\"none\"")));
}

static void missing(void)
{
    static const char *const required[] = {"name", "dtype", "kind", "shape",
                                           "codec", "chunk_bytes", "samples",
                                           "chunks"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "missing '%s': corrupt", required[i]);
        UNIT_CHECK(name, CORRUPT(doc_with(required[i], NULL)));
    }
    UNIT_CHECK("missing 'format': corrupt",
               CORRUPT("{\"version\":1,\"tensors\":[]}"));
    UNIT_CHECK("'format' not dlk: corrupt",
               CORRUPT("{\"format\":\"dlx\",\"version\":1,\"tensors\":[]}"));
    UNIT_CHECK("'format' a number: corrupt",
               CORRUPT("{\"format\":1,\"version\":1,\"tensors\":[]}"));
    UNIT_CHECK("missing 'version': corrupt",
               CORRUPT("{\"format\":\"dlk\",\"tensors\":[]}"));
    UNIT_CHECK("'version' a string: corrupt",
               CORRUPT("{\"format\":\"dlk\",\"version\":\"1\",\"tensors\":[]}"));
    UNIT_CHECK("missing 'tensors': corrupt",
               CORRUPT("{\"format\":\"dlk\",\"version\":1}"));
    UNIT_CHECK("'tensors' an object: corrupt",
               CORRUPT("{\"format\":\"dlk\",\"version\":1,\"tensors\":{}}"));
    UNIT_CHECK("a tensor that is not an object: corrupt",
               CORRUPT("{\"format\":\"dlk\",\"version\":1,\"tensors\":[1]}"));
    UNIT_CHECK("'parent' a number: corrupt",
               CORRUPT("{\"format\":\"dlk\",\"version\":1,\"parent\":5,"
                       "\"tensors\":[]}"));
    const char *v2 = "{\"format\":\"dlk\",\"version\":2,\"tensors\":[]}";
    UNIT_CHECK("version 2: unsupported",
               fails(v2, strlen(v2), DLK_EUNSUPPORTED) &&
               strstr(last.msg, "version 2"));
    const char *v0 = "{\"format\":\"dlk\",\"version\":0,\"tensors\":[]}";
    UNIT_CHECK("version 0: unsupported",
               fails(v0, strlen(v0), DLK_EUNSUPPORTED));
}

static void duplicates(void)
{
    const char *t = "{\"name\":\"x\",\"dtype\":\"u8\",\"kind\":\"generic\","
                    "\"shape\":[],\"codec\":\"none\",\"chunk_bytes\":64,"
                    "\"samples\":0,\"chunks\":[]}";
    char d[1024];
    snprintf(d, sizeof d, "{\"format\":\"dlk\",\"version\":1,\"tensors\":"
             "[%s,%s]}", t, t);
    UNIT_CHECK("duplicate tensor names: corrupt",
               CORRUPT(d) && strstr(last.msg, "twice"));
    snprintf(d, sizeof d, "{\"format\":\"dlk\",\"version\":1,\"tensors\":"
             "[{\"name\":\"x\",\"name\":\"y\"}]}");
    UNIT_CHECK("duplicate keys in a tensor: corrupt", CORRUPT(d));

    /* 4097 tensors: refused by count before any is parsed */
    size_t n = 4097;
    char *big = malloc(64 + 2 * n);
    size_t k = (size_t)sprintf(big, "{\"format\":\"dlk\",\"version\":1,"
                                    "\"tensors\":[");
    for (size_t i = 0; i < n; i++) {
        big[k++] = '0';
        big[k++] = i + 1 < n ? ',' : ']';
    }
    strcpy(big + k, "}");
    UNIT_CHECK("4097 tensors: limit", fails(big, strlen(big), DLK_ELIMIT));
    free(big);
}

static void chunk_entries(void)
{
    static const char *const bad[] = {
        "[5]", "[[\"" K1 "\", 5, 100]]",
        "[[\"" K1 "\", 5, 100, 54, 0]]",
        "[{\"key\": \"" K1 "\"}]",
        "[[\"0123456789abcdef0123456789abcde\", 5, 100, 54]]",    /* 31 */
        "[[\"0123456789abcdef0123456789abcdef0\", 5, 100, 54]]",  /* 33 */
        "[[\"0123456789ABCDEF0123456789abcdef\", 5, 100, 54]]",
        "[[\"0123456789abcdeg0123456789abcdef\", 5, 100, 54]]",
        "[[\"../../../etc/passwd/0123456789ab\", 5, 100, 54]]",
        "[[5, 5, 100, 54]]", "[[null, 5, 100, 54]]",
        "[[\"" K1 "\", 0, 100, 54]]", "[[\"" K1 "\", -5, 100, 54]]",
        "[[\"" K1 "\", 67108865, 100, 54]]",
        "[[\"" K1 "\", \"5\", 100, 54]]", "[[\"" K1 "\", 5.0, 100, 54]]",
        "[[\"" K1 "\", 5, 63, 54]]", "[[\"" K1 "\", 5, -1, 54]]",
        "[[\"" K1 "\", 5, \"100\", 54]]",
        "[[\"" K1 "\", 5, 100, -1]]", "[[\"" K1 "\", 5, 100, 2147483649]]",
        "[[\"" K1 "\", 5, 100, null]]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "chunk entry %.60s: corrupt", bad[i]);
        UNIT_CHECK(name, CORRUPT(doc_with("chunks", bad[i])) &&
                   strstr(last.msg, "images"));
    }
    UNIT_CHECK("samples not matching the chunks: corrupt",
               CORRUPT(doc_with("samples", "7")) &&
               strstr(last.msg, "its chunks hold 5"));
    /* sample counts that would overflow if summed without care: many
     * chunks of the maximum size are fine, the declared total must match */
    char *many = malloc(1 << 20);
    size_t k = (size_t)sprintf(many, "[");
    for (int i = 0; i < 1000; i++)
        k += (size_t)sprintf(many + k, "%s[\"" K1 "\", 67108864, 100, 0]",
                             i ? "," : "");
    strcpy(many + k, "]");
    char *d = strdup(doc_with("chunks", many));
    /* 1000 * 2^26 samples; "samples" still says 5 */
    UNIT_CHECK("1000 maximal chunks against samples 5: corrupt", CORRUPT(d));
    free(d);
    free(many);
    /* each entry's object size is in range (64..2^63-1), but their sum
     * does not fit: the tensor's stored_bytes would wrap (dlk ls --json
     * printed -2) */
    UNIT_CHECK("chunk sizes whose sum overflows: corrupt",
               CORRUPT(doc_with("chunks", "[[\"" K1 "\", 2, "
                                "9223372036854775807, 54], [\"" K2 "\", 3, "
                                "9223372036854775807, 81]]")));
}

static void size_limit(void)
{
    /* Dlk_json_load checks the length before it reads a byte: a length
     * over the limit with a small buffer is safe (ASan would see a read) */
    static const char small[] = "{}";
    Dlk_manifest m;
    dlk_status rc = parse(small, DLK_JSON_MAX_BYTES + 1, &m);
    UNIT_CHECK("a manifest of 256 MiB + 1 is refused by size",
               rc == DLK_ELIMIT && strstr(last.msg, DOC) &&
               strstr(last.msg, "limit"));
    rc = parse(small, (size_t)300 << 20, &m);
    UNIT_CHECK("a manifest of 300 MB is refused by size", rc == DLK_ELIMIT);
    rc = parse(small, SIZE_MAX, &m);
    UNIT_CHECK("a manifest of SIZE_MAX bytes is refused by size",
               rc == DLK_ELIMIT);

    dlk_error err = {0};
    json_t *j = Dlk_json_load(small, DLK_JSON_MAX_BYTES + 1, "dlk.json",
                              "dataset description", &err);
    UNIT_CHECK("Dlk_json_load: over the limit",
               !j && err.code == DLK_ELIMIT && strstr(err.msg, "dlk.json"));
    const char *v2 = "{\"format\":\"dlk\",\"version\":2,\"id\":\"x\"}";
    j = Dlk_json_load(v2, strlen(v2), "dlk.json", "dataset description",
                      &err);
    UNIT_CHECK("Dlk_json_load: version 2 is unsupported",
               !j && err.code == DLK_EUNSUPPORTED &&
               strstr(err.msg, "dataset description"));
    const char *ok = "{\"format\":\"dlk\",\"version\":1,\"id\":\"x\"}";
    j = Dlk_json_load(ok, strlen(ok), "dlk.json", "dataset description",
                      &err);
    UNIT_CHECK("Dlk_json_load: a valid description", j != NULL);
    json_decref(j);
    j = Dlk_json_load("[1]", 3, "dlk.json", "dataset description", &err);
    UNIT_CHECK("Dlk_json_load: not an object", !j &&
               err.code == DLK_ECORRUPT);
    UNIT_CHECK("parse without an error struct", Dlk_manifest_parse(
               "{", 1, DOC, &m, NULL) == DLK_ECORRUPT);
}

/* ---- key_index (formats 6.9) ---------------------------------------- */

static void key_index(void)
{
    const char *hex = "0123456789abcdef0123456789abcdef";
    char doc[512];
    snprintf(doc, sizeof doc, "{\"format\":\"dlk\",\"version\":1,"
             "\"parent\":null,\"tensors\":[],\"key_index\":{\"object\":"
             "\"index/keys/%s\",\"rows\":7}}", hex);
    Dlk_manifest m;
    dlk_status rc = parse(doc, strlen(doc), &m);
    UNIT_CHECK("key_index: parsed", rc == DLK_OK &&
               strcmp(m.key_index + strlen("index/keys/"), hex) == 0 &&
               m.key_index_rows == 7);
    char *out = NULL;
    size_t len;
    if (!rc && !Dlk_manifest_dump(&m, &out, &len, NULL)) {
        Dlk_manifest m2;
        UNIT_CHECK("key_index: dumped as read", strstr(out, hex) &&
                   parse(out, len, &m2) == DLK_OK &&
                   strcmp(m2.key_index, m.key_index) == 0 &&
                   m2.key_index_rows == 7);
        Dlk_manifest_free(&m2);
    }
    free(out);
    if (!rc)
        Dlk_manifest_free(&m);
    const char *bad[] = {
        "\"x\"", "{\"object\":\"index/keys/abc\",\"rows\":1}",
        "{\"object\":\"chunks/a/0123456789abcdef0123456789abcdef\","
        "\"rows\":1}",
        "{\"object\":\"index/keys/0123456789ABCDEF0123456789abcdef\","
        "\"rows\":1}",
        "{\"object\":\"index/keys/0123456789abcdef0123456789abcdef\","
        "\"rows\":-1}",
        "{\"object\":\"index/keys/0123456789abcdef0123456789abcdef\"}",
    };
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(doc, sizeof doc, "{\"format\":\"dlk\",\"version\":1,"
                 "\"tensors\":[],\"key_index\":%s}", bad[i]);
        refused += fails(doc, strlen(doc), DLK_ECORRUPT);
    }
    UNIT_CHECK("key_index: malformed ones refused",
               refused == (int)(sizeof bad / sizeof *bad));
}

/* ---- commit documents (formats 6.1) -------------------------------- */

/* A commit with time t and parent p (JSON texts). */
static dlk_status commit_with(const char *t, const char *p,
                              Dlk_commit_meta *meta)
{
    char doc[512];
    snprintf(doc, sizeof doc, "{\"format\":\"dlk\",\"version\":1,"
             "\"parent\":%s,\"time\":%s,\"message\":\"m\",\"stats\":"
             "{\"bytes_added\":0,\"chunks_added\":0},\"tensors\":[]}", p, t);
    Dlk_manifest m;
    Dlk_error_clear(&last);
    dlk_status rc = Dlk_commit_parse(doc, strlen(doc), "commits/x.json", &m,
                                     meta, &last);
    if (!rc)
        Dlk_manifest_free(&m);
    return rc;
}

static void commits(void)
{
    Dlk_commit_meta meta;
    UNIT_CHECK("commit: read with its time and message",
               commit_with("\"2026-12-01T20:08:54Z\"", "null", &meta) ==
                   DLK_OK && strcmp(meta.time, "2026-12-01T20:08:54Z") == 0 &&
               strcmp(meta.message, "m") == 0);
    Dlk_commit_meta_free(&meta);
    const char *good[] = {"\"2024-02-29T00:00:00Z\"", "\"2000-02-29T23:59:59Z\"",
                          "\"1999-12-31T23:59:59Z\""};
    int n = 0;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        n += commit_with(good[i], "\"" K1 "\"", NULL) == DLK_OK;
    UNIT_CHECK("commit: real days and times, leap days included",
               n == (int)(sizeof good / sizeof *good));
    const char *bad[] = {
        "\"2100-02-29T00:00:00Z\"", "\"2026-02-29T00:00:00Z\"",
        "\"2026-04-31T00:00:00Z\"", "\"2026-00-10T00:00:00Z\"",
        "\"2026-01-00T00:00:00Z\"", "\"2026-01-01T23:60:00Z\"",
        "\"2026-01-01T23:00:60Z\"", "\"2026-01-01 23:00:00Z\"",
        "\"2026-01-01T23:00:00z\"", "\"2026-01-01T23:00:00Z \"",
        "\"+026-01-01T23:00:00Z\"", "\"\"", "null", "20260101",
    };
    n = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        n += commit_with(bad[i], "null", NULL) == DLK_ECORRUPT &&
             strstr(last.msg, "commits/x.json") && strstr(last.msg, "'time'");
    UNIT_CHECK("commit: every other time refused, naming it",
               n == (int)(sizeof bad / sizeof *bad));
    const char *parents[] = {"\"\"", "\"0123\"", "\"" K1 "0\"",
                             "\"0123456789ABCDEF0123456789abcdef\"", "0",
                             "[]"};
    n = 0;
    for (size_t i = 0; i < sizeof parents / sizeof *parents; i++)
        n += commit_with("\"2026-01-01T00:00:00Z\"", parents[i], NULL) ==
                 DLK_ECORRUPT && strstr(last.msg, "'parent'");
    UNIT_CHECK("commit: a parent that is no commit id refused, without meta "
               "too", n == (int)(sizeof parents / sizeof *parents));
}

/* ---- key_base (formats 4.3.1, 6.9) ---------------------------------- */

static void key_base(void)
{
    const char *good[] = {"s3://raw/train/", "gs://b/", "/data/raw/train/",
                          "/"};
    int kept = 0;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        char doc[512];
        snprintf(doc, sizeof doc, "{\"format\":\"dlk\",\"version\":1,"
                 "\"tensors\":[],\"key_base\":\"%s\"}", good[i]);
        Dlk_manifest m, m2;
        char *out = NULL;
        size_t len;
        if (parse(doc, strlen(doc), &m) != DLK_OK)
            continue;
        if (m.key_base && !strcmp(m.key_base, good[i]) &&
            !Dlk_manifest_dump(&m, &out, &len, NULL) &&
            parse(out, len, &m2) == DLK_OK) {
            kept += m2.key_base && !strcmp(m2.key_base, good[i]);
            Dlk_manifest_free(&m2);
        }
        free(out);
        Dlk_manifest_free(&m);
    }
    UNIT_CHECK("key_base: parsed and dumped as read",
               kept == (int)(sizeof good / sizeof *good));
    const char *none = "{\"format\":\"dlk\",\"version\":1,\"tensors\":[]}";
    Dlk_manifest m;
    char *out = NULL;
    size_t len;
    bool absent = parse(none, strlen(none), &m) == DLK_OK && !m.key_base &&
                  !Dlk_manifest_dump(&m, &out, &len, NULL) &&
                  !strstr(out, "key_base");
    UNIT_CHECK("key_base: absent is NULL, and not dumped", absent);
    free(out);
    Dlk_manifest_free(&m);
    const char *bad[] = {
        "1", "null", "\"\"", "\"train/\"", "\"s3://raw/train\"",
        "\"s3:///x/\"", "\"s3:///\"", "\"http://h/x/\"", "\"/a\\tb/\"",
        "\"/a\\u007fb/\"",
    };
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char doc[512];
        snprintf(doc, sizeof doc, "{\"format\":\"dlk\",\"version\":1,"
                 "\"tensors\":[],\"key_base\":%s}", bad[i]);
        refused += fails(doc, strlen(doc), DLK_ECORRUPT);
    }
    UNIT_CHECK("key_base: malformed ones refused",
               refused == (int)(sizeof bad / sizeof *bad));
}

/* ---- writes (formats 4.3.1) ----------------------------------------- */

static void writes(void)
{
    const char *a = "0123456789abcdef0123456789abcdef",
               *b = "fedcba9876543210fedcba9876543210";
    char doc[2048];
    snprintf(doc, sizeof doc, "{\"format\":\"dlk\",\"version\":1,"
             "\"parent\":null,\"tensors\":[],\"writes\":[\"%s\",\"%s\"]}",
             a, b);
    Dlk_manifest m;
    dlk_status rc = parse(doc, strlen(doc), &m);
    UNIT_CHECK("writes: parsed, oldest first", rc == DLK_OK &&
               m.nwrites == 2 && strcmp(m.writes[0], a) == 0 &&
               strcmp(m.writes[1], b) == 0);
    if (rc)
        return;
    UNIT_CHECK("writes: an id is found, another not",
               Dlk_manifest_wrote(&m, a) && !Dlk_manifest_wrote(&m, "x"));
    char *out = NULL;
    size_t len;
    if (!Dlk_manifest_dump(&m, &out, &len, NULL)) {
        Dlk_manifest m2;
        UNIT_CHECK("writes: dumped as read", parse(out, len, &m2) == DLK_OK &&
                   m2.nwrites == 2 && strcmp(m2.writes[1], b) == 0);
        Dlk_manifest_free(&m2);
    }
    free(out);
    Dlk_manifest_add_write(&m, b);
    UNIT_CHECK("writes: the newest id is not added twice", m.nwrites == 2);
    char id[33];
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof id, "%032x", i);
        Dlk_manifest_add_write(&m, id);
    }
    UNIT_CHECK("writes: at most 16, the oldest dropped",
               m.nwrites == DLK_WRITES_MAX && !Dlk_manifest_wrote(&m, a) &&
               Dlk_manifest_wrote(&m, id) &&
               strcmp(m.writes[DLK_WRITES_MAX - 1], id) == 0);
    Dlk_manifest_free(&m);
    char many[1024] = "[";
    for (int i = 0; i < 17; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s\"%s\"",
                 i ? "," : "", a);
    strcat(many, "]");
    const char *bad[] = {
        "\"x\"", "[1]", "[\"abc\"]", "[\"0123456789ABCDEF0123456789abcdef\"]",
        "{}", many,
    };
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(doc, sizeof doc, "{\"format\":\"dlk\",\"version\":1,"
                 "\"tensors\":[],\"writes\":%s}", bad[i]);
        refused += fails(doc, strlen(doc), DLK_ECORRUPT);
    }
    UNIT_CHECK("writes: malformed ones refused",
               refused == (int)(sizeof bad / sizeof *bad));
}

/* ---- replay of fuzzer finds ---------------------------------------- */

static bool replay_manifest(const uint8_t *p, size_t len)
{
    Dlk_manifest m;
    dlk_status rc = parse((const char *)(p ? p : (const uint8_t *)""), len,
                          &m);
    bool ok = rc != DLK_OK && last.code == rc && strstr(last.msg, DOC) != NULL;
    if (!ok)
        printf("# status %d: %s\n", rc, last.msg);
    if (rc == DLK_OK)
        Dlk_manifest_free(&m);
    return ok;
}

/* A tensor with one segment reference before its two inline entries. */
#define SEG_REF "[\"" K1 "\", 2, 4, 200, 100, 77]"
static const char *doc_segs(const char *refs, const char *samples)
{
    static char v[4096];
    snprintf(v, sizeof v, "[9, 8, 3], \"segments\": %s", refs);
    static char d[sizeof text], rest[sizeof text];
    doc_with("shape_max", v);
    snprintf(d, sizeof d, "%s", text);
    /* "samples" is the whole tensor's: the segment's 4 and the tail's 5 */
    char *at = strstr(d, "\"samples\": 5");
    snprintf(rest, sizeof rest, "%s", at + strlen("\"samples\": 5"));
    snprintf(at, sizeof d - (size_t)(at - d), "\"samples\": %s%s", samples,
             rest);
    return d;
}

static void segments(void)
{
    Dlk_manifest m;
    const char *d = doc_segs("[" SEG_REF "]", "9");
    dlk_status rc = parse(d, strlen(d), &m);
    UNIT_CHECK("a tensor with a segment and a tail parses", rc == DLK_OK);
    if (rc)
        printf("# %s\n", last.msg);
    Dlk_tensor *t = rc ? NULL : &m.tensors[0];
    UNIT_CHECK("its segment is pending, its totals whole, its tail after it",
               t && t->segs_pending && t->nsegs == 1 && t->nchunks == 2 &&
               t->samples == 9 && t->stored_bytes == 420 &&
               t->raw_bytes == 235 && t->chunks[0].first == 4 &&
               t->chunks[1].first == 6 && t->segs[0].bytes == 77);
    char *out = NULL;
    size_t len = 0;
    if (t && !Dlk_manifest_dump(&m, &out, &len, &last)) {
        Dlk_manifest m2;
        UNIT_CHECK("it is written back with its segments and its tail only",
                   strstr(out, "\"segments\":[[\"" K1 "\",2,4,200,100,77]]") &&
                   strstr(out, "\"chunks\":[[\"" K1 "\",2,100,54],[\"" K2
                               "\",3,120,81]]") &&
                   parse(out, len, &m2) == DLK_OK);
        char *out2 = NULL;
        size_t len2 = 0;
        UNIT_CHECK("and reads back the same",
                   !Dlk_manifest_dump(&m2, &out2, &len2, &last) &&
                   len2 == len && memcmp(out, out2, len) == 0);
        free(out2);
        Dlk_manifest_free(&m2);
        free(out);
    }
    /* attach the segment's entries: the list whole */
    Dlk_chunk_entry seg[2] = {{K2, 1, 90, 30, 0}, {K1, 3, 110, 70, 0}};
    Dlk_chunk_entry *ents[1] = {seg};
    if (t) {
        UNIT_CHECK("attached: the whole list in order",
                   Dlk_tensor_attach(t, ents, &last) == DLK_OK &&
                   !t->segs_pending && t->nchunks == 4 && t->seg_chunks == 2 &&
                   t->chunks[1].first == 1 && t->chunks[2].first == 4 &&
                   strcmp(t->chunks[0].key, K2) == 0 && Dlk_tensor_segs_fit(t));
        size_t n;
        const Dlk_chunk_entry *tail = Dlk_tensor_tail(t, &n);
        UNIT_CHECK("its tail is the inline entries", n == 2 &&
                   tail == t->chunks + 2);
        Dlk_tensor_truncate(t, 3);
        UNIT_CHECK("truncating past the segment keeps it", t->nsegs == 1 &&
                   t->seg_chunks == 2);
        Dlk_tensor_truncate(t, 1);
        UNIT_CHECK("truncating into the segment drops it", t->nsegs == 0 &&
                   t->seg_chunks == 0 && t->samples == 1);
        Dlk_manifest_free(&m);
    }
    UNIT_CHECK("samples of the tail alone (a reader ignoring segments): "
               "corrupt", CORRUPT(doc_segs("[" SEG_REF "]", "5")) &&
               strstr(last.msg, "is 5 but its segments and chunks hold 9"));
    static const char *const bad[] = {
        "{}", "[5]", "[[\"" K1 "\", 2, 4, 200, 100]]",
        "[[\"" K1 "\", 2, 4, 200, 100, 77, 1]]",
        "[[\"" K1 "\", 0, 4, 200, 100, 77]]",
        "[[\"" K1 "\", 65537, 65537, 4194368, 100, 77]]",
        "[[\"" K1 "\", 2, 1, 200, 100, 77]]",
        "[[\"" K1 "\", 2, 4, 127, 100, 77]]",
        "[[\"" K1 "\", 2, 4, 200, 100, 0]]",
        "[[\"" K1 "\", 2, 4, 200, 100, 8388609]]",
        "[[\"" K1 "\", 2, 4, 200, 4294967297, 77]]",
        "[[\"0123456789ABCDEF0123456789abcdef\", 2, 4, 200, 100, 77]]",
        "[[\"" K1 "\", 2.0, 4, 200, 100, 77]]",
        "[[\"" K1 "\", 2, -4, 200, 100, 77]]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "segment reference %.60s: corrupt",
                 bad[i]);
        UNIT_CHECK(name, CORRUPT(doc_segs(bad[i], "9")) &&
                   strstr(last.msg, "images"));
    }
    UNIT_CHECK("segment sizes whose sum overflows: corrupt",
               CORRUPT(doc_segs("[[\"" K1 "\", 2, 4, 9223372036854775807, "
                                "100, 77]]", "9")));

    /* the segment object */
    Dlk_chunk_entry e[3] = {{K1, 2, 100, 54, 0}, {K2, 3, 120, 81, 0},
                            {K1, 1, 64, 0, 0}};
    char *sb;
    size_t sl;
    Dlk_seg_ref ref;
    UNIT_CHECK("a segment is written",
               Dlk_segment_dump(e, 3, &sb, &sl, &ref, &last) == DLK_OK &&
               ref.nchunks == 3 && ref.samples == 6 &&
               ref.stored_bytes == 284 && ref.raw_bytes == 135 &&
               ref.bytes == sl);
    char h[33];
    Dlk_hash128_hex(sb, sl, h);
    UNIT_CHECK("named by its hash", strcmp(h, ref.key) == 0);
    Dlk_chunk_entry *got = NULL;
    UNIT_CHECK("and reads back",
               Dlk_segment_parse(sb, sl, &ref, &got, &last) == DLK_OK &&
               got && strcmp(got[1].key, K2) == 0 && got[2].samples == 1 &&
               got[1].stored_bytes == 120);
    free(got);
    char key[DLK_SEG_KEY_MAX];
    Dlk_seg_key(key, ref.key);
    UNIT_CHECK("a segment of another size: corrupt, named",
               Dlk_segment_parse(sb, sl - 1, &ref, &got, &last) ==
                   DLK_ECORRUPT && strstr(last.msg, key) && !got);
    sb[sl / 2] ^= 1;
    UNIT_CHECK("a flipped byte: corrupt, its name does not match",
               Dlk_segment_parse(sb, sl, &ref, &got, &last) ==
                   DLK_ECORRUPT && strstr(last.msg, "does not match its name")
                   && !got);
    sb[sl / 2] ^= 1;
    Dlk_seg_ref r2 = ref;
    r2.nchunks = 2;
    UNIT_CHECK("fewer entries than its reference says: corrupt",
               Dlk_segment_parse(sb, sl, &r2, &got, &last) == DLK_ECORRUPT);
    r2 = ref;
    r2.samples = 7;
    UNIT_CHECK("other totals than its reference's: corrupt",
               Dlk_segment_parse(sb, sl, &r2, &got, &last) == DLK_ECORRUPT &&
               strstr(last.msg, "hold 6 samples"));
    free(sb);
    static const char *const docs[] = {
        "{\"format\":\"dlk\",\"version\":1,\"chunks\":[[\"" K1 "\",0,100,54]]}",
        "{\"format\":\"dlk\",\"version\":1,\"chunks\":{}}",
        "{\"format\":\"dlk\",\"version\":1}",
        "[1]",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        Dlk_seg_ref r = {"", 1, 0, 100, 54, strlen(docs[i])};
        Dlk_hash128_hex(docs[i], strlen(docs[i]), r.key);
        char name[160];
        snprintf(name, sizeof name, "segment %.50s: corrupt", docs[i]);
        UNIT_CHECK(name, Dlk_segment_parse(docs[i], strlen(docs[i]), &r,
                                           &got, &last) == DLK_ECORRUPT &&
                   !got);
    }
    const char *v2 = "{\"format\":\"dlk\",\"version\":2,\"chunks\":[]}";
    Dlk_seg_ref r = {"", 1, 1, 100, 54, strlen(v2)};
    Dlk_hash128_hex(v2, strlen(v2), r.key);
    UNIT_CHECK("a segment of version 2: unsupported",
               Dlk_segment_parse(v2, strlen(v2), &r, &got, &last) ==
                   DLK_EUNSUPPORTED);
}

int main(void)
{
    round_trip();
    malformed();
    deep();
    numbers();
    wrong_values();
    missing();
    duplicates();
    chunk_entries();
    size_limit();
    key_index();
    commits();
    key_base();
    writes();
    segments();
    unit_replay("manifest", replay_manifest, true);
    unit_replay("fuzz_manifest", replay_manifest, false);
    return unit_done();
}
