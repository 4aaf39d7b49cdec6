#!/usr/bin/env bash
# The dataset tests (create, ingest, ls, cat, verify, commit, malformed
# commits, crash, race, filling of small chunks)
# run again, unchanged, on s3:// datasets in a local S3 server (moto).
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
s3_start
s3_mkbucket dlk-datasets
export DLK_TEST_STORE=s3 DLK_TEST_BUCKET=dlk-datasets
for t in t100-create t110-ingest-read t120-verify t130-commit t131-commit-malformed t140-crash t145-race t147-append-fill; do
    bash "$DLK_TESTS/t/$t.sh" 2>&1 | sed -E "s/^(not ok|ok) - /\1 - s3 $t: /"
    # a script that dies part-way (a crash, an error of its own) fails
    # here, whatever sed's status
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        echo "ok - s3 $t: the script ran to its end"
    else
        echo "not ok - s3 $t: the script exited $rc"
    fi
done
