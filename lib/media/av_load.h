/* av_load.h - FFmpeg, opened on the first video decode (dlopen), not
 * linked: its libraries and their codec dependencies are over a hundred
 * shared objects that every dlk process would load, and few decode
 * video.  The FFmpeg headers still give the types, macros and inline
 * functions (av_q2d); the functions are called through Dlk_av. */
#ifndef DLK_MEDIA_AV_LOAD_H
#define DLK_MEDIA_AV_LOAD_H

#include "media/decode.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>

/* X(library, function): every FFmpeg function decode_video.c calls. */
#define DLK_AV_FUNCS(X)                                                       \
    X(avutil, av_log_set_level)                                               \
    X(avutil, av_strerror)                                                    \
    X(avutil, av_malloc)                                                      \
    X(avutil, av_free)                                                        \
    X(avutil, av_freep)                                                       \
    X(avutil, av_strdup)                                                      \
    X(avutil, av_frame_alloc)                                                 \
    X(avutil, av_frame_free)                                                  \
    X(avutil, av_frame_unref)                                                 \
    X(avutil, av_frame_move_ref)                                              \
    X(avutil, av_get_pix_fmt_name)                                            \
    X(swscale, sws_getCachedContext)                                          \
    X(swscale, sws_setColorspaceDetails)                                      \
    X(swscale, sws_getCoefficients)                                           \
    X(swscale, sws_scale)                                                     \
    X(swscale, sws_freeContext)                                               \
    X(avcodec, avcodec_find_decoder)                                          \
    X(avcodec, avcodec_get_name)                                              \
    X(avcodec, avcodec_alloc_context3)                                        \
    X(avcodec, avcodec_parameters_to_context)                                 \
    X(avcodec, avcodec_open2)                                                 \
    X(avcodec, avcodec_send_packet)                                           \
    X(avcodec, avcodec_receive_frame)                                         \
    X(avcodec, avcodec_free_context)                                          \
    X(avcodec, av_packet_alloc)                                               \
    X(avcodec, av_packet_free)                                                \
    X(avcodec, av_packet_unref)                                               \
    X(avformat, avformat_alloc_context)                                       \
    X(avformat, avio_alloc_context)                                           \
    X(avformat, avio_context_free)                                            \
    X(avformat, avformat_open_input)                                          \
    X(avformat, avformat_find_stream_info)                                    \
    X(avformat, avformat_close_input)                                         \
    X(avformat, av_read_frame)                                                \
    X(avformat, av_guess_frame_rate)

/* The functions, each member typed and named as the one it stands for. */
#define DLK_AV_MEMBER(lib, fn) __typeof__(fn) *fn;
typedef struct Dlk_av_funcs {
    DLK_AV_FUNCS(DLK_AV_MEMBER)
} Dlk_av_funcs;
#undef DLK_AV_MEMBER

/* Filled by Dlk_av_load; read only after it returned DLK_OK. */
extern Dlk_av_funcs Dlk_av;

/* Open FFmpeg's libraries (once a process, FFmpeg's logging silenced:
 * the library never prints) and fill Dlk_av.  DLK_EUNSUPPORTED, naming
 * the library and the package to install, when one cannot be opened or
 * lacks a function; every later call fails the same way. */
dlk_status Dlk_av_load(dlk_error *err);

#endif
