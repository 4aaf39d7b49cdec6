#!/usr/bin/env bash
# Resumable ingest: runs killed with SIGKILL at several points and started
# again with the same command end with every sample exactly once, equal
# sample by sample to an uninterrupted ingest; and --shard I/N run by three
# concurrent processes equals one process.
. "$DLK_TESTS/lib.sh"
command -v ffmpeg >/dev/null || { skip "ingest resume" "ffmpeg missing"; exit 0; }

S=$T/src
for c in a b c; do
    mkdir -p "$S/$c"
    ff -f lavfi -i "testsrc2=s=1280x720:r=25" -frames:v 50 -q:v 4 "$S/$c/$c%04d.jpg"
done
args=(from-dir "$S" --resize 64x48 --chunk-size 24K --checkpoint 0.02 --jobs 1 --fetch 2)

REF=$(ds_url ref)
ok "uninterrupted ingest" dlk create "$REF" "${args[@]}" --json
check "150 rows" grep -q '"ingested": 150' "$OUT"
secs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$OUT")
dump "$REF" > "$T/ref.txt"
check "dump has 600 samples (images, labels, key, key_version)" test "$(wc -l < "$T/ref.txt")" = 600

DS=$(ds_url killed)
kills=0
# kill points spread over the length of an uninterrupted run
for f in 0.1 0.3 0.5 0.2 0.7 0.4 0.9 0.6; do
    d=$(python3 -c "print(0.02 + $f * $secs)")
    "$DLK" create "$DS" "${args[@]}" --quiet >/dev/null 2>"$T/kill.err" &
    pid=$!
    sleep "$d"
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null
done
echo "# $kills of 8 runs killed"
check "some runs were killed mid-way" test "$kills" -ge 1
# --exist-ok: a run killed after its merge leaves a finished dataset,
# which create refuses without it; an unfinished run is resumed either way
ok "the same command finishes the job" dlk create "$DS" "${args[@]}" --json --exist-ok
check "reports the resumed or finished run" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); assert d["complete"], d' "$OUT"
dump "$DS" > "$T/killed.txt"
check "every sample exactly once, in order: equal to the uninterrupted run" cmp "$T/ref.txt" "$T/killed.txt"
ok "verify" dlk verify "$DS"

# killed between the create's two writes: dlk.json alone, no head yet
HALF=$(ds_url half)
obj_get "$REF" dlk.json "$T/dlk.json"
[ "${DLK_TEST_STORE:-file}" = s3 ] || mkdir -p "$HALF"
obj_put "$HALF" dlk.json "$T/dlk.json"
check "dlk.json is there" obj_get "$HALF" dlk.json "$T/dlk2.json"
fails "dlk.json alone is no dataset yet" 3 dlk ls "$HALF"
ok "the same create takes it up" dlk create "$HALF" "${args[@]}" --json
check "... and ingests every row" grep -q '"ingested": 150' "$OUT"
dump "$HALF" > "$T/half.txt"
check "... equal to the uninterrupted run" cmp "$T/ref.txt" "$T/half.txt"
mkdir -p "$T/other" && echo x > "$T/other/notes.txt"
fails "a folder of other objects is refused" 3 dlk create "$T/other" "${args[@]}"
check "... naming what is there" grep -q "is not empty" "$ERR"

# three shards at once, each its own process
SH=$(ds_url shards)
for i in 0 1 2; do
    "$DLK" create "$SH" "${args[@]}" --shard "$i/3" --json > "$T/shard$i.json" 2>"$T/shard$i.err" &
    eval "p$i=\$!"
done
rc=0
for i in 0 1 2; do eval "wait \$p$i" || rc=$?; done
check "three shard processes succeed" test "$rc" = 0
check "one of them merged" sh -c "cat '$T'/shard*.json | grep -q '\"complete\": true'"
dump "$SH" > "$T/shards.txt"
check "N=3 equals N=1 sample by sample" cmp "$T/ref.txt" "$T/shards.txt"
ok "shard rerun is a no-op" dlk create "$SH" "${args[@]}" --shard 1/3 --json
check "nothing new" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["ingested"]==0 and d["new"]==0 and d["present"]==150 and d["complete"], d' "$OUT"
fails "--no-resume with --shard is refused" 3 dlk create "$SH" "${args[@]}" --shard 1/3 --no-resume
check "the refusal names --no-resume and --shard" sh -c "grep -q -- '--no-resume.*--shard 1/3' '$ERR'"
dump "$SH" > "$T/shards2.txt"
check "the refused run changed nothing" cmp "$T/ref.txt" "$T/shards2.txt"

# shards killed and rerun
SK=$(ds_url shardkill)
for round in 1 2 3; do
    for i in 0 1 2; do
        "$DLK" create "$SK" "${args[@]}" --shard "$i/3" --quiet >/dev/null 2>&1 &
        eval "p$i=\$!"
    done
    sleep "0.$((round + 1))"
    for i in 0 1 2; do eval "kill -9 \$p$i 2>/dev/null; wait \$p$i 2>/dev/null"; done
done
for i in 0 1 2; do
    "$DLK" create "$SK" "${args[@]}" --shard "$i/3" --quiet >/dev/null 2>"$T/sk$i.err" &
    eval "p$i=\$!"
done
rc=0
for i in 0 1 2; do eval "wait \$p$i" || rc=$?; done
check "killed shards finish on rerun" test "$rc" = 0
dump "$SK" > "$T/sk.txt"
check "killed shards equal N=1 sample by sample" cmp "$T/ref.txt" "$T/sk.txt"
