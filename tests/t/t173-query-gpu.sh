#!/usr/bin/env bash
# dlk query --near on a CUDA GPU (--device cuda): the same rows, order and
# scores as --device cpu (bit for bit), and a valid top-k against numpy's
# brute force, for each metric, with and without a filter, k=1 and k over
# the rows, f32 (D with and without a tail of D % 16) and f64, several
# staging slots a worker; a damaged chunk fails there too.  auto is the
# CPU.  Without a GPU: --device cuda fails (exit 3) saying why.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "query on a GPU" "numpy missing: python3 -m pip install numpy"; exit 0; }

python3 - "$T/e" <<'EOF'
import numpy as np, os, sys
d = sys.argv[1]
os.makedirs(d + "/a"); os.makedirs(d + "/b"); os.makedirs(d + "/c")
r = np.random.default_rng(7)
# a: 200000 x 24 f32 (24 = 16 + a tail of 8), through the 1 MiB slots of
# one worker; with a few exact duplicates, for ties broken by row
a = r.standard_normal((200000, 24)).astype(np.float32)
a[150000] = a[10]; a[199999] = a[10]; a[77] = a[10]
np.save(f"{d}/a/0.emb.npy", a)
np.save(f"{d}/a/0.score.npy", r.random(200000).astype(np.float32))
np.save(f"{d}/a/0.width.npy", r.integers(50, 400, 200000).astype(np.int32))
np.save(f"{d}/qa.npy", r.standard_normal(24).astype(np.float32))
# b: 4000 x 512 f32 (no tail)
np.save(f"{d}/b/0.emb.npy", r.standard_normal((4000, 512)).astype(np.float32))
np.save(f"{d}/qb.npy", r.standard_normal(512).astype(np.float32))
# c: 3000 x 20 f64
np.save(f"{d}/c/0.emb.npy", r.standard_normal((3000, 20)))
np.save(f"{d}/qc.npy", r.standard_normal(20).astype(np.float32))
EOF
A=$(ds_url a); B=$(ds_url b); C=$(ds_url c)
ok "create a (200000 x 24 f32)" dlk create "$A" --tensor emb:f32:24 --tensor score:f32 --tensor width:i32 --chunk-size 1M
ok "ingest a" dlk ingest "$A" from-dir "$T/e/a" --no-key --quiet
ok "create b (4000 x 512 f32)" dlk create "$B" --tensor emb:f32:512 --chunk-size 2M
ok "ingest b" dlk ingest "$B" from-dir "$T/e/b" --no-key --quiet
ok "create c (3000 x 20 f64)" dlk create "$C" --tensor emb:f64:20 --chunk-size 64K
ok "ingest c" dlk ingest "$C" from-dir "$T/e/c" --no-key --quiet

# --- where there is no GPU: the error, and auto on the CPU ------------
if ! dlk query "$C" --near "emb=$T/e/qc.npy" --device cuda --json >"$OUT" 2>"$ERR"; then
    why=$(sed 's/^dlk query: //' "$ERR")
    fails "--device cuda without a GPU: exit 3" 3 dlk query "$C" --near "emb=$T/e/qc.npy" --device cuda
    check "says it cannot search on a GPU, and why" grep -q "cannot search on a CUDA GPU: ..*" "$ERR"
    ok "--device auto" dlk query "$C" --near "emb=$T/e/qc.npy" --k 7 --json
    check "auto ran on the CPU" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["device"] == "cpu"' "$OUT"
    cp "$OUT" "$T/auto.json"
    ok "--device cpu" dlk query "$C" --near "emb=$T/e/qc.npy" --k 7 --json
    check "the same rows and scores as auto" python3 -c '
import json,sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert (a["rows"], a["scores"]) == (b["rows"], b["scores"])' "$T/auto.json" "$OUT"
    skip "the GPU against the CPU and numpy" "no usable CUDA GPU: $why"
    exit 0
fi

cat > "$T/same.py" <<'EOF'
# cuda's answer against cpu's (bit for bit) and against numpy's brute
# force in float64: the rows must be a top-k there (every row returned
# at least as good as the best one left out, to float32 rounding) and
# their scores numpy's to 1e-5 (argv: cuda json, cpu json, data dir,
# query: a .npy or a row, metric, k, filter over s, w).
import json, sys
import numpy as np
g, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
d, q, metric, k, filt = sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), sys.argv[7]
assert g["device"] == "cuda" and c["device"] == "cpu", (g["device"], c["device"])
assert g["rows"] == c["rows"], "rows differ from the CPU's"
assert g["scores"] == c["scores"], "scores differ from the CPU's"
assert g["candidates"] == c["candidates"]
X = np.load(d + "/0.emb.npy").astype(np.float64)
try:
    s = np.load(d + "/0.score.npy"); w = np.load(d + "/0.width.npy")
except FileNotFoundError:
    s = w = None
q = X[int(q)] if q.isdigit() else np.load(q).astype(np.float64)
keep = eval(filt)
if metric == "ip":
    sc = X @ q
elif metric == "cosine":
    sc = X @ q / np.linalg.norm(X, axis=1) / np.linalg.norm(q)
else:
    sc = -np.linalg.norm(X - q, axis=1)
sc[~keep] = -np.inf
n = min(k, int(keep.sum()))
assert len(g["rows"]) == n, (len(g["rows"]), n)
assert g["candidates"] == int(keep.sum())
rows = np.array(g["rows"], dtype=np.int64)
assert len(set(g["rows"])) == n and keep[rows].all()
tol = 1e-5 * max(1.0, float(np.abs(sc[keep]).max()))
got = np.array(g["scores"])
assert np.allclose(got, -sc[rows] if metric == "l2" else sc[rows], rtol=1e-5, atol=1e-5)
left = np.ones(len(sc), bool); left[rows] = False; left &= keep
if left.any():
    assert sc[rows].min() >= sc[left].max() - tol, "not the top k"
# best first; equal scores by row (l2's distances are rounded from the
# squared ones the order is of: equal distances may come in either order)
for i in range(1, n):
    a, b = got[i - 1], got[i]
    if metric == "l2":
        assert a <= b, (i, a, b)
    else:
        assert a > b or (a == b and rows[i - 1] < rows[i]), (i, a, b)
EOF

# --- the GPU against the CPU and numpy --------------------------------
check "--device cuda ran on the GPU" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["device"] == "cuda"' "$OUT"
ok "--device auto" dlk query "$C" --near "emb=$T/e/qc.npy" --json
check "auto ran on the CPU (faster for chunks in host memory)" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["device"] == "cpu"' "$OUT"

# compare NAME DS DIR QUERY METRIC K FILTER-EXPR NUMPY-FILTER [ARGS...]
compare() {
    local name=$1 ds=$2 dir=$3 q=$4 metric=$5 k=$6 expr=$7 filt=$8
    shift 8
    local e=()
    [ -n "$expr" ] && e=("$expr")
    ok "$name: cuda" dlk query "$ds" "${e[@]+"${e[@]}"}" --near "emb=$q" --k "$k" --metric "$metric" --device cuda --json "$@"
    cp "$OUT" "$T/g.json"
    ok "$name: cpu" dlk query "$ds" "${e[@]+"${e[@]}"}" --near "emb=$q" --k "$k" --metric "$metric" --device cpu --json "$@"
    check "$name: cuda = cpu, a top-k of numpy's" python3 "$T/same.py" "$T/g.json" "$OUT" "$dir" "$q" "$metric" "$k" "$filt"
}
for metric in cosine l2 ip; do
    compare "a $metric k=1" "$A" "$T/e/a" "$T/e/qa.npy" $metric 1 "" "np.ones(len(X), bool)" --threads 3
    compare "a $metric k=100 one worker" "$A" "$T/e/a" "$T/e/qa.npy" $metric 100 "" "np.ones(len(X), bool)" --threads 1
    compare "a $metric row 10 (duplicated), k=5" "$A" "$T/e/a" 10 $metric 5 "" "np.ones(len(X), bool)" --threads 2
    compare "a $metric filtered, k=50" "$A" "$T/e/a" "$T/e/qa.npy" $metric 50 "score > 0.5 and width >= 200" "(s > 0.5) & (w >= 200)" --threads 4
    compare "a $metric filtered, k over the rows" "$A" "$T/e/a" 3 $metric 5000 "row < 900 or row > 199500" "(np.arange(len(X)) < 900) | (np.arange(len(X)) > 199500)"
    compare "a $metric unverified" "$A" "$T/e/a" "$T/e/qa.npy" $metric 20 "" "np.ones(len(X), bool)" --no-verify
    compare "b $metric k=10" "$B" "$T/e/b" "$T/e/qb.npy" $metric 10 "" "np.ones(len(X), bool)"
    compare "c f64 $metric k over the rows" "$C" "$T/e/c" "$T/e/qc.npy" $metric 4000 "" "np.ones(len(X), bool)" --threads 2
    compare "c f64 $metric filtered k=1" "$C" "$T/e/c" 5 $metric 1 "row % 3 == 1" "np.arange(len(X)) % 3 == 1"
done

# --- a damaged chunk fails on the GPU as on the CPU -------------------
K=$(first_chunk_key "$A" emb)
obj_get "$A" "$K" "$T/chunk"
cp "$T/chunk" "$T/chunk.good"
flip_byte "$T/chunk" -3
obj_put "$A" "$K" "$T/chunk"
fails "top-k on the GPU over a damaged chunk" 3 dlk query "$A" --near "emb=$T/e/qa.npy" --device cuda --threads 2
check "names the chunk and the checksum" grep -q "chunk '$K'.*checksum mismatch" "$ERR"
ok "--no-verify scores it anyway" dlk query "$A" --near "emb=$T/e/qa.npy" --device cuda --no-verify
obj_put "$A" "$K" "$T/chunk.good"
