#!/usr/bin/env bash
# tests/bench/s3_busy.sh [IMAGES] [EPOCHS] - the claim dlk exists for,
# from S3 in one command per case: a training step of T ms per batch, fed
# by dlk's chunks and by per-file GETs (one GET, decode and resize per
# sample: what a DataLoader over a bucket of JPEGs does), on the same
# device, threads and batch size, with 0 and 50 ms to the first byte;
# prints both sides' samples/s and device busy %.
#   IMAGES JPEGs of 500x375 q90 (default 20000; tests/bench/make_images.py)
#   are ingested as u8 224x224x3 in 16 MiB chunks; the dataset and the
#   JPEGs are served by tests/bench/s3_dir_server on loopback
#   (S3_DIR_SERVER_DELAY_MS holds every answer).
# STEPS (default "13 50") the step times in ms; DEVICE (default auto:
# cuda:0 when there is a GPU); WORKERS the loader's I/O threads and the
# baseline's decode threads (default: the loader's default, which the
# baseline then uses too); BASELINE_S the
# baseline's time limit (default 20); KEEP a folder for the JSON reports;
# ROOT a folder holding bench/raw (the JPEGs) and bench/ds (the dataset)
# from an earlier run, used instead of making them.
#   DLK=build/dlk SRV=build/tests/s3_dir_server tests/bench/s3_busy.sh
set -eu
n=${1:-20000}
epochs=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DLK=${DLK:-$root/build/dlk}
SRV=${SRV:-$root/build/tests/s3_dir_server}
STEPS=${STEPS:-13 50}
DEVICE=${DEVICE:-auto}
WORKERS=${WORKERS:-}
BASELINE_S=${BASELINE_S:-20}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-busy.XXXXXX")
pid=""
stop() { [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }; pid=""; }
trap 'stop; rm -rf "$T"' EXIT
if [ -n "${ROOT:-}" ]; then
    ln -s "$(cd "$ROOT" && pwd)" "$T/root"
    n=$(ls "$T/root/bench/raw" | wc -l)
else
    python3 "$here/make_images.py" "$T/img" --n "$n" --jpeg-only >/dev/null
    mkdir -p "$T/root/bench"
    mv "$T/img/jpeg" "$T/root/bench/raw"
    "$DLK" create "$T/root/bench/ds" from-dir "$T/root/bench/raw" --resize 224x224 --quiet
fi
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -n1 | sed 's/^/gpu: /'
echo "data: $n JPEGs 500x375 q90 ($(du -sm "$T/root/bench/raw" | cut -f1) MB) and the dataset of them as u8 224x224x3 ($(du -sm "$T/root/bench/ds" | cut -f1) MB), both served by s3_dir_server"
for delay in 0 50; do
    stop
    S3_DIR_SERVER_DELAY_MS=$delay "$SRV" "$T/root" 64 > "$T/port" 2> "$T/srv.err" &
    pid=$!
    for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
    export AWS_ENDPOINT_URL=http://127.0.0.1:$(awk '{print $2}' "$T/port") \
        AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
    for step in $STEPS; do
        out=$T/d$delay-s$step.json
        "$DLK" bench-stream s3://bench/ds --device "$DEVICE" --epochs "$epochs" \
            --shuffle --step-ms "$step" ${WORKERS:+--workers "$WORKERS"} \
            --source-baseline s3://bench/raw/ --baseline-seconds "$BASELINE_S" \
            --json > "$out"
        [ -z "${KEEP:-}" ] || cp "$out" "$KEEP/"
        python3 - "$out" "$delay" "$step" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); b = d["baseline"]
steady = [e["busy_pct"] for e in d["epochs"][1:]] or [d["epochs"][0]["busy_pct"]]
print("%3s ms to first byte, step %3s ms on %s: dlk %7.0f samples/s, busy %5.1f%% whole run (%5.1f%% steady), first batch %.3f s"
      % (sys.argv[2], sys.argv[3], d["device"], d["samples_per_s"], d["gpu_busy_pct"], max(steady), d["first_batch_s"]))
print("%36s per-file %7.0f samples/s, busy %5.1f%%; dlk is %.1fx; an epoch costs $%.4f against $%.4f per-file"
      % ("", b["samples_per_s"], b["gpu_busy_pct"], d.get("ratio_to_baseline", 0), d["epoch_cost"]["usd"], b["epoch_cost"]["usd"]))
PY
    done
done
