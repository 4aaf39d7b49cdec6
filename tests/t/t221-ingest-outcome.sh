#!/usr/bin/env bash
# Honest outcomes: a run that skips more than --max-skip of the rows it
# tried (default 10%), or ingests no row of a source that is not empty,
# exits 3 naming the commonest reasons, and merges nothing into the head
# (a create removes the dataset it made); --max-skip 1 keeps every row
# that could be read.  A source that lists no objects fails too (t227).
# From a directory and from S3 (moto); and a bucket that does not exist
# is named as such.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest outcome" "ffmpeg missing"; exit 0; }

# a tree where most files are junk: 3 good JPEGs, 7 that are not images
J=$T/junky
mkdir -p "$J/cat"
ff -f lavfi -i "testsrc2=s=64x48:r=25" -frames:v 3 -q:v 4 "$J/cat/g%04d.jpg"
for i in 1 2 3 4 5 6 7; do echo "not an image" > "$J/cat/bad$i.jpg"; done
# a good tree, and one of nothing but files named .jpg that are not
# images (a schema is inferred from it, and then every row fails)
G=$T/good
mkdir -p "$G/cat" "$G/dog"
ff -f lavfi -i "testsrc2=s=64x48:r=25" -frames:v 4 -q:v 4 "$G/cat/c%04d.jpg"
ff -f lavfi -i "testsrc2=s=64x48:r=25" -frames:v 4 -q:v 4 "$G/dog/d%04d.jpg"
R=$T/alljunk
mkdir -p "$R/cat"
for i in 1 2 3 4 5; do echo "not an image" > "$R/cat/bad$i.jpg"; done
# nothing ingestable at all
N=$T/nothing
mkdir -p "$N"
echo x > "$N/a.bmp"; echo y > "$N/b.bmp"

samples() { "$DLK" ls "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tensors"][0]["samples"])'; }
args=(--resize 32x24 --jobs 1)

run_cases() { # KIND SRC-JUNKY SRC-GOOD SRC-ALLJUNK SRC-NOTHING DS-PREFIX
    local kind=$1 junky=$2 good=$3 alljunk=$4 nothing=$5 pre=$6
    local DS=$pre/ds
    ok "$kind: create from a good tree" dlk create "$DS" "$kind" "$good" "${args[@]}" --quiet
    check "$kind: 8 rows" test "$(samples "$DS")" = 8
    fails "$kind: ingest of a mostly junk tree exits 3" 3 dlk ingest "$DS" "$kind" "$junky" "${args[@]}" --json
    check "$kind: error names the share, the limit and the commonest reason with its count" python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); m=d["error"]["message"]
assert d["error"]["exit_code"]==3, d
assert "skipped 7 of 10 rows" in m and "70%" in m and "10%" in m, m
assert "7 x cannot decode image" in m and "nothing was merged" in m, m
assert d["ingested"]==3 and d["skipped"]==7 and len(d["errors"])==7, d' "$OUT"
    check "$kind: nothing merged into the head" test "$(samples "$DS")" = 8
    ok "$kind: verify" dlk verify "$DS"
    fails "$kind: the same command again fails the same way" 3 dlk ingest "$DS" "$kind" "$junky" "${args[@]}"
    check "$kind: text message on stderr" grep -q "skipped 7 of 10 rows.*7 x cannot decode image '\*': not a JPEG or PNG file" "$ERR"
    check "$kind: still 8 rows" test "$(samples "$DS")" = 8
    fails "$kind: --max-skip 0.5 is still under 70%" 3 dlk ingest "$DS" "$kind" "$junky" "${args[@]}"  --max-skip 0.5
    ok "$kind: --max-skip 0.7 allows 70%" dlk ingest "$DS" "$kind" "$junky" "${args[@]}" --max-skip 0.7 --json
    check "$kind: 3 rows appended" test "$(samples "$DS")" = 11
    ok "$kind: --max-skip 1 keeps today's behaviour" dlk create "$pre/all" "$kind" "$junky" "${args[@]}" --max-skip 1
    check "$kind: ingested 3, 7 skipped" grep -q "ingested 3 rows .* 7 skipped" "$OUT"
    check "$kind: 3 rows" test "$(samples "$pre/all")" = 3

    fails "$kind: create from a tree of junk only exits 3" 3 dlk create "$pre/rd" "$kind" "$alljunk" "${args[@]}"
    check "$kind: no row ingested, reasons counted" grep -q "ingested no row of .*all 5 tried were skipped (5 x cannot decode image '\*': not a JPEG or PNG file)" "$ERR"
    fails "$kind: ... and leaves no dataset behind" 3 dlk ls "$pre/rd"
    ok "$kind: the corrected command then works" dlk create "$pre/rd" "$kind" "$good" "${args[@]}" --quiet
    check "$kind: 8 rows" test "$(samples "$pre/rd")" = 8

    fails "$kind: ingest from a source with nothing to ingest exits 3" 3 dlk ingest "$DS" "$kind" "$nothing" "${args[@]}" --json
    check "$kind: says none of its objects can be a row" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); m=d["error"]["message"]
assert "no row to ingest" in m and d["ingested"]==0 and d["ignored"]==2, d' "$OUT"
    check "$kind: still 11 rows" test "$(samples "$DS")" = 11
    fails "$kind: a source that lists no objects fails too" 3 dlk ingest "$DS" "$kind" "$pre-empty" "${args[@]}" --json
    check "$kind: ingested 0, the source named" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==0 and "lists no objects" in d["error"]["message"], d' "$OUT"
}

mkdir -p "$T/out" "$T/out-empty"
run_cases from-dir "$J" "$G" "$R" "$N" "$T/out"

# .npy trees: files that feed no tensor are the skips
if have_numpy; then
    P=$T/npy
    mkdir -p "$P"
    python3 -c '
import numpy as np, sys
for i in range(2): np.save("%s/%04d.x.npy" % (sys.argv[1], i), np.arange(4, dtype=np.int32))
for i in range(5): np.save("%s/%04d.nope.npy" % (sys.argv[1], i), np.arange(4, dtype=np.int32))' "$P"
    ok "npy: a dataset of two tensors" dlk create "$T/npyds" --tensor x:i32:4 --tensor y:i32:4
    fails "npy: 5 of 7 files feed no tensor: exit 3" 3 dlk ingest "$T/npyds" from-dir "$P"
    check "npy: nothing written to the head" test "$(samples "$T/npyds")" = 0
    ok "npy: --max-skip 1" dlk ingest "$T/npyds" from-dir "$P" --max-skip 1
    check "npy: 2 samples" test "$(samples "$T/npyds")" = 2
else
    skip "npy outcome" "numpy missing: python3 -m pip install numpy"
fi

s3_start
s3_mkbucket raw
s3_mkbucket lake
s3_put_tree "$J" s3://raw/junky
s3_put_tree "$G" s3://raw/good
s3_put_tree "$R" s3://raw/alljunk
s3_put_tree "$N" s3://raw/nothing
run_cases from-s3 s3://raw/junky s3://raw/good s3://raw/alljunk s3://raw/nothing s3://lake/out

fails "ls of a bucket that does not exist" 3 dlk ls s3://missing-bucket/x
check "says the bucket does not exist" grep -q "the bucket 'missing-bucket' does not exist (HTTP 404 NoSuchBucket)" "$ERR"
fails "ingest from a bucket that does not exist" 3 dlk ingest s3://lake/out/ds from-s3 s3://missing-bucket/x
check "says so too" grep -q "bucket 'missing-bucket' does not exist" "$ERR"
