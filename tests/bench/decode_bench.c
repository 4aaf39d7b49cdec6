/* decode_bench.c - the raw decode rate that ingest is measured against:
 * every file named on the command line is read into memory, then decoded
 * by T threads (each takes the next file) with TurboJPEG's tjDecompress2
 * at full size to RGB; prints "files/s".  With --dlk W H the decoder that
 * ingest uses (dlk_decode_image_reuse, resize included, one output buffer
 * a thread as ingest keeps one a row) is timed instead; with
 * --planes W H only its JPEG decode (dlk_jpeg_decode, to the planes the
 * resize starts from): what the rest costs is the difference.
 *   decode_bench THREADS [--dlk W H | --planes W H] FILE...             */
#include "ingest/decode.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

static dlk_buf *files;
static int nfiles, use_dlk, planes_only, W, H;
static int next;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *work(void *arg)
{
    (void)arg;
    tjhandle tj = tjInitDecompress();
    unsigned char *out = malloc((size_t)8192 * 8192 * 3);
    dlk_decoded d; /* one output kept across images, as ingest keeps it */
    memset(&d, 0, sizeof d);
    dlk_buf_init(&d.data);
    for (;;) {
        pthread_mutex_lock(&mu);
        int i = next++;
        pthread_mutex_unlock(&mu);
        if (i >= nfiles)
            break;
        if (planes_only) {
            dlk_image_opts o = {.width = W, .height = H, .channels = 3};
            dlk_image im;
            if (dlk_jpeg_decode(files[i].data, files[i].len, "f", &o, &im,
                                NULL))
                fprintf(stderr, "decode error\n");
            dlk_image_free(&im);
        } else if (use_dlk) {
            dlk_image_opts o = {.width = W, .height = H, .channels = 3};
            if (dlk_decode_image_reuse(files[i].data, files[i].len, "f", &o,
                                       &d, NULL))
                fprintf(stderr, "decode error\n");
        } else {
            int w, h, ss, cs;
            if (tjDecompressHeader3(tj, files[i].data, files[i].len, &w, &h,
                                    &ss, &cs) ||
                tjDecompress2(tj, files[i].data, files[i].len, out, w, 0, h,
                              TJPF_RGB, 0))
                fprintf(stderr, "decode error\n");
        }
    }
    dlk_buf_free(&d.data);
    free(out);
    tjDestroy(tj);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int threads = atoi(argv[1]), a = 2;
    if (strcmp(argv[2], "--dlk") == 0 || strcmp(argv[2], "--planes") == 0) {
        use_dlk = 1;
        planes_only = argv[2][2] == 'p';
        W = atoi(argv[3]);
        H = atoi(argv[4]);
        a = 5;
    }
    nfiles = argc - a;
    files = calloc((size_t)nfiles, sizeof *files);
    for (int i = 0; i < nfiles; i++) {
        FILE *f = fopen(argv[a + i], "rb");
        if (!f)
            return 1;
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            dlk_buf_append(&files[i], buf, n, NULL);
        fclose(f);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th[256];
    for (int i = 0; i < threads && i < 256; i++)
        pthread_create(&th[i], NULL, work, NULL);
    for (int i = 0; i < threads && i < 256; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%.1f\n", nfiles / s);
    return 0;
}
