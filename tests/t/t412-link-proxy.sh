#!/usr/bin/env bash
# tests/bench/link_proxy (the link the S3 benchmarks run through: a delay
# each way, a rate cap a connection) and tests/bench/link.sh's serve:
# objects pass through whole; the first byte comes no sooner than the
# handshake's and the request's round trips; one connection is no faster
# than its cap while several together are; and dlk streams a dataset
# through it with the checksums and samples of a direct read.
. "$DLK_TESTS/lib.sh"
srv_bin=$DLK_BUILD/tests/s3_dir_server
proxy=$DLK_BUILD/tests/link_proxy
for b in "$srv_bin" "$proxy"; do
    if [ ! -x "$b" ]; then
        echo "not ok - $b is not built (make unit)"
        exit 1
    fi
done
command -v curl >/dev/null || { skip "link proxy" "curl missing"; exit 0; }

R=$T/root
mkdir -p "$R/b"
head -c 8000000 /dev/urandom > "$R/b/obj"
mkdir -p "$R/bench"
ok "a dataset" "$DLK_BUILD/tests/synth" "$R/bench/ds" 300 32 32
. "$DLK_TESTS/../tests/bench/link.sh"
at_exit serve_stop
serve link:20:20 "$srv_bin" "$R"
check "served through the link" test -n "$AWS_ENDPOINT_URL"
curl -s -o "$T/got" -w '%{time_starttransfer} %{time_total}\n' \
    "$AWS_ENDPOINT_URL/b/obj" > "$T/times"
check "an object passes whole" cmp "$T/got" "$R/b/obj"
read -r first total < "$T/times"
# handshake (2 x 20 ms) and request + answer (2 x 20 ms)
check "first byte after the round trips: $first s >= 0.08 s" \
    awk -v f="$first" 'BEGIN {exit !(f >= 0.079)}'
# 8 MB at 20 MB/s
check "one connection at its cap: $total s >= 0.4 s" \
    awk -v t="$total" 'BEGIN {exit !(t >= 0.4)}'
t0=$(date +%s.%N)
cs=()
for i in 1 2 3 4; do
    curl -s -o "$T/got$i" "$AWS_ENDPOINT_URL/b/obj" &
    cs+=($!)
done
wait "${cs[@]}"
t1=$(date +%s.%N)
same=1
for i in 1 2 3 4; do cmp -s "$T/got$i" "$R/b/obj" || same=0; done
check "four connections at once: each object whole" test "$same" = 1
check "... and each capped apart (together no slower than 4 x 0.4 s)" \
    awk -v a="$t0" -v b="$t1" 'BEGIN {exit !(b - a < 1.6)}'

# a dataset streamed through the link and directly: the same samples
run_stream() { # LABEL -> $T/LABEL.json
    "$DLK" bench-stream s3://bench/ds --device cpu --epochs 1 --batch-size 50 \
        --order-out "$T/$1.order" --json > "$T/$1.json"
}
ok "bench-stream through the link" run_stream link
check "... checksums ok" grep -q '"checksum_ok": true' "$T/link.json"
serve 0 "$srv_bin" "$R"
ok "bench-stream direct" run_stream direct
check "... the same samples in the same order" cmp "$T/link.order" "$T/direct.order"
check "... as many, each batch's checksum equal to the CPU's" python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(a["samples"] != b["samples"] or a["samples"] != 300 or
         a["checksum_ok"] is not True or b["checksum_ok"] is not True)' \
    "$T/link.json" "$T/direct.json"
