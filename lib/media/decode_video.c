/* decode_video.c - a video container in memory to [T,H,W,C] u8 frames
 * through libavformat and libavcodec (every codec the installed FFmpeg
 * decodes).  The input is read through a custom AVIOContext over the
 * buffer; the demuxers are limited to video containers and may open
 * nothing else.  Frames are chosen by timestamp while decoding in order:
 * `frames N` takes the frame nearest the centre of each of N equal parts
 * of the clip, `fps F` the frame nearest each k/F seconds for
 * clip_seconds (or the whole clip), neither every frame.  Each is
 * converted and fitted by the resizer.  Bounded: frames out, pixels per
 * frame, packets read, frames decoded and wall time.  FFmpeg is opened
 * on the first call (av_load.c); without it, video fails to decode. */
#include "media/av_load.h"
#include "util/bytes.h"
#include "util/clock.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IO_BUF 65536
#define MAX_PACKETS (1L << 22)
#define MAX_DECODED (1L << 20)
#define MAX_SECONDS 120.0
#define MAX_OUT_BYTES (UINT64_C(16) << 30)

/* Demuxers allowed: containers of video (and an audio-only container is
 * still opened, to say it has no video stream). */
static const char formats[] =
    "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,mpeg,mpegvideo,ogg,"
    "flv,asf,gif,h264,hevc,m4v,ivf,yuv4mpegpipe,mjpeg,mp3,wav,aac";

typedef struct mem_io {
    const uint8_t *p;
    size_t n, off;
    double deadline;
} mem_io;

static int io_read(void *opaque, uint8_t *buf, int size)
{
    mem_io *m = opaque;
    size_t left = m->n - m->off;
    if (!left)
        return AVERROR_EOF;
    if ((size_t)size > left)
        size = (int)left;
    memcpy(buf, m->p + m->off, (size_t)size);
    m->off += (size_t)size;
    return size;
}

static int64_t io_seek(void *opaque, int64_t off, int whence)
{
    mem_io *m = opaque;
    int64_t base;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return (int64_t)m->n;
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = (int64_t)m->off; break;
    case SEEK_END: base = (int64_t)m->n; break;
    default: return AVERROR(EINVAL);
    }
    if ((off > 0 && base > INT64_MAX - off) || base + off < 0 ||
        (uint64_t)(base + off) > m->n)
        return AVERROR(EINVAL);
    m->off = (size_t)(base + off);
    return (int64_t)m->off;
}

static int interrupted(void *opaque)
{
    return Dlk_now_s() > ((mem_io *)opaque)->deadline;
}

static int deny_open(AVFormatContext *s, AVIOContext **pb, const char *url,
                     int flags, AVDictionary **opts)
{
    (void)s, (void)pb, (void)url, (void)flags, (void)opts;
    return AVERROR(EPERM);
}

/* The decoding state of one call. */
typedef struct vdec {
    const char *name;
    const Dlk_video_opts *o;
    mem_io io;
    AVFormatContext *fc;
    AVIOContext *pb;
    AVCodecContext *cc;
    AVPacket *pkt;
    AVFrame *cur, *prev;
    struct SwsContext *sws;
    int vs;               /* the stream index */
    double tb, start;     /* stream time base, first timestamp (s) */
    double prev_t;
    long decoded, packets;
    double *targets;      /* NULL: every frame */
    int ntargets, k;      /* targets filled so far */
    double limit_t;       /* every-frame mode: up to this time (0: all) */
    int dw, dh, dc;       /* output frame */
    size_t fbytes;
    Dlk_buf out;
    Dlk_image rgb;        /* a frame in the output's channels */
} vdec;

static dlk_status av_fail(vdec *v, dlk_error *err, dlk_status code,
                          const char *what, int ret)
{
    char buf[AV_ERROR_MAX_STRING_SIZE] = "";
    if (ret == AVERROR_EXIT || interrupted(&v->io))
        return Dlk_fail(err, DLK_ELIMIT, "cannot decode video '%s': %s: "
                        "over the time budget of %.0f s", v->name, what,
                        MAX_SECONDS);
    Dlk_av.av_strerror(ret, buf, sizeof buf);
    return Dlk_fail(err, code, "cannot decode video '%s': %s: %s", v->name,
                    what, buf);
}

static dlk_status open_input(vdec *v, dlk_error *err)
{
    uint8_t *iobuf = Dlk_av.av_malloc(IO_BUF);
    v->fc = Dlk_av.avformat_alloc_context();
    if (iobuf)
        v->pb = Dlk_av.avio_alloc_context(iobuf, IO_BUF, 0, &v->io, io_read, NULL,
                                   io_seek);
    if (!v->fc || !v->pb) {
        if (!v->pb)
            Dlk_av.av_free(iobuf);
        return Dlk_oom(err);
    }
    v->fc->pb = v->pb;
    v->fc->flags |= AVFMT_FLAG_CUSTOM_IO;
    v->fc->interrupt_callback.callback = interrupted;
    v->fc->interrupt_callback.opaque = &v->io;
    v->fc->io_open = deny_open;
    v->fc->format_whitelist = Dlk_av.av_strdup(formats);
    v->fc->protocol_whitelist = Dlk_av.av_strdup("none");
    int ret = Dlk_av.avformat_open_input(&v->fc, NULL, NULL, NULL);
    if (ret < 0) /* fc was freed */
        return av_fail(v, err, DLK_EDECODE, "unknown or bad container", ret);
    if ((ret = Dlk_av.avformat_find_stream_info(v->fc, NULL)) < 0)
        return av_fail(v, err, DLK_EDECODE, "cannot read stream info", ret);
    v->vs = -1;
    for (unsigned i = 0; i < v->fc->nb_streams; i++) {
        AVStream *s = v->fc->streams[i];
        if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
            !(s->disposition & AV_DISPOSITION_ATTACHED_PIC)) {
            v->vs = (int)i;
            break;
        }
    }
    if (v->vs < 0)
        return Dlk_fail(err, DLK_EDECODE, "cannot decode video '%s': no "
                        "video stream", v->name);
    return DLK_OK;
}

static dlk_status open_decoder(vdec *v, dlk_error *err)
{
    AVStream *s = v->fc->streams[v->vs];
    AVCodecParameters *par = s->codecpar;
    if (par->width > 0 && par->height > 0) {
        dlk_status st = Dlk_check_pixels((uint64_t)par->width,
                                         (uint64_t)par->height, &v->o->image,
                                         v->name, err);
        if (st)
            return st;
    }
    const AVCodec *codec = Dlk_av.avcodec_find_decoder(par->codec_id);
    if (!codec)
        return Dlk_fail(err, DLK_EDECODE, "cannot decode video '%s': no "
                        "decoder for codec '%s'", v->name,
                        Dlk_av.avcodec_get_name(par->codec_id));
    if (!(v->cc = Dlk_av.avcodec_alloc_context3(codec)))
        return Dlk_oom(err);
    int ret = Dlk_av.avcodec_parameters_to_context(v->cc, par);
    if (ret >= 0) {
        v->cc->thread_count = 1; /* ingest runs one decode per core */
        ret = Dlk_av.avcodec_open2(v->cc, codec, NULL);
    }
    if (ret < 0)
        return av_fail(v, err, DLK_EDECODE, "cannot open the decoder", ret);
    v->tb = av_q2d(s->time_base);
    v->start = s->start_time != AV_NOPTS_VALUE ? s->start_time * v->tb : 0;
    return DLK_OK;
}

/* The clip's length in seconds, from the stream, the container, or the
 * frame count and rate; 0 when none says. */
static double clip_duration(const vdec *v)
{
    const AVStream *s = v->fc->streams[v->vs];
    if (s->duration > 0 && s->duration != AV_NOPTS_VALUE)
        return s->duration * v->tb;
    if (v->fc->duration > 0 && v->fc->duration != AV_NOPTS_VALUE)
        return (double)v->fc->duration / AV_TIME_BASE;
    AVRational r = Dlk_av.av_guess_frame_rate(v->fc, (AVStream *)s, NULL);
    if (s->nb_frames > 0 && r.num > 0 && r.den > 0)
        return s->nb_frames / av_q2d(r);
    return 0;
}

static dlk_status plan(vdec *v, dlk_error *err)
{
    const Dlk_video_opts *o = v->o;
    int maxf = o->max_frames > 0 ? o->max_frames : DLK_DEFAULT_MAX_FRAMES;
    if (o->frames < 0 || o->fps < 0 || o->clip_seconds < 0 ||
        !isfinite(o->fps) || !isfinite(o->clip_seconds))
        return Dlk_fail(err, DLK_EINVAL, "frames %d, fps %g, clip seconds "
                        "%g: none can be negative", o->frames, o->fps,
                        o->clip_seconds);
    if (!o->frames && !o->fps) {
        v->limit_t = o->clip_seconds;
        return DLK_OK;
    }
    double d = clip_duration(v);
    double n;
    if (o->frames) {
        if (d <= 0)
            return Dlk_fail(err, DLK_EDECODE, "cannot decode video '%s': "
                            "unknown duration (sample with fps and "
                            "clip_seconds instead)", v->name);
        if (o->clip_seconds > 0 && o->clip_seconds < d)
            d = o->clip_seconds;
        n = o->frames;
    } else {
        double span = o->clip_seconds > 0 ? o->clip_seconds : d;
        if (span <= 0)
            return Dlk_fail(err, DLK_EDECODE, "cannot decode video '%s': "
                            "unknown duration (give clip_seconds)", v->name);
        n = floor(span * o->fps + 1e-6);
        if (n < 1)
            n = 1;
    }
    if (n > maxf)
        return Dlk_fail(err, DLK_ELIMIT, "cannot decode video '%s': %.0f "
                        "frames are over the limit of %d", v->name, n, maxf);
    v->ntargets = (int)n;
    if (!(v->targets = malloc(sizeof *v->targets * v->ntargets)))
        return Dlk_oom(err);
    for (int i = 0; i < v->ntargets; i++)
        v->targets[i] = o->frames ? (i + 0.5) * d / n : i / o->fps;
    return DLK_OK;
}

/* Convert frame f to the output's channels at its own size. */
static dlk_status to_image(vdec *v, const AVFrame *f, dlk_error *err)
{
    static const enum AVPixelFormat fmts[] = {
        AV_PIX_FMT_NONE, AV_PIX_FMT_GRAY8, AV_PIX_FMT_NONE,
        AV_PIX_FMT_RGB24, AV_PIX_FMT_RGBA};
    dlk_status st = Dlk_check_pixels((uint64_t)f->width, (uint64_t)f->height,
                                     &v->o->image, v->name, err);
    if (st)
        return st;
    size_t need = (size_t)f->width * f->height * v->dc;
    if (v->rgb.w != f->width || v->rgb.h != f->height) {
        free(v->rgb.px);
        if (!(v->rgb.px = malloc(need + 64))) {
            memset(&v->rgb, 0, sizeof v->rgb);
            return Dlk_oom(err);
        }
        v->rgb.w = f->width, v->rgb.h = f->height, v->rgb.c = v->dc;
    }
    enum AVPixelFormat sf = f->format;
    v->sws = Dlk_av.sws_getCachedContext(v->sws, f->width, f->height, sf, f->width,
                                  f->height, fmts[v->dc],
                                  SWS_BILINEAR | SWS_ACCURATE_RND |
                                      SWS_FULL_CHR_H_INT,
                                  NULL, NULL, NULL);
    if (!v->sws)
        return Dlk_fail(err, DLK_EDECODE, "cannot decode video '%s': cannot "
                        "convert pixel format '%s'", v->name,
                        Dlk_av.av_get_pix_fmt_name(sf));
    int cs = f->colorspace;
    if (cs <= AVCOL_SPC_RGB || cs > AVCOL_SPC_BT2020_CL ||
        cs == AVCOL_SPC_UNSPECIFIED)
        cs = SWS_CS_DEFAULT;
    bool full = f->color_range == AVCOL_RANGE_JPEG ||
                sf == AV_PIX_FMT_YUVJ420P || sf == AV_PIX_FMT_YUVJ422P ||
                sf == AV_PIX_FMT_YUVJ444P || sf == AV_PIX_FMT_YUVJ440P;
    Dlk_av.sws_setColorspaceDetails(v->sws, Dlk_av.sws_getCoefficients(cs), full,
                             Dlk_av.sws_getCoefficients(SWS_CS_DEFAULT), 1, 0,
                             1 << 16, 1 << 16);
    uint8_t *dst[4] = {v->rgb.px};
    int ds[4] = {f->width * v->dc};
    if (Dlk_av.sws_scale(v->sws, (const uint8_t *const *)f->data, f->linesize, 0,
                  f->height, dst, ds) != f->height)
        return Dlk_fail(err, DLK_EDECODE, "cannot decode video '%s': cannot "
                        "convert a frame", v->name);
    return DLK_OK;
}

/* Append frame f as output frame number v->k. */
static dlk_status emit(vdec *v, const AVFrame *f, dlk_error *err)
{
    dlk_status st = to_image(v, f, err);
    if (st)
        return st;
    if (!v->fbytes) { /* the first: fixes the frame size */
        if ((st = Dlk_resize_dims(f->width, f->height, &v->o->image, &v->dw,
                                  &v->dh, err)))
            return st;
        v->fbytes = (size_t)v->dw * v->dh * v->dc;
        uint64_t total;
        if (v->targets &&
            (!Dlk_mul_u64(v->fbytes, (uint64_t)v->ntargets, &total) ||
             total > MAX_OUT_BYTES))
            return Dlk_fail(err, DLK_ELIMIT, "cannot decode video '%s': %d "
                            "frames of %dx%d are too large", v->name,
                            v->ntargets, v->dw, v->dh);
        if (v->targets && (st = Dlk_buf_reserve(&v->out, total, err)))
            return st;
    }
    if (v->out.len + v->fbytes > MAX_OUT_BYTES)
        return Dlk_fail(err, DLK_ELIMIT, "cannot decode video '%s': frames "
                        "over %llu bytes", v->name,
                        (unsigned long long)MAX_OUT_BYTES);
    if ((st = Dlk_buf_reserve(&v->out, v->fbytes, err)) ||
        (st = Dlk_resize_into(&v->rgb, &v->o->image, v->dw, v->dh,
                              v->out.data + v->out.len, err)))
        return st;
    v->out.len += v->fbytes;
    v->k++;
    return DLK_OK;
}

static double frame_time(vdec *v, const AVFrame *f)
{
    int64_t ts = f->best_effort_timestamp;
    if (ts == AV_NOPTS_VALUE) {
        AVRational r = Dlk_av.av_guess_frame_rate(v->fc, v->fc->streams[v->vs], NULL);
        double fps = r.num > 0 && r.den > 0 ? av_q2d(r) : 25.0;
        return (v->decoded - 1) / fps;
    }
    return ts * v->tb - v->start;
}

/* One decoded frame in v->cur; sets *done once no more are needed. */
static dlk_status take(vdec *v, bool *done, dlk_error *err)
{
    dlk_status st = DLK_OK;
    int maxf = v->o->max_frames > 0 ? v->o->max_frames
                                    : DLK_DEFAULT_MAX_FRAMES;
    if (++v->decoded > MAX_DECODED)
        return Dlk_fail(err, DLK_ELIMIT, "cannot decode video '%s': over "
                        "%ld decoded frames", v->name, MAX_DECODED);
    double t = frame_time(v, v->cur);
    if (!v->targets) {
        if (v->limit_t > 0 && t >= v->limit_t) {
            *done = true;
            return DLK_OK;
        }
        if (v->k >= maxf)
            return Dlk_fail(err, DLK_ELIMIT, "cannot decode video '%s': "
                            "over the limit of %d frames", v->name, maxf);
        return emit(v, v->cur, err);
    }
    bool have_prev = v->prev->width > 0;
    while (v->k < v->ntargets && t >= v->targets[v->k] && !st) {
        double g = v->targets[v->k];
        bool use_prev = have_prev && g - v->prev_t <= t - g;
        st = emit(v, use_prev ? v->prev : v->cur, err);
    }
    Dlk_av.av_frame_unref(v->prev);
    Dlk_av.av_frame_move_ref(v->prev, v->cur);
    v->prev_t = t;
    *done = v->k >= v->ntargets;
    return st;
}

static dlk_status drain(vdec *v, bool *done, dlk_error *err)
{
    for (;;) {
        int ret = Dlk_av.avcodec_receive_frame(v->cc, v->cur);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return DLK_OK;
        if (ret < 0)
            return av_fail(v, err, DLK_EDECODE, "cannot decode a frame", ret);
        dlk_status st = take(v, done, err);
        Dlk_av.av_frame_unref(v->cur);
        if (st || *done)
            return st;
    }
}

static dlk_status run(vdec *v, dlk_error *err)
{
    bool done = false;
    dlk_status st = DLK_OK;
    while (!done && !st) {
        if (++v->packets > MAX_PACKETS)
            return Dlk_fail(err, DLK_ELIMIT, "cannot decode video '%s': over "
                            "%ld packets", v->name, MAX_PACKETS);
        if (interrupted(&v->io))
            return av_fail(v, err, DLK_ELIMIT, "decoding", AVERROR_EXIT);
        int ret = Dlk_av.av_read_frame(v->fc, v->pkt);
        if (ret == AVERROR_EOF) {
            Dlk_av.avcodec_send_packet(v->cc, NULL);
            st = drain(v, &done, err);
            break;
        }
        if (ret < 0)
            return av_fail(v, err, DLK_EDECODE, "cannot read a packet", ret);
        if (v->pkt->stream_index == v->vs) {
            ret = Dlk_av.avcodec_send_packet(v->cc, v->pkt);
            if (ret < 0 && ret != AVERROR(EAGAIN))
                st = av_fail(v, err, DLK_EDECODE, "cannot decode a packet",
                             ret);
            else
                st = drain(v, &done, err);
        }
        Dlk_av.av_packet_unref(v->pkt);
    }
    if (st)
        return st;
    /* Past the last frame: the remaining targets get the last one. */
    while (v->targets && v->k < v->ntargets && v->prev->width > 0 && !st)
        st = emit(v, v->prev, err);
    if (!st && v->k == 0)
        st = Dlk_fail(err, DLK_EDECODE, "cannot decode video '%s': no "
                      "frames decoded", v->name);
    return st;
}

static void vdec_free(vdec *v)
{
    if (v->fc)
        Dlk_av.avformat_close_input(&v->fc);
    if (v->pb) {
        Dlk_av.av_freep(&v->pb->buffer);
        Dlk_av.avio_context_free(&v->pb);
    }
    Dlk_av.avcodec_free_context(&v->cc);
    Dlk_av.av_packet_free(&v->pkt);
    Dlk_av.av_frame_free(&v->cur);
    Dlk_av.av_frame_free(&v->prev);
    Dlk_av.sws_freeContext(v->sws);
    free(v->targets);
    Dlk_image_free(&v->rgb);
    Dlk_buf_free(&v->out);
}

dlk_status Dlk_decode_video(const uint8_t *p, size_t n, const char *name,
                            const Dlk_video_opts *o, Dlk_decoded *out,
                            dlk_error *err)
{
    static const Dlk_video_opts defaults;
    memset(out, 0, sizeof *out);
    if (!o)
        o = &defaults;
    if (!name)
        name = "(video)";
    dlk_status st = Dlk_av_load(err);
    if (st) {
        Dlk_fail_wrap(err, "cannot decode video '%s'", name);
        return st;
    }
    vdec v = {.name = name, .o = o, .io = {p, n, 0, Dlk_now_s() + MAX_SECONDS}};
    Dlk_buf_init(&v.out);
    int dw, dh;
    st = Dlk_resize_dims(1, 1, &o->image, &dw, &dh, err);
    if (st) {
        Dlk_fail_wrap(err, "cannot decode video '%s'", name);
        return st;
    }
    if (!n)
        return Dlk_fail(err, DLK_EDECODE, "cannot decode video '%s': empty "
                        "object", name);
    v.dc = o->image.channels ? o->image.channels : 3;
    v.pkt = Dlk_av.av_packet_alloc();
    v.cur = Dlk_av.av_frame_alloc();
    v.prev = Dlk_av.av_frame_alloc();
    if (!v.pkt || !v.cur || !v.prev)
        st = Dlk_oom(err);
    if (!st && !(st = open_input(&v, err)) && !(st = open_decoder(&v, err)) &&
        !(st = plan(&v, err)))
        st = run(&v, err);
    if (!st) {
        out->dtype = DLK_U8;
        out->ndim = 4;
        int64_t hwc[4] = {v.k, v.dh, v.dw, v.dc}, chw[4] = {v.k, v.dc, v.dh,
                                                            v.dw};
        memcpy(out->shape, o->image.chw ? chw : hwc, sizeof hwc);
        out->data = v.out;
        Dlk_buf_init(&v.out);
    }
    vdec_free(&v);
    return st;
}
