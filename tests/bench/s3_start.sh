#!/usr/bin/env bash
# tests/bench/s3_start.sh [SAMPLES] [EPOCHS] - the start of a run from S3,
# one process a GPU as torchrun starts them: SAMPLES (default 20000)
# synthetic u8 224x224x3 samples served by s3_dir_server with DELAY_MS
# (default 50) to the first byte; every rank streams EPOCHS (default 3)
# shuffled epochs with a STEP_MS (default 13) step; for each rank: the
# first batch, each epoch's GB/s, GPU busy over the whole run, peak RSS,
# and from DLK_CUDA_TRACE the pinned and device buffers made and their
# time and the GPU's idle time between kernels in the first epoch and
# after it.  Spans (the default) and --whole-chunks, and with OLD="BIN ..."
# other builds (each named by the folder above its bin/), alternated over
# ROUNDS (default 2).
#   DIST=dist [OLD="old/bin/dlk ..."] tests/bench/s3_start.sh [SAMPLES] [EPOCHS]
set -u
n=${1:-20000}
epochs=${2:-3}
DIST=${DIST:-dist}
OLD=${OLD:-}
DELAY_MS=${DELAY_MS:-50}
STEP_MS=${STEP_MS:-13}
ROUNDS=${ROUNDS:-2}
G=${GPUS:-$(nvidia-smi -L | wc -l)}
here=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-s3start.XXXXXX")
srv=""
trap '[ -z "$srv" ] || kill "$srv" 2>/dev/null; rm -rf "$T"' EXIT
mkdir -p "$T/root/bench"
"$DIST/bin/synth" "$T/root/bench/ds" "$n" 224 224 >/dev/null
S3_DIR_SERVER_DELAY_MS=$DELAY_MS "$DIST/bin/s3_dir_server" "$T/root" 64 \
    > "$T/port" 2>/dev/null &
srv=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
export AWS_ENDPOINT_URL=http://127.0.0.1:$(awk '{print $2}' "$T/port") \
    AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
    AWS_SHARED_CREDENTIALS_FILE=$T/none AWS_CONFIG_FILE=$T/none
echo "host: $(nproc) cores, $G GPUs; $n samples; $DELAY_MS ms to the first byte; step $STEP_MS ms; $epochs epochs"
ranks() { # LABEL BIN ARGS...
    local label=$1 bin=$2 pids=() r; shift 2
    for ((r = 0; r < G; r++)); do
        RANK=$r WORLD_SIZE=$G LOCAL_RANK=$r LOCAL_WORLD_SIZE=$G \
            DLK_CUDA_TRACE=$T/tr.$r "$bin" bench-stream s3://bench/ds \
            --epochs "$epochs" --shuffle --step-ms "$STEP_MS" --json "$@" \
            > "$T/o.$r.json" &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || echo "$label: a rank failed"; done
    for ((r = 0; r < G; r++)); do
        python3 - "$T/o.$r.json" "$T/tr.$r" "$label" "$r" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = [l.split() for l in open(sys.argv[2]) if l.strip()]
def made(kind):
    m = [e for e in ev if e[0] == kind]
    return len(m), sum(float(e[3]) - float(e[1]) for e in m)
pins, pin_s = made("pin")
devs, dev_s = made("devalloc")
# the compute stream's idle time between its kernels (gathers, steps):
# in the first epoch after its first gather, and in the later ones
k = sorted((float(e[2]), float(e[3]), e[0]) for e in ev if e[0] in ("gather", "step"))
g = [x for x in k if x[2] == "gather"]
per = len(g) // max(1, len(d["epochs"]))
end1 = g[per][0] if per < len(g) else k[-1][1]
idle1 = idle2 = 0.0
for a, b in zip(k, k[1:]):
    gap = max(0.0, b[0] - a[1])
    if b[0] <= end1:
        idle1 += gap
    else:
        idle2 += gap
print("%-14s rank %s: first batch %.3f s, epochs %s GB/s, busy %.1f%%, peak RSS %.2f GB; "
      "pinned buffers made %d (%.3f s), device %d (%.3f s); GPU idle after the first "
      "gather %.3f s in epoch 1, %.3f s later"
      % (sys.argv[3], sys.argv[4], d["first_batch_s"],
         " ".join("%.2f" % (e["bytes_per_s"] / 1e9) for e in d["epochs"]),
         d["gpu_busy_pct"], d["peak_rss_bytes"] / 1e9, pins, pin_s, devs, dev_s,
         idle1, idle2))
PY
    done
}
# a first run, not reported: the first process on a machine pays for
# starting its driver and the server's first reads, and no build should
ranks "warm-up" "$DIST/bin/dlk" > /dev/null
for ((k = 0; k < ROUNDS; k++)); do
    ranks "spans" "$DIST/bin/dlk"
    ranks "whole chunks" "$DIST/bin/dlk" --whole-chunks
    for o in $OLD; do
        name=$(basename "$(dirname "$(dirname "$o")")")
        ranks "$name, spans" "$o"
        ranks "$name, whole" "$o" --whole-chunks
    done
done
