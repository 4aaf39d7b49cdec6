#!/usr/bin/env bash
# WebDataset tar shards from S3 (moto): the shards' members are read as
# ranges of their objects (nothing staged), rows keyed by the shard's URL
# and the member; a rerun adds nothing and a new shard only its rows; a
# shard truncated or not a tar is an error naming it; a killed run
# resumes with the rows it staged.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
need_wds
put() { # FILE s3://bucket/key
    python3 - "$1" "$2" <<'PY'
import os, sys, boto3
b, _, k = sys.argv[2][5:].partition("/")
boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).upload_file(sys.argv[1], b, k)
PY
}

s3_start
s3_mkbucket raw
S=$T/shards
ok "3 shards of 8 samples (png/jpg + cls + txt)" wds make "$S" --shards 3 --per 8
s3_put_tree "$S" s3://raw/wds
DS=$T/ds
ok "--dry-run" dlk create "$DS" from-s3 s3://raw/wds --dry-run --json
check "plans 24 rows" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["dry_run"] and d["planned"] == 24, d' "$OUT"
ok "create from-s3 of tar shards" dlk create "$DS" from-s3 s3://raw/wds/ --json
check "24 rows" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 24 and d["skipped"] == 0 and d["new"] == 24, d' "$OUT"
ok "rows match the shards as webdataset reads them" wds check "$DLK" "$DS" s3://raw/wds/ "$S"
check "... all 24" test "$(cat "$OUT")" = 24
ok "dlk cat key 0" dlk cat "$DS" key 0
check "a key is the shard's URL, '/' and the member" \
    grep -qE 'text: "s3://raw/wds/00000[0-2]\.tar/s000[0-9][0-9]\.(png|jpg)"' "$OUT"

ok "rerun" dlk ingest "$DS" from-s3 s3://raw/wds --json
check "adds nothing, reads no member" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 0 and d["present"] == 24 and d["bytes_in"] == 0, d' "$OUT"
ok "a new shard" wds make "$T/new" --shards 1 --per 8 --start 3
put "$T/new/000003.tar" s3://raw/wds/000003.tar
cp "$T/new/000003.tar" "$S/"
ok "ingest again" dlk ingest "$DS" from-s3 s3://raw/wds --json
check "adds only its 8 rows, reading only its members" python3 - "$OUT" "$S/000003.tar" <<'PY'
import json, sys, tarfile
d = json.load(open(sys.argv[1]))
members = sum(m.size for m in tarfile.open(sys.argv[2]))
assert d["ingested"] == 8 and d["new"] == 8 and d["present"] == 24, d
assert d["bytes_in"] == members, (d["bytes_in"], members)
PY
ok "rows match, 32 now" wds check "$DLK" "$DS" s3://raw/wds/ "$S"
check "... 32" test "$(cat "$OUT")" = 32

# a shard cut inside a member's bytes, and an object .tar that is no tar
python3 - "$S/000002.tar" "$T/cut.tar" <<'PY'
import sys, tarfile
t = tarfile.open(sys.argv[1]); m = t.getmembers()[-4]
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(data[:m.offset_data + m.size // 2])
PY
put "$T/cut.tar" s3://raw/cut/000002.tar
fails "a truncated shard: exit 3" 3 dlk create "$T/c0" from-s3 s3://raw/cut
check "... naming it" grep -qi "tar shard '000002.tar': truncated" "$ERR"
echo "not a tar" > "$T/no.tar"
put "$T/no.tar" s3://raw/no/000000.tar
fails "a .tar that is no tar: exit 3" 3 dlk create "$T/c1" from-s3 s3://raw/no
check "... naming it" grep -q "tar shard '000000.tar'" "$ERR"

# a run killed with rows staged resumes them, a new shard with them
K=$T/k
ok "4 shards of larger images" wds make "$K" --shards 4 --per 6 --big
s3_put_tree "$K" s3://raw/k
args=(from-s3 s3://raw/k --chunk-size 64K --checkpoint 0.01 --jobs 1 --fetch 2)
KD=$T/killed
staged=$(python3 "$DLK_TESTS/kill_staged.py" "$DLK" "$KD" "${args[@]}")
check "a run was killed with rows staged" test -n "$staged"
ok "one shard more" wds make "$K" --shards 1 --per 6 --start 4 --big
put "$K/000004.tar" s3://raw/k/000004.tar
ok "the same command" dlk create "$KD" "${args[@]}" --json
check "resumed the staged rows, ingested the rest with the new shard's" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["complete"] and d["resumed"] > 0 and d["new"] == 30, d
assert d["resumed"] + d["ingested"] == 30, d' "$OUT"
ok "rows match, each once" wds check "$DLK" "$KD" s3://raw/k/ "$K"
check "... 30" test "$(cat "$OUT")" = 30
ok "verify" dlk verify "$KD" --all
