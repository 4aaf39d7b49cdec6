# tests/bench/dist_bins.sh - sourced by the benchmarks that run from a
# `make dist` folder (DIST=dist) or from this checkout's build: DLK and
# SYNTH, each kept when set, else DIST/bin/dlk and DIST/bin/synth, else
# build/dlk and build/tests/synth; root is the checkout.
#   here=$(cd "$(dirname "$0")" && pwd); . "$here/dist_bins.sh"
root=$(cd "$here/../.." && pwd)
DLK=${DLK:-${DIST:+$DIST/bin/dlk}}
DLK=${DLK:-$root/build/dlk}
SYNTH=${SYNTH:-${DIST:+$DIST/bin/synth}}
SYNTH=${SYNTH:-$root/build/tests/synth}
