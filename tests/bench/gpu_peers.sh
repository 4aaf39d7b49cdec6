#!/usr/bin/env bash
# tests/bench/gpu_peers.sh WORKDIR [N] - dlk against the peer loaders that
# install from wheels (WebDataset, MosaicML Streaming, litdata, Deeplake
# 4.x), all in this one run on this machine: N make_images.py images
# (default 20000), dlk's bench-stream (16 workers, shuffled, 5 epochs,
# steady-epoch samples/s), then, through one Python harness
# (peer_common.py: batches moved to the GPU for 20 s), dlk.torch.loader
# (peer_dlk.py; PYTHONPATH must reach the dlk package) and each peer's
# PyTorch loader over the same decoded tensors (16 workers, pinned), and
# the ratios.
# From a `make dist` tree, with the wheels of .whl/ (tests/bench/peer_wheels.txt says how to fetch them;
# installed offline into WORKDIR/site):
#   DIST=$PWD/dist WHL=$PWD/.whl dist/tests/bench/gpu_peers.sh /tmp/p
set -u
here=$(cd "$(dirname "$0")" && pwd)
D=${DIST:?DIST must name the dist folder}/bin
W=${1:?work dir}; N=${2:-20000}
mkdir -p "$W"; R=$W/peers.jsonl; : > "$R"
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
[ -d "$W/img" ] || python3 "$here/make_images.py" "$W/img" --n "$N"
rm -rf "$W/ds"
"$D/dlk" create "$W/ds" --tensor images:u8:224x224x3 --tensor labels:i32 >/dev/null
"$D/dlk" ingest "$W/ds" from-dir "$W/img/npy" --quiet
"$D/dlk" bench-stream "$W/ds" --device cuda:0 --shuffle --epochs 5 --workers 16 --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"peer": "dlk (steady epoch)", "samples_per_s": max(e["samples_per_s"] for e in d["epochs"][1:]), "whole_run_samples_per_s": d["samples_per_s"], "first_batch_s": d["first_batch_s"]}))' | tee -a "$R"
if [ -n "${WHL:-}" ]; then
    pip install -q --no-index --no-deps --target "$W/site" "$WHL"/*.whl 2>&1 | tail -2
    export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}
fi
for p in dlk webdataset mosaic litdata deeplake; do
    echo "== $p" >&2
    (cd "$W" && timeout 300 python3 "$here/peer_$p.py" "$W/img" --workers 16 --seconds 20) 2>"$W/$p.err" | grep '^{' | tee -a "$R" ||
        { echo "{\"peer\": \"$p\", \"error\": \"$(tail -1 "$W/$p.err" | tr -d '"\\' | cut -c1-200)\"}" | tee -a "$R"; }
done
python3 - "$R" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
dlk = rows[0]["samples_per_s"]
py = [r for r in rows if r.get("peer") == "dlk.torch.loader" and "error" not in r]
dpy = py[0]["samples_per_s"] if py else 0
print("\n%-18s %-22s %12s %12s %14s" % ("loader", "variant", "samples/s", "bench-stream x", "dlk.torch x"))
for r in rows:
    if "error" in r:
        print("%-18s %-22s %12s  %s" % (r["peer"], "", "-", r["error"]))
    else:
        print("%-18s %-22s %12.0f %12.1f %14s" % (r["peer"], r.get("variant", "")[:22], r["samples_per_s"],
              dlk / r["samples_per_s"], "%.1f" % (dpy / r["samples_per_s"]) if dpy else "-"))
PY
