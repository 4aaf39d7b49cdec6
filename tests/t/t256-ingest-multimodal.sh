#!/usr/bin/env bash
# Multimodal rows, their schema inferred from every source: the same 12
# rows of an image, a caption, numbers and an embedding (and the class
# from the folder or a .cls), given as a folder of files with sidecars
# (STEM.png, STEM.txt, STEM.json, STEM.emb.npy), as WebDataset tar shards
# written by webdataset's own TarWriter, and as a Hugging Face ImageFolder
# metadata.jsonl (the embedding a list column); each from a directory and
# from S3 (moto).  The .npy sidecars become a tensor of the dtype and
# shape of their headers (a length they disagree on variable), read from
# the first bytes of each object; every value read back equals the
# source's; a rerun adds nothing.  An .npy naming a tensor the row fills
# otherwise, or of another dtype than its siblings, is an error naming it.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
need_wds

# the rows: DIR/files/{cat,dog}/rNN.*, DIR/wds/src/00000{0,1}.tar,
# DIR/meta/src/ (images and metadata.jsonl), and DIR/expect.json:
# {stem: [pixels' sha1, caption, score, n, embedding, class]}
python3 - "$T/gen" <<'PY'
import hashlib, io, json, os, sys
import numpy as np, webdataset as wds
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(256)
rows, exp = [], {}
for i in range(12):
    px = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    r = {"stem": "r%02d" % i, "px": px, "caption": "row %d: \"a caption\", é" % i,
         "score": 0.25 * i, "n": i * 3, "emb": rng.standard_normal(8).astype(np.float32),
         "cls": ["cat", "dog"][i % 2]}
    rows.append(r)
    exp[r["stem"]] = [hashlib.sha1(px.tobytes()).hexdigest(), r["caption"], r["score"],
                      float(r["n"]), [float(x) for x in r["emb"]], r["cls"]]
def png(px):
    b = io.BytesIO(); Image.fromarray(px).save(b, "PNG"); return b.getvalue()
# a folder of files, a folder a class
for r in rows:
    p = os.path.join(d, "files", "src", r["cls"], r["stem"])
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p + ".png", "wb").write(png(r["px"]))
    open(p + ".txt", "w").write(r["caption"])
    json.dump({"score": r["score"], "n": r["n"]}, open(p + ".json", "w"))
    np.save(p + ".emb.npy", r["emb"])
# two tar shards by webdataset's writer
os.makedirs(os.path.join(d, "wds", "src"))
for s in range(2):
    with wds.TarWriter(os.path.join(d, "wds", "src", "%06d.tar" % s)) as w:
        for r in rows[s * 6:(s + 1) * 6]:
            w.write({"__key__": r["stem"], "png": png(r["px"]), "txt": r["caption"],
                     "json": {"score": r["score"], "n": r["n"]}, "emb.npy": r["emb"],
                     "cls": r["cls"]})
# ImageFolder metadata: the embedding a list, the class a label column
m = os.path.join(d, "meta", "src")
os.makedirs(m)
with open(os.path.join(m, "metadata.jsonl"), "w") as f:
    for r in rows:
        open(os.path.join(m, r["stem"] + ".png"), "wb").write(png(r["px"]))
        f.write(json.dumps({"file_name": r["stem"] + ".png", "caption": r["caption"],
                            "score": r["score"], "n": r["n"],
                            "emb": [float(x) for x in r["emb"]], "label": r["cls"]}) + "\n")
json.dump(exp, open(os.path.join(d, "expect.json"), "w"))
PY
[ -f "$T/gen/expect.json" ] || { echo "not ok - the sources were not made"; exit 1; }

# FORM DATASET: its rows against expect.json (the caption tensor "text"
# from sidecars, "caption" from metadata; "n" f32 from a .json, i64 from
# metadata)
rows_match() {
    local text=text
    [ "$1" = meta ] && text=caption
    ds_rows "$2" images "$text" score n emb labels >"$T/rows.json" 2>/dev/null || {
        echo "cannot read the rows of $2" >&2; return 1; }
    python3 - "$T/rows.json" "$T/gen/expect.json" "$2" "$DLK" <<'PY'
import hashlib, json, os, subprocess, sys
import numpy as np
rows, exp, ds, dlk = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
got = {}
for i, (k, v) in enumerate(rows.items()):
    stem = os.path.splitext(os.path.basename(k))[0]
    px = np.asarray(v[0], np.uint8)
    got[stem] = [hashlib.sha1(px.tobytes()).hexdigest()] + v[1:]
assert sorted(got) == sorted(exp), (sorted(got), sorted(exp))
for s, e in exp.items():
    g = got[s]
    assert g[0] == e[0], (s, "pixels")
    assert g[1] == e[1], (s, g[1], e[1])
    assert abs(g[2] - e[2]) < 1e-6 and abs(g[3] - e[3]) < 1e-6, (s, g[2:4], e[2:4])
    assert np.allclose(np.float32(g[4]), np.float32(e[4]), rtol=0, atol=0), (s, g[4], e[4])
    assert g[5] == e[5], (s, g[5], e[5])
print(len(got))
PY
}

# FORM SOURCE-ARGS...: dry run, ingest, rows, rerun
one_form() {
    local form=$1 ds=$T/ds-$1-$2; shift 2
    ok "$form: --dry-run infers the schema" dlk create "$ds" "$@" --dry-run --json
    check "$form: images, labels, caption, score, n and an f32 [8] embedding" python3 - "$OUT" "$form" <<'PY'
import json, sys
d, form = json.load(open(sys.argv[1])), sys.argv[2]
s = {t["name"]: (t["dtype"], t["shape"], t["kind"]) for t in d["schema"]}
text = "caption" if form == "meta" else "text"
assert s["images"][2] == "image" and s["labels"][2] == "class_label", s
assert s[text] == ("u8", [None], "text"), s
assert s["score"][:2] == ("f32", []), s
assert s["n"][:2] == (("i64" if form == "meta" else "f32"), []), s
assert s["emb"][:2] == ("f32", [8 if form != "meta" else None]), s
assert d["planned"] == 12, d
PY
    ok "$form: create" dlk create "$ds" "$@" --json
    check "$form: 12 rows" sh -c 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"ingested\"] == 12 and d[\"skipped\"] == 0, d" "$1"' sh "$OUT"
    ok "$form: every value is the source's" rows_match "$form" "$ds"
    check "$form: ... all 12" test "$(cat "$OUT")" = 12
    ok "$form: a rerun" dlk ingest "$ds" "$@" --json
    check "$form: adds nothing" sh -c 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"ingested\"] == 0 and d[\"present\"] == 12, d" "$1"' sh "$OUT"
}

for f in files wds meta; do
    one_form "$f" dir from-dir "$T/gen/$f/src"
done

s3_start
s3_mkbucket multi
for f in files wds meta; do
    s3_put_tree "$T/gen/$f/src" "s3://multi/$f/src"
    one_form "$f" s3 from-s3 "s3://multi/$f/src/"
done

# embeddings of two lengths: a variable dimension
V=$T/var/src
mkdir -p "$V/a"
python3 - "$V/a" <<'PY'
import sys, numpy as np
from PIL import Image
for i in range(4):
    Image.new("RGB", (8, 6), (i * 40, 0, 0)).save("%s/v%d.png" % (sys.argv[1], i))
    np.save("%s/v%d.emb.npy" % (sys.argv[1], i), np.arange(4 + i % 2, dtype=np.float32))
PY
ok "embeddings of 4 and 5 values: --dry-run" dlk create "$T/dsv" from-dir "$V" --dry-run --json
check "an f32 tensor of shape [?]" sh -c 'python3 -c "
import json, sys
s = {t[\"name\"]: t for t in json.load(open(sys.argv[1]))[\"schema\"]}
assert s[\"emb\"][\"dtype\"] == \"f32\" and s[\"emb\"][\"shape\"] == [None], s[\"emb\"]" "$1"' sh "$OUT"
ok "ingested" dlk create "$T/dsv" from-dir "$V" --quiet
ok "dlk cat emb 1" dlk cat "$T/dsv" emb 1 --json
check "holds its own 4 or 5 values" python3 -c 'import json, sys
o = json.loads(open(sys.argv[1]).read())
assert o["values"] in ([0, 1, 2, 3], [0, 1, 2, 3, 4]), o' "$OUT"

# .npy sidecars larger than a header read (80 KB each): only their
# headers are read to infer the tensor, from files, a .tar, a .tar.gz and S3
L=$T/large
mkdir -p "$L/files/a" "$L/tar" "$L/tgz"
python3 - "$L" <<'PY'
import io, sys, tarfile, numpy as np
from PIL import Image
root = sys.argv[1]
for kind, mode in (("tar", "w"), ("tgz", "w:gz")):
    name = "%s/%s/000000.%s" % (root, kind, "tar" if kind == "tar" else "tar.gz")
    with tarfile.open(name, mode) as t:
        for i in range(3):
            for ext, data in (("png", None), ("emb.npy", None)):
                b = io.BytesIO()
                if ext == "png":
                    Image.new("RGB", (8, 6), (i * 40, 0, 0)).save(b, "PNG")
                else:
                    np.save(b, np.full(20000, i + 0.5, np.float32))
                if kind == "tar":
                    open("%s/files/a/l%d.%s" % (root, i, ext), "wb").write(b.getvalue())
                ti = tarfile.TarInfo("l%d.%s" % (i, ext)); ti.size = len(b.getvalue())
                t.addfile(ti, io.BytesIO(b.getvalue()))
PY
s3_put_tree "$L/files" "s3://multi/large/files"
for src in "from-dir $L/files" "from-dir $L/tar" "from-dir $L/tgz" "from-s3 s3://multi/large/files/"; do
    ok "80 KB embeddings ($src): --dry-run" dlk create "$T/dsl" $src --dry-run --json
    check "an f32 tensor of shape [20000] ($src)" python3 -c 'import json, sys
s = {t["name"]: t for t in json.load(open(sys.argv[1]))["schema"]}
assert s["emb"]["dtype"] == "f32" and s["emb"]["shape"] == [20000], s' "$OUT"
done
ok "80 KB embeddings from a .tar.gz: ingested" dlk create "$T/dsl" from-dir "$L/tgz" --quiet
ok "dlk cat emb 0:" dlk cat "$T/dsl" emb 0: --json
check "each row holds its own values" python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = sorted(r["values"][0] for r in rows)
assert got == [0.5, 1.5, 2.5] and all(len(r["values"]) == 20000 for r in rows), got' "$OUT"

# an .npy of another dtype than the others of its name
python3 -c 'import numpy as np, sys; np.save(sys.argv[1], np.arange(4, dtype=np.int64))' "$V/a/v2.emb.npy"
fails "an i64 embedding beside f32 ones" 3 dlk create "$T/dsv2" from-dir "$V" --dry-run
check "names the file and the two dtypes" grep -q "v2.emb.npy' holds i64, another 'emb' file f32: give tensor 'emb' with --tensor" "$ERR"
rm "$V/a/v2.emb.npy"
# an .npy naming a tensor the images fill
python3 -c 'import numpy as np, sys
for i in range(4): np.save(sys.argv[1] + "/v%d.images.npy" % i, np.zeros((6, 8, 3), np.uint8))' "$V/a"
fails "an .npy sidecar named images beside the images" 3 dlk create "$T/dsv3" from-dir "$V" --dry-run
check "says which tensor, and --tensor" grep -q "npy files name tensor 'images', which the source fills otherwise too: give the tensors with --tensor" "$ERR"
