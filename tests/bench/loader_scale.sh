#!/usr/bin/env bash
# tests/bench/loader_scale.sh [ROWS...] - the loader's memory and time to
# its first batch by the dataset's rows, an old build against a new one in
# the same run: datasets of tiny rows (a 16-byte vector and an i32 label,
# synth ... vec) of 1 M, 10 M and 100 M rows (or ROWS), each opened by
# tests/bench/loader_scale.c linked to each build's libdlk.so, shuffled,
# check mode, a 256 MiB budget, on one rank and as rank 3 of 8; it prints
# the seconds to the loader's open and first batch (wall and CPU: on a
# shared machine the wall stretches), the RSS at the first batch and the
# peak RSS after 64 more batches; and as rank 1 of 4 resuming an epoch
# that 8 ranks had read a quarter of (a checkpoint of another world
# size).  The datasets take 20 bytes a row of
# disk (2 GB for 100 M), in $TMPDIR.
#   OLD=/path/to/old/build NEW=build tests/bench/loader_scale.sh
# (or OLD=dist-old/lib NEW=dist/lib SYNTH=dist/bin/synth: `make dist`
# folders, whose lib/ holds libdlk.so.1)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OLD=${OLD:?set OLD to a build directory (libdlk.so) of the old code}
NEW=${NEW:-$root/build}
[ $# -gt 0 ] || set -- 1000000 10000000 100000000
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-scale.XXXXXX")
trap 'rm -rf "$T"' EXIT
SYNTH=${SYNTH:-$NEW/tests/synth}
lib=-ldlk
[ -e "$NEW/libdlk.so" ] || lib=-l:libdlk.so.1
cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -o "$T/loader_scale" \
    "$here/loader_scale.c" -L"$NEW" $lib
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $OLD; new: $NEW"
for n in "$@"; do
    "$SYNTH" "$T/ds" "$n" 1 16 vec
    echo "$n rows ($(du -sh "$T/ds" | cut -f1) on disk):"
    for wr in "1 0" "8 3" "4 1 resume"; do
        set -- $wr
        steps=
        [ $# -lt 3 ] || steps=$((n / 8 / 256 / 4))
        for b in old new; do
            lib=$OLD
            [ $b = old ] || lib=$NEW
            printf '  %-3s world %s rank %s%-7s: ' "$b" "$1" "$2" \
                "${steps:+ resume}"
            LD_LIBRARY_PATH=$lib "$T/loader_scale" "$T/ds" "$1" "$2" \
                $((256 << 20)) 64 $steps | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("open %6.2f s (cpu %6.2f)  first batch %6.2f s (cpu %6.2f)  "
      "rss at first %7.1f MiB  peak %7.1f MiB" % (d["open_s"],
      d["open_cpu_s"], d["first_batch_s"], d["first_batch_cpu_s"],
      d["rss_first_bytes"] / 2**20, d["peak_rss_bytes"] / 2**20))'
        done
    done
    rm -rf "$T/ds"
done
