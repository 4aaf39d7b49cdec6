#!/usr/bin/env bash
# tests/bench/gpu_default.sh [SAMPLES] - streaming from the page cache to
# one GPU with the default flags, a new and an old build alternated
# (ROUNDS rounds, 2 by default), beside what the host allows in the same run (host_path_probe,
# not dlk: the pinned host-to-device copy, and pread into pinned buffers
# then copied to the GPU on every core); then GPU busy over three whole
# epochs with a step of 1.2x a batch's transfer time at the pinned rate;
# then --no-check --no-verify and --pin-cache auto for where the rest
# goes.  SAMPLES (default 20000) synthetic u8 224x224x3 samples
# (tests/bench/synth) in 16 MiB chunks; the old build reads the same
# samples written by its own synth (beside its dlk), so that each reads
# the chunk layout it knows.
#   DIST=dist OLD=dist-old/bin/dlk [ROUNDS=2] tests/bench/gpu_default.sh
set -u
n=${1:-20000}
DIST=${DIST:-dist}
OLD=${OLD:-}
R=${ROUNDS:-2}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlk-gpudef.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$DIST/bin/synth" "$T/ds" "$n" 224 224 >/dev/null
[ -z "$OLD" ] || "$(dirname "$OLD")/synth" "$T/old" "$n" 224 224 >/dev/null
cat $(find "$T/ds" -type f) >/dev/null
"$DIST/bin/host_path_probe" "$(nproc)" 4 $(find "$T/ds" -type f -size +1M) | tee "$T/probe"
pinned=$(awk '/^pinned H2D/{print $(NF-1)}' "$T/probe")
# a batch of 256 samples of 224x224x3 bytes, 1.2x its time at the pinned rate
step=$(python3 -c "print('%.3f' % (1.2 * 256 * 224 * 224 * 3 / ($pinned * 1e9) * 1e3))")
one() { # LABEL BIN ARGS...
    local label=$1 b=$2 ds=$T/ds; shift 2
    [ "$b" != "$OLD" ] || ds=$T/old
    "$b" bench-stream "$ds" --device cuda:0 --epochs 3 --json "$@" > "$T/o.json" ||
        { echo "$label: failed"; return; }
    python3 - "$T/o.json" "$label" "$pinned" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ep = [e["bytes_per_s"] / 1e9 for e in d["epochs"]]
st = max(ep[1:])
# busy over the run from the epochs' figures, on the device's clock, the
# same way for both builds
run = sum(e["seconds"] for e in d["epochs"])
busy = sum(e["busy_pct"] * e["seconds"] for e in d["epochs"]) / run
print("%-30s steady %5.2f GB/s (%3.0f%% of pinned; %6.0f samples/s), first epoch %5.2f GB/s (%3.0f%% of steady), "
      "busy %5.1f%%, first batch %.3f s, peak RSS %4.2f GB, buffers %4.2f GB, %2d threads, verified %s, checksums %s"
      % (sys.argv[2], st, 100 * st / float(sys.argv[3]), max(e["samples_per_s"] for e in d["epochs"][1:]),
         ep[0], 100 * ep[0] / st, busy, d["first_batch_s"], d["peak_rss_bytes"] / 1e9,
         d["peak_buffer_bytes"] / 1e9, d["io_threads"], d.get("chunks_verified", "-"), d["checksum_ok"]))
PY
}
for _ in $(seq "$R"); do
    one "new, default" "$DIST/bin/dlk"
    [ -z "$OLD" ] || one "old, default" "$OLD"
done
echo "step $step ms (1.2x a batch at the pinned rate), 3 epochs; busy is over the whole run (from the loader's open to the end of the last epoch's work, on the device's clock); first batch: seconds from opening the dataset"
for _ in $(seq "$R"); do
    one "new, default, step" "$DIST/bin/dlk" --step-ms "$step"
    [ -z "$OLD" ] || one "old, default, step" "$OLD" --step-ms "$step"
done
one "new, --no-check --no-verify" "$DIST/bin/dlk" --no-check --no-verify
one "new, --pin-cache auto" "$DIST/bin/dlk" --pin-cache auto
