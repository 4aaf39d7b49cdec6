#!/usr/bin/env bash
# t398-loader-verify-once.sh - the loader checks each chunk's stored
# checksum at its first load and not in later epochs (chunks_verified in
# bench-stream's report: one a chunk over three epochs), still catches a
# damaged chunk in the first epoch, and with --no-verify checks none.
. "$DLK_TESTS/lib.sh"

if ! have_numpy; then
    skip "verify once per loader" "no numpy"
    exit 0
fi
python3 - "$T/src" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(398)
for i in range(600):
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            rng.integers(0, 255, size=(16, 16, 3), dtype=np.uint8))
    np.save(os.path.join(sys.argv[1], "%05d.labels.npy" % i), np.int32(i % 7))
PY
ds=$T/ds
ok "create" dlk create "$ds" --tensor images:u8:16x16x3 --tensor labels:i32 \
    --chunk-size 16K
ok "ingest 600 samples" dlk ingest "$ds" from-dir "$T/src" -q
nchunks=$(find "$ds/chunks" -type f | wc -l)
check "several chunks ($nchunks)" test "$nchunks" -gt 8

ok "three epochs" dlk bench-stream "$ds" --device cpu --epochs 3 --shuffle --json
check "every chunk verified once, loaded in every epoch" python3 -c 'import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
sys.exit(0 if r["chunks_verified"] == n and r["chunks_loaded"] >= 3 * n
         and r["checksum_ok"] is True else 1)' "$OUT" "$nchunks"

ok "three epochs, --no-verify" dlk bench-stream "$ds" --device cpu --epochs 3 \
    --no-verify --json
check "no chunk verified with --no-verify" python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["chunks_verified"] == 0 and r["checksum_ok"] is True else 1)' "$OUT"

# flip the last byte (payload) of one chunk of images
victim=$(find "$ds/chunks/images" -type f | sort | head -n 1)
python3 - "$victim" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-1] ^= 0xFF
open(p, "wb").write(bytes(b))
PY
fails "a damaged chunk stops the first epoch" 3 dlk bench-stream "$ds" \
    --device cpu --epochs 3
check "the message names the chunk" grep -q "$(basename "$victim")" "$ERR"
