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

s3_start
s3_mkbucket dlk-t300
unit_tap plain "$bin" DLK_TEST_S3_URL=s3://dlk-t300/ds

s3_start --auth
s3_mkbucket dlk-t300-auth
unit_tap signed "$bin" DLK_TEST_S3_URL=s3://dlk-t300-auth/ds DLK_TEST_S3_AUTH=1
