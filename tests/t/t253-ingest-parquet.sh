#!/usr/bin/env bash
# Parquet tables through the Python package (dlk.ingest_parquet, python3
# -m dlk.parquet): pyarrow reads them, the library's own ingest decodes
# and appends.  A row is its encoded image (a Hugging Face Image struct
# {bytes, path}, or a binary column), its caption text, numbers, a list
# of numbers and a class label (a ClassLabel's ids given its names);
# keys FILE.parquet/ROW; the image decoded and resized exactly as from-dir
# decodes the same bytes; an undecodable image a skipped row naming file
# and row, counted by --max-skip; --dry-run and --json tell the schema,
# the strays and the columns not read; a rerun ingests only new rows and
# reports a rewritten file's rows as changed.
. "$DLK_TESTS/lib.sh"
if ! python3 -c 'import pyarrow' 2>/dev/null; then
    skip "ingest parquet" "pyarrow missing: python3 -m pip install pyarrow"
    exit 0
fi
if ! python3 -c 'import PIL' 2>/dev/null; then
    skip "ingest parquet" "Pillow missing: python3 -m pip install pillow"
    exit 0
fi
py_binding "ingest parquet" || exit 0

# DATASET TENSOR...: {key below "/src/": [values of each tensor]}, text
# as strings, class labels by name, scalars as numbers

# DIR FILE ROWS [NAME]: a table of ROWS rows at DIR/FILE: images of their
# own sizes and colours (row 1 a PNG, row 5 not an image), captions,
# scores, counts, embeddings, a ClassLabel, a struct column dlk does not
# read; NAME "plain": the images a binary column, labels as names
S=$T/src
table() {
    python3 - "$@" <<'PY'
import io, json, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from PIL import Image
d, f, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
plain = len(sys.argv) > 4
seed = sum(map(ord, f))
def img(i):
    b = io.BytesIO()
    im = Image.new("RGB", (20 + 4 * i, 14 + 2 * i), ((seed + 40 * i) % 256, 90, 30 * i % 256))
    im.save(b, "PNG" if i == 1 else "JPEG", quality=90)
    return b.getvalue()
data = [img(i) for i in range(n)]
if n > 5:
    data[5] = b"this is no image"
names = ["cat", "dog", "bird"]
cols = {
    "caption": ["%s row %d, \"quoted\"" % (f, i) for i in range(n)],
    "score": [0.25 * i for i in range(n)],
    "count": pa.array([seed + i for i in range(n)], pa.int32()),
    "emb": [[float(i), 0.5, -float(i)] for i in range(n)],
    "meta": [{"a": i} for i in range(n)],
}
feats = {}
if plain:
    cols = {"png_or_jpg": pa.array(data, pa.binary()), **cols,
            "label": [names[i % 3] for i in range(n)]}
else:
    paths = ["r%d.%s" % (i, "png" if i == 1 else "jpg") for i in range(n)]
    cols = {"image": pa.array([{"bytes": b, "path": p} for b, p in zip(data, paths)],
                              pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            **cols, "label": pa.array([i % 3 for i in range(n)], pa.int64())}
    feats = {"image": {"_type": "Image"},
             "label": {"names": names, "_type": "ClassLabel"}}
t = pa.table(cols)
if feats:
    t = t.replace_schema_metadata(
        {b"huggingface": json.dumps({"info": {"features": feats}}).encode()})
os.makedirs(os.path.dirname(os.path.join(d, f)) or d, exist_ok=True)
pq.write_table(t, os.path.join(d, f))
# the expected rows, by key, and each image's bytes as a file of that key
exp = {}
for i in range(n):
    ext = "png" if i == 1 else "jpg"
    k = "%s/%d.%s" % (f, i, ext)
    exp[k] = [cols["caption"][i], 0.25 * i, seed + i, [float(i), 0.5, -float(i)],
              names[i % 3]]
    p = os.path.join(d + ".files", k)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "wb").write(data[i])
old = json.load(open(d + ".expect")) if os.path.exists(d + ".expect") else {}
old.update(exp)
json.dump(old, open(d + ".expect", "w"))
PY
}
mkdir -p "$S"
table "$S" train.parquet 8
table "$S" split/more.parquet 4 plain
echo notes > "$S/README.txt"

ok "dry run" pq create "$T/ds" "$S" --dry-run --json
check "12 rows planned, the schema of the columns, README and the struct column not read" python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dry_run"] and d["planned"] == 12 and d["skipped"] == 0, d
assert d["unused_objects"] == [{"key": "README.txt", "reason": "not a sample: not a Parquet file"}], d["unused_objects"]
assert d["unused"] == 1, d["unused"]
assert list(d["unused_columns"]) == ["meta"], d["unused_columns"]
s = {t["name"]: (t["dtype"], t["shape"], t["kind"], t["classes"]) for t in d["schema"]}
assert s["images"] == ("u8", [None, None, 3], "image", []), s
assert s["caption"] == ("u8", [None], "text", []), s
assert s["score"] == ("f32", [], "generic", []), s
assert s["count"] == ("i64", [], "generic", []), s
assert s["emb"] == ("f32", [None], "generic", []), s
assert s["labels"] == ("i32", [], "class_label", ["bird", "cat", "dog"]), s
assert "meta" not in s and "file_name" not in s and "png_or_jpg" not in s, s
PY
check "wrote nothing" test ! -e "$T/ds"

fails "1 bad row of 12 over --max-skip 0.05 (exit 3)" 3 pq create "$T/ds" "$S" --max-skip 0.05 --json
check "the error names the file and the row" python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rejected"] and d["skipped"] == 1, d
e, = d["errors"]
assert e["key"] == "train.parquet/5.jpg" and e["file"] == "train.parquet" and e["row"] == 5, e
assert "cannot decode image 'train.parquet/5.jpg'" in e["reason"], e
PY
fails "a rejected create leaves no dataset (exit 3)" 3 dlk ls "$T/ds"

ok "create, resized" pq create "$T/ds" "$S" --resize 16x16 --fit crop --json
check "11 rows, the bad one skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==11 and d["skipped"]==1, d' "$OUT"
check "every row's values are its table row's" python3 - "$(ds_rows "$T/ds" caption score count emb labels)" "$S.expect" <<'PY'
import json, sys
got, exp = json.loads(sys.argv[1]), json.load(open(sys.argv[2]))
del exp["train.parquet/5.jpg"]
assert sorted(got) == sorted(exp), (sorted(got), sorted(exp))
for k in exp:
    assert got[k] == exp[k], (k, got[k], exp[k])
PY
ok "the same bytes as files, from-dir" dlk create "$T/files" from-dir "$S.files" --resize 16x16 --fit crop --max-skip 0.5 --no-metadata
check "each image decoded and resized as from-dir does it" python3 - "$(ds_rows "$T/ds" images)" "$(sed "s|$S.files/|/src/|g" <<<"$(ds_rows "$T/files" images)")" <<'PY'
import json, sys
a = json.loads(sys.argv[1])
b = {k.split("/src/")[-1]: v for k, v in json.loads(sys.argv[2]).items()}
assert len(a) == 11 and sorted(a) == sorted(b), (sorted(a), sorted(b))
def flat(v):
    return [x for y in v for x in flat(y)] if isinstance(v, list) else [v]
for k in a:
    assert len(flat(a[k])) == 16 * 16 * 3 and a[k] == b[k], k
assert len({tuple(flat(v)) for v in a.values()}) == 11, "the images differ"
PY
ok "verify" dlk verify "$T/ds"

ok "rerun: nothing new" pq ingest "$T/ds" "$S" --resize 16x16 --fit crop --json
check "11 present, the bad row tried again" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["present"]==11 and d["new"]==1 and d["skipped"]==1, d' "$OUT"
table "$S" split/late.parquet 3 plain
ok "rerun after a file was added" pq ingest "$T/ds" "$S" --resize 16x16 --fit crop --json
check "its 3 rows only" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==3 and d["present"]==11 and d["new"]==4, d' "$OUT"
check "their values" python3 - "$(ds_rows "$T/ds" caption score count emb labels)" "$S.expect" <<'PY'
import json, sys
got, exp = json.loads(sys.argv[1]), json.load(open(sys.argv[2]))
for k in ("split/late.parquet/0.jpg", "split/late.parquet/1.png", "split/late.parquet/2.jpg"):
    assert got[k] == exp[k], (k, got[k], exp[k])
assert len(got) == 14, len(got)
PY
touch -d '2001-01-01' "$S/split/more.parquet"
ok "rerun after a file was rewritten" pq ingest "$T/ds" "$S" --resize 16x16 --fit crop --json
check "its rows are changed, skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["changed"]==4 and d["present"]==10, d
assert sorted(k.split("/src/")[-1] for k in d["changed_keys"])==["split/more.parquet/%d.%s" % (i, "png" if i == 1 else "jpg") for i in range(4)], d["changed_keys"]' "$OUT"

fails "a table without images (exit 2)" 2 pq create "$T/none" "$S/split/late.parquet" --image caption
check "names the column" grep -q "column 'caption' is string, not encoded image bytes" "$ERR"

# a null image is a skipped row, as a file a metadata file names and the
# source lacks
python3 - "$T/nul/n.parquet" <<'PY'
import io, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from PIL import Image
b = io.BytesIO()
Image.new("RGB", (8, 8), (1, 2, 3)).save(b, "JPEG")
os.makedirs(os.path.dirname(sys.argv[1]))
pq.write_table(pa.table({"image": pa.array([b.getvalue(), None], pa.binary()),
                         "caption": ["one", "two"]}), sys.argv[1])
PY
ok "a table with a null image" pq create "$T/nul.ds" "$T/nul/n.parquet" --max-skip 0.5 --json
check "its row skipped, named" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==1 and d["skipped"]==1, d
assert [(e["key"], e["row"]) for e in d["errors"]]==[("n.parquet/1.jpg", 1)], d["errors"]
assert "no such object" in d["errors"][0]["reason"], d["errors"]' "$OUT"

# Ctrl-C: the rows appended are kept, the same command continues (a
# background job ignores SIGINT unless it asks for Python's handler)
python3 - "$T/big/b.parquet" <<'PY'
import io, os, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from PIL import Image
rng = np.random.default_rng(7)
data = []
for i in range(4000):
    b = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)).save(b, "JPEG")
    data.append(b.getvalue())
os.makedirs(os.path.dirname(sys.argv[1]))
pq.write_table(pa.table({"image": pa.array(data, pa.binary())}), sys.argv[1])
PY
# once its first chunk is written (of 12: a loaded machine's delay in
# seeing it still leaves the run most of its work), the run is stopped
pq_interrupted "Ctrl-C mid-run (exit 130)" "$T/big.ds" create "$T/big.ds" "$T/big" --jobs 1
check "says how to continue" grep -q "run the same command to continue" "$ERR"
ok "the same command again" pq create "$T/big.ds" "$T/big" --jobs 1 --json
check "it resumed: every row once" python3 - "$OUT" "$DLK" "$T/big.ds" <<'PY'
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
assert d["resumed"] > 0 and d["resumed"] + d["ingested"] == 4000, d
keys = subprocess.check_output([sys.argv[2], "cat", sys.argv[3], "key", "0:", "--json"]).splitlines()
keys = {bytes(json.loads(k)["values"]).decode().split("/big/")[-1] for k in keys}
assert keys == {"b.parquet/%d.jpg" % i for i in range(4000)}, len(keys)
PY
