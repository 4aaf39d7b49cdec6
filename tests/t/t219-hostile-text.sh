#!/usr/bin/env bash
# Text that a dataset, a source or a command line puts before a terminal
# - a commit message, a view's query, class names, the dataset id, a
# source key with a C1 control, a tensor name given on the command line -
# carrying terminal control sequences (an OSC 52 clipboard write, a title
# change, CSI): ls, log, cat, query and verify, and every error message,
# print it with the control characters escaped (\xNN), never raw; --json
# keeps the exact strings (JSON escapes them itself).
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "hostile text" "numpy missing: python3 -m pip install numpy"; exit 0; }

OSC=$'\e]52;c;SGVsbG8=\a'        # OSC 52: write "Hello" to the clipboard
TITLE=$'\e]0;pwned\a'            # OSC 0: the window title
# no ESC, BEL or C1 control (UTF-8 c2 80..c2 9f, or a lone 0x80..0x9f)
# in the previous command's stdout and stderr
raw_free() {
    python3 - "$OUT" "$ERR" <<'PY'
import re, sys
for f in sys.argv[1:]:
    t = open(f, "rb").read()
    bad = re.search(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", t)
    assert not bad, (f, t[max(0, bad.start() - 40):bad.end() + 40])
PY
}

mkdir -p "$T/src"
python3 - "$T/src" <<'PY'
import numpy as np, os, sys
d = sys.argv[1]
names = ["plain", "c1\u009b31mred"]  # U+009B: CSI as one character
for i, n in enumerate(names):
    np.save(os.path.join(d, n + ".x.npy"), np.full(4, i, np.float32))
    np.save(os.path.join(d, n + ".labels.npy"), np.array(i, np.int32))
PY
DS=$T/ds
ok "create with hostile class names" dlk create "$DS" --tensor x:f32:4 --tensor labels:i32 --kind labels=class_label --classes "labels=cat${OSC},dog${TITLE}"
ok "ingest a key holding a C1 control" dlk ingest "$DS" from-dir "$T/src" --quiet
ok "commit with an OSC 52 message" dlk commit "$DS" -m "release${OSC} two"
ok "save a view whose query holds one" dlk query "$DS" "key == 'x${OSC}'" --save-view v
# a dataset id is any string a reader is given (formats/dlk-v1.md 4.2)
python3 - "$DS/dlk.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["id"] = "\x1b]0;owned\x07id"
open(sys.argv[1], "w").write(json.dumps(d))
PY

ok "ls" dlk ls "$DS"
check "ls: no raw control character" raw_free
check "ls: the class names, the query and the id escaped" python3 - "$OUT" <<'PY'
import sys
t = open(sys.argv[1], "rb").read()
for want in [rb"0=cat\x1b]52;c;SGVsbG8=\x07", rb"1=dog\x1b]0;pwned\x07",
             rb"key == 'x\x1b]52;c;SGVsbG8=\x07'", rb"(id \x1b]0;owned\x07id)"]:
    assert want in t, (want, t)
PY
ok "ls --json" dlk ls "$DS" --json
check "ls --json: the exact strings" python3 - "$OUT" "$OSC" "$TITLE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); osc, title = sys.argv[2], sys.argv[3]
assert d["id"] == "\x1b]0;owned\x07id", d["id"]
lab = [t for t in d["tensors"] if t["name"] == "labels"][0]
assert lab["class_names"] == ["cat" + osc, "dog" + title], lab
assert d["views"][0]["query"] == "key == 'x" + osc + "'", d["views"]
PY
ok "log" dlk log "$DS"
check "log: no raw control character" raw_free
check "log: the message escaped" grep -qF 'release\x1b]52;c;SGVsbG8=\x07 two' "$OUT"
ok "log --json" dlk log "$DS" --json
check "log --json: the exact message" python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d[0]["message"] == "release" + sys.argv[2] + " two", d' "$OUT" "$OSC"

row=$(dlk query "$DS" "labels == 1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["rows"][0])')
ok "cat of a class label" dlk cat "$DS" labels "$row"
check "cat: no raw control character" raw_free
check "cat: the class name escaped" grep -qF '(dog\x1b]0;pwned\x07)' "$OUT"
ok "cat of the key holding U+009B" dlk cat "$DS" key "$row"
check "cat: the C1 control escaped" raw_free
check "cat: as \\xc2\\x9b" grep -qF 'c1\xc2\x9b31mred' "$OUT"
ok "query --show" dlk query "$DS" "labels >= 0" --show key,labels
check "query --show: no raw control character" raw_free
ok "verify" dlk verify "$DS"
check "verify: no raw control character" raw_free

fails "an unknown tensor named by a hostile argument" 3 dlk cat "$DS" "bad${OSC}" 0
check "the error: no raw control character" raw_free
check "the error names it escaped" grep -qF "no tensor 'bad\\x1b]52;c;SGVsbG8=\\x07'" "$ERR"
fails "the same with --json" 3 dlk cat "$DS" "bad${OSC}" 0 --json
check "--json error: valid JSON, nothing raw" python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert "\x1b" not in d["error"]["message"] and "\x07" not in d["error"]["message"], d' "$OUT"
fails "a bad query quoting a hostile literal" 2 dlk query "$DS" "x[0] == 'a${OSC}'"
check "the query shown under the message: nothing raw" raw_free
fails "a hostile view name" 3 dlk ls "$DS" --view "v${TITLE}"
check "its error: nothing raw" raw_free
