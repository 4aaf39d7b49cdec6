#!/usr/bin/env bash
# The main job on a small built-in example: make sample data, create a
# local dataset, ingest it, list it, verify it and read samples back.
#   DLK=build/dlk examples/demo.sh [WORKDIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
DLK=${DLK:-$here/../build/dlk}
work=${1:-$(mktemp -d /tmp/dlk-demo.XXXXXX)}
src=$work/source
ds=$work/dataset
rm -rf "$src" "$ds"
say() { printf '\n$ %s\n' "$*"; }

classes=$(python3 "$here/sample_data.py" "$src" --samples 256 --size 64)
echo "sample source: 256 rows of images (64x64x3 u8), labels, boxes in $src"

say dlk create "$ds" --tensor images:u8:64x64x3:zstd --tensor labels:i32 \
    --tensor 'boxes:f32:?x4' --kind boxes=bbox --classes "labels=$classes" --chunk-size 256K
"$DLK" create "$ds" --tensor images:u8:64x64x3:zstd --tensor labels:i32 \
    --tensor 'boxes:f32:?x4' --kind boxes=bbox --classes "labels=$classes" --chunk-size 256K

say dlk ingest "$ds" from-dir "$src"
"$DLK" ingest "$ds" from-dir "$src"

say dlk ls "$ds"
"$DLK" ls "$ds"

say dlk verify "$ds" --deep
"$DLK" verify "$ds" --deep

say dlk cat "$ds" labels 3
"$DLK" cat "$ds" labels 3
say dlk cat "$ds" boxes 3
"$DLK" cat "$ds" boxes 3
say "dlk cat $ds images 3 --npy > $work/img3.npy"
"$DLK" cat "$ds" images 3 --npy > "$work/img3.npy"
python3 -c 'import numpy as np,sys
a=np.load(sys.argv[1]); b=np.load(sys.argv[2])
print("images 3 read back:", a.shape, a.dtype, "identical to the source:", bool((a==b).all()))' \
    "$work/img3.npy" "$src/000003.images.npy"
echo
echo "demo done: dataset in $ds"
