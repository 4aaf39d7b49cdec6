#!/usr/bin/env bash
# tests/bench/s3_start.sh [SAMPLES] [EPOCHS] - the start of a run from S3,
# one process a GPU as torchrun starts them: SAMPLES (default 20000)
# synthetic u8 224x224x3 samples served by s3_dir_server with DELAY_MS
# (default 50) to the first byte; every rank streams EPOCHS (default 3)
# shuffled epochs with a STEP_MS (default 13) step; for each rank: the
# first batch, each epoch's GB/s, GPU busy over the whole run, peak RSS,
# and from DLK_CUDA_TRACE the pinned slabs and device buffers made and
# when the last was done, the GPU's idle time between kernels in the
# first epoch and after it, and when CUDA was ready and the first pinned buffer, copy and
# gather came (seconds from the launch); then from the server's request
# log (S3_DIR_SERVER_LOG, on the same clock as the trace's origin line)
# the first request, the first chunk GET and the GETs of the first
# 0.8 s.  Spans (the default) and --whole-chunks, and with OLD="BIN ..."
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
S3_DIR_SERVER_DELAY_MS=$DELAY_MS S3_DIR_SERVER_LOG=$T/req.log \
    "$DIST/bin/s3_dir_server" "$T/root" 64 > "$T/port" 2>/dev/null &
srv=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
export AWS_ENDPOINT_URL=http://127.0.0.1:$(awk '{print $2}' "$T/port") \
    AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
    AWS_SHARED_CREDENTIALS_FILE=$T/none AWS_CONFIG_FILE=$T/none
echo "host: $(nproc) cores, $G GPUs; $n samples; $DELAY_MS ms to the first byte; step $STEP_MS ms; $epochs epochs"
ranks() { # LABEL BIN ARGS...
    local label=$1 bin=$2 pids=() r skip t; shift 2
    skip=$(wc -l < "$T/req.log")
    t=$(python3 -c 'import time; print(time.monotonic())')
    for ((r = 0; r < G; r++)); do
        RANK=$r WORLD_SIZE=$G LOCAL_RANK=$r LOCAL_WORLD_SIZE=$G \
            DLK_CUDA_TRACE=$T/tr.$r "$bin" bench-stream s3://bench/ds \
            --epochs "$epochs" --shuffle --step-ms "$STEP_MS" --json "$@" \
            > "$T/o.$r.json" &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || echo "$label: a rank failed"; done
    for ((r = 0; r < G; r++)); do
        python3 - "$T/o.$r.json" "$T/tr.$r" "$label" "$r" "$t" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = [l.split() for l in open(sys.argv[2]) if l.strip()]
# seconds from the ranks' launch (the trace's origin line is on the
# same clock): CUDA ready, the first pinned buffer, copy and gather
origin = [float(e[1]) for e in ev if e[0] == "origin"][0]
def first(kind, col=1):
    v = [float(e[col]) for e in ev if e[0] == kind]
    return min(v) + origin - float(sys.argv[5]) if v else float("nan")
def made(kind):
    m = [e for e in ev if e[0] == kind]
    return len(m), max([float(e[3]) for e in m] or [0.0])
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
      "pinned slabs %d (the last done %.3f s after CUDA's start), device buffers %d (the last %.3f s); GPU idle after the first "
      "gather %.3f s in epoch 1, %.3f s later; from the launch: CUDA ready %.3f s, "
      "first pin %.3f, copy %.3f, gather %.3f"
      % (sys.argv[3], sys.argv[4], d["first_batch_s"],
         " ".join("%.2f" % (e["bytes_per_s"] / 1e9) for e in d["epochs"]),
         d["gpu_busy_pct"], d["peak_rss_bytes"] / 1e9, pins, pin_s, devs, dev_s,
         idle1, idle2, origin - float(sys.argv[5]), first("pin"), first("copy"),
         first("gather", 2)))
PY
    done
    # the server's side, all ranks together: the first request (a
    # dataset's open), the first GET of a chunk, and the chunk GETs
    # begun (count/MB) in each 50 ms of the first 0.8 s
    python3 - "$T/req.log" "$skip" "$t" <<'PY'
import re, sys
t0 = float(sys.argv[3])
rq = [(float(r[0]) - t0, r[2], r[3] if len(r) > 3 else "-")
      for r in (l.split() for l in list(open(sys.argv[1]))[int(sys.argv[2]):])]
chunk = [r for r in rq if "/chunks/" in r[1]]
b = {}
for r in chunk:
    k = int(r[0] / 0.05)
    m = re.match(r"bytes=(\d+)-(\d+)", r[2])
    if k < 16:
        c = b.setdefault(k, [0, 0])
        c[0] += 1
        c[1] += int(m.group(2)) - int(m.group(1)) + 1 if m else 0
print("    server: first request %.3f s, first chunk GET %.3f s from the launch; chunk GETs "
      "begun per 50 ms (ms: count/MB) %s" % (rq[0][0] if rq else -1, chunk[0][0] if chunk else -1,
      " ".join("%d:%d/%.0f" % (k * 50, v[0], v[1] / 1e6) for k, v in sorted(b.items()))))
PY
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
