#!/usr/bin/env bash
# tests/bench/small_appends.sh [ROWS [INGESTS [EACH]]] - what small
# ingests cost a large dataset: a dataset of ROWS rows (default
# 1000000: an i32 label and a 16-byte u8 vector, 16 MiB chunks, no key
# tensors) made by one ingest, then INGESTS (default 200) ingests of EACH
# (default 10) rows, each followed by a commit.  For each build: the
# bytes of chunk objects before and after (every commit keeps the chunks
# it names: nothing here is garbage), the bytes the ingests wrote to the
# store, the chunk count of each tensor at the end, and the seconds per
# ingest.  DLK (default build/dlk) is the build measured; OLD, when set,
# names a second dlk binary measured the same way in the same run.
#   OLD=/tmp/old/build/dlk tests/bench/small_appends.sh 1000000 200 \
#       | tee tests/bench/results/small-appends-2core.txt
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DLK=${DLK:-$root/build/dlk}
ROWS=${1:-1000000} N=${2:-200} EACH=${3:-10}
python3 -c 'import numpy' || { echo "needs numpy" >&2; exit 2; }
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-small.XXXXXX")
trap 'rm -rf "$T"' EXIT

# the rows: one batch of ROWS, then N batches of EACH
python3 - "$T/src" "$ROWS" "$N" "$EACH" <<'PY'
import numpy as np, os, sys
d, rows, n, each = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def batch(k, first, count):
    os.makedirs("%s/%04d" % (d, k), exist_ok=True)
    i = np.arange(first, first + count, dtype=np.int64)
    np.save("%s/%04d/b.labels.npy" % (d, k), (i % 1000).astype("<i4"))
    v = (i[:, None] * 7 + np.arange(16)) % 251
    np.save("%s/%04d/b.vec.npy" % (d, k), v.astype("u1"))
batch(0, 0, rows)
for k in range(1, n + 1):
    batch(k, rows + (k - 1) * each, each)
PY

bytes_under() { du -sb --apparent-size "$1" 2>/dev/null | cut -f1; }
# written bytes of a command and its children, from /proc's wchar
wchar_of() {
    local before after me=$BASHPID
    # a child's counts are added to the (sub)shell that waited for it
    before=$(awk '/^wchar/ {print $2}' /proc/$me/io)
    "$@" >/dev/null || return 1
    after=$(awk '/^wchar/ {print $2}' /proc/$me/io)
    echo $((after - before))
}

run() { # NAME BINARY
    local name=$1 bin=$2 ds=$T/ds-$1 i t0 c0 c1 w=0 x
    "$bin" create "$ds" --tensor labels:i32 --tensor vec:u8:16 \
        --chunk-size 16M >/dev/null || return 1
    "$bin" ingest "$ds" from-dir "$T/src/0000" --quiet || return 1
    "$bin" commit "$ds" -m base >/dev/null || return 1
    c0=$(bytes_under "$ds/chunks")
    t0=$(date +%s.%N)
    for ((i = 1; i <= N; i++)); do
        x=$(wchar_of "$bin" ingest "$ds" from-dir "$T/src/$(printf %04d $i)" --quiet) || return 1
        w=$((w + x))
        "$bin" commit "$ds" -m "batch $i" >/dev/null || return 1
    done
    local secs; secs=$(echo "$(date +%s.%N) - $t0" | bc)
    c1=$(bytes_under "$ds/chunks")
    local chunks
    chunks=$("$bin" ls "$ds" --json | python3 -c 'import json,sys
print(" ".join("%s=%d" % (t["name"], t["chunks"]) for t in json.load(sys.stdin)["tensors"]))')
    "$bin" verify "$ds" --all >/dev/null || { echo "$name: verify --all failed" >&2; return 1; }
    printf '%-5s chunks %12d -> %12d B (+%d)  ingests wrote %12d B  %6.3f s/ingest+commit  %s\n' \
        "$name" "$c0" "$c1" $((c1 - c0)) "$w" "$(echo "$secs / $N" | bc -l)" "$chunks"
    rm -rf "$ds"
}

echo "# $ROWS rows (i32 label + 16-byte vector, 16 MiB chunks), then $N ingests of $EACH rows, each committed"
echo "# new rows' own bytes: $((N * EACH * 20)) B"
run new "$DLK"
[ -n "${OLD:-}" ] && run old "$OLD"
exit 0
