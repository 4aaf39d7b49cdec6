#!/usr/bin/env bash
# A store that refuses If-Match with the quoted ETag and compares the bare
# one, as Ceph RGW does (tests/nocond_proxy.py --rgw-if-match in front of
# moto): ingests and commits that replace the head and main still land,
# and racing writers still conflict (exit 4) and lose nothing.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
have_numpy || { skip "quoted If-Match" "numpy missing: python3 -m pip install numpy"; exit 0; }
s3_start
s3_mkbucket quoted
python3 "$DLK_TESTS/nocond_proxy.py" --rgw-if-match "$AWS_ENDPOINT_URL" \
    >"$T/port" 2>"$T/proxy.log" &
pid=$!
at_exit "kill $pid 2>/dev/null"
for i in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
export AWS_ENDPOINT_URL=http://127.0.0.1:$(cat "$T/port")
mk() { # DIR START COUNT
    python3 -c '
import numpy as np, sys, os
d, s, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]); os.makedirs(d)
for i in range(s, s + n): np.save("%s/%04d.labels.npy" % (d, i), np.array(i, np.int32))' "$@"
}
mk "$T/a" 0 5
mk "$T/b" 5 5
DS=s3://quoted/ds
ok "create" dlk create "$DS" --tensor labels:i32
ok "first ingest (creates the head)" dlk ingest "$DS" from-dir "$T/a" --quiet
ok "first commit (creates main)" dlk commit "$DS" -m one
ok "second ingest (replaces the head)" dlk ingest "$DS" from-dir "$T/b" --quiet
check "the quoted If-Match was refused on the way" grep -q "quoted If-Match refused" "$T/proxy.log"
ok "second commit (replaces main)" dlk commit "$DS" -m two
ok "log" dlk log "$DS" --json
check "two commits" python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1])))==2' "$OUT"
ok "every row" dlk verify "$DS" --at main --deep
ok "ls" dlk ls "$DS" --json
check "10 samples" grep -q '"samples": 10' "$OUT"
# racing writers on the same store: conflicts stay conflicts
s3_mkbucket quoted-race
DLK_TEST_STORE=s3 DLK_TEST_BUCKET=quoted-race DLK_TEST_RACES=3 \
    bash "$DLK_TESTS/t/t145-race.sh" 2>&1 | sed -E "s/^(not ok|ok) - /\1 - race: /"
