#!/usr/bin/env bash
# t343-gcs-race.sh - racing writers on a gs:// dataset, with every answer
# delayed 40 ms (tests/faultproxy.py) so that both read the head before
# either replaces it: each ingest and commit either lands or loses with
# exit 4 naming the conflict (ifGenerationMatch refused with 412), and
# what the winners wrote is all there, nothing twice.  (Two commits of one
# head at once both succeed: they make one commit, see t145.)
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/gcslib.sh"
gcs_need "racing writers on gs://"
have_numpy || { skip "racing writers on gs://" "numpy missing: python3 -m pip install numpy"; exit 0; }
gcs_start
gcs_mkbucket dlk-race
gcs_proxy_start --delay-ms 40
export STORAGE_EMULATOR_HOST=127.0.0.1:$GCS_PROXY_PORT
mk() { # DIR START COUNT
    python3 -c '
import numpy as np, sys, os
d, s, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]); os.makedirs(d)
for i in range(s, s + n): np.save("%s/%04d.labels.npy" % (d, i), np.array(i, np.int32))' "$@"
}
DS=gs://dlk-race/ds
ok "create" dlk create "$DS" --tensor labels:i32 --chunk-size 64
want=() lost=0 bad=0 commits=0 commit_lost=0
for r in 1 2 3 4; do
    mk "$T/a$r" $((r * 100)) 10
    mk "$T/b$r" $((r * 100 + 50)) 10
    "$DLK" ingest "$DS" from-dir "$T/a$r" --no-key --quiet 2>"$T/a$r.err" & pa=$!
    "$DLK" ingest "$DS" from-dir "$T/b$r" --no-key --quiet 2>"$T/b$r.err" & pb=$!
    wait $pa; ra=$?; wait $pb; rb=$?
    for x in "a $ra" "b $rb"; do
        set -- $x
        case $2 in
        0) off=0; [ "$1" = b ] && off=50
           want+=($(seq $((r * 100 + off)) $((r * 100 + off + 9)))) ;;
        4) lost=$((lost + 1))
           grep -q "changed by another writer" "$T/$1$r.err" || bad=$((bad + 1)) ;;
        *) bad=$((bad + 1)); sed "s/^/# $1$r exit $2: /" "$T/$1$r.err" ;;
        esac
    done
    "$DLK" commit "$DS" -m "c$r" >/dev/null 2>"$T/c$r.err" & pa=$!
    "$DLK" commit "$DS" -m "d$r" >/dev/null 2>"$T/d$r.err" & pb=$!
    wait $pa; ra=$?; wait $pb; rb=$?
    for x in $ra $rb; do
        case $x in 0) commits=$((commits + 1)) ;; 4) commit_lost=$((commit_lost + 1)) ;; *) bad=$((bad + 1)) ;; esac
    done
done
echo "# 4 rounds: $lost ingests lost with exit 4, ${#want[@]} rows landed; $commits commits landed, $commit_lost lost"
check "every writer landed or lost with exit 4 naming the conflict" test $bad -eq 0
check "some writer lost a race (exit 4)" test $lost -gt 0
check "every round's commit landed once at least" test $commits -ge 4
ok "ls" dlk ls "$DS" --json
check "exactly the winners' rows, once each" sh -c "
n=\$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({t[\"name\"]:t for t in d[\"tensors\"]}[\"labels\"][\"samples\"])' '$OUT')
for i in \$(seq 0 \$((n - 1))); do \"$DLK\" cat \"$DS\" labels \$i --raw; done | python3 -c '
import sys, numpy as np
v = sorted(np.frombuffer(sys.stdin.buffer.read(), np.int32).tolist())
w = sorted(int(x) for x in sys.argv[1:])
assert v == w, (v, w)' ${want[*]}"
ok "verify --all --deep" dlk verify "$DS" --all --deep
