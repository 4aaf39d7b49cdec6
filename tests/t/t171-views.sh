#!/usr/bin/env bash
# Views: dlk query --save-view stores a row list in the dataset; it is
# committed and versioned with it, reads the same rows after more ingest,
# and every reader (ls, cat, verify, bench-stream, the loader) takes it
# as a dataset of its rows; a damaged view object is found.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "views" "numpy missing: python3 -m pip install numpy"; exit 0; }

python3 "$DLK_TESTS/../examples/sample_data.py" "$T/a" --samples 45 --size 16 --jpeg >/dev/null
python3 "$DLK_TESTS/../examples/sample_data.py" "$T/b" --samples 30 --size 16 --seed 9 --jpeg >/dev/null
# the second batch under other names, so that it adds rows
(cd "$T/b" && for d in *; do for f in "$d"/*; do mv "$f" "$d/b-${f#"$d"/}"; done; done)
DS=$(ds_url ds)
ok "create" dlk create "$DS" from-dir "$T/a" --chunk-size 2K --quiet
ok "save a view" dlk query "$DS" "labels == 'circle-red' or row % 10 == 0" --save-view red --json
check "saved with its rows" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["saved_view"]=="red" and d["count"]==len(d["rows"])>0, d' "$OUT"
cp "$OUT" "$T/saved.json"
ok "the view's rows" dlk query "$DS" --view red --json
check "are the rows saved" python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["rows"]; b=json.load(open(sys.argv[2]))["rows"]; assert a==b, (a,b)' "$OUT" "$T/saved.json"
ok "ls lists the view" dlk ls "$DS" --json
check "name, rows, query" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); s=json.load(open(sys.argv[2]))
v=d["views"]; assert len(v)==1 and v[0]["name"]=="red" and v[0]["rows"]==s["count"] and v[0]["dataset_rows"]==45, v
assert v[0]["query"].startswith("labels ==") and v[0]["object"].startswith("index/views/")' "$OUT" "$T/saved.json"
check "the head is dirty (a view is a change)" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["dirty"] is True' "$OUT"
ok "commit the view" dlk commit "$DS" -m "view red" --json
C1=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["committed"]; print(d["id"])' "$OUT")
ok "committing again is a no-op" dlk commit "$DS" -m again --json
check "nothing committed" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["committed"] is False' "$OUT"

ok "ingest more rows" dlk ingest "$DS" from-dir "$T/b" --quiet
ok "ls: 75 rows now" dlk ls "$DS" --json
check "75 samples" python3 -c 'import json,sys; assert all(t["samples"]==75 for t in json.load(open(sys.argv[1]))["tensors"])' "$OUT"
ok "the view after more ingest" dlk query "$DS" --view red --json
check "still the same rows" python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["rows"]; b=json.load(open(sys.argv[2]))["rows"]; assert a==b' "$OUT" "$T/saved.json"
R3=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][3])' "$T/saved.json")
for t in labels key images; do
    "$DLK" cat "$DS" $t 3 --view red --raw > "$T/via-view"
    "$DLK" cat "$DS" $t "$R3" --raw > "$T/direct"
    check "cat --view: $t of the view's 4th row is row $R3's" cmp "$T/via-view" "$T/direct"
done
fails "cat --view past the view's rows" 3 dlk cat "$DS" labels 1000 --view red
check "says how many rows" grep -q "view 'red' has [0-9]* rows, no row 1000" "$ERR"

ok "a filter within the view" dlk query "$DS" "labels == 'circle-red'" --view red --json
check "the view's red rows" python3 -c '
import json,sys,subprocess
got=json.load(open(sys.argv[1]))["rows"]; view=json.load(open(sys.argv[2]))["rows"]
red=[r for r in view if json.loads(subprocess.check_output([sys.argv[3],"cat",sys.argv[4],"labels",str(r),"--json"])).get("class_name")=="circle-red"]
assert got==red and 0<len(red)<len(view), (got, red)' "$OUT" "$T/saved.json" "$DLK" "$DS"
ok "replace the view in the head" dlk query "$DS" "row >= 40" --save-view red
ok "the head's view" dlk query "$DS" --view red --count
check "35 rows" grep -qx 35 "$OUT"
ok "the commit's view" dlk query "$DS" --view red --at "$C1" --json
check "the rows committed" python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["rows"]; b=json.load(open(sys.argv[2]))["rows"]; assert a==b' "$OUT" "$T/saved.json"
ok "ls --view at the commit" dlk ls "$DS" --at "$C1" --view red --json
check "samples are the view's rows" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); n=json.load(open(sys.argv[2]))["count"]
assert d["view"]=={"name":"red","rows":n} and all(t["samples"]==n for t in d["tensors"]), d' "$OUT" "$T/saved.json"
ok "save from a query at a commit (into the head)" dlk query "$DS" "row < 3" --at "$C1" --save-view first3
ok "ls --view of a contiguous range" dlk ls "$DS" --view first3 --json
check "3 samples, in the first chunks only" python3 -c '
import json,sys,subprocess; d=json.load(open(sys.argv[1]))
a={t["name"]: t for t in json.loads(subprocess.check_output([sys.argv[2],"ls",sys.argv[3],"--json"]))["tensors"]}
for t in d["tensors"]:
    assert t["samples"]==3 and 1<=t["chunks"]<=a[t["name"]]["chunks"], t
    if t["name"]=="images": assert t["chunks"]<a["images"]["chunks"] and t["stored_bytes"]<a["images"]["stored_bytes"], t' "$OUT" "$DLK" "$DS"

# --- the loader over a view: rows exactly the view's, equal batches ------
ok "a view of 1 row in 3" dlk query "$DS" "row % 3 == 1" --save-view third --json
python3 -c 'import json,sys; print("\n".join(map(str, json.load(open(sys.argv[1]))["rows"])))' "$OUT" > "$T/third"
for r in 0 1 2; do
    ok "bench-stream --view, rank $r of 3, shuffled" dlk bench-stream "$DS" --view third --device cpu --batch-size 4 --shuffle --epochs 1 --rank $r --world 3 --order-out "$T/o$r" --json
done
check "every row of the view exactly once, no other row" python3 -c '
import sys
view=[int(x) for x in open(sys.argv[1])]
got=[int(x) for f in sys.argv[2:] for l in open(f) for x in l.split()]
assert sorted(got)==view, (sorted(got), view)' "$T/third" "$T/o0" "$T/o1" "$T/o2"
check "equal batches on every rank" sh -c 'test "$(wc -l < "$1")" = "$(wc -l < "$2")" && test "$(wc -l < "$2")" = "$(wc -l < "$3")"' sh "$T/o0" "$T/o1" "$T/o2"
ok "bench-stream --view reads fewer samples" dlk bench-stream "$DS" --view first3 --device cpu --batch-size 2 --json
check "3 samples, 2 batches" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["samples"]==3 and d["batches"]==2, d' "$OUT"
fails "bench-stream of a missing view" 3 dlk bench-stream "$DS" --view nope --device cpu
check "names the views there are" grep -q "no view 'nope'.*first3, red, third" "$ERR"

# --- verify and damage -------------------------------------------------
ok "verify --view" dlk verify "$DS" --view first3 --json
check "checks only the chunks that hold its rows" python3 -c '
import json,sys,subprocess
v=json.load(open(sys.argv[1])); a=json.loads(subprocess.check_output([sys.argv[2],"verify",sys.argv[3],"--json"]))
assert v["ok"] and 0 < v["chunks_checked"] < a["chunks_checked"], (v, a)' "$OUT" "$DLK" "$DS"
fails "verify --view --all" 2 dlk verify "$DS" --view red --all
OBJ=$(python3 -c 'import json,sys; print([v["object"] for v in json.load(open(sys.argv[1]))["views"] if v["name"]=="third"][0])' <("$DLK" ls "$DS" --json))
obj_get "$DS" "$OBJ" "$T/vobj"
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[40]^=1; open(sys.argv[1],"wb").write(b)' "$T/vobj"
obj_put "$DS" "$OBJ" "$T/vobj"
fails "verify finds the damaged view" 1 dlk verify "$DS" --json
check "naming its object" python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["errors"]; assert any(x["object"]==sys.argv[2] for x in e), e' "$OUT" "$OBJ"
fails "a query over it fails" 3 dlk query "$DS" --view third
check "as corrupt, naming the view" grep -q "view 'third'.*does not match" "$ERR"
fails "the loader refuses it" 3 dlk bench-stream "$DS" --view third --device cpu
ok "other views still read" dlk query "$DS" --view first3 --count
ok "drop the view" dlk query "$DS" --drop-view third
ok "verify is clean again" dlk verify "$DS"
fails "a bad view name" 3 dlk query "$DS" "true" --save-view "../x"
fails "--drop-view of a missing view" 3 dlk query "$DS" --drop-view third

# --- an old reader's view: the manifest without 'views' reads as before --
python3 -c '
import json,sys
p=sys.argv[1]+"/staging/manifest.json"; m=json.load(open(p)); del m["views"]
open(p,"w").write(json.dumps(m,separators=(",",":")))' "$DS" 2>/dev/null &&
    { ok "a head without views" dlk ls "$DS" --json
      check "lists none" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["views"]==[]' "$OUT"; }
