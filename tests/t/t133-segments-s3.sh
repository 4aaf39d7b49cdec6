#!/usr/bin/env bash
# t132 (segments of chunk lists: small commits, shared segments in past
# commits, log, verify --all and gc, a missing or corrupt segment named, an
# inline dataset read and converted) run again on an s3:// dataset in a
# local S3 server (moto).
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
s3_start
s3_mkbucket dlk-segments
export DLK_TEST_STORE=s3 DLK_TEST_BUCKET=dlk-segments
unset DLK_OLD # the build before segments is checked on a directory (t132)
bash "$DLK_TESTS/t/t132-segments.sh" 2>&1 | sed -E "s/^(not ok|ok) - /\1 - s3: /"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ]; then
    echo "ok - s3: the script ran to its end"
else
    echo "not ok - s3: the script exited $rc"
fi
