#!/usr/bin/env bash
# dlk query: the expression language (valid and invalid expressions, the
# column an error points at), its results against a Python evaluation of
# the same expression over the values `dlk cat` prints, and exact vector
# search against numpy.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "query" "numpy missing: python3 -m pip install numpy"; exit 0; }

# --- a dataset of images with class names and keys (text) -------------
python3 "$DLK_TESTS/../examples/sample_data.py" "$T/jpg" --samples 60 --size 16 --jpeg >/dev/null
DS=$(ds_url pets)
ok "create from JPEG folders" dlk create "$DS" from-dir "$T/jpg" --chunk-size 4K --quiet
# the values as dlk cat prints them: labels, key, images (as .npy)
mkdir -p "$T/v"
for r in $(seq 0 59); do
    "$DLK" cat "$DS" labels "$r" --json > "$T/v/labels.$r.json"
    "$DLK" cat "$DS" key "$r" --json > "$T/v/key.$r.json"
    "$DLK" cat "$DS" images "$r" --npy > "$T/v/images.$r.npy"
done
cat > "$T/eval.py" <<'EOF'
# The rows for which a Python predicate holds, over dlk cat's values;
# compared with dlk query --json's rows (argv: values dir, query json, n,
# predicate).
import json, sys
import numpy as np
vdir, qfile, n, pred = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def mix(x):
    x = (x + 0x9e3779b97f4a7c15) % 2**64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) % 2**64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) % 2**64
    return x ^ (x >> 31)
def random(seed, row):
    return (mix(mix(seed) ^ row) >> 11) / 2.0**53
def like(s, pat):
    import re
    rx = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pat)
    return re.fullmatch(rx, s, re.S) is not None
want = []
for row in range(n):
    lab = json.load(open(f"{vdir}/labels.{row}.json"))
    label, cls = lab["values"][0], lab.get("class_name")
    key = bytes(json.load(open(f"{vdir}/key.{row}.json"))["values"]).decode()
    img = np.load(f"{vdir}/images.{row}.npy").astype(np.float64)
    if eval(pred):
        want.append(row)
got = json.load(open(qfile))["rows"]
assert got == want, (pred, got, want)
EOF
# a key is its object's path: @SRC@ stands for the source's, @LEN@ for
# its length and a / (so that len(key) > @LEN@ + 21 means what > 21 did)
SRC=$(realpath "$T/jpg")
while IFS='|' read -r expr pred; do
    expr=${expr//@SRC@/$SRC} pred=${pred//@SRC@/$SRC}
    expr=${expr//@LEN@/$((${#SRC} + 1))} pred=${pred//@LEN@/$((${#SRC} + 1))}
    ok "query: $expr" dlk query "$DS" "$expr" --json --threads 3
    check "equals Python's: $pred" python3 "$T/eval.py" "$T/v" "$OUT" 60 "$pred"
done <<'EOF'
labels == 'circle-red'|cls == 'circle-red'
labels in (0, 'circle-green') and row >= 5|label in (0, 1) and row >= 5
labels != 1 or row = 3|label != 1 or row == 3
contains(key, 'green/') or key like '%blue/00001_.jpg'|'green/' in key or like(key, '%blue/00001_.jpg')
key not like '@SRC@/circle-red/%' and not contains(key, '3.jpg')|not key.startswith('@SRC@/circle-red/') and '3.jpg' not in key
key == '@SRC@/circle-blue/000004.jpg' or key in ('@SRC@/circle-red/000000.jpg', 'x')|key == '@SRC@/circle-blue/000004.jpg' or key in ('@SRC@/circle-red/000000.jpg', 'x')
mean(images) > 100 and not (labels = 2)|img.mean() > 100 and not label == 2
shape(images)[1] * 2 - 1 >= 31 and len(key) > @LEN@ + 21|img.shape[1] * 2 - 1 >= 31 and len(key.encode()) > @LEN@ + 21
random(11) < 0.3|random(11, row) < 0.3
max(images) - min(images) > 200 or sum(images) % 7 == 3|img.max() - img.min() > 200 or img.sum() % 7 == 3
abs(mean(images) - 128) < 20 and -row > -40|abs(img.mean() - 128) < 20 and -row > -40
(row < 10 or row >= 50) and (row % 2 = 0)|(row < 10 or row >= 50) and row % 2 == 0
true|True
EOF
ok "an empty result" dlk query "$DS" "row > 1000" --count
check "counts 0" grep -qx 0 "$OUT"
ok "no expression: every row" dlk query "$DS" --count
check "counts 60" grep -qx 60 "$OUT"
ok "--show prints values with the rows" dlk query "$DS" "row = 7" --show labels,key
check "the class name and the key" grep -qE "^7	labels=[0-9] \(circle-[a-z]+\)	key=\"$SRC/circle-[a-z]+/[0-9]+\.jpg\"\$" "$OUT"
ok "--limit" dlk query "$DS" "row < 20" --limit 3 --json
check "3 rows printed, 20 counted" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["rows"]==[0,1,2] and d["count"]==20, d' "$OUT"

# --- invalid expressions: exit 2, the column named and marked ----------
while IFS='|' read -r expr col words; do
    fails "refused: $expr" 2 dlk query "$DS" "$expr"
    check "column $col: $words" grep -q "column $col: .*$words" "$ERR"
    check "a caret under column $col" python3 -c '
import sys
lines = open(sys.argv[1]).read().split("\n")
i = [k for k, l in enumerate(lines) if l == "  " + sys.argv[3]][0]
assert lines[i + 1] == " " * (1 + int(sys.argv[2])) + "^", lines' "$ERR" "$col" "$expr"
done <<'EOF'
labels ==|10|ends where a value
labels == 1 == 2|13|do not chain
images > 3|1|not one value a row
key > 'a'|5|text compares with
foo(key)|1|unknown function 'foo'
shape(images)[3]|15|the index must be 0 to 2
shape(images) > 1|15|needs a dimension
(row < 3|9|expected ')'
row < 'x'|7|'x' is a string
nosuch == 1|1|no tensor 'nosuch'
3 +* 4|4|expected a value, found '\*'
'abc|1|not closed
labels in (1, 'dog')|15|not a class of 'labels'
labels == 'cat'|11|not a class of 'labels'
row < 3 row|9|unexpected 'row'
contains(labels, 'x')|10|takes a text tensor
random(-1) < 1|8|takes a seed
1 $ 2|3|unexpected '\$'
key like 3|10|takes a string pattern
EOF
fails "--json carries the error" 2 dlk query "$DS" "row <" --json
check "error object with exit code 2" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["error"]["exit_code"]==2 and "column 6" in d["error"]["message"], d' "$OUT"
fails "--k without --near" 2 dlk query "$DS" "true" --k 3
fails "an unknown metric" 2 dlk query "$DS" --near images=1 --metric hamming
fails "--near of a tensor that is not an embedding" 3 dlk query "$DS" --near images=1

# --- vector search against numpy --------------------------------------
python3 - "$T/e" <<'EOF'
import numpy as np, os, sys
d = sys.argv[1]
os.makedirs(d)
r = np.random.default_rng(5)
np.save(f"{d}/0.emb.npy", r.standard_normal((3000, 24)).astype(np.float32))
np.save(f"{d}/0.score.npy", r.random(3000).astype(np.float32))
np.save(f"{d}/0.width.npy", r.integers(50, 400, 3000).astype(np.int32))
np.save(f"{d}/../q.npy", r.standard_normal(24).astype(np.float32))
EOF
E=$(ds_url emb)
ok "create an embedding dataset" dlk create "$E" --tensor emb:f32:24 --tensor score:f32 --tensor width:i32 --chunk-size 16K
ok "ingest 3000 rows" dlk ingest "$E" from-dir "$T/e" --no-key --quiet
cat > "$T/topk.py" <<'EOF'
# dlk query --near's rows and scores against numpy's brute force (argv:
# query json, metric, k, query: a .npy path or a row, filter).
import json, sys
import numpy as np
d = json.load(open(sys.argv[1]))
metric, k, q, filt = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
X = np.load(sys.argv[6] + "/0.emb.npy").astype(np.float64)
s = np.load(sys.argv[6] + "/0.score.npy")
w = np.load(sys.argv[6] + "/0.width.npy")
q = X[int(q)] if q.isdigit() else np.load(q).astype(np.float64)
keep = eval(filt)
if metric == "ip":
    g = X @ q
elif metric == "cosine":
    g = X @ q / np.linalg.norm(X, axis=1) / np.linalg.norm(q)
else:
    g = -np.linalg.norm(X - q, axis=1)
g[~keep] = -np.inf
order = np.lexsort((np.arange(len(g)), -g))[:min(k, int(keep.sum()))]
want = order.tolist()
score = (-g if metric == "l2" else g)[order]
assert d["rows"] == want, (d["rows"], want)
assert np.allclose(d["scores"], score, rtol=1e-5, atol=1e-5), (d["scores"], score)
assert d["candidates"] == int(keep.sum())
EOF
for metric in cosine l2 ip; do
    ok "top-k, $metric, a .npy query" dlk query "$E" --near "emb=$T/q.npy" --k 9 --metric $metric --threads 3 --json
    check "top-k $metric equals numpy's" python3 "$T/topk.py" "$OUT" $metric 9 "$T/q.npy" "np.ones(len(s), bool)" "$T/e"
    ok "filter then top-k, $metric, a row as the query" dlk query "$E" "score > 0.5 and width >= 200" --near emb=17 --k 25 --metric $metric --threads 2 --json
    check "hybrid $metric equals numpy's" python3 "$T/topk.py" "$OUT" $metric 25 17 "(s > 0.5) & (w >= 200)" "$T/e"
done
ok "k larger than the rows the filter keeps" dlk query "$E" "row < 5" --near emb=0 --k 50 --json
check "the 5 rows" python3 "$T/topk.py" "$OUT" cosine 50 0 "np.arange(len(s)) < 5" "$T/e"
ok "numbers compare as numpy computes them" dlk query "$E" "score * 2 < 0.7 or width in (100, 300) or -score < -0.99" --json
check "equal" python3 -c '
import json, sys, numpy as np
s = np.load(sys.argv[2] + "/0.score.npy"); w = np.load(sys.argv[2] + "/0.width.npy")
want = np.nonzero((s.astype(np.float64) * 2 < 0.7) | np.isin(w, [100, 300]) | (-s.astype(np.float64) < -0.99))[0].tolist()
assert json.load(open(sys.argv[1]))["rows"] == want' "$OUT" "$T/e"
# one scalar against a constant takes a typed loop: constants of the
# dtype, and others compared as doubles
while IFS='|' read -r expr pred; do
    ok "query: $expr" dlk query "$E" "$expr" --json --threads 2
    check "equals numpy's: $pred" python3 -c '
import json, sys, numpy as np
s = np.load(sys.argv[2] + "/0.score.npy").astype(np.float64); w = np.load(sys.argv[2] + "/0.width.npy").astype(np.float64)
want = np.nonzero(eval(sys.argv[3]))[0].tolist()
assert json.load(open(sys.argv[1]))["rows"] == want' "$OUT" "$T/e" "$pred"
    cp "$OUT" "$T/last.json"
    ok "--count: $expr" dlk query "$E" "$expr" --count --threads 2
    check "counts the same" python3 -c 'import json,sys; assert int(open(sys.argv[1]).read()) == len(json.load(open(sys.argv[2]))["rows"])' "$OUT" "$T/last.json"
done <<'EOF2'
width >= 200|w >= 200
width < 100.5|w < 100.5
width != 250|w != 250
width == -3|w == -3
width > 5000000000|w > 5e9
score > 0.3|s > 0.3
score <= 0.25|s <= 0.25
score == 0.5|s == 0.5
EOF2
printf 'not a npy' > "$T/bad.npy"
fails "a query vector that is not .npy" 3 dlk query "$E" --near "emb=$T/bad.npy"
python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.zeros(5, np.float32))' "$T/short.npy"
fails "a query vector of the wrong length" 3 dlk query "$E" --near "emb=$T/short.npy"
check "says the lengths" grep -q "5 values; tensor 'emb' has 24" "$ERR"
fails "a row past the end" 3 dlk query "$E" --near emb=3000

# --- a damaged chunk is reported, never scored or matched -------------
for tn in emb score; do
    K=$(first_chunk_key "$E" $tn)
    obj_get "$E" "$K" "$T/chunk"
    cp "$T/chunk" "$T/chunk.good"
    flip_byte "$T/chunk" -3
    obj_put "$E" "$K" "$T/chunk"
    if [ $tn = emb ]; then
        fails "top-k over a damaged $tn chunk" 3 dlk query "$E" --near "emb=$T/q.npy" --threads 2
    else
        fails "a filter over a damaged $tn chunk" 3 dlk query "$E" "score > 0.5" --threads 2
    fi
    check "names the chunk and the checksum" grep -q "chunk '$K'.*checksum mismatch" "$ERR"
    ok "--no-verify reads it anyway ($tn)" dlk query "$E" "score > 0.5" --near "emb=$T/q.npy" --no-verify
    obj_put "$E" "$K" "$T/chunk.good"
done
