#!/usr/bin/env python3
"""MosaicML Streaming (a peer loader) on the same images as dlk's GPU
benchmark: MDS shards (streaming.MDSWriter, no compression) of the decoded
224x224 uint8 tensors ("mosaic-mds", fixed-shape ndarray column, the same
bytes dlk stores) and of the JPEGs ("mosaic-jpeg", raw bytes decoded with
Pillow and resized to 224 in the dataset's __getitem__), read back with
StreamingDataset(local=..., shuffle=True) through a torch DataLoader with
16 workers and pinned memory, each batch moved to the GPU.  Only the
streaming is timed (first_batch_s: time to the first batch on the device);
epochs repeat until --seconds.  Prints one JSON line per variant.

  peer_mosaic.py IMGDIR [--workers 16] [--batch 256] [--seconds 20] [--device cuda|cpu]
IMGDIR is make_images.py's output (decoded.npy and jpeg/); the shards go
to IMGDIR/mosaic-mds and IMGDIR/mosaic-jpeg.  Needs mosaicml-streaming
(and zstd, brotli, python-snappy, cramjam, catalogue) from .whl/.
"""
import io, json, os, shutil, warnings
from peer_common import parse_args, timed_stream

import numpy as np
import torch
from PIL import Image
from streaming import MDSWriter, StreamingDataset
from torch.utils.data import DataLoader


class JpegDataset(StreamingDataset):
    def __getitem__(self, i):
        s = super().__getitem__(i)
        img = Image.open(io.BytesIO(s["jpeg"])).convert("RGB").resize((224, 224))
        return np.asarray(img), s["y"]


def write(out, columns, samples):
    shutil.rmtree(out, ignore_errors=True)
    with MDSWriter(out=out, columns=columns) as w:
        for s in samples:
            w.write(s)


def stream(ds, a):
    return timed_stream(DataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                                   pin_memory=True, persistent_workers=True), a)


def main():
    a = parse_args(__doc__)
    # MDS hands out read-only views of its shard bytes; torch warns once per worker
    warnings.filterwarnings("ignore", "The given NumPy array is not writable")
    dec = np.load(os.path.join(a.imgdir, "decoded.npy"), mmap_mode="r")
    out = os.path.join(a.imgdir, "mosaic-mds")
    write(out, {"x": "ndarray:uint8:224,224,3", "y": "int"},
          ({"x": np.asarray(dec[i]), "y": i % 1000} for i in range(dec.shape[0])))
    r = stream(StreamingDataset(local=out, shuffle=True, batch_size=a.batch), a)
    r["peer"] = "mosaic-mds"
    print(json.dumps(r), flush=True)
    jdir = os.path.join(a.imgdir, "jpeg")
    out = os.path.join(a.imgdir, "mosaic-jpeg")
    write(out, {"jpeg": "bytes", "y": "int"},
          ({"jpeg": open(os.path.join(jdir, f), "rb").read(), "y": int(f.split(".")[0]) % 1000}
           for f in sorted(os.listdir(jdir))))
    r = stream(JpegDataset(local=out, shuffle=True, batch_size=a.batch), a)
    r["peer"] = "mosaic-jpeg"
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
