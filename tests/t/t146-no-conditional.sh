#!/usr/bin/env bash
# A store that ignores conditional writes (a proxy drops If-Match and
# If-None-Match): dlk detects it and refuses to commit, since a concurrent
# commit could be lost, unless --unsafe-single-writer is given.
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
s3_start
s3_mkbucket nocond
python3 "$DLK_TESTS/nocond_proxy.py" "$AWS_ENDPOINT_URL" > "$T/port" 2>"$T/proxy.log" &
pid=$!
at_exit "kill $pid 2>/dev/null"
for i in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
export AWS_ENDPOINT_URL=http://127.0.0.1:$(cat "$T/port")
DS=s3://nocond/ds
ok "create through a store without conditional writes" dlk create "$DS" --tensor labels:i32
python3 -c 'import numpy as np,sys,os; os.makedirs(sys.argv[1]); np.save(sys.argv[1]+"/a.labels.npy", np.arange(7,dtype=np.int32))' "$T/src"
ok "ingest" dlk ingest "$DS" from-dir "$T/src" --quiet
fails "commit is refused" 3 dlk commit "$DS" -m first
check "the refusal says why and what to do" sh -c "grep -q 'does not honour conditional writes' '$ERR' && grep -q -- '--unsafe-single-writer' '$ERR'"
ok "nothing was committed" dlk log "$DS" --json
check "the log is empty" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))==[]' "$OUT"
ok "--unsafe-single-writer commits" dlk commit "$DS" -m first --unsafe-single-writer --json
check "committed" grep -q '"committed": true' "$OUT"
ok "the commit reads back" dlk verify "$DS" --at main --deep
