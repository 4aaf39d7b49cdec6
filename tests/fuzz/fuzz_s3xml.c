/* fuzz_s3xml.c - libFuzzer target: the input is an S3 response body, read
 * as a ListObjectsV2 page, as an <Error> and searched for an element (as
 * for a multipart UploadId).  Every key handed to the listing callback is
 * a bounded C string, judged by Dlk_key_problem and escaped without
 * overflowing; a page either parses or fails with a status and message. */
#include "store/s3_internal.h"
#include "util/keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (%s:%d)\n", \
                                         #c, __FILE__, __LINE__); abort(); } } while (0)

static int on_key(void *ud, const char *key, uint64_t size)
{
    size_t *n = ud;
    (void)size;
    CHECK(key && strlen(key) < 65536);
    char safe[64];
    Dlk_key_escape(key, safe, sizeof safe);
    CHECK(strlen(safe) < sizeof safe);
    (void)Dlk_key_problem(key);
    return ++*n > 200000; /* stop: never reached by a valid page */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    s3_list_page page;
    dlk_error err = {0};
    dlk_status rc = s3_xml_list(data, size, on_key, &n, &page, "fuzz", &err);
    if (rc)
        CHECK(err.code == rc && err.msg[0] && !page.next_token);
    else if (page.next_token)
        CHECK(strlen(page.next_token) < 65536);
    free(page.next_token);

    s3_error_info info;
    if (s3_xml_error(data, size, &info))
        CHECK(strlen(info.code) < sizeof info.code &&
              strlen(info.request_id) < sizeof info.request_id);
    char out[128];
    if (s3_xml_find(data, size, "UploadId", out, sizeof out))
        CHECK(strlen(out) < sizeof out);
    return 0;
}
