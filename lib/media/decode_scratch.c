/* decode_scratch.c - what a decoding thread keeps between images: the
 * TurboJPEG decompressor, the decoded planes, the resize filters and
 * planes.  Ingest decodes every image of a run to one size on each of its
 * threads; creating these per image cost a tenth of the decode (handle
 * set-up, and page faults on fresh large blocks, which on many cores also
 * serialise the threads on the process's memory map).  Freed when the
 * thread exits. */
#include "media/decode.h"

#include <pthread.h>
#include <stdlib.h>
#include <turbojpeg.h>

#define SCRATCH_KEEP (UINT64_C(32) << 20) /* larger blocks are not kept */

static pthread_key_t key;
static bool key_ok;

static void scratch_free(void *p)
{
    Dlk_scratch *s = p;
    for (int i = 0; i < DLK_SCRATCH_FILTERS; i++)
        free(s->filters[i].mem.mem);
    if (s->tj)
        tjDestroy(s->tj);
    free(s->planes.mem);
    free(s->pixels.mem);
    free(s);
}

static void key_once(void)
{
    key_ok = pthread_key_create(&key, scratch_free) == 0;
}

Dlk_scratch *Dlk_scratch_get(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, key_once);
    if (!key_ok)
        return NULL;
    Dlk_scratch *s = pthread_getspecific(key);
    if (!s) {
        if (!(s = calloc(1, sizeof *s)))
            return NULL;
        if (pthread_setspecific(key, s)) {
            free(s);
            return NULL;
        }
    }
    return s;
}

uint8_t *Dlk_scratch_block(Dlk_scratch_mem *b, size_t bytes)
{
    size_t want = (bytes + DLK_SCRATCH_ALIGN - 1) &
                  ~(size_t)(DLK_SCRATCH_ALIGN - 1);
    if (want > SCRATCH_KEEP)
        return NULL;
    if (b->cap < want) {
        free(b->mem);
        b->cap = 0;
        if (!(b->mem = aligned_alloc(DLK_SCRATCH_ALIGN, want)))
            return NULL;
        b->cap = want;
    }
    return b->mem;
}
