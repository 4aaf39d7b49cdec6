#!/usr/bin/env bash
# tests/bench/mix.sh [ROWS] [DEVICE] [EPOCHS] - what mixing costs:
# samples/s of one dataset of ROWS 112x112x3 images (default 100000,
# 3.8 GB) against the same bytes as two datasets of ROWS/2 mixed 1:1
# (--mix A=1,B=1), and as three (ROWS/2, ROWS/4, ROWS/4 mixed
# 0.5/0.25/0.25), in the same run: bench-stream --shuffle, no step,
# EPOCHS (default 6) from the page cache, on DEVICE (default auto), best
# of 3 alternating rounds of each, over the whole run and in the best
# epoch after the first; the mix's share of one dataset's rate is the
# figure (target >= 0.95).
#   DIST=dist tests/bench/mix.sh 100000 cuda:0
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/dist_bins.sh"
rows=${1:-100000}
device=${2:-auto}
epochs=${3:-6}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-mix.XXXXXX")
trap 'rm -rf "$T"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load $(cut -d' ' -f1-3 /proc/loadavg)"
"$SYNTH" "$T/one" "$rows" 112 112 >/dev/null
"$SYNTH" "$T/h1" $((rows / 2)) 112 112 >/dev/null
"$SYNTH" "$T/h2" $((rows / 2)) 112 112 >/dev/null
"$SYNTH" "$T/q1" $((rows / 4)) 112 112 >/dev/null
"$SYNTH" "$T/q2" $((rows / 4)) 112 112 >/dev/null
find "$T" -type f -exec cat {} + >/dev/null
echo "$rows rows of 112x112x3 u8 ($(du -sh "$T/one" | cut -f1)), device $device"
run() { # NAME ARGS...: samples/s
    local name=$1; shift
    "$DLK" bench-stream "$@" --device "$device" --shuffle --epochs "$epochs" \
        --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
steady = max(e["samples_per_s"] for e in d["epochs"][1:])
print("%.0f %.0f %.1f %s" % (d["samples_per_s"], steady, d["gpu_busy_pct"],
                             d["checksum_ok"]))'
}
declare -A best steady
for round in 1 2 3; do
    for c in one two three; do
        case $c in
        one) r=$(run one "$T/one") ;;
        two) r=$(run two --mix "$T/h1=1,$T/h2=1") ;;
        three) r=$(run three --mix "$T/h1=0.5,$T/q1=0.25,$T/q2=0.25") ;;
        esac
        set -- $r
        echo "  pass $round $c: $1 samples/s (steady $2), busy $3%, checksum $4"
        [ "$4" = True ] || { echo "checksum differs"; exit 1; }
        if [ -z "${best[$c]:-}" ] || [ "$1" -gt "${best[$c]}" ]; then
            best[$c]=$1
        fi
        if [ -z "${steady[$c]:-}" ] || [ "$2" -gt "${steady[$c]}" ]; then
            steady[$c]=$2
        fi
    done
done
for c in one two three; do
    printf '%-6s run %8s samples/s  %.3f of one dataset;  steady epoch %8s  %.3f\n' \
        "$c" "${best[$c]}" "$(echo "${best[$c]} ${best[one]}" | awk '{print $1 / $2}')" \
        "${steady[$c]}" "$(echo "${steady[$c]} ${steady[one]}" | awk '{print $1 / $2}')"
done
echo "target: a mix >= 0.95 of one dataset"
