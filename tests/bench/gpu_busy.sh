#!/usr/bin/env bash
# GPU busy with a simulated step, and the line rate, on a synthetic
# uncompressed 224x224x3 dataset of >= 8 GiB from the page cache (4 epochs;
# the first also maps and pins the chunk files: --pin-cache auto).  From a
# `make dist` tree:
#   DIST=$PWD/dist dist/tests/bench/gpu_busy.sh [WORKDIR] [STEP_MS]
set -u
D=${DIST:?DIST must name the dist folder}/bin
W=${1:-/tmp/w}; STEP=${2:-0.834}
mkdir -p "$W"
[ -d "$W/big" ] || "$D/synth" "$W/big" 58000 224 224
cat "$W"/big/chunks/images/* > /dev/null
S="$D/dlk bench-stream $W/big --device cuda:0 --shuffle --no-verify --no-check --epochs 4 --pin-cache auto"
echo "== step $STEP ms, 16 workers"; $S --workers 16 --prefetch 64 --step-ms "$STEP" | grep -E "epoch|busy"
echo "== step $STEP ms, default workers"; $S --prefetch 64 --step-ms "$STEP" | grep -E "epoch|busy"
echo "== no step (line rate)"; $S --workers 16 | grep -E "epoch|busy"
echo "== all checks on"; $D/dlk bench-stream "$W/big" --device cuda:0 --shuffle --epochs 2 --workers 16 --pin-cache auto | grep -E "epoch|checksum"
