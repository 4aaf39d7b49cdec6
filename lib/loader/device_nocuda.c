/* device_nocuda.c - the CUDA device in a build without the CUDA toolkit. */
#include "device.h"
#include "util/error.h"

#include <stdio.h>

#ifndef DLK_HAVE_CUDA
dlk_status Dlk_dev_open_cuda(int index, const Dlk_dev_opts *o, Dlk_dev **out,
                             dlk_error *err)
{
    (void)index;
    (void)o;
    *out = NULL;
    return Dlk_fail(err, DLK_EGPU, "this dlk was built without CUDA "
                    "(install the CUDA toolkit and rebuild)");
}

int dlk_cuda_available(char *why, size_t cap)
{
    if (why && cap)
        snprintf(why, cap, "built without CUDA");
    return 0;
}
#endif
