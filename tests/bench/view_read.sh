#!/usr/bin/env bash
# tests/bench/view_read.sh - what streaming a view reads: bytes read from
# the store, requests and samples/s of `dlk bench-stream --view` (cpu,
# shuffled, one epoch, the page cache warm) for views of 1% and 50% of
# the rows, picked at random (random(1) < p) and as one contiguous range
# in the middle, and for every row, beside the rows' own bytes; the old
# build and the new one alternated in the same run, best samples/s of
# ROUNDS (bytes and requests do not vary).  Two synth datasets: images of
# 224x224x3 u8 (150 KB a row, 7 a 1 MiB part) and 16-byte rows (65536 a
# part), each with i32 labels, in $TMPDIR.
#   OLD=/path/to/old/build [NEW=build] [ROUNDS=3] \
#       tests/bench/view_read.sh [IMAGE_ROWS [SMALL_ROWS]]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OLD=${OLD:?set OLD to a build directory (dlk) of the old code}
NEW=${NEW:-$root/build}
ROUNDS=${ROUNDS:-3}
img_rows=${1:-8000}
small_rows=${2:-10000000}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-viewread.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $OLD ($(git -C "$OLD/.." rev-parse --short HEAD 2>/dev/null || echo ?)); new: $NEW ($(git -C "$root" rev-parse --short HEAD))"

run() { # DLK DATASET VIEW|- : one bench-stream's JSON line of figures
    local v=()
    [ "$3" = - ] || v=(--view "$3")
    "$1" bench-stream "$2" "${v[@]}" --device cpu --shuffle --epochs 1 \
        --batch-size 64 --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({k: d[k] for k in ("samples", "samples_per_s", "bytes_read",
                                     "requests", "bytes_loaded")}))'
}

bench() { # DATASET ROW_BYTES ROWS NAME
    local ds=$1 rb=$2 n=$3 name=$4
    local q=$((n / 100)) h=$((n / 2)) a
    "$NEW/dlk" query "$ds" "random(1) < 0.01" --save-view rand1 >/dev/null 2>&1
    "$NEW/dlk" query "$ds" "random(1) < 0.5" --save-view rand50 >/dev/null 2>&1
    a=$((n / 2 - q / 2))
    "$NEW/dlk" query "$ds" "row >= $a and row < $((a + q))" --save-view range1 >/dev/null 2>&1
    a=$((n / 4))
    "$NEW/dlk" query "$ds" "row >= $a and row < $((a + h))" --save-view range50 >/dev/null 2>&1
    cat "$ds"/chunks/*/* > /dev/null # the page cache warm for both builds
    echo "$name: $n rows of $rb bytes ($(du -sh "$ds" | cut -f1) on disk)"
    printf '  %-8s %9s %11s | %-3s %12s %8s %9s %10s\n' view samples "rows' MB" \
        bld "MB read" "x rows" requests samples/s
    for v in rand1 range1 rand50 range50 -; do
        for r in $(seq "$ROUNDS"); do
            for b in old new; do
                dir=$OLD
                [ $b = old ] || dir=$NEW
                run "$dir/dlk" "$ds" "$v" >> "$T/$name.$v.$b"
            done
        done
        for b in old new; do
            python3 - "$T/$name.$v.$b" "$rb" "$v" "$b" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
rb, view, b = int(sys.argv[2]), sys.argv[3], sys.argv[4]
d = runs[0]
rows = d["samples"] * rb
best = max(r["samples_per_s"] for r in runs)
print("  %-8s %9d %11.1f | %-3s %12.1f %8.2f %9d %10.0f" % (
    "all" if view == "-" else view, d["samples"], rows / 1e6, b,
    d["bytes_read"] / 1e6, d["bytes_read"] / rows, d["requests"], best))
PY
        done
    done
}

"$NEW/tests/synth" "$T/img" "$img_rows" 224 224 >/dev/null
bench "$T/img" $((224 * 224 * 3 + 4)) "$img_rows" images
rm -rf "$T/img"
"$NEW/tests/synth" "$T/small" "$small_rows" 1 16 vec >/dev/null
bench "$T/small" $((16 + 4)) "$small_rows" small
