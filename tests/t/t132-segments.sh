#!/usr/bin/env bash
# Segments of chunk lists (formats/dlk-v1.md 4.3.4): a commit after a small
# ingest copies the tail and the segment references, not the list; past
# commits, the log, verify --all and gc are right with shared segments; a
# missing or corrupt segment is named and gc removes nothing; a dataset
# with every list inline is read and converted at its next publish; a
# reader that ignores `segments` (revision 13) rejects the head.  With
# DLK_OLD naming a dlk built before segments, that build is checked too.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "segments" "numpy missing: python3 -m pip install numpy"; exit 0; }

# rows of x = their index + base, one 4-byte chunk each (chunk size 4)
rows() { # DIR COUNT BASE
    mkdir -p "$1"
    python3 -c 'import numpy as np, sys
np.save(sys.argv[1] + "/r.x.npy", np.arange(int(sys.argv[2]), dtype="<i4") + int(sys.argv[3]))' "$@"
}
head_json() { obj_get "$DS" staging/manifest.json "$T/head.json"; }
not_there() { ! obj_get "$1" "$2" "$T/.gone" 2>/dev/null; }
# value of x at row $2 (--at $3) equals $4
value_is() {
    local at=()
    [ -n "$3" ] && at=(--at "$3")
    "$DLK" cat "$DS" x "$2" "${at[@]}" > "$T/v" 2>"$ERR" &&
        grep -q "values: \[$4\]" "$T/v"
}

N=1100 # past a segment of 1024 entries
DS=$(ds_url ds)
rows "$T/a" $N 0
ok "create, one chunk a row" dlk create "$DS" --tensor x:i32 --chunk-size 4
ok "ingest $N rows" dlk ingest "$DS" from-dir "$T/a" --no-key --quiet
head_json
check "the head names a segment of 1024 entries and a tail of the rest" python3 -c '
import json,sys
t=json.load(open(sys.argv[1]))["tensors"][0]
assert [s[1] for s in t["segments"]]==[1024], t.get("segments")
assert len(t["chunks"])=='"$N"'-1024 and t["samples"]=='"$N"'
assert sum(s[2] for s in t["segments"])+sum(c[1] for c in t["chunks"])==t["samples"]' "$T/head.json"
ok "ls counts every chunk" dlk ls "$DS" --json
check "ls: $N samples in $N chunks" python3 -c 'import json,sys
t=json.load(open(sys.argv[1]))["tensors"][0]; assert t["samples"]==t["chunks"]=='"$N"', t' "$OUT"
check "a row in the first segment reads" value_is "$DS" 5 "" 5
check "another row of the segment reads" value_is "$DS" 1023 "" 1023
check "a row in the tail reads" value_is "$DS" 1099 "" 1099
ok "commit 1" dlk commit "$DS" -m "$N rows"

# five small ingests, each committed
sizes=()
for i in 1 2 3 4 5; do
    rows "$T/s$i" 10 $((100000 * i))
    ok "ingest 10 rows ($i)" dlk ingest "$DS" from-dir "$T/s$i" --no-key --quiet
    ok "commit after 10 rows ($i)" dlk commit "$DS" -m "small $i"
    obj_get "$DS" "commits/$(cat "$OUT").json" "$T/c.json"
    sizes+=("$(wc -c < "$T/c.json")")
done
TOTAL=$((N + 50))
# an inline list costs 40 bytes an entry at least; the tail is 1024 at most
check "each small commit is far below the list (${sizes[*]} bytes for $TOTAL entries)" \
    python3 -c 'import sys
s=[int(x) for x in sys.argv[2:]]; n=int(sys.argv[1])
assert max(s) < n*40//3 and max(s) < 1024*64+4096, s' "$TOTAL" "${sizes[@]}"
check "the commits share the segment: still one" \
    sh -c "[ \$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))[\"tensors\"][0][\"segments\"]))' '$T/c.json') -eq 1 ]"

ok "log of six commits" dlk log "$DS" --json
check "log: newest first, samples and stats from small commits" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert len(d)==6 and d[0]["message"]=="small 5" and d[5]["message"]=="'"$N"' rows"
assert [e["samples"]["x"] for e in d]==['"$TOTAL"','"$((TOTAL-10))"','"$((TOTAL-20))"','"$((TOTAL-30))"','"$((TOTAL-40))"','"$N"'], d
assert all(e["chunks_added"]==10 for e in d[:5]), [e["chunks_added"] for e in d]
assert d[5]["chunks_added"]=='"$N"'' "$OUT"
ok "ls --at main~3" dlk ls "$DS" --at main~3 --json
check "main~3 holds $((N + 20)) rows" python3 -c 'import json,sys
t=json.load(open(sys.argv[1]))["tensors"][0]; assert t["samples"]==t["chunks"]=='"$((N + 20))"', t' "$OUT"
check "main~3: a row of a shared segment" value_is "$DS" 1000 main~3 1000
check "main~3: its last small row" value_is "$DS" $((N + 19)) main~3 200009
fails "main~3: no row past it" 3 dlk cat "$DS" x $((N + 20)) --at main~3
check "main~5: the first ingest's last row" value_is "$DS" $((N - 1)) main~5 $((N - 1))
ok "verify --all --deep" dlk verify "$DS" --all --deep --json
check "every chunk once, six commits, nothing unreferenced" python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); assert d["ok"] and d["commits_checked"]==6 and d["chunks_checked"]=='"$TOTAL"' and d["unreferenced"]==[], d' "$OUT"

# rows whose chunks the first ingest wrote already (the same bytes): in
# the shared segment, so the commit adds none of them
rows "$T/dup" 10 0
ok "ingest 10 rows equal to the first 10" dlk ingest "$DS" from-dir "$T/dup" --no-key --quiet
ok "commit them" dlk commit "$DS" -m dup
ok "log -n 1" dlk log "$DS" -n 1 --json
check "stats: no chunk added (each is in the segment both share)" python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))[0]; assert d["chunks_added"]==0 and d["bytes_added"]==0 and d["samples"]["x"]=='"$((TOTAL + 10))"', d' "$OUT"

# a rewrite of the whole list (compaction) leaves the old segments to the
# commits; gc keeps every segment any state names, removes unnamed ones
ok "compact into 64-byte chunks" dlk compact "$DS" --target-size 64
head_json
check "the head has a list of its own now" python3 -c 'import json,sys
t=json.load(open(sys.argv[1]))["tensors"][0]; assert "segments" not in t and len(t["chunks"])<200, t' "$T/head.json"
ok "commit the compacted head" dlk commit "$DS" -m compacted
echo '{"format":"dlk","version":1,"chunks":[]}' > "$T/junk"
ORPHAN=index/segments/0123456789abcdef0123456789abcdef
obj_put "$DS" "$ORPHAN" "$T/junk"
ok "gc --grace 0" dlk gc "$DS" --grace 0
check "gc removed the unnamed segment" not_there "$DS" "$ORPHAN"
if [ "${DLK_TEST_STORE:-file}" = file ]; then
    check "the named segment stays" \
        sh -c "[ \$(ls '$DS/index/segments' | wc -l) -eq 1 ]"
fi
ok "verify --all --deep after gc" dlk verify "$DS" --all --deep --json
check "every commit still whole" python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); assert d["ok"] and d["commits_checked"]==8, d' "$OUT"
check "main~1 (segments of the commits only) reads" value_is "$DS" 700 main~1 700

# a segment named only by commits, corrupted, then missing
SEG=index/segments/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tensors"][0]["segments"][0][0])' "$T/c.json")
obj_get "$DS" "$SEG" "$T/seg.good"
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[60]^=1; open(sys.argv[2],"wb").write(b)' "$T/seg.good" "$T/seg.bad"
obj_put "$DS" "$SEG" "$T/seg.bad"
obj_put "$DS" "chunks/x/00000000000000000000000000000001" "$T/junk" # an orphan
fails "a corrupt segment: ls --at main~1 fails" 3 dlk ls "$DS" --at main~1
check "it names the segment" grep -q "$SEG: content does not match its name" "$ERR"
fails "a corrupt segment: verify --all reports it" 1 dlk verify "$DS" --all
check "verify names the segment" grep -q "$SEG" "$OUT"
fails "a corrupt segment: gc stops" 3 dlk gc "$DS" --grace 0
check "gc names it" grep -q "$SEG" "$ERR"
ok "the orphan chunk is still there" obj_get "$DS" "chunks/x/00000000000000000000000000000001" "$T/o"
obj_rm "$DS" "$SEG"
fails "a missing segment: ls --at main~1 fails" 3 dlk ls "$DS" --at main~1
check "it names the segment and the commit" grep -q "names segment $SEG, which does not exist" "$ERR"
fails "a missing segment: verify --all reports it" 1 dlk verify "$DS" --all --json
check "verify names it and calls nothing unreferenced" python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); assert d["unreferenced"]==[] and any(sys.argv[2] in e["object"] for e in d["errors"]), d' "$OUT" "$SEG"
fails "a missing segment: gc stops" 3 dlk gc "$DS" --grace 0
ok "the orphan chunk is still there" obj_get "$DS" "chunks/x/00000000000000000000000000000001" "$T/o"
ok "and every chunk of the commits" dlk verify "$DS" --json
obj_put "$DS" "$SEG" "$T/seg.good"
ok "the segment put back: verify --all" dlk verify "$DS" --all

# a dataset of revision 13 and before: every list inline
DS=$(ds_url old)
rows "$T/b" 1200 0
ok "create a second dataset" dlk create "$DS" --tensor x:i32 --chunk-size 4
ok "ingest 1200 rows" dlk ingest "$DS" from-dir "$T/b" --no-key --quiet
head_json
ok "commit it" dlk commit "$DS" -m "1200"
# its head with the list inline, as a writer of revision 13 wrote it
for s in $(python3 -c 'import json,sys; print(" ".join(s[0] for s in json.load(open(sys.argv[1]))["tensors"][0]["segments"]))' "$T/head.json"); do
    obj_get "$DS" "index/segments/$s" "$T/seg-$s"
done
python3 -c '
import json,sys
m=json.load(open(sys.argv[1])); t=m["tensors"][0]; out=[]
for s in t.pop("segments"):
    out+=json.load(open(sys.argv[3]+"/seg-"+s[0]))["chunks"]
t["chunks"]=out+t["chunks"]; m.pop("writes",None)
open(sys.argv[2],"w").write(json.dumps(m,separators=(",",":")))' "$T/head.json" "$T/inline.json" "$T"
# what a reader of revision 13 sees: the head without its segments
python3 -c 'import json,sys
m=json.load(open(sys.argv[1])); m["tensors"][0].pop("segments")
open(sys.argv[2],"w").write(json.dumps(m,separators=(",",":")))' "$T/head.json" "$T/noseg.json"
obj_put "$DS" staging/manifest.json "$T/noseg.json"
fails "a head read without its segments is malformed" 3 dlk ls "$DS"
check "as 'samples' against the tail's" grep -q "'samples' is 1200 but its chunks hold 176" "$ERR"
obj_put "$DS" staging/manifest.json "$T/inline.json"
ok "an inline head of 1200 entries reads" dlk ls "$DS" --json
check "1200 chunks" python3 -c 'import json,sys
t=json.load(open(sys.argv[1]))["tensors"][0]; assert t["chunks"]==1200, t' "$OUT"
check "its row 1150 reads" value_is "$DS" 1150 "" 1150
rows "$T/b2" 10 7000
ok "ingest 10 rows into it" dlk ingest "$DS" from-dir "$T/b2" --no-key --quiet
head_json
check "the publish converted it: one segment and a tail" python3 -c 'import json,sys
t=json.load(open(sys.argv[1]))["tensors"][0]; assert [s[1] for s in t["segments"]]==[1024] and len(t["chunks"])==186, t' "$T/head.json"
check "row 1150 still reads" value_is "$DS" 1150 "" 1150
check "a new row reads" value_is "$DS" 1205 "" 7005
ok "commit the converted head" dlk commit "$DS" -m plus10
ok "verify --all" dlk verify "$DS" --all --json
check "both commits, nothing wrong" python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); assert d["ok"] and d["commits_checked"]==2 and d["chunks_checked"]==1210, d' "$OUT"

# the log reads the commits alone: a segment that the head and both
# commits name, gone, does not stop it
SEG2=index/segments/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tensors"][0]["segments"][0][0])' "$T/head.json")
obj_get "$DS" "$SEG2" "$T/seg2"
obj_rm "$DS" "$SEG2"
fails "the head without its segment does not open" 3 dlk ls "$DS"
check "naming it" grep -q "names segment $SEG2, which does not exist" "$ERR"
ok "the log reads no segment" dlk log "$DS" --json
check "both commits" python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); assert [e["message"] for e in d]==["plus10","1200"], d' "$OUT"
obj_put "$DS" "$SEG2" "$T/seg2"

if [ -n "${DLK_OLD:-}" ] && [ -x "$DLK_OLD" ]; then
    fails "the build before segments: ls rejects the head" 3 "$DLK_OLD" ls "$DS"
    check "as malformed, 'samples' against its tail" grep -q "'samples' is 1210 but its chunks hold 186" "$ERR"
    fails "the build before segments: cat --at main rejects the commit" 3 "$DLK_OLD" cat "$DS" x 0 --at main
    fails "the build before segments: gc stops" 3 "$DLK_OLD" gc "$DS" --grace 0
    ok "the build before segments removed nothing" dlk verify "$DS" --all
    DS2=$(ds_url made-old)
    ok "the build before segments makes a dataset of 1100 rows" "$DLK_OLD" create "$DS2" --tensor x:i32 --chunk-size 4
    rows "$T/c" 1100 0
    ok "and ingests" "$DLK_OLD" ingest "$DS2" from-dir "$T/c" --no-key --quiet
    ok "and commits" "$DLK_OLD" commit "$DS2" -m old
    DS=$DS2
    check "this build reads it" value_is "$DS2" 1099 main 1099
    ok "this build appends to it" dlk ingest "$DS2" from-dir "$T/b2" --no-key --quiet
    ok "and commits" dlk commit "$DS2" -m new
    check "row 1105 at main" value_is "$DS2" 1105 main 7005
    check "row 1099 at main~1" value_is "$DS2" 1099 main~1 1099
    ok "verify --all --deep" dlk verify "$DS2" --all --deep
else
    skip "the build before segments" "set DLK_OLD to a dlk built from main before revision 14"
fi
