#!/usr/bin/env bash
# tests/bench/append_reads.sh [CHUNKS...] - what an append reads, by the
# dataset's size: for each CHUNKS (default 50000 200000) a local dataset
# of that many chunks (one i32 row a chunk, --chunk-size 4, as
# history.sh), then 100-row ingests (--no-key, and keyed on a keyed
# dataset of the same size) alternately by the old build and the new one
# into the same dataset, REPS (default 3) each.  It prints each build's
# seconds (median) and the bytes its read/pread64 calls returned (strace),
# beside the bytes a `dlk log` of an empty dataset reads (the program and
# its libraries), so that what the append itself reads is the difference.
#   OLD=/path/to/old/build/dlk NEW=build/dlk nice tests/bench/append_reads.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OLD=${OLD:?set OLD to a dlk binary of the old code}
NEW=${NEW:-$root/build/dlk}
REPS=${REPS:-3}
[ $# -gt 0 ] || set -- 50000 200000
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-append.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $OLD; new: $NEW"
# bytes CMD...: seconds into SECS, bytes read into BYTES
bytes() {
    local t0 t1
    t0=$(date +%s.%N)
    strace -f -qq -e trace=read,pread64 -e signal=none -o "$T/.strace" \
        "$@" >/dev/null 2>"$T/.err" || { cat "$T/.err" >&2; return 1; }
    t1=$(date +%s.%N)
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
    BYTES=$(awk -F'= ' '/= [0-9]+$/ {s += $NF} END {print s + 0}' "$T/.strace")
}
for b in old new; do
    bin=$OLD
    [ $b = old ] || bin=$NEW
    "$bin" create "$T/empty" --tensor x:i32 >/dev/null
    bytes "$bin" log "$T/empty"
    echo "$b: a log of an empty dataset reads $BYTES bytes"
    rm -rf "$T/empty"
done
median() { tr ' ' '\n' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for n in "$@"; do
    python3 - "$T" "$n" "$REPS" <<'PY'
import numpy as np, os, shutil, sys
t, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in ("big", "kbig"):
    shutil.rmtree("%s/%s" % (t, d), ignore_errors=True)
os.makedirs(t + "/big")
np.save(t + "/big/r.x.npy", np.arange(n, dtype="<i4"))
for i in range(2 * reps):
    d = "%s/add%d" % (t, i)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    np.save(d + "/r.x.npy", np.arange(100, dtype="<i4") + n + 100 * i)
    # keyed: one file a row, new keys each time
    d = "%s/kadd%d" % (t, i)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for k in range(100):
        np.save("%s/r%09d.x.npy" % (d, n + 100 * i + k),
                np.array(n + 100 * i + k, dtype="<i4"))
PY
    rm -rf "$T/ds" "$T/kds"
    t0=$(date +%s)
    "$NEW" create "$T/ds" --tensor x:i32 --chunk-size 4 >/dev/null
    "$NEW" ingest "$T/ds" from-dir "$T/big" --no-key --quiet
    # the keyed dataset: the same rows, each with a key (made by the
    # first keyed ingest into an empty dataset, from the rows' stems)
    python3 - "$T" "$n" <<'PY'
import numpy as np, os, sys
t, n = sys.argv[1], int(sys.argv[2])
os.makedirs(t + "/kbig", exist_ok=True)
for k in range(n):
    np.save("%s/kbig/r%09d.x.npy" % (t, k), np.array(k, dtype="<i4"))
PY
    "$NEW" create "$T/kds" --tensor x:i32 --chunk-size 4 >/dev/null
    "$NEW" ingest "$T/kds" from-dir "$T/kbig" --quiet
    rm -rf "$T/kbig"
    t1=$(date +%s)
    echo "$n chunks (datasets built in $((t1 - t0)) s; $(ls "$T/ds/index/segments" | wc -l) segments, head $(wc -c < "$T/ds/staging/manifest.json") bytes; segments $(du -sb "$T/ds/index/segments" | cut -f1) bytes):"
    for kind in plain keyed; do
        declare -A S=() B=()
        for ((i = 0; i < REPS; i++)); do
            for b in old new; do
                bin=$OLD j=$((2 * i))
                [ $b = old ] || bin=$NEW j=$((2 * i + 1))
                if [ $kind = plain ]; then
                    bytes "$bin" ingest "$T/ds" from-dir "$T/add$j" --no-key --quiet
                else
                    bytes "$bin" ingest "$T/kds" from-dir "$T/kadd$j" --quiet
                fi
                S[$b]="${S[$b]:-} $SECS"
                B[$b]="${B[$b]:-} $BYTES"
            done
        done
        for b in old new; do
            printf '  %-5s %-3s 100-row ingest: %6s s (median of%s s), read %s bytes (median of%s)\n' \
                "$kind" "$b" "$(echo ${S[$b]} | median)" "${S[$b]}" \
                "$(echo ${B[$b]} | median)" "${B[$b]}"
        done
    done
    "$NEW" verify "$T/ds" | tail -n 1
    "$NEW" verify "$T/kds" | tail -n 1
done
