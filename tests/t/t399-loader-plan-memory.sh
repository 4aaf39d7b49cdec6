#!/usr/bin/env bash
# t399-loader-plan-memory.sh - the loader's plan follows the chunks, not
# the rows: on datasets of tiny rows (a 16-byte vector and an i32 label)
# of 1 M and 3 M rows, streamed shuffled for two epochs (the second
# planned while the first ends), what bench-stream holds beyond its chunk
# buffers grows by a few bytes a row (the label mix's class per row), not
# by the tens a row a plan of every position costs (on one rank and on
# rank 1 of 4), every rank reading its share of the rows each epoch.
# Without --check (its folds are kept for up to 64 MiB, which 3 M rows
# of two tensors fill).
. "$DLK_TESTS/lib.sh"

synth=$DLK_BUILD/tests/synth
if [ ! -x "$synth" ]; then
    skip "loader plan memory" "no $synth (make unit builds it)"
    exit 0
fi
if [ "${SAN:-}" = 1 ]; then
    skip "loader plan memory" "ASan's shadow memory and quarantine"
    exit 0
fi
ok "a dataset of 1 M tiny rows" "$synth" "$T/d1" 1000000 1 16 vec
ok "a dataset of 3 M tiny rows" "$synth" "$T/d3" 3000000 1 16 vec

# stream DATASET NAME ARGS...: bench-stream's JSON report into $T/NAME.json
stream() {
    local ds=$1 name=$2; shift 2
    ok "$name" sh -c '"$@" > "$0"' "$T/$name.json" \
        "$DLK" bench-stream "$ds" --device cpu --shuffle --epochs 2 \
        --memory 32M --no-check --json "$@"
}
for w in "1 0" "4 1"; do
    set -- $w
    stream "$T/d1" "d1-w$1" --world "$1" --rank "$2"
    stream "$T/d3" "d3-w$1" --world "$1" --rank "$2"
    for n in 1 3; do
        check "d$n, rank $2 of $1: its share of the rows, twice" python3 -c '
import json, sys
d, rows, world = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
sys.exit(d["samples"] != 2 * (rows // world))' "$T/d$n-w$1.json" "${n}000000" "$1"
    done
    # 2 M more rows: under 8 bytes a row more beyond the chunk buffers
    # (a plan of every position: 17 bytes a position of each epoch's
    # plan, and the sample list, 9 bytes a row, on every rank)
    check "rank $2 of $1: memory beyond the buffers grows under 8 bytes a row" \
        python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
over = lambda d: d["peak_rss_bytes"] - d["peak_buffer_bytes"]
per_row = (over(b) - over(a)) / 2e6
print("bytes a row beyond the buffers: %.1f" % per_row)
sys.exit(per_row >= 8)' "$T/d1-w$1.json" "$T/d3-w$1.json"
done
