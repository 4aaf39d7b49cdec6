#!/usr/bin/env bash
# Benchmark: streaming a dataset straight from S3 (a local moto server)
# against what teams do today, one GET and one decode per file.
#   1. N JPEGs of 500x375, quality 90 (tests/bench/make_images.py), are
#      put in s3://bench/raw/ and ingested with `dlk create s3://bench/ds
#      from-dir ... --resize 224x224` (u8 224x224x3, 16 MiB chunks);
#   2. `dlk bench-stream s3://bench/ds --device cpu` reads the dataset
#      (checksums on) and, with --source-baseline s3://bench/raw/, the
#      per-file baseline (one GET per JPEG, decode and resize per sample,
#      same batch size and workers) -- first straight to moto, then through
#      tests/faultproxy.py adding 50 ms to the first byte of every answer
#      (a remote store's latency), no faults.
# Prints samples/s of each and dlk's ratio to the baseline (the target
# with 50 ms added: 20x or more).
#   tests/bench/s3_stream.sh [IMAGES] [WORKERS] [EPOCHS]
# DLK_S3_SERVER=rgw DLK_RGW_ENV=FILE runs it against a Ceph RGW instead
# (tests/servers/ceph-rgw.sh start DIR writes DIR/env).
# Needs moto_server, boto3, numpy and Pillow; DLK_BUILD names the
# build (default build/); BATCH the batch size (256); KEEP a directory
# for the two bench-stream JSON reports; PROXY_PROCS the proxy's processes
# (default: a quarter of the cores).  moto is one Python process: on
# a small machine it, not dlk, sets the ceiling of the dlk column.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
n=${1:-2000}
workers=${2:-16}
epochs=${3:-3}
batch=${BATCH:-256}
# the proxy's processes: one relays about 1 GB/s, under what dlk reads
procs=${PROXY_PROCS:-$(( $(nproc) / 4 > 1 ? $(nproc) / 4 : 1 ))}
. "$root/tests/bench/moto_bench.sh"

moto_bench_start "curl $(curl --version | head -n1 | cut -d' ' -f2); $(s3_server_name)"

t0=$(date +%s.%N)
python3 "$root/tests/bench/make_images.py" "$T/img" --n "$n" >/dev/null
rm -rf "$T/img/npy" "$T/img/decoded.npy"
s3_put_tree "$T/img/jpeg" s3://bench/raw
"$dlk" create s3://bench/ds from-dir "$T/img/jpeg" --resize 224x224 -q
t1=$(date +%s.%N)
jbytes=$(du -sb "$T/img/jpeg" | cut -f1)
echo "data: $n JPEGs 500x375 q90 ($((jbytes / n / 1000)) KB each) in s3://bench/raw/, ingested as u8 224x224x3 into s3://bench/ds in $(echo "$t0 $t1" | awk '{printf "%.1f", $2-$1}') s"

# one bench-stream run against ENDPOINT; prints its JSON to $T/NAME.json
run() { # NAME ENDPOINT
    AWS_ENDPOINT_URL=$2 "$dlk" bench-stream s3://bench/ds --device cpu \
        --json --batch-size "$batch" --workers "$workers" --epochs "$epochs" \
        --shuffle --source-baseline s3://bench/raw/ >"$T/$1.json"
}

report() { # LABEL NAME
    python3 - "$T/$2.json" "$1" "$n" "$epochs" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
label, n, epochs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = r.get("baseline") or {}
ok = r["checksum_ok"] is True and r["samples"] >= n * epochs
ep = [e["samples_per_s"] for e in r.get("epochs", [])]
steady = max(ep[1:]) if len(ep) > 1 else r["samples_per_s"]
base = b.get("samples_per_s", 0)
print("%-26s dlk %7.0f samples/s, steady epoch %7.0f (%.0f MB/s, first batch "
      "%.3f s, %d requests, bottleneck %s, checksums %s) | per-file %6.0f "
      "samples/s (%d files, %d errors) | dlk/per-file %5.1fx whole run, "
      "%5.1fx steady"
      % (label, r["samples_per_s"], steady, r["steady_bytes_per_s"] / 1e6,
         r["first_batch_s"], r["requests"], r["bottleneck"],
         "ok" if ok else "BAD", base, b.get("samples", 0),
         b.get("errors", 0), r.get("ratio_to_baseline", 0),
         steady / base if base else 0))
sys.exit(0 if ok else 1)
PY
}

echo "bench-stream: batch $batch, $workers workers, $epochs epochs shuffled, --device cpu"
run direct "$AWS_ENDPOINT_URL"
report "$(s3_server_name) direct:" direct
s3_proxy_start --delay-ms 50 --procs "$procs"
run delay "http://127.0.0.1:$S3_PROXY_PORT"
report "$(s3_server_name) + 50 ms first byte:" delay
echo "(the proxy: $procs processes)"
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$T"/direct.json "$T"/delay.json "$KEEP"/
true
