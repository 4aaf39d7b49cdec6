#!/usr/bin/env bash
# t300-s3-store.sh - the S3 store (lib/store/s3*.c) against moto: the
# store's unit test with a server, once without signature checks (every
# key shape) and once with them (dlk's SigV4 signing checked by moto, wrong secret).
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

bin=$DLK_BUILD/tests/test_s3_store
if [ ! -x "$bin" ]; then
    echo "not ok - $bin is not built (make unit)"
    exit 1
fi

run_store_test() { # NAME ENV...
    local name=$1; shift
    env "$@" "$bin" >"$T/unit.out" 2>&1
    local rc=$?
    cat "$T/unit.out"
    if [ $rc -ge 128 ]; then
        echo "not ok - $name: test_s3_store killed by signal $((rc - 128))"
    elif [ $rc -ne 0 ] && ! grep -q '^not ok' "$T/unit.out"; then
        echo "not ok - $name: test_s3_store exited with $rc"
    fi
}

s3_start
s3_mkbucket dlk-t300
run_store_test "plain" DLK_TEST_S3_URL=s3://dlk-t300/ds

s3_start --auth
s3_mkbucket dlk-t300-auth
run_store_test "signed" DLK_TEST_S3_URL=s3://dlk-t300-auth/ds DLK_TEST_S3_AUTH=1
