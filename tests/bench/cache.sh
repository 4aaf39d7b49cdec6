#!/usr/bin/env bash
# Benchmark: the node-local chunk cache (bench-stream --cache-dir) in
# front of S3 (a local moto server behind tests/faultproxy.py adding
# DELAY_MS to the first byte of every answer, a remote store's latency;
# no faults).  One dataset of N random u8 64x64x3 samples (12 KiB each)
# in 1 MiB chunks, with an i32 class label of 10 classes stored in class
# order (a class-folder tree ingested sorted), streamed on the cpu with
# checksums on:
#   1. today: E epochs straight from S3, no cache;
#   2. E epochs through an empty cache, then a second run through it;
#   3. RANKS processes at once (2, 4, then 8: each the whole dataset, the
#      same order) through one empty cache: chunk GETs the server saw;
#   4. E epochs through a cache holding half the chunks' bytes: its hit
#      rate, the GETs an epoch beside (1 - hit rate) x chunks, and the
#      label mix against the run without a cache;
#   5. the same dataset in a local folder, in the page cache (today's
#      fastest local read), for samples/s.
# Prints each epoch's GETs (the loader's; the label-mix audit of
# bench-stream reads the labels before the loader opens) and samples/s,
# the label mix of the worst epoch, and
# the run's samples/s (epochs this short vary: an epoch that reads the
# next one's first chunks ahead is slower than the last, which does not).
#   tests/bench/cache.sh [N] [EPOCHS] [WORKERS]  (RANKS="2 4 8")
# Needs moto_server, boto3 and numpy; DLK_BUILD names the build (default
# build/); DELAY_MS the added latency (default 20).  Under 2 minutes on
# 2 cores with the defaults.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
n=${1:-15000}
epochs=${2:-4}
workers=${3:-8}
delay=${DELAY_MS:-20}
. "$root/tests/bench/moto_bench.sh"

moto_bench_start "$(s3_server_name), ${delay} ms added to each answer"
moto_log=$(ls "$T"/moto-*.log)
python3 - "$T/src" "$n" <<'PY'
import os, sys, numpy as np
out, n = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
rng = np.random.default_rng(1)
for i in range(n):
    np.save(os.path.join(out, "%06d.image.npy" % i),
            rng.integers(0, 255, size=(64, 64, 3), dtype=np.uint8))
    np.save(os.path.join(out, "%06d.labels.npy" % i), np.int32(i * 10 // n))
PY
ds=s3://bench/ds
# parts of 64 KiB: the loader reads spans of them, so a shuffle window
# draws from many chunks of the sorted rows; the cache keeps whole chunks
schema=(--tensor image:u8:64x64x3 --tensor labels:i32 --chunk-size 1M --part-size 64K)
"$dlk" create "$ds" "${schema[@]}" >/dev/null
"$dlk" ingest "$ds" from-dir "$T/src" -q --order sorted
"$dlk" create "$T/local" "${schema[@]}" >/dev/null
"$dlk" ingest "$T/local" from-dir "$T/src" -q --order sorted
chunks=$(find "$T/local/chunks/image" -type f | wc -l)
bytes=$(du -sb "$T/local/chunks" | cut -f1)
echo "data: $n samples u8 64x64x3 in $chunks chunks, $((bytes / 1048576)) MiB"
fault_proxy_start "$AWS_ENDPOINT_URL" --delay-ms "$delay"
export AWS_ENDPOINT_URL=http://127.0.0.1:$FAULT_PROXY_PORT

gets() { grep -c '"GET /bench/ds/chunks/image/' "$moto_log"; }
stream() { # JSON URL ARGS...
    local out=$1 url=$2; shift 2
    "$dlk" bench-stream "$url" --device cpu --json --shuffle --seed 3 \
        --batch-size 256 --workers "$workers" "$@" >"$out"
}
show() { # LABEL JSON
    python3 - "$2" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
eps = r["epochs"]
c = r.get("cache") or {}
lm = r.get("label_mix") or {}
print("%-30s GETs/epoch %-18s samples/s/epoch %-30s run %7.0f  label mix %s%s" % (
    sys.argv[2], " ".join(str(e["requests"]) for e in eps),
    " ".join("%.0f" % e["samples_per_s"] for e in eps), r["samples_per_s"],
    "%.2f" % lm["ratio"] if lm else "-",
    (" cache: %d fetched, %d hits, %d evicted, hit rate %.2f" % (
        c["fetched"], c["hits"], c["evicted"],
        c["hits"] / max(1, c["hits"] + c["fetched"]))) if c else ""))
if r["checksum_ok"] is not True:
    sys.exit("checksum differs")
PY
}

t0=$(date +%s)
stream "$T/none.json" "$ds" --epochs "$epochs"
show "from S3, no cache" "$T/none.json"
stream "$T/cold.json" "$ds" --epochs "$epochs" --cache-dir "$T/c1"
show "through an empty cache" "$T/cold.json"
stream "$T/warm.json" "$ds" --epochs "$epochs" --cache-dir "$T/c1"
show "a second run, the cache full" "$T/warm.json"
for ranks in ${RANKS:-2 4 8}; do
    g0=$(gets)
    pids=()
    for ((i = 0; i < ranks; i++)); do
        stream "$T/r$ranks.$i.json" "$ds" --epochs 1 \
            --cache-dir "$T/c$ranks" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    echo "$ranks processes at once, one cache: $(( $(gets) - g0 )) chunk GETs for $chunks chunks"
done
# a cache of half the bytes: one epoch fills it, then a run of E epochs
# through it (every read a hit or a fetch)
stream "$T/fill.json" "$ds" --epochs 1 --cache-dir "$T/half" \
    --cache-limit $((bytes / 2))
g0=$(gets)
stream "$T/half.json" "$ds" --epochs "$epochs" --cache-dir "$T/half" \
    --cache-limit $((bytes / 2))
show "a cache of half the bytes" "$T/half.json"
python3 - "$T/half.json" "$T/none.json" "$(( $(gets) - g0 ))" <<'PY'
import json, sys
h, n, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
c, e = h["cache"], len(h["epochs"])
reads = c["hits"] + c["fetched"]
rate = c["hits"] / max(1, reads)
print("  half cache: hit rate %.2f of %d reads; the server saw %.0f image chunk GETs"
      " an epoch, (1 - hit rate) x %.0f reads an epoch = %.0f; label mix %.2f, %.2f"
      " without a cache" % (rate, reads, got / e, reads / e, (1 - rate) * reads / e,
      h["label_mix"]["ratio"], n["label_mix"]["ratio"]))
PY
cat "$T/local/chunks"/*/* >/dev/null
stream "$T/local.json" "$T/local" --epochs "$epochs"
show "local folder, page cache" "$T/local.json"
echo "took $(( $(date +%s) - t0 )) s"
