#!/usr/bin/env bash
# A view that names rows the state it is read in lacks (a hand-edited
# manifest: the view of a larger copy of the dataset pasted in) is
# refused by every reader, naming the view and the row (formats/dlk-v1.md
# 6.10), and verify reports it as a problem (exit 1); never read as a
# view of fewer rows, nor past the tensors' ends.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "views past the state" "numpy missing: python3 -m pip install numpy"; exit 0; }

python3 "$DLK_TESTS/../examples/sample_data.py" "$T/a" --samples 10 --size 8 --jpeg >/dev/null
python3 "$DLK_TESTS/../examples/sample_data.py" "$T/b" --samples 6 --size 8 --seed 3 --jpeg >/dev/null
(cd "$T/b" && for d in *; do for f in "$d"/*; do mv "$f" "$d/b-${f#"$d"/}"; done; done)
A=$T/small
B=$T/large
ok "a dataset of 10 rows" dlk create "$A" from-dir "$T/a" --quiet
cp -a "$A" "$B"
ok "a copy with 6 rows more" dlk ingest "$B" from-dir "$T/b" --quiet
ok "a view of the copy: rows 3, 12 and 14" dlk query "$B" "row == 3 or row == 12 or row == 14" --save-view late --json
check "3 rows saved" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["rows"]==[3,12,14]' "$OUT"
ok "a view of the copy that the small one can read" dlk query "$B" "row < 2" --save-view early
# the copy's views into the small dataset's head, their objects with them
python3 - "$A" "$B" <<'PY'
import json, shutil, sys, os
a, b = sys.argv[1:3]
mb = json.load(open(b + "/staging/manifest.json"))
pa = a + "/staging/manifest.json"
ma = json.load(open(pa))
ma["views"] = mb["views"]
for v in mb["views"]:
    os.makedirs(os.path.dirname(a + "/" + v["object"]), exist_ok=True)
    shutil.copy(b + "/" + v["object"], a + "/" + v["object"])
open(pa, "w").write(json.dumps(ma, separators=(",", ":")))
PY
ok "ls still lists the dataset and its views" dlk ls "$A" --json
check "10 rows, two views" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert all(t["samples"]==10 for t in d["tensors"]) and [v["name"] for v in d["views"]]==["early","late"], d' "$OUT"

fails "ls --view of the view past the state" 3 dlk ls "$A" --view late
check "names the view and the row" grep -q "view 'late' .* names row 12, past the 10 rows of" "$ERR"
fails "cat --view of it" 3 dlk cat "$A" labels 0 --view late
check "cat: names the view and the row" grep -q "view 'late' .* names row 12, past the 10 rows" "$ERR"
fails "query --view of it" 3 dlk query "$A" --view late
check "query: names the view and the row" grep -q "view 'late' .* names row 12" "$ERR"
fails "bench-stream --view of it" 3 dlk bench-stream "$A" --view late --device cpu --batch-size 2
check "bench-stream: names the view and the row" grep -q "view 'late' .* names row 12" "$ERR"
fails "verify finds it" 1 dlk verify "$A" --json
check "a problem naming the view, its object and the row" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); e=d["errors"]
assert not d["ok"] and len(e)==1 and e[0]["object"].startswith("index/views/"), d
assert "view '"'"'late'"'"'" in e[0]["error"] and "row 12" in e[0]["error"], e' "$OUT"
fails "verify --view of it" 1 dlk verify "$A" --view late
check "verify --view: FAILED, one problem" grep -q "^FAILED: 0 chunks.*; 1 problem$" "$OUT"
ok "the other view still reads" dlk ls "$A" --view early --json
check "its 2 rows" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["view"]["rows"]==2' "$OUT"
ok "cat --view of the other view" dlk cat "$A" labels 1 --view early
ok "verify --view of the other view" dlk verify "$A" --view early
ok "the larger copy reads the same view" dlk ls "$B" --view late --json
check "3 rows there" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["view"]["rows"]==3' "$OUT"
ok "and verifies" dlk verify "$B"
