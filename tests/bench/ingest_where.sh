#!/usr/bin/env bash
# tests/bench/ingest_where.sh N - where ingest's time goes on this machine:
# the same N Pillow JPEGs ingested (224x224) with all cores into the local
# disk and into /dev/shm (no disk), at --jobs cores and cores/2, and the
# raw decode rate.  DIST=dist for a `make dist` tree.
set -eu
N=${1:-8000}
here=$(cd "$(dirname "$0")" && pwd)
DLK=${DLK:-${DIST:+$DIST/bin/dlk}}
DLK=${DLK:-$here/../../build/dlk}
DB=${DIST:+$DIST/bin/decode_bench}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-where.XXXXXX")
S=/dev/shm/dlk-where-$$
trap 'rm -rf "$T" "$S"' EXIT
python3 "$here/make_images.py" "$T/gen" --n "$N" --jpeg-only
cores=$(nproc)
[ -n "$DB" ] && echo "raw decode, $cores cores: $("$DB" "$cores" "$T"/gen/jpeg/*.jpg) files/s"
for dst in "$T/ds" "$S"; do
    for j in "$cores" $((cores / 2)); do
        rm -rf "$dst"
        "$DLK" create "$dst" from-dir "$T/gen/jpeg" --resize 224x224 --jobs "$j" --json |
            python3 -c 'import json,sys; d=json.load(sys.stdin); print("'"$dst"' --jobs '"$j"': %.0f files/s (%.2f s)" % (d["ingested"]/d["seconds"], d["seconds"]))'
    done
done
