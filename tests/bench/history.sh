#!/usr/bin/env bash
# tests/bench/history.sh [CHUNKS [COMMITS]] - what a history costs, the
# build before segments (every chunk list inline in every commit) beside
# this one, in the same run: a dataset of CHUNKS chunks (default 49000:
# one i32 row a chunk, --chunk-size 4), committed, then COMMITS (default
# 200) rounds of a 10-row ingest and a commit.  It prints, for each build,
# the bytes of commits/ and of the head, the seconds of the rounds,
# `dlk log` (its seconds and the bytes it read, by strace), `dlk ls --at
# main~150`, and `dlk verify --all` (seconds and peak RSS), then gc's.
# Local directory datasets in $TMPDIR (about 0.6 GB for the old build).
# OLD_ROUNDS (default COMMITS) bounds the old build's rounds: at a
# million chunks each of its commits is a copy of a 47 MB chunk list, so
# a few dozen show its slope.
#   OLD=/path/to/old/build/dlk NEW=build/dlk nice tests/bench/history.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OLD=${OLD:?set OLD to a dlk binary built before segments (main b188f6a)}
NEW=${NEW:-$root/build/dlk}
N=${1:-49000}
C=${2:-200}
OLD_ROUNDS=${OLD_ROUNDS:-$C}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-history.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $OLD; new: $NEW"
echo "dataset: $N chunks (one i32 row each), then $C rounds of a 10-row ingest and a commit"
python3 - "$T" "$N" "$C" <<'PY'
import numpy as np, os, sys
t, n, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(t + "/big")
np.save(t + "/big/r.x.npy", np.arange(n, dtype="<i4"))
for i in range(c):
    os.makedirs("%s/s%d" % (t, i))
    np.save("%s/s%d/r.x.npy" % (t, i), np.arange(10, dtype="<i4") + 10 * i)
PY
# timed CMD...: its seconds and peak RSS (KiB) into SECS and RSS
timed() {
    /usr/bin/time -f '%e %M' -o "$T/.time" "$@" >"$T/.out" 2>"$T/.err" ||
        { cat "$T/.err" >&2; return 1; }
    read -r SECS RSS < "$T/.time"
}
# bytes CMD...: the bytes its read/pread64 calls returned into BYTES
bytes() {
    strace -f -qq -e trace=read,pread64 -e signal=none -o "$T/.strace" \
        "$@" >/dev/null 2>&1
    BYTES=$(awk -F'= ' '/= [0-9]+$/ {s += $NF} END {print s + 0}' "$T/.strace")
}
# what a build reads to log a dataset without commits (its libraries)
base() {
    "$1" create "$T/empty" --tensor x:i32 >/dev/null
    bytes "$1" log "$T/empty"
    BASE=$BYTES
    rm -rf "$T/empty"
}
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
for b in old new; do
    bin=$OLD rounds=$OLD_ROUNDS
    [ $b = old ] || bin=$NEW rounds=$C
    BACK=$((rounds * 3 / 4))
    D=$T/$b
    base "$bin"
    "$bin" create "$D" --tensor x:i32 --chunk-size 4 >/dev/null
    timed "$bin" ingest "$D" from-dir "$T/big" --no-key --quiet
    big=$SECS
    "$bin" commit "$D" -m big >/dev/null
    t0=$(date +%s.%N)
    for ((i = 0; i < rounds; i++)); do
        "$bin" ingest "$D" from-dir "$T/s$i" --no-key --quiet
        "$bin" commit "$D" -m "small $i" >/dev/null
    done
    t1=$(date +%s.%N)
    commits=$(du -sb "$D/commits" | cut -f1)
    ncommits=$(ls "$D/commits" | wc -l)
    last=$(wc -c < "$D/commits/$(head -c 32 "$D/refs/heads/main").json")
    segs=0
    [ -d "$D/index/segments" ] && segs=$(du -sb "$D/index/segments" | cut -f1)
    echo "$b:"
    echo "  first ingest of $N rows: $big s"
    awk -v a="$t0" -v b="$t1" -v c="$rounds" 'BEGIN {printf "  %d rounds of ingest 10 + commit: %.1f s (%.2f s a round)\n", c, b - a, (b - a) / c}'
    echo "  commits/: $ncommits commits, $commits bytes ($(mib "$commits")); the last commit $last bytes; head $(wc -c < "$D/staging/manifest.json") bytes; index/segments/ $segs bytes"
    timed "$bin" log "$D"
    bytes "$bin" log "$D"
    echo "  dlk log: $SECS s, peak RSS $RSS KiB, read $((BYTES - BASE)) bytes ($(mib $((BYTES - BASE)))) beyond the $BASE of a log without commits"
    timed "$bin" ls "$D" --at "main~$BACK"
    bytes "$bin" ls "$D" --at "main~$BACK"
    echo "  dlk ls --at main~$BACK: $SECS s, peak RSS $RSS KiB, read $((BYTES - BASE)) bytes ($(mib $((BYTES - BASE)))) beyond that"
    timed "$bin" verify "$D" --all
    echo "  dlk verify --all: $SECS s, peak RSS $RSS KiB ($(tail -n 1 "$T/.out"))"
    timed "$bin" gc "$D" --grace 0
    echo "  dlk gc: $SECS s, peak RSS $RSS KiB ($(tail -n 1 "$T/.out"))"
    rm -rf "$D"
done
