/* decode_bench.c - the raw decode rate that ingest is measured against:
 * every file named on the command line is read into memory, then decoded
 * by T threads (each takes the next file) with TurboJPEG's tjDecompress2
 * at full size to RGB; prints "files/s".  With --dlk W H the decoder that
 * ingest uses (Dlk_decode_image_reuse, resize included, one output buffer
 * a thread as ingest keeps one a row) is timed instead; with
 * --planes W H only its JPEG decode (Dlk_jpeg_decode, to the planes the
 * resize starts from): what the rest costs is the difference.  --split
 * W H runs --dlk's work and times its two halves apart (the clock read
 * between them), printing "files/s planes-us resize-us" (microseconds of
 * a thread an image): whether the JPEG decode slows when the resize runs
 * between images shows there, not in --planes.  Grayscale and progressive
 * files decode like the rest (to RGB); a file that fails to decode makes
 * it say which and exit 1, so that no rate counts files not decoded.
 *   decode_bench THREADS [--dlk W H | --planes W H | --split W H] FILE... */
#include "media/decode.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

static Dlk_buf *files;
static int nfiles, use_dlk, planes_only, split, W, H;
static int next;
static int failed = -1; /* the first file that failed to decode */
static int nfailed;
static double planes_s, resize_s; /* --split: summed over threads */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void decode_failed(int i)
{
    pthread_mutex_lock(&mu);
    if (failed < 0)
        failed = i;
    nfailed++;
    pthread_mutex_unlock(&mu);
}

static void *work(void *arg)
{
    (void)arg;
    double ps = 0, rs = 0;
    tjhandle tj = tjInitDecompress();
    unsigned char *out = malloc((size_t)8192 * 8192 * 3);
    Dlk_decoded d; /* one output kept across images, as ingest keeps it */
    memset(&d, 0, sizeof d);
    Dlk_buf_init(&d.data);
    for (;;) {
        pthread_mutex_lock(&mu);
        int i = next++;
        pthread_mutex_unlock(&mu);
        if (i >= nfiles)
            break;
        if (planes_only || split) {
            Dlk_image_opts o = {.width = W, .height = H, .channels = 3};
            Dlk_image im;
            memset(&im, 0, sizeof im);
            double t0 = now_s();
            if (Dlk_jpeg_decode(files[i].data, files[i].len, "f", &o, &im,
                                NULL))
                decode_failed(i);
            else if (split) {
                double t1 = now_s();
                if (Dlk_image_finish_reuse(&im, &o, &d, NULL))
                    decode_failed(i);
                ps += t1 - t0;
                rs += now_s() - t1;
            }
            Dlk_image_free(&im);
        } else if (use_dlk) {
            Dlk_image_opts o = {.width = W, .height = H, .channels = 3};
            if (Dlk_decode_image_reuse(files[i].data, files[i].len, "f", &o,
                                       &d, NULL))
                decode_failed(i);
        } else {
            int w, h, ss, cs;
            if (tjDecompressHeader3(tj, files[i].data, files[i].len, &w, &h,
                                    &ss, &cs) ||
                tjDecompress2(tj, files[i].data, files[i].len, out, w, 0, h,
                              TJPF_RGB, 0))
                decode_failed(i);
        }
    }
    pthread_mutex_lock(&mu);
    planes_s += ps;
    resize_s += rs;
    pthread_mutex_unlock(&mu);
    Dlk_buf_free(&d.data);
    free(out);
    tjDestroy(tj);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int threads = atoi(argv[1]), a = 2;
    if (strcmp(argv[2], "--dlk") == 0 || strcmp(argv[2], "--planes") == 0 ||
        strcmp(argv[2], "--split") == 0) {
        use_dlk = 1;
        planes_only = argv[2][2] == 'p';
        split = argv[2][2] == 's';
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
            Dlk_buf_append(&files[i], buf, n, NULL);
        fclose(f);
    }
    double t0 = now_s();
    pthread_t th[256];
    for (int i = 0; i < threads && i < 256; i++)
        pthread_create(&th[i], NULL, work, NULL);
    for (int i = 0; i < threads && i < 256; i++)
        pthread_join(th[i], NULL);
    double s = now_s() - t0;
    if (nfailed) {
        fprintf(stderr, "decode_bench: %d of %d files did not decode (the "
                "first: %s)\n", nfailed, nfiles, argv[a + failed]);
        return 1;
    }
    if (split)
        printf("%.1f %.1f %.1f\n", nfiles / s, planes_s / nfiles * 1e6,
               resize_s / nfiles * 1e6);
    else
        printf("%.1f\n", nfiles / s);
    return 0;
}
