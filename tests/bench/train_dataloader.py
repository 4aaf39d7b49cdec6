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
                        [--model resnet50] [--augment] [--gpu-decode]

--augment: the ImageNet training recipe in the workers (torchvision's
RandomResizedCrop 224 on the decoded image and a horizontal flip, as the
reference recipe does), in place of the resize.  --gpu-decode: the
workers only read the files; torchvision.io.decode_jpeg decodes each
batch on the GPU and the recipe (RandomResizedCrop per sample, flip) runs
there, sample by sample.
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image


class Folder(torch.utils.data.Dataset):
    def __init__(self, root, augment=False, raw=False):
        self.augment, self.raw = augment, raw
        if augment:
            import torchvision.transforms as T
            self.recipe = T.Compose([T.RandomResizedCrop(224),
                                     T.RandomHorizontalFlip()])
        self.classes = sorted(d for d in os.listdir(root)
                              if os.path.isdir(os.path.join(root, d)))
        self.items = [(os.path.join(root, c, f), k)
                      for k, c in enumerate(self.classes)
                      for f in sorted(os.listdir(os.path.join(root, c)))]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        if self.raw:  # the file's bytes, for the GPU's decoder
            with open(path, "rb") as f:
                return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8), label
        with Image.open(path) as im:
            im = im.convert("RGB")
            im = self.recipe(im) if self.augment else \
                im.resize((224, 224), Image.BILINEAR)
        return torch.from_numpy(np.asarray(im).copy()), label


def raw_batch(items):
    return [x for x, _ in items], torch.tensor([y for _, y in items])


def gpu_batch(data, device):
    """decode_jpeg on the GPU, then the recipe sample by sample there
    (torchvision's batched transforms would crop every sample alike)"""
    import torchvision.io as io
    import torchvision.transforms.v2 as T
    recipe = T.Compose([T.RandomResizedCrop(224, antialias=True),
                        T.RandomHorizontalFlip()])
    imgs = io.decode_jpeg(data, device=device)
    return torch.stack([recipe(im) for im in imgs]).permute(0, 2, 3, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--augment", action="store_true")
    ap.add_argument("--gpu-decode", action="store_true")
    a = ap.parse_args()
    import torchvision
    device = torch.device("cuda:0")
    ds = Folder(a.root, augment=a.augment and not a.gpu_decode,
                raw=a.gpu_decode)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
        pin_memory=not a.gpu_decode, drop_last=True, persistent_workers=True,
        prefetch_factor=4, collate_fn=raw_batch if a.gpu_decode else None)
    model = getattr(torchvision.models, a.model)(
        num_classes=len(ds.classes)).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9,
                          weight_decay=5e-4)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
    print(f"{len(ds)} JPEGs, {len(ds.classes)} classes, {len(loader)} steps "
          f"per epoch, {a.model} on {device}, DataLoader + "
          f"{'GPU decode' if a.gpu_decode else 'Pillow'}"
          f"{' + RandomResizedCrop' if a.augment or a.gpu_decode else ''}, "
          f"{a.workers} workers")
    for epoch in range(a.epochs):
        model.train()
        events, seen = [], 0
        t0 = time.perf_counter()
        for x, y in loader:
            if a.gpu_decode:
                x = gpu_batch(x, device)
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
