#!/usr/bin/env python3
"""Train an image classifier on a dlk dataset with PyTorch: batches land
on the GPU straight from dlk (no DataLoader, no worker processes).

    make demo                                   # builds a small dataset
    python3 examples/train_torch.py /tmp/dlk-demo.XXXX/dataset
    torchrun --nproc-per-node 2 examples/train_torch.py DATASET   # DDP

The dataset needs an image tensor (u8 HxWxC) and a class-label tensor
(`dlk create ... from-dir` makes "images" and "labels").  ResNet-18 from
torchvision (a small CNN where torchvision is missing, or --model small),
mixed precision (bf16 autocast), SGD.  Each epoch prints samples/s over
all ranks and how busy the GPU was: the device time of the training
steps, from CUDA events recorded around each step on the current stream
(read once per epoch, so the host never waits per step), over the
epoch's wall time.  --device cpu runs it without a GPU (no busy figure).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import dlk
import dlk.torch


def small_cnn(classes):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, classes))


def make_model(name, classes):
    if name in ("resnet18", "resnet50"):
        try:
            import torchvision
            return getattr(torchvision.models, name)(num_classes=classes)
        except ImportError:
            print("torchvision missing: training the small CNN")
    return small_cnn(classes)


# The ImageNet training recipe, done by the loader as it gathers each
# batch on the GPU: RandomResizedCrop 224 (scale 0.08-1, ratio 3/4-4/3,
# antialiased bilinear), horizontal flip, normalisation, bf16; NHWC, so
# that the NCHW view the model takes is channels-last with no copy.
RECIPE = ("crop=224,scale=0.08:1,ratio=0.75:1.3333,flip=h,"
          "normalize=imagenet,dtype=bf16,layout=nhwc")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256, help="per rank")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--model", default="resnet18",
                    choices=["resnet18", "resnet50", "small"])
    ap.add_argument("--augment", nargs="?", const=RECIPE, default=None,
                    help="per-sample augmentation on the GPU: a spec "
                    "(dlk-bench-stream(1) --augment), or alone the "
                    "ImageNet training recipe; the dataset then stores "
                    "larger images (e.g. --resize 256x256 --fit crop)")
    ap.add_argument("--images", default="images")
    ap.add_argument("--labels", default="labels")
    ap.add_argument("--device", default="cuda",
                    help="cuda (the local rank's GPU: dlk.local_gpu()) or cpu")
    a = ap.parse_args()

    rank, world, _ = dlk.launch_env()   # torchrun, MPI or Slurm
    cuda = a.device != "cpu"
    # the local rank's GPU, modulo those this process sees (the loader's
    # default too): one of its own under Slurm's --gpus-per-task
    gpu = dlk.local_gpu() or 0
    device = torch.device(f"cuda:{gpu}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo")

    ds = dlk.open(a.dataset)
    info = {t["name"]: t for t in ds.tensors}
    classes = len(info[a.labels]["classes"]) or \
        int(max(ds.read(a.labels, i) for i in range(len(ds)))) + 1
    # each rank reads its share: rank and world size from the launcher
    loader = dlk.torch.loader(ds, batch_size=a.batch_size, shuffle=True,
                              seed=0, tensors=[a.images, a.labels],
                              device=str(device), epochs=a.epochs,
                              drop_last=True, augment=a.augment)
    model = make_model(a.model, classes).to(device)
    model = model.to(memory_format=torch.channels_last)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[gpu] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9,
                          weight_decay=5e-4)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
    if rank == 0:
        print(f"{len(ds)} rows, {classes} classes, {world} rank(s), "
              f"{len(loader)} steps per epoch, {a.model} on {device}")

    for epoch in range(a.epochs):
        model.train()
        events, seen, loss_sum = [], 0, torch.zeros((), device=device)
        t0 = time.perf_counter()
        for batch in loader:
            if a.augment:
                # cropped, flipped and normalised by the loader: bf16 NHWC,
                # taken as a channels-last NCHW view
                x = batch[a.images].permute(0, 3, 1, 2)
            else:
                # u8 NHWC as stored: a channels-last NCHW view, normalised
                # on the GPU
                x = batch[a.images].permute(0, 3, 1, 2).float().sub_(mean).div_(std)
            y = batch[a.labels].long().view(-1)
            if cuda:
                start, end = (torch.cuda.Event(enable_timing=True),
                              torch.cuda.Event(enable_timing=True))
                start.record()
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if cuda:
                end.record()
                events.append((start, end))
            loss_sum += loss.detach()
            seen += len(y)
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        busy = sum(s.elapsed_time(e) for s, e in events) / 1e3
        stats = torch.tensor([seen, wall, busy, float(loss_sum)],
                             dtype=torch.float64, device=device)
        if world > 1:
            dist.all_reduce(stats)
        if rank == 0:
            n, wall_sum, busy_sum, loss_all = stats.tolist()
            line = (f"epoch {epoch}: {n / (wall_sum / world):.0f} samples/s, "
                    f"loss {loss_all / max(len(loader), 1) / world:.3f}")
            if cuda:
                line += f", GPU busy {100 * busy_sum / wall_sum:.1f}% (CUDA events)"
            print(line, flush=True)
    loader.close()
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
