#!/usr/bin/env bash
# t392-s3-stream.sh - dlk bench-stream straight from S3 (moto) through
# tests/faultproxy.py failing 10% of requests (500, 503 SlowDown, resets
# mid-body, truncated bodies): every sample arrives once, the checksums
# of what was streamed match, and the proxy did break requests.  A batch
# size that does not divide 1500 pads the last batch: "samples" counts
# the 1500, "batches" the padded one too.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

if ! have_numpy; then
    skip "bench-stream over S3 with faults" "no numpy"
    exit 0
fi
s3_start
s3_mkbucket dlk-t392
python3 - "$T/src" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(392)
for i in range(1500):
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            rng.integers(0, 255, size=(24, 24, 3), dtype=np.uint8))
    np.save(os.path.join(sys.argv[1], "%05d.labels.npy" % i),
            np.int32(i % 10))
PY
ds=s3://dlk-t392/ds
ok "create" dlk create "$ds" --tensor images:u8:24x24x3 \
    --tensor labels:i32 --chunk-size 64K
ok "ingest 1500 samples" dlk ingest "$ds" from-dir "$T/src" -q

s3_proxy_start --delay-ms 2 --rate-500 0.03 --rate-503 0.03 \
    --rate-reset 0.02 --rate-truncate 0.02 --seed 392
px=http://127.0.0.1:$S3_PROXY_PORT

stream() { # NAME ARGS...
    local name=$1; shift
    ok "$name" env AWS_ENDPOINT_URL="$px" \
        "$DLK" bench-stream "$ds" --device cpu --json "$@"
    check "$name: checksum_ok" python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["checksum_ok"] is True else 1)' "$OUT"
    check "$name: 1500 samples" python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["samples"] == 1500 else 1)' "$OUT"
}
stream "bench-stream in order" --batch-size 100 --workers 8
stream "bench-stream shuffled" --batch-size 60 --workers 16 --shuffle \
    --window 4 --seed 7
stream "bench-stream, last batch padded" --batch-size 64 --workers 4 --shuffle
check "24 batches of 64 (the last padded), 1500 samples counted" python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["batches"] == 24 and r["samples"] == 1500 else 1)' "$OUT"
# each 64K chunk read as ranges of 16K in parallel, through the same faults
DLK_S3_READ_PART_SIZE=16384 stream "bench-stream, chunks read in ranges" \
    --batch-size 100 --workers 8 --shuffle
check "ranged: four GETs or more a chunk" python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
e = r["epochs"][0]
sys.exit(0 if e["requests"] >= 4 * e["bytes_read"] // 65536 else 1)' "$OUT"
for kind in 500 503 reset truncate; do
    n=$(grep -c "^fault $kind " "$S3_PROXY_LOG")
    check "the proxy injected $kind faults ($n)" test "$n" -gt 0
done
n=$(grep -cE '^fault [0-9a-z]+ GET /dlk-t392/ds/chunks/' "$S3_PROXY_LOG")
check "chunk GETs were among the broken ($n)" test "$n" -gt 0
