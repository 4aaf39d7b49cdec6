#!/usr/bin/env bash
# tests/bench/gpu_wheel.sh WHEEL DIST CLIPS - the wheel on a GPU machine
# that has no FFmpeg and no -dev packages, from the repository root:
# installed with pip alone (a fresh venv, then --target into the python
# that has torch); `dlk --version`; the videos under CLIPS/a/ ingested by
# the wheel's dlk and by DIST/bin/dlk (`make dist`) through the FFmpeg
# each carries (LD_DEBUG=libs prints the libraries loaded), each clip's
# sha256 compared with CLIPS.ref (lines "NAME<TAB>first 16 hex digits of
# the sha256 of `dlk cat DS video I --npy`", made on the build machine
# by its dlk through the system's FFmpeg, with --frames 4 --resize
# 32x32); then tests/gpu/torch_cuda.py on cuda:0 from the wheel.
set -u
WHEEL=${1:?usage: gpu_wheel.sh WHEEL DIST CLIPS}
DIST=${2:?usage: gpu_wheel.sh WHEEL DIST CLIPS}
CLIPS=${3:?usage: gpu_wheel.sh WHEEL DIST CLIPS}
echo "## env"; python3 --version; nvidia-smi --query-gpu=name --format=csv,noheader; nproc
echo "system FFmpeg libraries: $(ldconfig -p | grep -cE 'libav(codec|format|util)\.so') ; ffmpeg: $(command -v ffmpeg || echo none)"
echo "## pip install into a venv (system site packages for torch)"
rm -rf /tmp/v; python3 -m venv --system-site-packages /tmp/v && time /tmp/v/bin/pip install -q --no-index --no-deps "$WHEEL"
/tmp/v/bin/dlk --version
echo "## video from the wheel's FFmpeg"
rm -rf /tmp/dsv /tmp/ld.* /tmp/ldd.*
LD_DEBUG=libs LD_DEBUG_OUTPUT=/tmp/ld /tmp/v/bin/dlk create /tmp/dsv from-dir "$CLIPS" --frames 4 --resize 32x32 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("ingested", d["ingested"], "skipped", d["skipped"], d["errors"])'
cat /tmp/ld.* | grep -E "calling init: .*libav(codec|format|util|dav1d)|calling init: .*libdav1d" | sed 's/^ *[0-9]*: *//'
bad=0
for i in $(seq 0 8); do
  k=$(/tmp/v/bin/dlk cat /tmp/dsv key $i | tail -1 | sed 's|.*/||; s|"$||'); h=$(/tmp/v/bin/dlk cat /tmp/dsv video $i --npy | sha256sum | cut -c1-16)
  grep -qF "$k	$h" "$CLIPS.ref" && echo "ok $k $h" || { echo "DIFF $k $h"; bad=1; }
done
echo "clips equal to the build machine's system-FFmpeg decode: $([ $bad = 0 ] && echo yes || echo NO)"
echo "## video from make dist's tree (dist/lib's FFmpeg)"
rm -rf /tmp/dsd; LD_DEBUG=libs LD_DEBUG_OUTPUT=/tmp/ldd "$DIST"/bin/dlk create /tmp/dsd from-dir "$CLIPS" --frames 4 --resize 32x32 --quiet && echo "dist ingested $("$DIST"/bin/dlk ls /tmp/dsd --json | python3 -c 'import json,sys; print([t["samples"] for t in json.load(sys.stdin)["tensors"] if t["kind"]=="video"])')"
cat /tmp/ldd.* | grep -E "calling init: .*lib(av|dav1d)" | sed 's/^ *[0-9]*: *//'
echo "## torch on cuda: the same wheel, pip alone into torch's python (--target)"
rm -rf /tmp/site /tmp/tds /tmp/tsrc; python3 -m pip install -q --no-index --no-deps --target /tmp/site "$WHEEL"
export PYTHONPATH=/tmp/site
python3 - <<'PY'
import os, numpy as np
out = "/tmp/tsrc"; os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(3)
for i in range(512):
    np.save(f"{out}/{i:06d}.images.npy", rng.integers(0, 255, (16, 16, 3), dtype=np.uint8))
    np.save(f"{out}/{i:06d}.labels.npy", np.int32(i % 10))
PY
D=/tmp/site/dlk/bin/dlk
$D create /tmp/tds --tensor images:u8:16x16x3 --tensor labels:i32 >/dev/null && $D ingest /tmp/tds from-dir /tmp/tsrc --quiet && $D commit /tmp/tds -m t >/dev/null
R=$PWD; (cd /tmp && python3 -c "import dlk, torch; print('dlk from', dlk.__file__, 'torch', torch.__version__)" && python3 $R/tests/gpu/torch_cuda.py /tmp/tds 2>&1 | tail -20)
