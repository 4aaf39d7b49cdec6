#!/usr/bin/env python3
"""The images the GPU benchmark compares on: N JPEGs of 500x375 at quality
90 (ImageNet-like sizes) with photo-like content, and the same images
decoded and resized to 224x224 as one uint8 .npy (what dlk stores, and
what the "copied to local SSD" baseline memory-maps), plus labels.

  make_images.py OUT --n 20000 [--procs 16] [--jpeg-only]
writes OUT/jpeg/*.jpg, OUT/decoded.npy, OUT/npy/all.images.npy and
OUT/npy/all.labels.npy (for dlk ingest from-dir).
"""
import argparse, os
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def make(args):
    out, i = args
    rng = np.random.default_rng(i)
    y, x = np.mgrid[0:375, 0:500].astype(np.float32)
    a, b, c = rng.uniform(0.2, 1.5, 3)
    base = np.stack([x * a, y * b, (x + y) * c], -1) % 256
    im = Image.fromarray(base.astype(np.uint8))
    d = ImageDraw.Draw(im)
    for _ in range(12):
        x0, y0 = rng.integers(0, 450), rng.integers(0, 330)
        d.ellipse([x0, y0, x0 + rng.integers(20, 160), y0 + rng.integers(20, 120)],
                  fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
    im = im.filter(ImageFilter.GaussianBlur(1.2))
    arr = np.asarray(im).astype(np.int16) + rng.integers(-8, 8, (375, 500, 3))
    im = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    path = os.path.join(out, "jpeg", f"{i:07d}.jpg")
    im.save(path, quality=90)
    dec = Image.open(path).convert("RGB").resize((224, 224), Image.BILINEAR)
    return np.asarray(dec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    ap.add_argument("--jpeg-only", action="store_true",
                    help="write OUT/jpeg/*.jpg only (the ingest benchmark)")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "jpeg"), exist_ok=True)
    if a.jpeg_only:
        with Pool(a.procs) as p:
            for _ in p.imap_unordered(make, [(a.out, i) for i in range(a.n)], 64):
                pass
        return
    os.makedirs(os.path.join(a.out, "npy"), exist_ok=True)
    dec = np.lib.format.open_memmap(os.path.join(a.out, "decoded.npy"), "w+",
                                    np.uint8, (a.n, 224, 224, 3))
    with Pool(a.procs) as p:
        for i, img in enumerate(p.imap(make, [(a.out, i) for i in range(a.n)], 64)):
            dec[i] = img
    dec.flush()
    os.link(os.path.join(a.out, "decoded.npy"), os.path.join(a.out, "npy", "all.images.npy"))
    np.save(os.path.join(a.out, "npy", "all.labels.npy"), (np.arange(a.n) % 1000).astype(np.int32))


if __name__ == "__main__":
    main()
