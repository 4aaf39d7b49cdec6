#!/usr/bin/env bash
# An append reads what it changes, not the dataset: a 100-row ingest into
# an s3:// dataset of 1,100 chunks (one segment of its chunk list) and
# into one of 2,200 chunks (two segments) makes the same GETs, none of
# them of a segment (index/segments/), counted in the S3 server's request
# log; the same for a keyed ingest (staged run, merge, key index) into
# 1,100 and 2,200 keyed rows.  What the appends wrote reads back: dlk
# verify, the row counts, and every row by dlk cat (a reader, which loads
# every segment).
. "$DLK_TESTS/lib.sh"
. "$DLK_TESTS/s3lib.sh"
have_numpy || { skip "append reads bounded" "numpy missing: python3 -m pip install numpy"; exit 0; }
s3_start
s3_mkbucket dlk-bounded
LOG=$T/moto-$S3_PORT.log

# rows: DIR/r.x.npy of N i32 (FROM, FROM+1, ...); keyed: one .npy a row
K2=2200
python3 - "$T" "$K2" <<'PY'
import numpy as np, os, sys
t = sys.argv[1]
for name, n in (("n1", 1100), ("n2", 2200)):
    os.makedirs("%s/%s" % (t, name))
    np.save("%s/%s/r.x.npy" % (t, name), np.arange(n, dtype="<i4"))
os.makedirs(t + "/add")
np.save(t + "/add/r.x.npy", np.arange(100, dtype="<i4") + 100000)
for name, n, base in (("k1", 1100, 0), ("k2", int(sys.argv[2]), 0),
                      ("kadd", 100, 100000)):
    os.makedirs("%s/%s" % (t, name))
    for i in range(n):
        np.save("%s/%s/row%06d.x.npy" % (t, name, base + i),
                np.array(base + i, dtype="<i4"))
PY

# requests the server logged: GETs, and GETs of segments
gets() { grep -c '"GET /' "$LOG" || true; }
seg_gets() { grep -c '"GET /dlk-bounded/[^ ]*index/segments/' "$LOG" || true; }

# build DIR's dataset locally (fast), upload it: one chunk a row
for d in n1 n2; do
    ok "create $d, one chunk a row" dlk create "$T/$d.ds" --tensor x:i32 --chunk-size 4
    ok "ingest $d" dlk ingest "$T/$d.ds" from-dir "$T/$d" --no-key --quiet
    s3_put_tree "$T/$d.ds" "s3://dlk-bounded/$d"
done
for d in k1 k2; do
    ok "create $d (keyed), one chunk a row" dlk create "$T/$d.ds" --tensor x:i32 --chunk-size 4
    ok "ingest $d with keys" dlk ingest "$T/$d.ds" from-dir "$T/$d" --quiet
    s3_put_tree "$T/$d.ds" "s3://dlk-bounded/$d"
done
nsegs() { ls "$T/$1.ds/index/segments" | wc -l; }
check "n2 and k2 have more segments than n1 and k1" test \
    "$(nsegs n2)" -eq 2 -a "$(nsegs n1)" -eq 1 -a \
    "$(nsegs k2)" -gt "$(nsegs k1)" -a "$(nsegs k1)" -ge 1

# the GETs (all, and of segments) of one 100-row ingest into URL
declare -A G S
measure() { # name url source [flags]
    local name=$1 url=$2 src=$3; shift 3
    local g0 s0
    g0=$(gets) s0=$(seg_gets)
    ok "100-row ingest into $name" dlk ingest "$url" from-dir "$src" --quiet "$@"
    G[$name]=$(( $(gets) - g0 ))
    S[$name]=$(( $(seg_gets) - s0 ))
    echo "# $name: ${G[$name]} GETs, ${S[$name]} of segments"
}
measure n1 s3://dlk-bounded/n1 "$T/add" --no-key
measure n2 s3://dlk-bounded/n2 "$T/add" --no-key
measure k1 s3://dlk-bounded/k1 "$T/kadd"
measure k2 s3://dlk-bounded/k2 "$T/kadd"
check "no segment read by the appends" test "${S[n1]}${S[n2]}${S[k1]}${S[k2]}" = 0000
check "an append makes as many GETs at 2,200 chunks as at 1,100" \
    test "${G[n1]}" -eq "${G[n2]}" -a "${G[n1]}" -gt 0
check "a keyed append as many at 2,200 rows as at 1,100" test "${G[k1]}" -eq "${G[k2]}" -a "${G[k1]}" -gt 0

# what the appends wrote: every row, read back whole (in order, or for
# keyed ingests, which append in their own order, as sets)
cat > "$T/rows.py" <<'PY'
import numpy as np, sys
raw, n, keyed = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
got = np.fromfile(raw, dtype="<i4")
want = np.concatenate([np.arange(n), np.arange(100) + 100000]).astype("<i4")
if keyed:
    ok = (len(got) == n + 100 and (np.sort(got) == want).all() and
          (np.sort(got[n:]) == want[n:]).all())
else:
    ok = len(got) == n + 100 and (got == want).all()
sys.exit(0 if ok else 1)
PY
for d in n1 n2 k1 k2; do
    n=1100 keyed=0
    case $d in *2) n=$K2 ;; esac
    case $d in k*) keyed=1 ;; esac
    ok "verify $d" dlk verify "s3://dlk-bounded/$d"
    check "verify $d: no problem" grep -q "; 0 problems" "$OUT"
    ok "ls $d" dlk ls "s3://dlk-bounded/$d"
    check "$d holds $((n + 100)) rows" grep -Eq "^x .* $((n + 100)) +$((n + 100)) " "$OUT"
    dlk cat "s3://dlk-bounded/$d" x : --raw > "$T/$d.raw"
    check "$d's rows: the source's, then the appended" python3 "$T/rows.py" "$T/$d.raw" "$n" "$keyed"
done
