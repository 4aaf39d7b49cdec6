#!/usr/bin/env bash
# ingest from-dir, ls, cat in every form, against values numpy wrote.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "ingest and read" "numpy missing: python3 -m pip install numpy"; exit 0; }

SRC=$T/src
python3 "$DLK_TESTS/../examples/sample_data.py" "$SRC" --samples 40 --size 24 >/dev/null
DS=$(ds_url ds)
ok "create" dlk create "$DS" --tensor images:u8:24x24x3 --tensor labels:i32 --tensor 'boxes:f32:?x4:zstd' --classes labels=red,green,blue --chunk-size 16K
ok "ingest from-dir" dlk ingest "$DS" from-dir "$SRC" --order sorted --json
check "ingest counts rows (40 of 3 tensors) and their bytes" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ingested"]==40 and d["skipped"]==0, d
assert d["bytes_out"] > 40*(24*24*3+4), d
assert d["keys"] and d["new"]==40 and d["present"]==0, d' "$OUT"
ok "ls --json" dlk ls "$DS" --json
check "ls counts, chunks and sizes" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
t={x["name"]:x for x in d["tensors"]}
assert all(x["samples"]==40 for x in t.values()), t
assert t["images"]["raw_bytes"]==40*24*24*3
# 16 KiB chunks of 1728-byte images: several chunks
assert t["images"]["chunks"]>=4, t["images"]["chunks"]
assert t["boxes"]["shape_min"][0]>=1 and t["boxes"]["shape_max"][0]<=4
assert t["images"]["stored_bytes"]>t["images"]["raw_bytes"]' "$OUT"
ok "ls text" dlk ls "$DS"
check "ls text shows variable shape range" grep -q "?x4 (" "$OUT"

for i in 0 17 39; do
    ok "cat --npy images $i" sh -c "\"$DLK\" cat \"$DS\" images $i --npy > \"$T/img$i.npy\""
    check "images $i equal the source" python3 -c '
import numpy as np,sys
a=np.load(sys.argv[1]); b=np.load(sys.argv[2])
assert a.dtype==b.dtype and a.shape==b.shape and (a==b).all()' "$T/img$i.npy" "$SRC/$(printf %06d $i).images.npy"
    ok "cat --npy boxes $i (variable shape, zstd)" sh -c "\"$DLK\" cat \"$DS\" boxes $i --npy > \"$T/box$i.npy\""
    check "boxes $i equal the source" python3 -c '
import numpy as np,sys
a=np.load(sys.argv[1]); b=np.load(sys.argv[2])
assert a.dtype==b.dtype and a.shape==b.shape and (a==b).all()' "$T/box$i.npy" "$SRC/$(printf %06d $i).boxes.npy"
done
ok "cat --raw" sh -c "\"$DLK\" cat \"$DS\" images 5 --raw > \"$T/raw5\""
check "raw bytes are the array's bytes" python3 -c '
import numpy as np,sys
assert open(sys.argv[1],"rb").read()==np.load(sys.argv[2]).tobytes()' "$T/raw5" "$SRC/000005.images.npy"
ok "cat --json label" dlk cat "$DS" labels 7 --json
check "label json has value and class name" python3 -c '
import json,sys,numpy as np
d=json.load(open(sys.argv[1])); v=int(np.load(sys.argv[2]))
assert d["values"]==[v] and d["class_name"]==["red","green","blue"][v], d' "$OUT" "$SRC/000007.labels.npy"
ok "cat text of a label" dlk cat "$DS" labels 7
check "text shows the class name" grep -qE "values: \[[0-2] \((red|green|blue)\)\]" "$OUT"
ok "cat text of an image elides" dlk cat "$DS" images 0
check "elided" grep -q "\.\.\." "$OUT"
fails "cat past the end" 3 dlk cat "$DS" images 40
check "message names tensor and count" grep -q "tensor 'images' has 40 samples, no sample 40" "$ERR"
fails "cat of a missing tensor" 3 dlk cat "$DS" nope 0
fails "cat with a bad index" 2 dlk cat "$DS" images -1
fails "cat with two modes" 2 dlk cat "$DS" images 0 --raw --npy
# ranges: FIRST:END, a JSON line or the raw bytes of each sample in order
ok "cat a range as JSON lines" dlk cat "$DS" labels 3:9 --json
check "six lines, rows 3 to 8, each its label" python3 -c '
import json,sys,numpy as np
rows=[json.loads(l) for l in open(sys.argv[1])]
assert [r["index"] for r in rows]==list(range(3,9)), rows
for r in rows: assert r["values"]==[int(np.load(sys.argv[2]+"/%06d.labels.npy" % r["index"]))], r' "$OUT" "$SRC"
ok "cat 38: --raw" sh -c "\"$DLK\" cat \"$DS\" images 38: --raw > \"$T/raw38\""
check "the last two images' bytes back to back" python3 -c '
import numpy as np,sys
want=b"".join(np.load(sys.argv[2]+"/%06d.images.npy" % i).tobytes() for i in (38,39))
assert open(sys.argv[1],"rb").read()==want' "$T/raw38" "$SRC"
ok "cat :2 prints two summaries" dlk cat "$DS" labels :2
check "... of samples 0 and 1" sh -c "grep -c '^tensor labels  sample [01] ' '$OUT' | grep -qx 2"
ok "an empty range prints nothing" dlk cat "$DS" labels 40:
check "... nothing" test ! -s "$OUT"
fails "a range past the end" 3 dlk cat "$DS" labels 38:41
check "names the count and the end" grep -q "tensor 'labels' has 40 samples, the range ends at 41" "$ERR"
check "... and prints no sample" test ! -s "$OUT"
fails "a range that ends before it begins" 2 dlk cat "$DS" labels 9:3
fails "a range of three numbers" 2 dlk cat "$DS" labels 1:2:3
fails "a range with --npy" 2 dlk cat "$DS" labels 0:2 --npy
check "... says what a range is written with" grep -q "summary, --raw or --json" "$ERR"

ok "cat key" dlk cat "$DS" key 7
check "the key of row 7 is its stem below the source's path" grep -q "text: \"$(realpath "$SRC")/000007\"" "$OUT"
# a second ingest of the same files: nothing new
ok "second ingest" dlk ingest "$DS" from-dir "$SRC" --json
check "... ingests nothing: 40 keys present" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["new"]==0 and d["present"]==40 and d["bytes_out"]==0, d' "$OUT"
python3 -c '
import numpy as np,sys
np.save(sys.argv[1]+"/000040.images.npy", np.full((24,24,3), 7, dtype=np.uint8))
np.save(sys.argv[1]+"/000040.labels.npy", np.array(2, dtype=np.int32))
np.save(sys.argv[1]+"/000040.boxes.npy", np.zeros((1,4), dtype=np.float32))' "$SRC"
ok "a third ingest after one more row" dlk ingest "$DS" from-dir "$SRC" --json
check "... ingests that row alone" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==1 and d["new"]==1 and d["present"]==40, d
assert d["bytes_out"] > 24*24*3 + 4 + 16, d' "$OUT"
ok "ls after the new row" dlk ls "$DS" --json
check "41 samples in every tensor" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert all(x["samples"]==41 for x in d["tensors"]), d' "$OUT"

# without keys (--no-key), a second ingest appends after what is there
DS3=$(ds_url ds3)
ok "create for --no-key" dlk create "$DS3" --tensor images:u8:24x24x3 --tensor labels:i32 --tensor 'boxes:f32:?x4:zstd'
ok "ingest --no-key" dlk ingest "$DS3" from-dir "$SRC" --no-key --quiet
ok "second ingest --no-key appends" dlk ingest "$DS3" from-dir "$SRC" --no-key --json
check "... 41 rows again" grep -q '"ingested": 41' "$OUT"
ok "ls after append" dlk ls "$DS3" --json
check "samples doubled, no key tensors" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert [x["name"] for x in d["tensors"]]==["images","labels","boxes"], d
assert all(x["samples"]==82 for x in d["tensors"])' "$OUT"
"$DLK" cat "$DS3" images 0 --raw > "$T/raw0"
"$DLK" cat "$DS3" images 41 --raw > "$T/raw41"
check "sample 41 is sample 0 again" cmp "$T/raw0" "$T/raw41"

# batches along the first axis, and bad inputs
mkdir -p "$T/batch/labels" "$T/bad"
python3 -c '
import numpy as np,sys
np.save(sys.argv[1]+"/batch/labels/b.npy", np.arange(5,dtype=np.int32))
np.save(sys.argv[1]+"/bad/x.labels.npy", np.zeros(3,dtype=np.float64))' "$T"
DS2=$(ds_url ds2)
ok "create labels-only" dlk create "$DS2" --tensor labels:i32
ok "ingest a batch file" dlk ingest "$DS2" from-dir "$T/batch" --json
check "batch split on the first axis" grep -q '"ingested": 5' "$OUT"
ok "cat batch element" dlk cat "$DS2" labels 3 --json
check "value 3" grep -q '"values":\[3\]' "$OUT"
fails "wrong dtype is an error naming the file" 3 dlk ingest "$DS2" from-dir "$T/bad"
check "error names the file" grep -q "x.labels.npy" "$ERR"
ok "failed ingest left the dataset as it was" dlk ls "$DS2" --json
check "still 5 samples" grep -q '"samples": 5' "$OUT"
printf 'not numpy' > "$T/bad/x.labels.npy"
fails "a non-npy file is an error" 3 dlk ingest "$DS2" from-dir "$T/bad"
check "error says not a .npy file" grep -q "not a .npy file" "$ERR"
fails "missing source dir" 3 dlk ingest "$DS2" from-dir "$T/none"
fails "unknown source" 2 dlk ingest "$DS2" from-nowhere x
