#!/usr/bin/env bash
# gc during an unfinished ingest run keeps the chunks its staging document
# lists: the rerun still finishes with every sample exactly once.
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest and gc" "ffmpeg missing: apt-get install ffmpeg"; exit 0; }
ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i "testsrc2=s=640x360:r=25" \
    -frames:v 120 -q:v 4 "$T/f%04d.jpg"
mkdir -p "$T/src/cls" && mv "$T"/f*.jpg "$T/src/cls/"
args=(from-dir "$T/src" --resize 64x48 --chunk-size 16K --checkpoint 0.01 --jobs 1 --fetch 1)
REF=$(ds_url ref)
ok "uninterrupted ingest" dlk create "$REF" "${args[@]}" --json
secs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$OUT")
DS=$(ds_url ds)
staged=0
for f in 0.5 0.6 0.7 0.8; do
    "$DLK" create "$DS" "${args[@]}" --quiet >/dev/null 2>&1 &
    pid=$!
    sleep "$(python3 -c "print(0.05 + $f * $secs)")"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if "$DLK" verify "$DS" --all --json > "$T/v.json" 2>/dev/null &&
        python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["chunks_checked"] > 0 else 1)' "$T/v.json"; then
        staged=1
        break
    fi
done
if [ "$staged" = 0 ]; then
    skip "gc keeps staged chunks" "no kill landed while chunks were staged"
    exit 0
fi
# The chunks the staging documents list.  Others may be unreferenced: the
# killed run's chunks written since its last checkpoint, and the last
# chunks of earlier checkpoints, which the next one filled and replaced.
python3 -c '
import glob,json,sys
for f in glob.glob(sys.argv[1] + "/staging/ingest/*/shard-*.json"):
    for t in json.load(open(f))["tensors"]:
        for c in t["chunks"]: print("chunks/%s/%s" % (t["name"], c[0]))' "$DS" > "$T/staged"
check "verify --all counts the staged chunks as in use, not unreferenced" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); staged=set(open(sys.argv[2]).read().split())
assert d["ok"] and not staged & {u["object"] for u in d["unreferenced"]}, d' "$T/v.json" "$T/staged"
ok "gc --grace 0 during the unfinished run" dlk gc "$DS" --grace 0 --json
check "gc removed none of the staged chunks" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); staged=set(open(sys.argv[2]).read().split())
assert d["referenced"]>0 and not staged & set(d["objects"]), d' "$OUT" "$T/staged"
ok "verify --all after gc: every staged chunk is there" dlk verify "$DS" --all
# --exist-ok: a run killed after its merge leaves a finished dataset,
# which create refuses without it; an unfinished run is resumed either way
ok "the same command finishes the job" dlk create "$DS" "${args[@]}" --json --exist-ok
for t in images labels; do
    n=$(python3 -c 'import json,subprocess,sys; print([x["samples"] for x in json.loads(subprocess.check_output([sys.argv[1],"ls",sys.argv[2],"--json"]))["tensors"] if x["name"]==sys.argv[3]][0])' "$DLK" "$DS" "$t")
    check "$t: 120 samples" test "$n" = 120
done
"$DLK" cat "$REF" images 77 --raw > "$T/a"; "$DLK" cat "$DS" images 77 --raw > "$T/b"
check "sample 77 equals the uninterrupted run's" cmp "$T/a" "$T/b"
ok "verify --deep" dlk verify "$DS" --deep
