#!/usr/bin/env bash
# tests/bench/ingest_shards.sh [N] [P] - one ingest from S3 beside P
# processes sharing it (--shard i/P, each from a folder of its own, all
# at once, the last merging), against one server: N photo-like JPEGs of
# 500x375 (make_images.py) served as s3://bench/src by s3_dir_server
# (CASE as tests/bench/link.sh's serve takes it: default "0", loopback;
# "link:25:100" behind the link proxy), ingested to 224x224 (--fit crop,
# --order sorted) into a local dataset.  Prints files/s of each, and of
# the raw decode on these cores where decode_bench is built (a `make
# dist` tree has it), and checks that the two datasets hold the same
# rows in the same order.  One process takes --jobs CORES, each of the P
# --jobs CORES/P (at least 1).
#   tests/bench/ingest_shards.sh 4000 4          (DIST=dist for a dist tree)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/dist_bins.sh"
. "$here/link.sh"
n=${1:-4000}
p=${2:-4}
case=${CASE:-0}
SRV=${SRV:-${DIST:+$DIST/bin/s3_dir_server}}
SRV=${SRV:-$root/build/tests/s3_dir_server}
DB=${DIST:+$DIST/bin/decode_bench}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-shards.XXXXXX")
trap 'serve_stop; rm -rf "$T"' EXIT
cores=$(nproc)
each=$((cores / p)); [ "$each" -ge 1 ] || each=1
echo "machine: $cores cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1); load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/make_images.py" "$T/gen" --n "$n" --jpeg-only >/dev/null
mkdir -p "$T/root/bench" && mv "$T/gen/jpeg" "$T/root/bench/src"
serve "$case" "$SRV" "$T/root"
echo "$n JPEGs in s3://bench/src ($(du -sh "$T/root/bench/src" | cut -f1)), $(serve_label "$case"); 1 process against $p"
[ -z "$DB" ] || [ ! -x "$DB" ] ||
    echo "raw decode, $cores threads: $("$DB" "$cores" "$T"/root/bench/src/*.jpg) files/s"
opts=(--resize 224x224 --fit crop --order sorted)
now() { date +%s.%N; }
report() { # LABEL T0 T1
    python3 -c 'import sys; s = float(sys.argv[3]) - float(sys.argv[2]); print("%s: %.2f s, %.0f files/s" % (sys.argv[1], s, int(sys.argv[4]) / s))' "$@" "$n"
}

"$DLK" create "$T/one" --tensor image:u8:224x224x3 >/dev/null
t0=$(now)
"$DLK" ingest "$T/one" from-s3 s3://bench/src "${opts[@]}" --jobs "$cores" --quiet
report "1 process, --jobs $cores" "$t0" "$(now)"

"$DLK" create "$T/sharded" --tensor image:u8:224x224x3 >/dev/null
t0=$(now)
pids_i=()
for i in $(seq 0 $((p - 1))); do
    mkdir -p "$T/work$i"
    (cd "$T/work$i" && exec "$DLK" ingest "$T/sharded" from-s3 s3://bench/src \
        "${opts[@]}" --jobs "$each" --shard "$i/$p" --json >out.json) &
    pids_i+=($!)
done
rc=0
for pid in "${pids_i[@]}"; do wait "$pid" || rc=1; done
t1=$(now)
[ "$rc" = 0 ] || { echo "a shard failed"; exit 1; }
report "$p processes, --jobs $each each" "$t0" "$t1"
python3 - "$T" "$p" <<'PY'
import json, sys
t, p = sys.argv[1], int(sys.argv[2])
outs = [json.load(open(f"{t}/work{i}/out.json")) for i in range(p)]
print("  shards: " + ", ".join(
    f"{o['shard']['index']}: {o['ingested']} rows in {o['seconds']:.2f} s"
    for o in outs))
sys.exit(not any(o["complete"] for o in outs))  # the head holds every shard
PY
same() { # every tensor of both, byte for byte, in row order
    local t
    for t in $("$DLK" ls "$T/one" --json | python3 -c 'import json, sys; print(" ".join(t["name"] for t in json.load(sys.stdin)["tensors"]))'); do
        "$DLK" cat "$T/one" "$t" 0: --raw > "$T/a.bin" &&
            "$DLK" cat "$T/sharded" "$t" 0: --raw > "$T/b.bin" &&
            cmp -s "$T/a.bin" "$T/b.bin" || return 1
    done
}
"$DLK" ls "$T/sharded" | sed -n 3p
if same; then echo "the sharded dataset holds the same $n rows in the same order, every tensor byte for byte"; else echo "the datasets differ"; exit 1; fi
