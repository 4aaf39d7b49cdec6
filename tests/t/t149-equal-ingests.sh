#!/usr/bin/env bash
# t149-equal-ingests.sh - two ingests of the same number of rows started
# together on one committed dataset, trial after trial, on a directory and
# on moto: a merge knows its own head by its run's id (the head's
# "writes"), not by the head's sample counts, so every ingest that exits 0
# has its rows in the head and the loser exits 4 naming the other writer.
# Then a merge record left by an interrupted merge, with another run's head
# of exactly its "after" counts: the merge stops with exit 4 instead of
# taking that head for its own.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/mixlib.sh"
mix_need "equal-size racing ingests"
. "$DLK_TESTS/writerslib.sh"

race() { # NAME DATASET TRIALS
    local name=$1 ds=$2 n=$3 i
    WR_TRIALS=0 WR_LOSSES=0 WR_WRONG=0 WR_BADEXIT=0 WR_BADVERIFY=0
    ok "$name: a committed dataset of 4 rows" wr_init "$ds"
    # n trials, more (up to 4n) until one ingest has lost the race: a
    # quick store often lets the second merge after the first is done
    for ((i = 1; i <= n || (WR_LOSSES == 0 && i <= 4 * n); i++)); do
        wr_trial "$ds" ingest:3 ingest:3 || echo "# $name trial $i: $WR_LAST"
    done
    echo "# $name: $WR_TRIALS trials of two 3-row ingests: $WR_LOSSES lost (exit 4), $WR_WRONG wrong heads"
    check "$name: every head holds base + the rows of each ingest that exited 0, once" \
        test "$WR_WRONG" -eq 0
    check "$name: every ingest exited 0 or 4 naming the other writer" \
        test "$WR_BADEXIT" -eq 0
    check "$name: verify --all --deep after every trial" test "$WR_BADVERIFY" -eq 0
    check "$name: the ingests raced (some exited 4)" test "$WR_LOSSES" -gt 0
}

race local "$T/local" 6

. "$DLK_TESTS/s3lib.sh"
s3_start --atomic
s3_mkbucket dlk-t149
race moto s3://dlk-t149/ds 4

# An interrupted merge of run B (its record written, done false), then run
# A of as many rows merged by another process: the head has B's "after"
# counts but A's rows.  Without key tensors, so that both shards of B are
# one run; A's rows are in class01, B's in class02.
C=$T/rec
labels() { "$DLK" query "$C" --show labels --json | python3 -c '
import json, sys
print(" ".join(str(s["labels"]) for s in json.load(sys.stdin)["samples"]))'; }
mix_tree "$T/rb" 3 1 11
mix_tree "$T/ra" 3 3 12; rm -rf "$T/ra/class00" "$T/ra/class02"
mix_tree "$T/rB" 3 3 13; rm -rf "$T/rB/class00" "$T/rB/class01"
ok "record: base of 3 rows" dlk create "$C" from-dir "$T/rb" --no-key --quiet
ok "record: shard 0 of B staged" dlk ingest "$C" from-dir "$T/rB" --shard 0/2 --quiet
run=$(basename "$(dirname "$(ls "$C"/staging/ingest/*/shard-0-of-2.json)")")
printf '{"format":"dlk","version":1,"run":"%s","before":[3,3],"after":[6,6],"done":false}' \
    "$run" >"$C/staging/ingest/$run/merge.json"
ok "record: A merged by another process" dlk ingest "$C" from-dir "$T/ra" --quiet
fails "record: B's last shard does not take A's head for its own" 4 \
    dlk ingest "$C" from-dir "$T/rB" --shard 1/2 --quiet
check "record: the message says what to remove" grep -q "remove staging/ingest/$run/" "$ERR"
check "record: the head holds base and A, not B" \
    test "$(labels | tr ' ' '\n' | sort | tr '\n' ' ')" = "0 1 1 1 1 2 "
rm -rf "${C:?}/staging/ingest/$run"
ok "record: B again, shard 0" dlk ingest "$C" from-dir "$T/rB" --shard 0/2 --quiet
ok "record: B again, shard 1 merges" dlk ingest "$C" from-dir "$T/rB" --shard 1/2 --quiet
check "record: now B's rows are there too" \
    test "$(labels | tr ' ' '\n' | sort | tr '\n' ' ')" = "0 1 1 1 1 2 2 2 2 "
ok "record: verify --deep" dlk verify "$C" --deep
