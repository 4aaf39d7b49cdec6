#!/usr/bin/env python3
"""LitData (a peer loader) on the same images as dlk's GPU benchmark:
litdata.optimize() writes the decoded 224x224 uint8 tensors (the same
bytes dlk stores) and their labels into 64 MB chunks, read back with
litdata.StreamingDataset(shuffle=True, batch_decode=0) through its
StreamingDataLoader with 16 workers and pinned memory, each batch moved to
the GPU.  Only the streaming is timed (first_batch_s: time to the first
batch on the device); epochs repeat until --seconds.  Prints one JSON line
("litdata").

  peer_litdata.py IMGDIR [--workers 16] [--batch 256] [--seconds 20] [--device cuda|cpu]
IMGDIR is make_images.py's output (decoded.npy); the chunks go to
IMGDIR/litdata-chunks.  Needs litdata (and boto3, botocore, s3transfer,
jmespath, python-dateutil, which it imports at start) from .whl/.
"""
import contextlib, functools, json, multiprocessing, os, shutil, sys, warnings
from peer_common import parse_args, timed_stream

import numpy as np
import litdata

_dec = None


def sample(path, i):
    global _dec
    if _dec is None:
        _dec = np.load(path, mmap_mode="r")
    return {"x": np.array(_dec[i]), "y": i % 1000}


def main():
    a = parse_args(__doc__)
    # litdata hands out read-only views of its chunk bytes; torch warns once per worker
    warnings.filterwarnings("ignore", "The given NumPy array is not writable")
    path = os.path.join(a.imgdir, "decoded.npy")
    n_img = np.load(path, mmap_mode="r").shape[0]
    out = os.path.join(a.imgdir, "litdata-chunks")
    shutil.rmtree(out, ignore_errors=True)
    start = multiprocessing.get_start_method()
    with contextlib.redirect_stdout(sys.stderr):  # keep stdout for the JSON line
        litdata.optimize(fn=functools.partial(sample, path), inputs=list(range(n_img)),
                         output_dir=out, chunk_bytes="64MB",
                         num_workers=min(a.workers, os.cpu_count()), verbose=False)
    # optimize() forces the global start method to "spawn"; a training process
    # would not have run it, so give the DataLoader workers the default back
    multiprocessing.set_start_method(start, force=True)
    # batch_decode=0 (documented: deserialize per item): litdata 0.2.76's "auto"
    # re-deserializes a whole window per shuffled 150 KB item (~100x slower
    # per item here, ~8x slower through the loader on 2 cores)
    ds = litdata.StreamingDataset(out, shuffle=True, batch_decode=0)
    dl = litdata.StreamingDataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                                     pin_memory=True, persistent_workers=True)
    r = timed_stream(dl, a)
    r["peer"] = "litdata"
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
