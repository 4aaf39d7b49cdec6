#!/usr/bin/env bash
# dlk query --near TENSOR=FILE.npy with a [Q, D] file: Q queries answered
# from one resident index (the rows read once), each block of rows the
# single query's answer, rows and scores equal (text and --json), for
# each metric, with a filter and a view, f32 and f64, k past the rows;
# --show per row; the errors (--save-view and --count with Q > 1, the
# wrong length, a bad expression, a damaged chunk, --device cuda without
# a GPU).
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "query --near of several vectors" "numpy missing: python3 -m pip install numpy"; exit 0; }

python3 - "$T" <<'EOF'
import numpy as np, os, sys
d = sys.argv[1]
r = np.random.default_rng(174)
os.makedirs(d + "/e"); os.makedirs(d + "/f")
X = r.standard_normal((3000, 24)).astype(np.float32)
X[2500] = X[7]; X[2999] = X[7]   # ties, broken by the lower row
np.save(d + "/e/0.emb.npy", X)
np.save(d + "/e/0.score.npy", r.random(3000).astype(np.float32))
Q = r.standard_normal((3, 24)).astype(np.float32)
Q[2] = X[7]
np.save(d + "/q3.npy", Q)
np.save(d + "/q3f16.npy", Q.astype(np.float16))
for i in range(3):
    np.save(f"{d}/q3.{i}.npy", Q[i])
    np.save(f"{d}/q3f16.{i}.npy", Q[i].astype(np.float16))
np.save(d + "/short.npy", np.zeros((3, 5), np.float32))
# f64, 20 values
np.save(d + "/f/0.emb.npy", r.standard_normal((700, 20)))
F = r.standard_normal((3, 20)).astype(np.float32)
np.save(d + "/g3.npy", F)
for i in range(3):
    np.save(f"{d}/g3.{i}.npy", F[i])
EOF
E=$(ds_url emb); F=$(ds_url f64)
ok "create an embedding dataset" dlk create "$E" --tensor emb:f32:24 --tensor score:f32 --chunk-size 16K
ok "ingest 3000 rows" dlk ingest "$E" from-dir "$T/e" --no-key --quiet
ok "create an f64 one" dlk create "$F" --tensor emb:f64:20 --chunk-size 8K
ok "ingest 700 rows" dlk ingest "$F" from-dir "$T/f" --no-key --quiet
ok "save a view" dlk query "$E" "score < 0.7" --save-view low

# each of the Q results (--json) against the single queries' answers
cat > "$T/same.py" <<'EOF'
import json, sys
many = json.load(open(sys.argv[1]))
assert many["queries"] == len(sys.argv) - 2, many
for i, f in enumerate(sys.argv[2:]):
    one = json.load(open(f))
    got = many["results"][i]
    assert got["rows"] == one["rows"] and one["rows"], (i, got, one)
    assert got["scores"] == one["scores"], (i, got, one)
    assert many["candidates"] == one["candidates"], (many, one)
    assert got.get("samples") == one.get("samples"), (i, got, one)
EOF
# many_vs_one NAME DATASET Q-PREFIX ARGS...: --json of [Q, D] and of each row
many_vs_one() {
    local name=$1 ds=$2 q=$3
    shift 3
    ok "$name: 3 queries at once" dlk query "$ds" --near "emb=$q.npy" --json "$@"
    cp "$OUT" "$T/many.json"
    local i
    for i in 0 1 2; do
        ok "$name: query $i alone" dlk query "$ds" --near "emb=$q.$i.npy" --json "$@"
        cp "$OUT" "$T/one.$i.json"
    done
    check "$name: each result is the single query's, bit for bit" \
        python3 "$T/same.py" "$T/many.json" "$T/one.0.json" "$T/one.1.json" "$T/one.2.json"
}
for metric in cosine l2 ip; do
    many_vs_one "$metric" "$E" "$T/q3" --metric $metric --k 7 --threads 3
    many_vs_one "$metric, a filter" "$E" "$T/q3" "score > 0.4" --metric $metric --k 5 --threads 2
done
many_vs_one "a view and a filter" "$E" "$T/q3" "score > 0.2" --view low --k 4
many_vs_one "f16 query vectors" "$E" "$T/q3f16" --k 3 --threads 1
many_vs_one "f64 rows" "$F" "$T/g3" --metric l2 --k 6 --threads 2
many_vs_one "k past the rows" "$E" "$T/q3" "row < 4" --k 50
many_vs_one "--show with each row" "$E" "$T/q3" --k 3 --show score
check "ties: rows 7, 2500 and 2999 in order" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["results"][2]["rows"][:3] == [7, 2500, 2999]' "$T/many.json"

# text: a block a query, headed "# query I", each the single query's lines
ok "text output of 3 queries" dlk query "$E" --near "emb=$T/q3.npy" --k 4 --metric l2
cp "$OUT" "$T/many.txt"
: > "$T/want.txt"
for i in 0 1 2; do
    ok "text of query $i alone" dlk query "$E" --near "emb=$T/q3.$i.npy" --k 4 --metric l2
    { [ $i = 0 ] || echo; echo "# query $i"; cat "$OUT"; } >> "$T/want.txt"
done
check "the blocks are the single queries' lines" cmp "$T/many.txt" "$T/want.txt"
ok "--limit in each block" dlk query "$E" --near "emb=$T/q3.npy" --k 4 --limit 2
check "two rows a block" test "$(grep -c '^[0-9]' "$OUT")" = 6

# --- errors ---------------------------------------------------------
fails "--save-view takes one query vector" 2 dlk query "$E" --near "emb=$T/q3.npy" --save-view v
check "says how many the file has" grep -q "one query vector; '.*q3.npy' has 3" "$ERR"
fails "--count takes one query vector" 2 dlk query "$E" --near "emb=$T/q3.npy" --count
fails "query vectors of the wrong length" 3 dlk query "$E" --near "emb=$T/short.npy"
check "says the lengths" grep -q "query vectors have 5 values; tensor 'emb' has 24" "$ERR"
fails "a bad expression" 2 dlk query "$E" "score >" --near "emb=$T/q3.npy"
fails "a tensor that is not an embedding" 3 dlk query "$E" --near "score=$T/q3.npy"
check "names it" grep -q "tensor 'score' is not an embedding" "$ERR"
if dlk query "$E" --near "emb=$T/q3.npy" --device cuda --json --k 7 >"$T/cuda.json" 2>"$ERR"; then
    ok "the CPU's answer" dlk query "$E" --near "emb=$T/q3.npy" --device cpu --json --k 7
    check "cuda's rows and scores are the CPU's" python3 -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["device"] == "cuda" and b["device"] == "cpu"
assert a["results"] == b["results"]' "$T/cuda.json" "$OUT"
else
    fails "--device cuda without a usable GPU: exit 3" 3 dlk query "$E" --near "emb=$T/q3.npy" --device cuda
    check "says it cannot search on a CUDA GPU, and why" grep -q "cannot search on a CUDA GPU: ..*" "$ERR"
fi
K=$(first_chunk_key "$E" emb)
obj_get "$E" "$K" "$T/chunk"
cp "$T/chunk" "$T/chunk.good"
flip_byte "$T/chunk" -3
obj_put "$E" "$K" "$T/chunk"
fails "a damaged chunk" 3 dlk query "$E" --near "emb=$T/q3.npy" --threads 2
check "names the chunk and the checksum" grep -q "chunk '$K'.*checksum mismatch" "$ERR"
ok "--no-verify reads it anyway" dlk query "$E" --near "emb=$T/q3.npy" --no-verify
obj_put "$E" "$K" "$T/chunk.good"
