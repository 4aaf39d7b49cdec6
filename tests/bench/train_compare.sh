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
. "$here/class_jpegs.sh"
[ -d "$W/ds" ] || "$DIST/bin/dlk" create "$W/ds" from-dir "$W/train" --resize 224x224 --quiet
echo "== dlk (examples/train_torch.py)"
python3 "$root/examples/train_torch.py" "$W/ds" --epochs "$EPOCHS"
echo "== PyTorch DataLoader + Pillow, $WORKERS workers (tests/bench/train_dataloader.py)"
python3 "$here/train_dataloader.py" "$W/train" --epochs "$EPOCHS" --workers "$WORKERS"
