#!/usr/bin/env python3
"""Make a small sample source for `dlk ingest DATASET from-dir DIR`.

    examples/sample_data.py OUT_DIR [--samples N] [--size S] [--seed K]

Writes, for each sample i, OUT_DIR/<i>.images.npy (uint8 SxSx3: smooth
gradients with a disc, not noise), OUT_DIR/<i>.labels.npy (int32 scalar
class id, 0..2) and OUT_DIR/<i>.boxes.npy (float32 Nx4, N varies by
sample).  Prints the class names for `dlk create --classes`.
"""
import argparse
import os

import numpy as np


def image(rng, size, label):
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / max(size - 1, 1)
    base = np.stack([x, y, 1 - x], axis=-1) * 200
    cx, cy, r = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.1, 0.3)
    disc = ((x - cx) ** 2 + (y - cy) ** 2) < r * r
    colour = np.array([[255, 40, 40], [40, 255, 40], [40, 40, 255]][label], np.float32)
    base[disc] = colour
    base += rng.normal(0, 6, base.shape)
    return np.clip(base, 0, 255).astype(np.uint8)


NAMES = ["circle-red", "circle-green", "circle-blue"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jpeg", action="store_true",
                    help="write OUT/<class>/<i>.jpg (labels by folder) instead of .npy")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    if a.jpeg:
        from PIL import Image
        for i in range(a.samples):
            label = int(rng.integers(0, 3))
            d = os.path.join(a.out, NAMES[label])
            os.makedirs(d, exist_ok=True)
            Image.fromarray(image(rng, a.size, label)).save(
                os.path.join(d, f"{i:06d}.jpg"), quality=90)
        print(",".join(NAMES))
        return
    for i in range(a.samples):
        label = int(rng.integers(0, 3))
        np.save(os.path.join(a.out, f"{i:06d}.images.npy"), image(rng, a.size, label))
        np.save(os.path.join(a.out, f"{i:06d}.labels.npy"), np.array(label, np.int32))
        n = int(rng.integers(1, 5))
        boxes = rng.uniform(0, a.size, (n, 4)).astype(np.float32)
        np.save(os.path.join(a.out, f"{i:06d}.boxes.npy"), boxes)
    print("circle-red,circle-green,circle-blue")


if __name__ == "__main__":
    main()
