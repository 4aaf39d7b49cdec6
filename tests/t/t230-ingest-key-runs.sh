#!/usr/bin/env bash
# The key index as runs (formats/dlk-v1.md 6.9): an ingest of k new
# objects into a keyed dataset writes one run of k rows (its object
# 48 + 16 + 16 k bytes), not an index of every row; the newest runs are
# merged by size; lookups across runs give present, changed and new
# right; gc keeps the runs that the head and a commit name and removes
# those merged away; a corrupt run is not used (the answer stays right)
# and verify names it; compact folds the runs into one; a head whose
# runs an older writer dropped is read from the key chunks and gets a
# run of every row at the next merge.
. "$DLK_TESTS/lib.sh"

# N text files DIR/PREFIX<i>.txt from START
files() { # DIR PREFIX START N
    mkdir -p "$1"
    for i in $(seq "$3" $(($3 + $4 - 1))); do echo "row $2 $i" > "$1/$2$i.txt"; done
}
runs() { python3 -c '
import json,sys; m=json.load(open(sys.argv[1]+"/staging/manifest.json"))
print(" ".join(str(r["rows"]) for r in m.get("key_runs", [])))' "$DS"; }
newest_size() { python3 -c '
import json,os,sys; m=json.load(open(sys.argv[1]+"/staging/manifest.json"))
print(os.path.getsize(sys.argv[1]+"/"+m["key_runs"][-1]["object"]))' "$DS"; }
counts() { # INGESTED NEW PRESENT CHANGED (of $OUT)
    python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); w=[int(x) for x in sys.argv[2:]]
got=[d["ingested"], d["new"], d["present"], d["changed"]]
assert got==w, (got, w)' "$OUT" "$@"
}

S=$T/src
files "$S/a" a 0 40
DS=$T/ds
ok "create from 40 objects" dlk create "$DS" from-dir "$S" --json
check "one run of 40 rows" test "$(runs)" = "40"
check "... of 48 + 16 + 40 x 16 bytes" test "$(newest_size)" = $((48 + 16 + 640))

files "$S/b" b 0 3
ok "3 new objects" dlk ingest "$DS" from-dir "$S" --json
check "... ingested, 40 present" counts 3 3 40 0
check "a second run, of the 3 new rows only" test "$(runs)" = "40 3"
check "... of 48 + 16 + 3 x 16 bytes" test "$(newest_size)" = $((48 + 16 + 48))

files "$S/b" c 0 5
ok "5 more" dlk ingest "$DS" from-dir "$S" --json
check "... ingested, 43 present" counts 5 5 43 0
check "the 3 merged with them (3 <= 2 x 5): runs of 40 and 8" test "$(runs)" = "40 8"
files "$T/other" o 0 2
ok "2 objects of another directory" dlk ingest "$DS" from-dir "$T/other" --json
check "... new" counts 2 2 0 0
check "runs of 40, 8 and 2" test "$(runs)" = "40 8 2"

ok "the source again" dlk ingest "$DS" from-dir "$S" --json
check "... nothing new: every row found across the runs" counts 0 0 48 0
echo "changed" > "$S/a/a7.txt"
touch -d '2020-01-01' "$S/a/a7.txt"
files "$S/b" d 0 1
ok "one replaced object, one new" dlk ingest "$DS" from-dir "$S" --json
check "... 1 new, 47 present, 1 changed" counts 1 1 47 1
check "runs of 40, 8 and 3 (2 <= 2 x 1)" test "$(runs)" = "40 8 3"

ok "commit" dlk commit "$DS" -m keyed --unsafe-single-writer
files "$S/b" e 0 4
ok "4 more" dlk ingest "$DS" from-dir "$S" --json
check "runs of 40 and 15 (3 and 8 merged in)" test "$(runs)" = "40 15"
ok "gc" dlk gc "$DS" --grace 0
check "the index objects left: the head's and the commit's runs" python3 -c '
import json,os,sys
ds=sys.argv[1]; m=json.load(open(ds+"/staging/manifest.json"))
c=json.load(open(ds+"/commits/"+open(ds+"/refs/heads/main").read().strip()+".json"))
named={r["object"].split("/")[-1] for d in (m, c) for r in d["key_runs"]}
left=set(os.listdir(ds+"/index/keys"))
assert left==named, (left, named)' "$DS"

# a corrupt run: not used, the keys read from the key chunks
big=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key_runs"][0]["object"])' "$DS/staging/manifest.json")
chmod u+w "$DS/$big"
flip_byte "$DS/$big" $((48 + 16 + 16 * 20))
ok "with a corrupt run: the source again" dlk ingest "$DS" from-dir "$S" --json
check "... nothing new, 52 present, 1 changed" counts 0 0 52 1
fails "verify" 1 dlk verify "$DS"
check "... names the run" grep -q "$big" "$OUT"
ok "compact" dlk compact "$DS" --json
check "... folds 2 runs into 1" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["key_runs_before"]==2 and d["key_runs_after"]==1, d' "$OUT"
check "one run of every row" test "$(runs)" = "55"
ok "verify after compact" dlk verify "$DS"
ok "the source again" dlk ingest "$DS" from-dir "$S" --json
check "... nothing new, 52 present, 1 changed" counts 0 0 52 1

# a writer of an earlier revision drops key_runs: the keys come from the
# key chunks, and the next merge writes a run of every row
python3 -c '
import json,sys
p=sys.argv[1]+"/staging/manifest.json"; m=json.load(open(p)); del m["key_runs"]
open(p,"w").write(json.dumps(m))' "$DS"
ok "without the index: the source again" dlk ingest "$DS" from-dir "$S" --json
check "... nothing new, 52 present, 1 changed" counts 0 0 52 1
files "$S/b" f 0 2
ok "2 new" dlk ingest "$DS" from-dir "$S" --json
check "... ingested" counts 2 2 52 1
check "a run of every row" test "$(runs)" = "57"
