#!/usr/bin/env python3
"""The loader's augmentation on a GPU against the cpu path and torchvision
(TAP output), and its cost in samples/s.  Needs torch with CUDA, a CUDA
build of libdlk (the installed package) and a GPU; torchvision if
importable.

    PYTHONPATH=SITE python3 tests/gpu/augment_torch.py [N]

It makes its own dataset of N (default 2048) images of many sizes with
the package's dlk command (SITE/dlk/bin/dlk, else dlk on PATH) in a
temporary folder (DLK_AUG_OUT to choose it), then checks:
  - cuda:0 and cpu give the same pixels for the same spec and seed
    (f32 within 1e-3; bf16 within 2e-2; jitter too);
  - where torchvision imports, each sample equals
    torchvision.transforms.v2.functional: resized_crop(antialias=True)
    on the float image, hflip, normalize, at the crop the library's
    documented hash gives (within 1e-2);
and prints samples/s streaming the dataset on cuda:0 without and with
imagenet-train (no step)."""
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import dlk
import dlk.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import tap  # noqa: E402
from tap import test  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
OUT = os.environ.get("DLK_AUG_OUT") or tempfile.mkdtemp(prefix="dlk-aug-")
DLK = os.path.join(os.path.dirname(dlk.__file__), "bin", "dlk")
if not os.access(DLK, os.X_OK):
    DLK = shutil.which("dlk")
M64 = (1 << 64) - 1


def make_dataset():
    src, ds = os.path.join(OUT, "src"), os.path.join(OUT, "ds")
    if os.path.isdir(ds):
        return ds
    os.makedirs(src, exist_ok=True)
    for i in range(N):
        rng = np.random.default_rng(i)
        h, w = 160 + (i * 37) % 240, 160 + (i * 53) % 320
        np.save(os.path.join(src, "%06d.images.npy" % i),
                rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        np.save(os.path.join(src, "%06d.labels.npy" % i), np.int32(i % 1000))
    run = lambda *a: subprocess.run([DLK, *a], check=True,
                                    stdout=subprocess.DEVNULL)
    run("create", ds, "--tensor", "images:u8:?x?x3", "--kind", "images=image",
        "--tensor", "labels:i32")
    run("ingest", ds, "from-dir", src, "--quiet")
    run("commit", ds, "-m", "augment")
    return ds


URL = make_dataset()
ds = dlk.open(URL)


def draws(seed, epoch, row):
    s = (seed ^ ((epoch + 1) * 0x9E3779B97F4A7C15 & M64)
         ^ ((row + 1) * 0xD1B54A32D192ED03 & M64))
    while True:
        s = (s + 0x9E3779B97F4A7C15) & M64
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        yield ((z ^ (z >> 31)) >> 11) * 2.0 ** -53


def crop_flip(seed, epoch, row, H, W, scale=(0.08, 1), ratio=(3 / 4, 4 / 3)):
    """lib/loader/augment_params.h: torchvision's get_params on its stream."""
    d = draws(seed, epoch, row)
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    box = None
    for _ in range(10):
        ta = H * W * (scale[0] + (scale[1] - scale[0]) * next(d))
        ar = math.exp(lr[0] + (lr[1] - lr[0]) * next(d))
        w, h = round(math.sqrt(ta * ar)), round(math.sqrt(ta / ar))
        ut, ul = next(d), next(d)
        if 0 < w <= W and 0 < h <= H:
            box = (int(ut * (H - h + 1)), int(ul * (W - w + 1)), h, w)
            break
    if box is None:
        w, h = W, H
        if W / H < ratio[0]:
            h = round(w / ratio[0])
        elif W / H > ratio[1]:
            w = round(h * ratio[1])
        box = ((H - h) // 2, (W - w) // 2, h, w)
    return box, next(d) < 0.5


def epoch_of(device, spec, seed=11):
    ld = dlk.torch.loader(URL, device=device, batch_size=64, seed=seed,
                          tensors=["images"], transform=spec)
    out = {}
    for b in ld:
        x = b["images"].float().cpu()
        for j, r in enumerate(b.index.tolist()):
            out[r] = x[j]
    return out


@test
def _():
    """cuda:0 and cpu give the same f32 pixels (jitter too)"""
    spec = "imagenet-train,dtype=f32,jitter=0.4:0.4:0.4"
    g, c = epoch_of("cuda:0", spec), epoch_of("cpu", spec)
    assert g.keys() == c.keys() and len(g) > 0
    worst = max(float((g[r] - c[r]).abs().max()) for r in g)
    print(f"# worst cuda-cpu f32 difference {worst:.2e}")
    assert worst <= 1e-3, worst


@test
def _():
    """cuda:0 and cpu give the same bf16 pixels (imagenet-train)"""
    g, c = epoch_of("cuda:0", "imagenet-train"), epoch_of("cpu", "imagenet-train")
    worst = max(float((g[r] - c[r]).abs().max()) for r in g)
    print(f"# worst cuda-cpu bf16 difference {worst:.2e}")
    assert worst <= 2e-2, worst


try:
    from torchvision.transforms.v2 import functional as TF
except ImportError:
    TF = None
    print("ok - torchvision equality # SKIP torchvision not importable")

if TF is not None:
    @test
    def _():
        """each sample equals torchvision's resized_crop + hflip + normalize"""
        got = epoch_of("cuda:0", "imagenet-train,dtype=f32")
        mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
        worst = 0.0
        for r in list(got)[:256]:
            img = torch.from_numpy(np.array(ds.read("images", r)))
            img = img.permute(2, 0, 1).float() / 255
            (t, l, h, w), flip = crop_flip(11, 0, r, img.shape[1], img.shape[2])
            x = TF.resized_crop(img, t, l, h, w, [224, 224], antialias=True)
            if flip:
                x = TF.horizontal_flip(x)
            x = TF.normalize(x, mean, std)
            worst = max(worst, float((x - got[r]).abs().max()))
        print(f"# worst difference from torchvision {worst:.2e}")
        assert worst <= 1e-2, worst


def rate(spec):
    ld = dlk.torch.loader(URL, device="cuda:0", batch_size=256, seed=1,
                          tensors=["images"], transform=spec)
    for _ in ld:  # a warm epoch: chunks read once, the device started
        pass
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 0
    for _ in range(2):
        for b in ld:
            n += len(b.index)
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


@test
def _():
    """samples/s on cuda:0, without and with imagenet-train"""
    plain, aug = rate(None), rate("imagenet-train")
    print(f"# {N} images: {plain:.0f} samples/s stored bytes, {aug:.0f} "
          f"samples/s imagenet-train ({aug / plain:.2f}x)")
    assert aug > 0


sys.exit(tap.failed)
