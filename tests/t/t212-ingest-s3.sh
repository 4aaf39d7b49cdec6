#!/usr/bin/env bash
# from-s3 through the S3 store against a real S3 server (moto): the result
# equals from-dir over the same tree sample by sample; listings past one
# page (1000 keys); a label-only source; a label manifest on S3.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest from-s3" "ffmpeg missing"; exit 0; }
upload() { # DIR s3://bucket/prefix
    python3 - "$1" "$2" <<'PY'
import os, sys, boto3
src, url = sys.argv[1], sys.argv[2][5:]
bucket, _, prefix = url.partition("/")
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for root, _, files in os.walk(src):
    for f in files:
        p = os.path.join(root, f)
        s3.upload_file(p, bucket, prefix.rstrip("/") + "/" + os.path.relpath(p, src))
PY
}

s3_start
s3_mkbucket raw
s3_mkbucket lake

S=$T/train
for c in cat dog; do
    mkdir -p "$S/$c"
    ff -f lavfi -i "testsrc2=s=500x375:r=10" -frames:v 6 -q:v 3 "$S/$c/$c%02d.jpg"
done
upload "$S" s3://raw/train
ok "create from-s3" dlk create s3://lake/ds from-s3 s3://raw/train --resize 64x48 --json
check "12 rows" grep -q '"ingested": 12' "$OUT"
ok "create from-dir (local) of the same tree" dlk create "$T/local" from-dir "$S" --resize 64x48 --quiet
# the keys and versions differ: the objects' URLs and ETags from S3,
# paths, sizes and mtimes from a directory
dump s3://lake/ds key key_version > "$T/s3.txt"
dump "$T/local" key key_version > "$T/dir.txt"
check "from-s3 equals from-dir sample by sample" cmp "$T/s3.txt" "$T/dir.txt"
fails "the same create again: the dataset exists (exit 2)" 2 dlk create s3://lake/ds from-s3 s3://raw/train --resize 64x48 --json
check "names the dataset" grep -q "already exists at 's3://lake/ds'" "$ERR"
ok "rerun with --exist-ok is a no-op" dlk create s3://lake/ds from-s3 s3://raw/train --resize 64x48 --json --exist-ok
check "nothing new: 12 keys present" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["new"]==0 and d["present"]==12 and d["complete"], d' "$OUT"
ok "verify" dlk verify s3://lake/ds

# 1100 label-only rows: the listing needs two pages
L=$T/lab
mkdir -p "$L"
python3 -c '
import sys
for i in range(1100):
    open("%s/%05d.cls" % (sys.argv[1], i), "w").write(str(i % 7))' "$L"
upload "$L" s3://raw/labels-only
ok "label-only source past one listing page" dlk create s3://lake/lab from-s3 s3://raw/labels-only --order sorted --json
check "1100 rows" grep -q '"ingested": 1100' "$OUT"
ok "label of row 1099" dlk cat s3://lake/lab labels 1099 --json
check "is 1099 % 7 = 0" grep -q '"values":\[0\]' "$OUT"

# a label manifest on S3
printf 'key,label\n' > "$T/m.csv"
for f in "$S"/*/*.jpg; do b=$(basename "$f"); echo "$b,${b:0:1}"; done >> "$T/m.csv"
python3 -c '
import os, sys, boto3
boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).upload_file(sys.argv[1], "raw", "meta/labels.csv")' "$T/m.csv"
ok "--labels s3://" dlk create s3://lake/m from-s3 s3://raw/train --resize 32x32 --labels s3://raw/meta/labels.csv --json
check "12 rows" grep -q '"ingested": 12' "$OUT"
ok "ls" dlk ls s3://lake/m --json
check "classes c,d" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
assert t["labels"]["class_names"]==["c","d"], t' "$OUT"
