#!/usr/bin/env bash
# tests/bench/ingest.sh [N] - ingest N JPEGs (500x375, quality 90, as in
# ImageNet; default 2000) to 224x224 from a directory and from the local
# S3 server (moto), against the raw TurboJPEG decode rate of the same files
# on the same cores; scaling from --jobs 1 to all cores (into /dev/shm
# where there is one: the CPU's bound, not the disk's); peak RSS at N/4
# and N rows (the bound does not grow with the source).  The all-cores
# ingest is also measured three times between raw decode runs (the host's
# speed drifts), each ratio against the raw rates around it.
#   DLK=build/dlk DLK_BUILD=build tests/bench/ingest.sh [N]
# On a machine with `make dist` only (no compiler, ffmpeg or moto, like the
# GPU machines): DIST=dist tests/bench/ingest.sh [N] uses dist/bin's dlk
# and decode_bench, makes the JPEGs with Pillow (make_images.py) and says
# that from-s3 was not measured when there is no moto.
set -eu
N=${1:-2000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -n "${DIST:-}" ]; then
    DLK=${DLK:-$DIST/bin/dlk}
else
    DLK=${DLK:-$root/build/dlk}
fi
DLK_BUILD=${DLK_BUILD:-$root/build}
export DLK DLK_TESTS=$root/tests
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-bench.XXXXXX")
trap 'rm -rf "$T" "${SHM:-}"' EXIT
cores=$(nproc)

S=$T/src
mkdir -p "$S/a" "$S/b"
half=$((N / 2))
if command -v ffmpeg >/dev/null && command -v mogrify >/dev/null; then
    kind="ffmpeg testsrc2 + mandelbrot frames, ImageMagick q90"
    echo "# generating $N JPEGs (500x375, q90) ..." >&2
    ffmpeg -nostdin -loglevel error -f lavfi -i "testsrc2=s=500x375:r=25" -frames:v "$half" -qmin 1 -q:v 2 "$S/a/%06d.png"
    ffmpeg -nostdin -loglevel error -f lavfi -i "mandelbrot=s=500x375:r=25" -frames:v "$((N - half))" "$S/b/%06d.png"
    find "$S" -name '*.png' -print0 | xargs -0 -P "$cores" -n 200 mogrify -format jpg -quality 90
    find "$S" -name '*.png' -delete
else
    kind="make_images.py (gradients, shapes, noise), Pillow q90"
    echo "# generating $N JPEGs (500x375, q90) with Pillow ..." >&2
    python3 "$here/make_images.py" "$T/gen" --n "$N" --jpeg-only
    ls "$T/gen/jpeg" | head -n "$half" | while read -r f; do mv "$T/gen/jpeg/$f" "$S/a/"; done
    mv "$T/gen/jpeg/"*.jpg "$S/b/"
fi
ls "$S"/*/*.jpg | head -n $((N / 4)) > "$T/quarter.list"
mkdir -p "$T/q/a" "$T/q/b"
while read -r f; do d=$(basename "$(dirname "$f")"); cp "$f" "$T/q/$d/"; done < "$T/quarter.list"
bytes=$(du -sb "$S" | cut -f1)

if [ -n "${DIST:-}" ]; then
    DB=$DIST/bin/decode_bench # in place: it finds its libraries in ../lib
else
    DB=$T/decode_bench
    cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -I"$root/lib" -o "$DB" \
        "$here/decode_bench.c" "$DLK_BUILD/libdlk.a" \
        $(pkg-config --cflags --libs libturbojpeg libpng libavformat libavcodec libswscale libavutil jansson libxxhash libzstd libcurl expat) -lpthread -lm
fi
raw1=$("$DB" 1 "$S"/*/*.jpg)
rawN=$("$DB" "$cores" "$S"/*/*.jpg)
dlk1=$("$DB" 1 --dlk 224 224 "$S"/*/*.jpg)
dlkN=$("$DB" "$cores" --dlk 224 224 "$S"/*/*.jpg)

run() { # NAME DATASET ARGS... -> rate and peak RSS (KiB)
    local name=$1 ds=$2; shift 2
    # peak RSS (KiB) of the child, without GNU time (absent on some hosts)
    python3 -c 'import resource, subprocess, sys
r = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write("%d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r)' "$T/rss" "$DLK" create "$ds" "$@" --resize 224x224 --json > "$T/out.json"
    python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["skipped"]==0, d
print("%.1f" % (d["ingested"]/d["seconds"]))' "$T/out.json"
}
stages() { # the last run's stages (seconds, summed over threads)
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["stages"]; print(" ".join("%s %.2f" % kv for kv in s.items()))' "$T/out.json"
}
# Scaling is measured into a tmpfs where there is one (the CPU's bound;
# on a disk the higher job counts meet its write rate instead).
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    SHM=$(mktemp -d /dev/shm/dlk-bench.XXXXXX)
    CPUD=$SHM where="/dev/shm"
else
    CPUD=$T where="$(df -P "$T" | awk 'NR==2{print $1}')"
fi
dir1=$(run dir1 "$CPUD/d1" from-dir "$S" --jobs 1); rss1=$(cat "$T/rss")
rm -rf "$CPUD/d1"
dirN=$(run dirN "$T/dN" from-dir "$S"); rssN=$(cat "$T/rss")
stagesN=$(stages)
rm -rf "$T/dN"
# The dataset is 3.7x the JPEGs (150 KB a sample): what the disk takes,
# synced as ingest syncs its chunks, bounds the rate; into a tmpfs it is
# the CPU's.
wrate=$(dd if=/dev/zero of="$T/dd" bs=16M count=64 conv=fdatasync 2>&1 | python3 -c '
import re,sys; m=re.search(r"copied, ([0-9.]+) s", sys.stdin.read()); print("%.2f" % (64*16*2**20/float(m.group(1))/1e9) if m else "?")')
rm -f "$T/dd"
at_cpu=$(run dirC "$CPUD/d" from-dir "$S")
stagesC=$(stages)
rm -rf "$CPUD/d"
# The host's speed drifts by several percent within minutes: measure the
# all-cores ingest again three times, each between two raw decode runs,
# and take each against the mean of the two around it.
paired="" prev=$("$DB" "$cores" "$S"/*/*.jpg)
for k in 1 2 3; do
    r=$(run "dirP$k" "$CPUD/dp" from-dir "$S"); rm -rf "$CPUD/dp"
    next=$("$DB" "$cores" "$S"/*/*.jpg)
    paired="$paired $(python3 -c "print('%.2f' % ($r / (($prev + $next) / 2)))") ($r vs $prev/$next)"
    prev=$next
done
dirQ=$(run dirQ "$T/dQ" from-dir "$T/q"); rssQ=$(cat "$T/rss")
rm -rf "$T/dQ"
mid=""
for j in 2 4 8; do
    [ "$j" -lt "$cores" ] || break
    r=$(run "dir$j" "$CPUD/dj" from-dir "$S" --jobs "$j"); rm -rf "$CPUD/dj"
    mid="$mid --jobs $j: $r;"
done

ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }
report() { # S3-LINES SCALING-EXTRA
    cat <<TXT
machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
source: $N JPEGs 500x375 q90 ($kind), $((bytes / N)) bytes each on average; target 224x224x3 u8

                              files/s   vs raw decode ($cores cores)
raw TurboJPEG decode, 1 core   $raw1
raw TurboJPEG decode, $cores cores  $rawN   1.00
dlk decoder+resize, 1 core     $dlk1   (vs raw 1 core: $(ratio "$dlk1" "$raw1"))
dlk decoder+resize, $cores cores    $dlkN   $(ratio "$dlkN" "$rawN")
ingest from-dir, --jobs 1      $dir1   (vs raw 1 core: $(ratio "$dir1" "$raw1"); into $where)
ingest from-dir, --jobs $cores      $at_cpu   $(ratio "$at_cpu" "$rawN")   (into $where)
  stages (s, summed over threads): $stagesC
  paired with raw decode before and after each:$paired
ingest from-dir, other jobs   $mid (into $where)
ingest onto the disk, --jobs $cores $dirN   $(ratio "$dirN" "$rawN")   (dataset on $(df -P "$T" | awk 'NR==2{print $1}'): it takes $wrate GB/s synced = $(python3 -c "print('%.0f' % ($wrate * 1e9 / (224*224*3)) if '$wrate' != '?' else '?')") samples/s)
  stages (s, summed over threads): $stagesN
$1
scaling 1 -> $cores cores: raw decode x$(ratio "$rawN" "$raw1"), from-dir x$(ratio "$at_cpu" "$dir1") (into $where)$2
peak RSS: from-dir --jobs 1 $((rss1 / 1024)) MiB; $cores jobs: $((N / 4)) files $((rssQ / 1024)) MiB, $N files $((rssN / 1024)) MiB
TXT
}
if ! python3 -c 'import moto' 2>/dev/null; then
    report "ingest from-s3: not measured (no moto here: pip install 'moto[server]')" ""
    exit 0
fi

BT=$T
. "$root/tests/lib.sh" # a new $T, and its exit trap (which stops moto)
. "$root/tests/s3lib.sh"
at_exit rm -rf "$BT" "${SHM:-}"
s3_start
s3_mkbucket raw
s3_mkbucket lake
s3_put_tree "$S" s3://raw/train

s3N=$(run s3N s3://lake/n from-s3 s3://raw/train)
s3_1=$(run s31 s3://lake/one from-s3 s3://raw/train --jobs 1)
report "ingest from-s3 (moto), --jobs 1 $s3_1   (vs raw 1 core: $(ratio "$s3_1" "$raw1"))
ingest from-s3 (moto), --jobs $cores $s3N   $(ratio "$s3N" "$rawN")" ", from-s3 x$(ratio "$s3N" "$s3_1")"
