#!/usr/bin/env bash
# t530-wheel.sh - the binary wheel (`make wheel`; build-wheel/ reused
# when current): one wheel for every CPython from 3.11 on, its binding
# built against the stable ABI, named
# dlk-VERSION-cp311-abi3-manylinux_2_N_x86_64.whl with N no newer than
# this glibc; pip's own check of its tags takes it for CPython 3.12 and
# 3.13, not for 3.10; installed with pip alone into a fresh venv, where
# its binding is _core.abi3.so and no file of it loads anything from
# outside the venv but glibc (ldd); and from it: `dlk --version`, a
# create, ingest and ls, a PNG written by `dlk cat --png` and read back
# by `create from-dir` (the bundled libpng both ways), videos of every
# codec the bundled FFmpeg decodes ingested through it (its libraries
# the venv's, not the system's; the clips equal to those the build's dlk
# decodes through the system's FFmpeg), and a dlk.Loader
# epoch whose rows and labels are the ingested ones.  Then `pip install`
# of the package's sources over a current build/ takes that build's
# library and binary, says so and builds nothing.
. "$DLK_TESTS/lib.sh"

if ! have_numpy; then
    skip "wheel" "numpy missing: python3 -m pip install numpy"
    exit 0
fi
repo=$(cd "$DLK_TESTS/.." && pwd)
ver=$(sed -n 's/^#define DLK_VERSION_STRING "\(.*\)"/\1/p' "$repo/include/dlk.h")

ok "make wheel" make -C "$repo" --no-print-directory -j2 wheel
whl=$(ls "$repo"/build-wheel/wheelhouse/dlk-*.whl 2>/dev/null | head -n 1)
check "one wheel, named dlk-$ver-cp311-abi3-manylinux_2_N_x86_64.whl ($(basename "$whl"))" \
    sh -c 'test "$(ls "$1"/build-wheel/wheelhouse/*.whl | wc -l)" = 1 &&
        basename "$2" | grep -Eq "^dlk-$3-cp311-abi3-manylinux_2_[0-9]+_x86_64\.whl$"' \
    sh "$repo" "$whl" "$ver"
glibc=$(ldd --version | head -n 1 | grep -oE '[0-9]+\.[0-9]+$')
tag=$(basename "$whl" | sed -n 's/.*manylinux_2_\([0-9]*\)_x86_64.*/\1/p')
check "its manylinux tag (glibc 2.$tag) is no newer than this glibc ($glibc)" \
    test "${tag:-999}" -le "${glibc#2.}"

# pip's resolver for another interpreter (--python-version): the tags it
# takes for that CPython, this machine's platform; nothing installed
for v in 3.12 3.13; do
    ok "pip takes the wheel for CPython $v" python3 -m pip install -q --dry-run --no-index \
        --no-deps --only-binary=:all: --python-version "$v" --target "$T/none" \
        --report "$T/report-$v.json" "$whl"
    check "its report installs that wheel" python3 -c 'import json, os, sys
r = json.load(open(sys.argv[1]))
urls = [i["download_info"]["url"] for i in r["install"]]
sys.exit(len(urls) != 1 or not urls[0].endswith("/" + os.path.basename(sys.argv[2])))' \
        "$T/report-$v.json" "$whl"
done
fails "pip refuses it for CPython 3.10" 1 python3 -m pip install -q --dry-run --no-index \
    --no-deps --only-binary=:all: --python-version 3.10 --target "$T/none" "$whl"
check "as not a supported wheel" grep -q "is not a supported wheel on this platform" "$ERR"
check "nothing installed by those" test ! -e "$T/none"

# pip alone, nothing fetched (numpy, the one dependency, is the system's)
ok "a fresh venv" python3 -m venv --system-site-packages "$T/venv"
ok "pip installs the wheel" "$T/venv/bin/python" -m pip install -q --no-index \
    --no-deps --no-cache-dir "$whl"
site=$("$T/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
check "import dlk takes the venv's package" sh -c \
    'cd / && "$1/bin/python" -c "import dlk; print(dlk.__file__)" | grep -q "^$2/dlk/"' \
    sh "$T/venv" "$site"

# every ELF file of the package: what it loads comes from the venv or is
# glibc's (libresolv: glibc's too, which Kerberos in libcurl needs); a
# library of data alone (ICU's, under libarchive's libxml2) loads none
find "$site/dlk" "$site/dlk.libs" -type f \( -name '*.so*' -o -path '*/bin/*' \) \
    >"$T/elf"
check "the package holds the binding, libdlk, the dlk binary and dlk.libs/" sh -c \
    'grep -q "/dlk/_core\.abi3\.so$" "$1" && grep -q "/dlk/libdlk.so.1$" "$1" &&
     grep -q "/dlk/bin/dlk$" "$1" && grep -q "/dlk.libs/libcurl" "$1" &&
     grep -q "/dlk.libs/libz.so.1$" "$1"' sh "$T/elf"
while read -r f; do ldd "$f" | sed "s|^|$(basename "$f"): |"; done <"$T/elf" >"$T/ldd"
check "ldd: every library found ($(wc -l <"$T/elf") files)" \
    sh -c '! grep "not found" "$1"' sh "$T/ldd"
check "ldd: nothing from outside the venv but the C runtime" sh -c '
    grep -v "statically linked\$" "$1" | awk "{print \$1, \$2, \$4}" | grep -v " $2/" |
        grep -vE ": (linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|(libc|libm|libpthread|libdl|librt|libresolv)\.so\.[0-9]+) " |
        grep . && exit 1 || exit 0' sh "$T/ldd" "$site"

dk=$T/venv/bin/dlk
ok "dlk --version (the console entry point)" "$dk" --version
check "it is dlk $ver" grep -q "^dlk $ver " "$OUT"

python3 - "$T/src" <<'PY'
import os, sys, numpy as np
out = sys.argv[1]
os.makedirs(out)
rng = np.random.default_rng(530)
for i in range(40):
    p = os.path.join(out, "%06d" % i)
    np.save(p + ".images.npy", rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
    np.save(p + ".labels.npy", np.int32(i))
PY
ok "dlk create" "$dk" create "$T/ds" --tensor images:u8:8x8x3 --tensor labels:i32
ok "dlk ingest" "$dk" ingest "$T/ds" from-dir "$T/src" --quiet
ok "dlk commit" "$dk" commit "$T/ds" -m first
ok "dlk ls" "$dk" ls "$T/ds" --json
check "ls: 40 samples of images and labels" python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
n = {t["name"]: t["samples"] for t in m["tensors"]}
sys.exit(n.get("images") != 40 or n.get("labels") != 40)' "$OUT"

mkdir -p "$T/png/a" "$T/png/b"
ok "dlk cat --png (libpng, bundled)" sh -c '"$1" cat "$2" images 3 --png >"$3/a/0.png" &&
    "$1" cat "$2" images 4 --png >"$3/b/1.png"' sh "$dk" "$T/ds" "$T/png"
ok "dlk create from-dir over those PNGs" "$dk" create "$T/ds2" from-dir "$T/png" --quiet
ok "their pixels read back" sh -c '"$1" cat "$2" images 0 --npy >"$3/px.npy" &&
    "$1" cat "$4" images 3 --npy >"$3/px3.npy" && "$1" cat "$4" images 4 --npy >"$3/px4.npy"' \
    sh "$dk" "$T/ds2" "$T" "$T/ds"
check "equal to an image written" python3 -c 'import numpy as np, sys
a, b, c = (np.load(sys.argv[1] + f) for f in ("/px.npy", "/px3.npy", "/px4.npy"))
sys.exit(not (np.array_equal(a, b) or np.array_equal(a, c)))' "$T"

# video: the wheel's own FFmpeg (dlk.libs/), opened at the first video;
# the same clips through the build's dlk and the system's FFmpeg
check "the wheel holds FFmpeg's libraries, its licence and source" sh -c '
    for l in libavutil.so.57 libswscale.so.6 libavcodec.so.59 libavformat.so.59; do
        grep -q "/dlk.libs/$l$" "$1" || exit 1; done
    test -s "$2/dlk/licenses/ffmpeg/COPYING.LGPLv2.1" &&
        grep -q "^FFmpeg [0-9.]*, built by" "$2/dlk/licenses/ffmpeg/SOURCE"' sh "$T/elf" "$site"
if command -v ffmpeg >/dev/null 2>&1; then
    mkdir -p "$T/vid/a"
    ok "clips made by ffmpeg: h264, hevc, av1, vp9, vp8, mpeg4, mjpeg, prores" sh -c '
        clip() { ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i "testsrc2=s=96x64:r=10:d=1" "$@"; }
        cd "$1" &&
        clip -c:v libx264 -pix_fmt yuv420p h264.mp4 &&
        clip -c:v libx264 -pix_fmt yuv420p h264m.mkv &&
        clip -c:v libx265 -pix_fmt yuv420p -x265-params log-level=none hevc.mp4 &&
        clip -c:v libaom-av1 -cpu-used 8 av1.webm &&
        clip -c:v libvpx-vp9 -deadline realtime -cpu-used 8 vp9.webm &&
        clip -c:v libvpx vp8.webm &&
        clip -c:v mpeg4 mpeg4.avi &&
        clip -c:v mjpeg mjpeg.avi &&
        clip -c:v prores_ks prores.mov' sh "$T/vid/a"
    nclips=$(ls "$T/vid/a" | wc -l)
    ok "the wheel's dlk ingests them" env LD_DEBUG=libs LD_DEBUG_OUTPUT="$T/ld" \
        "$dk" create "$T/dsv" from-dir "$T/vid" --frames 4 --resize 32x32 --json
    check "... all $nclips, each a clip of 4x32x32x3" sh -c '"$1" ls "$2" --json | python3 -c "
import json, sys
t = [x for x in json.load(sys.stdin)[\"tensors\"] if x[\"kind\"] == \"video\"][0]
assert t[\"shape\"] == [4, 32, 32, 3] and t[\"samples\"] == int(sys.argv[1]), t" "$3"' \
        sh "$dk" "$T/dsv" "$nclips"
    check "through the venv's FFmpeg, none of the system's" sh -c '
        cat "$1".* | grep -E "calling init: .*/libav(codec|format|util)\.so" >"$1.av" &&
        test "$(grep -c "calling init: $2/" "$1.av")" -ge 3 &&
        ! grep -v "calling init: $2/" "$1.av"' sh "$T/ld" "$site/dlk/bin/../../dlk.libs"
    if "$DLK" --version >/dev/null 2>&1 && "$DLK" create "$T/dss" from-dir "$T/vid" \
            --frames 4 --resize 32x32 --quiet 2>/dev/null; then
        check "the same clips as the build's dlk through the system's FFmpeg" sh -c '
            n=0; while [ $n -lt "$3" ]; do
                "$1" cat "$2/dsv" key $n >"$2/wk" && "$1" cat "$2/dss" key $n >"$2/sk" &&
                "$1" cat "$2/dsv" video $n --npy >"$2/w.npy" && "$1" cat "$2/dss" video $n --npy >"$2/s.npy" &&
                    cmp -s "$2/wk" "$2/sk" && cmp -s "$2/w.npy" "$2/s.npy" || exit 1
                n=$((n + 1)); done' sh "$DLK" "$T" "$nclips"
    else
        skip "the wheel's clips against the system's FFmpeg" "this build has no video"
    fi
else
    skip "video from the wheel" "ffmpeg missing: apt-get install ffmpeg"
fi

ok "a dlk.Loader epoch from the wheel" sh -c 'cd / && "$1" -c "
import dlk, numpy as np, sys
l = dlk.Loader(sys.argv[1], batch_size=6, device=\"cpu\", seed=3)
rows, labels = [], []
for b in l:
    keep = ~np.asarray(b.pad)
    rows += [int(i) for i in np.asarray(b.index)[keep]]
    labels += [int(v) for v in np.from_dlpack(b[\"labels\"])[keep]]
ds = dlk.open(sys.argv[1])
assert sorted(rows) == list(range(40)), rows
assert labels == [int(ds[r][\"labels\"]) for r in rows], (labels, rows)
assert sorted(labels) == list(range(40)), labels
assert rows != list(range(40)), \"not shuffled\"
print(len(rows))
" "$2"' sh "$T/venv/bin/python" "$T/ds"
check "its 40 rows, each with its own label, shuffled" grep -qx 40 "$OUT"

# `pip install` of the sources over a current build/: the build's own
# library and binary, nothing built (the copy of the package's folder
# keeps setuptools' output out of the sources)
if [ -n "${SAN:-}" ]; then
    ok "build/ made current (the plain pass built it)" env -u MAKEFLAGS -u MFLAGS -u SAN make -C "$repo" --no-print-directory -j2 all
fi
cp -r "$repo/python" "$T/pkg" && rm -rf "$T/pkg/build" "$T/pkg/dlk/bin" "$T"/pkg/dlk/*.so*
t0=$SECONDS
ok "pip install over a current build/" env DLK_SOURCE_DIR="$repo" python3 -m pip install -v \
    --no-build-isolation --no-deps --no-cache-dir --target "$T/py" "$T/pkg"
secs=$((SECONDS - t0))
check "it says it takes build/" grep -q "build is current: the package takes its libdlk.so.1 and dlk" "$OUT" "$ERR"
check "and ran no compiler" sh -c '! grep -E "^ +(CC|LINK|AR) " "$1" "$2"' sh "$OUT" "$ERR"
check "the package's library is build/'s" cmp "$T/py/dlk/libdlk.so.1" "$repo/build/libdlk.so.$ver"
check "its dlk binary is build/'s" cmp "$T/py/dlk/bin/dlk" "$repo/build/dlk"
check "within 60 s (${secs} s)" test "$secs" -le 60
ok "its dlk command runs" env PYTHONPATH="$T/py" "$T/py/bin/dlk" ls "$T/ds"
