#!/usr/bin/env python3
"""WebDataset tar shards for the tar tests (t240, t241), written and read
back by the webdataset package itself, so that the tar details dlk meets
are those of the format's own writer.

  wds_shards.py make DIR --shards N --per K [--start S] [--bad KEY] [--big]
                 [--ext tar.gz]
      N shards DIR/%06d.tar (from S) of K samples each (--ext: named
      %06d.EXT, which webdataset's writer gzips for .gz): an image (.png
      for even sample numbers, .jpg for odd ones, sizes varying), a class
      (.cls) and a caption (.txt); --bad KEY makes that sample's .jpg a
      corrupt JPEG; --big makes the images 16 times as wide and high.
  wds_shards.py check DLK DATASET BASE DIR
      every row of DATASET matches its sample in DIR's shards (read by
      webdataset): key BASE + SHARD + "/" + member, the caption, the class
      and the pixels (PNG exactly, JPEG within decoder rounding); every
      sample of the shards is a row once.  Prints the row count.
"""
import argparse
import glob
import io
import json
import os
import subprocess
import sys

import numpy as np
from PIL import Image
import webdataset as wds


def sample(i, rng, big):
    h, w = 16 + (i * 7) % 23, 20 + (i * 5) % 19
    if big:
        h, w = h * 16, w * 16
    ys, xs = np.mgrid[0:h, 0:w]
    a = np.stack([(xs * 9 + i) % 256, (ys * 11 + 3 * i) % 256,
                  rng.integers(0, 256, (h, w))], -1).astype(np.uint8)
    b = io.BytesIO()
    ext = "png" if i % 2 == 0 else "jpg"
    Image.fromarray(a).save(b, format="PNG" if ext == "png" else "JPEG",
                            quality=90)
    return {"__key__": "s%05d" % i, ext: b.getvalue(), "cls": str(i % 3),
            "txt": "caption %d: \u00e9t\u00e9 \u2603" % i}


def make(a):
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(a.start)
    with wds.ShardWriter(os.path.join(a.dir, "%06d." + a.ext), maxcount=a.per,
                         start_shard=a.start, verbose=0) as w:
        for i in range(a.start * a.per, (a.start + a.shards) * a.per):
            s = sample(i, rng, a.big)
            if s["__key__"] == a.bad:
                s.pop("png", None)
                s["jpg"] = b"\xff\xd8\xff\xe0 not a jpeg at all" * 4
            w.write(s)


def column(dlk, ds, tensor):
    out = subprocess.check_output([dlk, "cat", ds, tensor, "0:", "--json"])
    return [json.loads(l) for l in out.decode().splitlines()]


def check(a):
    want = {}
    for url in sorted(glob.glob(os.path.join(a.dir, "*.tar"))):
        shard = os.path.basename(url)
        for s in wds.WebDataset(url, shardshuffle=False, empty_check=False):
            ext = "png" if "png" in s else "jpg"
            want[a.base + shard + "/" + s["__key__"] + "." + ext] = s
    keys = [bytes(r["values"]).decode() for r in column(a.dlk, a.ds, "key")]
    texts = column(a.dlk, a.ds, "text")
    labels = column(a.dlk, a.ds, "labels")
    # the pixels back to back (--json of large images is slow): each
    # row's share is the size of its source image
    raw = subprocess.check_output([a.dlk, "cat", a.ds, "images", "0:",
                                   "--raw"])
    at = 0
    assert len(keys) == len(set(keys)), "a key twice"
    assert set(keys) <= set(want), sorted(set(keys) - set(want))[:5]
    for i, k in enumerate(keys):
        s = want[k]
        assert bytes(texts[i]["values"]).decode() == s["txt"].decode(), k
        assert labels[i]["values"] == [int(s["cls"])], (k, labels[i])
        ref = np.asarray(Image.open(io.BytesIO(s.get("png", s.get("jpg"))))
                         .convert("RGB"))
        got = np.frombuffer(raw[at:at + ref.size], np.uint8)
        at += ref.size
        assert got.size == ref.size, (k, "fewer pixels than the source")
        got = got.reshape(ref.shape)
        d = np.abs(got.astype(int) - ref.astype(int))
        if "png" in s:
            assert d.max() == 0, (k, "png pixels differ")
        else:
            assert d.mean() < 2, (k, "jpeg pixels differ", d.mean())
    assert at == len(raw), ("more pixels than the sources", at, len(raw))
    print(len(keys))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--shards", type=int, required=True)
    m.add_argument("--per", type=int, required=True)
    m.add_argument("--start", type=int, default=0)
    m.add_argument("--bad", default="")
    m.add_argument("--big", action="store_true")
    m.add_argument("--ext", default="tar")
    c = sub.add_parser("check")
    c.add_argument("dlk")
    c.add_argument("ds")
    c.add_argument("base")
    c.add_argument("dir")
    a = p.parse_args()
    make(a) if a.cmd == "make" else check(a)


if __name__ == "__main__":
    sys.exit(main())
