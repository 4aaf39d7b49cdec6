#!/usr/bin/env bash
# dlk commit, log, --at, gc: pinned reads stay byte-identical while
# ingest goes on; opening a commit costs a constant number of reads.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "commit" "numpy missing: python3 -m pip install numpy"; exit 0; }

SRC=$T/src
python3 "$DLK_TESTS/../examples/sample_data.py" "$SRC" --samples 20 --size 16 >/dev/null
SRC2=$T/src2
python3 "$DLK_TESTS/../examples/sample_data.py" "$SRC2" --samples 12 --size 16 --seed 7 >/dev/null
DS=$(ds_url ds)
ok "create" dlk create "$DS" --tensor images:u8:16x16x3:zstd --tensor labels:i32 --tensor 'boxes:f32:?x4' --chunk-size 2K
ok "log of a dataset without commits is empty" dlk log "$DS" --json
check "empty log" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))==[]' "$OUT"
fails "--at main without commits" 3 dlk ls "$DS" --at main
check "says there are no commits" grep -q "no commits yet" "$ERR"
ok "ingest" dlk ingest "$DS" from-dir "$SRC" --no-key --quiet
ok "ls shows uncommitted changes" dlk ls "$DS" --json
check "dirty before the first commit" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dirty"] is True and d["head"] is None' "$OUT"
fails "commit needs a message" 2 dlk commit "$DS"
ok "commit" dlk commit "$DS" -m "first 20" --json
C1=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["committed"]; print(d["id"])' "$OUT")
check "commit id is 32 hex digits" sh -c "echo '$C1' | grep -qE '^[0-9a-f]{32}$'"
ok "ls is clean after commit" dlk ls "$DS" --json
check "clean, head is the commit" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dirty"] is False and d["head"]==sys.argv[2], d' "$OUT" "$C1"
ok "committing again is a no-op" dlk commit "$DS" -m again --json
check "nothing committed" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["committed"] is False and d["id"]==sys.argv[2]' "$OUT" "$C1"
for i in 0 7 19; do "$DLK" cat "$DS" images $i --raw > "$T/c1-img$i"; "$DLK" cat "$DS" boxes $i --raw > "$T/c1-box$i"; done

ok "ingest more after the commit" dlk ingest "$DS" from-dir "$SRC2" --no-key --quiet
ok "commit 2" dlk commit "$DS" -m "plus 12"
C2=$(cat "$OUT")
ok "log" dlk log "$DS" --json
check "log newest first with counts and bytes" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert [e["id"] for e in d]==[sys.argv[3],sys.argv[2]], d
assert d[0]["parent"]==sys.argv[2] and d[1]["parent"] is None
assert d[0]["samples"]["images"]==32 and d[1]["samples"]["images"]==20
assert d[0]["message"]=="plus 12" and d[0]["bytes_added"]>0 and d[0]["chunks_added"]>0
assert d[1]["time"].endswith("Z")' "$OUT" "$C1" "$C2"
ok "log -n 1" dlk log "$DS" -n 1 --json
check "one entry" python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1])))==1' "$OUT"
ok "log text" dlk log "$DS"
check "log text shows messages" grep -q "first 20" "$OUT"

for ref in "$C1" "${C1:0:8}" main~1; do
    ok "ls --at $ref" dlk ls "$DS" --at "$ref" --json
    check "--at $ref shows 20 samples" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert all(t["samples"]==20 for t in d["tensors"]) and d["at"]==sys.argv[2]' "$OUT" "$C1"
done
for i in 0 7 19; do
    "$DLK" cat "$DS" images $i --raw --at "$C1" > "$T/a"
    check "image $i at the first commit is byte-identical after more ingest" cmp "$T/a" "$T/c1-img$i"
    "$DLK" cat "$DS" boxes $i --raw --at main~1 > "$T/a"
    check "boxes $i at main~1 are byte-identical" cmp "$T/a" "$T/c1-box$i"
done
fails "sample 20 does not exist at the first commit" 3 dlk cat "$DS" images 20 --at "$C1"
ok "but exists at main" dlk cat "$DS" images 20 --at main
fails "main~5 is past the first commit" 3 dlk ls "$DS" --at main~5
fails "unknown id" 3 dlk ls "$DS" --at 0123456789abcdef0123456789abcdef
fails "a bad reference" 3 dlk ls "$DS" --at 'zz!'
ok "verify --at the first commit" dlk verify "$DS" --at "$C1" --json
check "checks exactly that commit's chunks" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] and d["chunks_checked"]>=3, d' "$OUT"
n1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chunks_checked"])' "$OUT")
ok "verify --all" dlk verify "$DS" --all --deep --json
check "all commits, each chunk once" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ok"] and d["commits_checked"]==2 and d["chunks_checked"]>int(sys.argv[2]) and d["unreferenced"]==[], d' "$OUT" "$n1"

# opening a commit costs a constant number of small reads
for k in 3 4 5 6 7 8; do
    python3 -c '
import numpy as np,sys,os
d=sys.argv[1]; os.makedirs(d,exist_ok=True)
np.save(d+"/x.labels.npy", np.array(int(sys.argv[2]),np.int32))' "$T/more$k" "$k"
    "$DLK" ingest "$DS" from-dir "$T/more$k" --no-key --quiet
    "$DLK" commit "$DS" -m "commit $k" >/dev/null
done
DLK_IO_STATS=1 "$DLK" ls "$DS" --at "$C1" >/dev/null 2>"$T/io1"
DLK_IO_STATS=1 "$DLK" ls "$DS" --at main >/dev/null 2>"$T/io2"
check "opening a commit by id: 2 gets, no list, whatever the history" grep -q "gets=2 heads=0 puts=0 lists=0" "$T/io1"
check "opening main: 3 gets, no list" grep -q "gets=3 heads=0 puts=0 lists=0" "$T/io2"

# gc: chunks no state references are removed once past the grace period
mkdir -p "$T/orphan"
# 600 labels fill (and write) one 2 KiB chunk before the bad file stops the run
python3 -c 'import numpy as np,sys; np.save(sys.argv[1]+"/o.labels.npy", np.arange(600,dtype=np.int32))' "$T/orphan"
printf 'garbage' > "$T/orphan/z.labels.npy"
# (the one-row ingests above left the chunks their runs wrote that the
# merge then joined with the head's small last ones: garbage too)
ok "verify --all before" dlk verify "$DS" --all --json
cp "$OUT" "$T/unref0.json"
fails "a failed ingest" 3 dlk ingest "$DS" from-dir "$T/orphan" --no-key
ok "verify --all reports the chunk the failed run left" dlk verify "$DS" --all --json
check "one more unreferenced chunk, of 512 labels, still ok" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); d0=json.load(open(sys.argv[2]))
new=[u for u in d["unreferenced"] if u not in d0["unreferenced"]]
assert d["ok"] and len(new)==1 and new[0]["bytes"]==64+64+2048, (d, d0)' "$OUT" "$T/unref0.json"
norphans=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["unreferenced"]))' "$OUT")
ok "gc keeps young chunks" dlk gc "$DS" --json
check "nothing removed within the grace period" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["removed"]==0 and d["referenced"]>0, d' "$OUT"
ok "gc --grace 0 --dry-run" dlk gc "$DS" --grace 0 --dry-run --json
dry=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["removed"])' "$OUT")
ok "gc --grace 0" dlk gc "$DS" --grace 0 --json
check "gc removed what dry-run listed: the orphans" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["removed"]==int(sys.argv[2])==int(sys.argv[3]) and not d["dry_run"], d' "$OUT" "$dry" "$norphans"
ok "verify --all --deep after gc" dlk verify "$DS" --all --deep --json
check "every commit intact, nothing unreferenced" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] and d["unreferenced"]==[] and d["commits_checked"]==8, d' "$OUT"
"$DLK" cat "$DS" images 7 --raw --at "$C1" > "$T/a"
check "the first commit still reads the same bytes after gc" cmp "$T/a" "$T/c1-img7"
fails "bad --grace" 2 dlk gc "$DS" --grace 5y

# gc: the temporary files of writes killed before their rename (local
# datasets), once older than the grace period
if [ "${DLK_TEST_STORE:-file}" = file ]; then
    old=$DS/chunks/images/.dlk-tmp-4242-1-ab-7f00aa
    young=$DS/.dlk-tmp-4242-2-cd-head.json
    head -c 5000 /dev/urandom > "$old"
    touch -d '3 hours ago' "$old"
    echo '{"partial' > "$young"
    ok "gc --dry-run with leftovers of killed writes" dlk gc "$DS" --dry-run --json
    check "dry run: counts the old temporary file, removes nothing" python3 -c '
import json,os,sys; d=json.load(open(sys.argv[1]))
assert d["temp_files"]==1 and d["temp_bytes"]==5000 and d["dry_run"], d
assert os.path.exists(sys.argv[2]) and os.path.exists(sys.argv[3])' "$OUT" "$old" "$young"
    ok "gc removes it" dlk gc "$DS"
    check "the summary names it" grep -q "removed 1 temporary file of interrupted writes" "$OUT"
    check "the old one is gone, the young one (a write maybe running) kept" sh -c "! test -e '$old' && test -e '$young'"
    ok "verify --all after the sweep" dlk verify "$DS" --all
    rm -f "$young"
fi
