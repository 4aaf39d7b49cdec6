#!/usr/bin/env bash
# A history with a malformed commit (any field) or a main that names a
# missing or malformed commit, written with a self-consistent id as a
# buggy writer or an attacker would: verify --all finds it and names the
# commit and the field, gc stops and removes nothing, log and --at refuse
# it.  Unknown members are ignored (formats/dlk-v1.md 5), so such a
# commit, and a well-formed history, still gc as before.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "malformed commits" "numpy missing: python3 -m pip install numpy"; exit 0; }

# every key under chunks/, sorted
chunk_list() { # URL FILE
    case "${DLK_TEST_STORE:-file}" in
    file) (cd "$1" && find chunks -type f | sort) >"$2" ;;
    s3) aws s3 ls --recursive --endpoint-url "$AWS_ENDPOINT_URL" "$1/chunks/" |
            awk '{print $4}' | sed 's|^.*/chunks/|chunks/|' | sort >"$2" ;;
    *) echo "no chunk listing for store ${DLK_TEST_STORE}" >&2; return 1 ;;
    esac
}

# craft.py IN DIR STMT: run STMT (python) on d, the parsed commit IN (or
# set text, the raw document; cid, a key other than the hash), write the
# result as DIR/<id>.json with id the XXH3-128 of its bytes, print id
cat >"$T/craft.py" <<'EOF'
import ctypes, ctypes.util, json, os, sys
src, out, stmt = sys.argv[1:4]
orig = open(src, encoding="utf-8").read()
env = {"d": json.loads(orig), "orig": orig, "text": None, "cid": None}
exec(stmt, env)
body = env["text"]
if body is None:
    body = json.dumps(env["d"], separators=(",", ":"), ensure_ascii=False)
b = body.encode("utf-8")
class H(ctypes.Structure):
    _fields_ = [("low", ctypes.c_uint64), ("high", ctypes.c_uint64)]
lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
lib.XXH3_128bits.restype = H
lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
h = lib.XXH3_128bits(b, len(b))
cid = env["cid"] or "%016x%016x" % (h.high, h.low)
os.makedirs(out, exist_ok=True)
open(os.path.join(out, cid + ".json"), "wb").write(b)
print(cid)
EOF

# labels in three parts: a commit, a commit whose filling replaces the
# first commit's only chunk (so that only the first commit references
# it), and a failed ingest that leaves one orphan chunk behind
python3 -c '
import numpy as np, os, sys
for d, n in (("s1", 100), ("s2", 100), ("o", 600)):
    os.makedirs(os.path.join(sys.argv[1], d))
    np.save(os.path.join(sys.argv[1], d, "a.labels.npy"), np.arange(n, dtype=np.int32))
open(os.path.join(sys.argv[1], "o", "z.labels.npy"), "w").write("garbage")' "$T"
DS=$(ds_url ds)
ok "create" dlk create "$DS" --tensor labels:i32 --chunk-size 2K
ok "ingest" dlk ingest "$DS" from-dir "$T/s1" --no-key --quiet
ok "commit 1" dlk commit "$DS" -m one
C1=$(cat "$OUT")
ok "ingest more" dlk ingest "$DS" from-dir "$T/s2" --no-key --quiet
ok "commit 2" dlk commit "$DS" -m two
C2=$(cat "$OUT")
fails "a failed ingest leaves an orphan" 3 dlk ingest "$DS" from-dir "$T/o" --no-key
obj_get "$DS" "commits/$C1.json" "$T/c1.json"
obj_get "$DS" "commits/$C2.json" "$T/c2.json"
c1_chunk=chunks/labels/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tensors"][0]["chunks"][0][0])' "$T/c1.json")
ok "verify --all of the good history" dlk verify "$DS" --all --json
check "only the first commit holds its chunk; one orphan" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ok"] and d["commits_checked"]==2 and len(d["unreferenced"])==1, d
assert sys.argv[2] not in [u["object"] for u in d["unreferenced"]], d' "$OUT" "$c1_chunk"
chunk_list "$DS" "$T/chunks0"
mkdir "$T/saved"
while read -r k; do obj_get "$DS" "$k" "$T/saved/${k##*/}"; done <"$T/chunks0"
# each case starts from these chunks, whatever an earlier case removed
restore_chunks() {
    chunk_list "$DS" "$T/now"
    cmp -s "$T/now" "$T/chunks0" && return
    while read -r k; do obj_put "$DS" "$k" "$T/saved/${k##*/}"; done <"$T/chunks0"
}
check "the crafting hashes as dlk does" sh -c "[ \"\$(python3 '$T/craft.py' '$T/c2.json' '$T/x' pass)\" = $C2 ]"

move_main() { # ID
    printf '%s\n' "$1" >"$T/main"
    obj_put "$DS" refs/heads/main "$T/main"
}

# bad NAME FIELD ID: main names commit ID (already stored); FIELD, a text
# the messages must hold, names the field at fault in commits/ID.json,
# or in commits/AT.json when AT is set
bad() {
    local name=$1 field=$2 id=$3 key=commits/${AT:-$3}.json
    restore_chunks
    move_main "$id"
    fails "$name: verify --all finds it" 1 dlk verify "$DS" --all --json
    check "$name: verify names $key and the field" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ok"] is False and d["errors"], d
assert any(e["object"]==sys.argv[2] and sys.argv[2] in e["error"] and sys.argv[3] in e["error"] for e in d["errors"]), d
assert d["unreferenced"]==[], d  # not knowable with the history broken' "$OUT" "$key" "$field"
    fails "$name: gc --grace 0 stops" 3 dlk gc "$DS" --grace 0
    check "$name: gc names $key and the field, removed nothing" sh -c \
        'grep -qF "$1" "$3" && grep -qF "$2" "$3" && grep -q "removed nothing" "$3"' sh "$key" "$field" "$ERR"
    chunk_list "$DS" "$T/after"
    check "$name: no chunk was deleted" cmp "$T/chunks0" "$T/after"
    check "$name: the first commit's chunk and the orphan are there" sh -c \
        "grep -qxF '$c1_chunk' '$T/after' && [ \$(wc -l <'$T/after') -eq 3 ]"
    fails "$name: log refuses it" 3 dlk log "$DS"
    check "$name: log names $key and the field" sh -c \
        'grep -qF "$1" "$3" && grep -qF "$2" "$3"' sh "$key" "$field" "$ERR"
}

# Every case on a local dataset; on s3:// (t390) those not marked
# full_run: the reader is the same code on every store, and what the
# store changes (the walk's reads, gc's listing and deletes) those cover,
# in a fraction of the time that 50 cases take on moto.
full_run() { if [ "${DLK_TEST_STORE:-file}" = file ]; then "$@"; fi; }

# bad_field NAME FIELD STMT: commit 2 changed by STMT, re-hashed
bad_field() {
    local id
    id=$(python3 "$T/craft.py" "$T/c2.json" "$T/crafted" "$3") || {
        echo "not ok - $1: cannot craft"; return; }
    obj_put "$DS" "commits/$id.json" "$T/crafted/$id.json"
    bad "$1" "$2" "$id"
}

bad_field "parent not hex" "'parent'" 'd["parent"]="not-a-commit-id"'
fails "parent not hex: verify --all in text" 1 dlk verify "$DS" --all
check "parent not hex: names the commit and the field" sh -c \
    'grep -q "^bad: commits/$1.json: .*'"'parent'"'" "$2" && grep -q "^FAILED: " "$2"' sh "$(cat "$T/main")" "$OUT"
check "parent not hex: lists no chunk as unreferenced" sh -c '! grep -q unreferenced "$1"' sh "$OUT"
fails "parent not hex: --at main~1 refuses it" 3 dlk ls "$DS" --at main~1
check "parent not hex: naming the field" grep -qF "'parent'" "$ERR"
full_run bad_field "parent in upper case" "'parent'" 'd["parent"]=d["parent"].upper()'
full_run bad_field "parent of 31 digits" "'parent'" 'd["parent"]=d["parent"][:31]'
full_run bad_field "parent a number" "'parent'" 'd["parent"]=5'
full_run bad_field "parent an empty string" "'parent'" 'd["parent"]=""'
bad_field "no parent" "'parent'" 'del d["parent"]'
bad_field "parent names a missing commit" "'parent' names commit 0123456789abcdef0123456789abcdef" \
    'd["parent"]="0123456789abcdef0123456789abcdef"'
fails "missing parent: --at main~1 refuses it" 3 dlk ls "$DS" --at main~1
check "missing parent: as a broken history" grep -qF "does not exist" "$ERR"
full_run bad_field "time not a time" "'time'" 'd["time"]="yesterday"'
full_run bad_field "time month 13" "'time'" 'd["time"]="2026-13-01T00:00:00Z"'
bad_field "time 30 February" "'time'" 'd["time"]="2026-02-30T00:00:00Z"'
full_run bad_field "time 29 February of a common year" "'time'" 'd["time"]="2026-02-29T00:00:00Z"'
full_run bad_field "time without Z" "'time'" 'd["time"]="2026-01-01T00:00:00"'
full_run bad_field "time a number" "'time'" 'd["time"]=1764547200'
full_run bad_field "no time" "'time'" 'del d["time"]'
bad_field "message a number" "'message'" 'd["message"]=5'
full_run bad_field "message null" "'message'" 'd["message"]=None'
full_run bad_field "no message" "'message'" 'del d["message"]'
full_run bad_field "no stats" "'stats'" 'del d["stats"]'
full_run bad_field "stats an array" "'stats'" 'd["stats"]=[1,2]'
bad_field "stats.bytes_added negative" "'stats.bytes_added'" 'd["stats"]["bytes_added"]=-1'
full_run bad_field "stats.bytes_added a fraction" "'stats.bytes_added'" 'd["stats"]["bytes_added"]=1.5'
full_run bad_field "stats.chunks_added a string" "'stats.chunks_added'" 'd["stats"]["chunks_added"]="1"'
full_run bad_field "no format" '"format"' 'del d["format"]'
full_run bad_field "format not dlk" '"format"' 'd["format"]="dlq"'
bad_field "version 2" "version 2" 'd["version"]=2'
full_run bad_field "version a string" "'version'" 'd["version"]="1"'
full_run bad_field "no tensors" "'tensors'" 'del d["tensors"]'
full_run bad_field "tensors an object" "'tensors'" 'd["tensors"]={}'
bad_field "a chunk hash in upper case" "chunk entry 0" \
    't=d["tensors"][0]; t["chunks"][0][0]=t["chunks"][0][0].upper()'
full_run bad_field "a chunk key that climbs" "chunk entry 0" \
    't=d["tensors"][0]; t["chunks"][0][0]="../../../../../../etc/passwd"'
full_run bad_field "a chunk entry of three" "chunk entry 0" \
    't=d["tensors"][0]; t["chunks"][0]=t["chunks"][0][:3]'
full_run bad_field "samples against the chunks" "'samples'" 'd["tensors"][0]["samples"]+=1'
full_run bad_field "a tensor without dtype" "'dtype'" 'del d["tensors"][0]["dtype"]'
full_run bad_field "key_index a string" "'key_index'" 'd["key_index"]="index/keys/x"'
full_run bad_field "key_index of a bad object" "'key_index'" \
    'd["key_index"]={"object":"index/keys/XYZ","rows":0}'
full_run bad_field "key_index rows negative" "'key_index'" \
    'd["key_index"]={"object":"index/keys/"+"0"*32,"rows":-1}'
full_run bad_field "views not an array" "'views'" 'd["views"]="v"'
full_run bad_field "a view without its object" "view 0" \
    'd["views"]=[{"name":"v","rows":0,"dataset_rows":0,"query":""}]'
full_run bad_field "a member twice" "duplicate" \
    'text=orig.replace("\"message\":", "\"message\":\"x\",\"message\":", 1)'
full_run bad_field "not JSON" "malformed commit" 'text=orig[:-10]'
bad_field "content not matching its id" "does not match its id" \
    'cid="0"*31+"1"; d["message"]="changed"'

# deeper in the history: the first commit broken, the second naming it
C1X=$(python3 "$T/craft.py" "$T/c1.json" "$T/crafted" 'd["time"]="never"')
obj_put "$DS" "commits/$C1X.json" "$T/crafted/$C1X.json"
C2X=$(python3 "$T/craft.py" "$T/c2.json" "$T/crafted" "d['parent']='$C1X'")
obj_put "$DS" "commits/$C2X.json" "$T/crafted/$C2X.json"
AT=$C1X bad "the first commit broken" "'time'" "$C2X"

# main itself
restore_chunks
printf 'not-a-commit\n' >"$T/main"
obj_put "$DS" refs/heads/main "$T/main"
fails "main not an id: verify --all finds it" 1 dlk verify "$DS" --all
check "main not an id: named" grep -qF "refs/heads/main" "$OUT"
chunk_list "$DS" "$T/before"
fails "main not an id: gc stops" 3 dlk gc "$DS" --grace 0
check "main not an id: gc names it" grep -qF "refs/heads/main" "$ERR"
chunk_list "$DS" "$T/after"
check "main not an id: no chunk was deleted" cmp "$T/before" "$T/after"
fails "main not an id: log refuses it" 3 dlk log "$DS"
restore_chunks
move_main 0123456789abcdef0123456789abcdef
fails "main names a missing commit: verify --all finds it" 1 dlk verify "$DS" --all --json
check "main names a missing commit: named as main's fault" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert any(e["object"]=="refs/heads/main" and "does not exist" in e["error"] for e in d["errors"]), d' "$OUT"
chunk_list "$DS" "$T/before"
fails "main names a missing commit: gc stops" 3 dlk gc "$DS" --grace 0
check "main names a missing commit: gc names main" grep -qF "refs/heads/main names commit" "$ERR"
chunk_list "$DS" "$T/after"
check "main names a missing commit: no chunk was deleted" cmp "$T/before" "$T/after"
fails "main names a missing commit: log refuses it" 3 dlk log "$DS"

# unknown members are ignored: such a commit is read, and gc works
UX=$(python3 "$T/craft.py" "$T/c2.json" "$T/crafted" '
d["x_later"]={"a":[1]}; d["stats"]["x_more"]=1; d["tensors"][0]["x_note"]="n"')
obj_put "$DS" "commits/$UX.json" "$T/crafted/$UX.json"
restore_chunks
move_main "$UX"
ok "unknown members: verify --all" dlk verify "$DS" --all --json
check "unknown members: ok, both commits read" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] and d["commits_checked"]==2 and len(d["unreferenced"])==1, d' "$OUT"
ok "unknown members: log" dlk log "$DS" --json
check "unknown members: log reads both" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert [e["id"] for e in d]==[sys.argv[2], sys.argv[3]], d' "$OUT" "$UX" "$C1"
ok "unknown members: gc --grace 0" dlk gc "$DS" --grace 0 --json
check "unknown members: gc removed the orphan alone" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["removed"]==1, d' "$OUT"
chunk_list "$DS" "$T/after"
check "unknown members: the first commit's chunk is kept" grep -qxF "$c1_chunk" "$T/after"

# the history as it was
move_main "$C2"
ok "well-formed: gc --grace 0" dlk gc "$DS" --grace 0 --json
check "well-formed: nothing more to remove" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["removed"]==0 and d["referenced"]==2, d' "$OUT"
ok "well-formed: verify --all --deep" dlk verify "$DS" --all --deep --json
check "well-formed: every commit intact, nothing unreferenced" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] and d["commits_checked"]==2 and d["unreferenced"]==[], d' "$OUT"
ok "well-formed: the first commit reads" dlk cat "$DS" labels 99 --at "$C1"
