#!/usr/bin/env bash
# tests/bench/train_recipe.sh WORKDIR [N] - the ImageNet training recipe
# (RandomResizedCrop 224, scale 0.08-1, horizontal flip, normalisation,
# bf16, channels-last) on ResNet-50 (MODEL) on one GPU, fed three ways in
# one run over the same N JPEGs of 500x375 q90 (default 20000) in 10
# class folders, EPOCHS (default 3) each:
#   - dlk: examples/train_torch.py --augment over the dataset ingested
#     at 256x256 (--fit crop: the shorter side to 256, its centre kept),
#     the crop done by the loader as it gathers each batch on the GPU;
#   - a PyTorch DataLoader + Pillow, the recipe in WORKERS processes
#     (default the cores; tests/bench/train_dataloader.py --augment);
#   - the workers reading the files and torchvision.io.decode_jpeg on
#     the GPU, the recipe there sample by sample (--gpu-decode).
# Each prints samples/s and GPU busy (CUDA events around each step) per
# epoch.  From a `make dist` tree with the Python package installed
# (PYTHONPATH), torch and torchvision:
#   DIST=$PWD/dist tests/bench/train_recipe.sh /tmp/tr
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/class_jpegs.sh"
MODEL=${MODEL:-resnet50}
[ -d "$W/ds256" ] || "$DIST/bin/dlk" create "$W/ds256" from-dir "$W/train" \
    --resize 256x256 --fit crop --quiet
echo "== dlk, the recipe on the GPU as batches are gathered (examples/train_torch.py --augment)"
python3 "$root/examples/train_torch.py" "$W/ds256" --model "$MODEL" --epochs "$EPOCHS" --augment
echo "== PyTorch DataLoader + Pillow + RandomResizedCrop, $WORKERS workers"
python3 "$here/train_dataloader.py" "$W/train" --model "$MODEL" --epochs "$EPOCHS" \
    --workers "$WORKERS" --augment
echo "== DataLoader reading the files, torchvision.io.decode_jpeg on the GPU, the recipe there"
python3 "$here/train_dataloader.py" "$W/train" --model "$MODEL" --epochs "$EPOCHS" \
    --workers "$WORKERS" --gpu-decode
