#!/usr/bin/env bash
# The dataset tests (create, ingest, ls, cat, verify, commit, crash, race,
# filling of small chunks) run again, unchanged, on gs:// datasets in a
# local GCS emulator (fake-gcs-server): commits and refs are multipart
# uploads with ifGenerationMatch, racing writers lose with exit 4.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/gcslib.sh"
gcs_need "gs:// datasets"
gcs_start
gcs_mkbucket dlk-datasets
export DLK_TEST_STORE=gs DLK_TEST_BUCKET=dlk-datasets
# fewer rounds of races and appends than t390 runs on S3 (t343 races too)
export DLK_TEST_RACES=${DLK_TEST_RACES:-3} DLK_TEST_APPENDS=${DLK_TEST_APPENDS:-10}
for t in t100-create t110-ingest-read t120-verify t130-commit t140-crash t145-race t147-append-fill; do
    bash "$DLK_TESTS/t/$t.sh" 2>&1 | sed -E "s/^(not ok|ok) - /\1 - gs $t: /"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        echo "ok - gs $t: the script ran to its end"
    else
        echo "not ok - gs $t: the script exited $rc"
    fi
done
