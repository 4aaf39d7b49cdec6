#!/usr/bin/env bash
# tests/bench/ingest.sh [N] - ingest N JPEGs (500x375, quality 90, as in
# ImageNet; default 2000) to 224x224 from a directory and from the local
# S3 server (moto), against the raw TurboJPEG decode rate of the same files
# on the same cores; scaling from --jobs 1 to all cores; peak RSS at N/4
# and N rows (the bound does not grow with the source).
#   DLK=build/dlk DLK_BUILD=build tests/bench/ingest.sh [N]
set -eu
N=${1:-2000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DLK=${DLK:-$root/build/dlk}
DLK_BUILD=${DLK_BUILD:-$root/build}
export DLK DLK_TESTS=$root/tests
. "$root/tests/lib.sh"
. "$root/tests/s3lib.sh"
cores=$(nproc)

echo "# generating $N JPEGs (500x375, q90) ..." >&2
S=$T/src
mkdir -p "$S/a" "$S/b"
half=$((N / 2))
ffmpeg -nostdin -loglevel error -f lavfi -i "testsrc2=s=500x375:r=25" -frames:v "$half" -qmin 1 -q:v 2 "$S/a/%06d.png"
ffmpeg -nostdin -loglevel error -f lavfi -i "mandelbrot=s=500x375:r=25" -frames:v "$((N - half))" "$S/b/%06d.png"
find "$S" -name '*.png' -print0 | xargs -0 -P "$cores" -n 200 mogrify -format jpg -quality 90
find "$S" -name '*.png' -delete
ls "$S"/*/*.jpg | head -n $((N / 4)) > "$T/quarter.list"
mkdir -p "$T/q/a" "$T/q/b"
while read -r f; do d=$(basename "$(dirname "$f")"); cp "$f" "$T/q/$d/"; done < "$T/quarter.list"
bytes=$(du -sb "$S" | cut -f1)

cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -I"$root/lib" -o "$T/decode_bench" \
    "$here/decode_bench.c" "$DLK_BUILD/libdlk.a" \
    $(pkg-config --cflags --libs libturbojpeg libpng libavformat libavcodec libswscale libavutil jansson libxxhash libzstd libcurl expat) -lpthread -lm
raw1=$("$T/decode_bench" 1 "$S"/*/*.jpg)
rawN=$("$T/decode_bench" "$cores" "$S"/*/*.jpg)
dlkN=$("$T/decode_bench" "$cores" --dlk 224 224 "$S"/*/*.jpg)

s3_start
s3_mkbucket raw
s3_mkbucket lake
python3 - "$S" <<'PY'
import os, sys, boto3
from concurrent.futures import ThreadPoolExecutor
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
src = sys.argv[1]
files = [os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs]
with ThreadPoolExecutor(16) as ex:
    list(ex.map(lambda p: s3.upload_file(p, "raw", "train/" + os.path.relpath(p, src)), files))
PY

run() { # NAME DATASET ARGS... -> rate and peak RSS (KiB)
    local name=$1 ds=$2; shift 2
    /usr/bin/time -f "%M" -o "$T/rss" "$DLK" create "$ds" "$@" --resize 224x224 --json > "$T/out.json"
    python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["skipped"]==0, d
print("%.1f" % (d["ingested"]/d["seconds"]))' "$T/out.json"
}
dir1=$(run dir1 "$T/d1" from-dir "$S" --jobs 1); rss1=$(cat "$T/rss")
dirN=$(run dirN "$T/dN" from-dir "$S"); rssN=$(cat "$T/rss")
dirQ=$(run dirQ "$T/dQ" from-dir "$T/q"); rssQ=$(cat "$T/rss")
s3N=$(run s3N s3://lake/n from-s3 s3://raw/train)
s3_1=$(run s31 s3://lake/one from-s3 s3://raw/train --jobs 1)

ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }
cat <<TXT
machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
source: $N JPEGs 500x375 q90, $((bytes / N)) bytes each on average; target 224x224x3 u8

                              files/s   vs raw decode ($cores cores)
raw TurboJPEG decode, 1 core   $raw1
raw TurboJPEG decode, $cores cores  $rawN   1.00
dlk decoder+resize, $cores cores    $dlkN   $(ratio "$dlkN" "$rawN")
ingest from-dir, --jobs 1      $dir1   (vs raw 1 core: $(ratio "$dir1" "$raw1"))
ingest from-dir, --jobs $cores      $dirN   $(ratio "$dirN" "$rawN")
ingest from-s3 (moto), --jobs 1 $s3_1   (vs raw 1 core: $(ratio "$s3_1" "$raw1"))
ingest from-s3 (moto), --jobs $cores $s3N   $(ratio "$s3N" "$rawN")
scaling 1 -> $cores cores: from-dir x$(ratio "$dirN" "$dir1"), from-s3 x$(ratio "$s3N" "$s3_1")
peak RSS: from-dir --jobs 1 $((rss1 / 1024)) MiB; $cores jobs: $((N / 4)) files $((rssQ / 1024)) MiB, $N files $((rssN / 1024)) MiB
TXT
