#!/usr/bin/env bash
# The main job on a small built-in example: make sample images with
# labels, create a local dataset from them (decoded once, resized, packed
# into chunks), list, verify, read samples back, commit, and stream it the
# way a training job would.
#   DLK=build/dlk examples/demo.sh [WORKDIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
DLK=${DLK:-$here/../build/dlk}
work=${1:-$(mktemp -d /tmp/dlk-demo.XXXXXX)}
src=$work/images
ds=$work/dataset
rm -rf "$src" "$ds"
run() { printf '\n$ dlk %s\n' "$*"; "$DLK" "$@"; }

python3 "$here/sample_data.py" "$src" --samples 512 --size 96 --jpeg >/dev/null
echo "sample source: 512 JPEGs of 96x96 in $src/<class>/, labelled by folder"

run create "$ds" from-dir "$src" --resize 64x64 --json
run ls "$ds"
run verify "$ds" --deep
run cat "$ds" labels 3
run cat "$ds" images 3 --png > "$work/img3.png"
echo "(wrote $work/img3.png)"
run commit "$ds" -m "512 demo images"
run log "$ds"
run bench-stream "$ds" --device auto --shuffle --epochs 2 --batch-size 64
echo
echo "demo done: dataset in $ds"
