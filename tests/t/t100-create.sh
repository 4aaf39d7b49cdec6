#!/usr/bin/env bash
# dlk create: schemas, refusal to overwrite, bad specs.
. "$DLK_TESTS/lib.sh"

DS=$(ds_url create1)
ok "create with two tensors" dlk create "$DS" --tensor images:u8:32x32x3:zstd --tensor labels:i32
check "create says what it made" grep -q "created dataset" "$OUT"
ok "ls an empty dataset" dlk ls "$DS" --json
check "empty dataset lists both tensors with 0 samples" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
t={x["name"]:x for x in d["tensors"]}
assert t["images"]["shape"]==[32,32,3] and t["images"]["codec"]=="zstd", t
assert t["labels"]["samples"]==0 and t["labels"]["kind"]=="class_label", t
assert d["head"] is None' "$OUT"
fails "create refuses an existing dataset" 2 dlk create "$DS" --tensor x:u8
check "refusal names the dataset" grep -q "already exists\|not empty" "$ERR"
ok "existing dataset still opens after refusal" dlk ls "$DS"

fails "create without --tensor is a usage error" 2 dlk create "$(ds_url c2)"
fails "unknown dtype is a usage error" 2 dlk create "$(ds_url c3)" --tensor x:u7
check "unknown dtype message names it" grep -q "unknown dtype 'u7'" "$ERR"
fails "bad shape is a usage error" 2 dlk create "$(ds_url c4)" --tensor x:u8:3xx3
fails "bad codec is a usage error" 2 dlk create "$(ds_url c5)" --tensor x:u8:3:lz4
fails "zstd level out of range" 2 dlk create "$(ds_url c6)" --tensor x:u8:3:zstd30
fails "bad tensor name" 2 dlk create "$(ds_url c7)" --tensor '../x:u8'
fails "duplicate tensor names" 3 dlk create "$(ds_url c8)" --tensor x:u8 --tensor x:i32
fails "unknown flag" 2 dlk create "$(ds_url c9)" --tensor x:u8 --frobnicate
ok "variable shape, level and kind" dlk create "$(ds_url c10)" --tensor 'img:u8:?x?x3:zstd9' --tensor boxes:f32:?x4 --kind boxes=bbox --tensor labels:i64 --classes labels=a,b,c --chunk-size 1M
ok "ls shows them" dlk ls "$(ds_url c10)" --json
check "schema round-trips" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
t={x["name"]:x for x in d["tensors"]}
assert t["img"]["shape"]==[None,None,3] and t["img"]["level"]==9, t["img"]
assert t["boxes"]["kind"]=="bbox" and t["boxes"]["chunk_bytes"]==1<<20
assert t["labels"]["class_names"]==["a","b","c"]' "$OUT"
if [ "${DLK_TEST_STORE:-file}" = file ]; then
    fails "ls of a missing dataset" 3 dlk ls "$T/nope"
    check "missing dataset leaves no directory behind" test ! -e "$T/nope"
    check "error names the dataset" grep -q "no dataset at '$T/nope'" "$ERR"
fi
