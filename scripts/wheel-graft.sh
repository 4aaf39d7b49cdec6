#!/usr/bin/env bash
# scripts/wheel-graft.sh WHEEL [FFMPEG] - after auditwheel: the libraries
# that the wheel's files still load from the system, other than the C
# runtime, copied into its dlk.libs/ too; with FFMPEG (the prefix of
# scripts/ffmpeg-min.sh) FFmpeg's decoding libraries as well, under their
# sonames (libdlk opens them by soname at the first video, and its
# RPATH, auditwheel's, finds dlk.libs/ first), their licence and source
# under dlk/licenses/ffmpeg/.  The manylinux policy leaves some to the
# system (zlib and expat among them), but a training node's image need
# not have them; each file's RPATH (auditwheel's, $ORIGIN-based) finds
# them there first.  The wheel is rewritten in place (its RECORD made
# again by `wheel pack`).
set -eu
whl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m wheel unpack -d "$tmp" "$whl" >/dev/null
root=$(echo "$tmp"/*)
mkdir -p "$root/dlk.libs"
ffmpeg=${2:-}
if [ -n "$ffmpeg" ]; then
    for l in libavutil libswscale libavcodec libavformat; do
        f=$(ls "$ffmpeg"/lib/$l.so.[0-9]* | grep -E '\.so\.[0-9]+$')
        cp -L "$f" "$root/dlk.libs/"
        chmod 755 "$root/dlk.libs/$(basename "$f")"
        strip --strip-unneeded "$root/dlk.libs/$(basename "$f")"
        patchelf --force-rpath --set-rpath '$ORIGIN' "$root/dlk.libs/$(basename "$f")"
        echo "wheel-graft: $(basename "$f") (FFmpeg, from $f)"
    done
    mkdir -p "$root/dlk/licenses/ffmpeg"
    cp "$ffmpeg"/COPYING.* "$ffmpeg/SOURCE" "$root/dlk/licenses/ffmpeg/"
fi
# glibc's own libraries: they must match the glibc that runs them
libc_re='/(libc|libm|libpthread|libdl|librt|libresolv)\.so\.[0-9]+$|/ld-linux[-a-z0-9_]*\.so\.[0-9]+$'
outside() { # the libraries outside the unpacked wheel that its ELF files load
    find "$root" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0 |
        xargs -0 -n1 ldd 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3}' |
        grep -v "^$root/" | grep -vE "$libc_re" | sort -u
}
for _ in 1 2 3 4; do # a copied library's own dependencies, then theirs
    libs=$(outside)
    [ -n "$libs" ] || break
    for l in $libs; do
        [ -e "$root/dlk.libs/$(basename "$l")" ] && continue
        cp -L "$l" "$root/dlk.libs/"
        chmod 755 "$root/dlk.libs/$(basename "$l")"
        echo "wheel-graft: $(basename "$l") (from $l)"
    done
    # a grafted library that needed nothing grafted has no RPATH (the
    # loader would still find its neighbours through the RPATH of what
    # loads it, but the library alone would not)
    for f in "$root"/dlk.libs/*; do
        [ -n "$(patchelf --print-rpath "$f")" ] ||
            patchelf --force-rpath --set-rpath '$ORIGIN' "$f"
    done
done
left=$(outside)
if [ -n "$left" ]; then
    echo "wheel-graft: still loaded from the system: $left" >&2
    exit 1
fi
rm -f "$whl"
python3 -m wheel pack -d "$(dirname "$whl")" "$root" >/dev/null
test -f "$whl"
