#!/usr/bin/env bash
# from-gs through the GCS store against fake-gcs-server: a class-folder
# tree ingested from gs:// equals from-dir over the same tree sample by
# sample; a rerun finds every object present; a replaced object is seen
# as changed (its generation); listings past one page (1,000 names);
# a label manifest on gs://; usage errors name the url.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/gcslib.sh"
gcs_need "ingest from-gs"
command -v ffmpeg >/dev/null || { skip "ingest from-gs" "ffmpeg missing"; exit 0; }
gcs_start
gcs_mkbucket raw-data
gcs_mkbucket lake

S=$T/train
for c in cat dog; do
    mkdir -p "$S/$c"
    ff -f lavfi -i "testsrc2=s=160x120:r=10" -frames:v 6 -q:v 3 "$S/$c/$c%02d.jpg"
done
gcs_put_tree "$S" gs://raw-data/train
ok "create from-gs" dlk create gs://lake/ds from-gs gs://raw-data/train --resize 64x48 --json
check "12 rows" grep -q '"ingested": 12' "$OUT"
ok "create from-dir (local) of the same tree" dlk create "$T/local" from-dir "$S" --resize 64x48 --quiet
# the keys and versions differ: the objects' URLs and generations from
# GCS, paths, sizes and mtimes from a directory
dump gs://lake/ds key key_version > "$T/gs.txt"
dump "$T/local" key key_version > "$T/dir.txt"
check "from-gs equals from-dir sample by sample" cmp "$T/gs.txt" "$T/dir.txt"
ok "key is the object's URL" dlk cat gs://lake/ds key 0
check "gs://BUCKET/PREFIX/KEY" grep -Eq 'text: "gs://raw-data/train/(cat|dog)/(cat|dog)[0-9]{2}\.jpg"' "$OUT"
ok "key_version is the object's generation" dlk cat gs://lake/ds key_version 0
check "a decimal generation" grep -Eq 'text: "[0-9]{6,}"' "$OUT"
ok "ls" dlk ls gs://lake/ds
check "ls names the gs url" grep -q "dataset gs://lake/ds" "$OUT"
ok "verify --deep" dlk verify gs://lake/ds --deep
ok "rerun: nothing new" dlk ingest gs://lake/ds from-gs gs://raw-data/train/ --resize 64x48 --json
check "12 present, 0 new" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["new"]==0 and d["present"]==12, d' "$OUT"
# a replaced object has a new generation: changed, and --on-changed fail stops
gcs_put "$S/cat/cat01.jpg" gs://raw-data/train/cat/cat01.jpg
fails "a replaced object with --on-changed fail (exit 3)" 3 dlk ingest gs://lake/ds from-gs gs://raw-data/train --resize 64x48 --on-changed fail
check "names the changed object" grep -q "'gs://raw-data/train/cat/cat01.jpg'" "$ERR"

# 1100 label-only rows: the listing takes two pages
L=$T/lab
mkdir -p "$L"
python3 -c '
import sys
for i in range(1100):
    open("%s/%05d.cls" % (sys.argv[1], i), "w").write(str(i % 7))' "$L"
gcs_put_tree "$L" gs://raw-data/labels-only
ok "label-only source past one listing page" dlk create gs://lake/lab from-gs gs://raw-data/labels-only --order sorted --json
check "1100 rows" grep -q '"ingested": 1100' "$OUT"
ok "label of row 1099" dlk cat gs://lake/lab labels 1099 --json
check "is 1099 % 7 = 0" grep -q '"values":\[0\]' "$OUT"

printf 'key,label\n' > "$T/m.csv"
for f in "$S"/*/*.jpg; do b=$(basename "$f"); echo "$b,${b:0:1}"; done >> "$T/m.csv"
gcs_put "$T/m.csv" gs://raw-data/meta/labels.csv
ok "--labels gs://" dlk create gs://lake/m from-gs gs://raw-data/train --resize 32x32 --labels gs://raw-data/meta/labels.csv --json
check "12 rows" grep -q '"ingested": 12' "$OUT"
ok "ls --json" dlk ls gs://lake/m --json
check "classes c,d" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
assert t["labels"]["class_names"]==["c","d"], t' "$OUT"

fails "from-gs with an s3 url (exit 2)" 2 dlk ingest gs://lake/ds from-gs s3://raw-data/train
check "says what from-gs needs" grep -q "from-gs needs a gs://BUCKET/PREFIX url" "$ERR"
fails "from-dir with a gs url (exit 2)" 2 dlk ingest gs://lake/ds from-dir gs://raw-data/train
check "points at from-gs" grep -q "use from-gs" "$ERR"
fails "from-s3 with a gs url (exit 2)" 2 dlk ingest gs://lake/ds from-s3 gs://raw-data/train
check "points at from-gs" grep -q "use from-gs for 'gs://raw-data/train'" "$ERR"
fails "a gs: typo is bad usage (exit 2)" 2 dlk ls gs:/lake/ds
check "says what a GCS url is" grep -q "a GCS url is gs://BUCKET/PREFIX" "$ERR"
fails "a missing bucket (exit 3)" 3 dlk ls gs://no-such-bucket/ds
check "names the url" grep -q "gs://no-such-bucket" "$ERR"
fails "an invalid bucket name (exit 3)" 3 dlk ls gs://Bad_Bucket/ds
check "says so" grep -q "invalid bucket name" "$ERR"
