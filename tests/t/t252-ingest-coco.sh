#!/usr/bin/env bash
# COCO-style annotations (--coco FILE|URL): each image of "images" that the
# source holds is a row with its boxes (f32 [N,4], N from 0 up, as COCO's
# [x, y, width, height]), their category ids (i64 [N], the categories'
# names as class names by id) and its image id; other images are not
# samples, an image named that the source lacks is a skipped row; a rerun
# ingests the images added since; bad annotation files are named errors;
# from a directory and from S3 (moto) alike.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
if ! python3 -c 'import PIL' 2>/dev/null; then
    skip "ingest coco" "needs Pillow: python3 -m pip install pillow"
    exit 0
fi
S=$T/imgs
small_jpegs "$S" 0000.jpg 0001.jpg 0002.jpg 0003.jpg 0004.jpg 0005.jpg stray.jpg
# coco N_IMAGES FILE: images 0..N-1 (ids 100+i), image i with i % 3
# boxes [i, k, 10 + k, 5.5] of categories 1, 3, 1; plus gone.jpg (id 999)
coco() {
    python3 - "$@" <<'PY'
import json, sys
n, out = int(sys.argv[1]), sys.argv[2]
images = [{"id": 100 + i, "file_name": "%04d.jpg" % i, "width": 16, "height": 12} for i in range(n)]
images.append({"id": 999, "file_name": "gone.jpg"})
anns = [{"id": 1 + len(images) * 10 + i * 3 + k, "image_id": 100 + i,
         "bbox": [i, k, 10 + k, 5.5], "category_id": [1, 3][k % 2],
         "area": 1, "iscrowd": 0}
        for i in range(n) for k in range(i % 3)]
json.dump({"images": images, "annotations": anns,
           "categories": [{"id": 1, "name": "person"}, {"id": 3, "name": "car"}]},
          open(out, "w"))
PY
}
# DATASET: {key below the source: [boxes, category_ids, image_id]}
rows() {
    python3 - "$DLK" "$1" <<'PY'
import json, subprocess, sys
dlk, ds = sys.argv[1], sys.argv[2]
def col(t):
    out = subprocess.check_output([dlk, "cat", ds, t, "0:", "--json"])
    return [json.loads(l) for l in out.splitlines()]
keys = ["".join(map(chr, o["values"])).split("/")[-1] for o in col("key")]
b, c, i = col("boxes"), col("category_ids"), col("image_id")
print(json.dumps({k: [[b[j]["shape"], b[j]["values"]], [c[j]["shape"], c[j]["values"]], i[j]["values"][0]]
                  for j, k in enumerate(keys)}, sort_keys=True))
PY
}
# ROWS-JSON N: rows 0..N-1 are as coco() wrote them
rows_ok() {
    python3 - "$1" "$2" <<'PY'
import json, sys
r, n = json.loads(sys.argv[1]), int(sys.argv[2])
assert sorted(r) == ["%04d.jpg" % i for i in range(n)], sorted(r)
for i in range(n):
    m = i % 3
    want = [[[m, 4], [float(x) for k in range(m) for x in (i, k, 10 + k, 5.5)]],
            [[m], [[1, 3][k % 2] for k in range(m)]], 100 + i]
    assert r["%04d.jpg" % i] == want, (i, r["%04d.jpg" % i], want)
PY
}

coco 5 "$S/instances.json"
ok "dry run" dlk create "$T/ds" from-dir "$S" --coco "$S/instances.json" --dry-run --json
check "5 rows planned, gone.jpg skipped, the stray, 0005.jpg and the file itself not ingested" python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["planned"] == 5 and d["skipped"] == 1, d
assert d["errors"] == [{"key": "gone.jpg", "reason": "no such object: the COCO file names it, the source lacks it"}], d["errors"]
u = {o["key"]: o["reason"] for o in d["unused_objects"]}
assert u == {"instances.json": "not a sample: the --coco file",
             "stray.jpg": "not a sample: the COCO file names no such image",
             "0005.jpg": "not a sample: the COCO file names no such image"}, u
s = {t["name"]: (t["dtype"], t["shape"], t["kind"], t["classes"]) for t in d["schema"]}
assert s["boxes"] == ("f32", [None, 4], "bbox", []), s
assert s["category_ids"] == ("i64", [None], "generic", ["", "person", "", "car"]), s
assert s["image_id"] == ("i64", [], "generic", []), s
PY
check "wrote nothing" test ! -e "$T/ds"
ok "create with --coco" dlk create "$T/ds" from-dir "$S" --coco "$S/instances.json" --max-skip 0.5 --json
check "5 rows, 1 skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==5 and d["skipped"]==1, d' "$OUT"
check "boxes [N,4] (N = 0, 1, 2), their categories and the image ids" rows_ok "$(rows "$T/ds")" 5
ok "verify" dlk verify "$T/ds"

coco 6 "$S/instances.json"
ok "rerun after an image was annotated" dlk ingest "$T/ds" from-dir "$S" --coco "$S/instances.json" --max-skip 0.5 --json
check "1 new row, 5 present" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==1 and d["new"]==1 and d["present"]==5, d' "$OUT"
check "all 6 rows" rows_ok "$(rows "$T/ds")" 6

fails "--coco with --labels (exit 2)" 2 dlk ingest "$T/ds" from-dir "$S" --coco "$S/instances.json" --labels "$S/instances.json"
check "says so" grep -q -- "--labels and --coco cannot be combined" "$ERR"
# bad files: each a named error, nothing written
B=$T/bad.json
bad() { # NAME JSON MESSAGE
    printf '%s' "$2" > "$B"
    fails "$1 (exit 3)" 3 dlk create "$T/bad" from-dir "$S" --coco "$B"
    check "names it: $3" grep -qF "$3" "$ERR"
    check "$1: nothing written" test ! -e "$T/bad/dlk.json"
}
bad "not JSON" '{"images": [' "COCO file '$B' is not a JSON object"
bad "no annotations" '{"images": []}' "has no \"images\" and \"annotations\" arrays"
bad "a box of 3 numbers" '{"images": [{"id": 1, "file_name": "0000.jpg"}], "annotations": [{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3]}]}' "annotation 0: bbox is not 4 numbers"
bad "an unknown image" '{"images": [{"id": 1, "file_name": "0000.jpg"}], "annotations": [{"image_id": 7, "category_id": 1, "bbox": [1, 2, 3, 4]}]}' "annotation 0 names image_id 7, which \"images\" lacks"
bad "an image id twice" '{"images": [{"id": 1, "file_name": "0000.jpg"}, {"id": 1, "file_name": "0001.jpg"}], "annotations": []}' "image id 1 appears twice"
bad "a file twice" '{"images": [{"id": 1, "file_name": "0000.jpg"}, {"id": 2, "file_name": "0000.jpg"}], "annotations": []}' "file_name '0000.jpg' appears twice"
bad "a category id out of range" '{"images": [], "annotations": [], "categories": [{"id": -1, "name": "x"}]}' "category 0 has no id in 0..999999"

# S3: the images and the annotation file on S3
s3_start
s3_mkbucket raw
s3_mkbucket lake
s3_put_tree "$S" s3://raw/imgs
ok "create from-s3 with --coco s3://" dlk create s3://lake/ds from-s3 s3://raw/imgs --coco s3://raw/imgs/instances.json --max-skip 0.5 --json
check "6 rows, 1 skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==6 and d["skipped"]==1, d' "$OUT"
check "from-s3 equals from-dir row by row" test "$(rows s3://lake/ds)" = "$(rows "$T/ds")"
ok "S3: verify" dlk verify s3://lake/ds
