#!/usr/bin/env bash
# t398-loader-verify-once.sh - the loader checks each chunk's stored
# checksum at its first load and not in later epochs (chunks_verified in
# bench-stream's report: one a chunk over three epochs), still catches a
# damaged chunk in the first epoch, and with --no-verify checks none.
# A first read in pieces of whole samples still catches a damaged byte
# inside a part, naming the part; the loading threads' default is this
# process's share of the cores among the ranks of its host.  On a GPU
# the parts are checked on the device after their copy: the same counts,
# and the same damage caught and named.
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

cp -r "$ds" "$T/gds" # for the GPU, undamaged
# flip the last byte (payload) of a chunk
flip_last_byte() {
python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-1] ^= 0xFF
open(p, "wb").write(bytes(b))
PY
}
victim=$(find "$ds/chunks/images" -type f | sort | head -n 1)
flip_last_byte "$victim"
fails "a damaged chunk stops the first epoch" 3 dlk bench-stream "$ds" \
    --device cpu --epochs 3
check "the message names the chunk" grep -q "$(basename "$victim")" "$ERR"

# parts of many pieces: a first read goes in pieces of whole samples of
# up to 256 KiB, each part's checksum carried over its pieces; 12 KiB
# samples in 1 MiB parts
python3 - "$T/big" <<'PY'
import os, sys, numpy as np
os.makedirs(sys.argv[1])
rng = np.random.default_rng(3981)
for i in range(400):
    np.save(os.path.join(sys.argv[1], "%05d.images.npy" % i),
            rng.integers(0, 255, size=(64, 64, 3), dtype=np.uint8))
PY
ok "create, 1 MiB parts of 12 KiB samples" dlk create "$T/ds2" \
    --tensor images:u8:64x64x3 --chunk-size 4M --part-size 1M
ok "ingest 400 samples" dlk ingest "$T/ds2" from-dir "$T/big" -q
ok "three epochs over parts of many pieces" dlk bench-stream "$T/ds2" \
    --device cpu --epochs 3 --shuffle --json
check "every chunk verified once, the checksums equal" python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["chunks_verified"] >= 1 and r["checksum_ok"] is True else 1)' "$OUT"
# the loading threads' default is this process's share of the cores among
# the ranks on the host (LOCAL_WORLD_SIZE, as torchrun sets it)
cores=$(nproc)
ok "default threads" dlk bench-stream "$T/ds2" --device cpu --json
want=$(( cores > 32 ? 32 : cores ))
check "one thread a core ($want)" python3 -c 'import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))["io_threads"] == int(sys.argv[2]) else 1)' "$OUT" "$want"
ok "two ranks on this host" env LOCAL_WORLD_SIZE=2 "$DLK" bench-stream "$T/ds2" \
    --device cpu --json
want=$(( cores / 2 > 32 ? 32 : cores / 2 < 1 ? 1 : cores / 2 ))
check "half the cores each ($want)" python3 -c 'import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))["io_threads"] == int(sys.argv[2]) else 1)' "$OUT" "$want"
fails "a bad LOCAL_WORLD_SIZE" 2 env LOCAL_WORLD_SIZE=two "$DLK" bench-stream \
    "$T/ds2" --device cpu
check "... is named" grep -q "LOCAL_WORLD_SIZE 'two'" "$ERR"

cp -r "$T/ds2" "$T/gds2"
victim=$(find "$T/ds2/chunks/images" -type f | sort | head -n 1)
# a byte in the middle of part 1 of 4, in neither its first nor its last
# piece: the payload ends the object, its samples 12 KiB each, part p
# starts at sample floor(p * samples / 4)
damage_part1() {
python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = len(b) // 12288
start = len(b) - n * 12288
b[start + (n // 4 + n // 8) * 12288 + 100] ^= 0xFF
open(p, "wb").write(bytes(b))
PY
}
damage_part1 "$victim"
fails "a damaged piece inside a part stops the first epoch" 3 \
    dlk bench-stream "$T/ds2" --device cpu --epochs 2
check "the message names the chunk and its part 1" \
    grep -q "$(basename "$victim").*part 1 of" "$ERR"

# On a GPU (found with --no-verify, so that what is tested here does not
# decide whether it runs): the parts checked on the device
if "$DLK" bench-stream "$T/gds" --device cuda:0 --no-verify --epochs 1 \
        >/dev/null 2>"$T/probe.err"; then
    ok "on cuda:0, three epochs" dlk bench-stream "$T/gds" --device cuda:0 \
        --epochs 3 --shuffle --json
    check "every chunk verified once, the checksums equal" python3 -c 'import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
sys.exit(0 if r["chunks_verified"] == n and r["checksum_ok"] is True else 1)' \
        "$OUT" "$nchunks"
    n2=$(find "$T/gds2/chunks" -type f | wc -l)
    ok "on cuda:0, parts of many pieces" dlk bench-stream "$T/gds2" \
        --device cuda:0 --epochs 3 --shuffle --json
    check "every chunk of them verified once, the checksums equal" python3 -c 'import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
sys.exit(0 if r["chunks_verified"] == n and r["checksum_ok"] is True else 1)' \
        "$OUT" "$n2"
    gv=$(find "$T/gds/chunks/images" -type f | sort | head -n 1)
    flip_last_byte "$gv"
    fails "on cuda:0, a damaged chunk stops the first epoch" 3 \
        dlk bench-stream "$T/gds" --device cuda:0 --epochs 3
    check "... naming the chunk" grep -q "$(basename "$gv")" "$ERR"
    gv=$(find "$T/gds2/chunks/images" -type f | sort | head -n 1)
    damage_part1 "$gv"
    fails "on cuda:0, a damaged byte inside a part" 3 \
        dlk bench-stream "$T/gds2" --device cuda:0 --epochs 2 --shuffle
    check "... naming the chunk and its part 1" \
        grep -q "$(basename "$gv").*part 1 of" "$ERR"
    fails "... and with --no-check" 3 \
        dlk bench-stream "$T/gds2" --device cuda:0 --epochs 2 --no-check
    check "... naming the chunk and its part 1" \
        grep -q "$(basename "$gv").*part 1 of" "$ERR"
else
    skip "the parts checked on a GPU" "no GPU here: $(tail -n 1 "$T/probe.err")"
fi
