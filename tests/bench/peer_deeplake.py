#!/usr/bin/env python3
"""Deep Lake 4.x (a peer loader) on the same images as dlk's GPU benchmark:
a Deep Lake dataset on local disk with the decoded 224x224 uint8 tensors
as a fixed-shape uint8 array column (the same bytes dlk stores; an Image
column would PNG-compress them) plus an int label, read back through
ds.pytorch() and a torch DataLoader (shuffle, 16 workers, pinned memory),
each batch moved to the GPU.  Only the streaming is timed (first_batch_s:
time to the first batch on the device); epochs repeat until --seconds.
Prints one JSON line ("deeplake").

  peer_deeplake.py IMGDIR [--workers 16] [--batch 256] [--seconds 20] [--device cuda|cpu]
IMGDIR is make_images.py's output (decoded.npy); the dataset goes to
IMGDIR/deeplake-ds.  Needs deeplake 4.1.0 from .whl/ (newer 4.x wheels are
too large to carry).
"""
import json, os, shutil, warnings
from peer_common import parse_args, timed_stream

import numpy as np
import torch
import deeplake
from torch.utils.data import DataLoader


def write(out, dec):
    shutil.rmtree(out, ignore_errors=True)
    ds = deeplake.create(out)
    ds.add_column("x", deeplake.types.Array("uint8", shape=[224, 224, 3]))
    ds.add_column("y", deeplake.types.Int32())
    for s in range(0, dec.shape[0], 500):
        e = min(s + 500, dec.shape[0])
        ds.append({"x": np.asarray(dec[s:e]), "y": (np.arange(s, e) % 1000).astype(np.int32)})
    ds.commit()


def main():
    a = parse_args(__doc__)
    # Deep Lake hands out read-only arrays; torch warns once per worker
    warnings.filterwarnings("ignore", "The given NumPy array is not writable")
    out = os.path.join(a.imgdir, "deeplake-ds")
    write(out, np.load(os.path.join(a.imgdir, "decoded.npy"), mmap_mode="r"))
    ds = deeplake.open_read_only(out)
    dl = DataLoader(ds.pytorch(), batch_size=a.batch, shuffle=True, num_workers=a.workers,
                    pin_memory=True, persistent_workers=True)
    r = timed_stream(dl, a)
    r["peer"] = "deeplake"
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
