#!/usr/bin/env bash
# --shard auto: a Slurm job array's tasks (SLURM_ARRAY_TASK_ID from
# SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT of them) and a Kubernetes
# Indexed Job's pods (JOB_COMPLETION_INDEX, with --shard auto/N) each take
# their share with the same command, and the last to finish merges: the
# dataset equals one ingest of the whole source; an environment that
# names no share, or shares that do not fit, is refused before anything
# is read (exit 2), naming the variables.
. "$DLK_TESTS/lib.sh"
have_numpy || { skip "--shard auto" "numpy missing: python3 -m pip install numpy"; exit 0; }
python3 - "$T/src" <<'PY'
import numpy as np, os, sys
os.makedirs(sys.argv[1])
for i in range(30):
    np.save("%s/r%02d.x.npy" % (sys.argv[1], i), np.arange(4, dtype="<i4") + 4 * i)
PY
unset JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_MIN \
    SLURM_ARRAY_TASK_MAX SLURM_ARRAY_TASK_COUNT
for d in one slurm k8s; do
    "$DLK" create "$T/$d" --tensor x:i32:4 >/dev/null
done
ok "one ingest of the whole source" dlk ingest "$T/one" from-dir "$T/src" --order sorted --quiet
dump "$T/one" x > "$T/one.txt"

# a Slurm array 10-12: tasks 10, 11, 12 are shares 0, 1, 2 of 3
slurm() { # TASK-ID ARGS...
    local id=$1; shift
    env SLURM_ARRAY_TASK_ID="$id" SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_MAX=12 \
        SLURM_ARRAY_TASK_COUNT=3 "$DLK" "$@"
}
ok "Slurm task 11 (share 1 of 3)" slurm 11 ingest "$T/slurm" from-dir "$T/src" --order sorted --shard auto --json
check "... share 1 of 3, staged, not merged" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["shard"] != {"index": 1, "count": 3} or d["complete"] is not False)' "$OUT"
ok "Slurm task 10 (share 0)" slurm 10 ingest "$T/slurm" from-dir "$T/src" --order sorted --shard auto --quiet
ok "Slurm task 12 (share 2), the last: merges" slurm 12 ingest "$T/slurm" from-dir "$T/src" --order sorted --shard auto --json
check "... merged" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["shard"] != {"index": 2, "count": 3} or d["complete"] is not True)' "$OUT"
dump "$T/slurm" x > "$T/slurm.txt"
check "the array's dataset equals one ingest, row for row" cmp "$T/one.txt" "$T/slurm.txt"

# a Kubernetes Indexed Job of 3 completions: pods 2, 0, 1
for i in 2 0 1; do
    ok "Indexed Job pod $i" env JOB_COMPLETION_INDEX=$i \
        "$DLK" ingest "$T/k8s" from-dir "$T/src" --order sorted --shard auto/3 --quiet
done
dump "$T/k8s" x > "$T/k8s.txt"
check "the Job's dataset equals one ingest, row for row" cmp "$T/one.txt" "$T/k8s.txt"

# refused before anything is read
ing() { "$DLK" ingest "$T/none" from-dir "$T/src" "$@"; }
fails "auto with no launcher's variables" 2 ing --shard auto
check "... names them" grep -q "JOB_COMPLETION_INDEX.*SLURM_ARRAY_TASK_ID" "$ERR"
fails "an Indexed Job without N" 2 env JOB_COMPLETION_INDEX=1 "$DLK" ingest "$T/none" from-dir "$T/src" --shard auto
check "... says to give auto/N" grep -q "auto/N" "$ERR"
fails "an index past N" 2 env JOB_COMPLETION_INDEX=3 "$DLK" ingest "$T/none" from-dir "$T/src" --shard auto/3
fails "a Slurm array with a step (1-5:2, 3 tasks)" 2 env SLURM_ARRAY_TASK_ID=3 \
    SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=5 SLURM_ARRAY_TASK_COUNT=3 \
    "$DLK" ingest "$T/none" from-dir "$T/src" --shard auto
check "... names the array" grep -q "array 1-5 has 3 tasks" "$ERR"
fails "auto/N against the array's count" 2 slurm 10 ingest "$T/none" from-dir "$T/src" --shard auto/4
fails "a variable that is no number" 2 env JOB_COMPLETION_INDEX=x1 "$DLK" ingest "$T/none" from-dir "$T/src" --shard auto/3
check "... names it" grep -q "JOB_COMPLETION_INDEX is 'x1'" "$ERR"
fails "auto followed by junk" 2 ing --shard autox
check "nothing was made by the refusals" test ! -e "$T/none"

# an Indexed Job whose pod 1 meets more bad objects than --max-skip allows:
# it fails, the other shards' rows stay staged, and the message says how
# to finish the merge; running that pod again with --max-skip 1 merges
# every shard (the bad objects skipped, the rows of the others kept)
cp -a "$T/src" "$T/bad"   # the same objects, versions kept
for i in $(seq 0 29); do printf 'not npy' > "$T/bad/z$i.x.npy"; done
"$DLK" create "$T/job" --tensor x:i32:4 >/dev/null
pod() { # INDEX ARGS...
    local i=$1; shift
    env JOB_COMPLETION_INDEX="$i" "$DLK" ingest "$T/job" from-dir "$T/bad" \
        --order sorted --shard auto/2 "$@"
}
ok "pod 0, skips allowed, staged" pod 0 --max-skip 1 --quiet
fails "pod 1, past --max-skip" 3 pod 1
check "... says the other shards' rows stay staged, and how to merge them" \
    grep -q "the other shards' rows stay staged and merge once shard 1/2 completes: run it again (with --max-skip 1" "$ERR"
check "... nothing merged yet" sh -c '"$1" ls "$2" | grep -Eq "^x +[a-z]+ +i32 +4 +0 "' sh "$DLK" "$T/job"
ok "pod 1 again with --max-skip 1: the last, merges" pod 1 --max-skip 1 --json
check "... merged" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["complete"] is not True)' "$OUT"
dump "$T/one" key key_version > "$T/one-x.txt"
dump "$T/job" key key_version > "$T/job-x.txt"
check "the dataset holds every good row once, as one ingest of them" cmp "$T/one-x.txt" "$T/job-x.txt"
