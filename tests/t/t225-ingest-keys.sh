#!/usr/bin/env bash
# Source keys from a directory: every row records its object (the
# directory's absolute path and the file's key) and version; a prefix
# that grows over three runs is ingested exactly once, new objects picked up, a changed one reported and skipped (or, with
# --on-changed fail, exit 3 and nothing written); a killed run resumed
# together with new keys; --no-key; .npy totals and rerun.
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest keys" "ffmpeg missing"; exit 0; }

# N frames of a test pattern as JPEGs: DIR PREFIX N SIZE [START]
frames() {
    mkdir -p "$1" && ff -f lavfi -i "testsrc2=s=$4:r=10" -frames:v "$3" \
        -start_number "${5:-0}" -q:v 3 "$1/$2%03d.jpg"
}
# Each row's key and the hash of its image: "KEY SHA1", in row order.
rows() { # DATASET
    python3 - "$DLK" "$1" <<'PY'
import hashlib, json, subprocess, sys
dlk, ds = sys.argv[1], sys.argv[2]
m = json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))
n = {t["name"]: t["samples"] for t in m["tensors"]}
for i in range(n["key"]):
    k = subprocess.check_output([dlk, "cat", ds, "key", str(i), "--raw"]).decode()
    img = subprocess.check_output([dlk, "cat", ds, "images", str(i), "--raw"])
    print(k, hashlib.sha1(img).hexdigest())
PY
}
keys_of() { rows "$1" | cut -d' ' -f1; }
# the objects as rows name them: the directory's absolute path, then the key
listing() { (cd "$1" && find "$(pwd -P)" -name '*.jpg' | LC_ALL=C sort); }

S=$T/src
frames "$S/cat" c 3 64x48
frames "$S/dog" d 2 64x48
SA=$(realpath "$S")
DS=$T/ds
ok "run 1: create from-dir (sorted, so that row 3 is known)" dlk create "$DS" from-dir "$S" --order sorted --json
check "5 new rows ingested" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==5 and d["keys"] and d["new"]==5 and d["present"]==0 and d["changed"]==0, d' "$OUT"
ok "ls" dlk ls "$DS" --json
check "key and key_version are text tensors" python3 -c '
import json,sys; t={x["name"]:x for x in json.load(open(sys.argv[1]))["tensors"]}
for n in ("key","key_version"):
    assert t[n]["kind"]=="text" and t[n]["dtype"]=="u8" and t[n]["samples"]==5, t[n]' "$OUT"
ok "dlk cat DS key 3" dlk cat "$DS" key 3
check "prints the object of row 3: the source's absolute path and its key" grep -q "text: \"$SA/dog/d000.jpg\"" "$OUT"
ok "dlk cat DS key_version 3" dlk cat "$DS" key_version 3
size=$(stat -c %s "$S/dog/d000.jpg")
check "its version is the file's size and mtime" grep -qE "text: \"$size-[0-9]+\.[0-9]{9}\"" "$OUT"

ok "rerun, nothing new" dlk ingest "$DS" from-dir "$S"
check "says nothing new, 5 present" grep -q "nothing new: 5 objects already ingested" "$OUT"

frames "$S/cat" c 2 64x48 3
ok "run 2: two more objects" dlk ingest "$DS" from-dir "$S" --json
check "2 new ingested, 5 present, none changed" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==2 and d["new"]==2 and d["present"]==5 and d["changed"]==0, d
assert d["bytes_in"] > 0 and d["bytes_out"] > 2*64*48*3, d' "$OUT"

frames "$S/dog" d 1 64x48 2
touch -d "2001-02-03 04:05:06" "$S/cat/c001.jpg"
cp "$DS/staging/manifest.json" "$T/head.before"
fails "--on-changed fail: exit 3" 3 dlk ingest "$DS" from-dir "$S" --on-changed fail
check "... naming the changed object" grep -q "changed since it was ingested ('$SA/cat/c001.jpg')" "$ERR"
check "... and writing nothing" cmp "$T/head.before" "$DS/staging/manifest.json"
ok "run 3 as a dry run, in text" dlk ingest "$DS" from-dir "$S" --dry-run
check "... counts the changed object among the skipped" grep -q "would ingest 1 rows from '$S'; 0 objects not ingested, 1 skipped (changed since ingested)$" "$OUT"
ok "run 3: one new, one changed" dlk ingest "$DS" from-dir "$S" --json
check "1 new ingested, 6 present, 1 changed (named)" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==1 and d["new"]==1 and d["present"]==6 and d["changed"]==1, d
assert d["changed_keys"]==[sys.argv[2]+"/cat/c001.jpg"], d' "$OUT" "$SA"
ok "run 3 again, in text" dlk ingest "$DS" from-dir "$S" --jobs 1 --unordered
check "the changed object is reported on stderr" grep -q "changed since it was ingested (skipped): '$SA/cat/c001.jpg'" "$ERR"
check "... and counted" grep -q "nothing new: 7 objects already ingested; 1 changed" "$OUT"
keys_of "$DS" | LC_ALL=C sort > "$T/keys"
listing "$S" > "$T/list"
check "every object exactly once" cmp "$T/keys" "$T/list"
# an object that stays bad: a share of all the source's rows, not of the
# new ones, so the runs after it do not fail (--max-skip, default 10%)
printf 'not an image' > "$T/bad.jpg"
cp "$T/bad.jpg" "$S/cat/c900.jpg"
frames "$S/dog" d 1 64x48 5
ok "a bad and a good new object" dlk ingest "$DS" from-dir "$S" --json
check "... the good one ingested, the bad one skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==1 and d["skipped"]==1 and d["new"]==2 and d["present"]==7, d' "$OUT"
ok "the next run: the bad one tried again, not a failure" dlk ingest "$DS" from-dir "$S" --json
check "... skipped again, 8 present" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["skipped"]==1 and d["new"]==1 and d["present"]==8, d' "$OUT"
rm "$S/cat/c900.jpg"
ok "verify --all" dlk verify "$DS" --all

# the key index: a run written at each merge, those merged collected
ok "gc" dlk gc "$DS" --grace 0 --json
check "the key index objects left are the head's runs, of every row" python3 -c '
import json,os,sys
ds=sys.argv[1]; m=json.load(open(ds+"/staging/manifest.json"))
left=sorted(os.listdir(ds+"/index/keys"))
runs=m["key_runs"]
assert left==sorted(r["object"].split("/")[-1] for r in runs), (left, runs)
assert sum(r["rows"] for r in runs)==9 and "key_index" not in m, m' "$DS"
# a corrupt index run is not used: its keys are read from the key chunks
idx=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key_runs"][0]["object"])' "$DS/staging/manifest.json")
chmod u+w "$DS/$idx"
flip_byte "$DS/$idx" 30
ok "with a corrupt index: still nothing new" dlk ingest "$DS" from-dir "$S" --json
check "... 8 present, 1 changed" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["present"]==8 and d["changed"]==1, d' "$OUT"
# a head whose index was dropped (a writer of an earlier revision): the
# keys are read from the key chunks
python3 -c '
import json,sys
p=sys.argv[1]+"/staging/manifest.json"; m=json.load(open(p)); del m["key_runs"]
open(p,"w").write(json.dumps(m))' "$DS"
ok "without the index: still nothing new" dlk ingest "$DS" from-dir "$S" --json
check "... 8 present, 1 changed" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["present"]==8 and d["changed"]==1, d' "$OUT"

# --no-key: no key tensors, and a rerun is the run of before
NK=$T/nokey
ok "create --no-key" dlk create "$NK" from-dir "$S" --no-key --quiet
ok "ls" dlk ls "$NK" --json
check "no key tensors" python3 -c '
import json,sys; n=[x["name"] for x in json.load(open(sys.argv[1]))["tensors"]]
assert "key" not in n and "key_version" not in n, n' "$OUT"
fails "cat key: no such tensor" 3 dlk cat "$NK" key 0
ok "rerun" dlk ingest "$NK" from-dir "$S"
check "says keys are unavailable" grep -q "no 'key' tensor" "$OUT"

# a run killed mid-way, resumed together with new keys
K=$T/ksrc
frames "$K/a" a 30 1280x720
frames "$K/b" b 30 1280x720
args=(from-dir "$K" --resize 64x48 --chunk-size 8K --checkpoint 0.01 --jobs 1 --fetch 2)
REF=$T/ref
ok "an uninterrupted run (the reference)" dlk create "$REF" "${args[@]}" --json
KD=$T/killed
# SIGKILL as soon as a checkpoint has staged rows and before the merge
staged=$(python3 "$DLK_TESTS/kill_staged.py" "$DLK" "$KD" "${args[@]}")
check "a run was killed with rows staged" test -n "$staged"
ff -f lavfi -i "testsrc2=s=1280x720:r=10" -frames:v 1 "$K/a/a000x.jpg"
ff -f lavfi -i "testsrc2=s=1280x720:r=10" -frames:v 1 "$K/b/b999.jpg"
ok "the same command, with two new objects" dlk create "$KD" "${args[@]}" --json
check "resumed the staged rows, ingested the rest with the new ones" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["complete"] and d["resumed"]>0 and d["new"]==62, d
assert d["resumed"]+d["ingested"]==62, d' "$OUT"
keys_of "$KD" | LC_ALL=C sort > "$T/kkeys"
listing "$K" > "$T/klist"
check "every object exactly once" cmp "$T/kkeys" "$T/klist"
ok "the reference picks up the two" dlk create "$REF" "${args[@]}" --exist-ok --quiet
rows "$REF" | LC_ALL=C sort > "$T/ref.rows"
rows "$KD" | LC_ALL=C sort > "$T/killed.rows"
check "the same rows as an uninterrupted ingest" cmp "$T/ref.rows" "$T/killed.rows"
ok "verify" dlk verify "$KD" --all

# .npy: rows, not samples, and their bytes; a rerun is incremental
have_numpy || { skip ".npy keys" "numpy missing"; exit 0; }
N=$T/npy
python3 "$DLK_TESTS/../examples/sample_data.py" "$N" --samples 20 --size 8 >/dev/null
NDS=$T/nds
ok "create for .npy" dlk create "$NDS" --tensor images:u8:8x8x3 --tensor labels:i32 --tensor 'boxes:f32:?x4'
ok "ingest 20 rows of 3 .npy tensors" dlk ingest "$NDS" from-dir "$N" --json
cp "$OUT" "$T/npy.json"
ok "ls" dlk ls "$NDS" --json
check "20 rows, bytes_out the samples' bytes" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); ls=json.load(open(sys.argv[2]))
assert d["ingested"]==20 and d["new"]==20, d
assert d["bytes_out"]==sum(t["raw_bytes"] for t in ls["tensors"]) > 20*8*8*3, (d, ls)' "$T/npy.json" "$OUT"
ok "text totals" dlk ingest "$NDS" from-dir "$N"
check "rerun: nothing new" grep -q "nothing new: 20 objects already ingested" "$OUT"
NDS2=$T/nds2
ok "create another" dlk create "$NDS2" --tensor images:u8:8x8x3 --tensor labels:i32 --tensor 'boxes:f32:?x4'
ok "ingest, text" dlk ingest "$NDS2" from-dir "$N"
check "says 20 rows and their bytes" grep -qE "^ingested 20 rows \(.* read, [1-9][0-9.]* KiB of samples\)" "$OUT"
