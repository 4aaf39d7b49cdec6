"""A Python training loop's view of dlk: samples/s of dlk.Loader and
dlk.torch.loader over DATASET, to set beside `dlk bench-stream` on the
same dataset and device (tests/bench/python_loader.sh runs both).

    python3 tests/bench/python_loader.py DATASET --device cuda:0 \
        [--mode dlk|torch|both] [--epochs 4] [--batch-size 256] [--workers N]
        [--no-verify]

The loaders' defaults otherwise (workers as the library picks them, every
part's checksum checked), as a training script calls them.

One JSON line per mode: each epoch's samples/s (the clock read after the
device finished the epoch's work: one torch.cuda.synchronize per epoch,
none per batch) and the steady rate (the best epoch after the first, as
bench-stream reports it); and the host time per batch spent in the
binding: us_per_batch, the loop's whole time per batch (next(), the
tensors' conversion and any wait for the loader)."""
import argparse
import json
import sys
import time

import dlk

ap = argparse.ArgumentParser()
ap.add_argument("dataset")
ap.add_argument("--device", default="cuda:0")
ap.add_argument("--mode", default="both", choices=["dlk", "torch", "both"])
ap.add_argument("--epochs", type=int, default=4)
ap.add_argument("--batch-size", type=int, default=256)
ap.add_argument("--workers", type=int, default=0)
ap.add_argument("--no-shuffle", action="store_true")
ap.add_argument("--no-verify", action="store_true")
a = ap.parse_args()

sync = lambda: None
modes = ["dlk", "torch"] if a.mode == "both" else [a.mode]
try:
    import torch
    import dlk.torch
    if a.device.startswith("cuda"):
        sync = torch.cuda.synchronize
except ImportError:
    if a.mode != "dlk" and (a.mode == "torch" or a.device != "cpu"):
        raise
    modes = ["dlk"]
    print("no torch: dlk.Loader alone", file=sys.stderr)

for mode in modes:
    make = dlk.torch.loader if mode == "torch" else dlk.Loader
    l = make(a.dataset, device=a.device, batch_size=a.batch_size,
             shuffle=not a.no_shuffle, epochs=a.epochs,
             workers=a.workers or None, verify=not a.no_verify)
    epochs, t_open = [], time.perf_counter()
    first = None
    for e in range(a.epochs):
        t0, n, nb = time.perf_counter(), 0, 0
        for b in l:
            if first is None:
                first = time.perf_counter() - t_open
            x = b["images"]          # a dlk.Tensor or a torch.Tensor
            n += len(b.pad) - int(b.pad.sum())
            nb += 1
        sync()
        dt = time.perf_counter() - t0
        epochs.append({"seconds": dt, "samples_per_s": n / dt,
                       "batches": nb, "us_per_batch": dt / max(nb, 1) * 1e6})
    steady = max(e["samples_per_s"] for e in (epochs[1:] or epochs))
    print(json.dumps({"loader": "dlk.torch.loader" if mode == "torch"
                      else "dlk.Loader", "device": a.device,
                      "samples_per_s": steady, "first_batch_s": first,
                      "epochs": epochs}), flush=True)
    l.close()
