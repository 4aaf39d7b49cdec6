#!/usr/bin/env bash
# dlk query reads only what its answer depends on (dlk-query(1), "What is
# read"): a filter that the schema decides for every row (a dtype's
# range, a fixed shape) reads no chunk, and counts every row or none; a
# part of one decided so reads none of its tensors (`shape(vec)[0] ==
# 64 and labels == 3` reads labels alone); `row` ranges the expression
# requires read only the chunks of those rows; a view's --count without
# a filter is its manifest entry's rows, without its object.  Every count
# and row list equals numpy's over the same values.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "query by the manifest" "numpy missing: python3 -m pip install numpy"; exit 0; }

N=300
mkdir -p "$T/src"
python3 - "$T/src" "$N" <<'PY'
import numpy as np, sys
d, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(5)
np.save(d + "/0000.vec.npy", rng.integers(0, 255, (n, 64), dtype="u1"))
np.save(d + "/0000.labels.npy", (np.arange(n) % 10).astype("u1"))
np.save(d + "/0000.score.npy", rng.integers(-1000, 1000, n).astype("<i4"))
PY
DS=$(ds_url ds)
ok "create" dlk create "$DS" --tensor vec:u8:64 --tensor labels:u8 \
    --tensor score:i32 --chunk-size 4K
ok "ingest" dlk ingest "$DS" from-dir "$T/src" --quiet

# EXPR, the numpy expression of the same rows (v, l, s, r: vec, labels,
# score, row), and the tensors it must read ("-": none)
while IFS='|' read -r expr py reads; do
    ok "query '$expr' --json" dlk query "$DS" "$expr" --json
    check "'$expr': numpy's rows, reading $reads" python3 - "$OUT" "$T/src" "$py" "$reads" "$DLK" "$DS" <<'PY'
import json, subprocess, sys
import numpy as np
out, src, py, reads, dlk, ds = sys.argv[1:7]
d = json.load(open(out))
v = np.load(src + "/0000.vec.npy"); l = np.load(src + "/0000.labels.npy")
s = np.load(src + "/0000.score.npy"); r = np.arange(len(l))
want = [int(x) for x in np.nonzero(eval(py))[0]]
assert d["rows"] == want and d["count"] == len(want), (d["rows"][:10], want[:10])
ls = {t["name"]: t for t in json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))["tensors"]}
bytes_ = sum(ls[t]["stored_bytes"] for t in reads.split(",") if t != "-")
assert d["bytes_read"] == bytes_, (d["bytes_read"], bytes_, reads)
PY
done <<'EOF'
labels >= 0|np.ones(len(l), bool)|-
labels <= 255 and score >= -2147483648|np.ones(len(l), bool)|-
labels > 255|np.zeros(len(l), bool)|-
shape(vec)[0] == 64|np.ones(len(l), bool)|-
len(vec) != 64 or score > 10000000000|np.zeros(len(l), bool)|-
shape(vec)[0] == 64 and labels == 3|l == 3|labels
labels in (3, 300) and row < 100|(l == 3) & (r < 100)|labels
shape(vec)[0] * 2 == 128 and score < 0|s < 0|score
labels == 3 and mean(vec) > 120|(l == 3) & (v.mean(axis=1) > 120)|labels,vec
abs(-labels) <= 255 or mean(vec) > 1000|np.ones(len(l), bool)|-
0 - labels >= 0|l == 0|labels
EOF

# --count against the row lists, each expression once more, counts only
for expr in "labels >= 0" "labels > 255" "shape(vec)[0] == 64 and labels == 3" "labels == 3 and mean(vec) > 120"; do
    ok "'$expr' rows" dlk query "$DS" "$expr" --json
    cp "$OUT" "$T/rows.json"
    ok "'$expr' --count" dlk query "$DS" "$expr" --count
    check "'$expr': the count is the rows'" python3 -c '
import json, sys
assert int(open(sys.argv[1]).read()) == len(json.load(open(sys.argv[2]))["rows"])' "$OUT" "$T/rows.json"
done

# --- rows a range of `row` allows: only their chunks ----------------------
ok "a view of rows 40-79" dlk query "$DS" "row >= 40 and row < 80" --save-view mid
ok "the chunks holding them" dlk ls "$DS" --view mid --json
cp "$OUT" "$T/mid.json"
for expr in "row >= 40 and row < 80 and mean(vec) > 120" "80 > row and mean(vec) > 120 and 40 <= row"; do
    ok "'$expr'" dlk query "$DS" "$expr" --json
    check "'$expr': numpy's rows, reading vec's chunks of rows 40-79 alone" python3 - "$OUT" "$T/src" "$T/mid.json" <<'PY'
import json, sys
import numpy as np
d = json.load(open(sys.argv[1])); mid = json.load(open(sys.argv[3]))
v = np.load(sys.argv[2] + "/0000.vec.npy"); r = np.arange(len(v))
want = [int(x) for x in np.nonzero((r >= 40) & (r < 80) & (v.mean(axis=1) > 120))[0]]
vec = [t for t in mid["tensors"] if t["name"] == "vec"][0]["stored_bytes"]
assert d["rows"] == want and want, (d["rows"], want)
assert d["bytes_read"] == vec, (d["bytes_read"], vec)
PY
done
ok "within a view: 'row < 60 and mean(vec) > 120' --view mid" dlk query "$DS" "row < 60 and mean(vec) > 120" --view mid --json
check "numpy's rows, from fewer chunks than the view's" python3 - "$OUT" "$T/src" "$T/mid.json" <<'PY'
import json, sys
import numpy as np
d = json.load(open(sys.argv[1])); mid = json.load(open(sys.argv[3]))
v = np.load(sys.argv[2] + "/0000.vec.npy"); r = np.arange(len(v))
want = [int(x) for x in np.nonzero((r >= 40) & (r < 60) & (v.mean(axis=1) > 120))[0]]
vec = [t for t in mid["tensors"] if t["name"] == "vec"][0]["stored_bytes"]
assert d["rows"] == want and want, (d["rows"], want)
assert 0 < d["bytes_read"] < vec, (d["bytes_read"], vec)
PY
ok "'row > 5 and row < 3 and mean(vec) > 0'" dlk query "$DS" "row > 5 and row < 3 and mean(vec) > 0" --json
check "no rows, nothing read" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["rows"]==[] and d["bytes_read"]==0, d' "$OUT"

# --- a view's count -------------------------------------------------------
ok "save a view" dlk query "$DS" "labels == 7 and mean(vec) > 100" --save-view v --json
WANT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["count"])' "$OUT")
ok "the view's count" dlk query "$DS" --view v --count
check "is its rows" grep -qx "$WANT" "$OUT"
ok "the view's count, a decided filter" dlk query "$DS" "labels <= 255" --view v --count
check "is its rows" grep -qx "$WANT" "$OUT"
ok "the view's count, a filter" dlk query "$DS" "labels == 7" --view v --count
check "is its rows" grep -qx "$WANT" "$OUT"
OBJ=$(dlk ls "$DS" --json | python3 -c 'import json,sys; print([v for v in json.load(sys.stdin)["views"] if v["name"] == "v"][0]["object"])')
ok "remove the view's object" obj_rm "$DS" "$OBJ"
ok "the count without a filter is the manifest's: the object is not read" \
    dlk query "$DS" --view v --count
check "its rows" grep -qx "$WANT" "$OUT"
fails "its rows are read from the object" 3 dlk query "$DS" --view v --json
check "which is missing" grep -q "view 'v' is missing" "$ERR"
fails "a filter the schema does not decide reads them" 3 dlk query "$DS" "labels == 7" --view v --count
