#!/usr/bin/env bash
# WebDataset tar shards from a directory (made by webdataset's own
# ShardWriter): each shard's members are grouped into rows by stem as
# files are, keyed SHARD.tar/MEMBER, and read back as the shards hold
# them (images, classes, captions); --dry-run plans them; a rerun adds
# nothing and a new shard only its rows; a corrupt member is a skipped
# row (--max-skip), a truncated or foreign .tar an error naming it; a
# README member is reported, not ingested, a compressed shard beside
# them ingested.
. "$DLK_TESTS/lib.sh"
need_wds
field() { # FILE EXPR: a --json field
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

S=$T/shards
ok "3 shards of 8 samples (png/jpg + cls + txt)" wds make "$S" --shards 3 --per 8
base=$(realpath "$S")/
DS=$T/ds
ok "--dry-run" dlk create "$DS" from-dir "$S" --dry-run --json
check "plans 24 rows of an image, a class and a caption" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["dry_run"] and d["planned"] == 24 and d["ingested"] == 0, d
names = [t["name"] for t in d["schema"]]
assert names[:3] == ["images", "labels", "text"], names' "$OUT"
check "... and writes nothing" test ! -e "$DS"
ok "create from-dir of tar shards" dlk create "$DS" from-dir "$S" --json
check "24 rows, none skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 24 and d["skipped"] == 0 and d["new"] == 24, d' "$OUT"
ok "rows match the shards as webdataset reads them" wds check "$DLK" "$DS" "$base" "$S"
check "... all 24" test "$(cat "$OUT")" = 24
ok "dlk cat key 0" dlk cat "$DS" key 0
check "a key is the shard's path, '/' and the member" \
    grep -qE "text: \"${base}00000[0-2]\\.tar/s000[0-9][0-9]\\.(png|jpg)\"" "$OUT"

ok "rerun over the same shards" dlk ingest "$DS" from-dir "$S" --json
check "adds nothing, reads no member" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 0 and d["present"] == 24 and d["bytes_in"] == 0, d' "$OUT"
ok "a new shard" wds make "$S" --shards 1 --per 8 --start 3
ok "ingest again" dlk ingest "$DS" from-dir "$S" --json
check "adds only its 8 rows, reading only its members" python3 - "$OUT" "$S/000003.tar" <<'PY'
import json, sys, tarfile
d = json.load(open(sys.argv[1]))
members = sum(m.size for m in tarfile.open(sys.argv[2]))
assert d["ingested"] == 8 and d["new"] == 8 and d["present"] == 24, d
assert d["bytes_in"] == members, (d["bytes_in"], members)
PY
ok "rows still match, 32 now" wds check "$DLK" "$DS" "$base" "$S"
check "... 32" test "$(cat "$OUT")" = 32
ok "verify" dlk verify "$DS" --all

# a corrupt JPEG member is a bad row, counted against --max-skip
B=$T/bad
ok "a shard with a corrupt JPEG (s00003)" wds make "$B" --shards 1 --per 8 --bad s00003
fails "--max-skip 0: exit 3" 3 dlk create "$T/b0" from-dir "$B" --max-skip 0 --json
check "... naming the member" grep -q "\"key\": \"000000.tar/s00003.jpg\"" "$OUT"
ok "--max-skip 0.2: ingested, one skipped" dlk create "$T/b1" from-dir "$B" --max-skip 0.2 --json
check "7 rows, the bad member named" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 7 and d["skipped"] == 1, d
assert [e["key"] for e in d["errors"]] == ["000000.tar/s00003.jpg"], d["errors"]' "$OUT"
ok "the 7 rows match" wds check "$DLK" "$T/b1" "$(realpath "$B")/" "$B"

# a truncated shard and a .tar that is no tar: errors naming them
C=$T/cut
mkdir -p "$C" && cp "$S/000000.tar" "$S/000001.tar" "$C/"
head -c 6000 "$S/000002.tar" > "$C/000002.tar"
fails "a truncated shard: exit 3" 3 dlk create "$T/c0" from-dir "$C"
check "... naming it" grep -qi "tar shard '000002.tar': truncated" "$ERR"
check "... writing nothing" test ! -e "$T/c0/staging/manifest.json"
# cut inside a member's bytes (not at a header): its bytes are short
python3 - "$S/000002.tar" "$C/000002.tar" <<'PY'
import sys, tarfile
t = tarfile.open(sys.argv[1]); last = t.getmembers()[-1]
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(data[:last.offset_data + last.size // 2])
PY
fails "a shard cut inside its last member: exit 3" 3 dlk create "$T/c1" from-dir "$C"
check "... naming it" grep -q "tar shard '000002.tar'" "$ERR"
echo "this is not a tar archive" > "$C/000002.tar"
fails "a .tar that is no tar: exit 3" 3 dlk ingest "$DS" from-dir "$C"
check "... naming it" grep -q "tar shard '000002.tar'" "$ERR"

# a compressed shard beside them, and a stray README inside a shard
M=$T/mixed
mkdir -p "$M" && cp "$S/000000.tar" "$M/"
gzip -c "$S/000001.tar" > "$M/000001.tar.gz"
python3 - "$M/000000.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "a") as t:
    b = b"notes about these shards\n"
    i = tarfile.TarInfo("README"); i.size = len(b)
    t.addfile(i, io.BytesIO(b))
PY
ok "create from shards with strays" dlk create "$T/m" from-dir "$M" --json
check "16 rows (the .tar.gz's too: t257); the README reported" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 16, d
r = {x["key"]: x["reason"] for x in d["unused_objects"]}
assert set(r) == {"000000.tar/README"}, r
assert "README" in r["000000.tar/README"], r' "$OUT"
