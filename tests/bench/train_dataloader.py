#!/usr/bin/env python3
"""The baseline of tests/bench/train_compare.sh: the same training as
examples/train_torch.py (ResNet-18, bf16 autocast, SGD, batch 256,
channels-last, the same normalisation on the GPU), fed the way teams
train today: a PyTorch DataLoader over a folder of JPEGs in class
folders, each sample read, decoded and resized to 224x224 by Pillow in
worker processes, batches pinned and copied to the GPU.  Each epoch
prints samples/s and how busy the GPU was, measured as train_torch.py
does (CUDA events around each step, over the epoch's wall time).

    train_dataloader.py DIR [--epochs 3] [--workers 16] [--batch-size 256]
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image


class Folder(torch.utils.data.Dataset):
    def __init__(self, root):
        self.classes = sorted(d for d in os.listdir(root)
                              if os.path.isdir(os.path.join(root, d)))
        self.items = [(os.path.join(root, c, f), k)
                      for k, c in enumerate(self.classes)
                      for f in sorted(os.listdir(os.path.join(root, c)))]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        with Image.open(path) as im:
            im = im.convert("RGB").resize((224, 224), Image.BILINEAR)
        return torch.from_numpy(np.asarray(im).copy()), label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.1)
    a = ap.parse_args()
    import torchvision
    device = torch.device("cuda:0")
    ds = Folder(a.root)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
        pin_memory=True, drop_last=True, persistent_workers=True,
        prefetch_factor=4)
    model = torchvision.models.resnet18(num_classes=len(ds.classes)).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9,
                          weight_decay=5e-4)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
    print(f"{len(ds)} JPEGs, {len(ds.classes)} classes, {len(loader)} steps "
          f"per epoch, resnet18 on {device}, DataLoader + Pillow, "
          f"{a.workers} workers")
    for epoch in range(a.epochs):
        model.train()
        events, seen = [], 0
        t0 = time.perf_counter()
        for x, y in loader:
            x = x.to(device, non_blocking=True).permute(0, 3, 1, 2).float()
            x = x.sub_(mean).div_(std)
            y = y.to(device, non_blocking=True)
            start, end = (torch.cuda.Event(enable_timing=True),
                          torch.cuda.Event(enable_timing=True))
            start.record()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            end.record()
            events.append((start, end))
            seen += len(y)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        busy = sum(s.elapsed_time(e) for s, e in events) / 1e3
        print(f"epoch {epoch}: {seen / wall:.0f} samples/s, GPU busy "
              f"{100 * busy / wall:.1f}% (CUDA events)", flush=True)


if __name__ == "__main__":
    main()
