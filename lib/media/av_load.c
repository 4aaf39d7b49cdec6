/* av_load.c - FFmpeg's libraries opened with dlopen on first use (see
 * av_load.h).  Each is opened by the soname of the major version the
 * headers are (its ABI): the headers' version macros stringified. */
#include "media/av_load.h"

#include <dlfcn.h>
#include <libavcodec/version.h>
#include <libavformat/version.h>
#include <libavutil/version.h>
#include <libswscale/version.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

Dlk_av_funcs Dlk_av;

/* The libraries in dependency order.  They are never closed: the
 * decoders are used until the process ends. */
enum { AV_UTIL, AV_SWSCALE, AV_CODEC, AV_FORMAT, AV_NLIBS };
static const struct {
    const char *soname, *package; /* Debian's package of the soname */
} libs[AV_NLIBS] = {
    [AV_UTIL] = {"libavutil.so." STR(LIBAVUTIL_VERSION_MAJOR),
                 "libavutil" STR(LIBAVUTIL_VERSION_MAJOR)},
    [AV_SWSCALE] = {"libswscale.so." STR(LIBSWSCALE_VERSION_MAJOR),
                    "libswscale" STR(LIBSWSCALE_VERSION_MAJOR)},
    [AV_CODEC] = {"libavcodec.so." STR(LIBAVCODEC_VERSION_MAJOR),
                  "libavcodec" STR(LIBAVCODEC_VERSION_MAJOR)},
    [AV_FORMAT] = {"libavformat.so." STR(LIBAVFORMAT_VERSION_MAJOR),
                   "libavformat" STR(LIBAVFORMAT_VERSION_MAJOR)},
};
#define LIB_avutil AV_UTIL
#define LIB_swscale AV_SWSCALE
#define LIB_avcodec AV_CODEC
#define LIB_avformat AV_FORMAT

/* Set once; empty when FFmpeg loaded. */
static char load_error[400];

/* dlsym gives void *; a function pointer is taken from it through memcpy,
 * the conversion POSIX guarantees and C leaves open. */
#define DLK_AV_RESOLVE(lib, fn)                                               \
    if (LIB_##lib == i) {                                                     \
        void *sym = dlsym(h, #fn);                                            \
        if (!sym) {                                                           \
            snprintf(load_error, sizeof load_error, "FFmpeg's %s has no %s "  \
                     "(not the FFmpeg dlk was built for)", libs[i].soname,    \
                     #fn);                                                    \
            return;                                                           \
        }                                                                     \
        memcpy(&Dlk_av.fn, &sym, sizeof sym);                                 \
    }

/* Each library opened, then its functions found, in dependency order. */
static void load_once(void)
{
    for (int i = 0; i < AV_NLIBS; i++) {
        void *h = dlopen(libs[i].soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            snprintf(load_error, sizeof load_error, "FFmpeg's %s cannot be "
                     "loaded (install it: apt-get install %s): %s",
                     libs[i].soname, libs[i].package,
                     why ? why : "dlopen failed");
            return;
        }
        DLK_AV_FUNCS(DLK_AV_RESOLVE)
    }
    Dlk_av.av_log_set_level(AV_LOG_QUIET);
}

dlk_status Dlk_av_load(dlk_error *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_once);
    if (load_error[0])
        return Dlk_fail(err, DLK_EUNSUPPORTED, "%s", load_error);
    return DLK_OK;
}
