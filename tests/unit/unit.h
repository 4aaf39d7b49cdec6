/* unit.h - a tiny TAP harness for the C unit tests in tests/unit/.
 * Each check prints "ok - name" or "not ok - name (file:line)"; main
 * returns unit_done(), non-zero when any check failed. */
#ifndef DLK_UNIT_H
#define DLK_UNIT_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failed;

#define UNIT_CHECK(name, cond)                                             \
    do {                                                                   \
        if (cond) {                                                        \
            printf("ok - %s\n", (name));                                   \
        } else {                                                           \
            unit_failed++;                                                 \
            printf("not ok - %s (%s:%d: %s)\n", (name), __FILE__,          \
                   __LINE__, #cond);                                       \
        }                                                                  \
        fflush(stdout);                                                    \
    } while (0)

#define UNIT_SKIP(name, why) printf("ok - %s # SKIP %s\n", (name), (why))

__attribute__((unused)) static int unit_by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replay every file of tests/corrupt/SUB, in name order: check() says
 * whether the file met a clean error.  It gets an exact-size heap copy of
 * the bytes, so that AddressSanitizer sees any read past the end.  A
 * hand-made corpus (required) must hold inputs; a fuzzer's crash folder
 * is empty until a fuzzer finds something. */
typedef bool (*unit_replay_fn)(const uint8_t *p, size_t len);

__attribute__((unused)) static void unit_replay(const char *sub, unit_replay_fn check,
                                                bool required)
{
    const char *tests = getenv("DLK_TESTS");
    char dir[4096], what[256];
    snprintf(dir, sizeof dir, "%s/corrupt/%s",
             tests && *tests ? tests : "tests", sub);
    snprintf(what, sizeof what, "replay tests/corrupt/%s", sub);
    DIR *d = opendir(dir);
    if (!d) {
        UNIT_SKIP(what, "directory not found (set DLK_TESTS)");
        return;
    }
    char *names[4096];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 4096)
        if (de->d_name[0] != '.')
            names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, unit_by_name);
    for (size_t i = 0; i < n; i++) {
        char path[8192], label[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(label, sizeof label, "corrupt/%s/%s: clean error", sub,
                 names[i]);
        FILE *f = fopen(path, "rb");
        long len = -1;
        if (f && fseek(f, 0, SEEK_END) == 0)
            len = ftell(f);
        uint8_t *p = NULL;
        bool ok = f && len >= 0 && len <= (64L << 20) &&
                  (p = malloc(len ? (size_t)len : 1)) != NULL &&
                  fseek(f, 0, SEEK_SET) == 0 &&
                  fread(p, 1, (size_t)len, f) == (size_t)len;
        if (f)
            fclose(f);
        UNIT_CHECK(label, ok && check(p, (size_t)len));
        free(p);
        free(names[i]);
    }
    if (n == 0 && required)
        UNIT_CHECK(what, false); /* the corpus is gone: nothing was tested */
    else if (n == 0)
        printf("# %s: no inputs (no fuzzer crash kept)\n", what);
}

static inline int unit_done(void)
{
    return unit_failed ? 1 : 0;
}

/* Blocks (chunks) of uneven sizes over n positions, like a real
 * tensor's: min + (b * 13) % spread samples each, the last cut to fit;
 * returns how many (first and count must have room for them). */
static inline size_t unit_blocks(uint64_t n, uint32_t min, uint32_t spread,
                                 uint64_t *first, uint32_t *count)
{
    size_t b = 0;
    uint64_t pos = 0;
    while (pos < n) {
        uint32_t c = (uint32_t)(min + (b * 13) % spread);
        if (pos + c > n)
            c = (uint32_t)(n - pos);
        first[b] = pos;
        count[b++] = c;
        pos += c;
    }
    return b;
}

#ifdef DLK_STORE_STORE_H
/* Every kind of read of `key` (`size` bytes) through a store whose
 * endpoint (tests/faultproxy.py --rate-truncate 1) cuts every answer's
 * body short, however often it is asked again: a whole GET, a sized
 * one, a range, a span and a batch of whole GETs each fail as the
 * network's fault (DLK_ENET, not a short or corrupt object) after their
 * attempts, naming the object, and leave their buffer as it was: no cut
 * bytes handed on as the object. */
__attribute__((unused)) static void unit_cut_reads(Dlk_store *s,
                                                   const char *key,
                                                   uint64_t size)
{
    Dlk_buf out;
    Dlk_buf_init(&out);
    for (int kind = 0; kind < 5; kind++) {
        static const char *what[] = {"a whole GET", "a sized GET", "a range",
                                     "a span", "a batch of whole GETs"};
        dlk_error err = {0};
        out.len = 0;
        dlk_status rc = Dlk_buf_append(&out, "kept", 4, &err);
        if (rc)
            break;
        if (kind == 0) {
            rc = Dlk_store_get(s, key, size, &out, NULL, &err);
        } else if (kind == 1) {
            rc = Dlk_store_get_sized(s, key, size, &out, NULL, &err);
        } else if (kind == 2) {
            rc = Dlk_store_get_range(s, key, 10, size / 2, &out, &err);
        } else if (kind == 3) {
            rc = Dlk_store_get_span(s, key, size, 7, size / 3, &out, &err);
        } else {
            Dlk_get_req q = {.key = key, .max = size, .out = &out};
            Dlk_store_get_each(s, &q, 1);
            rc = q.rc;
            err = q.err;
        }
        char name[160];
        snprintf(name, sizeof name, "%s of a body cut short every time: a "
                 "network error after the attempts, naming the object",
                 what[kind]);
        bool net = rc == DLK_ENET && strstr(err.msg, "attempts") &&
                   strstr(err.msg, key);
        if (!net)
            printf("# %s: rc %d: %s\n", what[kind], (int)rc, err.msg);
        UNIT_CHECK(name, net);
        snprintf(name, sizeof name, "... and the buffer as it was (%s)",
                 what[kind]);
        UNIT_CHECK(name, out.len == 4 && memcmp(out.data, "kept", 4) == 0);
    }
    Dlk_buf_free(&out);
}

/* Ranged reads of `key` (p, `size` bytes, 1000 or more) through a store
 * whose endpoint drops the Range header (tests/faultproxy.py
 * --drop-range), as a server that does not serve ranges answers (200,
 * the whole object): a range or a span fails, naming the object and
 * saying so, its buffer as it was; a whole read still works. */
__attribute__((unused)) static void unit_range_ignored(Dlk_store *s,
                                                       const char *key,
                                                       const uint8_t *p,
                                                       uint64_t size)
{
    Dlk_buf out;
    Dlk_buf_init(&out);
    for (int kind = 0; kind < 2; kind++) {
        dlk_error err = {0};
        out.len = 0;
        dlk_status rc = Dlk_buf_append(&out, "kept", 4, &err);
        if (!rc && kind == 0)
            rc = Dlk_store_get_range(s, key, 100, 500, &out, &err);
        else if (!rc)
            rc = Dlk_store_get_span(s, key, size, size - 300, 300, &out,
                                    &err);
        bool said = rc == DLK_ENET && strstr(err.msg, key) &&
                    strstr(err.msg, "does not serve ranges");
        if (!said)
            printf("# rc %d: %s\n", (int)rc, err.msg);
        UNIT_CHECK(kind == 0 ? "a range answered with the whole object: the "
                               "object named, the server said not to serve "
                               "ranges"
                             : "... a span the same",
                   said);
        UNIT_CHECK(kind == 0 ? "... and the buffer as it was"
                             : "... and its buffer as it was",
                   out.len == 4 && memcmp(out.data, "kept", 4) == 0);
    }
    dlk_error err = {0};
    out.len = 0;
    dlk_status rc = Dlk_store_get(s, key, size, &out, NULL, &err);
    UNIT_CHECK("... while a whole read of it works",
               rc == DLK_OK && out.len == size &&
               memcmp(out.data, p, size) == 0);
    Dlk_buf_free(&out);
}
#endif

#endif
