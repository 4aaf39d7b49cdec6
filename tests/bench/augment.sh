#!/usr/bin/env bash
# tests/bench/augment.sh [ROWS] [DEVICE] - what augmentation costs: ROWS
# (default 30000) synthetic 256x256x3 u8 images streamed from the page
# cache, shuffled, no step, 3 epochs, batches of 256, as stored and with
# --augment imagenet-train (RandomResizedCrop 224, flip, normalisation,
# bf16 NCHW), two alternating rounds: samples/s over the run and in the
# best epoch after the first, and the device's busy share (the augmented
# gather's kernels included).  Target: augmented >= 0.90 of as stored.
#   DIST=dist tests/bench/augment.sh 30000 cuda:0
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/dist_bins.sh"
rows=${1:-30000}
device=${2:-auto}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-aug.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); device $device"
"$SYNTH" "$T/a" "$rows" 256 256 >/dev/null
find "$T/a" -type f -exec cat {} + >/dev/null
for r in 1 2; do
    for a in none imagenet-train; do
        x=()
        [ "$a" = none ] || x=(--augment "$a")
        "$DLK" bench-stream "$T/a" --device "$device" --shuffle --epochs 3 \
            --batch-size 256 "${x[@]}" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = max(e["samples_per_s"] for e in d["epochs"][1:])
print("  pass %s %s: %.0f samples/s run, %.0f steady, busy %.1f%%" % (
    sys.argv[1], sys.argv[2], d["samples_per_s"], s, d["gpu_busy_pct"]))' "$r" "$a"
    done
done
