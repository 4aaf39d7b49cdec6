#!/usr/bin/env bash
# A row's identity is its whole source object, from S3 (moto): the
# README's CI flow, create from s3://raw/train/ and ingest from
# s3://raw/new-batch/ holding the same relative names, ingests both; the
# key is the object's URL; a rerun of either prefix, or of the bucket,
# finds every object present; a re-uploaded object is changed
# (--on-changed fail stops on it), counted in the summary's skipped.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest keys by prefix from S3" "ffmpeg missing"; exit 0; }

frames() { # DIR PREFIX N PATTERN [START]
    mkdir -p "$1" && ff -f lavfi -i "$4=s=64x48:r=10" -frames:v "$3" \
        -start_number "${5:-0}" -q:v 3 "$1/$2%03d.jpg"
}
put() { # FILE s3://bucket/key
    python3 - "$1" "$2" <<'PY'
import os, sys, boto3
b, _, k = sys.argv[2][5:].partition("/")
boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).upload_file(sys.argv[1], b, k)
PY
}
keys_of() { # DATASET: every row's key, sorted bytewise
    python3 - "$DLK" "$1" <<'PY'
import json, subprocess, sys
dlk, ds = sys.argv[1], sys.argv[2]
m = json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))
n = {t["name"]: t["samples"] for t in m["tensors"]}["key"]
keys = [subprocess.check_output([dlk, "cat", ds, "key", str(i), "--raw"]).decode() for i in range(n)]
print("\n".join(sorted(keys, key=lambda s: s.encode())))
PY
}
listing() { # DIR URL ...: the files of each DIR as objects below its URL
    while [ $# -gt 0 ]; do
        (cd "$1" && find . -type f | sed "s|^\./|$2/|")
        shift 2
    done | LC_ALL=C sort
}
counts() { # WANT-INGESTED WANT-NEW WANT-PRESENT WANT-CHANGED (of $OUT)
    python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); w=[int(x) for x in sys.argv[2:]]
got=[d["ingested"], d["new"], d["present"], d["changed"]]
assert got==w, (got, w, d)' "$OUT" "$@"
}

s3_start
s3_mkbucket raw
A=$T/train
B=$T/new-batch
frames "$A/cat" c 3 testsrc2
frames "$A/dog" d 2 testsrc2
frames "$B/cat" c 3 mandelbrot       # train's names, other pictures
frames "$B/cat" c 1 mandelbrot 3     # and one of its own
s3_put_tree "$A" s3://raw/train
s3_put_tree "$B" s3://raw/new-batch
DS=$T/ds

ok "create from-s3 s3://raw/train/" dlk create "$DS" from-s3 s3://raw/train/ --order sorted --json
check "5 rows" counts 5 5 0 0
ok "dlk cat DS key 0" dlk cat "$DS" key 0
check "shows the object's URL" grep -q 'text: "s3://raw/train/cat/c000.jpg"' "$OUT"
ok "ingest from-s3 s3://raw/new-batch/" dlk ingest "$DS" from-s3 s3://raw/new-batch/ --json
check "all 4 objects of new-batch/ are new and ingested" counts 4 4 0 0
keys_of "$DS" > "$T/keys"
listing "$A" s3://raw/train "$B" s3://raw/new-batch > "$T/list"
check "every object of both prefixes exactly once, by its URL" cmp "$T/keys" "$T/list"

ok "new-batch again (no final slash)" dlk ingest "$DS" from-s3 s3://raw/new-batch --json
check "4 present, nothing read" counts 0 0 4 0
check "... no byte read" grep -q '"bytes_in": 0,' "$OUT"
ok "the whole bucket" dlk ingest "$DS" from-s3 s3://raw --json
check "9 present: the same objects seen from the bucket" counts 0 0 9 0

# a re-uploaded object at the same key is changed, not new
put "$A/cat/c001.jpg" s3://raw/new-batch/cat/c001.jpg
frames "$B/cat" c 1 mandelbrot 4
put "$B/cat/c004.jpg" s3://raw/new-batch/cat/c004.jpg
cp "$DS/staging/manifest.json" "$T/head.before"
fails "--on-changed fail: exit 3" 3 dlk ingest "$DS" from-s3 s3://raw/new-batch/ --on-changed fail
check "... naming the re-uploaded object by its URL" grep -q "changed since it was ingested ('s3://raw/new-batch/cat/c001.jpg')" "$ERR"
check "... and writing nothing" cmp "$T/head.before" "$DS/staging/manifest.json"
ok "new-batch/ with one new and one re-uploaded object" dlk ingest "$DS" from-s3 s3://raw/new-batch/
check "the summary counts the changed one as skipped" grep -q "^ingested 1 rows (.*) in [0-9.]* s; 1 skipped (changed since ingested)$" "$OUT"
check "... and the keys line says why" grep -q "^source keys: 1 new, 3 already ingested, 1 changed since (skipped)$" "$OUT"
ok "again, --json" dlk ingest "$DS" from-s3 s3://raw/new-batch/ --json
check "4 present, 1 changed, named by its URL" counts 0 0 4 1
check "... in changed_keys" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["changed_keys"]==["s3://raw/new-batch/cat/c001.jpg"], d' "$OUT"
cp "$A/cat/c001.jpg" "$B/cat/c001.jpg"   # the listing as the bucket holds it
keys_of "$DS" > "$T/keys"
listing "$A" s3://raw/train "$B" s3://raw/new-batch > "$T/list"
check "every object exactly once" cmp "$T/keys" "$T/list"
ok "verify --all" dlk verify "$DS" --all
