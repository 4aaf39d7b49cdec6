#!/usr/bin/env bash
# Rows are stored in a seeded permutation of the source by default, so a
# class-folder tree streams with batches that mix the classes as a random
# permutation would: bench-stream's label-mix ratio (each epoch's mean
# total variation distance between a batch's class histogram and the
# dataset's, over a random permutation's) stays near 1 on 1, 2 and 4
# ranks, from a directory and from S3; --order sorted keeps the old
# class-sorted layout, which the ratio and a warning expose.  --order-out
# writes the rows of every batch.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
. "$DLK_TESTS/mixlib.sh"
mix_need "ingest order and label mix"

# 10 classes of 120 8x8 JPEGs, in folders
S=$T/train
mix_tree "$S" 10 120 7

ok "create from-dir: shuffled by default" dlk create "$T/ds" from-dir "$S" --resize 8x8 --chunk-size 4K --json
check "--json names the order and its seed" python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d["order"] == "shuffled" and d["order_seed"] == 0 and d["ingested"] == 1200, d' "$OUT"
ok "bench-stream in dataset order, 2 epochs" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --json
check "label mix at most 1.25 in every epoch (a random permutation: 1)" below 1.25 $(mix "$OUT")
check "the class tensor is named" grep -q '"tensor": "labels"' "$OUT"
for w in 2 4; do
    for ((r = 0; r < w; r++)); do
        ok "rank $r of $w, shuffled" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --rank $r --world $w --json
        check "... label mix at most 1.35 in every epoch" below 1.35 $(mix "$OUT")
    done
done
ok "text report" dlk bench-stream "$T/ds" --device cpu --batch-size 32
check "... has the label-mix line and no warning" sh -c 'grep -q "label mix (labels): " "$0" && ! grep -q warning "$1"' "$OUT" "$ERR"

ok "--order sorted: the class-sorted layout" dlk create "$T/sorted" from-dir "$S" --resize 8x8 --chunk-size 4K --order sorted --json
check "... named in --json" grep -q '"order": "sorted"' "$OUT"
ok "its stream in dataset order" dlk bench-stream "$T/sorted" --device cpu --batch-size 32 --json
check "... mixes far worse than a random permutation (ratio above 3)" python3 -c '
import json, sys; r = json.load(open(sys.argv[1]))["label_mix"]["ratio"]; assert r > 3, r' "$OUT"
check "... and says so" grep -q "warning: batches mix the classes of 'labels'" "$ERR"
ok "a small shuffle window over the sorted rows" dlk bench-stream "$T/sorted" --device cpu --batch-size 32 --shuffle --window 2 --json
check "... still mixes worse than 2" python3 -c '
import json, sys; r = json.load(open(sys.argv[1]))["label_mix"]["ratio"]; assert r > 2, r' "$OUT"
ok "the sorted and shuffled datasets hold the same rows" sh -c '
for d in "$0/ds" "$0/sorted"; do "$DLK" cat "$d" images 0 --json >/dev/null || exit 1; done' "$T"

# the order of every batch
ok "--order-out with --shuffle, 2 epochs" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --seed 3 --order-out "$T/o1" --json
cp "$OUT" "$T/o1.json"
check "one line a batch; each epoch every row exactly once; the epochs differ" python3 -c '
import json, sys
d = json.load(open(sys.argv[2])); lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == d["batches"] == 2 * 38, (len(lines), d["batches"])
ep = [sum((list(map(int, l.split())) for l in lines[k*38:(k+1)*38]), []) for k in range(2)]
for e in ep:
    assert sorted(e) == list(range(1200)), (len(e), len(set(e)))
assert ep[0] != ep[1]' "$T/o1" "$T/o1.json"
ok "the same seed again" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --seed 3 --order-out "$T/o2"
check "... the same order" cmp "$T/o1" "$T/o2"
ok "another seed" dlk bench-stream "$T/ds" --device cpu --batch-size 32 --epochs 2 --shuffle --seed 4 --order-out "$T/o3"
check "... another order" sh -c '! cmp -s "$0" "$1"' "$T/o1" "$T/o3"
fails "--order-out to a directory that does not exist" 3 dlk bench-stream "$T/ds" --device cpu --order-out "$T/no/such/file"
check "... names the file" grep -q "cannot write '$T/no/such/file'" "$ERR"

# the order's seed
ok "--order-seed 5" dlk create "$T/seed5" from-dir "$S" --resize 8x8 --chunk-size 4K --order-seed 5 --json
check "... recorded in --json" grep -q '"order_seed": 5' "$OUT"
labels_of() { python3 - "$1" <<'PY'
import subprocess, sys, os, json
out = []
for i in range(40):
    r = subprocess.run([os.environ["DLK"], "cat", sys.argv[1], "labels", str(i), "--json"], capture_output=True, text=True)
    out.append(json.loads(r.stdout)["values"][0])
print(out)
PY
}
check "... another permutation than seed 0" test "$(labels_of "$T/ds")" != "$(labels_of "$T/seed5")"
fails "--order random is refused" 2 dlk create "$T/bad" from-dir "$S" --order random
check "... saying what it takes" grep -q "shuffled or sorted" "$ERR"
fails "--order-seed -1 is refused" 2 dlk ingest "$T/ds" from-dir "$S" --order-seed -1

# from S3: the same permutation (it depends on the keys and the seed only)
s3_start
s3_mkbucket raw
s3_mkbucket lake
ok "upload the tree" s3_put_tree "$S" s3://raw/train
ok "create from-s3" dlk create s3://lake/ds from-s3 s3://raw/train --resize 8x8 --chunk-size 4K --json
ok "bench-stream from S3" dlk bench-stream s3://lake/ds --device cpu --batch-size 32 --epochs 2 --json
check "label mix at most 1.25 in every epoch" below 1.25 $(mix "$OUT")
check "the same rows in the same order as from the directory" sh -c '
for i in 0 1 2 3 4 5 6 7 8 9 500 1199; do
    a=$("$DLK" cat "$0/ds" images $i --npy | md5sum) b=$("$DLK" cat s3://lake/ds images $i --npy | md5sum)
    [ "$a" = "$b" ] || exit 1
done' "$T"
