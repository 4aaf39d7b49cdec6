#!/usr/bin/env python3
"""An ImageNet-like folder of JPEGs for the ingest benchmark: photographs'
sizes and encodings rather than one uniform size.  Each image is 300-640
pixels wide with an aspect ratio from 3:4 to 16:9, JPEG quality 75-95,
about a third progressive and 7% grayscale, with photo-like content
(smooth multi-scale colour fields, shapes, blur and grain) so that the
files average near 35 KB, as ImageNet's training images do at these
sizes.  Files go to OUT/n0000000C/ for ten classes C; the same --seed
and --n give the same files.

  make_imagenet.py OUT --n 4000 [--seed 1] [--procs 16]
"""
import argparse, os
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = 10
ASPECTS = (3 / 4, 1.0, 4 / 3, 3 / 2, 16 / 9)  # width / height


def field(rng, w, h):
    """Smooth colour noise over a few scales (sky, ground, textures)."""
    acc = np.zeros((h, w, 3), np.float32)
    for cells, amp in ((2, 1.0), (5, 0.5), (14, 0.25), (40, 0.12)):
        g = rng.uniform(0, 255, (cells, cells, 3)).astype(np.uint8)
        up = Image.fromarray(g).resize((w, h), Image.BICUBIC)
        acc += amp * (np.asarray(up, np.float32) - 128)
    return acc / 1.9 + 128


def make(args):
    out, seed, i = args
    rng = np.random.default_rng([seed, i])
    w = int(rng.integers(300, 641))
    h = int(round(w / ASPECTS[rng.integers(len(ASPECTS))]))
    base = np.clip(field(rng, w, h), 0, 255).astype(np.uint8)
    im = Image.fromarray(base)
    d = ImageDraw.Draw(im)
    for _ in range(int(rng.integers(3, 10))):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1 = x0 + int(rng.integers(w // 12, w // 2))
        y1 = y0 + int(rng.integers(h // 12, h // 2))
        fill = tuple(int(v) for v in rng.integers(0, 255, 3))
        if rng.random() < 0.5:
            d.ellipse([x0, y0, x1, y1], fill=fill)
        else:
            d.polygon([(x0, y0), (x1, y0 + (y1 - y0) // 3), (x0 + (x1 - x0) // 2, y1)],
                      fill=fill)
    im = im.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.6, 1.6))))
    grain = rng.normal(0, float(rng.uniform(1.8, 5.5)), (h, w, 1))
    arr = np.asarray(im, np.float32) + grain
    im = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    if rng.random() < 0.07:
        im = im.convert("L")
    q = int(rng.integers(75, 96))
    prog = bool(rng.random() < 0.33)
    path = os.path.join(out, "n%08d" % (i % CLASSES), "%07d.jpg" % i)
    im.save(path, quality=q, progressive=prog, optimize=prog)
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    a = ap.parse_args()
    for c in range(CLASSES):
        os.makedirs(os.path.join(a.out, "n%08d" % c), exist_ok=True)
    with Pool(a.procs) as p:
        sizes = list(p.imap_unordered(make, [(a.out, a.seed, i) for i in range(a.n)], 64))
    print("%d JPEGs, %.1f KB each on average" % (len(sizes), sum(sizes) / max(len(sizes), 1) / 1e3))


if __name__ == "__main__":
    main()
