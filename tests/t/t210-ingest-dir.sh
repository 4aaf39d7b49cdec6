#!/usr/bin/env bash
# dlk create/ingest from-dir over raw media: schema inference, folder
# labels, sidecars, label manifests, shape options, order, idempotent rerun.
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest from-dir" "ffmpeg missing"; exit 0; }

# N frames of a moving test pattern as JPEGs: DIR PREFIX N SIZE
frames() { mkdir -p "$1" && ff -f lavfi -i "testsrc2=s=$4:r=10" -frames:v "$3" -q:v 3 "$1/$2%03d.jpg"; }

S=$T/train
frames "$S/cat" c 4 500x375
frames "$S/dog" d 4 320x240
frames "$S/bird" b 4 160x120
ff -f lavfi -i "mandelbrot=s=200x150" -frames:v 1 "$S/bird/png1.png"

DS=$(ds_url ds)
# without key tensors: every rerun is the same run (t225 covers keys)
ok "create from-dir infers and ingests" dlk create "$DS" from-dir "$S" --resize 64x48 --no-key --json
check "13 rows ingested, none skipped" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==13 and d["skipped"]==0 and d["errors"]==[] and d["complete"], d
assert d["bytes_in"]>0 and d["bytes_out"]==13*(64*48*3+4), d' "$OUT"
check "stages: the rows time split into fetch, decode and waits" python3 -c '
import json,os,sys; s=json.load(open(sys.argv[1]))["stages"]
assert set(s) == {"list","rows","append","finish","fetch","decode","decode_wait","decode_lock","write_wait"}, s
assert s["decode"] > 0 and s["fetch"] > 0 and min(s.values()) >= 0, s
# one decode thread per online core by default, each at most the rows time
assert s["decode"] <= s["rows"] * os.cpu_count() + 0.01, s' "$OUT"
check "from a directory: a decode thread for each core it may use" python3 -c '
import json,os,sys; d=json.load(open(sys.argv[1]))
assert d["jobs"] == len(os.sched_getaffinity(0)), d["jobs"]' "$OUT"
ok "ls --json" dlk ls "$DS" --json
check "schema: images 48x64x3, labels with sorted folder names" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
assert t["images"]["shape"]==[48,64,3] and t["images"]["kind"]=="image", t
assert t["labels"]["class_names"]==["bird","cat","dog"], t["labels"]
assert t["images"]["samples"]==13 and t["labels"]["samples"]==13' "$OUT"
labels=""
for i in $(seq 0 12); do
    "$DLK" cat "$DS" labels "$i" --json > "$T/l.json"
    labels="$labels$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["values"][0], end="")' "$T/l.json")"
done
check "rows shuffled by default: every row once, not in folder order" python3 -c '
import sys; l = sys.argv[1]
assert "".join(sorted(l)) == "0000011112222" and l != "0000011112222", l' "$labels"
dump "$DS" > "$T/first.txt"

fails "the same create again: the dataset exists (exit 2)" 2 dlk create "$DS" from-dir "$S" --resize 64x48 --no-key --json
check "names the dataset" grep -q "already exists at '$DS'" "$ERR"
ok "the same create with --exist-ok does nothing" dlk create "$DS" from-dir "$S" --resize 64x48 --no-key --json --exist-ok
check "reports already" grep -q '"already": true' "$OUT"
ok "ingest with the options create used: nothing to do" dlk ingest "$DS" from-dir "$S" --resize 64x48 --json
check "still already" grep -q '"already": true' "$OUT"
ok "--no-resume ingests again" dlk ingest "$DS" from-dir "$S" --no-resume --quiet
ok "ls" dlk ls "$DS" --json
check "26 samples" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert all(t["samples"]==26 for t in d["tensors"]), d' "$OUT"

DS2=$(ds_url ds2)
ok "without --resize: variable shape" dlk create "$DS2" from-dir "$S" --quiet
ok "ls ds2" dlk ls "$DS2" --json
check "images ?x?x3, shapes 120..375 x 160..500" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
i=t["images"]; assert i["shape"][2]==3 and i["shape"][0] in (-1,None,"?"), i
assert i["shape_min"]==[120,160,3] and i["shape_max"][1:]==[500,3], i' "$OUT"

DS3=$(ds_url ds3)
ok "--layout chw --channels 1" dlk create "$DS3" from-dir "$S" --resize 32x24 --layout chw --channels 1 --quiet
ok "ls ds3" dlk ls "$DS3" --json
check "images 1x24x32" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
assert t["images"]["shape"]==[1,24,32], t["images"]' "$OUT"

DS4=$(ds_url ds4)
ok "--unordered --jobs 2" dlk create "$DS4" from-dir "$S" --resize 64x48 --unordered --jobs 2 --json
check "... 2 decode threads" grep -q "\"jobs\": 2" "$OUT"
dump "$DS4" key key_version > "$T/unordered.txt"
check "unordered holds the same samples" sh -c "cut -d' ' -f1,3 '$T/first.txt' | sort > '$T/a'; cut -d' ' -f1,3 '$T/unordered.txt' | sort > '$T/b'; cmp '$T/a' '$T/b'"

# sidecars: one row from 0001.jpg + .cls + .txt + .json
F=$T/flat
frames "$F" "" 3 96x64
for i in 001 002 003; do
    printf 'dog\n' > "$F/$i.cls"; printf 'caption %s' "$i" > "$F/$i.txt"
    printf '{"score": 0.%s, "boxes": [[1,2,3,4],[5,6,7,%d]]}' "$i" "$((10#$i))" > "$F/$i.json"
done
printf 'cat' > "$F/002.cls"
DS5=$(ds_url ds5)
ok "sidecars form rows" dlk create "$DS5" from-dir "$F" --order sorted --json
check "3 rows" grep -q '"ingested": 3' "$OUT"
ok "ls ds5" dlk ls "$DS5" --json
check "tensors images, labels(cat,dog), text, score, boxes" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
assert set(t)=={"images","labels","text","score","boxes","key","key_version"}, t.keys()
assert t["labels"]["class_names"]==["cat","dog"]
assert t["boxes"]["shape"][1]==4 and t["boxes"]["kind"]=="bbox", t["boxes"]' "$OUT"
ok "cat label 1" dlk cat "$DS5" labels 1 --json
check "002.cls is cat" grep -q '"values":\[0\]' "$OUT"
ok "cat text 2" dlk cat "$DS5" text 2 --raw
check "text of 003" test "$(cat "$OUT")" = "caption 003"
ok "cat boxes 2" dlk cat "$DS5" boxes 2 --json
check "boxes of 003" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["shape"]==[2,4] and d["values"]==[1,2,3,4,5,6,7,3], d' "$OUT"

# a CSV manifest: key,label,weight
G=$T/csv
frames "$G" img 4 80x60
printf 'key,label,weight\nimg001.jpg,zebra,0.5\nimg002.jpg,ant,1\nimg003,zebra,2\nimg004.jpg,ant,"3"\n' > "$T/labels.csv"
DS6=$(ds_url ds6)
ok "--labels CSV" dlk create "$DS6" from-dir "$G" --labels "$T/labels.csv" --order sorted --json
check "4 rows" grep -q '"ingested": 4' "$OUT"
ok "ls ds6" dlk ls "$DS6" --json
check "labels ant,zebra and a weight tensor" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t={x["name"]:x for x in d["tensors"]}
assert t["labels"]["class_names"]==["ant","zebra"] and t["weight"]["dtype"]=="f32", t' "$OUT"
ok "weight of row 2" dlk cat "$DS6" weight 2 --json
check "is 2" grep -q '"values":\[2' "$OUT"
printf '{"key": "img001.jpg", "label": 1}\n{"key": "img002.jpg", "label": 0}\n\n{"key": "img003.jpg", "label": 1}\n{"key": "img004.jpg", "label": 2}\n' > "$T/labels.jsonl"
DS7=$(ds_url ds7)
ok "--labels JSONL with integer labels" dlk create "$DS7" from-dir "$G" --labels "$T/labels.jsonl" --order sorted --quiet
ok "label of row 3" dlk cat "$DS7" labels 3 --json
check "is 2" grep -q '"values":\[2\]' "$OUT"
