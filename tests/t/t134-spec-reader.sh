#!/usr/bin/env bash
# What formats/dlk-v1.md states, read back by tests/spec/reader.py (a
# reader of its own: libxxhash and libzstd, none of libdlk): a commit's id
# is the XXH3-128 of its members serialized in the documented order, a
# view change is a commit, the key tensors are zstd, the key runs hold
# each row's (key hash, version hash) as 6.9 computes them.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "spec reader" "numpy missing: python3 -m pip install numpy"; exit 0; }
R="python3 $DLK_TESTS/spec/reader_check.py"
ver=$(sed -n 's/^#define DLK_VERSION_STRING "\(.*\)"/\1/p' "$DLK_TESTS/../include/dlk.h")
check "the spec names the library version it describes ($ver)" grep -q "what libdlk $ver (" "$DLK_TESTS/../formats/dlk-v1.md"

S=$T/src
mkdir -p "$S/a"
for i in $(seq 0 19); do echo "row $i" > "$S/a/f$i.txt"; done
: > "$S/a/empty.txt"
DS=$T/ds
ok "create from 21 text files" dlk create "$DS" from-dir "$S" --chunk-size 64K --json
ok "the run's name is 6.8's, every option at its default" $R run "$DS" "$S" \
    "v1 shards=1 image=0x0/0/3/hwc video=0x0/0/0 frames=0 fps=0 clip=0 max_pixels=0 labels= on_error=0 unordered=0 order=shuffled/0 keyed=0"
echo "row 21" > "$S/a/g.txt"
ok "ingest one more with options" dlk ingest "$DS" from-dir "$S" --order sorted \
    --max-pixels 1000000 --resize 32x16 --fit crop --channels 1 --on-error fail --quiet
ok "... its run's name is 6.8's" $R run "$DS" "$S" \
    "v1 shards=1 image=32x16/1/1/hwc video=0x0/0/0 frames=0 fps=0 clip=0 max_pixels=1000000 labels= on_error=1 unordered=0 keyed=21"
ok "the key tensors are u8 [-1] text, zstd level 3, the first tensor's chunk_bytes (6.9)" $R key-tensors "$DS"
ok "the key run holds each row's hashes (6.9)" $R key-runs "$DS"

ok "first commit, a message with controls, / and UTF-8" \
    dlk commit "$DS" -m "$(printf 'first\x1f\t/\xc3\xa9')" --json
ok "its id is the XXH3-128 of its members in 6.1's order" $R commit "$DS"
C1=$(head -c 32 "$DS/refs/heads/main")

ok "save a view" dlk query "$DS" "row % 2 == 0" --save-view even --json
ok "a view change is something to commit (6.3)" dlk commit "$DS" -m "view" --json
C2=$(head -c 32 "$DS/refs/heads/main")
check "main moved, to a child of the first" python3 -c '
import json, sys
d = json.load(open(sys.argv[1] + "/commits/" + sys.argv[2] + ".json"))
assert sys.argv[2] != sys.argv[3] and d["parent"] == sys.argv[3], d["parent"]
assert [v["name"] for v in d["views"]] == ["even"], d["views"]' "$DS" "$C2" "$C1"
ok "with views and key_runs, the id is reproduced" $R commit "$DS"
ok "committing again" dlk commit "$DS" -m "again"
check "... finds nothing to commit" grep -q "^nothing to commit: main is $C2" "$OUT"

# members that 4.3.1 and 6.10 do not define are ignored, at every level
python3 -c '
import json, sys
sys.path.insert(0, sys.argv[2])
import reader
p = sys.argv[1] + "/staging/manifest.json"
m = json.load(open(p))
m["future"] = 1
m["views"][0]["note"] = "x"
m["key_runs"][0]["note"] = {"y": [1]}
open(p, "w").write(reader.dumps(m))' "$DS" "$DLK_TESTS/spec"
ok "a head with unknown members in a view and a run: verify" dlk verify "$DS"
ok "... the view reads" dlk query "$DS" --view even --json
check "... its rows" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["rows"] == list(range(0, 22, 2))' "$OUT"
ok "... and the state is main's: nothing to commit" dlk commit "$DS" -m "unknown"
check "... says so" grep -q "^nothing to commit: main is $C2" "$OUT"

# a damaged key run (6.9): verify names it and fails
RUN=$(python3 -c '
import json, sys
print(json.load(open(sys.argv[1] + "/staging/manifest.json"))["key_runs"][0]["object"])' "$DS")
flip_byte "$DS/$RUN" 60
fails "verify with a damaged key run" 1 dlk verify "$DS"
check "... names the run" grep -q "$RUN" "$OUT" "$ERR"
flip_byte "$DS/$RUN" 60
ok "mended, verify passes" dlk verify "$DS"

# chunks of a tool-made dataset, damaged in ways 3.7 names
python3 "$DLK_TESTS/../examples/sample_data.py" "$T/img" --samples 10 --size 8 >/dev/null
D2=$T/d2
ok "create an images dataset (zstd)" dlk create "$D2" --tensor images:u8:8x8x3:zstd \
    --tensor labels:i32 --tensor 'boxes:f32:?x4'
ok "ingest" dlk ingest "$D2" from-dir "$T/img" --quiet
KEY=$(first_chunk_key "$D2" labels)
SIZE=$(stat -c %s "$D2/$KEY")
printf 'X' >> "$D2/$KEY"
fails "a chunk one byte too large" 3 dlk cat "$D2" labels 0
check "... is named with its real size and the manifest's" \
    grep -q "$KEY.*has $((SIZE + 1)) bytes, the manifest says $SIZE" "$ERR"
fails "verify reports it" 1 dlk verify "$D2"
check "... with both sizes" grep -q "has $((SIZE + 1)) bytes, the manifest says $SIZE" "$OUT"
truncate -s "$SIZE" "$D2/$KEY"
ok "cut back, it reads" dlk cat "$D2" labels 0

KEY=$(first_chunk_key "$D2" images)
ok "the zstd chunk decodes by the spec" $R chunk "$D2/$KEY"
ok "its frame written again without a content size" $R no-content-size "$D2" "$KEY"
fails "reading it" 3 dlk cat "$D2" images 0
check "... says the frame has no content size" grep -q "$KEY.*no content size" "$ERR"
check "... and prints no 2^64 - 1" bash -c "! grep -q 18446744073709551615 '$ERR'"

# bool elements are stored as 0 or 1 (3.3), whatever non-zero byte the
# source held for true
mkdir -p "$T/b"
python3 -c '
import numpy as np, sys
a = np.array([0, 1, 2, 255], dtype=np.uint8).view(np.bool_)
for i in range(4):
    np.save("%s/%d.flag.npy" % (sys.argv[1], i), a[i:i + 1].reshape(()))' "$T/b"
D3=$T/d3
ok "create a bool tensor" dlk create "$D3" --tensor flag:bool
ok "ingest bytes 0, 1, 2 and 255" dlk ingest "$D3" from-dir "$T/b" --order sorted --quiet
KEY=$(first_chunk_key "$D3" flag)
ok "the chunk holds 0, 1, 1, 1" python3 -c '
import sys; sys.path.insert(0, sys.argv[1])
import reader
raw = reader.chunk_decode(open(sys.argv[2], "rb").read())["raw"]
assert raw == bytes([0, 1, 1, 1]), raw' "$DLK_TESTS/spec" "$D3/$KEY"
ok "a query for true" dlk query "$D3" "flag == true" --json
check "... finds the three rows cat shows as true" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["rows"] == [1, 2, 3]' "$OUT"

# formats/dlk-v1.md section 7, made again: what it shows is the tool's
mkdir -p "$T/x7/src"
( cd "$T/x7" && python3 - <<'PY'
import numpy as np
np.save("src/0000.labels.npy", np.array([3, 1, 4, 1], dtype="<i4"))
np.save("src/0000.tokens.npy", np.array([10, 11, 12], dtype="<u2"))
np.save("src/0001.tokens.npy", np.array([20], dtype="<u2"))
np.save("src/0002.tokens.npy", np.array([30, 31], dtype="<u2"))
np.save("src/0003.tokens.npy", np.array([], dtype="<u2"))
np.save("src/0000.images.npy", np.zeros((4, 2, 2, 3), dtype="u1"))
PY
)
X=$T/x7/x
ok "7: create" dlk create "$X" --tensor labels:i32 --classes labels=cat,dog,bird,fish,emu \
    --tensor tokens:u16:? --tensor images:u8:2x2x3:zstd
check "7: create says what 7 shows" grep -q "^created dataset '$X' with 3 tensors$" "$OUT"
cp "$X/staging/manifest.json" "$T/x7/created.json"
ok "7: ingest" dlk ingest "$X" from-dir "$T/x7/src"
check "7: ingest says what 7 shows" grep -Eq '^ingested 4 rows \(844 B read, 76 B of samples\) in [0-9.]+ s; 0 skipped$' "$OUT"
ok "7: commit" dlk commit "$X" -m "first four rows"
ok "7: verify" dlk verify "$X" --all --deep
check "7: verify says what 7 shows" grep -qx "ok: 3 chunks, 493 B checked in 1 commit and the head (deep); 0 problems" "$OUT"
ok "7's chunk names, manifests, commit and hex dumps are the tool's" \
    $R example "$DLK_TESTS/../formats/dlk-v1.md" "$X" "$T/x7/created.json"
