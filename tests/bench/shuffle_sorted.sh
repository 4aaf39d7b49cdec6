#!/usr/bin/env bash
# tests/bench/shuffle_sorted.sh [SAMPLES] [EPOCHS] - the loader's shuffle
# over a dataset stored in class order, and what it costs: a new build
# (chunks read in spans of checksummed parts) and an old one (whole
# chunks) alternated in one run, from the page cache and from S3
# (s3_dir_server on loopback, 50 ms to the first byte: DELAY).
#   Data: SAMPLES (default 20000) u8 224x224x3 images in 16 MiB chunks
#   (tests/bench/synth), 10 classes stored in class order (sorted:10);
#   the old build reads the same images written by its own synth (OLD
#   names its dist folder: OLD/bin/dlk, OLD/bin/synth).
#   Each line: bench-stream --shuffle --epochs EPOCHS on DEVICE (default
#   auto), the best steady epoch's samples/s, the first batch, the
#   requests an epoch and their mean size, peak buffers and RSS, the
#   worst epoch's label-mix ratio (1.0 = a random permutation).
#   WHERE (default "page s3") picks the sections; ROUNDS (default 2).
#   DIST=dist OLD=dist-old tests/bench/shuffle_sorted.sh
set -eu
n=${1:-20000}
epochs=${2:-3}
DIST=${DIST:-dist}
OLD=${OLD:-}
DELAY=${DELAY:-50}
DEVICE=${DEVICE:-auto}
ROUNDS=${ROUNDS:-2}
WHERE=${WHERE:-page s3}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-sorted.XXXXXX")
pid=""
stop() { [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }; pid=""; }
trap 'stop; rm -rf "$T"' EXIT

mkdir -p "$T/root/bench"
"$DIST/bin/synth" "$T/root/bench/new" "$n" 224 224 sorted:10 >/dev/null
[ -z "$OLD" ] || "$OLD/bin/synth" "$T/root/bench/old" "$n" 224 224 >/dev/null
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -n1 | sed 's/^/gpu: /'
echo "data: $n samples u8 224x224x3, 16 MiB chunks, 10 classes in class order; bench-stream --shuffle --epochs $epochs --device $DEVICE"

one() { # LABEL BIN DATASET FLAGS...
    local label=$1 b=$2 ds=$3; shift 3
    if ! "$b" bench-stream "$ds" --device "$DEVICE" --shuffle --epochs "$epochs" --json "$@" > "$T/o.json" 2> "$T/e.txt"; then
        echo "  $label: failed: $(tail -n 1 "$T/e.txt")"
        return
    fi
    python3 - "$T/o.json" "$label" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ep = d["epochs"]
steady = max(e["samples_per_s"] for e in (ep[1:] or ep))
req = ep[-1].get("requests", 0)
byt = ep[-1].get("bytes_read", 0)
mix = d.get("label_mix") or {}
print("  %-30s steady %7.0f samples/s, first batch %.3f s, %5d requests an epoch (%.2f MiB each), buffers %.2f GB, RSS %.2f GB, label mix %s, checksums %s"
      % (sys.argv[2], steady, d["first_batch_s"], req, byt / req / 2**20 if req else 0,
         d["peak_buffer_bytes"] / 1e9, d["peak_rss_bytes"] / 1e9,
         "%.2f" % mix["ratio"] if mix else "-", "ok" if d["checksum_ok"] is True else "BAD"))
PY
}

both() { # PREFIX(local dir or s3 URL)
    for _ in $(seq "$ROUNDS"); do
        one "new (spans of parts)" "$DIST/bin/dlk" "$1/new"
        [ -z "$OLD" ] || one "old (whole chunks)" "$OLD/bin/dlk" "$1/old"
    done
    one "new, --whole-chunks" "$DIST/bin/dlk" "$1/new" --whole-chunks
}

if [[ " $WHERE " == *" page "* ]]; then
    echo "page cache (warm):"
    cat "$T"/root/bench/*/chunks/*/* > /dev/null
    both "$T/root/bench"
fi
[[ " $WHERE " == *" s3 "* ]] || exit 0
echo "S3, $DELAY ms to the first byte (s3_dir_server on loopback):"
S3_DIR_SERVER_DELAY_MS=$DELAY "$DIST/bin/s3_dir_server" "$T/root" 64 > "$T/port" 2> "$T/srv.err" &
pid=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
export AWS_ENDPOINT_URL=http://127.0.0.1:$(awk '{print $2}' "$T/port") \
    AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
both s3://bench
