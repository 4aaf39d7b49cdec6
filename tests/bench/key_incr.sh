#!/usr/bin/env bash
# tests/bench/key_incr.sh [N ...] - the cost of an incremental ingest of
# 100 new objects into a keyed dataset of N rows (default 1000000 and
# 10000000), the build before the key index of runs (OLD, default
# /tmp/old-keyidx, a checkout of main at b188f6a built with make) beside
# this one, in the same run: bytes read and written by the dlk process
# (rchar/wchar of /proc/PID/io, every file it read or wrote: the source,
# the manifest, the key chunks, the index), bytes of key index objects
# written, peak RSS and wall time.  Rows:
#   old        the build before, its dataset (one key_index object)
#   new        this build, its dataset (one run of N rows)
#   migrate    this build, first ingest into the build before's dataset
#              (reads its key_index whole once, writes it as a run)
#   migrated   this build, the next ingest into that dataset
# At the first N also 50 successive ingests of 100 objects with each
# build: their sums and the index bytes written per row added.
# Datasets are made by tests/bench/key_synth.c (N keyed text rows through
# the library), not ingested.
#   nice tests/bench/key_incr.sh 1000000 10000000
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OLD=${OLD:-/tmp/old-keyidx}
NEW=$root
make -C "$NEW" --no-print-directory -j2 build/dlk build/tests/key_synth >&2
cp "$here/key_synth.c" "$OLD/tests/unit/key_synth.c"
make -C "$OLD" --no-print-directory -j2 build/dlk build/tests/key_synth >&2
W=$(mktemp -d "${TMPDIR:-/tmp}/dlk-keyincr.XXXXXX")
trap 'rm -rf "$W"' EXIT
sizes=${*:-1000000 10000000}

# measure LABEL DLK DATASET SRC: one ingest, one line of figures
measure() {
    python3 - "$@" <<'PY'
import os, resource, subprocess, sys, time
label, dlk, ds, src = sys.argv[1:5]
def io():
    d = {}
    for line in open("/proc/self/io"):
        k, v = line.split(":")
        d[k] = int(v)
    return d
def index_bytes():
    p = os.path.join(ds, "index/keys")
    return {f: os.path.getsize(os.path.join(p, f)) for f in os.listdir(p)} if os.path.isdir(p) else {}
idx0 = index_bytes()
a = io(); t = time.monotonic()
r = subprocess.run([dlk, "ingest", ds, "from-dir", src, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.monotonic() - t; b = io()
if r.returncode:
    sys.exit("%s: exit %d: %s" % (label, r.returncode, r.stderr.decode()))
import json
d = json.loads(r.stdout)
idx1 = index_bytes()
wrote = sum(v for f, v in idx1.items() if f not in idx0)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print("%-9s ingested %3d  read %9.1f MB  written %8.1f MB  index written %9.3f MB  peak RSS %6.1f MB  wall %6.2f s"
      % (label, d["ingested"], (b["rchar"] - a["rchar"]) / 1e6, (b["wchar"] - a["wchar"]) / 1e6,
         wrote / 1e6, rss, wall))
PY
}
# newdir DIR TAG: 100 new text objects
newdir() {
    local i
    mkdir -p "$1"
    for i in $(seq 0 99); do echo "new $2 $i" > "$1/n$i.txt"; done
}

echo "key_incr: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; old: $OLD ($(git -C "$OLD" rev-parse --short HEAD)); new: $(git -C "$NEW" rev-parse --short HEAD)"
first=1
for n in $sizes; do
    mkdir -p "$W/seed"
    echo seed > "$W/seed/s.txt"
    for b in old new; do
        bin=$([ $b = old ] && echo "$OLD" || echo "$NEW")/build
        t0=$(date +%s.%N)
        "$bin/dlk" create "$W/$b" from-dir "$W/seed" --quiet
        "$bin/tests/key_synth" "$W/$b" "$n"
        echo "made $b dataset of $n rows in $(python3 -c "import time;print('%.0f'%(time.time()-$t0))") s: $(du -sm "$W/$b/index/keys" | cut -f1) MB of key index"
    done
    cp -al "$W/old" "$W/mig"
    echo "== 100 new objects into $n keyed rows"
    newdir "$W/src1" a
    measure old "$OLD/build/dlk" "$W/old" "$W/src1"
    measure new "$NEW/build/dlk" "$W/new" "$W/src1"
    measure migrate "$NEW/build/dlk" "$W/mig" "$W/src1"
    newdir "$W/src2" b
    measure migrated "$NEW/build/dlk" "$W/mig" "$W/src2"
    if [ $first = 1 ]; then
        echo "== 50 successive ingests of 100 objects into $n keyed rows"
        for b in old new; do
            bin=$([ $b = old ] && echo "$OLD" || echo "$NEW")/build
            for i in $(seq 1 50); do
                newdir "$W/s50-$b-$i" "$b$i"
                measure "$b#$i" "$bin/dlk" "$W/$b" "$W/s50-$b-$i"
            done > "$W/50-$b.txt"
            python3 - "$b" "$W/50-$b.txt" "$W/$b" <<'PY'
import json, re, sys
b, f, ds = sys.argv[1:4]
rows = [list(map(float, re.findall(r"([\d.]+) (?:MB|s)\b", l))) for l in open(f)]
read = sum(r[0] for r in rows); wrote = sum(r[1] for r in rows); idx = sum(r[2] for r in rows)
wall = sum(r[4] for r in rows); rss = max(r[3] for r in rows)
m = json.load(open(ds + "/staging/manifest.json"))
runs = len(m.get("key_runs", [])) or (1 if "key_index" in m else 0)
print("%-4s 50 ingests: read %8.1f MB  written %8.1f MB  index written %8.2f MB (%6.0f B a row added)  peak RSS %6.1f MB  wall %6.1f s  index objects named %d"
      % (b, read, wrote, idx, idx * 1e6 / 5000, rss, wall, runs))
PY
        done
        first=0
    fi
    rm -rf "$W/old" "$W/new" "$W/mig" "$W"/src* "$W"/s50-*
done
