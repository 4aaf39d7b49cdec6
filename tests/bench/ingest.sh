#!/usr/bin/env bash
# tests/bench/ingest.sh [N] - ingest N JPEGs (500x375, quality 90, as in
# ImageNet; default 2000) to 224x224 from a directory and from a local S3
# server (s3_dir_server, fast; and moto, the tests' server), against the raw TurboJPEG decode rate of the same files
# on the same cores; scaling from --jobs 1 to all cores (into /dev/shm
# where there is one: the CPU's bound, not the disk's); peak RSS at N/4
# and N rows (the bound does not grow with the source).  The all-cores
# ingest is also measured PAIRS times (default 7) between raw decode runs
# (the host's speed drifts), each ratio against the raw rates around it,
# and the median of those ratios reported.  A rate is
# rows / the "seconds" of `dlk create ... --json`: from the listing (which
# the tensors are inferred from) to the end, process start excluded.
#   DLK=build/dlk DLK_BUILD=build tests/bench/ingest.sh [N]
# On a machine with `make dist` only (no compiler, ffmpeg or moto, like the
# GPU machines): DIST=dist tests/bench/ingest.sh [N] uses dist/bin's dlk
# and decode_bench, makes the JPEGs with Pillow (make_images.py) and says
# that from-s3 was not measured when there is no moto.  SRC=DIR takes the
# JPEGs under DIR/*/ instead of making N new ones.  KIND=imagenet makes
# an ImageNet-like corpus instead (make_imagenet.py, Pillow only, so DIST
# mode too): 300-640 px wide, aspects 3:4 to 16:9, quality 75-95, a third
# progressive, 7% grayscale, ~35 KB a file, in 10 class folders; on such
# small files the one-thread stages come nearer to bounding the run.
# After each multi-thread run it prints each stage's busy seconds over
# what it could have had (one-thread stages: their wall time; the decode
# threads: jobs x the rows phase), names the nearest to 1 as the bound,
# and gives the one-thread stages' microseconds a row.
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
mkdir -p "$S"
half=$((N / 2))
shape="500x375 q90"
if [ -n "${SRC:-}" ]; then
    # SRC=DIR: JPEGs made before (DIR/*/*.jpg), e.g. to run twice on one set
    S=$SRC kind="the JPEGs under $SRC" shape="of any size"
    N=$(ls "$S"/*/*.jpg | wc -l)
elif [ "${KIND:-}" = imagenet ]; then
    # photographs' sizes and encodings (make_imagenet.py): small files that
    # decode fast, where the pipeline's one-thread stages come closer to
    # being the bound than with the uniform 500x375 ones
    kind="make_imagenet.py: 10 classes, 7% grayscale, a third progressive"
    shape="300-640 wide, 3:4-16:9, q75-95"
    echo "# generating $N ImageNet-like JPEGs with Pillow ..." >&2
    python3 "$here/make_imagenet.py" "$S" --n "$N" >&2
elif command -v ffmpeg >/dev/null && command -v mogrify >/dev/null; then
    # 4:2:0 as in ImageNet (and as Pillow writes): at quality 90 and up
    # ImageMagick keeps full chroma (4:4:4) unless told, which makes the
    # files 1.6x larger and raw decode 1.5x slower (on a 2-core machine the dlk
    # decoder 0.84 of raw decode on such files, 0.92 on 4:2:0 ones)
    kind="ffmpeg testsrc2 + mandelbrot frames, ImageMagick q90 4:2:0"
    echo "# generating $N JPEGs (500x375, q90) ..." >&2
    mkdir -p "$S/a" "$S/b"
    ffmpeg -nostdin -loglevel error -f lavfi -i "testsrc2=s=500x375:r=25" -frames:v "$half" -qmin 1 -q:v 2 "$S/a/%06d.png"
    ffmpeg -nostdin -loglevel error -f lavfi -i "mandelbrot=s=500x375:r=25" -frames:v "$((N - half))" "$S/b/%06d.png"
    find "$S" -name '*.png' -print0 | xargs -0 -P "$cores" -n 200 mogrify -format jpg -quality 90 -sampling-factor 4:2:0
    find "$S" -name '*.png' -delete
else
    kind="make_images.py (gradients, shapes, noise), Pillow q90"
    echo "# generating $N JPEGs (500x375, q90) with Pillow ..." >&2
    mkdir -p "$S/a" "$S/b"
    python3 "$here/make_images.py" "$T/gen" --n "$N" --jpeg-only
    ls "$T/gen/jpeg" | head -n "$half" | while read -r f; do mv "$T/gen/jpeg/$f" "$S/a/"; done
    mv "$T/gen/jpeg/"*.jpg "$S/b/"
fi
ls "$S"/*/*.jpg | head -n $((N / 4)) > "$T/quarter.list"
while read -r f; do d=$(basename "$(dirname "$f")"); mkdir -p "$T/q/$d"; cp "$f" "$T/q/$d/"; done < "$T/quarter.list"
bytes=$(du -sb "$S" | cut -f1)

if [ -n "${DIST:-}" ]; then
    DB=$DIST/bin/decode_bench # in place: it finds its libraries in ../lib
else
    DB=$T/decode_bench
    cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -I"$root/lib" -o "$DB" \
        "$here/decode_bench.c" "$DLK_BUILD/libdlk.a" \
        $(pkg-config --cflags --libs libturbojpeg libpng libavformat libavcodec libswscale libavutil jansson libxxhash libzstd libcurl expat libcrypto libarchive) -lpthread -lm
fi
raw1=$("$DB" 1 "$S"/*/*.jpg)
rawN=$("$DB" "$cores" "$S"/*/*.jpg)
dlk1=$("$DB" 1 --dlk 224 224 "$S"/*/*.jpg)
dlkN=$("$DB" "$cores" --dlk 224 224 "$S"/*/*.jpg)
# the decoder's two halves timed apart on every core: TurboJPEG to planes,
# then resize and YCbCr->RGB (microseconds of a thread an image)
split=$("$DB" "$cores" --split 224 224 "$S"/*/*.jpg | awk '{printf "TurboJPEG to planes %.0f us + resize %.0f us", $2, $3}')

run() { # NAME DATASET ARGS... -> rate and peak RSS (KiB)
    local name=$1 ds=$2; shift 2
    # peak RSS (KiB) of the child, without GNU time (absent on some hosts)
    ${PIN:-} python3 -c 'import resource, subprocess, sys
r = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write("%d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r)' "$T/rss" "$DLK" create "$ds" "$@" --resize 224x224 --json > "$T/out.json"
    python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["skipped"]==0, d
print("%.1f" % (d["ingested"]/d["seconds"]))' "$T/out.json"
}
stages() { # [s3]: the last run's stages (seconds, summed over threads),
    # then which of them bounds it: each stage's busy seconds against what
    # it could have had (its wall time; the decode threads' jobs x the rows
    # phase), the one nearest 1 named, and the one-thread stages' cost a row
    python3 - "$T/out.json" "${1:-dir}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["stages"]; s3 = sys.argv[2] == "s3"
print(" ".join("%s %.2f" % kv for kv in s.items()))
rows, wall, jobs, n = s["rows"], d["seconds"], d["jobs"], max(d["ingested"], 1)
# the appender is whichever decode thread finishes the lowest row (drain);
# from a directory each decode thread reads its own files, from S3 one
# thread starts the GETs
threads = s["decode"] + s["append"] + (0 if s3 else s["fetch"])
busy = [("decode threads", threads / (jobs * rows), "of %d x rows" % jobs),
        ("append", (s["append"] - s["write_wait"]) / rows, "of rows"),
        ("chunk writers", s["write_wait"] / rows, "of rows, the appender waiting"),
        ("list", s["list"] / wall, "of wall"), ("finish", s["finish"] / wall, "of wall")]
if s3:
    busy.insert(1, ("GET submitter", s["fetch"] / rows, "of rows"))
top = max(busy, key=lambda b: b[1])
print("  busy: " + ", ".join("%s %.2f (%s)" % b for b in busy)
      + "; bound: %s (%.2f)" % top[:2])
us = lambda v: v / n * 1e6
print("  one thread, us a row: append %.1f (of it waiting for writers %.1f), "
      "list %.1f, finish %.1f; rows phase %.1f us a row (wall)"
      % (us(s["append"]), us(s["write_wait"]), us(s["list"]), us(s["finish"]), us(rows)))
PY
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
# The host's speed drifts: on the GPU machines' 16-core hosts one raw
# decode run to the next moved by up to 25%.  So the all-cores ingest is
# measured PAIRS times (default 7), each between two raw decode runs and
# taken against the mean of the two around it; the median of those
# ratios is the figure (each pair is printed).
PAIRS=${PAIRS:-7}
pairs() { # RAW-CMD RUN-ARGS...: "median (ratio (rate vs before/after) ...)"
    local rawcmd=$1 out="" prev next r k; shift
    prev=$($rawcmd)
    for k in $(seq "$PAIRS"); do
        r=$("$@"); rm -rf "$CPUD/dp"
        next=$($rawcmd)
        out="$out $(python3 -c "print('%.2f' % ($r / (($prev + $next) / 2)))") ($r vs $prev/$next)"
        prev=$next
    done
    python3 -c 'import statistics, sys
w = sys.argv[1].split(); r = [float(x) for x in w[0::4]]
print("median %.2f of %d:" % (statistics.median(r), len(r)), " ".join(w))' "$out"
}
rawall() { "$DB" "$cores" "$S"/*/*.jpg; }
paired=$(pairs rawall run dirP "$CPUD/dp" from-dir "$S")
dirQ=$(run dirQ "$T/dQ" from-dir "$T/q"); rssQ=$(cat "$T/rss")
rm -rf "$T/dQ"
mid=""
for j in 2 4 8; do
    [ "$j" -lt "$cores" ] || break
    r=$(run "dir$j" "$CPUD/dj" from-dir "$S" --jobs "$j"); rm -rf "$CPUD/dj"
    mid="$mid --jobs $j: $r;"
done

ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }

# From a fast S3 server: s3_dir_server (tests/bench/s3_dir_server.c)
# serving the same folder as bucket "raw".  moto, below, is one Python
# process that serves ~300 small GETs a second: against it ingest measures
# moto.  S3 is another machine: with 4 cores or more the server runs on the
# last core and ingest and the raw decode it is compared with on the
# others (taskset; dlk's default --jobs follows the affinity mask); one
# more run shares all the cores with the server.
SRV=""
if [ -n "${DIST:-}" ]; then
    [ -x "$DIST/bin/s3_dir_server" ] && SRV=$DIST/bin/s3_dir_server
elif [ -x "$DLK_BUILD/tests/s3_dir_server" ]; then
    SRV=$DLK_BUILD/tests/s3_dir_server
fi
fast="ingest from-s3 (s3_dir_server): not measured (no s3_dir_server: apt-get install libmicrohttpd-dev, then make unit)"
fast_scale=""
if [ -n "$SRV" ]; then
    ncl=$cores pin_s="" pin_c=""
    if [ "$cores" -ge 4 ] && command -v taskset >/dev/null; then
        ncl=$((cores - 1))
        pin_s="taskset -c $ncl" pin_c="taskset -c 0-$((ncl - 1))"
    fi
    mkdir -p "$T/s3root/raw" && ln -s "$S" "$T/s3root/raw/train"
    $pin_s "$SRV" "$T/s3root" 1 > "$T/srv.out" 2> "$T/srv.err" &
    srv=$!
    trap 'kill $srv 2>/dev/null || true; rm -rf "$T" "${SHM:-}"' EXIT
    for _ in $(seq 100); do grep -q '^port' "$T/srv.out" 2>/dev/null && break; sleep 0.1; done
    port=$(awk '/^port/{print $2}' "$T/srv.out")
    fast_run() { # NAME DATASET ARGS...: run() against the server
        (export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_REGION=us-east-1 \
                AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
                AWS_SHARED_CREDENTIALS_FILE=$T/none AWS_CONFIG_FILE=$T/none
         unset AWS_SESSION_TOKEN AWS_PROFILE
         run "$@")
    }
    srv_cpu() { python3 -c "import os; f=open('/proc/$srv/stat').read().rsplit(')',1)[1].split(); print('%.2f' % ((int(f[11])+int(f[12]))/os.sysconf('SC_CLK_TCK')))"; }
    rawc() { $pin_c "$DB" "$ncl" "$S"/*/*.jpg; }
    raw1c=$($pin_c "$DB" 1 "$S"/*/*.jpg)
    f1=$(PIN=$pin_c fast_run f1 "$CPUD/f1" from-s3 s3://raw/train --jobs 1); rm -rf "$CPUD/f1"
    c0=$(srv_cpu)
    rawNc=$(rawc)
    fN=$(PIN=$pin_c fast_run fN "$CPUD/fN" from-s3 s3://raw/train); rm -rf "$CPUD/fN"
    fstages=$(stages s3)
    fjobs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"])' "$T/out.json")
    c1=$(srv_cpu)
    fpaired=$(PIN=$pin_c pairs rawc fast_run fP "$CPUD/dp" from-s3 s3://raw/train)
    fshared=""
    if [ -n "$pin_c" ]; then
        # the server moved onto all the cores, beside ingest
        taskset -pc "0-$((cores - 1))" "$srv" >/dev/null
        prev=$("$DB" "$cores" "$S"/*/*.jpg)
        r=$(fast_run fS "$CPUD/fs" from-s3 s3://raw/train); rm -rf "$CPUD/fs"
        next=$("$DB" "$cores" "$S"/*/*.jpg)
        fshared="
  the server sharing all $cores cores with ingest, paired: $(python3 -c "print('%.2f' % ($r / (($prev + $next) / 2)))") ($r vs $prev/$next)"
    fi
    kill $srv 2>/dev/null || true
    where_c="$ncl cores ($fjobs decode threads)${pin_s:+, the server on core $ncl}"
    fast="ingest from-s3 (s3_dir_server), --jobs 1 $f1   (vs raw 1 core: $(ratio "$f1" "$raw1c"); into $where)
ingest from-s3 (s3_dir_server), $where_c: $fN   $(ratio "$fN" "$rawNc") of raw decode on those cores ($rawNc)   (into $where; the server's CPU: $(python3 -c "print('%.2f' % ($c1 - $c0))") s for $N GETs)
  stages (s, summed over threads): $fstages
  paired with raw decode on the same cores before and after each, $fpaired$fshared"
    fast_scale=", from-s3 (s3_dir_server) x$(ratio "$fN" "$f1") (1 -> $ncl cores)"
fi
report() { # S3-LINES SCALING-EXTRA
    cat <<TXT
machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
source: $N JPEGs $shape ($kind), $((bytes / N)) bytes each on average; target 224x224x3 u8

                              files/s   vs raw decode ($cores cores)
raw TurboJPEG decode, 1 core   $raw1
raw TurboJPEG decode, $cores cores  $rawN   1.00
dlk decoder+resize, 1 core     $dlk1   (vs raw 1 core: $(ratio "$dlk1" "$raw1"))
dlk decoder+resize, $cores cores    $dlkN   $(ratio "$dlkN" "$rawN")
  of a thread an image: $split
ingest from-dir, --jobs 1      $dir1   (vs raw 1 core: $(ratio "$dir1" "$raw1"); into $where)
ingest from-dir, --jobs $cores      $at_cpu   $(ratio "$at_cpu" "$rawN")   (into $where)
  stages (s, summed over threads): $stagesC
  paired with raw decode before and after each, $paired
ingest from-dir, other jobs   $mid (into $where)
ingest onto the disk, --jobs $cores $dirN   $(ratio "$dirN" "$rawN")   (dataset on $(df -P "$T" | awk 'NR==2{print $1}'): it takes $wrate GB/s synced = $(python3 -c "print('%.0f' % ($wrate * 1e9 / (224*224*3)) if '$wrate' != '?' else '?')") samples/s)
  stages (s, summed over threads): $stagesN
$fast
$1
scaling 1 -> $cores cores: raw decode x$(ratio "$rawN" "$raw1"), from-dir x$(ratio "$at_cpu" "$dir1") (into $where)$fast_scale$2
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
