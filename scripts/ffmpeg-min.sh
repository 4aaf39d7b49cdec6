#!/usr/bin/env bash
# scripts/ffmpeg-min.sh PREFIX - FFmpeg's decoding libraries built from
# source into PREFIX (include/, lib/ with libavutil, libswscale,
# libavcodec and libavformat as shared objects), for the wheel and the
# dist tree to carry.  Only what a video ingest uses: the common video
# decoders, demuxers and parsers, swscale, no programs, devices, filters,
# network or hardware decoding, nothing found on the machine by
# autodetection.  AV1 is decoded by dav1d (the distribution's libdav1d,
# BSD-2-Clause; FFmpeg's own AV1 decoder needs a hardware one under it).
# The libraries then need only libc, libm, zlib and libdav1d, 8 MB in all
# against the distribution's FFmpeg and its hundred-odd libraries.  LGPL
# 2.1 or later: no GPL or non-free part is enabled.
#
# The source is the release tarball Debian distributes (its .dsc gives
# the checksum pinned here), fetched once into PREFIX.src/; set
# FFMPEG_TARBALL=PATH to build from a copy of that file fetched
# elsewhere.  Rerunning with the same version and configuration does
# nothing.  Needs cc, make, nasm (the decoders' SIMD code) and dav1d's
# headers (libdav1d-dev).
set -eu
PREFIX=${1:?usage: scripts/ffmpeg-min.sh PREFIX}
VERSION=5.1.9
SHA256=d9b593bb2ba93d4b50f74177e0cdcd41747e708596367deed0c30348a71dd176
TARBALL=ffmpeg_$VERSION.orig.tar.xz
URLS="http://deb.debian.org/debian/pool/main/f/ffmpeg/$TARBALL
http://deb.debian.org/debian-security/pool/updates/main/f/ffmpeg/$TARBALL"

DECODERS=libdav1d,h264,hevc,vp8,vp9,mpeg4,mpeg1video,mpeg2video,mjpeg,h263,theora,prores
DEMUXERS=mov,matroska,avi,mpegts,mpegps,flv,ogg,h264,hevc,m4v,ivf,mjpeg
PARSERS=av1,h264,hevc,vp8,vp9,mpeg4video,mpegvideo,mjpeg,h263
CONFIG="--disable-everything --disable-autodetect --disable-programs
--disable-doc --disable-avdevice --disable-avfilter --disable-swresample
--disable-postproc --disable-network --disable-debug --enable-shared
--disable-static --enable-pic --enable-pthreads --enable-zlib --enable-libdav1d
--enable-swscale --enable-decoder=$DECODERS --enable-demuxer=$DEMUXERS
--enable-parser=$PARSERS --enable-bsf=vp9_superframe_split"

stamp=$PREFIX/.built
want="$VERSION $(echo $CONFIG | tr '\n' ' ')"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
pkg-config --exists dav1d || {
    echo "ffmpeg-min: dav1d's headers missing: apt-get install libdav1d-dev" >&2
    exit 1
}
for t in cc make nasm; do
    command -v "$t" >/dev/null || {
        echo "ffmpeg-min: $t missing: apt-get install $([ "$t" = cc ] && echo gcc || echo "$t")" >&2
        exit 1
    }
done

src=$PREFIX.src
mkdir -p "$src"
tb=${FFMPEG_TARBALL:-$src/$TARBALL}
if [ ! -f "$tb" ]; then
    for u in $URLS; do
        echo "ffmpeg-min: fetching $u" >&2
        curl -fsSL --retry 3 --max-time 600 -o "$tb.part" "$u" && mv "$tb.part" "$tb" && break
    done
fi
if [ ! -f "$tb" ]; then
    rm -f "$tb.part"
    echo "ffmpeg-min: cannot fetch FFmpeg $VERSION's source; fetch $TARBALL from" \
         "one of: $(echo $URLS) and run again with FFMPEG_TARBALL=/path/to/$TARBALL" >&2
    exit 1
fi
got=$(sha256sum "$tb" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
    echo "ffmpeg-min: $tb has sha256 $got, not FFmpeg $VERSION's $SHA256" >&2
    exit 1
fi

rm -rf "$src/ffmpeg-$VERSION" "$PREFIX"
tar -xJf "$tb" -C "$src"
cd "$src/ffmpeg-$VERSION"
# shellcheck disable=SC2086
./configure --prefix="$PREFIX" $CONFIG >"$src/configure.log" 2>&1 || {
    tail -n 20 "$src/configure.log" >&2
    echo "ffmpeg-min: configure failed (all of it: $src/configure.log)" >&2
    exit 1
}
jobs=$(nproc 2>/dev/null || echo 2)
make -j"$jobs" >"$src/build.log" 2>&1 && make install >>"$src/build.log" 2>&1 || {
    tail -n 20 "$src/build.log" >&2
    echo "ffmpeg-min: build failed (all of it: $src/build.log)" >&2
    exit 1
}
# what a copy of these libraries must say of them (LGPL 2.1, section 6):
# their licence, and the source and configuration they were built from
cp COPYING.LGPLv2.1 "$PREFIX/"
for d in libdav1d6 libdav1d-dev; do
    [ -f /usr/share/doc/$d/copyright ] && cp /usr/share/doc/$d/copyright "$PREFIX/COPYING.dav1d" && break
done
{
    echo "FFmpeg $VERSION, built by dlk's scripts/ffmpeg-min.sh from $TARBALL"
    echo "(sha256 $SHA256), as distributed at:"
    for u in $URLS; do echo "  $u"; done
    echo "dav1d $(pkg-config --modversion dav1d): the distribution's libdav1d"
    echo "configured with:"
    echo "  $(echo $CONFIG)"
} >"$PREFIX/SOURCE"
echo "$want" >"$stamp"
echo "ffmpeg-min: FFmpeg $VERSION in $PREFIX ($(du -shL "$PREFIX"/lib/lib*.so.[0-9]* | awk '{print $1}' | tr '\n' ' '))" >&2
