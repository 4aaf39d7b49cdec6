#!/usr/bin/env bash
# tests/bench/ingest_where.sh N [ARGS...] - where ingest's time goes on
# this machine: the same N Pillow JPEGs ingested (224x224) into the local
# disk and into /dev/shm (no disk), with each set of options in OPTS
# (default: "--jobs CORES" and "--jobs CORES/2"), then ARGS; and the raw
# decode rate.  DIST=dist for a `make dist` tree.
set -eu
N=${1:-8000}
shift || true
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
OPTS=${OPTS:-"--jobs $cores;--jobs $((cores / 2))"}
IFS=';' read -r -a sets <<< "$OPTS"
for dst in "$T/ds" "$S"; do
    for o in "${sets[@]}"; do
        rm -rf "$dst"
        # shellcheck disable=SC2086
        python3 - "$dst $o" "$DLK" create "$dst" from-dir "$T/gen/jpeg" --resize 224x224 $o "$@" --json <<'PY'
import json, resource, subprocess, sys, time
t0 = time.time()
d = json.loads(subprocess.run(sys.argv[2:], check=True, capture_output=True).stdout)
wall = time.time() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
s = d["stages"]
print("%-34s %6.0f files/s (%.2f s: list %.2f, rows %.2f = %.0f/s, appender busy %.2f, "
      "finish %.2f); cpu %.1f cores (user %.1f s, sys %.1f s)"
      % (sys.argv[1], d["ingested"] / d["seconds"], d["seconds"], s["list"], s["rows"],
         d["ingested"] / s["rows"], s["append"], s["finish"], (ru.ru_utime + ru.ru_stime) / wall,
         ru.ru_utime, ru.ru_stime))
PY
    done
done
