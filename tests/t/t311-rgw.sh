#!/usr/bin/env bash
# t311-rgw.sh - the S3 tests that matter for correctness run again against
# Ceph RGW (a one-node cluster from tests/servers/ceph-rgw.sh, started once
# here and shared): the S3 store's unit test (conditional writes, range
# reads, listings over pages, multipart uploads, wrong credentials), the
# dataset tests on s3:// datasets (create, verify, commit, racing writers,
# gc beside an unfinished ingest), ingest from-s3 (t212: a listing over
# 1,000 keys) and bench-stream (t392).  Each line is prefixed "rgw".  The
# cluster cannot start (no Ceph packages, no room): every part is skipped,
# with the reason.  About 2 minutes on 2 cores.
. "$DLK_TESTS/lib.sh"

# on s3:// datasets (ds_url), as t390 runs them on moto
ds_tests=(t100-create t120-verify t130-commit t145-race t214-ingest-gc t345-writers-random)
# S3 tests of their own
s3_tests=(t212-ingest-s3 t392-s3-stream)
parts=(unit "${ds_tests[@]}" "${s3_tests[@]}")
C=$T/ceph
if [ -n "${SAN:-}" ] && [ -z "${DLK_RGW_SAN:-}" ]; then
    # the same S3 code runs under the sanitizers against moto (t148, t300,
    # t390, t392); RGW under them takes 4.5 minutes on 2 cores, so the
    # suite runs it in the normal pass (DLK_RGW_SAN=1 runs it here too)
    for p in "${parts[@]}"; do
        skip "rgw $p" "run against RGW in the normal pass; under the sanitizers the same S3 tests run against moto"
    done
    exit 0
fi
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
s3_mkbucket dlk-t311-ds
for t in "${ds_tests[@]}"; do
    prefixed "$t" env DLK_TEST_STORE=s3 DLK_TEST_BUCKET=dlk-t311-ds \
        bash "$DLK_TESTS/t/$t.sh"
done
for t in "${s3_tests[@]}"; do
    prefixed "$t" bash "$DLK_TESTS/t/$t.sh"
done
