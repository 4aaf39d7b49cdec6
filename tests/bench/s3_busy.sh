#!/usr/bin/env bash
# tests/bench/s3_busy.sh [IMAGES] [EPOCHS] - the claim dlk exists for,
# from S3 in one command per case: a training step of T ms per batch, fed
# by dlk's chunks and by per-file GETs (one GET, decode and resize per
# sample: what a DataLoader over a bucket of JPEGs does), on the same
# device, threads and batch size, with 0 and 50 ms to the first byte and
# through a link of 25 ms each way and 100 MB/s a connection (DELAYS:
# cases as tests/bench/link.sh's serve takes them); prints both sides'
# samples/s and device busy %.
#   IMAGES JPEGs of 500x375 q90 (default 20000; tests/bench/make_images.py)
#   are ingested as u8 224x224x3 in 16 MiB chunks; the dataset and the
#   JPEGs are served by tests/bench/s3_dir_server on loopback
#   (S3_DIR_SERVER_DELAY_MS holds every answer).
# STEPS (default "13 50") the step times in ms; DEVICE (default auto:
# cuda:0 when there is a GPU); WORKERS the loader's I/O threads and the
# baseline's decode threads (default: the loader's default, which the
# baseline then uses too); BASELINE_S the
# baseline's time limit (default 20); KEEP a folder for the JSON reports;
# RANKS (default 1) processes, one a GPU (cuda:0, cuda:1, ...), each
# --rank R --world RANKS with LOCAL_RANK and LOCAL_WORLD_SIZE set as
# torchrun sets them, the per-file side on rank 0 only;
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
RANKS=${RANKS:-1}
DELAYS=${DELAYS:-0 50 link:25:100}
. "$here/link.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-busy.XXXXXX")
trap 'serve_stop; rm -rf "$T"' EXIT
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
dev_of() { # RANK -> the device of that rank
    if [ "$RANKS" -gt 1 ] && [ "$DEVICE" != cpu ]; then echo "cuda:$1"; else echo "$DEVICE"; fi
}
for delay in $DELAYS; do
    serve "$delay" "$SRV" "$T/root"
    tag=$(echo "$delay" | tr : _)
    for step in $STEPS; do
        out=$T/d$tag-s$step.json
        # ranks 1.. on cuda:1.. in the background; rank 0 also runs the
        # per-file side once its stream is done
        ranks=()
        for ((r = 1; r < RANKS; r++)); do
            LOCAL_RANK=$r LOCAL_WORLD_SIZE=$RANKS "$DLK" bench-stream s3://bench/ds --device "$(dev_of $r)" --epochs "$epochs" \
                --shuffle --step-ms "$step" ${WORKERS:+--workers "$WORKERS"} \
                --rank "$r" --world "$RANKS" --json > "$T/d$tag-s$step-r$r.json" &
            ranks+=($!)
        done
        LOCAL_RANK=0 LOCAL_WORLD_SIZE=$RANKS "$DLK" bench-stream s3://bench/ds --device "$(dev_of 0)" --epochs "$epochs" \
            --shuffle --step-ms "$step" ${WORKERS:+--workers "$WORKERS"} \
            --rank 0 --world "$RANKS" \
            --source-baseline s3://bench/raw/ --baseline-seconds "$BASELINE_S" \
            --json > "$out"
        [ ${#ranks[@]} -eq 0 ] || wait "${ranks[@]}"
        [ -z "${KEEP:-}" ] || cp "$T"/d$tag-s$step*.json "$KEEP/"
        python3 - "$out" "$(serve_label "$delay")" "$step" "$RANKS" <<'PY'
import json, sys
out, delay, step, ranks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
d = json.load(open(out)); b = d["baseline"]
runs = [d] + [json.load(open(out.replace(".json", "-r%d.json" % r))) for r in range(1, ranks)]
for r, x in enumerate(runs):
    steady = [e["busy_pct"] for e in x["epochs"][1:]] or [x["epochs"][0]["busy_pct"]]
    print("%s, step %3s ms, rank %d of %d on %s: dlk %7.0f samples/s, busy %5.1f%% whole run (%5.1f%% steady), first batch %.3f s, checksums %s"
          % (delay, step, r, ranks, x["device"], x["samples_per_s"], x["gpu_busy_pct"], max(steady), x["first_batch_s"],
             "ok" if x["checksum_ok"] is True else "BAD"))
if ranks > 1:
    print("%36s all ranks: %7.0f samples/s" % ("", sum(x["samples_per_s"] for x in runs)))
print("%36s per-file (one process on %s) %7.0f samples/s, busy %5.1f%%; an epoch costs $%.4f against $%.4f per-file"
      % ("", d["device"], b["samples_per_s"], b["gpu_busy_pct"], d["epoch_cost"]["usd"], b["epoch_cost"]["usd"]))
PY
    done
done
