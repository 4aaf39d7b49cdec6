#!/usr/bin/env bash
# What a source is made of, from a directory and from S3 (moto): files
# that cannot be samples (README.txt, .DS_Store, _SUCCESS, Thumbs.db, a
# lone notes.txt, the --labels manifest) never become a tensor nor a bad
# row, and are reported as not ingested; a sidecar kind becomes a tensor
# only when most rows have one; --dry-run prints the plan and the schema
# and writes nothing; --json has the schema.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
if ! python3 -c 'import PIL' 2>/dev/null; then
    skip "ingest strays" "needs Pillow: python3 -m pip install pillow"
    exit 0
fi
# DIR NAME... : a 32x24 JPEG at DIR/NAME.jpg for each NAME
jpegs() {
    python3 - "$@" <<'EOF'
import os, sys
from PIL import Image
d = sys.argv[1]
for i, n in enumerate(sys.argv[2:]):
    p = os.path.join(d, n + ".jpg")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    Image.new("RGB", (32, 24), (i * 30 % 256, 90, 160)).save(p, quality=90)
EOF
}

S=$T/train
jpegs "$S" cat/c1 cat/c2 cat/c3 dog/d1 dog/d2 dog/d3
echo "a dataset of cats and dogs" > "$S/README.txt"
: > "$S/.DS_Store"; : > "$S/_SUCCESS"; : > "$S/cat/.DS_Store"
: > "$S/cat/Thumbs.db"; echo "dogs" > "$S/dog/README.txt"
echo "taken in 2019" > "$S/dog/notes.txt"
strays='[".DS_Store", "README.txt", "_SUCCESS", "cat/.DS_Store", "cat/Thumbs.db", "dog/README.txt", "dog/notes.txt"]'

# the plan of a create; a dataset of images and labels only
plan_ok() { # JSON
    python3 - "$1" "$strays" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); strays = json.loads(sys.argv[2])
KEYS = ("key", "key_version")  # the source keys every row gets
assert d["dry_run"] and d["planned"] == 6 and d["ingested"] == 0, d
assert d["skipped"] == 0 and d["errors"] == [], d
assert sorted(x["key"] for x in d["unused_objects"]) == strays, d["unused_objects"]
assert d["unused"] == 7 and sum(d["unused_reasons"].values()) == 7, d
r = {x["key"]: x["reason"] for x in d["unused_objects"]}
assert r["README.txt"].startswith("not a sample"), r
assert r["dog/notes.txt"] == "not a sample: no image or video has its stem", r
assert [t["name"] for t in d["schema"] if t["name"] not in KEYS] == ["images", "labels"], d["schema"]
t = {x["name"]: x for x in d["schema"]}
assert t["images"] == {"name": "images", "dtype": "u8", "shape": [None, None, 3],
                       "kind": "image", "codec": "none", "classes": []}, t
assert t["labels"]["classes"] == ["cat", "dog"] and t["labels"]["shape"] == [], t
EOF
}
# the outcome of a real run over the same tree
run_ok() { # JSON
    python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
KEYS = ("key", "key_version")
assert d["ingested"] == 6 and d["skipped"] == 0 and d["errors"] == [], d
assert d["unused"] == 7 and not d["dry_run"] and d["complete"], d
assert [t["name"] for t in d["schema"] if t["name"] not in KEYS] == ["images", "labels"], d["schema"]
EOF
}

DS=$(ds_url ds)
ok "create --dry-run --json" dlk create "$DS" from-dir "$S" --dry-run --json
check "plan: 6 rows, 7 strays with reasons, schema images+labels" plan_ok "$OUT"
check "--dry-run wrote nothing" test ! -e "$DS"
ok "create --dry-run" dlk create "$DS" from-dir "$S" --dry-run
check "prints the plan" grep -q "dry run, nothing written: would ingest 6 rows" "$OUT"
check "prints the schema" grep -Eq "^  labels +i32 +scalar +class_label +none +classes: cat, dog" "$OUT"
check "prints the reasons" grep -q "not ingested: 1 not a sample: no image or video has its stem" "$OUT"
check "names the strays on stderr" grep -q "not ingested 'dog/README.txt': not a sample" "$ERR"
check "still nothing written" test ! -e "$DS"

ok "create from-dir with strays" dlk create "$DS" from-dir "$S" --json
check "every image ingested, the strays reported, not skipped" run_ok "$OUT"
ok "ls" dlk ls "$DS" --json
check "only images and labels, 6 samples each" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); KEYS=("key","key_version")
assert [(t["name"], t["samples"]) for t in d["tensors"] if t["name"] not in KEYS] == [("images", 6), ("labels", 6)], d' "$OUT"
ok "text output" dlk create "$T/text" from-dir "$S"
check "counts the objects not ingested" grep -q "; 0 skipped; 7 objects not ingested$" "$OUT"

check "no schema printed off a terminal" sh -c "! grep -q '^schema:' '$ERR'"
if command -v script >/dev/null; then
    ok "create on a terminal" script -qec "'$DLK' create '$T/tty' from-dir '$S'" /dev/null
    check "the schema is printed before the rows" python3 -c '
import sys; o=open(sys.argv[1]).read().replace("\r", "")
s, l, i = o.find("schema:\n"), o.find("\n  labels "), o.find("ingested 6 rows")
assert 0 <= s < l < i, o' "$OUT"
else
    skip "create on a terminal" "script(1) missing (util-linux)"
fi

# --dry-run of an ingest into the dataset: the head stays as it is
cp "$T/ds/staging/manifest.json" "$T/head.before"
find "$T/ds" | sort > "$T/files.before"
ok "ingest --dry-run --json" dlk ingest "$DS" from-dir "$S" --no-resume --dry-run --json
check "plans no row (the 6 are there, by key) with the dataset's schema" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); KEYS=("key","key_version")
assert d["dry_run"] and d["planned"] == 0 and d["present"] == 6 and d["ingested"] == 0 and d["unused"] == 7, d
assert [t["name"] for t in d["schema"] if t["name"] not in KEYS] == ["images", "labels"], d["schema"]' "$OUT"
find "$T/ds" | sort > "$T/files.after"
check "ingest --dry-run wrote nothing" sh -c "cmp '$T/head.before' '$T/ds/staging/manifest.json' && cmp '$T/files.before' '$T/files.after'"

# sidecars: a tensor when most rows have one, not when one row has
F=$T/flat
jpegs "$F" 001 002 003 004
for i in 001 002 003; do printf 'caption %s' $i > "$F/$i.txt"; done
ok "3 of 4 rows with a .txt: dry run" dlk create "$T/many" from-dir "$F" --dry-run --json
check "text is a tensor" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); KEYS=("key","key_version")
assert [t["name"] for t in d["schema"] if t["name"] not in KEYS] == ["images", "text"], d["schema"]
assert d["planned"] == 4 and d["unused"] == 0, d' "$OUT"
rm "$F/001.txt" "$F/002.txt"
ok "1 of 4 rows with a .txt" dlk create "$T/one" from-dir "$F" --json
check "no text tensor; every image ingested; the .txt reported" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); KEYS=("key","key_version")
assert [t["name"] for t in d["schema"] if t["name"] not in KEYS] == ["images"], d["schema"]
assert d["ingested"] == 4 and d["skipped"] == 0, d
assert d["unused_objects"] == [{"key": "003.txt", "reason": "not used: the schema has no text tensor"}], d' "$OUT"

# a label manifest inside the source is no sample
M=$T/m
jpegs "$M" a b c
printf '{"key": "a.jpg", "label": "x"}\n{"key": "b.jpg", "label": "y"}\n{"key": "c.jpg", "label": "x"}\n' > "$M/labels.json"
ok "--labels naming a file in the source" dlk create "$T/mds" from-dir "$M" --labels "$M/labels.json" --json
check "3 rows, the manifest not ingested" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); KEYS=("key","key_version")
assert d["ingested"] == 3 and d["skipped"] == 0, d
assert [t["name"] for t in d["schema"] if t["name"] not in KEYS] == ["images", "labels"], d["schema"]
assert d["unused_objects"] == [{"key": "labels.json", "reason": "not a sample: the --labels manifest"}], d' "$OUT"

# the same tree from S3
s3_start
s3_mkbucket raw
s3_mkbucket lake
s3_put_tree "$S" s3://raw/train
ok "from-s3 --dry-run --json" dlk create s3://lake/ds from-s3 s3://raw/train --dry-run --json
check "plan: 6 rows, 7 strays, schema images+labels" plan_ok "$OUT"
check "nothing written to the bucket" python3 -c '
import os, boto3
r = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).list_objects_v2(Bucket="lake")
assert r["KeyCount"] == 0, r.get("Contents")'
ok "create from-s3 with strays" dlk create s3://lake/ds from-s3 s3://raw/train --json
check "every image ingested, the strays reported, not skipped" run_ok "$OUT"
