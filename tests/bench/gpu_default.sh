#!/usr/bin/env bash
# tests/bench/gpu_default.sh [SAMPLES] - streaming from the page cache to
# one GPU with the default flags, a new and an old build alternated (two
# rounds), beside the pinned host-to-device copy of 16 MiB buffers
# (pin_probe) in the same run; then --no-check --no-verify and
# --pin-cache auto for where the rest goes.  SAMPLES (default 20000)
# synthetic u8 224x224x3 samples (tests/bench/synth) in 16 MiB chunks;
# the old build reads the same samples written by its own synth (beside
# its dlk), so that each reads the chunk layout it knows.
#   DIST=dist OLD=dist-old/bin/dlk tests/bench/gpu_default.sh
set -u
n=${1:-20000}
DIST=${DIST:-dist}
OLD=${OLD:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-gpudef.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$DIST/bin/pin_probe" | grep "pinned H2D"
"$DIST/bin/synth" "$T/ds" "$n" 224 224 >/dev/null
[ -z "$OLD" ] || "$(dirname "$OLD")/synth" "$T/old" "$n" 224 224 >/dev/null
one() { # LABEL BIN ARGS...
    local label=$1 b=$2 ds=$T/ds; shift 2
    [ "$b" != "$OLD" ] || ds=$T/old
    "$b" bench-stream "$ds" --device cuda:0 --epochs 3 --json "$@" > "$T/o.json" ||
        { echo "$label: failed"; return; }
    python3 - "$T/o.json" "$label" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ep = [e["bytes_per_s"] / 1e9 for e in d["epochs"]]
print("%-34s steady %5.2f GB/s (%6.0f samples/s), first epoch %5.2f GB/s (%3.0f%% of steady), peak RSS %5.2f GB, buffers %4.2f GB, verified %s, checksums %s"
      % (sys.argv[2], max(ep[1:]), max(e["samples_per_s"] for e in d["epochs"][1:]), ep[0], 100 * ep[0] / max(ep[1:]),
         d["peak_rss_bytes"] / 1e9, d["peak_buffer_bytes"] / 1e9, d.get("chunks_verified", "-"), d["checksum_ok"]))
PY
}
for _ in 1 2; do
    one "new, default" "$DIST/bin/dlk"
    [ -z "$OLD" ] || one "old, default" "$OLD"
done
one "new, --no-check --no-verify" "$DIST/bin/dlk" --no-check --no-verify
one "new, --pin-cache auto" "$DIST/bin/dlk" --pin-cache auto
[ -z "$OLD" ] || one "old, --pin-cache auto" "$OLD" --pin-cache auto
