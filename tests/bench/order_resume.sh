#!/usr/bin/env bash
# tests/bench/order_resume.sh - a resumed epoch's plan, the old build
# against the new one in the same run: tests/bench/order_resume.c linked
# to each build's libdlk.a, for 10 M and 100 M rows in blocks of 1,000
# and 10,000 rows, segment 0 of 8 and of 64 ranks resumed by 4 and by 128.
# Both builds must print the same checksum of the plan's positions.
#   OLD=/path/to/old/build NEW=build tests/bench/order_resume.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OLD=${OLD:?set OLD to a build directory (libdlk.a) of the old code}
NEW=${NEW:-$root/build}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-order.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $OLD; new: $NEW"
for b in old new; do
    dir=$OLD
    [ $b = old ] || dir=$NEW
    cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -I"$root/lib" \
        -o "$T/$b" "$here/order_resume.c" "$dir/libdlk.a" \
        $(pkg-config --libs jansson libxxhash libzstd libcurl expat libcrypto \
            libarchive libturbojpeg libpng) -lpthread -lm -ldl
done
for rows in 10000000 100000000; do
    for per in 1000 10000; do
        for w in "8 4" "64 128"; do
            set -- $w
            for b in old new; do
                printf '  %-3s ' $b
                "$T/$b" "$rows" $((rows / per)) "$1" "$2" 5
            done
        done
    done
done
