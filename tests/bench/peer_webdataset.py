#!/usr/bin/env python3
"""WebDataset (a peer loader) on the same images as dlk's GPU benchmark:
tar shards of the decoded 224x224 uint8 tensors (.npy per sample, the same
bytes dlk stores) and of the JPEGs (decoded with Pillow per step, the way
WebDataset is mostly used), through its PyTorch pipeline with 16 workers,
pinned memory, to the GPU.  Prints one JSON line per variant.

  peer_webdataset.py IMGDIR [--workers 16] [--batch 256] [--seconds 20]
IMGDIR is make_images.py's output (decoded.npy and jpeg/).
"""
import io, json, os, tarfile
from peer_common import parse_args, timed_stream

import numpy as np
import torch
import webdataset as wds


def write_shards(out, items, per_shard):
    os.makedirs(out, exist_ok=True)
    urls = []
    for s in range(0, len(items), per_shard):
        path = os.path.join(out, f"shard-{s // per_shard:05d}.tar")
        with tarfile.open(path, "w") as tf:
            for key, ext, data in items[s:s + per_shard]:
                ti = tarfile.TarInfo(f"{key}.{ext}")
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                cls = str(int(key) % 1000).encode()
                ti = tarfile.TarInfo(f"{key}.cls")
                ti.size = len(cls)
                tf.addfile(ti, io.BytesIO(cls))
        urls.append(path)
    return urls


def to_224(img):
    return np.asarray(img.convert("RGB").resize((224, 224)))


def stream(urls, decode, a, post=None):
    # several epochs, as dlk's run streams several
    ds = (wds.WebDataset(urls, shardshuffle=len(urls), nodesplitter=wds.split_by_node)
          .repeat(5).shuffle(1000).decode(decode).to_tuple("npy;jpg", "cls"))
    if post:
        ds = ds.map_tuple(post, lambda c: c)
    ds = ds.batched(a.batch)
    dl = wds.WebLoader(ds, batch_size=None, num_workers=a.workers, pin_memory=True)
    return timed_stream(dl, a, images=lambda b: torch.as_tensor(b[0]))


def main():
    a = parse_args(__doc__)
    dec = np.load(os.path.join(a.imgdir, "decoded.npy"), mmap_mode="r")
    items = []
    for i in range(dec.shape[0]):
        b = io.BytesIO()
        np.save(b, np.asarray(dec[i]))
        items.append((f"{i:07d}", "npy", b.getvalue()))
    urls = write_shards(os.path.join(a.imgdir, "wds-npy"), items, 500)
    r = stream(urls, "rgb8", a)
    r["peer"] = "webdataset-npy"
    print(json.dumps(r), flush=True)
    jdir = os.path.join(a.imgdir, "jpeg")
    items = [(f.split(".")[0], "jpg", open(os.path.join(jdir, f), "rb").read())
             for f in sorted(os.listdir(jdir))]
    urls = write_shards(os.path.join(a.imgdir, "wds-jpg"), items, 500)
    r = stream(urls, "pil", a, to_224)
    r["peer"] = "webdataset-jpeg"
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
