#!/usr/bin/env bash
# Parquet tables written by Hugging Face's own library (datasets'
# Dataset.to_parquet, as the hub holds a split: data/train-0000N-of-0000M
# files), not by this project's code: an Image feature (PIL images,
# stored as PNG bytes in a {bytes, path} struct), a ClassLabel, a string
# and a float32 column.  Every row's pixels are the array it was made
# from (PNG is lossless), its label the ClassLabel's name, its text and
# score the table's; the same rows whether the images are held or read
# again (--hold-mb 0); a rerun adds nothing; --dry-run tells the schema.
. "$DLK_TESTS/lib.sh"
py_modules "ingest parquet from datasets" pyarrow PIL numpy datasets || exit 0
py_binding "ingest parquet from datasets" || exit 0

S=$T/hub
python3 - "$S" "$T/expect.npz" <<'PY' 2>/dev/null
import os, sys
import numpy as np
from PIL import Image
import datasets
d, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(5)
n = 300
arrays = [rng.integers(0, 256, (18 + i % 7, 14 + i % 5, 3), dtype=np.uint8) for i in range(n)]
feats = datasets.Features({"image": datasets.Image(),
                           "label": datasets.ClassLabel(names=["cat", "dog", "fish"]),
                           "text": datasets.Value("string"),
                           "score": datasets.Value("float32")})
ds = datasets.Dataset.from_dict({"image": [Image.fromarray(a) for a in arrays],
                                 "label": [i % 3 for i in range(n)],
                                 "text": ["row %d, \u00e9t\u00e9" % i for i in range(n)],
                                 "score": [i / 4 for i in range(n)]}, features=feats)
os.makedirs(d + "/data")
for k in range(2):
    ds.shard(num_shards=2, index=k, contiguous=True).to_parquet(
        "%s/data/train-%05d-of-00002.parquet" % (d, k))
np.savez(out, **{"a%d" % i: a for i, a in enumerate(arrays)})
PY

ok "dry run" pq create "$T/ds" "$S" --dry-run --json
check "the schema from datasets' features" python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["planned"] == 300 and d["skipped"] == 0, d
s = {t["name"]: (t["dtype"], t["shape"], t["kind"], t["classes"]) for t in d["schema"]}
assert s["images"] == ("u8", [None, None, 3], "image", []), s
assert s["labels"] == ("i32", [], "class_label", ["cat", "dog", "fish"]), s
assert s["text"] == ("u8", [None], "text", []), s
assert s["score"] == ("f32", [], "generic", []), s
PY
for h in 256 0; do
    ok "create, --hold-mb $h" pq create "$T/ds$h" "$S" --hold-mb "$h" --json
    check "--hold-mb $h: every row's pixels, label, text and score as made" \
        python3 - "$OUT" "$DLK" "$T/ds$h" "$T/expect.npz" <<'PY'
import json, subprocess, sys
import numpy as np
d = json.load(open(sys.argv[1]))
assert d["ingested"] == 300 and d["skipped"] == 0, d
dlk, ds = sys.argv[2], sys.argv[3]
exp = np.load(sys.argv[4])
def col(t):
    out = subprocess.check_output([dlk, "cat", ds, t, "0:", "--json"])
    return [json.loads(l) for l in out.splitlines()]
names = ["cat", "dog", "fish"]
seen = set()
for k, im, lab, txt, sc in zip(col("key"), col("images"), col("labels"), col("text"), col("score")):
    key = bytes(k["values"]).decode().split("/hub/")[-1]
    f, _, row = key.rpartition("/")
    i = int(row.split(".")[0]) + (150 if f.endswith("00001-of-00002.parquet") else 0)
    a = exp["a%d" % i]
    assert im["shape"] == list(a.shape) and np.array_equal(np.array(im["values"], np.uint8).reshape(a.shape), a), key
    assert lab["values"] == i % 3 or lab["values"] == [i % 3], (key, lab)
    assert bytes(txt["values"]).decode() == "row %d, \u00e9t\u00e9" % i, (key, txt)
    v = sc["values"]
    assert (v[0] if isinstance(v, list) else v) == i / 4, (key, sc)
    seen.add(i)
assert seen == set(range(300)), len(seen)
PY
done
check "held and read again: the same dataset" diff <(dump "$T/ds256") <(dump "$T/ds0")
ok "rerun" pq ingest "$T/ds0" "$S" --hold-mb 0 --json
check "nothing new" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["present"]==300, d' "$OUT"
