#!/usr/bin/env bash
# t311-rgw.sh - the S3 tests that matter for correctness run again against
# Ceph RGW (a one-node cluster from tests/servers/ceph-rgw.sh, started once
# here and shared): the S3 store's unit test (conditional writes, range
# reads, listings over pages, multipart uploads, wrong credentials), the
# dataset tests on s3:// (t390: create, ingest, verify, commit, crash,
# racing writers), ingest from-s3 (t212: a listing over 1,000 keys), gc
# beside an unfinished ingest (t214) and bench-stream (t392).  Each line is
# prefixed "rgw".  The cluster cannot start (no Ceph packages, no room):
# every part is skipped, with the reason.
. "$DLK_TESTS/lib.sh"

parts=(unit t390-s3-datasets t212-ingest-s3 t214-ingest-gc t392-s3-stream)
C=$T/ceph
if ! bash "$DLK_TESTS/servers/ceph-rgw.sh" start "$C" >"$T/ceph.out" 2>&1; then
    why=$(cat "$C/failed" 2>/dev/null || tail -n 1 "$T/ceph.out")
    for p in "${parts[@]}"; do
        skip "rgw $p" "the Ceph cluster did not start: $why"
    done
    exit 0
fi
at_exit "bash '$DLK_TESTS/servers/ceph-rgw.sh' stop '$C'"
export DLK_S3_SERVER=rgw DLK_RGW_ENV=$C/env
. "$DLK_TESTS/s3lib.sh"

prefixed() { # NAME CMD...: run CMD, its TAP lines prefixed "rgw NAME:"
    local name=$1 rc
    shift
    "$@" >"$T/$name.out" 2>&1
    rc=$?
    sed -E "s/^(not ok|ok) - /\1 - rgw $name: /" "$T/$name.out"
    if [ $rc -ne 0 ] && ! grep -q '^not ok' "$T/$name.out"; then
        echo "not ok - rgw $name: exited with status $rc"
    fi
}

bin=$DLK_BUILD/tests/test_s3_store
if [ -x "$bin" ]; then
    s3_start
    s3_mkbucket dlk-t311
    prefixed unit env DLK_TEST_S3_URL=s3://dlk-t311/ds DLK_TEST_S3_AUTH=all "$bin"
else
    echo "not ok - rgw unit: $bin is not built (make unit)"
fi
for t in "${parts[@]:1}"; do
    prefixed "$t" bash "$DLK_TESTS/t/$t.sh"
done
