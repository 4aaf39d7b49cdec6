#!/usr/bin/env bash
# tests/bench/s3_throughput.sh [SAMPLES] [EPOCHS] - how fast dlk streams a
# dataset from an S3 endpoint, beside what the same endpoint serves a
# reference client in the same run.
#   The dataset: SAMPLES (default 20000) u8 224x224x3 images in 16 MiB
#   chunks (tests/bench/synth), served with the chunk objects by
#   tests/bench/s3_dir_server on loopback, with 0 and 50 ms to the first
#   byte and through a link of 25 ms each way and 100 MB/s a connection
#   (DELAYS: cases as tests/bench/link.sh's serve takes them).
#   Reference: every chunk object fetched whole by REF_PROCS (default 64)
#   curl processes at once (xargs -P), REF_ROUNDS times (default 2); its
#   figure is bytes over wall time.
#   dlk: `dlk bench-stream s3://bench/ds --device DEVICE --epochs EPOCHS`
#   with the default flags (every chunk's checksum verified); its figure
#   is the best steady epoch's delivered bytes/s (the samples' bytes).
# VARIANTS: more dlk runs, separated by ';', each "ENV=V ... -- FLAGS"
# (e.g. "DLK_S3_IO_THREADS=8 -- --workers 128"; "bin=PATH" runs another
# dlk binary, an older build for instance), printed below the default.
# DEVICE (default auto: cuda:0 when there is a GPU); KEEP a folder for the
# JSON reports.  DIST names a `make dist` folder to take bin/dlk,
# bin/s3_dir_server and bin/synth from (default: build/), or DLK, SRV and
# SYNTH name each.
set -eu
n=${1:-20000}
epochs=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pick() { # VAR NAME-IN-DIST BUILD-PATH
    if [ -n "${!1:-}" ]; then echo "${!1}"
    elif [ -n "${DIST:-}" ]; then echo "$DIST/bin/$2"
    else echo "$root/$3"; fi
}
DLK=$(pick DLK dlk build/dlk)
SRV=$(pick SRV s3_dir_server build/tests/s3_dir_server)
SYNTH=$(pick SYNTH synth build/tests/synth)
DELAYS=${DELAYS:-0 50 link:25:100}
. "$here/link.sh"
[ -z "${DIST:-}" ] || LINK_PROXY=${LINK_PROXY:-$DIST/bin/link_proxy}
DEVICE=${DEVICE:-auto}
REF_PROCS=${REF_PROCS:-64}
REF_ROUNDS=${REF_ROUNDS:-2}
VARIANTS=${VARIANTS:-}
command -v curl >/dev/null || { echo "s3_throughput: needs curl" >&2; exit 2; }
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-s3tp.XXXXXX")
trap 'serve_stop; rm -rf "$T"' EXIT

mkdir -p "$T/root/bench"
"$SYNTH" "$T/root/bench/ds" "$n" 224 224 >/dev/null
(cd "$T/root/bench" && find ds/chunks -type f) > "$T/keys"
nobj=$(wc -l < "$T/keys")
obytes=$(cd "$T/root/bench" && xargs -a "$T/keys" stat -c %s | awk '{s += $1} END {print s}')
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1); curl $(curl --version | head -n1 | cut -d' ' -f2)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -n1 | sed 's/^/gpu: /'
echo "data: $n samples u8 224x224x3 in $nobj chunk objects ($((obytes >> 20)) MiB), served by s3_dir_server on loopback"

now() { date +%s.%N; }

reference() { # ENDPOINT -> GB/s
    local s e
    s=$(now)
    for _ in $(seq "$REF_ROUNDS"); do
        sed "s|^|$1/bench/|" "$T/keys" |
            xargs -P "$REF_PROCS" -n 1 curl -sf -o /dev/null
    done
    e=$(now)
    echo "$obytes $REF_ROUNDS $s $e" | awk '{printf "%.2f", $1 * $2 / ($4 - $3) / 1e9}'
}

stream() { # LABEL ENV... -- FLAGS...
    local label=$1; shift
    local envs=() bin=$DLK
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case $1 in bin=*) bin=${1#bin=} ;; *) envs+=("$1") ;; esac
        shift
    done
    [ $# -gt 0 ] && shift
    local out=$T/run.json
    local t0 t1
    t0=$(now)
    env "${envs[@]}" "$bin" bench-stream s3://bench/ds --device "$DEVICE" \
        --epochs "$epochs" --json "$@" > "$out"
    t1=$(now)
    [ -z "${KEEP:-}" ] || cp "$out" "$KEEP/$(echo "$label" | tr -c 'A-Za-z0-9\n' _).json"
    python3 - "$out" "$label" "$ref" "$t0" "$t1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
label, ref = sys.argv[2], float(sys.argv[3])
ep = d["epochs"]
steady = max(e["bytes_per_s"] for e in (ep[1:] or ep)) / 1e9
reqs = ep[-1]["requests"]
print("  %-44s %6.2f GB/s steady (%3.0f%% of the reference), epochs %s GB/s, first batch %.3f s, %d requests an epoch, checksums %s"
      % (label, steady, 100 * steady / ref if ref else 0,
         "/".join("%.2f" % (e["bytes_per_s"] / 1e9) for e in ep),
         d["first_batch_s"], reqs, "ok" if d["checksum_ok"] is True else "BAD"))
PY
}

for delay in $DELAYS; do
    serve "$delay" "$SRV" "$T/root"
    ep=$AWS_ENDPOINT_URL
    ref=$(reference "$ep")
    echo "$(serve_label "$delay"): reference ($REF_PROCS curl processes, whole objects) $ref GB/s"
    stream "dlk, default flags" --
    IFS=';' read -r -a vs <<< "$VARIANTS"
    for v in "${vs[@]}"; do
        [ -n "${v// }" ] || continue
        read -r -a words <<< "$v"
        case " ${words[*]} " in *" -- "*) ;; *) words+=(--) ;; esac
        stream "dlk, $v" "${words[@]}"
    done
done
