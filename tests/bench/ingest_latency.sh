#!/usr/bin/env bash
# tests/bench/ingest_latency.sh SRC [DELAYS] - ingest the JPEGs under
# SRC/*/ (500x375 q90, as ingest.sh makes them) from a local S3 server
# that answers each request after D ms (s3_dir_server with
# S3_DIR_SERVER_DELAY_MS; S3's time to first byte is tens of ms), for
# each D of DELAYS (default "0 20 50"): dlk's defaults against the
# earlier defaults (--fetch 64, 64 requests in flight), or with
# OLD=BIN against another build's defaults, two runs each, alternated;
# the server on the last core, ingest on the others.
#   DLK=build/dlk SRV=build/tests/s3_dir_server tests/bench/ingest_latency.sh SRC
#   (DIST=dist: dist/bin's dlk, s3_dir_server and decode_bench)
set -eu
SRC=$1
DELAYS=${2:-0 20 50}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -n "${DIST:-}" ]; then
    DLK=${DLK:-$DIST/bin/dlk} SRV=${SRV:-$DIST/bin/s3_dir_server}
    DB=${DB:-$DIST/bin/decode_bench}
fi
DLK=${DLK:-$root/build/dlk}
SRV=${SRV:-$root/build/tests/s3_dir_server}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-lat.XXXXXX")
SHM=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "$T")/dlk-lat.XXXXXX")
srv=""
trap '[ -z "$srv" ] || kill "$srv" 2>/dev/null || true; rm -rf "$T" "$SHM"' EXIT
cores=$(nproc)
pin_s="" pin_c="" ncl=$cores
if [ "$cores" -ge 4 ] && command -v taskset >/dev/null; then
    pin_s="taskset -c $((cores - 1))" pin_c="taskset -c 0-$((cores - 2))"
    ncl=$((cores - 1))
fi
mkdir -p "$T/root/raw" && ln -s "$(cd "$SRC" && pwd)" "$T/root/raw/train"
start() { # DELAY_MS
    [ -z "$srv" ] || { kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; }
    rm -f "$T/port"
    S3_DIR_SERVER_DELAY_MS=$1 $pin_s "$SRV" "$T/root" 1 > "$T/port" 2>/dev/null &
    srv=$!
    for _ in $(seq 100); do grep -q '^port' "$T/port" 2>/dev/null && break; sleep 0.1; done
    export AWS_ENDPOINT_URL=http://127.0.0.1:$(awk '/^port/{print $2}' "$T/port") \
        AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
        AWS_SHARED_CREDENTIALS_FILE=$T/none AWS_CONFIG_FILE=$T/none
}
one() { # DELAY LABEL ARGS... -> "files/s, decode threads' wait, peak RSS"
    local d=$1 l=$2 bin=${BIN:-$DLK}; shift 2
    rm -rf "$SHM/ds"
    $pin_c python3 -c 'import resource, subprocess, sys
r = subprocess.call(sys.argv[2:], stdout=open(sys.argv[1], "w"))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(r)' "$T/out.json" "$bin" create "$SHM/ds" from-s3 s3://raw/train \
        --resize 224x224 --json "$@" 2> "$T/rss"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["stages"]
print("delay %s ms, %-13s %6.0f files/s  list %.3f s  decode threads waiting %.2f s  peak RSS %s MiB" % (sys.argv[2], sys.argv[3], d["ingested"]/d["seconds"], s["list"], s["decode_wait"], open(sys.argv[4]).read().split()[-1]))' \
        "$T/out.json" "$d" "$l" "$T/rss"
}
echo "machine: $cores cores; $(ls "$SRC"/*/*.jpg | wc -l) JPEGs; s3_dir_server on the last core, a thread a connection when delayed"
for d in $DELAYS; do
    start "$d"
    [ -z "${DB:-}" ] || echo "raw TurboJPEG decode on the ingest's cores: $($pin_c "$DB" "$ncl" "$SRC"/*/*.jpg) files/s"
    for k in 1 2; do
        one "$d" default
        if [ -n "${OLD:-}" ]; then
            BIN=$OLD one "$d" "old build"
        else
            DLK_S3_MAX_INFLIGHT=64 one "$d" "--fetch 64" --fetch 64
        fi
    done
done
