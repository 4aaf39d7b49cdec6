#!/usr/bin/env bash
# Source keys from S3 (moto): keys the objects' URLs (bucket and full
# key), ETags as versions; a prefix that grows over three runs is ingested exactly once,
# a re-uploaded object reported and skipped (exit 3 with --on-changed
# fail); a killed run resumed together with new keys; .npy objects.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest keys from S3" "ffmpeg missing"; exit 0; }

frames() { # DIR PREFIX N SIZE [START]
    mkdir -p "$1" && ff -f lavfi -i "testsrc2=s=$4:r=10" -frames:v "$3" \
        -start_number "${5:-0}" -q:v 3 "$1/$2%03d.jpg"
}
put() { # FILE s3://bucket/key
    python3 - "$1" "$2" <<'PY'
import os, sys, boto3
b, _, k = sys.argv[2][5:].partition("/")
boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).upload_file(sys.argv[1], b, k)
PY
}
keys_of() { # DATASET: every row's key, sorted
    python3 - "$DLK" "$1" <<'PY'
import json, subprocess, sys
dlk, ds = sys.argv[1], sys.argv[2]
m = json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))
n = {t["name"]: t["samples"] for t in m["tensors"]}["key"]
keys = [subprocess.check_output([dlk, "cat", ds, "key", str(i), "--raw"]).decode() for i in range(n)]
print("\n".join(sorted(keys, key=lambda s: s.encode())))
PY
}
listing() { # DIR URL: the files of DIR as the objects below URL
    (cd "$1" && find . -type f | sed "s|^\./|$2/|" | LC_ALL=C sort); }

s3_start
s3_mkbucket raw

S=$T/src
frames "$S/cat" c 3 64x48
frames "$S/dog" d 2 64x48
s3_put_tree "$S" s3://raw/train
DS=$T/ds
ok "run 1: create from-s3 (sorted, so that row 0 is known)" dlk create "$DS" from-s3 s3://raw/train --order sorted --json
check "5 new rows" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==5 and d["new"]==5 and d["present"]==0, d' "$OUT"
ok "dlk cat DS key 0" dlk cat "$DS" key 0
check "the key is the object's URL" grep -q 'text: "s3://raw/train/cat/c000.jpg"' "$OUT"
ok "dlk cat DS key_version 0" dlk cat "$DS" key_version 0
md5=$(md5sum "$S/cat/c000.jpg" | cut -d' ' -f1)
check "its version is the object's ETag" grep -q "text: \"$md5\"" "$OUT"

frames "$S/dog" d 2 64x48 2
put "$S/dog/d002.jpg" s3://raw/train/dog/d002.jpg
put "$S/dog/d003.jpg" s3://raw/train/dog/d003.jpg
ok "run 2: two new objects" dlk ingest "$DS" from-s3 s3://raw/train --json
check "2 new ingested, 5 present" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==2 and d["new"]==2 and d["present"]==5 and d["changed"]==0, d
assert d["bytes_in"] > 0, d' "$OUT"
bytes_in_2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bytes_in"])' "$OUT")
check "only the new objects were read" test "$bytes_in_2" = "$(( $(stat -c %s "$S/dog/d002.jpg") + $(stat -c %s "$S/dog/d003.jpg") ))"

frames "$S/cat" c 1 64x48 3
put "$S/cat/c003.jpg" s3://raw/train/cat/c003.jpg
ff -f lavfi -i "mandelbrot=s=64x48" -frames:v 1 "$T/other.jpg"
put "$T/other.jpg" s3://raw/train/dog/d000.jpg
cp "$DS/staging/manifest.json" "$T/head.before"
fails "--on-changed fail: exit 3" 3 dlk ingest "$DS" from-s3 s3://raw/train --on-changed fail --json
check "... naming the re-uploaded object" grep -q "'s3://raw/train/dog/d000.jpg'" "$ERR"
check "... and writing nothing" cmp "$T/head.before" "$DS/staging/manifest.json"
ok "run 3: one new, one changed" dlk ingest "$DS" from-s3 s3://raw/train --json
check "1 new, 6 present, 1 changed (named)" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==1 and d["new"]==1 and d["present"]==6 and d["changed"]==1, d
assert d["changed_keys"]==["s3://raw/train/dog/d000.jpg"], d' "$OUT"
ok "again with other options" dlk ingest "$DS" from-s3 s3://raw/train --resize 32x24 --jobs 1 --unordered --json
check "nothing new" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["bytes_in"]==0 and d["present"]==7 and d["changed"]==1, d' "$OUT"
keys_of "$DS" > "$T/keys"
listing "$S" s3://raw/train > "$T/list"
check "every object exactly once" cmp "$T/keys" "$T/list"
ok "verify --all" dlk verify "$DS" --all

# a run killed mid-way, resumed together with new keys
K=$T/ksrc
frames "$K/a" a 25 1280x720
frames "$K/b" b 25 1280x720
s3_put_tree "$K" s3://raw/k
args=(from-s3 s3://raw/k --resize 64x48 --chunk-size 8K --checkpoint 0.01 --jobs 1 --fetch 2)
ok "an uninterrupted run (the reference)" dlk create "$T/ref" "${args[@]}" --json
KD=$T/killed
# SIGKILL as soon as a checkpoint has staged rows and before the merge
staged=$(python3 "$DLK_TESTS/kill_staged.py" "$DLK" "$KD" "${args[@]}")
check "a run was killed with rows staged" test -n "$staged"
ff -f lavfi -i "testsrc2=s=1280x720:r=10" -frames:v 1 "$K/a/a000x.jpg"
ff -f lavfi -i "testsrc2=s=1280x720:r=10" -frames:v 1 "$K/b/b999.jpg"
put "$K/a/a000x.jpg" s3://raw/k/a/a000x.jpg
put "$K/b/b999.jpg" s3://raw/k/b/b999.jpg
ok "the same command, with two new objects" dlk create "$KD" "${args[@]}" --json
check "resumed the staged rows, ingested the rest with the new ones" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["complete"] and d["resumed"]>0 and d["new"]==52, d
assert d["resumed"]+d["ingested"]==52, d' "$OUT"
keys_of "$KD" > "$T/kkeys"
listing "$K" s3://raw/k > "$T/klist"
check "every object exactly once" cmp "$T/kkeys" "$T/klist"
ok "verify" dlk verify "$KD" --all

# .npy objects on S3: rows and their bytes; a rerun is incremental
have_numpy || { skip ".npy keys from S3" "numpy missing"; exit 0; }
N=$T/npy
python3 "$DLK_TESTS/../examples/sample_data.py" "$N" --samples 20 --size 8 >/dev/null
s3_put_tree "$N" s3://raw/npy
NDS=$T/nds
ok "create for .npy" dlk create "$NDS" --tensor images:u8:8x8x3 --tensor labels:i32 --tensor 'boxes:f32:?x4'
ok "ingest 20 rows of 3 .npy tensors" dlk ingest "$NDS" from-s3 s3://raw/npy --json
cp "$OUT" "$T/npy.json"
ok "ls" dlk ls "$NDS" --json
check "20 rows, bytes_out the samples' bytes" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); ls=json.load(open(sys.argv[2]))
assert d["ingested"]==20 and d["new"]==20, d
assert d["bytes_out"]==sum(t["raw_bytes"] for t in ls["tensors"]) > 20*8*8*3, (d, ls)' "$T/npy.json" "$OUT"
ok "rerun" dlk ingest "$NDS" from-s3 s3://raw/npy
check "nothing new" grep -q "nothing new: 20 objects already ingested" "$OUT"
