#!/usr/bin/env python3
"""dlk through the same harness as the peer loaders (peer_common.py):
dlk.torch.loader over the dataset gpu_peers.sh ingests from the same
decoded images, shuffled, batches landing on the GPU as torch tensors,
epoch after epoch until --seconds.  Prints one JSON line.

  peer_dlk.py IMGDIR [--dataset DS] [--workers N] [--batch 256] [--seconds 20]
DS defaults to IMGDIR/../ds (where gpu_peers.sh puts it).
"""
import json, os, sys
from peer_common import parse_args, timed_stream

sys.argv, ds = list(sys.argv), None
if "--dataset" in sys.argv:
    i = sys.argv.index("--dataset")
    ds = sys.argv[i + 1]
    del sys.argv[i:i + 2]
a = parse_args(__doc__)
ds = ds or os.path.join(os.path.dirname(os.path.abspath(a.imgdir)), "ds")

import dlk.torch

loader = dlk.torch.loader(ds, batch_size=a.batch, shuffle=True, seed=0,
                          tensors=["images", "labels"],
                          device="cuda:0" if a.device == "cuda" else "cpu",
                          workers=a.workers)
r = timed_stream(loader, a, images=lambda b: b["images"])
print(json.dumps({"peer": "dlk.torch.loader", "variant": "decoded tensors", **r}))
