#!/usr/bin/env bash
# t342-gcs-store.sh - the GCS store against fake-gcs-server: the store's
# unit test (create-only and replace by generation, range reads, a
# resumable upload in pieces), then the same through tests/faultproxy.py
# failing 10% of requests (500, 503, resets mid-body, truncated bodies),
# through one that cuts every body short (a network error, never the
# cut bytes as the object), and through one that drops Range (a ranged
# read says the server does not serve ranges);
# and through the CLI: chunks larger than the resumable threshold, gc,
# and bench-stream over gs:// with faults.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/gcslib.sh"
gcs_need "gcs store"
bin=$DLK_BUILD/tests/test_gcs_store
if [ ! -x "$bin" ]; then
    echo "not ok - $bin is not built (make unit)"
    exit 1
fi
gcs_start
gcs_mkbucket dlk-t342

unit_tap emulator "$bin" DLK_TEST_GCS_URL=gs://dlk-t342/unit

gcs_proxy_start --delay-ms 2 --rate-500 0.03 --rate-503 0.03 \
    --rate-reset 0.02 --rate-truncate 0.02 --seed 342
px=http://127.0.0.1:$GCS_PROXY_PORT
unit_tap faults "$bin" DLK_TEST_GCS_URL=gs://dlk-t342/faults DLK_TEST_GCS_FAULTS=200 \
    GCS_ENDPOINT="$px"
for kind in 500 503 reset truncate; do
    n=$(grep -c "^fault $kind " "$GCS_PROXY_LOG")
    check "the proxy injected $kind faults ($n)" test "$n" -gt 0
done
gcs_proxy_start --rate-truncate 1 --seed 3421
unit_tap "cut short" "$bin" DLK_TEST_GCS_URL=gs://dlk-t342/cut \
    DLK_TEST_GCS_CUT="http://127.0.0.1:$GCS_PROXY_PORT"
gcs_proxy_start --drop-range
unit_tap "no ranges" "$bin" DLK_TEST_GCS_URL=gs://dlk-t342/norange \
    DLK_TEST_GCS_NORANGE="http://127.0.0.1:$GCS_PROXY_PORT"

if ! have_numpy; then
    skip "gs:// datasets through the CLI" "numpy missing: python3 -m pip install numpy"
    exit 0
fi
python3 - "$T/src" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(342)
for i in range(600):
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8))
    np.save(os.path.join(sys.argv[1], "%05d.labels.npy" % i),
            np.int32(i % 10))
PY
ds=gs://dlk-t342/ds
ok "create" dlk create "$ds" --tensor images:u8:32x32x3 --tensor labels:i32 \
    --chunk-size 1M
# chunks of ~1 MiB over a 512 KiB threshold: resumable uploads in pieces
ok "ingest 600 samples, chunks by resumable upload" env \
    DLK_GCS_RESUMABLE_THRESHOLD=524288 DLK_GCS_PIECE_SIZE=262144 \
    "$DLK" ingest "$ds" from-dir "$T/src" -q
ok "verify --deep" dlk verify "$ds" --deep
ok "commit" dlk commit "$ds" -m one
fails "a piece size not a multiple of 256 KiB (exit 3)" 3 env DLK_GCS_PIECE_SIZE=300000 "$DLK" ls "$ds"
check "says so" grep -q "gcs_piece_size must be a multiple of 256 KiB" "$ERR"
fails "DLK_GCS_PIECE_SIZE under 256 KiB (exit 3)" 3 env DLK_GCS_PIECE_SIZE=1000 "$DLK" ls "$ds"
check "names the variable" grep -q "DLK_GCS_PIECE_SIZE must be an integer" "$ERR"
ok "ls --json" dlk ls "$ds" --json
check "600 samples in chunks over 512 KiB" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
assert t["images"]["samples"]==600, t["images"]
assert t["images"]["stored_bytes"] / t["images"]["chunks"] > 512*1024, t["images"]' "$OUT"

stream() { # NAME ENDPOINT EPOCHS ARGS...
    local name=$1 ep=$2 epochs=$3; shift 3
    ok "$name" env STORAGE_EMULATOR_HOST="$ep" \
        "$DLK" bench-stream "$ds" --device cpu --json --epochs "$epochs" "$@"
    check "$name: checksum_ok, 600 samples an epoch" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["checksum_ok"] is True, d
assert d["samples"] == 600 * int(sys.argv[2]), d["samples"]' "$OUT" "$epochs"
}
stream "bench-stream over gs://" "$GCS_ENDPOINT" 2 --batch-size 50
stream "bench-stream over gs:// through faults" "$px" 2 --shuffle --batch-size 50 --workers 3

# ingest and commit through the faults: conditional writes whose answers
# are lost are retried; the result equals the same done without faults
python3 - "$T/more" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
for i in range(600, 800):
    np.save(os.path.join(sys.argv[1], "%05d.labels.npy" % i), np.int32(i % 10))
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            np.full((32, 32, 3), i % 256, np.uint8))
PY
ok "ingest 200 more through faults" env STORAGE_EMULATOR_HOST="$px" \
    "$DLK" ingest "$ds" from-dir "$T/more" -q
ok "commit through faults" env STORAGE_EMULATOR_HOST="$px" \
    "$DLK" commit "$ds" -m two
ok "log" dlk log "$ds" --json
check "two commits, 800 samples on main" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert len(d)==2 and d[0]["samples"]["labels"]==800, d' "$OUT"
ok "verify --all --deep" dlk verify "$ds" --all --deep

# a second ingest replaces the head; gc removes what no commit holds
ok "ingest more" dlk ingest "$ds" from-dir "$T/src" -q
ok "gc --dry-run" dlk gc "$ds" --dry-run --grace 0
ok "gc" dlk gc "$ds" --grace 0
ok "verify --all --deep after gc" dlk verify "$ds" --all --deep
