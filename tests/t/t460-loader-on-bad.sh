#!/usr/bin/env bash
# t460-loader-on-bad.sh - bench-stream --on-bad: one damaged part of a
# chunk fails the run by default (and with --on-bad fail); with skip the
# run completes with the batches and samples of a clean run, no row of
# the part that failed its checksum in any batch (the other parts of its
# span all there), a warning naming the chunk, the part and its rows,
# and the replacements counted in --json;
# the same batches twice; past --max-bad it fails as without skip.  In
# dataset order a whole batch falls in the damaged part (its rows come
# from the next readable position); over two ranks each rank keeps its
# batch count; whole chunks lose the whole chunk's rows; a missing chunk
# is skipped too.  From S3 and on a GPU, the same batches.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "on-bad" "numpy missing: python3 -m pip install numpy"; exit 0; }

. "$DLK_TESTS/badlib.sh"
bad_dataset 640 460
ds=$T/ds

ok "a clean run" dlk bench-stream "$T/clean" --device cpu --batch-size 32 \
    --shuffle --seed 3 --json --order-out "$T/clean.order"
cp "$OUT" "$T/clean.json"
fails "a damaged part fails the run by default" 3 dlk bench-stream "$ds" \
    --device cpu --batch-size 32 --shuffle --seed 3
check "naming the chunk and part 1" grep -q "$KEY.*part 1" "$ERR"
fails "and with --on-bad fail" 3 dlk bench-stream "$ds" --device cpu \
    --batch-size 32 --shuffle --seed 3 --on-bad fail
fails "--on-bad takes fail or skip" 2 dlk bench-stream "$ds" --on-bad maybe

ok "--on-bad skip completes" dlk bench-stream "$ds" --device cpu \
    --batch-size 32 --shuffle --seed 3 --json --on-bad skip \
    --order-out "$T/skip.order"
cp "$OUT" "$T/skip.json"
check "a warning names the chunk, part 1 and its rows" \
    grep -q "warning: epoch 0: rows [0-9]*-[0-9]* of 'chunks/images/$KEY' part 1 replaced: .*part 1" "$ERR"
check "one warning" test "$(grep -c warning "$ERR")" = 1
read -r LO HI < <(sed -n "s/.*rows \([0-9]*\)-\([0-9]*\) of.*/\1 \2/p" "$ERR")
check "the rows named are those of part 1 ($LO-$HI)" \
    test "$((HI - LO + 1))" = "$PART_ROWS"
check "as many batches and samples as the clean run, the checksum ok" \
    python3 -c 'import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert a["batches"] == b["batches"] and a["samples"] == b["samples"], (a["batches"], b["batches"])
assert b["checksum_ok"] is True
assert b["reads_bad"] == 1 and a["reads_bad"] == 0, b["reads_bad"]
assert b["rows_replaced"] == int(sys.argv[3]), b["rows_replaced"]
assert a["rows_replaced"] == 0' "$T/clean.json" "$T/skip.json" "$((HI - LO + 1))"
check "no row of the damaged part in any batch; the others all there" \
    python3 -c 'import sys
lo, hi = int(sys.argv[3]), int(sys.argv[4])
clean = [l.split() for l in open(sys.argv[1])]
skip = [l.split() for l in open(sys.argv[2])]
assert len(clean) == len(skip), (len(clean), len(skip))
assert [len(x) for x in clean] == [len(x) for x in skip]
rows = {int(r) for l in skip for r in l}
assert not any(lo <= r <= hi for r in rows), sorted(r for r in rows if lo <= r <= hi)
assert rows == set(range(640)) - set(range(lo, hi + 1)), len(rows)
# every position outside the damaged rows is as in the clean run
for a, b in zip(clean, skip):
    for x, y in zip(a, b):
        if not lo <= int(x) <= hi:
            assert x == y, (x, y)' "$T/clean.order" "$T/skip.order" "$LO" "$HI"

ok "again" dlk bench-stream "$ds" --device cpu --batch-size 32 --shuffle \
    --seed 3 --on-bad skip --order-out "$T/skip2.order"
check "the same batches" cmp "$T/skip.order" "$T/skip2.order"
check "the text report counts them" \
    grep -q "unreadable (--on-bad skip): 1 failed read, $((HI - LO + 1)) batch positions given other rows" "$OUT"

ok "two epochs: the read fails, and is told, in each" dlk bench-stream "$ds" \
    --device cpu --batch-size 32 --shuffle --epochs 2 --on-bad skip --json
check "two warnings, epochs 0 and 1" sh -c 'grep -q "epoch 0:" "$1" &&
    grep -q "epoch 1:" "$1" && test "$(grep -c warning "$1")" = 2' sh "$ERR"

fails "past --max-bad the run fails" 3 dlk bench-stream "$ds" --device cpu \
    --batch-size 32 --shuffle --seed 3 --on-bad skip --max-bad 5
check "saying so, with the checksum's message" \
    grep -q "more than max_bad 5: .*$KEY.*part 1" "$ERR"
ok "at exactly --max-bad it completes" dlk bench-stream "$ds" --device cpu \
    --batch-size 32 --shuffle --seed 3 --on-bad skip --max-bad "$((HI - LO + 1))"

ok "in dataset order: a whole batch in the damaged part" dlk bench-stream \
    "$ds" --device cpu --batch-size 8 --on-bad skip --order-out "$T/seq.order"
ok "a clean run in dataset order" dlk bench-stream "$T/clean" --device cpu \
    --batch-size 8 --order-out "$T/seqc.order"
check "the same batch count and sizes, the damaged rows absent, each batch of them one readable row repeated" \
    python3 -c 'import sys
lo, hi = int(sys.argv[3]), int(sys.argv[4])
clean = [l.split() for l in open(sys.argv[1])]
skip = [[int(r) for r in l.split()] for l in open(sys.argv[2])]
assert [len(x) for x in clean] == [len(x) for x in skip]
assert not any(lo <= r <= hi for l in skip for r in l)
whole = [l for c, l in zip(clean, skip) if all(lo <= int(r) <= hi for r in c)]
assert whole and all(len(set(l)) == 1 and l[0] == hi + 1 for l in whole), whole' \
    "$T/seqc.order" "$T/seq.order" "$LO" "$HI"

ok "two ranks, rank 0" dlk bench-stream "$ds" --device cpu --batch-size 16 \
    --shuffle --rank 0 --world 2 --on-bad skip --json
b0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["batches"])' "$OUT")
ok "two ranks, rank 1" dlk bench-stream "$ds" --device cpu --batch-size 16 \
    --shuffle --rank 1 --world 2 --on-bad skip --json
b1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["batches"])' "$OUT")
check "each rank steps as often ($b0, $b1): 640 rows, 2 ranks of 16" \
    test "$b0" = 20 -a "$b1" = 20

ok "whole chunks, skip" dlk bench-stream "$ds" --device cpu --batch-size 32 \
    --shuffle --whole-chunks --on-bad skip --max-bad 1000 --json \
    --order-out "$T/whole.order"
check "the whole chunk's rows replaced, no parts named" \
    grep -q "rows [0-9]*-[0-9]* of 'chunks/images/$KEY' replaced" "$ERR"
check "$SAMPLES rows replaced" python3 -c 'import json, sys
r = json.load(open(sys.argv[1])); assert r["rows_replaced"] == int(sys.argv[2]), r["rows_replaced"]' \
    "$OUT" "$SAMPLES"

# from S3 the span is read in one request and its parts checked after:
# the same part replaced, the same batches
. "$DLK_TESTS/s3lib.sh"
s3_start
s3_mkbucket dlk-t460
ok "the damaged dataset on s3" s3_put_tree "$ds" s3://dlk-t460/ds
ok "from s3, --on-bad skip" dlk bench-stream s3://dlk-t460/ds --device cpu \
    --batch-size 32 --shuffle --seed 3 --on-bad skip --order-out "$T/s3.order"
check "the same part named, the same batches" sh -c '
    grep -q "of .chunks/images/$1. part 1 replaced" "$2" && cmp "$3" "$4"' \
    sh "$KEY" "$ERR" "$T/skip.order" "$T/s3.order"

# on a GPU (parts then checked by the loading threads, not the device):
# the same batches as on the cpu, the checksum of the gathered bytes ok
if "$DLK" bench-stream "$T/clean" --device cuda:0 --no-verify >/dev/null 2>&1; then
    fails "on cuda:0, a damaged part fails by default" 3 dlk bench-stream \
        "$ds" --device cuda:0 --batch-size 32 --shuffle --seed 3
    ok "on cuda:0, --on-bad skip" dlk bench-stream "$ds" --device cuda:0 \
        --batch-size 32 --shuffle --seed 3 --on-bad skip --json \
        --order-out "$T/gpu.order"
    check "the cpu's batches, the checksum ok, one read told" sh -c '
        cmp "$1" "$2" && grep -q "\"checksum_ok\": true" "$3" &&
        test "$(grep -c warning "$4")" = 1' sh "$T/skip.order" "$T/gpu.order" "$OUT" "$ERR"
else
    skip "on-bad on a GPU" "no usable CUDA device"
fi

# another chunk gone (its object missing, not damaged): its rows replaced
gone=$(ls "$T/clean/chunks/images" | sort | sed -n 4p)
rm "$T/clean/chunks/images/$gone"
fails "a missing chunk fails by default" 3 dlk bench-stream "$T/clean" \
    --device cpu --batch-size 32 --shuffle
ok "with skip the run completes" dlk bench-stream "$T/clean" --device cpu \
    --batch-size 32 --shuffle --on-bad skip --max-bad 1000 --json
check "the missing chunk is named, once a span read" \
    grep -q "chunks/images/$gone' parts 0-3 replaced: .*No such file" "$ERR"
check "its rows counted" python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["reads_bad"] == 2 and r["rows_replaced"] > 0 and r["batches"] == 20, r' "$OUT"
