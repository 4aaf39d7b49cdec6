#!/usr/bin/env bash
# t480-loader-mix.sh - bench-stream --mix: several datasets as one stream
# mixed by weight.  Two class-sorted datasets of 3000 and 1000 rows mixed
# 0.7/0.3 in batches of 32: every batch holds 22 or 23 rows of the first
# (its cumulative count within one of 0.7 x rows), each source's rows come
# once per source epoch (the smaller one repeats, each time in a new
# order), the epoch is the sources' rows summed (or --epoch-size), the
# order is reproducible from the seed, each source keeps its label mix,
# two ranks get equal batches and disjoint rows, the batches' bytes match
# their samples' folds, the run reads no more than its batches take (no
# source reads ahead past its end); the same mix read from S3 (moto)
# gives the same order; schemas or class names that differ, and bad
# weights, are refused naming what differs; a damaged part of a source
# fails the run naming the source, or with --on-bad skip has its rows
# replaced.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
. "$DLK_TESTS/mixlib.sh"
mix_need "mixing loader"

mix_tree "$T/sa" 10 300 11
mix_tree "$T/sb" 10 100 12
for s in a b; do
    ok "create $s, sorted by class, 4K parts" dlk create "$T/$s" from-dir "$T/s$s" --resize 16x16 --chunk-size 64K --part-size 4K --order sorted --json
done
M=(--device cpu --batch-size 32 --shuffle)

ok "mix 0.7/0.3, 3 epochs, order out" dlk bench-stream --mix "$T/a=0.7,$T/b=0.3" "${M[@]}" --epochs 3 --seed 3 --order-out "$T/o1" --json
cp "$OUT" "$T/o1.json"
check "an epoch is the sources' rows (4000: 125 batches), each rank's batches full" python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); assert d["batches"] == 375, d["batches"]
assert d["samples"] == 375 * 32, d["samples"]' "$T/o1.json"
check "each batch 22 or 23 rows of the first, cumulative within one of 0.7" python3 -c '
import sys
lines = open(sys.argv[1]).read().splitlines(); assert len(lines) == 375
k = 0
for n, l in enumerate(lines, 1):
    src = [int(t.split(":")[0]) for t in l.split()]
    assert len(src) == 32, len(src)
    c = src.count(0); assert c in (22, 23), (n, c)
    k += c; assert abs(k - 0.7 * 32 * n) <= 1, (n, k)' "$T/o1"
check "the rows of a source once per its epoch; the small one repeats in a new order" python3 -c '
import sys
rows = {0: [], 1: []}
for l in open(sys.argv[1]).read().splitlines():
    for t in l.split():
        s, r = t.split(":"); rows[int(s)].append(int(r))
a, b = rows[0], rows[1]
assert sorted(a[:3000]) == list(range(3000)), "source 0 epoch 0"
assert sorted(b[:1000]) == list(range(1000)) == sorted(b[1000:2000]), "source 1 epochs"
assert b[:1000] != b[1000:2000], "source 1 repeated in the same order"
assert b[:1000] != sorted(b[:1000]), "source 1 not shuffled"' "$T/o1"
check "... shares 0.7 and 0.3, each source's label mix at most 1.5, checksums equal" python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); s = d["sources"]
assert [round(x["share"], 2) for x in s] == [0.7, 0.3], s
for x in s:
    assert max(x["label_mix"]["per_epoch"]) <= 1.5, x
assert d["checksum_ok"] is True' "$T/o1.json"
check "... the text report names the sources" sh -c '"$1" bench-stream --mix "$2/a=0.7,$2/b=0.3" --device cpu --batch-size 32 | grep -q "source 1 .*weight 0.300"' sh "$DLK" "$T"

for s in a b; do
    ok "$s alone, one epoch" dlk bench-stream "$T/$s" "${M[@]}" --epochs 1 --json
    cp "$OUT" "$T/${s}1.json"
done
check "... the mix's 3 epochs read at most 5% more than their rows (2.8 epochs of a, 3.6 of b): no source reads ahead past the run" python3 -c '
import json, sys
got = json.load(open(sys.argv[1]))["bytes_loaded"]
a, b = (json.load(open(f))["bytes_loaded"] for f in sys.argv[2:4])
rows = 2.8 * a + 3.6 * b
assert got <= 1.05 * rows, (got, rows)' "$T/o1.json" "$T/a1.json" "$T/b1.json"

ok "the same seed again" dlk bench-stream --mix "$T/a=0.7,$T/b=0.3" "${M[@]}" --epochs 3 --seed 3 --order-out "$T/o2"
check "... the same order" cmp "$T/o1" "$T/o2"
ok "another seed" dlk bench-stream --mix "$T/a=0.7,$T/b=0.3" "${M[@]}" --epochs 1 --seed 4 --order-out "$T/o3"
check "... another order" sh -c '! cmp -s "$1" "$2"' sh "$T/o3" <(head -n 125 "$T/o1")
ok "weights as counts (7 and 3), repeated --mix" dlk bench-stream --mix "$T/a=7" --mix "$T/b=3" "${M[@]}" --epochs 3 --seed 3 --order-out "$T/o4"
check "... the same order as 0.7/0.3" cmp "$T/o1" "$T/o4"

ok "unshuffled" dlk bench-stream --mix "$T/a=0.5,$T/b=0.5" --device cpu --batch-size 32 --order-out "$T/o5"
check "... each source in its rows' order, evenly interleaved" python3 -c '
import sys
rows = {0: [], 1: []}
for l in open(sys.argv[1]).read().splitlines():
    src = [int(t.split(":")[0]) for t in l.split()]
    assert src == [0, 1] * 16, src
    for t in l.split():
        s, r = t.split(":"); rows[int(s)].append(int(r))
assert rows[0] == list(range(2000)), rows[0][:5]
assert rows[1] == list(range(1000)) * 2' "$T/o5"

ok "--epoch-size 640" dlk bench-stream --mix "$T/a=0.7,$T/b=0.3" "${M[@]}" --epochs 2 --epoch-size 640 --json
check "... 20 batches an epoch" python3 -c '
import json, sys; d = json.load(open(sys.argv[1])); assert d["batches"] == 40, d["batches"]' "$OUT"

for r in 0 1; do
    ok "rank $r of 2" dlk bench-stream --mix "$T/a=0.7,$T/b=0.3" "${M[@]}" --seed 3 --rank $r --world 2 --order-out "$T/r$r" --json
    cp "$OUT" "$T/r$r.json"
done
check "equal batches on both ranks; together each row of the first source once" python3 -c '
import json, sys
d0, d1 = (json.load(open(f)) for f in sys.argv[3:5])
assert d0["batches"] == d1["batches"] == 63, (d0["batches"], d1["batches"])
rows = []
for f in sys.argv[1:3]:
    mine = [int(t.split(":")[1]) for l in open(f) for t in l.split() if t.startswith("0:")]
    rows.append(set(mine[:1400]))
assert not rows[0] & rows[1], "a row on both ranks"
assert len(rows[0] | rows[1]) == 2800' "$T/r0" "$T/r1" "$T/r0.json" "$T/r1.json"

# refused: what differs, named
mix_tree "$T/sc" 10 20 13
ok "create c at 8x8" dlk create "$T/c" from-dir "$T/sc" --resize 8x8 --json
fails "a source of another shape" 3 dlk bench-stream --mix "$T/a=1,$T/c=1" --device cpu
check "... names the tensor, both shapes and the source" sh -c 'grep -q "tensor .images. is u8 16x16x3 in .*/a. but u8 8x8x3 in .*/c. (source 1)" "$1"' sh "$ERR"
mkdir -p "$T/sd"
for k in 0 1 2; do cp -r "$T/sc/class0$k" "$T/sd/other$k"; done
ok "create d with other class names" dlk create "$T/d" from-dir "$T/sd" --resize 16x16 --json
fails "a source whose classes are named otherwise" 3 dlk bench-stream --mix "$T/a=1,$T/d=1" --device cpu
check "... names the class and both names" grep -q "class 0 is 'class00' in .* but 'other0' in" "$ERR"
fails "a negative weight" 2 dlk bench-stream --mix "$T/a=-1,$T/b=1" --device cpu
fails "no weight" 2 dlk bench-stream --mix "$T/a" --device cpu
check "... says URL=WEIGHT" grep -q "is not URL=WEIGHT" "$ERR"
fails "every weight 0" 3 dlk bench-stream --mix "$T/a=0,$T/b=0" --device cpu
check "... says so" grep -q "every weight is 0" "$ERR"
fails "--mix beside a DATASET" 2 dlk bench-stream "$T/a" --mix "$T/b=1" --device cpu
fails "--epoch-size without --mix" 2 dlk bench-stream "$T/a" --epoch-size 10 --device cpu
fails "a missing source" 3 dlk bench-stream --mix "$T/a=1,$T/nope=1" --device cpu
check "... names it" grep -q "nope" "$ERR"

# a source with a damaged part: fails naming the source; with skip, its
# rows are replaced and counted, the batches still full
. "$DLK_TESTS/badlib.sh"
bad_dataset 320 480
fails "a damaged part of a source fails the mix" 3 dlk bench-stream --mix "$T/ds=1,$T/clean=1" --device cpu --batch-size 16 --epochs 2
check "... naming the source and the chunk" grep -q "source 0 (.*/ds.*$KEY" "$ERR"
ok "... with --on-bad skip" dlk bench-stream --mix "$T/ds=1,$T/clean=1" --device cpu --batch-size 16 --epochs 2 --on-bad skip --order-out "$T/ob" --json
check "... the part's rows replaced, counted, in no batch of source 0; batches full" python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); s = int(sys.argv[3])
assert d["reads_bad"] >= 1 and d["rows_replaced"] > 0, d
bad = set(range(s + s // 8, s + 2 * s // 8))
for l in open(sys.argv[2]):
    t = l.split(); assert len(t) == 16, len(t)
    got = {int(x.split(":")[1]) for x in t if x.startswith("0:")}
    assert not got & bad, sorted(got & bad)' "$OUT" "$T/ob" "$SAMPLES"

# from S3: the same mix, the same order
s3_start
s3_mkbucket lake
S3=s3://lake/mix
for s in a b; do
    ok "create $s on S3" dlk create "$S3/$s" from-dir "$T/s$s" --resize 16x16 --chunk-size 64K --part-size 4K --order sorted --json
done
ok "the mix from S3" dlk bench-stream --mix "$S3/a=0.7,$S3/b=0.3" "${M[@]}" --epochs 3 --seed 3 --order-out "$T/o6" --json
check "... the same order as the local mix" cmp "$T/o1" "$T/o6"
check "... checksums equal" grep -q '"checksum_ok": true' "$OUT"
