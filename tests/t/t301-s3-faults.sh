#!/usr/bin/env bash
# t301-s3-faults.sh - the S3 store through tests/faultproxy.py: 10% of
# requests fail (500, 503 SlowDown, reset mid-body, truncated body) and
# every answer waits 5 ms; every object must still read back byte for
# byte, and the proxy must have injected each kind of fault.  Then
# through a proxy that cuts every body short: each kind of read fails as
# the network's fault, its buffer as it was; and through one that drops
# Range: a ranged read fails, saying the server does not serve ranges.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"

bin=$DLK_BUILD/tests/test_s3_store
if [ ! -x "$bin" ]; then
    echo "not ok - $bin is not built (make unit)"
    exit 1
fi

s3_start
s3_mkbucket dlk-t301
s3_proxy_start --delay-ms 5 --rate-500 0.03 --rate-503 0.03 \
    --rate-reset 0.02 --rate-truncate 0.02 --seed 301

unit_tap "" "$bin" AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PROXY_PORT \
    DLK_TEST_S3_URL=s3://dlk-t301/ds DLK_TEST_S3_FAULTS=300
for kind in 500 503 reset truncate; do
    n=$(grep -c "^fault $kind " "$S3_PROXY_LOG")
    check "the proxy injected $kind faults ($n)" test "$n" -gt 0
done

# a proxy that cuts every body short: every kind of read fails as the
# network's fault, never with the cut bytes as the object
s3_proxy_start --rate-truncate 1 --seed 3011
unit_tap "cut short" "$bin" DLK_TEST_S3_URL=s3://dlk-t301/cut \
    DLK_TEST_S3_CUT=http://127.0.0.1:$S3_PROXY_PORT

# a server that does not serve ranges: a ranged read says so
s3_proxy_start --drop-range
unit_tap "no ranges" "$bin" DLK_TEST_S3_URL=s3://dlk-t301/norange \
    DLK_TEST_S3_NORANGE=http://127.0.0.1:$S3_PROXY_PORT
