#!/usr/bin/env bash
# dlk verify: clean datasets pass; each kind of damage is found and named.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "verify" "numpy missing: python3 -m pip install numpy"; exit 0; }

SRC=$T/src
python3 "$DLK_TESTS/../examples/sample_data.py" "$SRC" --samples 30 --size 16 >/dev/null
mk() { # NAME CODEC
    local ds; ds=$(ds_url "$1")
    "$DLK" create "$ds" --tensor "images:u8:16x16x3:$2" --tensor labels:i32 --tensor "boxes:f32:?x4:$2" --chunk-size 4K >/dev/null &&
        "$DLK" ingest "$ds" from-dir "$SRC" --quiet
}
ok "make a dataset" mk good none
ok "verify a clean dataset" dlk verify "$(ds_url good)"
check "verify says ok" grep -q "^ok: " "$OUT"
ok "verify --deep --json" dlk verify "$(ds_url good)" --deep --json
check "json keys" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ok"] is True and d["chunks_checked"]>=6 and d["bytes_checked"]>0 and d["errors"]==[], d' "$OUT"

for codec in none zstd; do
    for where in header payload end; do
        name=flip-$codec-$where
        ok "make $name" mk "$name" "$codec"
        DS=$(ds_url "$name")
        key=$(first_chunk_key "$DS" images)
        obj_get "$DS" "$key" "$T/chunk"
        case $where in header) off=20 ;; payload) off=200 ;; end) off=-1 ;; esac
        flip_byte "$T/chunk" "$off"
        obj_put "$DS" "$key" "$T/chunk"
        fails "verify finds a flipped byte ($codec, $where)" 1 dlk verify "$DS"
        check "the bad chunk is named ($codec, $where)" grep -q "$key" "$OUT"
        fails "verify --deep --json also fails ($codec, $where)" 1 dlk verify "$DS" --deep --json
        check "json names the object ($codec, $where)" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ok"] is False and any(e["object"]==sys.argv[2] for e in d["errors"]), d' "$OUT" "$key"
    done
done

ok "make trunc" mk trunc zstd
DS=$(ds_url trunc)
key=$(first_chunk_key "$DS" boxes)
obj_get "$DS" "$key" "$T/chunk"
head -c 40 "$T/chunk" > "$T/chunk.short"
obj_put "$DS" "$key" "$T/chunk.short"
fails "verify finds a truncated chunk" 1 dlk verify "$DS"
check "truncation named" grep -q "$key" "$OUT"
fails "cat from a truncated chunk is an error, not a crash" 3 dlk cat "$DS" boxes 0

ok "make gone" mk gone none
DS=$(ds_url gone)
key=$(first_chunk_key "$DS" labels)
obj_rm "$DS" "$key"
fails "verify finds a missing chunk" 1 dlk verify "$DS"
check "missing chunk named" grep -q "$key" "$OUT"

ok "make badjson" mk badjson none
DS=$(ds_url badjson)
printf '{"format":"dlk","version":1,"parent":null,"tensors":[{"name":"x"' > "$T/m.json"
obj_put "$DS" staging/manifest.json "$T/m.json"
fails "verify reports a malformed manifest" 1 dlk verify "$DS"
check "malformed manifest named" grep -q "staging/manifest.json" "$OUT"
fails "ls on a malformed manifest fails cleanly" 3 dlk ls "$DS"
printf '{"format":"dlk","version":2,"tensors":[]}' > "$T/m.json"
obj_put "$DS" staging/manifest.json "$T/m.json"
fails "a future format version is refused" 3 dlk ls "$DS"
check "message names the version" grep -q "format version 2" "$ERR"
python3 -c 'import sys; sys.stdout.write("["*100000)' > "$T/m.json"
obj_put "$DS" staging/manifest.json "$T/m.json"
fails "deeply nested json is refused" 3 dlk ls "$DS"
printf '{"format":"dlk","version":1,"parent":null,"tensors":[{"name":"x","dtype":"u8","kind":"generic","shape":[99999999999999999999],"codec":"none","chunk_bytes":1,"samples":0,"chunks":[]}]}' > "$T/m.json"
obj_put "$DS" staging/manifest.json "$T/m.json"
fails "huge numbers are refused" 3 dlk ls "$DS"
printf '{"format":"dlk","version":1,"parent":null,"tensors":[{"name":"x","dtype":"u8","kind":"generic","shape":"3","codec":"none","chunk_bytes":1,"samples":0,"chunks":[]}]}' > "$T/m.json"
obj_put "$DS" staging/manifest.json "$T/m.json"
fails "wrong types are refused" 3 dlk ls "$DS"
check "wrong type names the field" grep -q "'shape'" "$ERR"
