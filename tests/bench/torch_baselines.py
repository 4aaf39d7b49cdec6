#!/usr/bin/env python3
"""What teams do today, on the same machine and images as dlk's bench:

  torch_baselines.py jpeg DIR   PyTorch DataLoader + Pillow decode + resize
                                to 224x224, pin_memory, to the GPU
  torch_baselines.py npy FILE   DataLoader over pre-decoded uint8 tensors in
                                one .npy memory map ("copied to local SSD")
  torch_baselines.py h2d        pinned host-to-device copy bandwidth
Options: --workers 16 --batch 256 --seconds 20.  Prints one JSON line.
"""
import argparse, json, os, sys, time

import numpy as np
import torch


def h2d(seconds):
    out = {}
    for mib in (16, 64, 256):
        n = mib << 20
        src = torch.empty(n, dtype=torch.uint8).pin_memory()
        src.random_(0, 255)
        dst = torch.empty(n, dtype=torch.uint8, device="cuda")
        for _ in range(3):
            dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        reps = max(10, int(2e9 // n))
        t0 = time.perf_counter()
        for _ in range(reps):
            dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        out[f"h2d_{mib}MiB_GBps"] = reps * n / (time.perf_counter() - t0) / 1e9
    out["h2d_best_GBps"] = max(out.values())
    return out


class JpegSet(torch.utils.data.Dataset):
    def __init__(self, d):
        self.files = sorted(os.path.join(d, f) for f in os.listdir(d))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        from PIL import Image
        im = Image.open(self.files[i]).convert("RGB").resize((224, 224), Image.BILINEAR)
        return torch.from_numpy(np.asarray(im).copy()), i % 1000


class NpySet(torch.utils.data.Dataset):
    def __init__(self, f):
        self.f = f
        self.a = None
        self.n = np.load(f, mmap_mode="r").shape[0]

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.a is None:
            self.a = np.load(self.f, mmap_mode="r")
        return torch.from_numpy(np.array(self.a[i])), i % 1000


def stream(ds, a):
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                     num_workers=a.workers, pin_memory=True,
                                     drop_last=True, persistent_workers=False,
                                     prefetch_factor=4)
    t0 = time.perf_counter()
    first = None
    n = 0
    for x, y in dl:
        x = x.cuda(non_blocking=True)
        y = y.cuda(non_blocking=True)
        if first is None:
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
        n += x.shape[0]
        if time.perf_counter() - t0 > a.seconds:
            break
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return {"samples": n, "seconds": dt, "samples_per_s": n / dt,
            "first_batch_s": first}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what")
    ap.add_argument("path", nargs="?")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=20)
    a = ap.parse_args()
    if a.what == "h2d":
        r = h2d(a.seconds)
    elif a.what == "jpeg":
        r = stream(JpegSet(a.path), a)
    elif a.what == "npy":
        r = stream(NpySet(a.path), a)
    else:
        sys.exit("unknown baseline " + a.what)
    r["baseline"] = a.what
    print(json.dumps(r))


if __name__ == "__main__":
    main()
