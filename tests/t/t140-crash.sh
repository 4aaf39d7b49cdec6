#!/usr/bin/env bash
# Crash safety: dlk ingest and dlk commit killed with SIGKILL at random
# points.  After each kill, verify --all passes and the dataset shows the
# old state or the new one, never a mix; rerunning finishes the work.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "crash safety" "numpy missing: python3 -m pip install numpy"; exit 0; }
KILLS=${DLK_TEST_KILLS:-50}

SRC=$T/src
python3 "$DLK_TESTS/../examples/sample_data.py" "$SRC" --samples 150 --size 16 >/dev/null
DS=$(ds_url crash)
ok "create" dlk create "$DS" --tensor images:u8:16x16x3:zstd --tensor labels:i32 --tensor 'boxes:f32:?x4' --chunk-size 2K
ok "first ingest" dlk ingest "$DS" from-dir "$SRC" --no-key --quiet
ok "first commit" dlk commit "$DS" -m base

state() { # prints "samples-per-tensor head-id"; fails if tensors disagree
    "$DLK" ls "$DS" --json > "$T/ls.json" 2>"$T/ls.err" || return 1
    python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
n={t["samples"] for t in d["tensors"]}
assert len(n)==1, "tensors disagree: %r" % n
print(n.pop(), d["head"])' "$T/ls.json"
}

t0=$(date +%s%N)
"$DLK" ingest "$DS" from-dir "$SRC" --no-key --quiet
t1=$(date +%s%N)
full_ms=$(( (t1 - t0) / 1000000 + 1 ))
"$DLK" commit "$DS" -m second >/dev/null
echo "# one ingest takes ${full_ms} ms; killing at random points within it"

bad=0 mixed=0 old_seen=0 new_seen=0
read -r samples head < <(state)
for i in $(seq 1 "$KILLS"); do
    op=ingest
    [ $((i % 3)) -eq 0 ] && op=commit
    delay=$(python3 -c "import random; print(random.uniform(0, $full_ms/1000.0))")
    if [ $op = ingest ]; then
        "$DLK" ingest "$DS" from-dir "$SRC" --no-key --quiet 2>/dev/null &
    else
        "$DLK" commit "$DS" -m "commit $i" >/dev/null 2>&1 &
    fi
    pid=$!
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if ! "$DLK" verify "$DS" --all > "$T/v.out" 2>&1; then
        bad=$((bad + 1))
        echo "# after kill $i ($op): verify failed:"; sed 's/^/#   /' "$T/v.out" | head -5
    fi
    if ! read -r s2 h2 < <(state); then
        mixed=$((mixed + 1))
        echo "# after kill $i ($op): unreadable or mixed state"; sed 's/^/#   /' "$T/ls.err" | head -3
        continue
    fi
    if [ $op = ingest ]; then
        if [ "$s2" = "$samples" ]; then old_seen=$((old_seen + 1))
        elif [ "$s2" = $((samples + 150)) ]; then new_seen=$((new_seen + 1))
        else mixed=$((mixed + 1)); echo "# after kill $i: $s2 samples, expected $samples or $((samples + 150))"
        fi
    else
        # a commit either moved main or did not; the samples never change
        [ "$s2" = "$samples" ] || { mixed=$((mixed + 1)); echo "# commit changed samples"; }
        if [ "$h2" != "$head" ]; then
            "$DLK" log "$DS" -n 1 --json > "$T/log.json"
            python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[0]["parent"]==sys.argv[2]' "$T/log.json" "$head" ||
                { mixed=$((mixed + 1)); echo "# new main is not a child of the old"; }
        fi
    fi
    samples=$s2 head=$h2
done
echo "# $KILLS kills: ingest left the old state $old_seen times, the new $new_seen times"
check "verify --all passed after every kill" test "$bad" -eq 0
check "never a mixed or unreadable state" test "$mixed" -eq 0
ok "rerun ingest finishes" dlk ingest "$DS" from-dir "$SRC" --no-key --quiet
ok "rerun commit finishes" dlk commit "$DS" -m final
read -r s3 h3 < <(state)
check "the rerun added exactly one source's samples" test "$s3" -eq $((samples + 150))
ok "deep verify of every commit at the end" dlk verify "$DS" --all --deep
