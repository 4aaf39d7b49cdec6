#!/usr/bin/env bash
# tests/bench/train_compare.sh WORKDIR [N] - ResNet-18 training on one GPU
# fed by dlk (examples/train_torch.py over the dataset ingested from the
# JPEGs) and by a PyTorch DataLoader + Pillow over the same JPEGs
# (tests/bench/train_dataloader.py, WORKERS processes, default the
# cores), in one run: N JPEGs of 500x375 q90 (default 20000;
# make_images.py) in 10 class folders, 3 epochs each (EPOCHS); each
# prints samples/s and GPU busy per epoch.  From a `make dist` tree with
# the Python package installed (PYTHONPATH) and torch and torchvision:
#   DIST=$PWD/dist tests/bench/train_compare.sh /tmp/tc
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
DIST=${DIST:?DIST must name the dist folder}
W=${1:?work dir}; N=${2:-20000}
EPOCHS=${EPOCHS:-3}; WORKERS=${WORKERS:-$(nproc)}
mkdir -p "$W"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null; echo "cores $(nproc)"
if [ ! -d "$W/train" ]; then
    python3 "$here/make_images.py" "$W/img" --n "$N" --jpeg-only >/dev/null
    for c in 0 1 2 3 4 5 6 7 8 9; do mkdir -p "$W/train/class$c"; done
    i=0
    for f in "$W/img/jpeg"/*.jpg; do
        mv "$f" "$W/train/class$((i % 10))/"
        i=$((i + 1))
    done
fi
[ -d "$W/ds" ] || "$DIST/bin/dlk" create "$W/ds" from-dir "$W/train" --resize 224x224 --quiet
echo "== dlk (examples/train_torch.py)"
python3 "$root/examples/train_torch.py" "$W/ds" --epochs "$EPOCHS"
echo "== PyTorch DataLoader + Pillow, $WORKERS workers (tests/bench/train_dataloader.py)"
python3 "$here/train_dataloader.py" "$W/train" --epochs "$EPOCHS" --workers "$WORKERS"
