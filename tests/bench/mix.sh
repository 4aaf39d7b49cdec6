#!/usr/bin/env bash
# tests/bench/mix.sh [ROWS] [DEVICE] [EPOCHS] - what mixing costs:
# samples/s of one dataset of ROWS 112x112x3 images (default 100000,
# 3.8 GB) against the same bytes as two datasets of ROWS/2 mixed 1:1
# (--mix A=1,B=1), and as three (ROWS/2, ROWS/4, ROWS/4 mixed
# 0.5/0.25/0.25), in the same run: bench-stream --shuffle, no step,
# EPOCHS (default 6) from the page cache, on DEVICE (default auto), best
# of 3 alternating rounds of each, over the whole run and in the best
# epoch after the first; the mix's share of one dataset's rate is the
# figure (target >= 0.95), also as the median (and range) over the rounds
# of each round's mix against that round's one dataset.  ROUNDS: the
# rounds (default 3).  OLD, a dlk binary of another build: its
# passes alternate with this build's in each round, on the same data,
# each build's mix against its own one dataset.
#   DIST=dist tests/bench/mix.sh 100000 cuda:0
#   DIST=dist OLD=dist-old/bin/dlk tests/bench/mix.sh 400000 cuda:0 6
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
OLD=${OLD:-}
builds=new
[ -z "$OLD" ] || { builds="new old"; echo "new: $DLK; old: $OLD"; }
run() { # BIN ARGS...: samples/s
    local bin=$1; shift
    "$bin" bench-stream "$@" --device "$device" --shuffle --epochs "$epochs" \
        --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
steady = max(e["samples_per_s"] for e in d["epochs"][1:])
print("%.0f %.0f %.1f %s %.2f %.0f" % (d["samples_per_s"], steady,
      d["gpu_busy_pct"], d["checksum_ok"], d["epochs"][0]["seconds"],
      d["peak_buffer_bytes"] / 1e6))'
}
declare -A best steady runs
for round in $(seq "${ROUNDS:-3}"); do
    for b in $builds; do
        bin=$DLK
        [ "$b" = new ] || bin=$OLD
        for c in one two three; do
            case $c in
            one) r=$(run "$bin" "$T/one") ;;
            two) r=$(run "$bin" --mix "$T/h1=1,$T/h2=1") ;;
            three) r=$(run "$bin" --mix "$T/h1=0.5,$T/q1=0.25,$T/q2=0.25") ;;
            esac
            set -- $r
            echo "  pass $round $b $c: $1 samples/s (steady $2), busy $3%," \
                "checksum $4, first epoch $5 s, buffers $6 MB"
            [ "$4" = True ] || { echo "checksum differs"; exit 1; }
            k=$b:$c
            runs[$k]="${runs[$k]:-} $1"
            if [ -z "${best[$k]:-}" ] || [ "$1" -gt "${best[$k]}" ]; then
                best[$k]=$1
            fi
            if [ -z "${steady[$k]:-}" ] || [ "$2" -gt "${steady[$k]}" ]; then
                steady[$k]=$2
            fi
        done
    done
done
for b in $builds; do
    for c in one two three; do
        k=$b:$c o=$b:one
        printf '%-3s %-6s run %8s samples/s  %.3f of one dataset;  steady epoch %8s  %.3f\n' \
            "$b" "$c" "${best[$k]}" \
            "$(echo "${best[$k]} ${best[$o]}" | awk '{print $1 / $2}')" \
            "${steady[$k]}" \
            "$(echo "${steady[$k]} ${steady[$o]}" | awk '{print $1 / $2}')"
    done
done
for b in $builds; do
    for c in two three; do
        python3 -c 'import statistics, sys
m, o = [float(x) for x in sys.argv[3].split()], [float(x) for x in sys.argv[4].split()]
r = sorted(a / b for a, b in zip(m, o))
print("%-3s %-6s each round against its one dataset: median %.3f (%.3f-%.3f, %d rounds)" %
      (sys.argv[1], sys.argv[2], statistics.median(r), r[0], r[-1], len(r)))' \
            "$b" "$c" "${runs[$b:$c]}" "${runs[$b:one]}"
    done
done
echo "target: a mix >= 0.95 of one dataset"
