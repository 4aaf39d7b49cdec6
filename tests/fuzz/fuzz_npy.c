/* fuzz_npy.c - libFuzzer target: the input is a .npy file. */
#include "format/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (%s:%d)\n", \
                                         #c, __FILE__, __LINE__); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Dlk_npy_info h;
    dlk_error err = {0};
    dlk_status rc = Dlk_npy_parse(data, size, "fuzz.npy", &h, &err);
    if (rc) {
        CHECK(rc == DLK_EDECODE && err.code == rc && err.msg[0]);
        CHECK(strstr(err.msg, "fuzz.npy") != NULL);
        return 0;
    }
    /* the data the header describes is exactly the rest of the file */
    CHECK(h.ndim >= 0 && h.ndim <= DLK_MAX_NDIM + 1);
    CHECK(dlk_dtype_size(h.dtype) != 0);
    CHECK(h.data_off <= size && h.data_bytes == size - h.data_off);
    uint64_t n = dlk_dtype_size(h.dtype);
    for (int d = 0; d < h.ndim; d++) {
        CHECK(h.shape[d] >= 0 && h.shape[d] <= UINT32_MAX);
        n *= (uint64_t)h.shape[d];
    }
    CHECK(n == h.data_bytes);
    CHECK(!h.swap || dlk_dtype_size(h.dtype) > 1);
    return 0;
}
