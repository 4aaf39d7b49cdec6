#!/usr/bin/env bash
# tests/bench/python_loader.sh WORKDIR [N] - a Python loop over dlk.Loader
# and dlk.torch.loader against `dlk bench-stream` on the same dataset and
# GPU, in one run: N synthetic 224x224x3 images (default 50000), bench-stream
# (shuffled, 4 epochs, steady-epoch samples/s, --no-check: no batch
# checksum, which the binding does not compute), then
# tests/bench/python_loader.py with the same batch size, ROUNDS times (2 by
# default) alternated, and the ratios (the target: 90% or more).  Both
# take the library's defaults otherwise (workers, every part's checksum
# checked); WORKERS=N sets both.  From a `make dist` tree (built where nvcc
# is, so that libdlk.so has CUDA):
#   DIST=$PWD/dist dist/tests/bench/python_loader.sh /tmp/pl
# DEVICE=cpu runs it on the cpu.
set -u
here=$(cd "$(dirname "$0")" && pwd)
DIST=${DIST:?DIST must name the dist folder}
D=$DIST/bin
W=${1:?work dir}; N=${2:-50000}
DEVICE=${DEVICE:-cuda:0}; WORKERS=${WORKERS:-}; B=${BATCH:-256}
ROUNDS=${ROUNDS:-2}
mkdir -p "$W"; R=$W/python_loader.jsonl; : > "$R"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null; nproc
export DLK_LIBDIR=$DIST/lib PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}
python3 -m pip install -q --no-build-isolation --no-deps --no-cache-dir \
    --target "$W/site" "$DIST/python" --upgrade 2>&1 | grep -v WARNING
[ -d "$W/ds" ] || "$D/synth" "$W/ds" "$N" 224 224 >/dev/null
for round in $(seq "$ROUNDS"); do
    "$D/dlk" bench-stream "$W/ds" --device "$DEVICE" --shuffle --epochs 4 \
        ${WORKERS:+--workers "$WORKERS"} --batch-size "$B" --no-check --json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"loader": "dlk bench-stream", "samples_per_s": max(e["samples_per_s"] for e in d["epochs"][1:]), "first_batch_s": d["first_batch_s"]}))' |
        tee -a "$R"
    python3 "$here/python_loader.py" "$W/ds" --device "$DEVICE" \
        ${WORKERS:+--workers "$WORKERS"} --batch-size "$B" --epochs 4 | tee -a "$R"
done
python3 - "$R" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# each round's Python loops against that round's bench-stream
print("\n%-5s %-20s %12s %8s" % ("round", "loader", "samples/s", "of CLI"))
k, base = 0, None
for r in rows:
    if r["loader"] == "dlk bench-stream":
        k, base = k + 1, r["samples_per_s"]
    print("%-5d %-20s %12.0f %7.1f%%" % (k, r["loader"], r["samples_per_s"],
                                        100 * r["samples_per_s"] / base))
PY
