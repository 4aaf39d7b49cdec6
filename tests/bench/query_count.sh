#!/usr/bin/env bash
# tests/bench/query_count.sh [ROWS] - what `dlk query --count` reads:
# bytes of chunks read (--json "bytes_read") and seconds (best of
# ROUNDS, the page cache warm) of counts over a synth dataset of ROWS
# rows (default 20 M) of an 8-byte u8 vector and an i32 label, the old
# build and the new one alternated in the same run: no filter; a view
# of 10% of the rows without one (its object: 8 bytes a row, not
# counted in bytes_read); filters the schema decides (an i32 range, a
# fixed dimension), one half decided, one it does not, and one within a
# range of rows.
#   OLD=/path/to/old/build [NEW=build] [ROUNDS=3] tests/bench/query_count.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OLD=${OLD:?set OLD to a build directory (dlk) of the old code}
NEW=${NEW:-$root/build}
ROUNDS=${ROUNDS:-3}
n=${1:-20000000}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-qcount.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $OLD ($(git -C "$OLD/.." rev-parse --short HEAD 2>/dev/null || echo ?)); new: $NEW ($(git -C "$root" rev-parse --short HEAD))"
"$NEW/tests/synth" "$T/ds" "$n" 1 8 vec >/dev/null
"$NEW/dlk" query "$T/ds" "random(2) < 0.1" --save-view tenth >/dev/null 2>&1
cat "$T"/ds/chunks/*/* "$T"/ds/index/views/* > /dev/null
echo "$n rows ($(du -sh "$T/ds" | cut -f1) on disk; labels i32 $((n * 4 / 1000000)) MB, images u8[8] $((n * 8 / 1000000)) MB)"
printf '  %-44s %-3s %10s %12s %9s\n' query build count "MB read" seconds
while IFS='|' read -r label args; do
    for b in old new; do
        dir=$OLD
        [ $b = old ] || dir=$NEW
        best=
        for r in $(seq "$ROUNDS"); do
            # shellcheck disable=SC2086
            eval "\"$dir/dlk\" query \"$T/ds\" $args --count --json" > "$T/out"
            read -r c by s < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["count"], d["bytes_read"], d["seconds"])' "$T/out")
            best=$(echo "${best:-$s} $s" | awk '{print ($2 < $1) ? $2 : $1}')
        done
        printf '  %-44s %-3s %10s %12.1f %9.4f\n' "$label" $b "$c" \
            "$(echo "$by" | awk '{print $1 / 1e6}')" "$best"
    done
done <<EOF
(no filter)|
--view tenth (no filter)|--view tenth
labels >= -2147483648 (i32 range: all)|"labels >= -2147483648"
labels > 2147483647 (i32 range: none)|"labels > 2147483647"
shape(images)[0] == 8 and labels == 3|"shape(images)[0] == 8 and labels == 3"
labels == 3 (not decided)|"labels == 3"
row < $((n / 100)) and labels == 3 (1% of the rows)|"row < $((n / 100)) and labels == 3"
EOF
