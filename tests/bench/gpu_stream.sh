#!/usr/bin/env bash
# GPU streaming benchmark, all measured in this one run on this
# machine: pinned host-to-device bandwidth; dlk on an uncompressed u8
# dataset of >= 8 GiB from the page cache; GPU busy with a step of 1.2x
# the batch's transfer time; the same images as JPEGs through PyTorch's
# DataLoader + Pillow, and as one .npy memory map through the DataLoader;
# a zstd copy.  The line-rate runs keep the page cache pinned
# (--pin-cache auto); the last run streams the same dataset the default
# way, read into pinned buffers with the RSS bounded by the budget.
# Run from a `make dist` folder (bin/dlk, bin/synth):
#   tests/bench/gpu_stream.sh WORKDIR [JPEGS] [BIG_SAMPLES]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=${DIST:-$here/../../dist}
DLK=$root/bin/dlk SYNTH=$root/bin/synth
W=${1:?work dir}; N=${2:-20000}; BIG=${3:-58000}
mkdir -p "$W"; R=$W/results.jsonl; : > "$R"
log() { echo "== $*" >&2; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$W/gpu.txt"
nproc; free -g | head -2

log "pinned H2D bandwidth (PyTorch)"
python3 "$here/torch_baselines.py" h2d | tee -a "$R"

log "images: $N JPEGs 500x375 q90 and the same decoded to 224x224"
t0=$(date +%s); python3 "$here/make_images.py" "$W/img" --n "$N"; echo "made in $(( $(date +%s) - t0 )) s"
"$DLK" create "$W/ds_img" --tensor images:u8:224x224x3 --tensor labels:i32 >/dev/null
"$DLK" ingest "$W/ds_img" from-dir "$W/img/npy" --quiet
"$DLK" create "$W/ds_zstd" --tensor images:u8:224x224x3:zstd1 --tensor labels:i32 >/dev/null
"$DLK" ingest "$W/ds_zstd" from-dir "$W/img/npy" --quiet
"$DLK" ls "$W/ds_zstd" --json > "$W/ls_zstd.json"

log "big: $BIG synthetic 224x224x3 u8 samples (uncompressed)"
"$SYNTH" "$W/ds_big" "$BIG" 224 224
"$DLK" ls "$W/ds_big" | tail -2
cat "$W"/ds_big/chunks/images/* > /dev/null  # into the page cache

B() { "$DLK" bench-stream "$@" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); d["args"]=sys.argv[1:]; print(json.dumps(d))' "$@" | tee -a "$R"; }
log "dlk line rate: big, no step, no cpu checks (3 epochs), page cache pinned"
B "$W/ds_big" --device cuda:0 --shuffle --epochs 3 --workers 16 --no-verify --no-check --pin-cache auto
log "dlk big with full checks (verify stored checksums, compare batch checksums)"
B "$W/ds_big" --device cuda:0 --shuffle --epochs 2 --workers 16 --pin-cache auto
bw=$(python3 -c 'import json; print([json.loads(l) for l in open("'"$R"'")][0]["h2d_best_GBps"])')
step=$(python3 -c "print(round(256*224*224*3/($bw*1e9)*1e3*1.2, 3))")
log "dlk big with a step of ${step} ms (1.2x the batch's transfer time)"
B "$W/ds_big" --device cuda:0 --shuffle --epochs 3 --workers 16 --prefetch 64 --no-verify --no-check --step-ms "$step" --pin-cache auto
log "dlk on the $N decoded images, and the zstd copy"
B "$W/ds_img" --device cuda:0 --shuffle --epochs 3 --workers 16 --no-verify --no-check
B "$W/ds_zstd" --device cuda:0 --shuffle --epochs 3 --workers 16 --no-verify --no-check
log "baselines: DataLoader + Pillow on the JPEGs; DataLoader on the .npy memory map"
python3 "$here/torch_baselines.py" jpeg "$W/img/jpeg" --workers 16 --seconds 25 | tee -a "$R"
python3 "$here/torch_baselines.py" npy "$W/img/decoded.npy" --workers 16 --seconds 25 | tee -a "$R"
log "dlk big the default way: read into pinned buffers, RSS within the budget"
B "$W/ds_big" --device cuda:0 --shuffle --epochs 3 --workers 16 --no-verify --no-check
log "dlk on the decoded images for ${IMG_EPOCHS:=100} epochs (seconds, not half of one, like the baselines' 25 s: start-up amortized as theirs is)"
B "$W/ds_img" --device cuda:0 --shuffle --epochs "$IMG_EPOCHS" --workers 16 --no-verify --no-check
python3 "$here/summarize_gpu.py" "$R" "$W/ls_zstd.json" "$W/gpu.txt"
