#!/usr/bin/env bash
# tests/bench/ingest_tgz.sh [N] [ROWS] - the cost of compressed tar shards:
# N ImageNet-like JPEGs (make_imagenet.py) with a .cls label each, packed
# into shards of ROWS samples (default 2000 and 250), once as .tar and
# once as .tar.gz (Python's tarfile, gzip level 6), ingested to 224x224
# from a directory, the two alternated PAIRS times (default 3).  Prints
# each run's rows/s and peak RSS, and the median of .tar.gz over .tar of
# the runs paired; then checks that both datasets hold the same rows.
# JOBS, ORDER and SEED, when set, are the runs' --jobs, --order and
# --order-seed; each .tar.gz run's shard_reads (shards read from their
# start for the rows: one a shard when none is read again) is printed.
#   DIST=dist tests/bench/ingest_tgz.sh 10000 500    (a `make dist` tree)
#   JOBS=16 PAIRS=2 tests/bench/ingest_tgz.sh 3000 200
#   tests/bench/ingest_tgz.sh                        (build/dlk)
set -eu
N=${1:-2000}
ROWS=${2:-250}
R=${PAIRS:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -n "${DIST:-}" ]; then DLK=${DLK:-$DIST/bin/dlk}; else DLK=${DLK:-$root/build/dlk}; fi
EXTRA=()
[ -n "${JOBS:-}" ] && EXTRA+=(--jobs "$JOBS")
[ -n "${ORDER:-}" ] && EXTRA+=(--order "$ORDER")
[ -n "${SEED:-}" ] && EXTRA+=(--order-seed "$SEED")
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-tgz.XXXXXX")
trap 'rm -rf "$T"' EXIT
OUTD=$T
[ -d /dev/shm ] && [ -w /dev/shm ] && OUTD=$(mktemp -d /dev/shm/dlk-tgz.XXXXXX) &&
    trap 'rm -rf "$T" "$OUTD"' EXIT

echo "# generating $N ImageNet-like JPEGs ..." >&2
python3 "$here/make_imagenet.py" "$T/src" --n "$N" >&2
python3 - "$T/src" "$T/tar" "$T/tgz" "$ROWS" <<'PY'
import io, os, sys, tarfile
src, out_tar, out_tgz, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
files = sorted((c, f) for c in os.listdir(src) for f in os.listdir(os.path.join(src, c)))
os.makedirs(out_tar); os.makedirs(out_tgz)
for s in range(0, len(files), rows):
    name = "%06d" % (s // rows)
    for path, mode in ((os.path.join(out_tar, name + ".tar"), "w"),
                       (os.path.join(out_tgz, name + ".tar.gz"), "w:gz")):
        with tarfile.open(path, mode) as t:
            for c, f in files[s:s + rows]:
                stem = "%s_%s" % (c, os.path.splitext(f)[0])
                t.add(os.path.join(src, c, f), stem + ".jpg")
                b = c.encode()
                ti = tarfile.TarInfo(stem + ".cls"); ti.size = len(b)
                t.addfile(ti, io.BytesIO(b))
PY
echo "options: ${EXTRA[*]:-(defaults)}"
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo); $("$DLK" --version | head -n1)"
echo "source: $N JPEGs, $(du -sb "$T/src" | cut -f1) bytes; shards of $ROWS samples: .tar $(du -sb "$T/tar" | cut -f1) bytes, .tar.gz $(du -sb "$T/tgz" | cut -f1) bytes"

run() { # KIND -> "rows/s rss_MiB reads"
    rm -rf "$OUTD/ds"
    python3 -c 'import resource, subprocess, sys
r = subprocess.call(sys.argv[2:], stdout=open(sys.argv[1], "w"))
sys.stderr.write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r)' "$T/out.json" "$DLK" create "$OUTD/ds" from-dir "$T/$1" --resize 224x224 ${EXTRA[@]+"${EXTRA[@]}"} --json 2> "$T/rss"
    python3 - "$T/out.json" "$(tail -n1 "$T/rss")" "$N" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ingested"] == int(sys.argv[3]) and d["skipped"] == 0, d
print("%.1f %d %s" % (d["ingested"] / d["seconds"], int(sys.argv[2]) // 1024,
                     d.get("shard_reads", "?")))
PY
}
ratios=""
for i in $(seq "$R"); do
    read -r ar am _ <<< "$(run tar)"
    read -r br bm bs <<< "$(run tgz)"
    echo "pair $i: .tar $ar rows/s (RSS $am MiB), .tar.gz $br rows/s (RSS $bm MiB, shards read $bs times)"
    ratios="$ratios $(python3 -c "print($br / $ar)")"
done
python3 -c "import statistics, sys; r = [float(x) for x in sys.argv[1:]]; print('.tar.gz / .tar, median of %d pairs: %.2f (%s)' % (len(r), statistics.median(r), ', '.join('%.2f' % x for x in r)))" $ratios

# the same rows either way: every tensor's values, by key
"$DLK" create "$OUTD/a" from-dir "$T/tar" --resize 224x224 --order sorted > /dev/null
"$DLK" create "$OUTD/b" from-dir "$T/tgz" --resize 224x224 --order sorted > /dev/null
sum() { { "$DLK" cat "$1" images : --raw && "$DLK" cat "$1" labels : --raw; } | sha1sum | cut -c1-16; }
sa=$(sum "$OUTD/a") sb=$(sum "$OUTD/b")
echo "images and labels of all rows, sorted order: .tar $sa, .tar.gz $sb: $([ "$sa" = "$sb" ] && echo equal || echo DIFFERENT)"
