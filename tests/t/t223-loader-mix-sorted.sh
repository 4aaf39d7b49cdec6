#!/usr/bin/env bash
# A dataset stored sorted by class still trains like a random permutation
# with the loader's shuffle: chunks whose parts carry checksums are read
# in spans of parts, so a shuffle window holds parts of many chunks, drawn
# evenly from the whole dataset.  Label-mix ratio (1.0 = a random
# permutation) at most 2 on 1, 2 and 4 ranks and every epoch, where the
# same window of whole chunks (--whole-chunks) mixes worse than 2; the
# rows of every epoch are each read once, the order is reproducible from
# the seed and differs between epochs; a corrupt part is caught by its
# checksum, naming the chunk and the part.  The same from S3 (moto), where
# a chunk's header comes in the round trip of its first span.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
. "$DLK_TESTS/mixlib.sh"
mix_need "label mix of a class-sorted dataset"

# 10 classes of 600 8x8 JPEGs, stored 16x16 (768 bytes a row): 64K
# chunks of 85 rows in 16 parts of 4K, as 224x224 images are in 16 MiB
# chunks of 1 MiB parts (a span of 4 parts: 21 rows)
S=$T/train
mix_tree "$S" 10 600 11

ok "create, sorted by class, 4K parts" dlk create "$T/ds" from-dir "$S" --resize 16x16 --chunk-size 64K --part-size 4K --order sorted --json
check "the images tensor has 4K parts" sh -c '"$DLK" ls "$0" --json | python3 -c "
import json, sys; t = [x for x in json.load(sys.stdin)[\"tensors\"] if x[\"name\"] == \"images\"][0]
assert t[\"part_bytes\"] == 4096 and t[\"chunks\"] >= 8, t"' "$T/ds"

ok "whole chunks, a window of 4" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --window 4 --whole-chunks --json
check "... mix worse than 2 (a window holds a class or two)" python3 -c '
import json, sys; r = json.load(open(sys.argv[1]))["label_mix"]["ratio"]; assert r > 2, r' "$OUT"
for w in 1 2 4; do
    for ((r = 0; r < w; r++)); do
        ok "spans of parts, a window of 4 chunks' worth: rank $r of $w" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 3 --shuffle --window 4 --rank $r --world $w --json
        check "... label mix at most 2 in every epoch" below 2.0 $(mix "$OUT")
    done
done
ok "the default window" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --json
check "... label mix at most 1.5 in every epoch" below 1.5 $(mix "$OUT")
check "... the batches' bytes match their samples' folds" grep -q '"checksum_ok": true' "$OUT"
cp "$OUT" "$T/spans.json"
ok "the same, whole chunks" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --whole-chunks --json
check "... every chunk verified once either way" python3 -c '
import json, sys
a, b = (json.load(open(f))["chunks_verified"] for f in sys.argv[1:])
assert a == b > 0, (a, b)' "$T/spans.json" "$OUT"

ok "--order-out, 2 epochs, seed 3" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --window 4 --seed 3 --order-out "$T/o1" --json
cp "$OUT" "$T/o1.json"
check "each epoch every row once; the epochs differ" python3 -c '
import json, sys
d = json.load(open(sys.argv[2])); lines = open(sys.argv[1]).read().splitlines()
per = d["batches"] // 2
ep = [sum((list(map(int, l.split())) for l in lines[k*per:(k+1)*per]), []) for k in range(2)]
for e in ep:
    assert sorted(e) == list(range(6000)), (len(e), len(set(e)))
assert ep[0] != ep[1]' "$T/o1" "$T/o1.json"
ok "the same seed again" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --window 4 --seed 3 --order-out "$T/o2"
check "... the same order" cmp "$T/o1" "$T/o2"
# from S3: spans as ranged GETs, the header with the first
s3_start
s3_mkbucket lake
ok "create the same in S3" dlk create s3://lake/ds from-dir "$S" --resize 16x16 --chunk-size 64K --part-size 4K --order sorted --quiet
ok "stream it from S3, a window of 4" dlk bench-stream s3://lake/ds --device cpu --batch-size 32 --epochs 2 --shuffle --window 4 --json
check "... label mix at most 2 in every epoch" below 2.0 $(mix "$OUT")
check "... checksums equal, every chunk verified" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["checksum_ok"] is True and d["chunks_verified"] > 0, d["chunks_verified"]' "$OUT"
ok "the same rows in the same order as from the directory" sh -c '
"$DLK" bench-stream "$0/ds" --device cpu --batch-size 32 --shuffle --window 4 --seed 5 --order-out "$0/od" >/dev/null &&
"$DLK" bench-stream s3://lake/ds --device cpu --batch-size 32 --shuffle --window 4 --seed 5 --order-out "$0/os" >/dev/null &&
cmp "$0/od" "$0/os"' "$T"

# one flipped byte in the payload of a chunk of images: the span holding
# it fails its part's checksum
ok "corrupt one payload byte" python3 - "$T/ds" <<'PY'
import glob, os, sys
f = sorted(glob.glob(os.path.join(sys.argv[1], "chunks/images/*")))[0]
os.chmod(f, 0o644)
b = bytearray(open(f, "rb").read())
b[-100] ^= 0xff
open(f, "wb").write(b)
PY
fails "bench-stream reads it" 3 dlk bench-stream "$T/ds" --device cpu --batch-size 32 --shuffle
check "... naming the chunk and the part" grep -q "chunks/images/.*part" "$ERR"
