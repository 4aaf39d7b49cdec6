#!/usr/bin/env bash
# tests/bench/list.sh [FOLDERS] [PER] - how long ingest takes to list a
# source of FOLDERS x PER keys (default 1000 x 128, ImageNet's shape:
# train/<class>/<image>) from an S3 server that answers after DELAY_MS
# (default 20: S3's time to first byte is tens of ms), and one folder of
# the same number of keys; this dlk (wide listing: folders at once)
# against BASE (a dlk that lists page after page; default: the same dlk,
# then only this one's numbers are printed).  The keys are empty files of
# no role (.bin), so the run lists and ingests nothing.
#   DLK=build/dlk BASE=old/dlk SRV=build/tests/s3_dir_server tests/bench/list.sh
set -eu
F=${1:-1000}
P=${2:-128}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DLK=${DLK:-$root/build/dlk}
BASE=${BASE:-}
SRV=${SRV:-$root/build/tests/s3_dir_server}
DELAY_MS=${DELAY_MS:-20}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-list.XXXXXX")
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$T"' EXIT
mkdir -p "$T/root/raw/tree" "$T/root/raw/flat"
python3 - "$T/root/raw" "$F" "$P" <<'PY'
import os, sys
base, f, p = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(f):
    d = os.path.join(base, "tree", "n%08d" % i)
    os.mkdir(d)
    for j in range(p):
        open(os.path.join(d, "%06d.bin" % j), "w").close()
for j in range(f * p):
    open(os.path.join(base, "flat", "%08d.bin" % j), "w").close()
PY
S3_DIR_SERVER_DELAY_MS=$DELAY_MS "$SRV" "$T/root" 64 > "$T/port" 2> "$T/srv.err" &
pid=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
port=$(awk '{print $2}' "$T/port")
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
secs() { # DLK SOURCE -> seconds the listing took (ingest's list stage)
    rm -rf "$T/ds"
    "$1" create "$T/ds" --tensor x:u8:1 > /dev/null
    "$1" ingest "$T/ds" from-s3 "$2" --json | python3 -c '
import json, sys; d = json.load(sys.stdin); print("%.3f" % d["stages"]["list"])'
}
echo "machine: $(nproc) cores; server: s3_dir_server, a thread a connection, every answer after $DELAY_MS ms"
n=$((F * P))
for src in tree flat; do
    what="$F folders x $P keys"
    [ "$src" = flat ] && what="one folder of $n keys"
    new=$(secs "$DLK" "s3://raw/$src")
    if [ -n "$BASE" ]; then
        old=$(secs "$BASE" "s3://raw/$src")
        new2=$(secs "$DLK" "s3://raw/$src")
        echo "list $what: $new s / $new2 s (page after page: $old s; x$(python3 -c "print('%.1f' % ($old / (($new + $new2) / 2)))"))"
    else
        echo "list $what: $new s"
    fi
done
