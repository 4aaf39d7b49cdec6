#!/usr/bin/env bash
# Source keys that no store may read safely: a '..' or '.' segment (a URL
# normaliser would read "a/../b" as "b"), an empty segment, a NUL (which
# would cut the key short), control characters, a backslash, bytes that
# are not UTF-8.  From a local tree and from S3 (moto): each is skipped
# and reported with its key escaped (the --json output stays valid JSON),
# the other objects are ingested with their own bytes, nothing is written
# outside the dataset, and --on-error fail stops before writing anything.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
python3 -c 'import PIL' 2>/dev/null || { skip "hostile keys" "needs Pillow: python3 -m pip install pillow"; exit 0; }

# One PNG per key, each WIDTH px wide so that a sample tells its object.
make_src() { # DIR
    python3 - "$1" <<'PY'
import os, sys
from PIL import Image
d = os.fsencode(sys.argv[1])
names = [(b"plain", 10), (b"sp ace", 11), ("\u00fcn\u00ef".encode(), 12),
         (b"new\nline", 21), (b"\xff\xfebad", 22), (b"tab\there", 23),
         (b"back\\slash", 24), (b"bell\x07", 25)]
for n, w in names:
    Image.new("RGB", (w, 4), (w * 9 % 256, 0, 0)).save(d + b"/" + n + b".png")
PY
}
widths() { # DATASET -> the width of every sample, smallest first (rows are
           # stored in a shuffled order)
    local n i
    n=$(dlk ls "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tensors"][0]["samples"])')
    for ((i = 0; i < n; i++)); do
        dlk cat "$1" images "$i" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["shape"][1])'
    done | sort -n | tr '\n' ' '
}

mkdir -p "$T/src" "$T/out"
make_src "$T/src"
cd "$T/out" || exit 1
ok "from-dir: hostile names are skipped, not fatal" dlk create "$T/out/ds" from-dir "$T/src" --json --max-skip 1
check "valid JSON with 3 ingested, 5 skipped, every key escaped" python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ingested"] == 3 and d["skipped"] == 5, d
keys = sorted(e["key"] for e in d["errors"])
assert keys == sorted(["new\\x0aline.png", "\\xff\\xfebad.png", "tab\\x09here.png",
                       "back\\x5cslash.png", "bell\\x07.png"]), keys
assert all("not read: the key has" in e["reason"] for e in d["errors"]), d["errors"]
PY
check "the three valid objects, each with its own pixels" test "$(widths "$T/out/ds")" = "10 11 12 "
ok "without --json: one line per skipped key on stderr" dlk create "$T/out/ds2" from-dir "$T/src" --max-skip 1
check "escaped on stderr (no raw newline or tab)" python3 - "$ERR" <<'PY'
import sys
t = open(sys.argv[1], "rb").read()
assert b"skipped 'new\\x0aline.png'" in t and b"\t" not in t and b"\xff" not in t, t
PY
ok "nothing written outside the datasets" test "$(ls -A "$T/out")" = "$(printf 'ds\nds2')"
fails "--on-error fail stops at the first, naming it (exit 3, as for a bad object)" 3 dlk ingest "$T/out/ds" from-dir "$T/src" --on-error fail --no-resume
check "the error names the escaped key" grep -q "cannot ingest '.*': not read: the key has" "$ERR"
check "the dataset is as it was" test "$(widths "$T/out/ds")" = "10 11 12 "

s3_start
s3_mkbucket raw
s3_mkbucket lake
# S3 keys may hold all of these; the listing is url-encoded, so even a NUL
# and control bytes arrive.  "train/b.png" and "train/x/../b.png" are two
# different objects: the second must never be read as the first.
check "upload hostile keys" python3 - "$T/src" <<'PY'
import io, os, sys, boto3
from PIL import Image
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
def png(w):
    b = io.BytesIO(); Image.new("RGB", (w, 4), (w, 0, 0)).save(b, "PNG"); return b.getvalue()
good = {"train/b.png": 30, "train/c d.png": 31, "train/\u00e9t\u00e9.png": 32}
bad = {"train/x/../b.png": 40, "train/./c.png": 41, "train//d.png": 42,
       "train/nul\x00.png": 43, "train/ctl\x01.png": 44, "train/back\\slash.png": 45,
       "train/x/..": 46}
for k, w in {**good, **bad}.items():
    s3.put_object(Bucket="raw", Key=k, Body=png(w))
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="raw", Prefix="train/")["Contents"]]
assert len(keys) == len(good) + len(bad), keys
PY
ok "from-s3: hostile keys skipped" dlk create s3://lake/h from-s3 s3://raw/train --json --max-skip 1
check "3 ingested, the 7 others reported, each with its reason" python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ingested"] == 3 and d["skipped"] == 7, d
got = {e["key"]: e["reason"] for e in d["errors"]}
want = {"x/../b.png": "'..' path segment", "./c.png": "'.' or", "/d.png": "absolute",
        "nul\\xc0\\x80.png": "invalid UTF-8", "ctl\\x01.png": "control character",
        "back\\x5cslash.png": "backslash", "x/..": "'..' path segment"}
assert sorted(got) == sorted(want), got
assert all(w in got[k] for k, w in want.items()), got
PY
check "b.png is b.png's own pixels, not x/../b.png's" test "$(widths s3://lake/h)" = "30 31 32 "
ok "verify" dlk verify --deep s3://lake/h
