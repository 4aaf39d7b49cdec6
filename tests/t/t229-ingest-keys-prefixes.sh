#!/usr/bin/env bash
# A row's identity is its whole source object, from a directory: a
# dataset created from train/ and fed from new-batch/, which holds the
# same relative names (cat/c000.jpg) with other pictures, gets both; a
# rerun of either prefix, or of their parent, finds every object present;
# an object really replaced at the same path is changed (--on-changed
# fail stops on it), and every summary counts the rows it skipped.
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest keys by prefix" "ffmpeg missing"; exit 0; }

# N frames of a pattern as JPEGs: DIR PREFIX N PATTERN [START]
frames() {
    mkdir -p "$1" && ff -f lavfi -i "$4=s=64x48:r=10" -frames:v "$3" \
        -start_number "${5:-0}" -q:v 3 "$1/$2%03d.jpg"
}
# "KEY SHA1-OF-IMAGE" for every row, sorted
rows() { # DATASET
    python3 - "$DLK" "$1" <<'PY'
import hashlib, json, subprocess, sys
dlk, ds = sys.argv[1], sys.argv[2]
m = json.loads(subprocess.check_output([dlk, "ls", ds, "--json"]))
n = {t["name"]: t["samples"] for t in m["tensors"]}
out = []
for i in range(n["key"]):
    k = subprocess.check_output([dlk, "cat", ds, "key", str(i), "--raw"]).decode()
    img = subprocess.check_output([dlk, "cat", ds, "images", str(i), "--raw"])
    out.append(k + " " + hashlib.sha1(img).hexdigest())
print("\n".join(sorted(out)))
PY
}
listing() { find "$@" -name '*.jpg' | LC_ALL=C sort; }
counts() { # WANT-INGESTED WANT-NEW WANT-PRESENT WANT-CHANGED (of $OUT)
    python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); w=[int(x) for x in sys.argv[2:]]
got=[d["ingested"], d["new"], d["present"], d["changed"]]
assert got==w, (got, w, d)' "$OUT" "$@"
}

R=$(realpath "$T")/raw
A=$R/train
B=$R/new-batch
frames "$A/cat" c 3 testsrc2
frames "$A/dog" d 2 testsrc2
frames "$B/cat" c 3 mandelbrot       # c000..c002: train's names, other pictures
frames "$B/cat" c 1 mandelbrot 3     # c003: new-batch's own
DS=$T/ds

ok "create from-dir train/" dlk create "$DS" from-dir "$A/" --order sorted --json
check "5 rows" counts 5 5 0 0
ok "ingest from-dir new-batch/ (three names as in train/)" dlk ingest "$DS" from-dir "$B/" --json
check "all 4 objects of new-batch/ are new and ingested" counts 4 4 0 0
rows "$DS" > "$T/rows"
cut -d' ' -f1 "$T/rows" > "$T/keys"
listing "$A" "$B" > "$T/list"
check "every object of both prefixes exactly once, named by its path" cmp "$T/keys" "$T/list"
check "train/cat/c000.jpg and new-batch/cat/c000.jpg are two rows of other pictures" python3 -c '
import sys
r=dict(l.split() for l in open(sys.argv[1]))
a, b = r[sys.argv[2]+"/cat/c000.jpg"], r[sys.argv[3]+"/cat/c000.jpg"]
assert a != b, (a, b)' "$T/rows" "$A" "$B"
ok "dlk cat DS key 5" dlk cat "$DS" key 5
check "shows the object: its directory's absolute path and key" grep -qE "text: \"$B/cat/c00[0-3].jpg\"" "$OUT"

ok "new-batch/ again" dlk ingest "$DS" from-dir "$B" --json
check "4 present, nothing ingested" counts 0 0 4 0
ok "train/ again, as ./train from its parent" sh -c 'cd "$1" && "$2" ingest "$3" from-dir ./train --json' _ "$R" "$DLK" "$DS"
check "5 present (the same directory however it is named)" counts 0 0 5 0
ok "their parent raw/" dlk ingest "$DS" from-dir "$R" --json
check "9 present: the same objects seen from another prefix" counts 0 0 9 0

# a replaced object at the same full path is changed, not new
cp "$A/cat/c001.jpg" "$B/cat/c001.jpg"
touch -d "2001-02-03 04:05:06" "$B/cat/c001.jpg"
frames "$B/cat" c 1 mandelbrot 4     # c004: new
cp "$DS/staging/manifest.json" "$T/head.before"
fails "--on-changed fail: exit 3" 3 dlk ingest "$DS" from-dir "$B" --on-changed fail
check "... naming the replaced object by its path" grep -q "changed since it was ingested ('$B/cat/c001.jpg')" "$ERR"
check "... and writing nothing" cmp "$T/head.before" "$DS/staging/manifest.json"
ok "new-batch/ with one new and one replaced object" dlk ingest "$DS" from-dir "$B"
check "the summary counts the changed one as skipped" grep -q "^ingested 1 rows (.*) in [0-9.]* s; 1 skipped (changed since ingested)$" "$OUT"
check "... and the keys line says why" grep -q "^source keys: 1 new, 3 already ingested, 1 changed since (skipped)$" "$OUT"
check "... and names it on stderr" grep -q "changed since it was ingested (skipped): '$B/cat/c001.jpg'" "$ERR"
ok "again" dlk ingest "$DS" from-dir "$B" --json
check "4 present, 1 changed" counts 0 0 4 1
rows "$DS" | cut -d' ' -f1 > "$T/keys"
listing "$A" "$B" > "$T/list"
check "every object exactly once (the replaced one as first ingested)" cmp "$T/keys" "$T/list"
fails "--keys-relative-to with a bad URL: usage (exit 2)" 2 dlk ingest "$DS" from-dir "$B" --keys-relative-to s3:/raw
check "... naming it" grep -q "bad url 's3:/raw'" "$ERR"
ok "--keys-relative-to where no key is relative" dlk ingest "$DS" from-dir "$B" --keys-relative-to "$A" --json
check "... decides nothing: 4 present, 1 changed" counts 0 0 4 1
check "... and is recorded as train/'s absolute path" python3 -c '
import json,sys; m=json.load(open(sys.argv[1]+"/staging/manifest.json"))
assert m["key_base"]==sys.argv[2]+"/", m.get("key_base")' "$DS" "$A"
ok "verify --all" dlk verify "$DS" --all
