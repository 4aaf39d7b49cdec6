#!/usr/bin/env bash
# Benchmark: an uncompressed u8 tensor (2 GiB by default) written and read
# through libdlk from the page cache, against a plain sequential read of
# the same bytes with cat and dd, measured in the same run.
# Target: dlk's read >= 80% of the plain read.
#   tests/bench/local_read.sh [GIB] [DIR]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
gib=${1:-2}
dir=${2:-$(mktemp -d /tmp/dlk-bench.XXXXXX)}
build=${DLK_BUILD:-$root/build}
make -s -C "$root" "$build/libdlk.a" >/dev/null
bin=$dir/read_bench
cc -O2 -std=c11 -D_GNU_SOURCE -I"$root/include" -o "$bin" \
    "$root/tests/bench/read_bench.c" "$build/libdlk.a" \
    $(pkg-config --libs jansson libxxhash libzstd libcurl expat libcrypto) -lpthread -lm
ds=$dir/ds
rm -rf "$ds"
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -m)"
"$bin" write "$ds" "$gib"
files=$(find "$ds/chunks" -type f | sort)
# warm the page cache, then time the plain reads
cat $files > /dev/null
t() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); echo "$s $e"; }
bytes=$(cat $files | wc -c)
best_cat=0
for i in 1 2 3; do
    read -r s e < <(t sh -c "cat $(echo $files) > /dev/null")
    r=$(echo "$bytes $s $e" | awk '{printf "%.2f", $1/($3-$2)/1e9}')
    best_cat=$(echo "$best_cat $r" | awk '{print ($2>$1)?$2:$1}')
done
echo "cat: best of 3 $best_cat GB/s"
read -r s e < <(t sh -c "for f in $(echo $files); do dd if=\$f bs=16M status=none; done")
dd_r=$(echo "$bytes $s $e" | awk '{printf "%.2f", $1/($3-$2)/1e9}')
echo "dd bs=16M: $dd_r GB/s"
best=0
for th in 1 2; do
    for i in 1 2 3; do
        out=$("$bin" read "$ds" "$th")
        r=$(echo "$out" | sed -n 's/.*: \([0-9.]*\) GB\/s.*/\1/p')
        best=$(echo "$best $r" | awk '{print ($2>$1)?$2:$1}')
        [ "$i" = 3 ] && echo "dlk $out"
    done
done
echo "dlk read (no checksum): best $best GB/s"
v=$("$bin" read "$ds" 2 verify); echo "dlk $v"
echo "ratio dlk/cat: $(echo "$best $best_cat" | awk '{printf "%.2f", $1/$2}') (target >= 0.80)"
[ -n "${2:-}" ] || rm -rf "$dir"
