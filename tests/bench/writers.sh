#!/usr/bin/env bash
# tests/bench/writers.sh [STORE [TRIALS]] - racing writers by the hundred:
# the trials of t345 (tests/writerslib.sh: 2 to 4 of ingest, commit,
# compact, gc and query --save-view started at once on one committed
# dataset; most trials' ingests of equal row counts; after each, the head
# must hold exactly the rows it held plus those of every ingest that exited
# 0, every writer must exit 0 or 4, and verify --all --deep must pass).
# STORE: local (default), moto, gcs, or rgw (with DLK_S3_SERVER=rgw and
# DLK_RGW_ENV, as tests/README.md says); TRIALS: default 500.  A fresh
# dataset every BLOCK trials (default 25) keeps each verify small.
# Prints a line every BLOCK trials and, at the end, the counts:
#   trials, writers, losses (writers that exited 4), wrong heads, other
#   exits, failed verifies, seconds.
# DLK (default build/dlk) is the binary; DLK_TEST_SEED repeats a run.
#   tests/bench/writers.sh moto 500 | tee tests/bench/results/writers-moto.txt
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export DLK=${DLK:-$root/build/dlk} DLK_TESTS=$root/tests
STORE=${1:-local} N=${2:-500} BLOCK=${BLOCK:-25}
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/writerslib.sh"
python3 -c 'import PIL, numpy' || { echo "needs Pillow and numpy" >&2; exit 2; }
seed=${DLK_TEST_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
RANDOM=$seed
case $STORE in
local) url() { echo "$T/ds$1"; } ;;
moto | rgw)
    [ "$STORE" = rgw ] && export DLK_S3_SERVER=rgw
    . "$DLK_TESTS/s3lib.sh"
    s3_start --atomic
    s3_mkbucket dlk-bench-writers
    url() { echo "s3://dlk-bench-writers/$(basename "$T")/ds$1"; } ;;
gcs)
    . "$DLK_TESTS/gcslib.sh"
    gcs_start
    gcs_mkbucket dlk-bench-writers
    url() { echo "gs://dlk-bench-writers/ds$1"; } ;;
*) echo "usage: $0 [local|moto|gcs|rgw] [TRIALS]" >&2; exit 2 ;;
esac
server=local
[ "$STORE" = moto ] || [ "$STORE" = rgw ] && server=$(s3_server_name)
[ "$STORE" = gcs ] && server="fake-gcs-server $(basename "$GCS_BIN")"
echo "# writers.sh $STORE $N: seed $seed, $server, $(nproc) cores, $(uname -m), $("$DLK" --version 2>/dev/null | head -1)"
t0=$(date +%s)
for ((i = 0; i < N; i++)); do
    if [ $((i % BLOCK)) -eq 0 ]; then
        wr_init "$(url $((i / BLOCK)))" || { echo "cannot create $(url $((i / BLOCK)))"; exit 3; }
    fi
    # shellcheck disable=SC2046
    wr_trial "$(url $((i / BLOCK)))" $(wr_ops $((2 + RANDOM % 3)) $((RANDOM % 4 != 0))) ||
        echo "trial $((i + 1)): $WR_LAST"
    if [ $(((i + 1) % BLOCK)) -eq 0 ] || [ $((i + 1)) -eq "$N" ]; then
        echo "after $WR_TRIALS trials: $WR_WRITERS writers, $WR_LOSSES losses, $WR_WRONG wrong heads, $WR_BADEXIT other exits, $WR_BADVERIFY failed verifies, $(( $(date +%s) - t0 )) s"
    fi
done
echo "store $STORE: trials $WR_TRIALS, writers $WR_WRITERS, losses $WR_LOSSES, wrong heads $WR_WRONG, other exits $WR_BADEXIT, failed verifies $WR_BADVERIFY, seconds $(( $(date +%s) - t0 ))"
[ "$WR_WRONG" -eq 0 ] && [ "$WR_BADEXIT" -eq 0 ] && [ "$WR_BADVERIFY" -eq 0 ]
