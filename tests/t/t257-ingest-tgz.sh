#!/usr/bin/env bash
# Compressed WebDataset shards (.tar.gz from webdataset's own writer,
# .tgz from `tar czf`), from a directory and from S3 (moto): the same rows
# as the same shards uncompressed (every tensor's value byte-equal, keys
# SHARD.tar.gz/MEMBER), beside .tar shards too; a shard whose members are
# not in key order; a rerun adds nothing; a truncated, corrupt or foreign
# .tar.gz is an error naming it; a killed run resumes.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
need_wds
# rows DATASET: {shard/member with .tar for any shard name: sha1 of each
# tensor's value but the key's and its version's}, one JSON document
rows() {
    python3 - "$DLK" "$1" <<'PY'
import hashlib, json, re, subprocess, sys
dlk, ds = sys.argv[1], sys.argv[2]
m = json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))
names = [t["name"] for t in m["tensors"] if t["name"] not in ("key", "key_version")]
def col(t):
    out = subprocess.check_output([dlk, "cat", ds, t, "0:", "--json"])
    return [json.loads(l) for l in out.splitlines()]
keys = [bytes(o["values"]).decode() for o in col("key")]
keys = [re.sub(r"^.*/([^/]+)\.(tar\.gz|tgz|tar)/", r"\1.tar/", k) for k in keys]
assert len(set(keys)) == len(keys), "a key twice"
out = {k: {} for k in keys}
for t in names:
    c = col(t)
    assert len(c) == len(keys), (t, len(c), len(keys))
    for k, o in zip(keys, c):
        out[k][t] = hashlib.sha1(json.dumps([o["dtype"], o["shape"], o["values"]]).encode()).hexdigest()
print(json.dumps(out, sort_keys=True, indent=0))
PY
}
same_rows() { # A B: the two JSON documents of rows are equal, not empty
    python3 - "$1" "$2" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a, "no rows"
assert set(a) == set(b), (sorted(set(a) ^ set(b)))[:6]
bad = [k for k in a if a[k] != b[k]]
assert not bad, ("values differ", bad[:5])
print(len(a))
PY
}
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

P=$T/plain G=$T/gz
ok "3 shards of 8 samples as .tar" wds make "$P" --shards 3 --per 8
ok "... and the same as .tar.gz (webdataset's ShardWriter)" \
    wds make "$G" --shards 3 --per 8 --ext tar.gz
check "the .tar.gz shards are gzip" python3 -c '
import sys; assert all(open(f,"rb").read(2) == b"\x1f\x8b" for f in sys.argv[1:])' "$G"/*.tar.gz
ok "create from the .tar shards" dlk create "$T/dp" from-dir "$P" --json
rows "$T/dp" > "$T/rows.plain"
check "24 rows of the .tar shards" test "$(same_rows "$T/rows.plain" "$T/rows.plain")" = 24

ok "create from the .tar.gz shards (schema inferred)" dlk create "$T/dg" from-dir "$G" --json
# a shard is streamed for its rows once, and only when it holds a member
# over 4 KiB (smaller ones are read while listing)
streamed() { python3 -c '
import sys, tarfile
print(sum(any(m.size > 4096 for m in tarfile.open(f)) for f in sys.argv[1:]))' "$@"; }
n=$(streamed "$G"/*.tar.gz)
check "24 rows, none skipped, nothing unused, each shard read once at most ($n)" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 24 and d["skipped"] == 0 and d["new"] == 24, d
assert d["shard_reads"] == int(sys.argv[2]), d["shard_reads"]
assert not d.get("unused_objects"), d["unused_objects"]
assert [t["name"] for t in d["schema"]][:3] == ["images", "labels", "text"], d["schema"]' "$OUT" "$n"
ok "rows of the .tar.gz shards" rows "$T/dg"
cp "$OUT" "$T/rows.gz"
ok "... equal the .tar shards' rows, value for value" same_rows "$T/rows.plain" "$T/rows.gz"
check "... all 24" test "$(cat "$OUT")" = 24
ok "wds check reads the same samples" python3 - "$DLK" "$T/dg" "$(realpath "$G")/" <<'PY'
import json, subprocess, sys
dlk, ds, base = sys.argv[1:]
keys = [bytes(json.loads(l)["values"]).decode() for l in
        subprocess.check_output([dlk, "cat", ds, "key", "0:", "--json"]).splitlines()]
assert all(k.startswith(base) and ".tar.gz/s000" in k for k in keys), keys[:3]
PY
ok "the members are read as the shard holds them" bash -c '
python3 - "$1" "$2" <<'"'PY'"'
import json, subprocess, sys, tarfile
dlk, ds = sys.argv[1], sys.argv[2]
txt = [bytes(json.loads(l)["values"]).decode() for l in
       subprocess.check_output([dlk, "cat", ds, "text", "0:", "--json"]).splitlines()]
keys = [bytes(json.loads(l)["values"]).decode() for l in
        subprocess.check_output([dlk, "cat", ds, "key", "0:", "--json"]).splitlines()]
for k, t in zip(keys, txt):
    shard, member = k.split(".tar.gz/")
    stem = member.rsplit(".", 1)[0]
    with tarfile.open(shard + ".tar.gz", "r:gz") as tf:
        assert tf.extractfile(stem + ".txt").read().decode() == t, (k, t)
PY' _ "$DLK" "$T/dg"
ok "--order sorted" dlk create "$T/ds" from-dir "$G" --order sorted
ok "... rows" rows "$T/ds"
cp "$OUT" "$T/rows.sorted"
ok "... the same rows" same_rows "$T/rows.plain" "$T/rows.sorted"

ok "rerun over the same shards" dlk ingest "$T/dg" from-dir "$G" --json
check "adds nothing, reads no member" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 0 and d["present"] == 24 and d["bytes_in"] == 0, d
assert d["shard_reads"] == 0, d["shard_reads"]' "$OUT"
ok "a new .tar.gz shard" wds make "$G" --shards 1 --per 8 --start 3 --ext tar.gz
ok "ingest again" dlk ingest "$T/dg" from-dir "$G" --json
check "adds only its 8 rows, the bytes of its members" python3 - "$OUT" "$G/000003.tar.gz" "$(streamed "$G/000003.tar.gz")" <<'PY'
import json, sys, tarfile
d = json.load(open(sys.argv[1]))
members = sum(m.size for m in tarfile.open(sys.argv[2], "r:gz"))
assert d["ingested"] == 8 and d["new"] == 8 and d["present"] == 24, d
assert d["bytes_in"] == members, (d["bytes_in"], members)
assert d["shard_reads"] == int(sys.argv[3]), ("the new shard only", d["shard_reads"])
PY
ok "verify" dlk verify "$T/dg" --all

# many threads, rows with labels: every shard read once, however the
# fetches of a shard's rows interleave; the shuffled order exactly as
# formats/dlk-v1.md section 6.8 gives it (up to 8 shards' rows in turns)
O=$T/order
ok "12 .tar.gz shards of 3 samples" wds make "$O" --shards 12 --per 3 --ext tar.gz --big
for seed in 0 7; do
    ok "create, --jobs 8, seed $seed" dlk create "$T/o$seed" from-dir "$O" --jobs 8 --order-seed $seed --json
    check "... 36 rows, each shard read once" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 36 and d["shard_reads"] == 12, d' "$OUT"
    ok "... keys" dlk cat "$T/o$seed" key 0: --json
    check "... in the order the spec gives" python3 - "$OUT" "$seed" <<'PY'
import ctypes, ctypes.util, json, sys
lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
lib.XXH3_64bits.restype = ctypes.c_uint64
lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
M = 2**64
def mix(x):
    x = (x + 0x9e3779b97f4a7c15) % M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) % M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) % M
    return x ^ (x >> 31)
seed = int(sys.argv[2])
rank = lambda b: mix(seed ^ lib.XXH3_64bits(b, len(b)))
stem = lambda k: k.split("/")[-2] + "/" + k.split("/")[-1].split(".")[0]
shard = lambda s: s.split("/")[0]
got = [stem(bytes(json.loads(l)["values"]).decode()) for l in open(sys.argv[1])]
stems = sorted(set(got))
assert len(stems) == len(got) == 36, len(got)
shards = sorted({shard(s) for s in stems}, key=lambda s: (rank(s.encode()), s.encode()))
group, lane, g, n = {}, {}, None, 8
for sh in shards:
    r = rank(sh.encode())
    if n == 8 or r % 8 == 0:
        g, n = r, 0
    group[sh], lane[sh], n = g, n, n + 1
pos = {s: sum(1 for t in stems if shard(t) == shard(s) and t < s) for s in stems}
want = sorted(stems, key=lambda s: (group[shard(s)], pos[s], lane[shard(s)], s.encode()))
assert got == want, (got[:8], want[:8])
assert max(lane.values()) > 0, "no group of two shards: nothing interleaved"
PY
done

# members of at most 4 KiB (labels, captions, small images) are read while
# the shards are listed: no shard is streamed again for them, and the
# rows are those of the same shards uncompressed
S=$T/small
ok "2 shards of small samples, as .tar and as .tar.gz" sh -c "python3 '$DLK_TESTS/wds_shards.py' make '$S/t' --shards 2 --per 5 && python3 '$DLK_TESTS/wds_shards.py' make '$S/g' --shards 2 --per 5 --ext tar.gz"
check "every member is 4 KiB or less" python3 -c '
import sys, tarfile; assert all(m.size <= 4096 for f in sys.argv[1:] for m in tarfile.open(f))' "$S"/g/*.tar.gz
ok "create from the small .tar.gz shards" dlk create "$T/smg" from-dir "$S/g" --json
check "10 rows, no shard streamed for them" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 10 and d["skipped"] == 0 and d["shard_reads"] == 0, d' "$OUT"
ok "create from the small .tar shards" dlk create "$T/smt" from-dir "$S/t" --quiet
rows "$T/smg" > "$T/rows.smg"; rows "$T/smt" > "$T/rows.smt"
check "the same 10 rows" test "$(same_rows "$T/rows.smg" "$T/rows.smt")" = 10

# `tar czf` (.tgz), a shard in reverse key order, and .tar beside them
X=$T/x M=$T/mixed
mkdir -p "$X/0" "$X/2" "$M"
tar xf "$P/000000.tar" -C "$X/0"
ok "tar czf a .tgz" tar czf "$M/000000.tgz" -C "$X/0" .
cp "$P/000001.tar" "$M/"
ok "a .tar.gz whose members are in reverse key order" python3 - "$P/000002.tar" "$M/000002.tar.gz" <<'PY'
import sys, tarfile
src = tarfile.open(sys.argv[1])
with tarfile.open(sys.argv[2], "w:gz") as out:
    for m in reversed(src.getmembers()):
        out.addfile(m, src.extractfile(m))
PY
ok "create from .tgz, .tar and .tar.gz together" dlk create "$T/dm" from-dir "$M" --json
check "24 rows" test "$(field "$OUT" 'd["ingested"]')" = 24
ok "... rows" rows "$T/dm"
cp "$OUT" "$T/rows.mixed"
ok "... equal the .tar shards' rows" same_rows "$T/rows.plain" "$T/rows.mixed"
ok "dlk cat key of the .tgz shard" dlk cat "$T/dm" key 0: --json
check "... keyed SHARD.tgz/MEMBER (tar's ./ dropped)" grep -q '/000000.tgz/s0000' <(
    python3 -c 'import json,sys
for l in open(sys.argv[1]): print(json.dumps(bytes(json.loads(l)["values"]).decode()))' "$OUT")

# a truncated, a corrupt and a foreign .tar.gz: errors naming the shard
C=$T/cut
mkdir -p "$C" && cp "$G/000000.tar.gz" "$G/000001.tar.gz" "$C/"
size=$(stat -c %s "$G/000002.tar.gz")
head -c $((size / 2)) "$G/000002.tar.gz" > "$C/000002.tar.gz"
fails "a truncated .tar.gz: exit 3" 3 dlk create "$T/c0" from-dir "$C"
check "... naming it" grep -q "tar shard '000002.tar.gz'" "$ERR"
check "... writing nothing" test ! -e "$T/c0/staging/manifest.json"
fails "into the dataset made already: exit 3" 3 dlk ingest "$T/dg" from-dir "$C"
check "... naming it" grep -q "tar shard '000002.tar.gz'" "$ERR"
ok "... its rows kept" dlk verify "$T/dg" --all
check "... 32" test "$(dlk ls "$T/dg" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tensors"][0]["samples"])')" = 32
B=$T/bigcut
ok "a .tar.gz shard of larger images" wds make "$B" --shards 1 --per 6 --big --ext tar.gz
bsize=$(stat -c %s "$B/000000.tar.gz")
truncate -s $((bsize * 2 / 3)) "$B/000000.tar.gz"
fails "... cut at 2/3: exit 3" 3 dlk create "$T/cb" from-dir "$B"
check "... naming it and a member read before the cut" \
    grep -qE "tar shard '000000.tar.gz': .*member 's0000[0-5]\.(png|jpg)'" "$ERR"
python3 - "$G/000002.tar.gz" "$C/000002.tar.gz" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
for i in range(len(b) // 3, len(b) // 3 + 64):
    b[i] ^= 0x5a
open(sys.argv[2], "wb").write(b)
PY
fails "a corrupt .tar.gz: exit 3" 3 dlk create "$T/c1" from-dir "$C"
check "... naming it" grep -q "tar shard '000002.tar.gz'" "$ERR"
echo "this is not gzip" > "$C/000002.tar.gz"
fails "a .tar.gz that is no gzip'd tar: exit 3" 3 dlk create "$T/c2" from-dir "$C"
check "... naming it" grep -q "tar shard '000002.tar.gz'" "$ERR"
gzip -c <<<"gzip of no tar at all, long enough to be read as one" > "$C/000002.tar.gz"
fails "a gzip of no tar: exit 3" 3 dlk create "$T/c3" from-dir "$C"
check "... naming it" grep -q "tar shard '000002.tar.gz'" "$ERR"

# from S3
s3_start
s3_mkbucket raw
s3_put_tree "$G" s3://raw/gz
rm -f "$G/000003.tar.gz" # the S3 copy holds it; the rows compared are 0-2's
s3_put_tree "$M" s3://raw/mixed
ok "create from-s3 of .tar.gz shards" dlk create "$T/sg" from-s3 s3://raw/gz --json
check "32 rows" test "$(field "$OUT" 'd["ingested"]')" = 32
ok "... keys are the shard's URL and the member" dlk cat "$T/sg" key 0
check "... s3://raw/gz/00000N.tar.gz/sNNNNN" grep -qE 'text: "s3://raw/gz/00000[0-3]\.tar\.gz/s000[0-9][0-9]\.(png|jpg)"' "$OUT"
ok "... rows" rows "$T/sg"
python3 - "$OUT" "$T/rows.s3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
json.dump({k: v for k, v in d.items() if not k.startswith("000003")}, open(sys.argv[2], "w"))
PY
ok "... shards 0-2 equal the .tar shards' rows" same_rows "$T/rows.plain" "$T/rows.s3"
check "... 24" test "$(cat "$OUT")" = 24
ok "rerun from S3" dlk ingest "$T/sg" from-s3 s3://raw/gz --json
check "adds nothing, reads no member" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"] == 0 and d["present"] == 32 and d["bytes_in"] == 0, d' "$OUT"
ok "create from-s3 of .tgz, .tar and .tar.gz together" dlk create "$T/sm" from-s3 s3://raw/mixed/
ok "... rows" rows "$T/sm"
cp "$OUT" "$T/rows.s3m"
ok "... equal the .tar shards' rows" same_rows "$T/rows.plain" "$T/rows.s3m"
s3_mkbucket cut
size1=$(stat -c %s "$G/000001.tar.gz")
mkdir -p "$T/cutdir"
head -c $((size1 * 2 / 3)) "$G/000001.tar.gz" > "$T/cutdir/000001.tar.gz"
s3_put_tree "$T/cutdir" s3://cut/one
fails "a truncated .tar.gz on S3: exit 3" 3 dlk create "$T/c4" from-s3 s3://cut/one
check "... naming it" grep -q "tar shard '000001.tar.gz'" "$ERR"

# killed_resumes DS WHAT ARGS...: a create killed with rows staged, then
# the same command resumes them and ingests the rest (24 rows)
killed_resumes() {
    local ds=$1 what=$2 staged
    shift 2
    staged=$(python3 "$DLK_TESTS/kill_staged.py" "$DLK" "$ds" "$@")
    check "a run$what was killed with rows staged" test -n "$staged"
    ok "the same command" dlk create "$ds" "$@" --json
    check "resumed the staged rows, ingested the rest" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["complete"] and d["resumed"] > 0 and d["resumed"] + d["ingested"] == 24, d' "$OUT"
}
# a run killed with rows staged resumes them (a shard read again from its
# start for the rows past the checkpoint)
K=$T/k
ok "4 .tar.gz shards of larger images" wds make "$K" --shards 4 --per 6 --big --ext tar.gz
s3_put_tree "$K" s3://raw/k
args=(from-s3 s3://raw/k --chunk-size 64K --checkpoint 0.01 --jobs 1 --fetch 2)
killed_resumes "$T/killed" "" "${args[@]}"
ok "the same rows as a run not killed" dlk create "$T/whole" "${args[@]}"
ok "... rows" rows "$T/killed"
cp "$OUT" "$T/rows.killed"
ok "... rows" rows "$T/whole"
cp "$OUT" "$T/rows.whole"
ok "... equal" same_rows "$T/rows.whole" "$T/rows.killed"
check "... 24" test "$(cat "$OUT")" = 24

# without key tensors a resume skips the rows up to the checkpoint's stem
# in the run's order: the shards' rows in turns must compare as they were
# ordered, or rows are lost or appended twice
args=(from-s3 s3://raw/k --no-key --chunk-size 64K --checkpoint 0.01 --jobs 1 --fetch 2)
killed_resumes "$T/nk-killed" " without keys" "${args[@]}"
ok "a run not killed" dlk create "$T/nk-whole" "${args[@]}"
nk_sum() { { dlk cat "$1" images : --raw && dlk cat "$1" labels : --raw; } | sha1sum; }
check "... the same images and labels in the same order" \
    test "$(nk_sum "$T/nk-killed")" = "$(nk_sum "$T/nk-whole")"
