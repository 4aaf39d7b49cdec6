#!/usr/bin/env bash
# tests/bench/s3_timeline.sh [SAMPLES] [EPOCHS] - where the start of a run
# from S3 goes, one process on GPU 0: SAMPLES (default 20000) synthetic
# u8 224x224x3 samples served by s3_dir_server with DELAY_MS (default 50)
# to the first byte, bench-stream on DEVICE (default cuda:0; the GPU's
# figures are missing on the CPU) --shuffle --step-ms STEP_MS (default 13)
# for EPOCHS (default 6).  From the server's request log
# (S3_DIR_SERVER_LOG) and DLK_CUDA_TRACE (its origin line is on the same
# clock), in seconds from the process's launch: the first request (the
# dataset's open), the first GET of a chunk, when CUDA was ready, the
# first pinned buffer asked for, the first copy queued, the first gather;
# then the first batch, each epoch's GB/s and GPU busy; and the chunk
# GETs (count/MB) begun in each 50 ms of the first 0.8 s.  Spans (the
# default) and --whole-chunks; with OLD="BIN ..." other builds too (each
# named by the folder above its bin/), alternated over ROUNDS (default 2).
#   DIST=dist [OLD="old/bin/dlk ..."] tests/bench/s3_timeline.sh
set -u
n=${1:-20000}
epochs=${2:-6}
DIST=${DIST:-dist}
OLD=${OLD:-}
DELAY_MS=${DELAY_MS:-50}
STEP_MS=${STEP_MS:-13}
DEVICE=${DEVICE:-cuda:0}
ROUNDS=${ROUNDS:-2}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-s3tl.XXXXXX")
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
echo "host: $(nproc) cores; $n samples; $DELAY_MS ms to the first byte; step $STEP_MS ms; $epochs epochs"
one() { # LABEL BIN ARGS...
    local label=$1 bin=$2 skip t; shift 2
    skip=$(wc -l < "$T/req.log")
    t=$(python3 -c 'import time; print(time.monotonic())')
    DLK_CUDA_TRACE=$T/tr "$bin" bench-stream s3://bench/ds --device "$DEVICE" \
        --epochs "$epochs" --shuffle --step-ms "$STEP_MS" --json "$@" \
        > "$T/o.json" 2> "$T/err" || { echo "$label: failed"; tail -3 "$T/err"; return; }
    python3 - "$t" "$T/tr" "$T/o.json" "$T/req.log" "$skip" "$label" <<'PY'
import json, re, sys
t0, tr, oj, log, skip, label = sys.argv[1:7]
t0 = float(t0)
d = json.load(open(oj))
try:  # no trace on the CPU
    ev = [l.split() for l in open(tr) if l.strip()]
except OSError:
    ev = []
origin = ([float(e[1]) for e in ev if e[0] == "origin"] or [float("nan")])[0]
def first(kind, col=1):
    v = [float(e[col]) for e in ev if e[0] == kind]
    return min(v) + origin - t0 if v else float("nan")
rq = [(float(r[0]) - t0, r[2], r[3] if len(r) > 3 else "-")
      for r in (l.split() for l in list(open(log))[int(skip):])]
chunk = [r for r in rq if "/chunks/" in r[1]]
print("%-16s first request %.3f, first chunk GET %.3f, CUDA ready %.3f, first pin %.3f, "
      "first copy %.3f, first gather %.3f; first batch %.3f s from the open; epochs %s GB/s; "
      "busy %.1f%%; %d requests"
      % (label, rq[0][0], chunk[0][0] if chunk else -1, origin - t0, first("pin"),
         first("copy"), first("gather", 2), d["first_batch_s"],
         " ".join("%.2f" % (e["bytes_per_s"] / 1e9) for e in d["epochs"]),
         d["gpu_busy_pct"], len(rq)))
b = {}
for r in chunk:
    k = int(r[0] / 0.05)
    m = re.match(r"bytes=(\d+)-(\d+)", r[2])
    if k < 16:
        c = b.setdefault(k, [0, 0])
        c[0] += 1
        c[1] += int(m.group(2)) - int(m.group(1)) + 1 if m else 0
print("    chunk GETs begun per 50 ms (from ms: count/MB): " +
      " ".join("%d:%d/%.0f" % (k * 50, v[0], v[1] / 1e6) for k, v in sorted(b.items())))
PY
}
one "warm-up" "$DIST/bin/dlk" > /dev/null
for ((k = 0; k < ROUNDS; k++)); do
    one "spans" "$DIST/bin/dlk"
    one "whole chunks" "$DIST/bin/dlk" --whole-chunks
    for o in $OLD; do
        name=$(basename "$(dirname "$(dirname "$o")")")
        one "$name, spans" "$o"
        one "$name, whole" "$o" --whole-chunks
    done
done
